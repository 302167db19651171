"""Consistent snapshots under load: checks racing a writer, on SQLite (rollback journal and
WAL) and PostgreSQL.

A writer process commits one subagent message and its row per transaction, at a steady rate,
for a bounded count and time (loopback only; it stops by itself). Every check run must read
one snapshot: a consistent reader never sees a message without its row (shortfall 0) or a
row without its message (excess 0), and three families of facts read by separate statements
(writer health, rows, the activation disclosure) count the same rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from kandev_dq.contract.instants import parse_stored
from kandev_dq.facts.rows import row_facts
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.run.check import run_check
from kandev_dq.store import sqlite_driver
from kandev_dq.store.access import open_store
from kandev_dq.store.snapshot import facts_for, pinned
from tests.gxhelpers import result

CAPTURE = "2026-07-30T01:39:37.271235Z"
BASE = datetime(2026, 8, 1, tzinfo=UTC)
RUNS = 20

_WRITER = r"""
import json, os, sys, time, uuid
from datetime import datetime, timedelta, timezone
import sqlalchemy as sa
from kandev_dq.contract import tables as schema
from kandev_dq.store.reference import resolve_url

url, session, task, turn, limit, seconds, stop = sys.argv[1:8]
# A plain engine: pysqlite's own transaction handling makes the two INSERTs one transaction.
engine = sa.create_engine(resolve_url(url), connect_args=(
    {"timeout": 30} if "://" not in url else {}))
base = datetime(2026, 8, 1, tzinfo=timezone.utc)
started, written = time.monotonic(), 0
with engine.connect() as conn:
    for i in range(int(limit)):
        if os.path.exists(stop) or time.monotonic() - started > float(seconds):
            break
        at = base + timedelta(milliseconds=i)
        tool_call_id = f"load-{i:06d}"
        metadata = {
            "tool_call_id": tool_call_id,
            "status": "completed",
            "normalized": {"kind": "subagent_task", "subagent_task": {
                "status": "completed", "total_tokens": 5, "tool_use_count": 1, "duration_ms": 9}},
        }
        with conn.begin():  # the message and its row commit together
            conn.execute(schema.task_session_messages.insert().values(
                id=f"m-{i:06d}", task_session_id=session, task_id=task, turn_id=turn,
                content="", type="tool_call", metadata=json.dumps(metadata),
                created_at=at, updated_at=at))
            conn.execute(schema.subagents.insert().values(
                id=str(uuid.uuid4()), task_session_id=session, task_id=task,
                tool_call_id=tool_call_id, agent_execution_id=str(uuid.uuid4()),
                agent_status="completed", tool_status="completed", is_async=0,
                total_tokens=5, tool_use_count=1, duration_ms=9, source="live",
                observed_at=at, settled_at=at, updated_at=at))
        written += 1
        time.sleep(0.01)
print(json.dumps({"written": written}))
"""


@pytest.fixture(params=["sqlite", "sqlite-wal", "postgresql"])
def loaded(request, tmp_path):
    """An activated store on one dialect (SQLite: rollback journal or WAL)."""
    if request.param == "postgresql":
        target = request.getfixturevalue("pg_target")
    else:
        target = request.getfixturevalue("sqlite_target")
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    session = store.session()
    turn = store.turn(session)
    if request.param == "sqlite-wal":
        with target.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode = WAL").scalar() == "wal"
    target.engine.dispose()
    with target.engine.connect() as conn:
        task = conn.exec_driver_sql("SELECT task_id FROM task_sessions").scalar()
    target.engine.dispose()
    return request.param, target, (session, task, turn)


@pytest.fixture
def quick_project(project):
    for path in (project / "checkpoints").glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        data["actions"] = []
        path.write_text(json.dumps(data), encoding="utf-8")
    return project


def _rows_seen(report) -> tuple[int, int, int]:
    """Rows counted by three families read in separate statements: writer health (its latest
    observed_at names the writer's index), the rows suite, and the activation disclosure."""
    latest = result(report, "expect_writer_to_have_written_since_capture_since").observed_value
    since_base = parse_stored(latest.replace("T", " ").rstrip("Z")) - BASE if latest else None
    health = since_base // timedelta(milliseconds=1) + 1 if since_base is not None else 0
    rows = result(report, "expect_subagent_rows_when_qualifying_messages_exist").observed_value
    population = result(report, "expect_population_to_be_disclosed").observed_value or []
    return health, rows.get("rows", 0), sum(cell["rows"] for cell in population)


def test_every_run_reads_one_snapshot_under_load(loaded, quick_project, tmp_path, monkeypatch):
    monkeypatch.delenv("KANDEV_STORE_URL", raising=False)
    kind, target, (session, task, turn) = loaded
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, target.url, session, task, turn, "20000", "60", str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    try:
        deadline = time.monotonic() + 30
        while _count_rows(target) < 5 and time.monotonic() < deadline:
            assert writer.poll() is None, writer.stderr.read()
            time.sleep(0.05)
        for _ in range(RUNS):
            report = run_check(quick_project, target.url, "nightly")
            shortfall = result(report, "expect_no_writer_shortfall_since_capture_since")
            excess = result(report, "expect_no_writer_excess_since_capture_since")
            assert (shortfall.success, shortfall.observed_value) == (True, 0), shortfall.message
            assert (excess.success, excess.observed_value) == (True, 0), excess.message
            health, rows, population = _rows_seen(report)
            assert health == rows == population, (kind, health, rows, population)
            seen.append(rows)
    finally:
        stop.touch()
        out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    written = json.loads(out)["written"]
    assert seen == sorted(seen) and seen[-1] > seen[0], seen  # the writer ran during the checks
    assert seen[-1] <= written


def _count_rows(target) -> int:
    with target.engine.connect() as conn:
        count = conn.exec_driver_sql("SELECT count(*) FROM task_session_subagents").scalar()
    target.engine.dispose()
    return count


def test_a_commit_during_a_pinned_run_is_invisible_to_it(loaded):
    """Deterministically: a row committed between two families of one pinned run is seen by
    neither (PostgreSQL REPEATABLE READ, SQLite WAL); on a rollback-journal SQLite store the
    run's read lock makes the writer wait instead (its busy timeout)."""
    kind, target, (session, task, _) = loaded
    builder = StoreBuilder(target.engine)
    builder.subagent_row(session, "toolu_before", "2026-08-01 00:00:00+00:00")
    store = open_store(target.url)
    try:
        with pinned(store.engine) as run:
            first = facts_for(store.engine, "rows", row_facts)["rows"]
            if kind == "sqlite":
                waiting = sqlite_driver.create_engine(
                    f"sqlite:///{target.url}", connect_args={"timeout": 0.2}
                )
                with pytest.raises(sa.exc.OperationalError, match="locked"):
                    StoreBuilder(waiting).subagent_row(session, "toolu_during", "2026-08-01")
                waiting.dispose()
            else:
                builder.subagent_row(session, "toolu_during", "2026-08-01 00:00:01+00:00")
            again = facts_for(store.engine, "rows-again", row_facts)["rows"]
            assert run.cache.keys() == {"rows", "rows-again"}
    finally:
        store.dispose()
    assert first == again == 1
    if kind != "sqlite":
        assert _count_rows(target) == 2
