"""One consistent read for a whole checkpoint run, shared by every family of facts.

GX's SQL execution engine hands each metric its own connection, so on its own every custom
metric would read its own snapshot. ``kandev-dq check`` therefore *pins* one read-only
snapshot (PostgreSQL: REPEATABLE READ READ ONLY; SQLite: one read transaction) before it runs
a checkpoint, registered against the very engine object GX's execution engine reads through
(:mod:`kandev_dq.gx.adapter` sets that engine up). Every kandev-dq fact is read through
:func:`facts_for`, which uses the pinned connection when it is asked for that engine, and
caches each family of facts for the run so that suites of one checkpoint share both the
snapshot and the scan.
Run through GX's own API (a scheduler running a checkpoint by name: no pin), each family of
facts reads within one read-only transaction of its own, on kandev-dq's own read-only connection
to the data source's URL, never on GX's read-write engine
(:func:`kandev_dq.store.access.gx_facts`).

Metadata PostgreSQL cannot parse as JSON would abort a family's statements (SQLite reads it as
``{}``): the first family to meet it locates those messages inside the snapshot and the run
reads them as ``{}`` from then on (:func:`kandev_dq.sql.messages.tolerating_unreadable_metadata`,
AC-23b); the metadata rule reports them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from kandev_dq.sql.messages import Unreadable, tolerating_unreadable_metadata
from kandev_dq.store.observe import snapshot_observed
from kandev_dq.store.reference import StoreRef
from kandev_dq.store.replication import ServerClock, server_clock
from kandev_dq.store.sqlite_driver import tolerate_bad_utf8

Facts = dict[str, Any]


@dataclass
class PinnedRead:
    """The pinned snapshot of one run: its connection and fact cache."""

    connection: sa.Connection
    cache: dict[str, Facts] = field(default_factory=dict)
    #: Messages whose metadata PostgreSQL cannot parse, once a family has located them.
    unreadable: Unreadable = field(default_factory=Unreadable)
    #: The GX run name of the run reading it (the key ledger records who saw a key first).
    run_name: str | None = None
    #: The store as the command named it (the user's name for it included), and its name in
    #: the records database as the run read it once
    #: (:func:`kandev_dq.records.identity.records_key`): every metric of the run keys its
    #: records so.
    store: StoreRef | None = None
    records_key: str | None = None
    #: The store's clock read just before the snapshot began: a live run's watermark (every
    #: change it can see was committed by then; the window's overlap covers the writer's clock),
    #: and a standby's replay (:mod:`kandev_dq.store.replication`).
    clock: ServerClock | None = None


#: Engine -> the pinned read its facts are taken from while a run lasts (by identity).
_pins: dict[sa.Engine, PinnedRead] = {}


def begin_snapshot(conn: sa.Connection) -> None:
    """Start one consistent, read-only transaction on ``conn`` (both dialects)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        # The planner prices the per-name JSON subplans high enough to JIT-compile the scans
        # that carry them: over a second each time, for statements that then run in less.
        conn.exec_driver_sql("SET LOCAL jit = off")
        # It cannot estimate how many messages the text tests on metadata keep (a tenth where
        # it guesses a half), so it prices a parallel scan of them above a serial one; at the
        # costs below, the scans of the messages run in parallel (at 278k messages, 1.5 ->
        # 1.3 s for pre_release's facts on two cores). Workers stay within the server's limits.
        conn.exec_driver_sql("SET LOCAL parallel_setup_cost = 100")
        conn.exec_driver_sql("SET LOCAL parallel_tuple_cost = 0.01")
        # The server's default 4 MB spills the backfill's AC-21b ranking sort and its join to
        # disk at a million messages, and prices coverage's hash anti-join out; 64 MB per sort
        # or hash, for this read only, keeps them in memory (about 5% off those two statements).
        conn.exec_driver_sql("SET LOCAL work_mem = '64MB'")
    else:
        conn.exec_driver_sql("BEGIN")


@contextmanager
def read_snapshot(
    engine: sa.Engine, before: Callable[[sa.Connection], None] | None = None
) -> Iterator[sa.Connection]:
    """A connection inside one consistent read-only transaction, rolled back afterwards
    (``before`` reads on it first, outside the transaction)."""
    with engine.connect() as raw:
        if raw.dialect.name == "sqlite":  # also GX's own engine, when a suite runs unpinned
            tolerate_bad_utf8(raw.connection.driver_connection)
        conn = raw.execution_options(isolation_level="AUTOCOMMIT")
        if before is not None:
            before(conn)
        begin_snapshot(conn)
        try:
            with snapshot_observed(conn):
                yield conn
        finally:
            conn.exec_driver_sql("ROLLBACK")


@contextmanager
def pinned(
    engine: sa.Engine, *, reader: sa.Engine | None = None, run_name: str | None = None
) -> Iterator[PinnedRead]:
    """Pin one snapshot of ``engine``: while the block runs, :func:`facts_for` reads every fact
    asked of ``reader`` (that very engine object, e.g. GX's; ``engine`` itself by default) in it.
    """
    reader = engine if reader is None else reader
    if reader in _pins:
        raise RuntimeError("this engine already reads a pinned snapshot")
    clock: list[ServerClock] = []
    with read_snapshot(engine, lambda conn: clock.append(server_clock(conn))) as conn:
        run = PinnedRead(conn, run_name=run_name, clock=clock[0])
        _pins[reader] = run
        try:
            yield run
        finally:
            del _pins[reader]


def facts_for(engine: sa.Engine, family: str, compute: Callable[[sa.Connection], Facts]) -> Facts:
    """The facts of one family, read in the pinned snapshot ``engine`` is registered against
    when there is one (that run's cache shares them), else in a snapshot of their own."""
    run = _pins.get(engine)
    if run is not None:
        if family not in run.cache:
            run.cache[family] = _guarded(run.connection, compute, run.unreadable)
        return run.cache[family]
    with read_snapshot(engine) as conn:
        return tolerating_unreadable_metadata(conn, compute)


def pin_of(engine: sa.Engine) -> PinnedRead | None:
    """The pinned read ``engine`` is registered against, if a run pinned one."""
    return _pins.get(engine)


def _guarded(
    conn: sa.Connection, compute: Callable[[sa.Connection], Facts], unreadable: Unreadable
) -> Facts:
    """Compute inside a savepoint: on PostgreSQL a failed statement would otherwise abort the
    pinned transaction and every later family of facts with it (same snapshot either way)."""
    conn.exec_driver_sql("SAVEPOINT kandev_dq_facts")
    try:
        facts = tolerating_unreadable_metadata(conn, compute, unreadable)
    except BaseException:
        conn.exec_driver_sql("ROLLBACK TO SAVEPOINT kandev_dq_facts")
        raise
    conn.exec_driver_sql("RELEASE SAVEPOINT kandev_dq_facts")
    return facts
