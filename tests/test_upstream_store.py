"""Stores in upstream Kandev's own shapes (:mod:`kandev_dq.lab.upstream`), on both dialects.

The builder must reproduce what upstream's stores hold (CONTRACT §1, §3, §4): the shape tests
read it back from the database. The lifecycle test runs a real store's life, upstream's
activation, kandev-dq's ``migrate``, then live traffic, and validates it with ``pre_release``.
"""

from __future__ import annotations

import json
import re

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import BACKFILL_THROUGH, CAPTURE_SINCE, EXECUTION_SINCE
from kandev_dq.lab import upstream
from kandev_dq.lab.storebuilder import SUBAGENT_FIELDS
from kandev_dq.migration import runner as migrate
from kandev_dq.project.files import copy_project
from kandev_dq.run.check import run_check
from kandev_dq.store.access import open_store
from tests.gxhelpers import failed

WHOLE_SECOND = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
FRACTION = re.compile(r"\.(\d+)")


def _messages(engine: sa.Engine) -> list[sa.Row]:
    m = schema.task_session_messages
    with engine.connect() as conn:
        return conn.execute(
            sa.select(
                m.c.task_session_id,
                m.c.type,
                m.c.metadata,
                sa.cast(m.c.created_at, sa.Text).label("created"),
                sa.cast(m.c.updated_at, sa.Text).label("updated"),
            )
        ).all()


def _subagent_docs(rows: list[sa.Row]) -> list[tuple[sa.Row, dict]]:
    docs = []
    for row in rows:
        doc = json.loads(row.metadata) if row.metadata else None
        if isinstance(doc, dict) and doc.get("normalized", {}).get("kind") == "subagent_task":
            docs.append((row, doc))
    return docs


def _keys(engine: sa.Engine) -> dict[str, str | None]:
    with engine.connect() as conn:
        return migrate.read_keys(conn)


def test_the_store_has_upstreams_tables_metadata_and_activation(target):
    summary = upstream.build_upstream_store(target.engine, seed=0)
    tables = set(sa.inspect(target.engine).get_table_names())
    assert {"workspaces", "tasks", schema.SUBAGENTS} <= tables
    columns = {c["name"] for c in sa.inspect(target.engine).get_columns(schema.SUBAGENTS)}
    assert "agent_execution_id" in columns  # created already amended

    rows = _messages(target.engine)
    launches = _subagent_docs(rows)
    assert len(launches) == summary.subagent_messages > 0
    for row, doc in launches:
        assert row.type == "tool_call"
        assert row.metadata == json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
        assert list(doc) == sorted(doc)
        payload = doc["normalized"]["subagent_task"]
        assert all(v not in ("", 0, False, None) for v in payload.values())
        assert list(payload) == [f for f in SUBAGENT_FIELDS if f in payload]
    statuses = {doc["status"] for _, doc in launches}
    assert statuses == {"pending", "in_progress", "completed", "failed"}
    assert any("parent_tool_call_id" in doc for _, doc in launches)
    keys = [(row.task_session_id, doc["tool_call_id"]) for row, doc in launches]
    assert len(set(keys)) < len(keys)  # a later turn reused a tool_call_id
    assert sum(row.metadata == "null" for row in rows) >= 1

    with target.engine.connect() as conn:
        meta = {key: value for key, value in conn.execute(sa.select(schema.kandev_meta))}
        backfilled = conn.execute(sa.select(sa.func.count()).select_from(schema.subagents))
        assert backfilled.scalar_one() == len(set(keys))
    assert upstream.OTHER_META_KEY in meta
    assert meta[CAPTURE_SINCE] and meta[BACKFILL_THROUGH] and EXECUTION_SINCE not in meta


def _activated_at() -> int:
    """Now, on a whole second plus a 9-digit fraction: keys show their dialect's precision."""
    return upstream.now_ns() // upstream.SECOND_NS * upstream.SECOND_NS + 123_456_789


def test_sqlite_holds_nanoseconds_and_whole_second_sweeps(sqlite_target):
    summary = upstream.build_upstream_store(sqlite_target.engine, activated_at=_activated_at())
    rows = _messages(sqlite_target.engine)
    widths = {len(f) for r in rows for f in FRACTION.findall(r.created)}
    assert max(widths) == 9 and min(widths) < 9  # Go trims trailing zeros
    swept = [r for r in rows if WHOLE_SECOND.fullmatch(r.updated)]
    assert len(swept) == summary.swept > 0
    # A sweep in the second of creation reads before the fractional created_at (CONTRACT §1).
    inverted = [r for r in swept if r.updated < r.created and r.created.startswith(r.updated)]
    assert len(inverted) == summary.swept_in_creation_second > 0
    assert _keys(sqlite_target.engine)[CAPTURE_SINCE].endswith(".123456789Z")


def test_postgresql_keeps_microseconds_in_columns_and_keys(pg_target):
    upstream.build_upstream_store(pg_target.engine, activated_at=_activated_at())
    rows = _messages(pg_target.engine)
    assert max(len(f) for r in rows for f in FRACTION.findall(r.created)) == 6
    keys = _keys(pg_target.engine)
    assert keys[CAPTURE_SINCE].endswith(".123456Z")
    assert len(FRACTION.search(keys[BACKFILL_THROUGH]).group(1)) <= 6


def test_one_seed_builds_the_same_history_on_both_dialects(sqlite_target, pg_target):
    built = [upstream.build_upstream_store(t.engine, seed=3) for t in (sqlite_target, pg_target)]
    assert built[0] == built[1]
    docs = [
        sorted(row.metadata for row, _ in _subagent_docs(_messages(t.engine)))
        for t in (sqlite_target, pg_target)
    ]
    assert docs[0] == docs[1]


def test_migrate_completes_upstreams_activation_with_execution_since_alone(target):
    upstream.build_upstream_store(target.engine, seed=0)
    before = _keys(target.engine)
    store = open_store(target.url, read_only=False)
    try:
        report = migrate.run(store)
    finally:
        store.dispose()
    assert report.ok
    changed = [s.name for s in report.steps if s.status == migrate.Status.DONE]
    assert changed == [EXECUTION_SINCE]
    after = _keys(target.engine)
    assert before[EXECUTION_SINCE] is None and after[EXECUTION_SINCE]
    assert [after[k] for k in (CAPTURE_SINCE, BACKFILL_THROUGH)] == [
        before[k] for k in (CAPTURE_SINCE, BACKFILL_THROUGH)
    ]


def test_the_live_writer_records_every_launch_after_the_keys(target):
    upstream.build_upstream_store(target.engine, seed=0)
    with target.engine.begin() as conn:
        backfilled = conn.execute(sa.select(sa.func.count()).select_from(schema.subagents))
        before = backfilled.scalar_one()
    live = upstream.append_upstream_live(target.engine, seed=0)
    t = schema.subagents
    with target.engine.connect() as conn:
        rows = conn.execute(sa.select(t).where(t.c.source == "live")).mappings().all()
        total = conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
    assert len(rows) == live.rows == live.subagent_messages and total == before + live.rows
    assert all(r["agent_execution_id"] != schema.UNKNOWN_EXECUTION for r in rows)
    assert live.swept_in_creation_second == 1


def test_pre_release_passes_alike_on_both_dialects_after_migrate_and_live_traffic(
    sqlite_target, pg_target, built_project, tmp_path
):
    verdicts = []
    for target in (sqlite_target, pg_target):
        upstream.build_upstream_store(target.engine, seed=0)
        store = open_store(target.url, read_only=False)
        try:
            assert migrate.run(store).ok
        finally:
            store.dispose()
        upstream.append_upstream_live(target.engine, seed=0)
        project = copy_project(built_project, tmp_path / target.dialect)
        report = run_check(project, target.url, "pre_release")
        verdicts.append((target.dialect, report.success, report.state, failed(report)))
    assert [v[1:] for v in verdicts] == [(True, "fully_activated", {})] * 2, verdicts
