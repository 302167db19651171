"""The migration runner killed at random points (SIGKILL), on SQLite and on PostgreSQL.

A small pre-amendment store with history is migrated by a forked child (no interpreter start-up:
the child is ready in milliseconds) that is killed after a seeded random delay spread over the
run's measured duration. Whatever the moment, the store holds a state the runner can commit
step by step — never a partial step: the table is pre-amendment and whole, or amended with
every old row intact; ``execution_since`` only on the amended table; both backfill keys or
neither, and backfill rows exactly when both keys are there; no rebuild table left. The next
run completes it, to exactly the state an uninterrupted run reaches. (Two runs at once:
``tests/test_migrate.py::test_two_concurrent_runs_end_like_one``.)
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import time
import uuid
from urllib.parse import quote

import pytest
import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import BACKFILL_THROUGH, CAPTURE_SINCE, EXECUTION_SINCE
from kandev_dq.errors import StoreError
from kandev_dq.migration import runner as migrate
from kandev_dq.store.access import open_store
from kandev_dq.store.observe import observe_subagents
from tests.subagent_rows import add_message, add_session, add_subagent_row, at, subagent_metadata

TRIALS = 20
OTHER_KEY = ("some_other_feature_since", "2026-01-01T00:00:00Z")
TABLES = ("kandev_meta", "task_sessions", "task_session_turns", "task_session_messages")

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _history(conn: sa.Connection) -> None:
    """Four sessions, 60 subagent messages (some keys also held by old rows), 20 old rows."""
    for s in range(4):
        add_session(conn, f"s{s}", f"t{s}", turns=(f"u{s}",))
    for i in range(60):
        s = i % 4
        add_message(
            conn,
            f"m{i:03d}",
            subagent_metadata(f"tc-{i:03d}", total_tokens=100 + i, tool_use_count=i % 5),
            session_id=f"s{s}",
            task_id=f"t{s}",
            turn_id=f"u{s}",
            created_at=at(i),
            updated_at=at(i + 1),
        )
    for i in range(0, 40, 2):
        s = i % 4
        add_subagent_row(
            conn,
            amended=False,
            id=f"old-{i:03d}",
            task_session_id=f"s{s}",
            task_id=f"t{s}",
            tool_call_id=f"tc-{i:03d}",
            description=f"old row {i}",
            observed_at=at(i, micros=7),
            updated_at=at(i + 2),
        )
    conn.execute(schema.kandev_meta.insert().values(key=OTHER_KEY[0], value=OTHER_KEY[1]))


class Stores:
    """Fresh copies of one pre-amendment template store, one per trial."""

    def __init__(self, target, tmp_path):
        self.target = target
        self.tmp_path = tmp_path
        target.create_base(subagents="pre_amendment")
        with target.engine.begin() as conn:
            _history(conn)
        target.engine.dispose()
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        if self.target.dialect == "sqlite":
            path = self.tmp_path / f"trial-{self.count}.db"
            shutil.copy(self.target.url, path)
            return str(path)
        template = self.target.url.split("search_path%3D", 1)[1]
        name = f"k{uuid.uuid4().hex[:10]}"
        base = self.target.url.split("?", 1)[0]
        url = f"{base}?options={quote(f'-csearch_path={name}')}"
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
            conn.exec_driver_sql(f'SET LOCAL search_path TO "{name}"')
            schema.create_base_tables(conn)
            schema.create_subagents_table(conn, amended=False)
            for table in (*TABLES, schema.SUBAGENTS):
                conn.exec_driver_sql(
                    f'INSERT INTO "{name}".{table} SELECT * FROM "{template}".{table}'
                )
        engine.dispose()
        return url


def _state(store) -> dict:
    """Shape, keys, every subagent row and the message count of an open store."""
    with store.engine.connect() as conn:
        shape = observe_subagents(conn)
        tables = set(sa.inspect(conn).get_table_names())
        keys = dict(conn.execute(sa.text("SELECT key, value FROM kandev_meta")).all())
        rows = {
            row["id"]: dict(row)
            for row in conn.execute(sa.text(f"SELECT * FROM {schema.SUBAGENTS}")).mappings()
        }
        messages = conn.execute(sa.text("SELECT count(*) FROM task_session_messages")).scalar()
    return {"shape": shape, "tables": tables, "keys": keys, "rows": rows, "messages": messages}


def _state_of(url: str) -> dict:
    store = open_store(url, read_only=False)
    try:
        return _state(store)
    finally:
        store.dispose()


def _fork_migration(url: str, delay: float | None) -> tuple[bool, float]:
    """Migrate ``url`` in a forked child; SIGKILL it ``delay`` seconds after it starts the
    run (None: let it finish). Returns (killed, seconds from start to exit or kill)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 3
        try:
            os.close(ready_r)
            store = open_store(url, read_only=False)
            os.write(ready_w, b"1")
            migrate.run(store)
            code = 0
        finally:
            os._exit(code)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"1", "the child failed before migrating"
    finally:
        os.close(ready_r)
    started = time.monotonic()
    if delay is not None:
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):  # it may have finished already
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    elapsed = time.monotonic() - started
    killed = os.WIFSIGNALED(status)
    assert killed or os.WEXITSTATUS(status) == 0
    return killed, elapsed


def _stage(state: dict, before: dict, done: dict) -> str:
    """Check the invariants of a state the runner may leave; name the stage it reached."""
    shape, keys, rows = state["shape"], state["keys"], state["rows"]
    assert schema.REBUILD_TABLE not in state["tables"]
    assert keys[OTHER_KEY[0]] == OTHER_KEY[1]
    assert state["messages"] == before["messages"]
    amended = shape.end_state_holds
    assert amended or shape == before["shape"], shape.describe()
    for row_id, old in before["rows"].items():  # every old row intact, whatever happened
        row = dict(rows[row_id])
        assert row.pop("agent_execution_id", "unknown") == "unknown"
        assert row == old
    if EXECUTION_SINCE in keys:
        assert amended
    pair = (CAPTURE_SINCE in keys, BACKFILL_THROUGH in keys)
    assert pair in ((False, False), (True, True)), keys  # never a partial pair
    backfilled = {i for i, r in rows.items() if r["source"] == "backfill"}
    if pair == (True, True):
        assert amended and EXECUTION_SINCE in keys
        assert keys[BACKFILL_THROUGH] == done["keys"][BACKFILL_THROUGH]
        assert rows == done["rows"]
        return "complete"
    assert not backfilled and set(rows) == set(before["rows"])  # never rows without keys
    if not amended:
        return "unchanged"
    return "amended, key written" if EXECUTION_SINCE in keys else "amended"


def _comparable(state: dict) -> dict:
    keys = dict(state["keys"])
    for volatile in (CAPTURE_SINCE, EXECUTION_SINCE):  # instants of the run itself
        assert keys.pop(volatile)
    return {**state, "keys": keys}


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_sigkill_at_random_points_never_leaves_a_partial_step(dialect, request, tmp_path):
    target = request.getfixturevalue("sqlite_target" if dialect == "sqlite" else "pg_target")
    stores = Stores(target, tmp_path)
    before = _state_of(stores.fresh())
    reference = stores.fresh()
    _, duration = _fork_migration(reference, None)
    done = _state_of(reference)
    assert done["shape"].end_state_holds and set(done["keys"]) >= {CAPTURE_SINCE, EXECUTION_SINCE}
    rng = random.Random(20260730)
    # Seeded delays spread over the measured run, plus one kill at once and one well after
    # the end, so that the kills land at different points even on a loaded machine.
    delays = [0.0, 5 * duration, *(rng.uniform(0, 1.2 * duration) for _ in range(TRIALS - 2))]
    rng.shuffle(delays)
    stages = []
    for delay in delays:
        url = stores.fresh()
        killed, _ = _fork_migration(url, delay)
        if dialect == "sqlite" and killed:
            _read_only_open_is_clear(url)
        store = open_store(url, read_only=False)  # on SQLite, rolls back a hot journal
        try:
            stages.append(_stage(_state(store), before, done))
            if stages[-1] == "complete":
                continue  # _stage compared it with the uninterrupted run already
            report = migrate.run(store)
            assert report.ok, report.render()
            assert _comparable(_state(store)) == _comparable(done)
        finally:
            store.dispose()
    assert len(set(stages)) >= 2, stages  # the kills landed at different points of the run


def _read_only_open_is_clear(path: str) -> None:
    """After a kill, a read-only open either works or names the hot journal (exit 2)."""
    try:
        open_store(path, read_only=True).dispose()
    except StoreError as exc:
        assert "hot journal" in str(exc)
