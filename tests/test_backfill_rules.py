"""The backfill reconciliation rules (CONTRACT §4), end to end through the post_migration
checkpoint, on SQLite and PostgreSQL: a store migrated from realistic and tricky messages
passes, and each fault injected into the migrated rows is caught by its own rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.facts.backfill import backfill_facts
from kandev_dq.lab import sample
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.migration import runner as migrate
from kandev_dq.store.access import open_store
from tests.gxhelpers import check, failed, result
from tests.pasted import read_only_rows
from tests.subagent_rows import add_message, add_session, at, subagent_metadata

NOTICE = "expect_backfill_reconciliation_not_vacuous"
IDENTITY = "expect_backfill_identity_to_match_message"
TURN = "expect_backfill_turn_id_to_match_message"
STATUSES = "expect_backfill_statuses_to_match_message"
METRICS = "expect_backfill_metrics_to_match_message"
TEXT = "expect_backfill_text_to_match_message"
OBSERVED = "expect_backfill_observed_at_to_be_message_created_at"
SETTLED = "expect_backfill_settled_at_to_follow_tool_status"
WINNER = "expect_backfill_rows_from_winning_message"
ORPHAN = "expect_no_backfill_rows_without_qualifying_message"
RELABELLED = "expect_no_backfill_rows_relabelled_live"
BACKFILL_RULES = (
    NOTICE,
    IDENTITY,
    TURN,
    STATUSES,
    METRICS,
    TEXT,
    OBSERVED,
    SETTLED,
    WINNER,
    ORPHAN,
    RELABELLED,
)
US = timedelta(microseconds=1)
SAMPLE_MESSAGES = sample.SUBAGENT_MESSAGES_PER_UNIT
#: Qualifying keys among the tricky messages; one is taken by a live 'unknown' row (AC-22).
TRICKY_KEYS = 8
TRICKY_BACKFILLED = 7


def tricky_messages(conn: sa.Connection) -> None:
    """Hand-built messages the mapping must get right, and ones it must skip (AC-21a)."""
    add_session(conn, "s-tricky", "t-tricky", turns=("u-tricky", ""))

    def msg(message_id: str, metadata, **kw) -> None:
        kw.setdefault("session_id", "s-tricky")
        kw.setdefault("task_id", "t-tricky")
        kw.setdefault("turn_id", "u-tricky")
        add_message(conn, message_id, metadata, **kw)

    done = {"created_at": at(1), "updated_at": at(90)}
    msg(
        "m-parent",
        subagent_metadata(
            "tc-parent", total_tokens=1200, tool_use_count=3, duration_ms=4500, model="opus"
        ),
        **done,
    )
    msg(  # nested, still running: async_launched carries no metrics (AC-7)
        "m-child",
        subagent_metadata(
            "tc-child",
            status="in_progress",
            agent_status="async_launched",
            parent_tool_call_id="tc-parent",
            total_tokens=50,
            is_async=True,
        ),
        created_at=at(2),
        updated_at=at(3),
    )
    msg("m-noturn", subagent_metadata("tc-noturn"), turn_id="", created_at=at(3))  # '' -> NULL
    msg(  # reported zeros (AC-7a / AC-8) and '' text
        "m-zero",
        subagent_metadata(
            "tc-zero", total_tokens=0, tool_use_count=0, duration_ms=0, model="", description=""
        ),
        created_at=at(4),
    )
    msg(  # the statuses disagree: terminality comes from tool_status only (AC-12)
        "m-swap",
        subagent_metadata("tc-swap", status="pending", agent_status="completed", total_tokens=-5),
        created_at=at(5),
    )
    # AC-21b: the newest created_at wins; on a tie, the greatest id.
    msg(
        "m-dup-old",
        subagent_metadata("tc-dup", status="in_progress", agent_status="async_launched"),
        created_at=at(6),
        updated_at=at(6.5),
    )
    msg(
        "m-dup-new", subagent_metadata("tc-dup", total_tokens=7), created_at=at(8), updated_at=at(9)
    )
    msg("m-tie-a", subagent_metadata("tc-tie", status="failed"), created_at=at(10))
    msg("m-tie-b", subagent_metadata("tc-tie", status="cancelled"), created_at=at(10))
    # A key a live frame without an execution id already holds (AC-22: the live row wins).
    msg("m-live", subagent_metadata("tc-live"), created_at=at(11))
    # AC-21a: skipped, never failing the statement; '' metadata read as {} (AC-23b).
    msg("m-no-tool", subagent_metadata(None), created_at=at(12))
    msg("m-empty-tool", subagent_metadata(""), created_at=at(13))
    msg("m-no-task", subagent_metadata("tc-notask"), task_id="", created_at=at(14))
    msg("m-empty-meta", "", created_at=at(15))


@pytest.fixture
def migrated(target):
    """A store migrated from a realistic history (scale 1) plus the tricky messages."""
    sample.create_store(target.engine, subagents="amended")
    sample.generate(target.engine, scale=1)
    with target.engine.begin() as conn:
        tricky_messages(conn)
    StoreBuilder(target.engine).subagent_row(
        "s-tricky", "tc-live", at(11, micros=1500), agent_execution_id="unknown"
    )
    store = open_store(target.url, read_only=False)
    try:
        report = migrate.run(store)
    finally:
        store.dispose()
    assert report.ok, report.render()
    assert report.backfill_rows == SAMPLE_MESSAGES + TRICKY_BACKFILLED
    return target


def facts(target) -> dict:
    """The backfill facts as the rules see them (the samples are not in a RuleResult)."""
    with target.engine.connect() as conn:
        return backfill_facts(conn, window_minutes=10)


def backfill_failures(report) -> dict[str, str]:
    return {name: sev for name, sev in failed(report).items() if name in BACKFILL_RULES}


def execute(target, sql: str, **params) -> None:
    with target.engine.begin() as conn:
        conn.execute(sa.text(sql), params)


def update_row(target, row_id: str, **values) -> None:
    """Rewrite columns of one subagent row (timestamps as datetimes, stored per dialect)."""
    t = schema.subagents
    with target.engine.begin() as conn:
        conn.execute(t.update().where(t.c.id == row_id).values(**values))


def row(target, row_id: str) -> dict:
    t = schema.subagents
    with target.engine.connect() as conn:
        return dict(conn.execute(sa.select(t).where(t.c.id == row_id)).mappings().one())


def insert_backfill_row(target, message_id: str, tool_call_id: str, *, task_id: str) -> None:
    """A backfill row as a faulty backfill would write it from ``message_id``."""
    t = schema.subagents
    with target.engine.begin() as conn:
        conn.execute(
            t.insert().values(
                id=message_id,
                task_session_id="s-tricky",
                task_id=task_id,
                turn_id="u-tricky",
                tool_call_id=tool_call_id,
                agent_execution_id="unknown",
                agent_status="completed",
                tool_status="completed",
                source="backfill",
                observed_at=at(12),
                settled_at=at(12),
                updated_at=at(12),
            )
        )


def test_migrated_realistic_store_passes(migrated, project):
    report = check(project, migrated, "post_migration")
    assert failed(report) == {}
    notice = result(report, NOTICE)
    assert notice.observed_value == {
        "expected_rows": SAMPLE_MESSAGES + TRICKY_KEYS,
        "backfill_rows": SAMPLE_MESSAGES + TRICKY_BACKFILLED,
        "compared_in_full": SAMPLE_MESSAGES + TRICKY_BACKFILLED,
        "write_once_fields_only": 0,
    }


def _shift_observed(target):
    update_row(target, "m-parent", observed_at=row(target, "m-parent")["observed_at"] + US)


def _loser_values(target):
    update_row(
        target,
        "m-dup-new",
        observed_at=at(6),
        tool_status="in_progress",
        agent_status="async_launched",
        total_tokens=None,
        settled_at=None,
        updated_at=at(6.5),
    )


FAULTS = {
    "turn_id_nulled": (
        lambda t: update_row(t, "m-parent", turn_id=None),
        {TURN: "error"},
    ),
    "tool_status_from_agent_status": (
        lambda t: execute(t, "UPDATE task_session_subagents SET tool_status = agent_status"),
        {STATUSES: "error"},
    ),
    "statuses_swapped": (
        lambda t: update_row(t, "m-swap", tool_status="completed", agent_status="pending"),
        {STATUSES: "error"},
    ),
    "settled_on_non_terminal": (
        lambda t: update_row(t, "m-child", settled_at=at(3)),
        {SETTLED: "error"},
    ),
    "settled_missing_on_terminal": (
        lambda t: update_row(t, "m-parent", settled_at=None),
        {SETTLED: "error"},
    ),
    "zero_total_tokens": (
        lambda t: update_row(t, "m-zero", total_tokens=0),
        {METRICS: "error"},
    ),
    "metrics_on_async_launched": (
        lambda t: update_row(t, "m-child", total_tokens=50),
        {METRICS: "error"},
    ),
    "empty_model": (
        lambda t: update_row(t, "m-parent", model=""),
        {TEXT: "error"},
    ),
    "observed_at_shifted_1us": (_shift_observed, {OBSERVED: "error"}),
    "wrong_task": (
        lambda t: update_row(t, "m-parent", task_id="t-other"),
        {IDENTITY: "error"},
    ),
    "tie_loser_id": (
        lambda t: execute(
            t, "UPDATE task_session_subagents SET id = 'm-tie-a' WHERE id = 'm-tie-b'"
        ),
        {WINNER: "error"},
    ),
    "row_from_message_without_tool_call_id": (
        lambda t: insert_backfill_row(t, "m-no-tool", "", task_id="t-tricky"),
        {ORPHAN: "error"},
    ),
    "row_from_message_without_task_id": (
        lambda t: insert_backfill_row(t, "m-no-task", "tc-notask", task_id=""),
        {ORPHAN: "error"},
    ),
    "relabelled_live": (
        lambda t: update_row(t, "m-parent", source="live"),
        {RELABELLED: "warning"},
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_is_caught_by_its_rule(migrated, project, fault):
    inject, expected = FAULTS[fault]
    inject(migrated)
    report = check(project, migrated, "post_migration")
    assert backfill_failures(report) == expected
    (name,) = expected
    caught = result(report, name)
    assert caught.unexpected_count and caught.unexpected_count >= 1
    assert report.success is (expected[name] != "error")


def test_the_ac21b_loser_values_are_caught(migrated, project):
    _loser_values(migrated)
    report = check(project, migrated, "post_migration")
    failures = backfill_failures(report)
    assert failures[WINNER] == "error"
    assert set(failures) == {WINNER, OBSERVED, STATUSES, METRICS, SETTLED}
    assert result(report, WINNER).unexpected_count == 1
    (offending,) = facts(migrated)["families"]["winner"]["sample"]
    assert offending["row_id"] == "m-dup-new" and offending["loser_id"] == "m-dup-old"


def test_the_sample_names_the_offending_row(migrated, project):
    update_row(migrated, "m-noturn", turn_id="u-tricky")
    report = check(project, migrated, "post_migration")
    assert backfill_failures(report) == {TURN: "error"}
    (offending,) = facts(migrated)["families"]["turn_id"]["sample"]
    assert offending["row_id"] == "m-noturn" and offending["message_turn_id"] is None
    assert offending["turn_id"] == "u-tricky"


def test_drifted_rows_are_compared_on_write_once_fields_only(migrated, project):
    now = datetime.now(UTC)
    # A live frame without an execution id merged onto a backfill row (AC-1, AC-22) ...
    update_row(
        migrated,
        "m-child",
        tool_status="completed",
        agent_status="completed",
        total_tokens=900,
        settled_at=now,
        updated_at=now,
    )
    # ... and a message that settled after the backfill had read it.
    m = schema.task_session_messages
    with migrated.engine.begin() as conn:
        conn.execute(
            m.update()
            .where(m.c.id == "m-swap")
            .values(metadata=json.dumps(subagent_metadata("tc-swap")), updated_at=now)
        )
    report = check(project, migrated, "post_migration")
    assert failed(report) == {}
    assert result(report, NOTICE).observed_value["write_once_fields_only"] == 2
    # Write-once fields stay compared on a drifted row.
    update_row(migrated, "m-child", turn_id=None)
    assert backfill_failures(check(project, migrated, "post_migration")) == {TURN: "error"}


def test_a_store_whose_backfill_has_not_run_says_so(target, project):
    sample.create_store(target.engine, subagents="amended")
    with target.engine.begin() as conn:
        tricky_messages(conn)
    report = check(project, target, "post_migration")
    assert backfill_failures(report) == {NOTICE: "warning"}
    notice = result(report, NOTICE)
    assert "vacuously" in notice.message
    assert "nothing to compare" in result(report, TURN).message
    # The keys it counted, listed by its query as a reviewer pastes it.
    listed = read_only_rows(target.url, target.dialect, notice.query or "")
    assert len(listed) == notice.unexpected_count == TRICKY_KEYS, listed


def test_an_empty_migrated_store_passes_and_says_nothing_was_compared(target, project):
    sample.create_store(target.engine)
    store = open_store(target.url, read_only=False)
    try:
        assert migrate.run(store).ok
    finally:
        store.dispose()
    report = check(project, target, "post_migration")
    assert failed(report) == {}
    assert result(report, NOTICE).message == "no qualifying message and no backfill row"


def test_pre_amendment_backfill_rows_are_reconciled_without_crashing(target, project):
    builder = StoreBuilder(target.engine).create(subagents="pre_amendment")
    session = builder.session()
    created = "2026-07-30 01:30:00.5+00:00"
    message = builder.subagent_message(
        session, created, "toolu_a", tool_status="completed", status="completed"
    )
    with target.engine.connect() as conn:
        turn = conn.scalar(
            sa.select(schema.task_session_messages.c.turn_id).where(
                schema.task_session_messages.c.id == message
            )
        )
    builder.subagent_row(
        session,
        "toolu_a",
        created,
        source="backfill",
        id=message,
        turn_id=turn,
        tool_status="completed",
        agent_status="completed",
        settled_at=created,
    )
    report = check(project, target, "post_migration")
    assert backfill_failures(report) == {}
    notice = result(report, NOTICE)
    assert notice.observed_value["compared_in_full"] == 1
    assert "pre-amendment" in notice.observed_value["note"]
    execute(target, "UPDATE task_session_subagents SET tool_status = 'pending'")
    assert backfill_failures(check(project, target, "post_migration")) == {STATUSES: "error"}
