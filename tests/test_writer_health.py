"""The writer-health rules (CONTRACT §6, AC-26 … AC-29), end to end through the nightly
checkpoint on SQLite and PostgreSQL: shortfall and excess as separate directed differences of
distinct keys, scoped exactly at capture_since, with a scoped MAX(observed_at)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kandev_dq.contract.instants import CAPTURE_SINCE
from kandev_dq.lab import sample
from kandev_dq.lab.storebuilder import T0, StoreBuilder
from kandev_dq.migration import runner as migrate
from kandev_dq.store.access import open_store
from tests.gxhelpers import check, failed, result

US = timedelta(microseconds=1)
CAPTURE = "2026-07-30T01:39:37.271235Z"  # == T0
THROUGH = "2026-07-30T01:30:00.5Z"
EXECUTION = "2026-07-30T01:39:37.000001Z"

SHORTFALL = "expect_no_writer_shortfall_since_capture_since"
EXCESS = "expect_no_writer_excess_since_capture_since"
COLLISIONS = "expect_no_cross_execution_collisions_since_capture_since"
WRITTEN = "expect_writer_to_have_written_since_capture_since"
ACTIVITY = "expect_subagent_activity_since_capture_since"


@pytest.fixture
def store(target):
    return StoreBuilder(target.engine).create()


def nightly(project, target):
    return check(project, target, "nightly")


def _activated(store: StoreBuilder) -> str:
    """A fresh install activated at CAPTURE (the backfill matched nothing)."""
    store.keys(CAPTURE, "", EXECUTION)
    return store.session()


def _live(store: StoreBuilder, session: str, tool_call_id: str, at, **row) -> None:
    """One subagent launch as a healthy writer leaves it: its message and its row."""
    store.subagent_message(session, at, tool_call_id)
    store.subagent_row(session, tool_call_id, at, **row)


def test_healthy_writer_passes(store, target, project):
    session = _activated(store)
    _live(store, session, "toolu_a", T0 + timedelta(seconds=1))
    _live(store, session, "toolu_b", T0 + timedelta(seconds=2))
    report = nightly(project, target)
    assert failed(report) == {} and report.success
    shortfall = result(report, SHORTFALL)
    assert shortfall.observed_value == 0 and "2 qualifying key(s)" in shortfall.message
    assert result(report, WRITTEN).observed_value == "2026-07-30T01:39:39.271235Z"


def test_messages_skipped_by_ac2_raise_no_false_alarm(store, target, project):
    session = _activated(store)
    _live(store, session, "toolu_a", T0 + timedelta(seconds=1))
    store.subagent_message(session, T0 + timedelta(seconds=2), None)  # no tool_call_id
    store.subagent_message(session, T0 + timedelta(seconds=3), "")  # empty tool_call_id
    store.subagent_message(session, T0 + timedelta(seconds=4), "toolu_c", task_id="")
    report = nightly(project, target)
    assert failed(report, "writer_health") == {}
    assert result(report, SHORTFALL).observed_value == 0


def test_two_messages_of_one_subagent_are_one_key(store, target, project):
    session = _activated(store)
    store.subagent_message(session, T0 + timedelta(seconds=1), "toolu_a", status="async_launched")
    store.subagent_message(session, T0 + timedelta(seconds=9), "toolu_a", status="completed")
    store.subagent_row(session, "toolu_a", T0 + timedelta(seconds=1))
    report = nightly(project, target)
    assert failed(report, "writer_health") == {}
    assert "every one of 1 qualifying key(s)" in result(report, SHORTFALL).message


def test_cross_execution_collision_is_disclosed_not_a_shortfall(store, target, project):
    session = _activated(store)
    store.subagent_message(session, T0 + timedelta(seconds=1), "toolu_reused")
    store.subagent_row(session, "toolu_reused", T0 + timedelta(seconds=1))
    store.subagent_row(session, "toolu_reused", T0 + timedelta(seconds=5))  # a later execution
    report = nightly(project, target)
    assert report.success
    assert failed(report, "writer_health") == {COLLISIONS: "info"}
    assert result(report, SHORTFALL).observed_value == 0
    assert result(report, EXCESS).observed_value == 0
    collisions = result(report, COLLISIONS)
    assert collisions.observed_value == 1 and "2 row(s) over 1 key(s)" in collisions.message


def test_standing_excess_does_not_hide_the_first_missed_subagent(store, target, project):
    session = _activated(store)
    _live(store, session, "toolu_ok", T0 + timedelta(seconds=1))
    store.subagent_row(session, "toolu_orphan_row", T0 + timedelta(seconds=2))  # excess 1
    assert result(nightly(project, target), SHORTFALL).success
    # The writer stops: the very first missed subagent is an alarm, excess notwithstanding.
    store.subagent_message(session, T0 + timedelta(seconds=3), "toolu_missed")
    report = nightly(project, target)
    assert failed(report, "writer_health") == {SHORTFALL: "error", EXCESS: "warning"}
    shortfall = result(report, SHORTFALL)
    assert shortfall.observed_value == 1 and shortfall.unexpected_count == 1
    assert "stopped or failing" in shortfall.message
    assert result(report, EXCESS).observed_value == 1
    assert not report.success


def test_standing_excess_with_a_healthy_writer_is_a_warning_only(store, target, project):
    session = _activated(store)
    _live(store, session, "toolu_a", T0 + timedelta(seconds=1))
    _live(store, session, "toolu_b", T0 + timedelta(seconds=2))
    store.subagent_row(session, "toolu_message_lost", T0 + timedelta(seconds=3))
    report = nightly(project, target)
    assert report.success
    assert failed(report) == {EXCESS: "warning"}
    assert result(report, SHORTFALL).observed_value == 0
    excess = result(report, EXCESS)
    assert excess.observed_value == 1 and "not an alarm" in excess.message


def test_legacy_metadata_rows_are_counted_not_exceptions(store, target, project):
    session = _activated(store)
    _live(store, session, "toolu_a", T0 + timedelta(seconds=1))
    for n, raw in enumerate(["", "null", None]):
        store.message(session, T0 + timedelta(seconds=2 + n), metadata=raw)
    store.subagent_message(session, T0 + timedelta(seconds=9), "toolu_missed")
    report = nightly(project, target)
    shortfall = result(report, SHORTFALL)
    assert "could not evaluate" not in shortfall.message
    assert shortfall.observed_value == 1
    assert failed(report, "writer_health") == {SHORTFALL: "error"}


@pytest.mark.parametrize(
    ("created_at", "counted"),
    [
        # Later on capture_since's calendar day: as strings ' ' < 'T' would read it as before.
        ("2026-07-30 23:00:00+00:00", True),
        ("2026-07-30T01:39:37.271235Z", True),  # equality lands after
        (T0 - US, False),
    ],
    ids=["later-same-day", "exactly-at", "one-microsecond-before"],
)
def test_shortfall_boundary_is_exact(store, target, project, created_at, counted):
    session = _activated(store)
    _live(store, session, "toolu_ok", T0 + timedelta(seconds=1))
    store.subagent_message(session, created_at, "toolu_unwritten")
    shortfall = result(nightly(project, target), SHORTFALL)
    assert shortfall.observed_value == (1 if counted else 0)


def test_row_observed_before_capture_since_does_not_cover_a_later_message(store, target, project):
    session = _activated(store)
    _live(store, session, "toolu_ok", T0 + timedelta(seconds=1))
    store.subagent_message(session, T0, "toolu_straddle")
    store.subagent_row(session, "toolu_straddle", T0 - US)
    assert result(nightly(project, target), SHORTFALL).observed_value == 1


@pytest.mark.parametrize("value", [None, "2026-07-30 01:39:37.271235+00:00", ""])
def test_without_a_usable_capture_since_the_comparison_does_not_run(store, target, project, value):
    session = store.session()
    store.keys(None, None, EXECUTION)
    if value is not None:
        store.set_key(CAPTURE_SINCE, value)
    store.subagent_message(session, T0 + timedelta(seconds=1), "toolu_a")
    report = nightly(project, target)
    shortfall = result(report, SHORTFALL)
    assert not shortfall.success and shortfall.severity == "error"
    assert shortfall.observed_value == "not run"
    assert ("absent" if value is None else "malformed") in shortfall.message
    assert CAPTURE_SINCE in shortfall.message and "AC-28a" in shortfall.message
    assert failed(report, "writer_health") == {SHORTFALL: "error"}
    for name in (EXCESS, COLLISIONS, WRITTEN, ACTIVITY):
        assert result(report, name).observed_value == "not run"
    assert not report.success


def _backfilled_then_silent(store: StoreBuilder) -> str:
    """A backfilled row and a live row, both before capture_since; nothing after."""
    session = store.session()
    store.subagent_message(session, "2026-07-30 01:30:00.5+00:00", "toolu_old")
    store.subagent_row(session, "toolu_old", "2026-07-30 01:30:00.5+00:00", source="backfill")
    store.subagent_row(session, "toolu_pre_activation", T0 - timedelta(minutes=1))
    store.keys(CAPTURE, THROUGH, EXECUTION)
    return session


def test_scoped_max_is_null_with_traffic_is_an_error(store, target, project):
    session = _backfilled_then_silent(store)
    store.subagent_message(session, T0 + timedelta(seconds=1), "toolu_new")
    report = nightly(project, target)
    written = result(report, WRITTEN)
    # An unscoped MAX(observed_at) would be the pre-activation row's instant.
    assert written.observed_value is None and "produced nothing" in written.message
    assert failed(report, "writer_health") == {SHORTFALL: "error", WRITTEN: "error"}


def test_scoped_max_is_null_without_traffic_is_a_warning(store, target, project):
    _backfilled_then_silent(store)
    report = nightly(project, target)
    assert result(report, ACTIVITY).observed_value is None
    assert failed(report, "writer_health") == {ACTIVITY: "warning"}
    assert report.success


def test_missing_table_reports_every_qualifying_key(target, project):
    store = StoreBuilder(target.engine).create(subagents=None)
    store.keys(CAPTURE, "", EXECUTION)
    session = store.session()
    store.subagent_message(session, T0 + timedelta(seconds=1), "toolu_a")
    report = nightly(project, target)
    shortfall = result(report, SHORTFALL)
    assert (
        shortfall.observed_value == 1 and "task_session_subagents is missing" in shortfall.message
    )
    assert result(report, EXCESS).observed_value == "not applicable"
    assert failed(report, "writer_health") == {SHORTFALL: "error", WRITTEN: "error"}


def test_pre_amendment_table_is_compared_on_its_keys(target, project):
    store = StoreBuilder(target.engine).create(subagents="pre_amendment")
    store.keys(CAPTURE, "", None)
    session = store.session()
    _live(store, session, "toolu_a", T0 + timedelta(seconds=1))
    store.subagent_message(session, T0 + timedelta(seconds=2), "toolu_b")
    report = nightly(project, target)
    assert failed(report, "writer_health") == {SHORTFALL: "error"}
    assert result(report, SHORTFALL).observed_value == 1


def test_sample_store_with_live_traffic_then_a_stopped_writer(target, project):
    sample.create_store(target.engine)
    sample.generate(target.engine, scale=1)
    store = open_store(target.url, read_only=False)
    try:
        assert migrate.run(store).ok
    finally:
        store.dispose()
    sample.append_live_traffic(target.engine, count=30, writer="healthy")
    report = nightly(project, target)
    assert failed(report) == {} and report.success
    assert "every one of 30 qualifying key(s)" in result(report, SHORTFALL).message

    sample.append_live_traffic(target.engine, count=4, writer="stopped")
    report = nightly(project, target)
    shortfall = result(report, SHORTFALL)
    assert shortfall.observed_value == 4 and len(shortfall_sample(target)) == 4
    assert failed(report, "writer_health") == {SHORTFALL: "error"}


def shortfall_sample(target) -> list:
    """The shortfall's offending keys read straight from the facts (message ids included)."""
    from kandev_dq.facts.health import health_facts

    with target.engine.connect() as conn:
        part = health_facts(conn)["shortfall"]
    assert all(row["message_id"] for row in part["sample"])
    return part["sample"]
