"""The sample generator: the scale-unit population, determinism, storage forms, live traffic."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import CAPTURE_SINCE, Instant, go_sqlite_text, parse_stored
from kandev_dq.lab import sample
from kandev_dq.sql.dialect import (
    at_or_after,
    before,
    instant_param,
    json_flag,
    json_number,
    json_text,
    metadata_doc,
)

M = schema.task_session_messages
GO_TEXT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{0,5}[1-9])?\+00:00")


def _subagent_messages(conn: sa.Connection) -> list[sa.Row]:
    """Every subagent message with its payload read through the dialect-neutral JSON constructs."""
    doc = sa.select(
        M.c.id,
        M.c.task_session_id,
        M.c.turn_id,
        M.c.created_at,
        metadata_doc(M.c.metadata).label("doc"),
    ).subquery()
    task = ("normalized", "subagent_task")
    query = sa.select(
        doc.c.id,
        doc.c.task_session_id,
        doc.c.turn_id,
        doc.c.created_at,
        json_text(doc.c.doc, "tool_call_id").label("tool_call_id"),
        json_text(doc.c.doc, "status").label("tool_status"),
        json_text(doc.c.doc, "parent_tool_call_id").label("parent_tool_call_id"),
        json_text(doc.c.doc, *task, "status").label("agent_status"),
        json_text(doc.c.doc, *task, "subagent_type").label("subagent_type"),
        json_text(doc.c.doc, *task, "agent_id").label("agent_id"),
        json_text(doc.c.doc, *task, "child_session_id").label("child_session_id"),
        json_text(doc.c.doc, *task, "model").label("model"),
        json_number(doc.c.doc, *task, "total_tokens").label("total_tokens"),
        json_number(doc.c.doc, *task, "tool_use_count").label("tool_use_count"),
        json_number(doc.c.doc, *task, "duration_ms").label("duration_ms"),
        json_flag(doc.c.doc, *task, "is_async").label("is_async"),
    ).where(json_text(doc.c.doc, "normalized", "kind") == "subagent_task")
    return conn.execute(query).all()


def _count(conn: sa.Connection, table: sa.Table, *where) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one()


def _dump(engine: sa.Engine) -> dict[str, list[tuple]]:
    with engine.connect() as conn:
        return {
            t.name: [tuple(r) for r in conn.execute(sa.select(t).order_by(t.c.id))]
            for t in (schema.task_sessions, schema.task_session_turns, M)
        }


def _empty(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        for table in (M, schema.task_session_turns, schema.task_sessions):
            conn.execute(table.delete())


def _history(target, *, subagents="amended", **kwargs) -> sample.SampleSummary:
    sample.create_store(target.engine, subagents=subagents)
    return sample.generate(target.engine, **kwargs)


def _set_capture_since(engine: sa.Engine, key: Instant) -> None:
    with engine.begin() as conn:
        conn.execute(schema.kandev_meta.insert().values(key=CAPTURE_SINCE, value=str(key)))


# --- store creation ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [None, "pre_amendment", "amended"])
def test_create_store_makes_each_shape(target, shape):
    sample.create_store(target.engine, subagents=shape)
    inspector = sa.inspect(target.engine)
    for table in schema.BASE_TABLES:
        assert inspector.has_table(table.name)
    assert inspector.has_table(schema.SUBAGENTS) == (shape is not None)
    if shape is not None:
        columns = {c["name"] for c in inspector.get_columns(schema.SUBAGENTS)}
        assert ("agent_execution_id" in columns) == (shape == "amended")


def test_create_store_rejects_an_unknown_shape(target):
    with pytest.raises(ValueError, match="pre_amendment"):
        sample.create_store(target.engine, subagents="amendment-1")


# --- history -------------------------------------------------------------------------------


def test_scale_one_population_is_exact(target):
    summary = _history(target)
    with target.engine.connect() as conn:
        rows = _subagent_messages(conn)
        sessions = _count(conn, schema.task_sessions)
        turns = _count(conn, schema.task_session_turns)
        messages = _count(conn, M)

    assert (sessions, turns, len(rows)) == (38, 127, 253)
    assert (summary.sessions, summary.turns, summary.subagent_messages) == (38, 127, 253)
    assert summary.messages == messages
    assert 8 * 253 <= messages - 253 <= 12 * 253  # about ten ordinary per subagent message

    by_status = Counter(r.agent_status for r in rows)
    assert by_status == {"async_launched": 190, "completed": 57, "started": 5, None: 1}
    assert summary.by_agent_status == by_status

    launched = [r for r in rows if r.agent_status == "async_launched"]
    assert all(r.is_async == 1 and r.model and r.agent_id for r in launched)
    metrics = [(r.total_tokens, r.tool_use_count, r.duration_ms) for r in launched]
    assert set(metrics) == {(None, None, None), (0, 0, 0)}  # absent and zero, mixed
    # The ACP tool status is not the child's status (AC-10..12).
    assert {r.tool_status for r in launched} == {"completed", "in_progress"}
    assert {r.tool_status for r in rows} <= set(schema.TOOL_STATUSES)

    completed = [r for r in rows if r.agent_status == "completed"]
    assert all(None not in (r.total_tokens, r.tool_use_count, r.duration_ms) for r in completed)
    assert sum(r.model is None for r in completed) == 8

    started = [r for r in rows if r.agent_status == "started"]
    assert all(r.child_session_id and r.agent_id is None for r in started)
    assert {(r.total_tokens, r.tool_use_count, r.duration_ms) for r in started} <= {
        (None, None, None),
        (0, 0, 0),
    }

    fanout = Counter(Counter(r.turn_id for r in rows).values())
    assert fanout == sample.FANOUT_TURNS
    assert sum(r.subagent_type is None for r in rows) == 3

    nested = [r for r in rows if r.parent_tool_call_id is not None]
    assert len(nested) == 1
    (child,) = nested
    parents = [
        r
        for r in rows
        if (r.task_session_id, r.tool_call_id) == (child.task_session_id, child.parent_tool_call_id)
    ]
    assert len(parents) == 1 and parents[0].created_at < child.created_at
    assert len({(r.task_session_id, r.tool_call_id) for r in rows}) == 253


def test_legacy_metadata_rows_are_present_and_readable(target):
    summary = _history(target)
    assert summary.legacy_metadata == {"empty": 2, "null_text": 2, "sql_null": 2}
    with target.engine.connect() as conn:
        assert _count(conn, M, M.c.metadata == "") == 2
        assert _count(conn, M, M.c.metadata == "null") == 2
        assert _count(conn, M, M.c.metadata.is_(None)) == 2
        # A JSON read over every row survives them (AC-23b).
        kinds = conn.execute(
            sa.select(json_text(metadata_doc(M.c.metadata), "normalized", "kind"))
        ).scalars()
        assert Counter(kinds)["subagent_task"] == 253


def test_same_seed_same_rows_other_seed_other_rows(target):
    _history(target, seed=7)
    first = _dump(target.engine)
    _empty(target.engine)
    sample.generate(target.engine, seed=7)
    assert _dump(target.engine) == first
    _empty(target.engine)
    sample.generate(target.engine, seed=8)
    other = _dump(target.engine)
    assert other != first
    assert not {r[0] for r in other[M.name]} & {r[0] for r in first[M.name]}


def test_timestamps_increase_over_days_before_start(target):
    start = datetime(2025, 3, 10, 12, tzinfo=UTC)
    summary = _history(target, start=start)
    with target.engine.connect() as conn:
        stamps = conn.execute(sa.select(M.c.created_at, M.c.updated_at)).all()
        turns = conn.execute(
            sa.select(
                schema.task_session_turns.c.started_at,
                schema.task_session_turns.c.completed_at,
                schema.task_session_turns.c.created_at,
                schema.task_session_turns.c.updated_at,
            )
        ).all()
        sessions = conn.execute(
            sa.select(schema.task_sessions.c.started_at, schema.task_sessions.c.updated_at)
        ).all()
    created = sorted(c for c, _ in stamps)
    assert len(set(created)) == len(created)  # strictly increasing: no two alike
    assert created[0] == summary.first_created_at and created[-1] == summary.last_created_at
    assert start - timedelta(days=5) < created[0]
    assert created[-1] - created[0] > timedelta(days=2)
    assert all(u >= c for c, u in stamps) and max(u for _, u in stamps) < start
    assert all(s <= c and cr <= u for s, c, cr, u in turns)
    assert all(s <= u < start for s, u in sessions)
    # Whole seconds, trimmed fractions and full microseconds all occur.
    micros = Counter(
        "second" if c.microsecond == 0 else "ms" if c.microsecond % 1000 == 0 else "us"
        for c in created
    )
    assert min(micros["second"], micros["ms"], micros["us"]) > 0


def test_stored_timestamp_forms(target):
    _history(target)
    columns = {
        "task_sessions": ("started_at", "updated_at"),
        "task_session_turns": ("started_at", "completed_at", "created_at", "updated_at"),
        "task_session_messages": ("created_at", "updated_at"),
    }
    values = []
    with target.engine.connect() as conn:
        for table, names in columns.items():
            for name in names:
                values += conn.exec_driver_sql(f"SELECT {name} FROM {table}").scalars().all()
    assert values and None not in values
    if target.dialect == "sqlite":
        # Go's mattn text: space, trimmed fraction, no '.' at a whole second, +00:00 (§1).
        assert all(isinstance(v, str) and GO_TEXT.fullmatch(v) for v in values)
        assert all(go_sqlite_text(parse_stored(v)) == v for v in values)
        assert any("." not in v for v in values)
        assert any("." in v for v in values)
        assert any(re.search(r"\.\d{1,5}\+", v) for v in values)  # trimmed width
    else:
        # Naive TIMESTAMP holding UTC wall clock.
        assert all(isinstance(v, datetime) and v.tzinfo is None for v in values)
        assert any(v.microsecond == 0 for v in values)
        assert any(v.microsecond % 1000 for v in values)


def test_generate_rejects_a_non_positive_scale(target):
    sample.create_store(target.engine)
    with pytest.raises(ValueError, match="scale"):
        sample.generate(target.engine, scale=0)


# --- live traffic --------------------------------------------------------------------------


def _expected_row(meta: dict) -> dict:
    """What CONTRACT §2 says a healthy live writer stores for one subagent frame."""
    task = meta["normalized"]["subagent_task"]

    def text(value):
        return value if isinstance(value, str) and value != "" else None

    launched = task.get("status") == "async_launched"

    def metric(name, zero_is_null):
        value = task.get(name)
        if launched or value is None or value < 0 or (value == 0 and zero_is_null):
            return None
        return value

    return {
        "parent_tool_call_id": text(meta.get("parent_tool_call_id")),
        "tool_status": text(meta.get("status")),
        "agent_status": text(task.get("status")),
        "subagent_type": text(task.get("subagent_type")),
        "description": text(task.get("description")),
        "agent_id": text(task.get("agent_id")),
        "child_session_id": text(task.get("child_session_id")),
        "model": text(task.get("model")),
        "is_async": 1 if task.get("is_async") is True else 0,
        "total_tokens": metric("total_tokens", True),
        "tool_use_count": metric("tool_use_count", False),
        "duration_ms": metric("duration_ms", True),
    }


def _live_setup(target) -> Instant:
    summary = _history(target)
    key = Instant(summary.last_created_at + timedelta(hours=2, microseconds=417), nanos=789)
    _set_capture_since(target.engine, key)
    return key


def _live_messages(conn: sa.Connection, key: Instant) -> list[sa.Row]:
    kind = json_text(metadata_doc(M.c.metadata), "normalized", "kind")
    since = at_or_after(M.c.created_at, instant_param("k", key))
    return conn.execute(sa.select(M).where(kind == "subagent_task", since)).all()


def test_live_traffic_healthy_writer_rows_follow_the_contract(target):
    key = _live_setup(target)
    assert sample.append_live_traffic(target.engine, count=300, seed=3) == 300
    with target.engine.connect() as conn:
        messages = {
            (m.task_session_id, json.loads(m.metadata)["tool_call_id"]): m
            for m in _live_messages(conn, key)
        }
        rows = conn.execute(sa.select(schema.subagents)).all()
        observed = schema.subagents.c.observed_at
        early = _count(conn, schema.subagents, before(observed, instant_param("k", key)))
        turns = set(conn.execute(sa.select(schema.task_session_turns.c.id)).scalars())
        kind = json_text(metadata_doc(M.c.metadata), "normalized", "kind")
        history = _count(conn, M, kind == "subagent_task")

    assert len(messages) == 300 and history == 253 + 300
    assert len(rows) == 300 and early == 0
    assert {(r.task_session_id, r.tool_call_id) for r in rows} == set(messages)
    exercised = Counter()
    for row in rows:
        message = messages[(row.task_session_id, row.tool_call_id)]
        meta = json.loads(message.metadata)
        assert {k: getattr(row, k) for k in _expected_row(meta)} == _expected_row(meta)
        assert row.task_id == message.task_id and row.turn_id == message.turn_id
        assert row.turn_id in turns
        assert row.source == "live"
        assert str(uuid.UUID(row.agent_execution_id)) == row.agent_execution_id
        created = message.created_at
        assert created <= row.observed_at <= created + timedelta(milliseconds=10)
        assert row.updated_at >= row.observed_at
        terminal = row.tool_status in schema.TERMINAL_TOOL_STATUSES
        assert (row.settled_at is not None) == terminal  # AC-10..12
        if terminal:
            assert row.observed_at <= row.settled_at <= row.updated_at
        assert 0 not in (row.total_tokens, row.duration_ms)  # AC-7a
        task = meta["normalized"]["subagent_task"]
        exercised["empty"] += "" in task.values()
        exercised["zero_kept"] += row.tool_use_count == 0
        launched = task.get("status") == "async_launched"
        exercised["launched_zeros"] += launched and task.get("total_tokens") == 0
        exercised["zero_nulled"] += not launched and task.get("total_tokens") == 0
    # The seed reaches the cases the rules are about.
    assert min(exercised.values()) > 0, exercised

    # A second burst follows the first without colliding.
    assert sample.append_live_traffic(target.engine, count=20, seed=3) == 20
    with target.engine.connect() as conn:
        assert len(_live_messages(conn, key)) == 320
        assert _count(conn, schema.subagents) == 320


def test_live_traffic_stopped_writer_leaves_no_rows(target):
    key = _live_setup(target)
    sample.append_live_traffic(target.engine, count=25, seed=1, writer="stopped")
    with target.engine.connect() as conn:
        assert len(_live_messages(conn, key)) == 25
        assert _count(conn, schema.subagents) == 0


def test_live_traffic_needs_capture_since_or_after(target):
    summary = _history(target)
    with pytest.raises(ValueError, match=CAPTURE_SINCE):
        sample.append_live_traffic(target.engine, count=5)
    after = summary.last_created_at + timedelta(days=1)
    sample.append_live_traffic(target.engine, count=5, after=after)
    with target.engine.connect() as conn:
        assert len(_live_messages(conn, Instant.from_datetime(after))) == 5


@pytest.mark.parametrize("shape", [None, "pre_amendment"])
def test_live_traffic_needs_the_amended_table(target, shape):
    _history(target, subagents=shape)
    _set_capture_since(target.engine, Instant(datetime(2026, 8, 3, tzinfo=UTC)))
    with pytest.raises(ValueError, match="amended"):
        sample.append_live_traffic(target.engine, count=5)


def test_live_traffic_rejects_bad_arguments(target):
    _live_setup(target)
    with pytest.raises(ValueError, match="writer"):
        sample.append_live_traffic(target.engine, count=5, writer="paused")
    with pytest.raises(ValueError, match="negative"):
        sample.append_live_traffic(target.engine, count=-1)
