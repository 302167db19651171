"""The defects scenarios apply to a built store: keys, rows, messages and constraints."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.errors import KandevDqError
from kandev_dq.lab.scenarios.baseline import next_free
from kandev_dq.lab.scenarios.rows import SECOND, insert_rows, stored_form, transaction, writing
from kandev_dq.lab.storebuilder import StoreBuilder


def set_key(engine: sa.Engine, key: str, value: str | None) -> None:
    """Rewrite (or, with None, delete) an activation key, as a defective writer does."""
    StoreBuilder(engine).set_key(key, value)


def update_rows(engine: sa.Engine, tool_call_id: str | None, source: str, /, **values: Any) -> None:
    """Change rows of one source (one tool call, or all with ``tool_call_id=None``)."""
    t = schema.subagents
    where = t.c.source == source
    if tool_call_id is not None:
        where = sa.and_(where, t.c.tool_call_id == tool_call_id)
    with writing(engine) as conn:
        stamps = {c.name for c in t.columns if isinstance(c.type, schema.StoredTimestamp)}
        shaped = {
            k: (stored_form(conn, v) if k in stamps and v is not None else v)
            for k, v in values.items()
        }
        conn.execute(t.update().where(where).values(**shaped))


def stored_row(engine: sa.Engine, tool_call_id: str, source: str = "live") -> dict[str, Any]:
    t = schema.subagents
    with engine.connect() as conn:
        found = (
            conn.execute(sa.select(t).where(t.c.tool_call_id == tool_call_id, t.c.source == source))
            .mappings()
            .one()
        )
    return dict(found)


def delete_messages(engine: sa.Engine, *message_ids: str) -> None:
    m = schema.task_session_messages
    with writing(engine) as conn:
        conn.execute(m.delete().where(m.c.id.in_(message_ids)))


def add_messages(engine: sa.Engine, *messages: dict[str, Any]) -> None:
    with writing(engine) as conn:
        insert_rows(conn, schema.task_session_messages, list(messages))


def _rebuild_sqlite(conn: sa.Connection, edit: Callable[[str], str]) -> None:
    """SQLite has no ALTER for constraints: rebuild the table from its DDL as ``edit`` changes
    it, keeping every row and the secondary indexes."""
    temp = f"{schema.SUBAGENTS}__scenario"
    ddl = str(sa.schema.CreateTable(schema.subagents).compile(dialect=conn.dialect))
    edited = edit(ddl)
    if edited == ddl:
        raise KandevDqError("the rebuild edit changed nothing")
    conn.exec_driver_sql(
        edited.replace(f"CREATE TABLE {schema.SUBAGENTS} ", f"CREATE TABLE {temp} ", 1)
    )
    conn.exec_driver_sql(f"INSERT INTO {temp} SELECT * FROM {schema.SUBAGENTS}")
    conn.exec_driver_sql(f"DROP TABLE {schema.SUBAGENTS}")
    conn.exec_driver_sql(f"ALTER TABLE {temp} RENAME TO {schema.SUBAGENTS}")
    for index in sorted(schema.subagents.indexes, key=lambda i: i.name):
        index.create(conn)


_PG_CONSTRAINTS = sa.text(
    """
    SELECT con.conname, con.contype,
           ARRAY(SELECT att.attname::text FROM pg_catalog.pg_attribute AS att
                 WHERE att.attrelid = con.conrelid AND att.attnum = ANY (con.conkey)
                 ORDER BY att.attname::text COLLATE "C") AS columns
    FROM pg_catalog.pg_constraint AS con
    WHERE con.conrelid = to_regclass(:table_name)
    """
)


def _pg_drop_constraint(conn: sa.Connection, contype: str, columns: tuple[str, ...]) -> None:
    """Drop a PostgreSQL constraint found by kind and column set (names are auto-generated)."""
    wanted = sorted(columns)
    rows = conn.execute(_PG_CONSTRAINTS, {"table_name": schema.SUBAGENTS}).all()
    names = [r.conname for r in rows if r.contype == contype and sorted(r.columns) == wanted]
    if not names:
        raise KandevDqError(f"no {contype!r} constraint on {wanted}")
    quote = conn.dialect.identifier_preparer.quote
    for name in names:
        conn.exec_driver_sql(f"ALTER TABLE {schema.SUBAGENTS} DROP CONSTRAINT {quote(name)}")


_AMENDED_UNIQUE_DDL = "UNIQUE (task_session_id, agent_execution_id, tool_call_id)"
_SESSION_FK_DDL = re.compile(r",\s*FOREIGN KEY\s*\(task_session_id\)[^\n]*")


def drop_execution_not_null(engine: sa.Engine) -> None:
    with writing(engine) as conn:
        if conn.dialect.name == "sqlite":
            _rebuild_sqlite(
                conn,
                lambda ddl: ddl.replace(
                    "agent_execution_id TEXT DEFAULT 'unknown' NOT NULL",
                    "agent_execution_id TEXT DEFAULT 'unknown'",
                ),
            )
        else:
            conn.exec_driver_sql(
                f"ALTER TABLE {schema.SUBAGENTS} ALTER COLUMN agent_execution_id DROP NOT NULL"
            )


def drop_three_column_unique(engine: sa.Engine) -> None:
    with writing(engine) as conn:
        if conn.dialect.name == "sqlite":
            _rebuild_sqlite(
                conn, lambda ddl: re.sub(r",\s*" + re.escape(_AMENDED_UNIQUE_DDL), "", ddl)
            )
        else:
            _pg_drop_constraint(conn, "u", schema.AMENDED_UNIQUE)


def add_two_column_unique(engine: sa.Engine) -> None:
    two = ", ".join(schema.PRE_AMENDMENT_UNIQUE)
    with writing(engine) as conn:
        if conn.dialect.name == "sqlite":
            _rebuild_sqlite(
                conn,
                lambda ddl: ddl.replace(
                    _AMENDED_UNIQUE_DDL, f"{_AMENDED_UNIQUE_DDL}, UNIQUE ({two})"
                ),
            )
        else:
            conn.exec_driver_sql(f"ALTER TABLE {schema.SUBAGENTS} ADD UNIQUE ({two})")


def delete_session_unenforced(engine: sa.Engine, session_id: str) -> None:
    """Delete a session while the subagents' foreign key is not enforced, every other table's
    cascade still applying: SQLite with ``foreign_keys`` off (its per-connection default),
    PostgreSQL with the constraint dropped and re-added ``NOT VALID`` (old rows unchecked)."""
    sessions = schema.task_sessions
    turns, messages = schema.task_session_turns, schema.task_session_messages
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys = OFF")  # only outside a transaction
            try:
                with transaction(conn):
                    conn.execute(messages.delete().where(messages.c.task_session_id == session_id))
                    conn.execute(turns.delete().where(turns.c.task_session_id == session_id))
                    conn.execute(sessions.delete().where(sessions.c.id == session_id))
            finally:
                conn.exec_driver_sql("PRAGMA foreign_keys = ON")
            return
        with transaction(conn):
            _pg_drop_constraint(conn, "f", ("task_session_id",))
            conn.execute(sessions.delete().where(sessions.c.id == session_id))
            conn.exec_driver_sql(
                f"ALTER TABLE {schema.SUBAGENTS} ADD FOREIGN KEY (task_session_id) "
                "REFERENCES task_sessions (id) ON DELETE CASCADE NOT VALID"
            )


def drop_session_foreign_key(engine: sa.Engine) -> None:
    with writing(engine) as conn:
        if conn.dialect.name == "sqlite":
            _rebuild_sqlite(conn, lambda ddl: _SESSION_FK_DDL.sub("", ddl))
        else:
            _pg_drop_constraint(conn, "f", ("task_session_id",))


def add_after_live(engine: sa.Engine, *messages: Callable[[datetime], dict[str, Any]]) -> None:
    start = next_free(engine)
    add_messages(engine, *(make(start + n * SECOND) for n, make in enumerate(messages)))
