"""The subagent-context migration runner: CONTRACT §3–§5, on SQLite and PostgreSQL.

Every run performs the same steps, in this order (AC-33c):

1. ``kandev_meta`` — make sure the key/value table exists.
2. ``create_task_session_subagents`` — a store that predates the feature gets the table in the
   amended shape (AC-17).
3. ``amend_task_session_subagents`` — a pre-amendment table is upgraded to the amended shape
   (AC-33): on SQLite a table rebuild in one transaction, on PostgreSQL ``ADD COLUMN`` plus
   swapping the two-column UNIQUE (looked up by its column set) for the three-column one.
4. ``subagent_context_execution_since`` — written whenever AC-33 clauses 1–3 are *observed* in
   the live schema (AC-33b), never because a rebuild fired.
5. ``backfill_task_session_subagents`` — only once the AC-33 end state holds (clauses 1–4
   observed, ``execution_since`` present: AC-33c) and unless both backfill keys are present
   (AC-24d): one ``INSERT … SELECT`` (AC-21 … AC-23b) and both keys, in one transaction:
   ``MAX(created_at)`` first, then the insert, then ``capture_since`` sampled, then the keys.

Errors are swallowed as upstream's runner does (AC-20): a failing step is logged at WARNING as
``migration failed name=<step> error=<reason>``, the remaining steps follow the contract, and
the :class:`MigrationReport` says what happened. Two runs at once end like one run: SQLite
serialises each step with ``BEGIN IMMEDIATE`` (and re-checks inside it), PostgreSQL holds an
advisory lock for the whole run.

Test seams: every step is a module-level function looked up when it runs, so a test can
monkeypatch one to raise; or it can attach a ``before_cursor_execute`` listener to
``store.engine`` that raises on a matching statement.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import (
    ACTIVATION_KEYS,
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    Instant,
    now_instant,
    parse_stored,
    shown_key,
)
from kandev_dq.errors import ExitCode
from kandev_dq.sql import dialect
from kandev_dq.sql import messages as queries
from kandev_dq.sql.keys import read_keys
from kandev_dq.sql.mapping import (
    BACKFILL_COLUMNS,
    backfill_select,
    fenced,
    is_source,
    message_documents,
    qualifies,
    subagent_messages,
)
from kandev_dq.store.access import Store
from kandev_dq.store.observe import SubagentsShape, observe_subagents

log = logging.getLogger("kandev_dq.migration.runner")

STEP_META = "kandev_meta"
STEP_CREATE = "create_task_session_subagents"
STEP_AMEND = "amend_task_session_subagents"
STEP_EXECUTION_SINCE = "subagent_context_execution_since"
STEP_BACKFILL = "backfill_task_session_subagents"
STEP_LOCK = "migration_lock"
STEP_NAMES = (STEP_META, STEP_CREATE, STEP_AMEND, STEP_EXECUTION_SINCE, STEP_BACKFILL)
SHAPE_STEPS = (STEP_CREATE, STEP_AMEND)

#: How long a SQLite step waits for another writer (a concurrent run's backfill included).
BUSY_TIMEOUT_MS = 120_000
#: Attempts at the backfill transaction when PostgreSQL reports a serialization failure.
SERIALIZATION_ATTEMPTS = 3
WAITING_MESSAGE = "waiting: another migration holds the lock"


class MigrationError(Exception):
    """A step found the store in a state it must not change (the reason is one line)."""


class Status(enum.StrEnum):
    DONE = "done"
    ALREADY_DONE = "already_done"
    SKIPPED = "skipped"
    FAILED = "failed"
    WOULD_RUN = "would_run"  #: dry run only


@dataclass
class StepResult:
    name: str
    status: Status
    reason: str = ""
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "status": str(self.status),
            "reason": self.reason,
            **({"detail": self.detail} if self.detail else {}),
        }


@dataclass
class MigrationReport:
    """What a run did (or, with ``dry_run``, would do), step by step."""

    dialect: str
    dry_run: bool = False
    steps: list[StepResult] = field(default_factory=list)
    shape: SubagentsShape | None = None  #: at the end of the run (dry run: as it is now)
    keys: dict[str, str | None] = field(default_factory=dict)  #: at the end (None = absent)
    qualifying_messages: int | None = None  #: dry run: messages matching AC-21's predicate
    backfill_rows: int | None = None  #: rows inserted (dry run: rows that would be inserted)

    @property
    def ok(self) -> bool:
        """True when no step failed."""
        return all(step.status is not Status.FAILED for step in self.steps)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.FAILED

    def step(self, name: str) -> StepResult | None:
        return next((s for s in self.steps if s.name == name), None)

    def status(self, name: str) -> Status | None:
        found = self.step(name)
        return found.status if found else None

    def to_dict(self) -> dict:
        return {
            "dialect": self.dialect,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "steps": [s.to_dict() for s in self.steps],
            "shape": self.shape.to_dict() if self.shape else None,
            "keys": dict(self.keys),
            "qualifying_messages": self.qualifying_messages,
            "backfill_rows": self.backfill_rows,
        }

    def render(self) -> str:
        """The report as plain text."""
        title = "migration plan (dry run, nothing written)" if self.dry_run else "migration"
        lines = [f"{title} — {self.dialect}"]
        if self.shape is not None:
            lines.append(f"  {schema.SUBAGENTS}: {self.shape.describe()}")
        for key in ACTIVATION_KEYS:
            value = self.keys.get(key)
            shown = "(absent)" if value is None else ("'' (sentinel)" if value == "" else value)
            lines.append(f"  {key} = {shown}")
        if self.qualifying_messages is not None:
            lines.append(f"  qualifying messages: {self.qualifying_messages}")
        if self.backfill_rows is not None:
            verb = "would insert" if self.dry_run else "inserted"
            lines.append(f"  backfill {verb}: {self.backfill_rows} row(s)")
        width = max((len(s.name) for s in self.steps), default=0)
        for s in self.steps:
            reason = f"  {s.reason}" if s.reason else ""
            lines.append(f"  {s.name:<{width}}  {s.status}{reason}")
        return "\n".join(lines)


@dataclass
class Outcome:
    status: Status
    reason: str = ""
    detail: dict = field(default_factory=dict)


@dataclass
class MigrationRun:
    """One run's connection and what earlier steps found (passed to every step)."""

    conn: sa.Connection
    dialect: str
    results: dict[str, StepResult] = field(default_factory=dict)

    def failed(self, *names: str) -> list[str]:
        return [n for n in names if n in self.results and self.results[n].status is Status.FAILED]


# --- entry point -----------------------------------------------------------------------------


def run(store: Store, *, dry_run: bool = False) -> MigrationReport:
    """Run (or, with ``dry_run``, plan) the subagent-context migrations; never raises for a step.

    ``store`` is opened with ``open_store(target, read_only=False)`` (a dry run also works on a
    read-only store).
    """
    report = MigrationReport(dialect=store.dialect, dry_run=dry_run)
    if dry_run:
        _plan(store, report)
        log.info("%s", report.render())
        return report
    with store.engine.connect() as conn:
        ctx = MigrationRun(conn=conn, dialect=store.dialect)
        try:
            with _run_lock(ctx):
                _run_steps(ctx, report)
        except Exception as exc:  # noqa: BLE001 - the runner swallows errors (AC-20)
            _reset(conn)
            _record(report, ctx, StepResult(STEP_LOCK, Status.FAILED, _reason(exc)))
        try:
            with _reading(conn):
                report.shape = observe_subagents(conn)
                report.keys = {k: shown_key(v) for k, v in read_keys(conn).items()}
        except Exception as exc:  # noqa: BLE001 - the report is best effort after a failure
            log.warning("could not observe the end state: %s", _reason(exc))
    return report


def _run_steps(ctx: MigrationRun, report: MigrationReport) -> None:
    # Steps are looked up by name at call time so that tests can monkeypatch any of them.
    _attempt(report, ctx, STEP_META, lambda: ensure_kandev_meta(ctx))
    _attempt(report, ctx, STEP_CREATE, lambda: create_subagents_table(ctx))
    _attempt(report, ctx, STEP_AMEND, lambda: amend_subagents_table(ctx))
    _attempt(report, ctx, STEP_EXECUTION_SINCE, lambda: write_execution_since(ctx))
    _attempt(report, ctx, STEP_BACKFILL, lambda: backfill_subagents(ctx))
    backfill = report.step(STEP_BACKFILL)
    if backfill is not None and "rows" in backfill.detail:
        report.backfill_rows = backfill.detail["rows"]


def _attempt(
    report: MigrationReport, ctx: MigrationRun, name: str, step: Callable[[], Outcome]
) -> StepResult:
    try:
        outcome = step()
    except Exception as exc:  # noqa: BLE001 - swallowed and reported (AC-20)
        _reset(ctx.conn)
        result = StepResult(name, Status.FAILED, _reason(exc))
    else:
        result = StepResult(name, outcome.status, outcome.reason, outcome.detail)
    _record(report, ctx, result)
    return result


def _record(report: MigrationReport, ctx: MigrationRun, result: StepResult) -> None:
    report.steps.append(result)
    ctx.results[result.name] = result
    if result.status is Status.FAILED:
        log.warning("migration failed name=%s error=%s", result.name, result.reason)
    else:
        log.info("migration %s name=%s %s", result.status, result.name, result.reason)


def _reason(exc: BaseException) -> str:
    """One line: the driver's message when there is one, never the statement or parameters."""
    inner = getattr(exc, "orig", None) or exc
    lines = str(inner).strip().splitlines()
    text = lines[0] if lines else ""
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__


def _reset(conn: sa.Connection) -> None:
    with contextlib.suppress(Exception):  # a broken connection is reported by the next step
        conn.rollback()


# --- transactions and the run lock -----------------------------------------------------------


@contextmanager
def _reading(conn: sa.Connection) -> Iterator[sa.Connection]:
    """Reads outside a write transaction; whatever SQLAlchemy began is rolled back after."""
    try:
        yield conn
    finally:
        conn.rollback()


@contextmanager
def _transaction(ctx: MigrationRun, *, snapshot: bool = False) -> Iterator[sa.Connection]:
    """One write transaction: SQLite ``BEGIN IMMEDIATE``; PostgreSQL optionally REPEATABLE READ.

    ``snapshot`` makes every statement of a PostgreSQL transaction read one snapshot (the
    backfill's MAX and its INSERT, AC-24d); SQLite's ``BEGIN IMMEDIATE`` already excludes every
    other writer for the whole transaction.
    """
    conn = ctx.conn
    conn.rollback()
    if ctx.dialect == "sqlite":
        _begin_immediate(conn)
        try:
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()
        return
    if snapshot:
        conn.execution_options(isolation_level="REPEATABLE READ")
    try:
        with conn.begin():
            yield conn
    finally:
        if snapshot:
            _reset(conn)
            conn.execution_options(isolation_level=conn.default_isolation_level)


def _begin_immediate(conn: sa.Connection) -> None:
    conn.exec_driver_sql("PRAGMA busy_timeout = 0")
    try:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        return
    except sa.exc.OperationalError as exc:
        if not _is_busy(exc):
            raise
        conn.rollback()
    finally:
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    log.info(WAITING_MESSAGE)
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def _is_busy(exc: sa.exc.DBAPIError) -> bool:
    text = str(exc.orig).lower()
    return "locked" in text or "busy" in text


def advisory_lock_key(conn: sa.Connection) -> int:
    """The PostgreSQL advisory lock a run holds: one per database and schema (search_path)."""
    database, schema_name = conn.execute(
        sa.select(sa.func.current_database(), sa.func.current_schema())
    ).one()
    digest = hashlib.blake2b(
        f"kandev-dq migrate\0{database}\0{schema_name}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def _run_lock(ctx: MigrationRun) -> Iterator[None]:
    """PostgreSQL: hold an advisory lock for the run. SQLite: each step serialises itself."""
    conn = ctx.conn
    if ctx.dialect == "sqlite":
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.rollback()
        yield
        return
    key = advisory_lock_key(conn)
    param = sa.bindparam("lock_key", key, type_=sa.BigInteger)
    got = conn.execute(sa.select(sa.func.pg_try_advisory_lock(param))).scalar()
    conn.commit()
    if not got:
        log.info(WAITING_MESSAGE)
        conn.execute(sa.select(sa.func.pg_advisory_lock(param)))
        conn.commit()
    try:
        yield
    finally:
        _reset(conn)
        try:
            conn.execute(sa.select(sa.func.pg_advisory_unlock(param)))
            conn.commit()
        except Exception:  # noqa: BLE001 - the lock dies with the connection anyway
            _reset(conn)


# --- keys ------------------------------------------------------------------------------------


#: Keep an INSERT's rowcount (SQLAlchemy otherwise only guarantees it for UPDATE/DELETE).
_ROWCOUNT = {"preserve_rowcount": True}


def _insert(table: sa.Table, dialect_name: str):
    return (sqlite_dialect if dialect_name == "sqlite" else pg_dialect).insert(table)


def write_key(conn: sa.Connection, key: str, value: str) -> bool:
    """``INSERT … ON CONFLICT (key) DO NOTHING`` (write-once, AC-24); True if it was written."""
    meta = schema.kandev_meta
    stmt = _insert(meta, conn.dialect.name).values(key=key, value=value)
    stmt = stmt.on_conflict_do_nothing(index_elements=[meta.c.key])
    return conn.execute(stmt, execution_options=_ROWCOUNT).rowcount == 1


# --- step 1: kandev_meta ---------------------------------------------------------------------


def ensure_kandev_meta(ctx: MigrationRun) -> Outcome:
    with _transaction(ctx) as conn:
        if sa.inspect(conn).has_table(schema.kandev_meta.name):
            return Outcome(Status.ALREADY_DONE)
        schema.kandev_meta.create(conn)
    return Outcome(Status.DONE, "created kandev_meta")


# --- step 2: create the table (AC-17) --------------------------------------------------------


def create_subagents_table(ctx: MigrationRun) -> Outcome:
    with _transaction(ctx) as conn:
        if observe_subagents(conn).table_exists:
            return Outcome(Status.ALREADY_DONE)
        schema.create_subagents_table(conn, amended=True)
    return Outcome(Status.DONE, "created in the amended shape")


# --- step 3: amend a pre-amendment table (AC-33) ----------------------------------------------


def amend_subagents_table(ctx: MigrationRun) -> Outcome:
    with _transaction(ctx) as conn:
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
    with _transaction(ctx) as conn:
        shape = observe_subagents(conn)
        if not shape.clauses_1_to_3_hold:
            why = "; ".join(shape.problems())
            return Outcome(Status.SKIPPED, f"AC-33 clauses 1-3 not observed: {why}")
        if read_keys(conn)[EXECUTION_SINCE] is not None:
            return Outcome(Status.ALREADY_DONE)
        value = now_instant().rfc3339nano()  # the instant the end state was observed to hold
        write_key(conn, EXECUTION_SINCE, value)
    return Outcome(Status.DONE, f"{EXECUTION_SINCE}={value}", {"value": value})


# --- step 5: the backfill (AC-21 … AC-24) -----------------------------------------------------


def backfill_subagents(ctx: MigrationRun) -> Outcome:
    if ctx.failed(STEP_META):
        return Outcome(Status.SKIPPED, "kandev_meta is unavailable")
    failed = ctx.failed(*SHAPE_STEPS, STEP_EXECUTION_SINCE)
    if failed:
        return Outcome(Status.SKIPPED, f"AC-33c: {', '.join(failed)} failed")
    for attempt in range(1, SERIALIZATION_ATTEMPTS + 1):
        try:
            return _backfill_once(ctx)
        except sa.exc.DBAPIError as exc:
            retry = getattr(exc.orig, "sqlstate", None) == "40001"
            if not retry or attempt == SERIALIZATION_ATTEMPTS:
                raise
            log.info("backfill serialization failure, retrying (attempt %d)", attempt + 1)
    raise AssertionError("unreachable")


def _backfill_once(ctx: MigrationRun) -> Outcome:
    with _transaction(ctx, snapshot=True) as conn:
        keys = read_keys(conn)
        if keys[CAPTURE_SINCE] is not None and keys[BACKFILL_THROUGH] is not None:
            return Outcome(Status.ALREADY_DONE)  # AC-24d: the guard is "both keys present"
        # AC-33c: the end state is the observed schema (clauses 1-4) plus its key (clause 6).
        shape = observe_subagents(conn)
        if not shape.end_state_holds:
            why = "; ".join(shape.problems())
            return Outcome(Status.SKIPPED, f"AC-33c: the end state does not hold: {why}")
        if keys[EXECUTION_SINCE] is None:
            return Outcome(Status.SKIPPED, f"AC-33c: {EXECUTION_SINCE} is absent")
        # AC-23b: metadata that is not JSON reads as {} (a message of no kind, skipped). On
        # PostgreSQL such a row would abort the MAX: it is then located in this transaction
        # (same snapshot) and excluded from the MAX and the INSERT alike.
        unreadable = queries.Unreadable()
        preflight = queries.tolerating_unreadable_metadata(  # MAX first, and what to refuse
            conn, lambda c: c.execute(backfill_preflight_statement(ctx.dialect)).one(), unreadable
        )
        if preflight.unrecognised:
            refuse_unreadable_timestamps(conn)  # names the rows and fails the step
        high = preflight.high
        with queries.reading_unreadable_as_empty(unreadable):
            insert = backfill_statement(ctx.dialect)
        rows = conn.execute(insert, execution_options=_ROWCOUNT).rowcount
        capture = now_instant()  # sampled after the INSERT completed, before the key writes
        through = backfill_through_value(high)
        wrote_capture = write_key(conn, CAPTURE_SINCE, capture.rfc3339nano())
        wrote_through = write_key(conn, BACKFILL_THROUGH, through)
        skipped = (
            unreadable.ids
            if unreadable.ids is not None
            else queries.locate_unreadable_metadata(conn)  # SQLite read them as {} silently
            if ctx.dialect == "sqlite" and preflight.unreadable
            else ()  # PostgreSQL parsed every document without an error: there are none
        )
    written = {CAPTURE_SINCE: wrote_capture, BACKFILL_THROUGH: wrote_through}
    parts = [f"inserted {rows} row(s)"]
    parts += [f"{'wrote' if w else 'kept existing'} {k}" for k, w in written.items()]
    detail = {
        "rows": rows,
        "capture_since": capture.rfc3339nano(),
        "backfill_through": through,
        "written": written,
    }
    if skipped:
        shown = ", ".join(skipped[:5]) + (", ..." if len(skipped) > 5 else "")
        parts.append(
            f"{len(skipped)} message(s) with metadata that is not JSON read as {{}} and "
            f"skipped (AC-23b): {shown}"
        )
        detail["unreadable_metadata"] = {"count": len(skipped), "ids": list(skipped[:20])}
        log.warning(
            "backfill: %d message(s) hold metadata that is not JSON; read as {} and skipped "
            "(AC-23b): %s",
            len(skipped),
            shown,
        )
    return Outcome(Status.DONE, "; ".join(parts), detail)


def refuse_unreadable_timestamps(conn: sa.Connection) -> None:
    """SQLite: refuse to backfill from a qualifying message whose created_at or updated_at is
    text the exact-instant construct cannot read (``30/07/2026``, a ``+02:00`` offset, …).

    Such a value would be copied into ``observed_at`` / ``settled_at`` and could not yield an
    exact ``backfill_through`` (AC-24 point 1, AC-24e), so the step fails naming the rows, no
    key is written (AC-24a) and the next run retries once they are fixed. PostgreSQL columns
    hold typed values: nothing to check.
    """
    if conn.dialect.name != "sqlite":
        return
    sm = subagent_messages("msg")
    unreadable = sa.or_(
        sa.not_(dialect.recognised_utc_text(sm.c.created_at)),
        sa.not_(dialect.recognised_utc_text(sm.c.updated_at)),
    )
    stmt = (
        sa.select(
            sm.c.id,
            sa.cast(sm.c.created_at, sa.Text).label("created_at"),
            sa.cast(sm.c.updated_at, sa.Text).label("updated_at"),
        )
        .where(qualifies(sm), unreadable)
        .order_by(sm.c.id)
    )
    count, sample = queries.count_and_sample(conn, stmt, limit=3)
    if count:
        shown = "; ".join(
            f"id {row['id']!r} created_at {str(row['created_at'])[:40]!r} "
            f"updated_at {str(row['updated_at'])[:40]!r}"
            for row in sample
        )
        raise MigrationError(
            f"{count} qualifying message(s) hold a timestamp in no recognised UTC text form "
            f"(e.g. {shown}); fix them and run again"
        )


def backfill_through_value(high: str | datetime | None) -> str:
    """RFC3339Nano of the source MAX(created_at), or ``''`` when nothing matched (AC-24f)."""
    if high is None:
        return ""
    return Instant.from_datetime(parse_stored(high)).rfc3339nano()


# --- the backfill's statements ----------------------------------------------------------------


def backfill_statement(dialect_name: str):
    """AC-21 … AC-22: one ``INSERT … SELECT`` with ``ON CONFLICT (…) DO NOTHING``, no batching."""
    t = schema.subagents
    rows = backfill_select(dialect_name)
    stmt = _insert(t, dialect_name).from_select(list(BACKFILL_COLUMNS), rows)
    return stmt.on_conflict_do_nothing(index_elements=[t.c[c] for c in schema.AMENDED_UNIQUE])


def backfill_preflight_statement(dialect_name: str) -> sa.Select:
    """The backfill's one read of the messages before its INSERT (one scan, one parse each).

    ``high``: MAX(created_at) over AC-21's source predicate, as :func:`backfill_through_statement`
    reads it (AC-24 point 1). SQLite only (0 on PostgreSQL, whose columns are typed and whose
    unparsable metadata aborts the statement instead): ``unrecognised``, the qualifying
    messages :func:`refuse_unreadable_timestamps` refuses, and ``unreadable``, the messages
    whose metadata is not JSON (:func:`kandev_dq.sql.messages.locate_unreadable_metadata` names
    them only when there are any). The aggregates read the predicate from a
    :func:`~kandev_dq.sql.mapping.fenced` subquery: PostgreSQL evaluates it once per message.
    """
    m = schema.task_session_messages
    sqlite = dialect_name == "sqlite"
    unreadable = (queries.unreadable_sqlite(m.c.metadata).label("unreadable"),) if sqlite else ()
    msg = message_documents("msg", extra=unreadable)
    flagged = sa.select(
        sa.case((is_source(msg), 1), else_=0).label("source"),
        msg.c.created_at,
        msg.c.updated_at,
        *([msg.c.unreadable] if sqlite else []),
    )
    f = fenced(flagged).subquery("flagged").c

    def total(condition) -> sa.ColumnElement:
        return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)

    zero = sa.literal(0)
    unrecognised = sa.or_(
        sa.not_(dialect.recognised_utc_text(f.created_at)),
        sa.not_(dialect.recognised_utc_text(f.updated_at)),
    )
    return sa.select(
        sa.func.max(sa.case((f.source == 1, dialect.utc_instant(f.created_at)))).label("high"),
        (total(sa.and_(f.source == 1, unrecognised)) if sqlite else zero).label("unrecognised"),
        (total(f.unreadable == 1) if sqlite else zero).label("unreadable"),
    )


def backfill_through_statement(dialect_name: str) -> sa.Select:
    """MAX(created_at) over AC-21's source predicate, as an exact instant (AC-24 point 1)."""
    sm = subagent_messages("msg")
    return sa.select(sa.func.max(dialect.utc_instant(sm.c.created_at))).where(qualifies(sm))


def _qualifying_count_statement(dialect_name: str) -> sa.Select:
    sm = subagent_messages("msg")
    return sa.select(sa.func.count()).where(qualifies(sm))


def _would_insert_statement(dialect_name: str, shape: SubagentsShape) -> sa.Select:
    """Rows the backfill would insert: winners whose key has no 'unknown' row after AC-33."""
    candidates = backfill_select(dialect_name).subquery("candidate")
    if not shape.table_exists:
        return sa.select(sa.func.count()).select_from(candidates)
    live = sa.table(
        schema.SUBAGENTS,
        *(sa.column(c) for c in ("task_session_id", "tool_call_id", "agent_execution_id")),
    )
    same_key = sa.and_(
        live.c.task_session_id == candidates.c.task_session_id,
        live.c.tool_call_id == candidates.c.tool_call_id,
    )
    if shape.has_execution_column:
        # Rows with NULL/'' ids become 'unknown' when a half-amended table is completed.
        same_key = sa.and_(
            same_key,
            sa.func.coalesce(sa.func.nullif(live.c.agent_execution_id, ""), "unknown")
            == schema.UNKNOWN_EXECUTION,
        )
    exists = sa.exists(sa.select(sa.literal(1)).select_from(live).where(same_key))
    return sa.select(sa.func.count()).select_from(candidates).where(~exists)


# --- dry run ---------------------------------------------------------------------------------


def _plan(store: Store, report: MigrationReport) -> None:
    """What a run would do, read in one snapshot; writes nothing."""
    with store.snapshot() as conn:
        has_meta = sa.inspect(conn).has_table(schema.kandev_meta.name)
        shape = observe_subagents(conn)
        keys = read_keys(conn)
        report.shape, report.keys = shape, {k: shown_key(v) for k, v in keys.items()}
        unreadable = queries.Unreadable()  # AC-23b, as the backfill itself reads them
        report.qualifying_messages = queries.tolerating_unreadable_metadata(
            conn,
            lambda c: c.execute(_qualifying_count_statement(store.dialect)).scalar_one(),
            unreadable,
        )
        backfill_due = keys[CAPTURE_SINCE] is None or keys[BACKFILL_THROUGH] is None
        report.backfill_rows = (
            queries.tolerating_unreadable_metadata(
                conn,
                lambda c: c.execute(_would_insert_statement(store.dialect, shape)).scalar_one(),
                unreadable,
            )
            if backfill_due
            else 0
        )

    def add(name: str, status: Status, reason: str = "") -> None:
        report.steps.append(StepResult(name, status, reason))

    add(STEP_META, Status.ALREADY_DONE if has_meta else Status.WOULD_RUN)
    if shape.table_exists:
        add(STEP_CREATE, Status.ALREADY_DONE)
    else:
        add(STEP_CREATE, Status.WOULD_RUN, "create in the amended shape")
    if not shape.table_exists:
        add(STEP_AMEND, Status.SKIPPED, "the table would be created amended")
    elif shape.end_state_holds:
        add(STEP_AMEND, Status.ALREADY_DONE)
    else:
        how = "rebuild the table" if store.dialect == "sqlite" else "alter the table"
        add(STEP_AMEND, Status.WOULD_RUN, f"{how}: " + "; ".join(shape.problems()))
    if keys[EXECUTION_SINCE] is not None:
        add(STEP_EXECUTION_SINCE, Status.ALREADY_DONE)
    else:
        add(STEP_EXECUTION_SINCE, Status.WOULD_RUN, "if AC-33 clauses 1-3 are then observed")
    if backfill_due:
        missing = [k for k in (CAPTURE_SINCE, BACKFILL_THROUGH) if keys[k] is None]
        add(
            STEP_BACKFILL,
            Status.WOULD_RUN,
            f"insert {report.backfill_rows} row(s); write {', '.join(missing)}",
        )
    else:
        add(STEP_BACKFILL, Status.ALREADY_DONE)
