"""The runner's connection, its write transactions and the run lock (AC-33c: two runs at once
end like one run). SQLite serialises each step with ``BEGIN IMMEDIATE`` (and re-checks inside
it); PostgreSQL holds an advisory lock for the whole run."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from kandev_dq.contract import tables as schema
from kandev_dq.migration.report import Status, StepResult

log = logging.getLogger("kandev_dq.migration.transactions")

#: How long a SQLite step waits for another writer (a concurrent run's backfill included).
BUSY_TIMEOUT_MS = 120_000
WAITING_MESSAGE = "waiting: another migration holds the lock"


@dataclass
class MigrationRun:
    """One run's connection and what earlier steps found (passed to every step)."""

    conn: sa.Connection
    dialect: str
    results: dict[str, StepResult] = field(default_factory=dict)

    def failed(self, *names: str) -> list[str]:
        return [n for n in names if n in self.results and self.results[n].status is Status.FAILED]


def reset(conn: sa.Connection) -> None:
    with contextlib.suppress(Exception):  # a broken connection is reported by the next step
        conn.rollback()


# --- transactions and the run lock -----------------------------------------------------------


@contextmanager
def reading(conn: sa.Connection) -> Iterator[sa.Connection]:
    """Reads outside a write transaction; whatever SQLAlchemy began is rolled back after."""
    try:
        yield conn
    finally:
        conn.rollback()


@contextmanager
def transaction(ctx: MigrationRun, *, snapshot: bool = False) -> Iterator[sa.Connection]:
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
            reset(conn)
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
def run_lock(ctx: MigrationRun) -> Iterator[None]:
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
        reset(conn)
        try:
            conn.execute(sa.select(sa.func.pg_advisory_unlock(param)))
            conn.commit()
        except Exception:  # noqa: BLE001 - the lock dies with the connection anyway
            reset(conn)


# --- keys ------------------------------------------------------------------------------------


#: Keep an INSERT's rowcount (SQLAlchemy otherwise only guarantees it for UPDATE/DELETE).
KEEP_ROWCOUNT = {"preserve_rowcount": True}


def dialect_insert(table: sa.Table, dialect_name: str):
    return (sqlite_dialect if dialect_name == "sqlite" else pg_dialect).insert(table)


def write_key(conn: sa.Connection, key: str, value: str) -> bool:
    """``INSERT … ON CONFLICT (key) DO NOTHING`` (write-once, AC-24); True if it was written."""
    meta = schema.kandev_meta
    stmt = dialect_insert(meta, conn.dialect.name).values(key=key, value=value)
    stmt = stmt.on_conflict_do_nothing(index_elements=[meta.c.key])
    return conn.execute(stmt, execution_options=KEEP_ROWCOUNT).rowcount == 1
