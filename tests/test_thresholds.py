"""Count thresholds on a rule that counts, with dbt's names and meaning (``warn_if``,
``error_if`` in a suite entry's meta): judged in the verdict code, shown on every surface, and
listed as the project's deviations. The orphan-row rule (AC-16) is the counting rule used."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kandev_dq.contract.thresholds import (
    DEFAULT,
    ERROR_IF,
    WARN_IF,
    CountThresholds,
    Threshold,
    ThresholdError,
    severity_when_fired,
)
from kandev_dq.lab import scenarios
from kandev_dq.project.deviations import project_deviations
from kandev_dq.run.check import run_check
from kandev_dq.run.explain import explain
from tests.gxhelpers import result
from tests.test_check_cli import kandev_dq

ORPHANS = "expect_no_orphan_subagent_rows"
STATE = "expect_activation_state_to_be_in_set"


@pytest.mark.parametrize(
    ("text", "op", "value"),
    [(">5", ">", 5), (" >= 0 ", ">=", 0), ("<3", "<", 3), ("=2", "=", 2), ("<>0", "<>", 0)],
)
def test_a_threshold_reads_as_dbt_writes_it(text, op, value):
    assert Threshold.parse(text) == Threshold(op, value)


@pytest.mark.parametrize("text", ["5", ">x", "> -1", ">5.5", "=>5", "", None, 5, ">" + "9" * 19])
def test_anything_else_is_refused(text):
    with pytest.raises(ThresholdError, match="is not a count condition"):
        Threshold.parse(text)


@given(st.integers(0, 60), st.integers(0, 60), st.integers(0, 60))
def test_error_if_is_asked_first_then_warn_if_as_dbt_does(count, warn, error):
    thresholds = CountThresholds.of({WARN_IF: f">{warn}", ERROR_IF: f">{error}"})
    fired = thresholds.fired(count)
    assert fired == (ERROR_IF if count > error else WARN_IF if count > warn else None)
    # A threshold not given is dbt's default: any count meets it.
    alone = CountThresholds.of({WARN_IF: f">{warn}"})
    assert str(alone.error_if) == DEFAULT and alone.fired(count) == (ERROR_IF if count else None)


def test_warn_if_fails_a_rule_as_a_warning_at_most():
    assert severity_when_fired(WARN_IF, "error") == "warning"
    assert severity_when_fired(WARN_IF, "info") == "info"
    assert severity_when_fired(ERROR_IF, "warning") == "warning"
    assert CountThresholds.of({"other": 1}) is None


def _thresholds(project, rule: str, **given: str) -> None:
    """Give ``rule`` in the project's suites the count thresholds ``given`` (in its meta)."""
    for path in (project / "expectations").glob("*.json"):
        suite = json.loads(path.read_text(encoding="utf-8"))
        for entry in suite["expectations"]:
            if entry["type"] == rule:
                entry["meta"] = {**(entry.get("meta") or {}), **given}
        path.write_text(json.dumps(suite), encoding="utf-8")


def test_thresholds_judge_the_count_on_every_surface(target, project):
    """A count past warn_if alone fails as a warning; past error_if as the rule's error; within
    both it passes. The JSON, the text report, explain and the deviations say so."""
    if target.dialect == "sqlite":
        target.engine.dispose()
    scenarios.materialise("orphan_rows", target.url)
    count = result(run_check(project, target.url, "nightly"), ORPHANS).unexpected_count
    assert count >= 2

    _thresholds(project, ORPHANS, warn_if=f">{count - 1}", error_if=f">{count}")
    warned = result(run_check(project, target.url, "nightly"), ORPHANS)
    assert (warned.success, warned.severity) == (False, "warning")
    assert warned.unexpected_count == count and warned.query  # still listed
    assert warned.message.endswith(f"(warn_if >{count - 1} holds)")
    assert warned.thresholds == f"warn_if >{count - 1}, error_if >{count}"
    on = ("--store", target.url, "--project", str(project))
    done = kandev_dq("check", *on, "--format", "json")
    [shown] = [r for r in json.loads(done.stdout)["results"] if r["expectation"] == ORPHANS]
    assert (shown["severity"], shown["thresholds"]) == ("warning", warned.thresholds)
    assert f"(warn_if >{count - 1} holds)" in kandev_dq("check", *on).stdout
    explained = explain(target.url, ORPHANS, project=project)
    assert (explained.success, explained.severity) == (False, "warning")
    [deviation] = [d for d in project_deviations(project, "nightly") if d.kind == "thresholds"]
    assert deviation.expectation == ORPHANS and warned.thresholds in deviation.detail
    listed = kandev_dq("rules", "--project", str(project)).stdout.splitlines()
    assert any(ORPHANS in line and f"error ({warned.thresholds})" in line for line in listed)

    _thresholds(project, ORPHANS, warn_if=f">{count}", error_if=f">{count}")
    within = result(run_check(project, target.url, "nightly"), ORPHANS)
    assert within.success and "within the thresholds" in within.message

    _thresholds(project, ORPHANS, warn_if=">0", error_if=f">={count}")
    failed = result(run_check(project, target.url, "nightly"), ORPHANS)
    assert (failed.success, failed.severity) == (False, "error")
    assert failed.message.endswith(f"(error_if >={count} holds)")


def test_a_rule_that_counts_nothing_says_it_cannot_take_thresholds(sqlite_target, project):
    scenarios.materialise("healthy_baseline", sqlite_target.url)
    _thresholds(project, STATE, warn_if=">5")
    judged = result(run_check(project, sqlite_target.url, "nightly"), STATE)
    assert not judged.success and "counts nothing to compare" in judged.message


@pytest.mark.parametrize(
    ("rule", "meta", "said"),
    [
        (ORPHANS, {WARN_IF: "more than 5"}, "warn_if is not a count condition"),
        ("expect_column_values_to_not_be_null", {ERROR_IF: ">5"}, "judged by kandev-dq's rules"),
    ],
)
def test_the_vetting_refuses_thresholds_it_cannot_judge(sqlite_target, project, rule, meta, said):
    scenarios.materialise("healthy_baseline", sqlite_target.url)
    path = project / "expectations" / "rows.json"
    suite = json.loads(path.read_text(encoding="utf-8"))
    if rule == ORPHANS:
        entry = next(e for e in suite["expectations"] if e["type"] == rule)
        entry["meta"] = meta
    else:
        entry = {"type": rule, "kwargs": {"column": "id"}, "meta": meta, "severity": "critical"}
        suite["expectations"].append(entry)
    path.write_text(json.dumps(suite), encoding="utf-8")
    done = kandev_dq("check", "--store", sqlite_target.url, "--project", str(project))
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert f"{path}: expectations[" in done.stderr and "Traceback" not in done.stderr
