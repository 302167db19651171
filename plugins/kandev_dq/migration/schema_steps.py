"""Migration steps 1–4: ``kandev_meta``, creating the table in the amended shape (AC-17),
amending a pre-amendment table (AC-33, AC-33a) and writing ``execution_since`` once the end
state is observed (AC-33b)."""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import (
    EXECUTION_SINCE,
    now_instant,
)
from kandev_dq.migration.report import STEP_META, MigrationError, Outcome, Status
from kandev_dq.migration.transactions import MigrationRun, transaction, write_key
from kandev_dq.sql.keys import read_keys
from kandev_dq.store.observe import SubagentsShape, observe_subagents

# --- step 1: kandev_meta ---------------------------------------------------------------------


def ensure_kandev_meta(ctx: MigrationRun) -> Outcome:
    with transaction(ctx) as conn:
        if sa.inspect(conn).has_table(schema.kandev_meta.name):
            return Outcome(Status.ALREADY_DONE)
        schema.kandev_meta.create(conn)
    return Outcome(Status.DONE, "created kandev_meta")


# --- step 2: create the table (AC-17) --------------------------------------------------------


def create_subagents_table(ctx: MigrationRun) -> Outcome:
    with transaction(ctx) as conn:
        if observe_subagents(conn).table_exists:
            return Outcome(Status.ALREADY_DONE)
        schema.create_subagents_table(conn, amended=True)
    return Outcome(Status.DONE, "created in the amended shape")


# --- step 3: amend a pre-amendment table (AC-33) ----------------------------------------------


def amend_subagents_table(ctx: MigrationRun) -> Outcome:
    with transaction(ctx) as conn:
        shape = observe_subagents(conn)
        if not shape.table_exists:
            return Outcome(Status.SKIPPED, f"{schema.SUBAGENTS} does not exist")
        if shape.end_state_holds:
            return Outcome(Status.ALREADY_DONE)
        if shape.misshapen_indexes:
            raise MigrationError("; ".join(shape.problems()))
        if shape.clauses_1_to_3_hold:
            how = "created missing index(es) " + ", ".join(shape.missing_indexes)
        elif ctx.dialect == "sqlite":
            rows = rebuild_sqlite_table(conn, shape)
            how = f"rebuilt the table in the amended shape ({rows} row(s) kept)"
        else:
            amend_postgresql_table(conn, shape)
            how = "added agent_execution_id and replaced the two-column UNIQUE"
        create_missing_indexes(conn)
        after = observe_subagents(conn)
        if not after.end_state_holds:
            raise MigrationError("end state not reached: " + "; ".join(after.problems()))
    return Outcome(Status.DONE, how)


def create_missing_indexes(conn: sa.Connection) -> list[str]:
    """Create the secondary indexes a fresh store has, where absent (names from the schema)."""
    missing = observe_subagents(conn).missing_indexes
    created = []
    for index in sorted(schema.subagents.indexes, key=lambda i: i.name):
        if index.name in missing:
            index.create(conn)
            created.append(index.name)
    return created


def _rebuild_table() -> sa.Table:
    """The amended table under :data:`schema.REBUILD_TABLE`, its FK resolvable, without indexes."""
    meta = sa.MetaData()
    for base in schema.BASE_TABLES:
        base.to_metadata(meta)
    return schema.subagents.to_metadata(meta, name=schema.REBUILD_TABLE)


def rebuild_sqlite_table(conn: sa.Connection, shape: SubagentsShape) -> int:
    """SQLite (AC-33): new table, copy every row verbatim, drop the old, rename, index.

    Runs inside the caller's transaction, so a failure anywhere leaves the old table whole and
    no rebuild table behind (AC-33a). Values are copied by SQLite itself (``INSERT … SELECT``),
    so timestamp text stays byte-identical. Returns the number of rows copied.
    """
    amended = [c.name for c in schema.subagents.columns]
    extra = sorted(set(shape.columns) - set(amended))
    if extra:
        raise MigrationError(
            f"{schema.SUBAGENTS} has column(s) the amended shape lacks ({', '.join(extra)}); "
            "refusing to drop them"
        )
    execution = schema.subagents.c.agent_execution_id.name
    copied = [c for c in amended if c in shape.columns and c != execution]
    old = sa.table(schema.SUBAGENTS, *(sa.column(c) for c in shape.columns))
    if shape.has_execution_column:  # a half-amended table: keep real ids, fill the gaps
        kept = sa.func.nullif(old.c[execution], "")
        exec_value = sa.func.coalesce(kept, schema.UNKNOWN_EXECUTION)
    else:
        exec_value = sa.literal(schema.UNKNOWN_EXECUTION, sa.Text)
    new = _rebuild_table()
    conn.execute(sa.schema.DropTable(new, if_exists=True))
    conn.execute(sa.schema.CreateTable(new))
    conn.execute(
        sa.insert(new).from_select(
            [*copied, execution], sa.select(*(old.c[c] for c in copied), exec_value)
        )
    )
    count_old = conn.execute(sa.select(sa.func.count()).select_from(old)).scalar_one()
    count_new = conn.execute(sa.select(sa.func.count()).select_from(new)).scalar_one()
    if count_old != count_new:
        raise MigrationError(f"copied {count_new} of {count_old} row(s)")
    quote = conn.dialect.identifier_preparer.quote
    conn.exec_driver_sql(f"DROP TABLE {quote(schema.SUBAGENTS)}")
    rebuilt, live = quote(schema.REBUILD_TABLE), quote(schema.SUBAGENTS)
    conn.exec_driver_sql(f"ALTER TABLE {rebuilt} RENAME TO {live}")
    for index in sorted(schema.subagents.indexes, key=lambda i: i.name):
        index.create(conn)
    return count_new


_TWO_COLUMN_UNIQUE_NAMES = sa.text(
    """
    SELECT con.conname
    FROM pg_catalog.pg_constraint AS con
    WHERE con.conrelid = to_regclass(:table_name)
      AND con.contype = 'u'
      AND ARRAY(
            SELECT att.attname::text
            FROM pg_catalog.pg_attribute AS att
            WHERE att.attrelid = con.conrelid AND att.attnum = ANY (con.conkey)
            ORDER BY att.attname::text COLLATE "C"
          ) = CAST(:column_set AS text[])
    ORDER BY con.conname
    """
)


def two_column_unique_names(conn: sa.Connection) -> list[str]:
    """PostgreSQL: names of UNIQUE constraints over exactly {task_session_id, tool_call_id}.

    The name is auto-generated upstream, so it is looked up by column set (CONTRACT §1).
    """
    column_set = sorted(schema.PRE_AMENDMENT_UNIQUE)
    rows = conn.execute(
        _TWO_COLUMN_UNIQUE_NAMES, {"table_name": schema.SUBAGENTS, "column_set": column_set}
    )
    return list(rows.scalars())


def amend_postgresql_table(conn: sa.Connection, shape: SubagentsShape) -> None:
    """PostgreSQL (AC-33): add the column, swap the UNIQUE; inside the caller's transaction."""
    quote = conn.dialect.identifier_preparer.quote
    table = quote(schema.SUBAGENTS)
    column = quote("agent_execution_id")
    unknown = schema.UNKNOWN_EXECUTION
    if not shape.has_execution_column:
        conn.exec_driver_sql(
            f"ALTER TABLE {table} ADD COLUMN {column} TEXT NOT NULL DEFAULT '{unknown}'"
        )
    else:  # a half-amended table: fill the gaps, then default and NOT NULL
        conn.exec_driver_sql(
            f"UPDATE {table} SET {column} = '{unknown}' WHERE {column} IS NULL OR {column} = ''"
        )
        conn.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT '{unknown}'")
        conn.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN {column} SET NOT NULL")
    for name in two_column_unique_names(conn):
        conn.exec_driver_sql(f"ALTER TABLE {table} DROP CONSTRAINT {quote(name)}")
    two = frozenset(schema.PRE_AMENDMENT_UNIQUE)
    for name, cols in shape.unique_indexes.items():
        if frozenset(cols) == two and len(cols) == 2:
            conn.exec_driver_sql(f"DROP INDEX {quote(name)}")
    if not shape.has_amended_unique:
        # Unnamed, so PostgreSQL names it exactly as it does in a fresh store's CREATE TABLE.
        cols = ", ".join(quote(c) for c in schema.AMENDED_UNIQUE)
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD UNIQUE ({cols})")


# --- step 4: execution_since (AC-33b) ---------------------------------------------------------


def write_execution_since(ctx: MigrationRun) -> Outcome:
    if ctx.failed(STEP_META):
        return Outcome(Status.SKIPPED, "kandev_meta is unavailable")
    with transaction(ctx) as conn:
        shape = observe_subagents(conn)
        if not shape.clauses_1_to_3_hold:
            why = "; ".join(shape.problems())
            return Outcome(Status.SKIPPED, f"AC-33 clauses 1-3 not observed: {why}")
        if read_keys(conn)[EXECUTION_SINCE] is not None:
            return Outcome(Status.ALREADY_DONE)
        value = now_instant().rfc3339nano()  # the instant the end state was observed to hold
        write_key(conn, EXECUTION_SINCE, value)
    return Outcome(Status.DONE, f"{EXECUTION_SINCE}={value}", {"value": value})
