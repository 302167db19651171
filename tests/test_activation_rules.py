"""The activation-key rules (CONTRACT §5, the seed), end to end through the GX checkpoint, on
SQLite and PostgreSQL: healthy-but-tricky stores pass, each fault is caught."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kandev_dq.contract.instants import BACKFILL_THROUGH, CAPTURE_SINCE, EXECUTION_SINCE
from kandev_dq.lab.storebuilder import T0, StoreBuilder
from tests.gxhelpers import check, failed, result

ACTIVATION = "activation"
US = timedelta(microseconds=1)
CAPTURE = "2026-07-30T01:39:37.271235Z"  # == T0
THROUGH = "2026-07-30T01:30:00.5Z"
EXECUTION = "2026-07-30T01:39:37.000001Z"


@pytest.fixture
def store(target):
    return StoreBuilder(target.engine).create()


def _activated(store: StoreBuilder, *, through: str = THROUGH) -> str:
    """A fully activated store whose backfill covered one message at THROUGH."""
    session = store.session()
    store.subagent_message(session, "2026-07-30 01:30:00.5+00:00", "toolu_a", status="completed")
    store.subagent_row(session, "toolu_a", "2026-07-30 01:30:00.5+00:00", source="backfill")
    store.keys(CAPTURE, through, EXECUTION)
    return session


def test_fresh_install_with_sentinel_passes(store, target, project):
    store.keys(CAPTURE, "", EXECUTION)
    report = check(project, target)
    assert report.success and report.state == "fully_activated"  # every suite agrees
    assert failed(report, ACTIVATION) == {}


def test_healthy_activated_store_passes_and_disclosure_reports_population(store, target, project):
    session = _activated(store)
    store.subagent_row(session, "toolu_live", T0 + timedelta(seconds=5))
    report = check(project, target)
    assert failed(report, ACTIVATION) == {}
    population = result(report, "expect_population_to_be_disclosed").observed_value
    assert {
        (p["source"], p["capture_since"], p["execution_identity"], p["rows"]) for p in population
    } == {
        ("backfill", "before", "unknown", 1),
        ("live", "at_or_after", "real", 1),
    }


def test_legacy_second_precision_keys_are_info_only(store, target, project):
    session = store.session()
    # The old writer truncated MAX(created_at) to the second: the row lies inside that second.
    store.subagent_message(session, "2026-07-30 01:30:00.75+00:00", "toolu_a")
    store.subagent_row(session, "toolu_a", "2026-07-30 01:30:00.75+00:00", source="backfill")
    store.keys("2026-07-30T01:30:01Z", "2026-07-30T01:30:00Z", EXECUTION)
    report = check(project, target)
    assert failed(report, ACTIVATION) == {"expect_legacy_keys_to_be_disclosed": "info"}


def test_second_precision_keys_written_by_the_amended_build_are_an_error(store, target, project):
    # capture_since after execution_since was written by the amended build (AC-33c order).
    store.keys("2026-07-30T01:40:00Z", "", EXECUTION)
    report = check(project, target)
    assert failed(report, ACTIVATION) == {"expect_new_keys_to_carry_subsecond_precision": "error"}


def test_live_rows_before_capture_since_after_a_retried_backfill_pass(store, target, project):
    session = _activated(store)
    store.subagent_row(session, "toolu_early_live", T0 - timedelta(minutes=3))
    assert failed(check(project, target), ACTIVATION) == {}


def test_real_uuid_before_execution_since_passes_and_counts_as_real(store, target, project):
    session = _activated(store)
    store.subagent_row(session, "toolu_x", "2026-07-30 01:35:00+00:00")
    report = check(project, target)
    assert failed(report, ACTIVATION) == {}
    population = result(report, "expect_population_to_be_disclosed").observed_value
    assert any(
        p["execution_since"] == "before" and p["execution_identity"] == "real" for p in population
    )


def test_rows_exactly_at_the_keys_pass(store, target, project):
    session = _activated(store)
    store.subagent_row(
        session, "toolu_at_capture", CAPTURE.replace("T", " ").replace("Z", "+00:00")
    )
    assert failed(check(project, target), ACTIVATION) == {}


@pytest.mark.parametrize("present", [CAPTURE_SINCE, BACKFILL_THROUGH])
def test_partial_pair_is_an_error_naming_the_repair(store, target, project, present):
    given = {CAPTURE_SINCE: CAPTURE, BACKFILL_THROUGH: "", EXECUTION_SINCE: EXECUTION}
    store.keys(
        capture_since=given[CAPTURE_SINCE] if present == CAPTURE_SINCE else None,
        backfill_through=given[BACKFILL_THROUGH] if present == BACKFILL_THROUGH else None,
        execution_since=EXECUTION,
    )
    report = check(project, target)
    paired = result(report, "expect_activation_keys_to_be_paired")
    assert not paired.success and paired.severity == "error"
    assert "migrate" in paired.message and not report.success


@pytest.mark.parametrize("change", ["rewrite", "delete"])
def test_a_key_rewritten_or_deleted_between_runs_is_caught(store, target, project, change):
    _activated(store)
    assert failed(check(project, target), ACTIVATION) == {}
    store.set_key(
        CAPTURE_SINCE if change == "delete" else BACKFILL_THROUGH,
        None if change == "delete" else "2026-07-30T01:30:00.500001Z",
    )
    report = check(project, target)
    write_once = result(report, "expect_activation_keys_to_be_write_once")
    assert not write_once.success and write_once.severity == "error"
    assert ("None" in write_once.message) == (change == "delete")


def test_backfill_through_later_than_capture_since_is_an_error(store, target, project):
    store.keys(CAPTURE, "2026-07-30T01:39:37.271236Z", EXECUTION)
    assert not result(
        check(project, target), "expect_backfill_through_not_after_capture_since"
    ).success


@pytest.mark.parametrize(
    "value", ["2026-07-30 01:30:00.5+00:00", "yesterday", "2026-07-30T01:30:00"]
)
def test_backfill_through_must_be_rfc3339_or_sentinel(store, target, project, value):
    store.keys(CAPTURE, value, EXECUTION)
    well_formed = result(check(project, target), "expect_activation_keys_to_be_well_formed")
    assert not well_formed.success and BACKFILL_THROUGH in well_formed.message


def test_old_backfill_rows_under_the_sentinel_are_an_error(store, target, project):
    session = store.session()
    store.subagent_row(session, "toolu_old", T0 - timedelta(hours=2), source="backfill")
    store.keys(CAPTURE, "", EXECUTION)
    report = check(project, target)
    assert failed(report, ACTIVATION).get("expect_no_backfill_rows_under_sentinel") == "error"


def test_backfill_rows_inside_the_window_under_the_sentinel_are_a_warning(store, target, project):
    session = store.session()
    store.subagent_row(session, "toolu_raced", T0 - timedelta(seconds=2), source="backfill")
    store.keys(CAPTURE, "", EXECUTION)
    report = check(project, target)
    assert failed(report, ACTIVATION) == {
        "expect_no_backfill_rows_inside_sentinel_window": "warning"
    }


@pytest.mark.parametrize(("offset", "caught"), [(US, True), (-US, False)])
def test_backfill_row_one_microsecond_around_capture_since(store, target, project, offset, caught):
    session = _activated(store)
    store.subagent_row(session, "toolu_b", T0 + offset, source="backfill")
    rule = result(check(project, target), "expect_no_backfill_rows_after_capture_since")
    assert rule.success is not caught


@pytest.mark.parametrize(("offset", "caught"), [(timedelta(0), True), (US, False)])
def test_uncovered_message_at_and_after_backfill_through(store, target, project, offset, caught):
    session = _activated(store)
    store.subagent_message(
        session, T0.replace(minute=30, second=0, microsecond=500000) + offset, "toolu_c"
    )
    rule = result(check(project, target), "expect_backfill_through_to_cover_qualifying_messages")
    assert rule.success is not caught
    if caught:
        assert rule.unexpected_count == 1 and rule.observed_value == 1


def test_uncovered_message_later_that_day_is_not_read_as_covered(store, target, project):
    # As strings, '2026-07-30 23:00…' < '2026-07-30T01:30…': a string comparison would flag it.
    session = _activated(store)
    store.subagent_message(session, "2026-07-30 23:00:00+00:00", "toolu_late")
    assert result(
        check(project, target), "expect_backfill_through_to_cover_qualifying_messages"
    ).success


def test_execution_since_on_a_pre_amendment_table_is_an_error(target, project):
    store = StoreBuilder(target.engine).create(subagents="pre_amendment")
    store.keys(CAPTURE, "", EXECUTION)
    rule = result(check(project, target), "expect_execution_since_only_on_amended_schema")
    assert not rule.success and rule.severity == "error"


def test_amended_table_without_execution_since_is_a_self_heal_warning(store, target, project):
    store.keys(CAPTURE, "", None)
    report = check(project, target)
    assert report.state == "capture_only"
    assert failed(report, ACTIVATION) == {
        "expect_execution_since_not_pending_self_heal": "warning",
        "expect_activation_state_to_be_in_set": "error",
    }


@pytest.mark.parametrize(
    ("keys", "state"),
    [((None, None, None), "not_activated"), ((None, None, EXECUTION), "execution_only")],
)
def test_states_other_than_fully_activated_fail(store, target, project, keys, state):
    store.keys(*keys)
    report = check(project, target)
    assert report.state == state
    assert not result(report, "expect_activation_state_to_be_in_set").success
