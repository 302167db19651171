"""Alerts on change: a run's failed rules against the last run of its checkpoint on its store.

A rule failing now and not then is new; failing both times, it keeps the time it started
failing; failing then and passing now, it is resolved. A channel notifying on change hears of a
new failure at a severity it reports, or of the recovery, once each; a standing failure stays
quiet (unless it notifies always). The notification cases run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from kandev_dq.contract.instants import BACKFILL_THROUGH
from kandev_dq.contract.tables import kandev_meta
from kandev_dq.records.changes import changes_since, notifies
from kandev_dq.records.results import RuleResult
from kandev_dq.run.check import run_check
from tests.test_notifications import configure, failing, receiver  # noqa: F401 - fixture

T1, T2, T3 = (f"2026-12-0{day}T02:30:00.000000Z" for day in (1, 2, 3))


def _result(expectation: str, severity: str = "error", success: bool = False) -> RuleResult:
    return RuleResult(expectation, ["AC-26"], severity, success, None, None, "", suite="s")


def _register(results: list[RuleResult], changes) -> dict:
    """What the register keeps of a finished run (the failed rules with their since)."""
    return {
        "run_time": changes.previous_run,
        "failed_rules": [
            {"suite": r.suite, "expectation": r.expectation, "severity": r.severity,
             "since": changes.since[f"s/{r.expectation}"]}
            for r in results if not r.success
        ],
    }  # fmt: skip


def test_a_first_run_reports_every_failure_as_new():
    changes = changes_since(None, [_result("a"), _result("b", success=True)], T1)
    assert changes.previous_run is None and changes.new == ["s/a"] and not changes.resolved
    assert changes.since == {"s/a": T1}
    assert notifies(changes, ["error"]) == "failure"


def test_a_standing_failure_keeps_its_since_and_notifies_nothing():
    first = [_result("a")]
    run1 = changes_since(None, first, T1)
    previous = _register(first, run1) | {"run_time": T1}
    run2 = changes_since(previous, [_result("a")], T2)
    assert run2.new == [] and run2.since == {"s/a": T1} and run2.previous_run == T1
    previous = _register([_result("a")], run2) | {"run_time": T2}
    run3 = changes_since(previous, [_result("a")], T3)
    assert run3.since == {"s/a": T1}, "the start of the streak, not the last run"
    assert notifies(run3, ["error"]) is None


def test_a_recovery_is_resolved_and_notifies_once():
    previous = {"run_time": T1, "failed_rules": [{"suite": "s", "expectation": "a",
                                                   "severity": "error", "since": T1}]}  # fmt: skip
    run2 = changes_since(previous, [_result("a", success=True)], T2)
    assert run2.resolved == [{"suite": "s", "expectation": "a", "severity": "error", "since": T1}]
    assert notifies(run2, ["error"]) == "recovery"
    run3 = changes_since({"run_time": T2, "failed_rules": []}, [_result("a", success=True)], T3)
    assert notifies(run3, ["error"]) is None


def test_a_channel_hears_only_of_the_severities_it_reports():
    previous = {"run_time": T1, "failed_rules": [{"suite": "s", "expectation": "a",
                                                   "severity": "error", "since": T1}]}  # fmt: skip
    changes = changes_since(previous, [_result("a"), _result("w", "warning")], T2)
    assert changes.new == ["s/w"]
    assert notifies(changes, ["error"]) is None
    assert notifies(changes, ["error", "warning"]) == "failure"
    # A warning resolved while the error stands: no recovery for an error channel.
    changes = changes_since(
        {"run_time": T1, "failed_rules": [{"suite": "s", "expectation": "a", "severity": "error"},
                                          {"suite": "s", "expectation": "w",
                                           "severity": "warning"}]},
        [_result("a"), _result("w", "warning", success=True)],
        T2,
    )  # fmt: skip
    assert notifies(changes, ["error"]) is None and notifies(changes, ["warning"]) == "recovery"
    assert changes.since == {"s/a": T1}, "an entry without since dates from the run it is in"


SHORTFALL = "expect_no_writer_shortfall_since_capture_since"
METRICS = "expect_completed_rows_to_report_metrics"  # rows' own: no live suite runs it
NIGHTLY_SUITES = ["activation", "rows", "writer_health"]
LIVE_SUITES = ["live_activation", "live_rows", "live_writer_health"]


def _finished(records, checkpoint: str, at: str, suites: list[str], failed, selection=None) -> None:
    """A finished run of ``checkpoint`` on the store ``s1`` at ``at`` (RFC 3339 and run key
    alike: they sort the same), its failed rules ``(suite, expectation, since)``; a partial
    run's ``selection``."""
    part = f".partial-{abs(hash(json.dumps(selection)))}" if selection else ""
    run = {"run_name": f"{checkpoint}{part}@s1", "run_key": at, "run_time": at}
    run["selection"] = json.dumps(selection) if selection else None
    records.register_run(
        run | {"checkpoint": checkpoint, "store_identity": "s1", "store": "s1", "dialect": "x"}
    )
    records.finish_run(
        run["run_name"],
        at,
        {
            "counts": {"suites": suites},
            "failed_rules": [
                {"suite": suite, "expectation": name, "severity": "error", "since": since}
                for suite, name, since in failed
            ],
        },
    )


def test_a_rule_live_runs_is_compared_with_the_last_run_on_the_store_that_judged_it(tmp_path):
    """nightly at T1 fails the shortfall and the metrics rule; live at T2 finds the shortfall
    gone; nightly at T3 compares the shortfall with live's verdict (new again) and the rule
    only nightly runs with its own last run (failing since T1); a live run after it compares
    the shortfall with nightly's (failing since T3, not new); another store is never read."""
    from kandev_dq.records import Records
    from kandev_dq.records.changes import previous_state

    with Records(str(tmp_path / "records.db")) as records:
        _finished(records, "nightly", T1, NIGHTLY_SUITES,
                  [("writer_health", SHORTFALL, T1), ("rows", METRICS, T1)])  # fmt: skip
        _finished(records, "live", T2, LIVE_SUITES, [])
        previous = previous_state(records, "nightly@s1", "s1", NIGHTLY_SUITES, before=T3)
        now = [
            RuleResult(SHORTFALL, [], "error", False, None, None, "", suite="writer_health"),
            RuleResult(METRICS, [], "error", False, None, None, "", suite="rows"),
        ]
        changes = changes_since(previous, now, T3)
        assert changes.previous_run == T2
        assert changes.new == [f"writer_health/{SHORTFALL}"]
        assert changes.since[f"rows/{METRICS}"] == T1
        _finished(records, "nightly", T3, NIGHTLY_SUITES,
                  [("writer_health", SHORTFALL, T3), ("rows", METRICS, T1)])  # fmt: skip
        later = "2026-12-04T02:30:00.000000Z"
        previous = previous_state(records, "live@s1", "s1", LIVE_SUITES, before=later)
        live = [RuleResult(SHORTFALL, [], "error", False, None, None, "", "live_writer_health")]
        changes = changes_since(previous, live, later)
        assert changes.new == [] and changes.since == {f"live_writer_health/{SHORTFALL}": T3}
        assert previous_state(records, "live@s2", "s2", LIVE_SUITES, before=later) is None


def test_a_partial_run_settles_only_the_rules_it_ran(tmp_path):
    """nightly at T1 fails the shortfall; a partial run at T2 of another writer-health rule
    judged the suite but not the shortfall: nightly at T3 still compares the shortfall with T1
    (failing since T1, not new). A partial run of the activation suite alone, after a failing
    run, recovers nothing it did not run: no channel hears of a recovery."""
    from kandev_dq.records import Records
    from kandev_dq.records.changes import previous_state

    other = "expect_writer_to_have_written_since_capture_since"
    with Records(str(tmp_path / "records.db")) as records:
        _finished(records, "nightly", T1, NIGHTLY_SUITES, [("writer_health", SHORTFALL, T1)])
        chosen = {"suites": [], "rules": [other]}
        _finished(records, "nightly", T2, ["writer_health"], [], selection=chosen)
        previous = previous_state(records, "nightly@s1", "s1", NIGHTLY_SUITES, before=T3)
        now = [RuleResult(SHORTFALL, [], "error", False, None, None, "", suite="writer_health")]
        changes = changes_since(previous, now, T3)
        assert changes.new == [] and changes.since == {f"writer_health/{SHORTFALL}": T1}
    activation = [RuleResult("expect_activation_keys_to_be_paired", [], "error", True, None,
                             None, "", suite="activation")]  # fmt: skip
    failing_before = {"run_time": T1, "failed_rules": [
        {"suite": "writer_health", "expectation": SHORTFALL, "severity": "error"}]}  # fmt: skip
    changes = changes_since(failing_before, activation, T2)
    assert changes.before == {} and notifies(changes, ["error"]) is None


def _repair(target) -> None:
    """The missing half of the activation pair is written: AC-24d holds again."""
    with target.engine.begin() as conn:
        conn.execute(sa.insert(kandev_meta).values(key=BACKFILL_THROUGH, value=""))


@pytest.mark.parametrize("when", ["change", "always"])
def test_a_standing_failure_notifies_once_and_its_recovery_once(
    when,
    target,
    project,
    monkeypatch,
    receiver,  # noqa: F811 - the fixture
):
    failing(target)
    configure(monkeypatch, "api", receiver.url)
    if when == "always":
        monkeypatch.setenv("KANDEV_DQ_NOTIFY_WHEN", "always")
    first = run_check(project, target.url, "nightly")
    assert not first.success and len(receiver.received) == 1
    assert all(r.new for r in first.results if not r.success)

    standing = run_check(project, target.url, "nightly")
    assert not standing.success and standing.changes["new"] == []
    assert {r.failing_since for r in standing.results if not r.success} == {first.run_time}
    assert len(receiver.received) == (1 if when == "change" else 2)

    _repair(target)
    recovered = run_check(project, target.url, "nightly")
    assert recovered.success
    resolved = {r["expectation"] for r in recovered.changes["resolved"]}
    assert "expect_activation_keys_to_be_paired" in resolved
    if when == "change":
        assert len(receiver.received) == 2, "the recovery, once"
        assert json.loads(receiver.received[-1]["body"])["kandev_dq"]["verdict"] == "PASSED"
    else:
        assert len(receiver.received) == 2, "always: failed runs only, as GX's notify-on says"

    run_check(project, target.url, "nightly")
    assert len(receiver.received) == 2, "nothing changed"


def _overview_text(project) -> str:
    import html
    import re

    page = project / "uncommitted" / "data_docs" / "local_site" / "overview.html"
    text = re.sub(r"<script.*?</script>|<style.*?</style>", "", page.read_text(), flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))


def test_the_data_docs_overview_marks_new_standing_and_resolved_findings(sqlite_target, project):
    """The overview's findings read as `check` marks them (the overview reads the records
    database only: one dialect suffices)."""
    failing(sqlite_target)
    first = run_check(project, sqlite_target.url, "nightly")
    assert "(new) " in _overview_text(project)
    run_check(project, sqlite_target.url, "nightly")
    assert f"(failing since {first.run_time}) " in _overview_text(project)
    _repair(sqlite_target)
    recovered = run_check(project, sqlite_target.url, "nightly")
    shown = _overview_text(project)
    assert f"Resolved since the last run ({recovered.changes['previous_run']})" in shown
    assert f"failing since {first.run_time})" in shown
