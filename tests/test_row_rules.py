"""The row rules (CONTRACT §2), end to end through the nightly checkpoint on SQLite and
PostgreSQL: a healthy store passes, and each rule catches its own fault."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from kandev_dq.facts.rows import row_facts
from kandev_dq.lab.storebuilder import T0, StoreBuilder
from tests.gxhelpers import check, failed, result
from tests.subagent_rows import unconstrained_store

CAPTURE = "2026-07-30T01:39:37.271235Z"  # == T0
THROUGH = "2026-07-30T01:30:00.5Z"
THROUGH_STORED = "2026-07-30 01:30:00.5+00:00"
EXECUTION = "2026-07-30T01:39:37.000001Z"
AT = T0 + timedelta(seconds=1)
US = timedelta(microseconds=1)
FAULT_AT = T0 + timedelta(seconds=5)
LATER = FAULT_AT + timedelta(seconds=1)

IDENTITY = "expect_subagent_rows_to_have_identity"
UNIQUE = "expect_subagent_key_to_be_unique"
EXEC_PRESENT = "expect_agent_execution_id_to_be_present"
EXEC_FORM = "expect_agent_execution_id_to_be_uuid_or_unknown"
SOURCE = "expect_subagent_source_to_be_live_or_backfill"
BACKFILL_UNKNOWN = "expect_backfill_rows_to_carry_unknown_execution"
EMPTY_TEXT = "expect_no_empty_strings_in_nullable_text"
NEGATIVE = "expect_no_negative_metrics"
ZERO = "expect_no_zero_tokens_or_duration"
ASYNC_METRICS = "expect_async_launched_rows_to_have_no_metrics"
SETTLED = "expect_settled_at_iff_terminal_tool_status"
VOCABULARY = "expect_tool_status_in_acp_vocabulary"
ORDER = "expect_observed_at_not_after_updated_or_settled"
ORPHANS = "expect_no_orphan_subagent_rows"
IS_ASYNC = "expect_is_async_to_be_zero_or_one"
ROWS_EXIST = "expect_subagent_rows_when_qualifying_messages_exist"
METRICS_REPORTED = "expect_completed_rows_to_report_metrics"


def nightly(project, target):
    return check(project, target, "nightly")


def _healthy(store: StoreBuilder) -> str:
    """A fully activated store whose rows show every healthy shape of CONTRACT §2."""
    session = store.session()
    store.subagent_message(session, THROUGH_STORED, "toolu_backfilled")
    store.subagent_row(
        session,
        "toolu_backfilled",
        THROUGH_STORED,
        source="backfill",
        agent_status="completed",
        tool_status="completed",
        settled_at=THROUGH_STORED,
        total_tokens=1200,
        tool_use_count=0,  # AC-8: a reported 0 is kept in tool_use_count
        duration_ms=3400,
    )
    store.keys(CAPTURE, THROUGH, EXECUTION)
    _live(
        store,
        session,
        "toolu_launch",
        AT,
        agent_status="async_launched",
        tool_status="completed",
        settled_at=AT + timedelta(milliseconds=80),
        updated_at=AT + timedelta(milliseconds=80),
        is_async=1,
        agent_execution_id=str(uuid.uuid4()).upper(),  # any case is a UUID
    )
    _live(store, session, "toolu_running", AT + US, agent_status="started", tool_status="pending")
    return session


def _live(store: StoreBuilder, session: str, tool_call_id: str, at, **row) -> None:
    store.subagent_message(session, at, tool_call_id)
    store.subagent_row(session, tool_call_id, at, **row)


@pytest.fixture
def store(target):
    return StoreBuilder(target.engine).create()


def test_healthy_store_passes_every_rule(store, target, project):
    _healthy(store)
    report = nightly(project, target)
    assert failed(report) == {} and report.success
    assert result(report, UNIQUE).observed_value == 0


def test_mixed_storage_forms_are_ordered_exactly(sqlite_target, project):
    # As strings 'T' sorts after ' ': a raw comparison would read observed_at > updated_at.
    store = StoreBuilder(sqlite_target.engine).create()
    session = _healthy(store)
    _live(
        store,
        session,
        "toolu_shapes",
        "2026-07-30T23:00:00Z",
        updated_at="2026-07-30 23:00:00.5+00:00",
        settled_at="2026-07-30 23:00:00+00:00",
        tool_status="completed",
    )
    assert failed(nightly(project, sqlite_target), "rows") == {}


def test_a_sweep_in_the_same_second_is_not_an_inversion(store, target, project):
    """Upstream's turn-end sweep writes updated_at = CURRENT_TIMESTAMP: whole seconds on
    SQLite, so it can read earlier than the fractional created_at of the same second. Such a
    value stands for any instant of its second (CONTRACT §1): no finding, on both dialects."""
    session = _healthy(store)
    _live(
        store,
        session,
        "toolu_swept",
        "2026-07-30 23:00:00.813443524+00:00",
        updated_at="2026-07-30 23:00:00",
        settled_at="2026-07-30 23:00:00",
        tool_status="failed",
    )
    report = nightly(project, target)
    assert ORDER not in failed(report)
    assert result(report, ORDER).observed_value == 0


def test_an_inversion_beyond_the_whole_second_is_caught(store, target, project):
    session = _healthy(store)
    _live(
        store,
        session,
        "toolu_swept_early",
        "2026-07-30 23:00:01.000000001+00:00",
        updated_at="2026-07-30 23:00:00",
    )
    report = nightly(project, target)
    assert failed(report, "rows") == {ORDER: "error"}
    assert result(report, ORDER).observed_value == 1


# The rows a defective writer leaves, keyed by tool_call_id, and the rules each one breaks.
FAULTS: dict[str, tuple[dict, set[str]]] = {
    "": ({}, {IDENTITY}),  # empty tool_call_id
    "toolu_empty_task": ({"task_id": ""}, {IDENTITY}),
    "toolu_exec_empty": ({"agent_execution_id": ""}, {EXEC_PRESENT}),
    "toolu_exec_form": ({"agent_execution_id": "exec-42"}, {EXEC_FORM}),
    "toolu_exec_hex": ({"agent_execution_id": uuid.uuid4().hex}, {EXEC_FORM}),
    "toolu_exec_caps": ({"agent_execution_id": "UNKNOWN"}, {EXEC_FORM}),
    "toolu_source": ({"source": "replay"}, {SOURCE}),
    "toolu_empty_model": ({"model": ""}, {EMPTY_TEXT}),
    "toolu_empty_turn": ({"turn_id": ""}, {EMPTY_TEXT}),
    "toolu_neg_uses": ({"tool_use_count": -1}, {NEGATIVE}),
    "toolu_neg_tokens": ({"total_tokens": -5}, {NEGATIVE}),
    "toolu_zero_tokens": ({"total_tokens": 0}, {ZERO}),
    "toolu_zero_duration": ({"duration_ms": 0}, {ZERO}),
    # The async_launched shape with a 0 in any metric (AC-7a also sees two of them).
    "toolu_async_tokens": (
        {"agent_status": "async_launched", "total_tokens": 0},
        {ASYNC_METRICS, ZERO},
    ),
    "toolu_async_uses": ({"agent_status": "async_launched", "tool_use_count": 0}, {ASYNC_METRICS}),
    "toolu_async_duration": (
        {"agent_status": "async_launched", "duration_ms": 0},
        {ASYNC_METRICS, ZERO},
    ),
    "toolu_unsettled": ({"tool_status": "completed"}, {SETTLED}),
    "toolu_settled_pending": ({"tool_status": "pending", "settled_at": LATER}, {SETTLED}),
    "toolu_settled_no_status": ({"settled_at": LATER}, {SETTLED}),
    "toolu_conflated": (
        {"tool_status": "async_launched", "agent_status": "async_launched"},
        {VOCABULARY},
    ),
    "toolu_updated_early": ({"updated_at": FAULT_AT - US}, {ORDER}),
    "toolu_settled_early": ({"tool_status": "failed", "settled_at": FAULT_AT - US}, {ORDER}),
    "toolu_is_async": ({"is_async": 2}, {IS_ASYNC}),
}
#: Rule -> the facts entry holding its count and sample.
FACT_OF = {
    IDENTITY: "identity",
    EXEC_PRESENT: "execution_missing",
    EXEC_FORM: "execution_form",
    SOURCE: "source",
    BACKFILL_UNKNOWN: "backfill_not_unknown",
    EMPTY_TEXT: "empty_text",
    NEGATIVE: "negative_metric",
    ZERO: "zero_metric",
    ASYNC_METRICS: "async_launched_metrics",
    SETTLED: "settled_terminal",
    VOCABULARY: "tool_status_vocabulary",
    ORDER: "timestamp_order",
    IS_ASYNC: "is_async",
}


def _expected() -> dict[str, set[str]]:
    """Rule -> the tool_call_ids of the fault rows it must catch (and no others)."""
    by_rule: dict[str, set[str]] = {BACKFILL_UNKNOWN: {"toolu_backfill_real"}}
    for tool_call_id, (_, rules) in FAULTS.items():
        for rule in rules:
            by_rule.setdefault(rule, set()).add(tool_call_id)
    return by_rule


def test_each_fault_is_caught_by_its_own_rule_only(store, target, project):
    session = _healthy(store)
    for tool_call_id, (columns, _) in FAULTS.items():
        _live(store, session, tool_call_id, FAULT_AT, **columns)
    store.subagent_message(session, THROUGH_STORED, "toolu_backfill_real")
    store.subagent_row(
        session,
        "toolu_backfill_real",
        THROUGH_STORED,
        source="backfill",
        agent_execution_id=str(uuid.uuid4()),
    )
    report = nightly(project, target)
    expected = _expected()
    assert failed(report, "rows") == dict.fromkeys(expected, "error")
    assert not report.success
    for rule, tool_call_ids in expected.items():
        assert result(report, rule).unexpected_count == len(tool_call_ids), rule
    assert "conflated" in result(report, VOCABULARY).message
    assert "(turn_id: 1, model: 1)" in result(report, EMPTY_TEXT).message

    # The samples carry the offending rows' keys: exactly the designed rows, nothing else.
    with target.engine.connect() as conn:
        facts = row_facts(conn)
    for rule, tool_call_ids in expected.items():
        sample = facts["rules"][FACT_OF[rule]]["sample"]
        assert {row["tool_call_id"] for row in sample} == tool_call_ids, rule
        assert all(row["id"] and "agent_execution_id" in row for row in sample), rule


def test_duplicate_key_and_orphan_row_fail_when_constraints_are_bypassed(target, project):
    store = unconstrained_store(target.engine)
    session = _healthy(store)
    execution = str(uuid.uuid4())
    store.subagent_message(session, AT + 2 * US, "toolu_twice")
    for _ in range(2):
        store.subagent_row(session, "toolu_twice", AT + 2 * US, agent_execution_id=execution)
    store.subagent_row(
        session, "toolu_orphan", AT + 3 * US, task_session_id="session-gone", task_id="task-gone"
    )
    report = nightly(project, target)
    assert failed(report, "rows") == {UNIQUE: "error", ORPHANS: "error"}
    unique = result(report, UNIQUE)
    assert unique.observed_value == 1 and "hold 2 rows" in unique.message
    assert result(report, ORPHANS).observed_value == 1


def test_duplicates_count_keys_and_the_rows_they_hold_apart(target, project):
    """AC-3: two keys held by three rows and by two: 2 keys, 5 rows; a unique key beside them
    is no duplicate."""
    store = unconstrained_store(target.engine)
    session = _healthy(store)
    execution = str(uuid.uuid4())
    for offset, (tool_call, rows) in enumerate({"toolu_3": 3, "toolu_2": 2, "toolu_1": 1}.items()):
        at = AT + (offset + 2) * US
        store.subagent_message(session, at, tool_call)
        for _ in range(rows):
            store.subagent_row(session, tool_call, at, agent_execution_id=execution)
    report = nightly(project, target)
    assert failed(report, "rows") == {UNIQUE: "error"}
    unique = result(report, UNIQUE)
    assert unique.observed_value == 2 and "hold 5 rows" in unique.message


def test_reused_tool_call_id_in_another_execution_is_not_a_duplicate(store, target, project):
    session = _healthy(store)
    store.subagent_message(session, AT + 2 * US, "toolu_reused")
    store.subagent_row(session, "toolu_reused", AT + 2 * US)
    store.subagent_row(session, "toolu_reused", AT + 3 * US)
    assert failed(nightly(project, target), "rows") == {}


def test_rows_missing_while_qualifying_messages_exist_is_a_warning(store, target, project):
    store.keys(CAPTURE, "", EXECUTION)
    session = store.session()
    store.subagent_message(session, T0 - timedelta(days=1), "toolu_history")
    report = nightly(project, target)
    assert failed(report, "rows") == {ROWS_EXIST: "warning"}
    assert result(report, ROWS_EXIST).observed_value == {"rows": 0, "qualifying_messages": 1}


def test_missing_table_row_rules_do_not_apply_but_emptiness_is_noticed(target, project):
    store = StoreBuilder(target.engine).create(subagents=None)
    session = store.session()
    store.subagent_message(session, T0 - timedelta(days=1), "toolu_history")
    report = nightly(project, target)
    assert failed(report, "rows") == {ROWS_EXIST: "warning"}
    assert "table is missing" in result(report, ROWS_EXIST).message
    assert result(report, ZERO).observed_value == "not applicable"


def test_pre_amendment_table_skips_execution_rules_and_checks_its_own_key(target, project):
    store = StoreBuilder(target.engine).create(subagents="pre_amendment")
    session = store.session()
    _live(store, session, "toolu_a", AT, total_tokens=0)
    report = nightly(project, target)
    assert failed(report, "rows") == {ZERO: "error"}
    for rule in (EXEC_PRESENT, EXEC_FORM, BACKFILL_UNKNOWN):
        assert result(report, rule).observed_value == "not applicable"
    assert "pre-amendment" in result(report, UNIQUE).message


def test_completed_rows_that_never_report_metrics_are_disclosed(store, target, project):
    store.keys(CAPTURE, "", EXECUTION)
    session = store.session()
    for n in range(2):
        _live(store, session, f"toolu_{n}", AT + n * US, agent_status="completed")
    report = nightly(project, target)
    assert failed(report, "rows") == {METRICS_REPORTED: "info"}
    assert report.success
