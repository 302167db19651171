"""Partial runs: ``check --suite`` / ``--rule`` run part of a checkpoint, judged as the whole
checkpoint judges it, named and recorded as partial, and compared with the same part only."""

from __future__ import annotations

import pytest

from kandev_dq import api
from kandev_dq.lab import scenarios
from kandev_dq.records import Records
from kandev_dq.records.tables import SCHEMA_VERSION
from kandev_dq.report.history import history, render
from kandev_dq.report.junit import junit_xml
from kandev_dq.report.metrics import run_exposition
from kandev_dq.run.check import verdict_line
from tests.test_check_cli import kandev_dq

ORPHANS = "expect_no_orphan_subagent_rows"  # AC-16, suite rows
PAIRED = "expect_activation_keys_to_be_paired"  # AC-24d, suite activation


def _judged(report, suites=None) -> dict[tuple[str, str], tuple]:
    return {
        (r.suite, r.expectation): (r.success, r.severity, r.unexpected_count, r.observed_value)
        for r in report.results
        if suites is None or r.suite in suites
    }


def test_a_partial_run_judges_its_part_as_the_checkpoint_does(target, project):
    """AC-16 failing in the rows suite: ``--suite rows`` and ``--rule`` give exactly the
    verdicts the whole checkpoint gives those rules, are named and recorded apart, compare
    with the last run of the same part only, leave the project's suites as they were, and
    show as partial in history, the metrics and JUnit."""
    if target.dialect == "sqlite":
        target.engine.dispose()
    scenarios.materialise("orphan_rows", target.url)
    suites_before = {p.name: p.read_bytes() for p in (project / "expectations").glob("*.json")}

    whole = api.check(target.url, "nightly", project)
    rows = api.check(target.url, "nightly", project, suites=["rows"])
    assert _judged(rows) == _judged(whole, {"rows"}) and not rows.success
    assert {r.suite for r in rows.results} == {"rows"}
    assert rows.selection == {"suites": ["rows"], "rules": []}
    assert rows.run_name.startswith("nightly.partial-suite.rows@")
    # Its rules are compared with the last run that judged them: the whole run's standing
    # failure is not new, and nothing it did not run is resolved.
    assert rows.changes == {"previous_run": whole.run_time, "new": [], "resolved": []}
    chosen = api.check(target.url, "nightly", project, rules=[ORPHANS, PAIRED])
    assert set(_judged(chosen)) == {("rows", ORPHANS), ("activation", PAIRED)}
    assert _judged(chosen) == {k: v for k, v in _judged(whole).items() if k in _judged(chosen)}
    assert chosen.run_name != rows.run_name != whole.run_name
    assert chosen.changes["new"] == [] and chosen.changes["resolved"] == []

    again = api.check(target.url, "nightly", project)  # the partial runs hid nothing
    baseline = ("activation", "expect_write_once_baseline_to_predate_this_run")  # taken first
    assert _judged(again) | {baseline: None} == _judged(whole) | {baseline: None}
    assert again.changes["previous_run"] == chosen.run_time and again.changes["new"] == []
    assert [(r["suite"], r["expectation"]) for r in again.changes["resolved"]] == [baseline]
    assert api.check(target.url, "nightly", project, suites=["rows"]).changes["new"] == []

    past = history(project, target.url)
    assert [r.selection for r in past.runs] == [
        {"suites": ["rows"], "rules": []},
        None,
        {"suites": [], "rules": [ORPHANS, PAIRED]},
        {"suites": ["rows"], "rules": []},
        None,
    ]
    assert "(partial run: suite rows)" in "\n".join(render(past))
    assert 'checkpoint="nightly.partial-suite.rows"' in run_exposition(rows)
    assert 'checkpoint="nightly"' in run_exposition(whole)
    assert 'value="nightly.partial-suite.rows"' in junit_xml(rows, "error")
    assert "(partial run: suite rows)" in verdict_line(rows)
    overview = project / "uncommitted" / "data_docs" / "local_site" / "overview.html"
    assert "nightly (partial run: suite rows)" in overview.read_text()  # the runs table
    after = {p.name: p.read_bytes() for p in (project / "expectations").glob("*.json")}
    assert after == suites_before  # the part was chosen in memory


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--suite", "rowz"), "--suite 'rowz': checkpoint nightly runs no such suite"),
        (("--rule", "expect_activation_keys_to_be_parred"), "did you mean " + repr(PAIRED)),
        (("--suite", "rows", "--rule", PAIRED), f"--rule {PAIRED!r}: suite rows runs no such"),
        (
            ("--checkpoint", "live", "--rule", PAIRED),
            "the live suite live_activation runs whole",
        ),
    ],
)
def test_a_part_the_checkpoint_does_not_run_is_refused_by_name(
    options, said, sqlite_target, project
):
    """A name the checkpoint does not run is exit 2 in one line naming it (and the closest
    name), as is part of a live suite (its window and open findings are the whole suite's);
    nothing is run or recorded."""
    from kandev_dq.lab.storebuilder import StoreBuilder

    StoreBuilder(sqlite_target.engine).create()
    sqlite_target.engine.dispose()
    done = kandev_dq("check", "--store", sqlite_target.url, "--project", str(project), *options)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert not (project / "uncommitted" / "records.db").exists()


def test_a_records_database_of_the_last_version_gets_the_selection_column(target):
    """A records database made before partial runs were recorded (schema version 2, no
    ``selection`` column) gets the column on open, its runs read as whole ones."""
    with Records(target.url):
        pass
    with target.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE kandev_dq_runs DROP COLUMN selection")
        conn.exec_driver_sql("DELETE FROM kandev_dq_schema_version WHERE version = 3")
        conn.exec_driver_sql(
            "INSERT INTO kandev_dq_runs (run_name, run_key, run_time, checkpoint, "
            "store_identity, store, dialect, keys, finished) VALUES ('nightly@s', "
            "'20260101T000000.000000Z', '2026-01-01T00:00:00.000000Z', 'nightly', 's', 's', "
            "'sqlite', '{}', false)"
        )
    with Records(target.url) as opened:
        (run,) = opened.run_records(identity="s")
        assert run["selection"] is None and run["checkpoint"] == "nightly"
    with target.engine.connect() as conn:
        query = "SELECT max(version) FROM kandev_dq_schema_version"
        newest = conn.exec_driver_sql(query).scalar()
    assert newest == SCHEMA_VERSION == 3
