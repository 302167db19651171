"""`--format junit`, read by a real JUnit consumer (junitparser), never by string matching."""

from __future__ import annotations

from types import SimpleNamespace

from junitparser import Failure, JUnitXml

from kandev_dq.project.deviations import Deviation
from kandev_dq.records.results import RuleResult
from kandev_dq.report.junit import junit_xml


def _rule(suite, expectation, severity, success, message, rules=("AC-24",)):
    return RuleResult(expectation, list(rules), severity, success, None, None, message, suite)


REPORT = SimpleNamespace(
    checkpoint="pre_release",
    scope="pre_release",  # a whole run's: its checkpoint
    store="sqlite:/srv/kandev.db",
    run_time="2026-11-30T19:00:00Z",
    duration_s=1.25,
    suite_seconds={"activation": 0.5, "writer_health": 0.25, "rows": 0.125},
    project_deviations=[],
    explain_command=lambda rule: f"kandev-dq explain {rule} --store 'sqlite:////srv/k.db' --run",
    results=[
        _rule("activation", "expect_activation_keys_to_be_write_once", "error", False, "rewritten"),
        _rule("activation", "expect_population_to_be_disclosed", "info", False, "disclosed"),
        _rule("writer_health", "expect_message_metadata_to_be_json", "warning", False, "1 bad"),
        _rule("writer_health", "expect_no_writer_shortfall_since_capture_since", "error", True, ""),
        _rule("rows", "expect_no_negative_metrics", "error", False, "id \x1b<&>\ud800", ("AC-9",)),
    ],
)
DEVIATIONS = [
    Deviation("rows", "expect_no_orphan_subagent_rows", "removed", "kandev-dq runs it at error"),
    Deviation("schema", "", "emptied", "the suite holds no rule \x1b<&>"),
]


def _parsed(tmp_path, fail_on, report=REPORT):
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml(report, fail_on), encoding="utf-8")
    return JUnitXml.fromfile(str(path))


def _cases(xml):
    return {(suite.name, case.name): case for suite in xml for case in suite}


def _properties(case) -> list[tuple[str, str]]:
    return [(p.get("name"), p.get("value")) for p in case._elem.iter("property")]


def test_one_testsuite_per_suite_and_one_testcase_per_rule(tmp_path):
    xml = _parsed(tmp_path, "error")
    assert [suite.name for suite in xml] == ["activation", "writer_health", "rows"]
    assert [suite.tests for suite in xml] == [2, 2, 1]
    assert [suite.time for suite in xml] == [0.5, 0.25, 0.125]  # each suite's own duration
    props = {p.name: p.value for p in next(iter(xml)).properties()}
    assert props == {"checkpoint": "pre_release", "store": "sqlite:/srv/kandev.db"}


def test_failed_error_rules_fail_with_the_finding_as_message(tmp_path):
    cases = _cases(_parsed(tmp_path, "error"))
    write_once = cases[("activation", "expect_activation_keys_to_be_write_once")]
    [failure] = write_once.result
    assert isinstance(failure, Failure) and failure.message == "rewritten"
    assert failure.type == "error"
    # The way to the rows it counted, after the finding; a passing case names none.
    assert failure.text == (
        "[AC-24] rewritten\nexplain: kandev-dq explain expect_activation_keys_to_be_write_once"
        " --store 'sqlite:////srv/k.db' --run"
    )
    assert _properties(write_once) == [("ac", "AC-24"), ("severity", "error")]
    negative = cases[("rows", "expect_no_negative_metrics")]
    assert negative.result[0].message == "id \\x1b<&>\\ud800"  # escaped, and still XML
    # A failed warning or info rule passes under --fail-on error, its finding kept.
    warned = cases[("writer_health", "expect_message_metadata_to_be_json")]
    assert warned.is_passed and warned.system_out == "warning: 1 bad"
    assert cases[("activation", "expect_population_to_be_disclosed")].is_passed
    assert cases[("writer_health", "expect_no_writer_shortfall_since_capture_since")].is_passed


def test_warnings_fail_under_fail_on_warning(tmp_path):
    xml = _parsed(tmp_path, "warning")
    cases = _cases(xml)
    [failure] = cases[("writer_health", "expect_message_metadata_to_be_json")].result
    assert failure.message == "1 bad" and failure.type == "warning"
    assert cases[("activation", "expect_population_to_be_disclosed")].is_passed  # info never
    assert xml.failures == 3 and xml.tests == 5


def test_each_project_deviation_is_a_property_of_every_suite(tmp_path):
    # A suite that ran holding no rule (emptied) is a suite of no tests, still listed.
    emptied = {**vars(REPORT), "suite_seconds": {**REPORT.suite_seconds, "schema": 0.0625}}
    report = SimpleNamespace(**emptied | {"project_deviations": DEVIATIONS})
    xml = _parsed(tmp_path, "error", report)
    assert [suite.name for suite in xml] == ["activation", "writer_health", "rows", "schema"]
    assert [suite.tests for suite in xml][-1] == 0
    for suite in xml:
        named = [p.value for p in suite.properties() if p.name == "project_deviation"]
        assert named == [
            "rows/expect_no_orphan_subagent_rows: removed: kandev-dq runs it at error",
            "schema: emptied: the suite holds no rule \\x1b<&>",  # escaped, then XML-quoted
        ]
