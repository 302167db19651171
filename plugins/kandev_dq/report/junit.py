"""A check report as JUnit XML, the test-report format Jenkins, GitLab and most CI systems read.

One ``<testsuite>`` per GX suite, one ``<testcase>`` per rule (its expectation), in the order
the checkpoint ran them. A rule fails the build (``<failure>``) when it would fail the
command's exit code: an error-severity rule, or a warning under ``fail_on="warning"``. Other
failed rules pass and carry their finding in ``<system-out>``, so a CI page still shows it.
Each case names its AC ids and severity as properties; the finding is the failure's message,
and its text adds the ``kandev-dq explain`` command listing what the rule counted.
Each suite names the run's checkpoint and store, and each of the project's deviations from
kandev-dq's rules (``project_deviation``, ``suite/expectation: kind: detail``), as properties.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Protocol

from kandev_dq.text import xml_text


class Rule(Protocol):
    suite: str
    expectation: str
    rules: list[str]
    severity: str
    success: bool
    message: str


class Report(Protocol):
    checkpoint: str
    scope: str  #: the checkpoint, or a partial run's checkpoint and part
    store: str
    run_time: str
    duration_s: float
    suite_seconds: dict[str, float]
    results: list
    project_deviations: list

    def explain_command(self, expectation: str) -> str: ...


def junit_xml(report: Report, fail_on: str = "error") -> str:
    """The report as a JUnit XML document (UTF-8 text with its declaration)."""
    # Imported here: a run that could not start writes its document without loading GX.
    from kandev_dq.records.results import failing_severities

    failing = failing_severities(fail_on)
    # A suite that ran holding no rule (an emptied one) is a suite of no tests, not absent.
    suites: dict[str, list[Rule]] = {name: [] for name in report.suite_seconds}
    for rule in report.results:
        suites.setdefault(rule.suite, []).append(rule)
    root = ET.Element("testsuites", name=f"kandev-dq {report.scope}")
    for name, rules in suites.items():
        root.append(_suite(report, name, rules, failing))
    _set_counts(
        root,
        tests=sum(int(suite.get("tests", 0)) for suite in root),
        failures=sum(int(suite.get("failures", 0)) for suite in root),
    )
    root.set("time", f"{report.duration_s:.3f}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def could_not_run_xml(message: str, command: str = "check") -> str:
    """A JUnit document for a run that could not start: one testcase in error carrying the
    one-line message, so a CI reading the report gets a document it parses, never 0 bytes."""
    root = ET.Element("testsuites", name=f"kandev-dq {command}")
    suite = ET.SubElement(root, "testsuite", name="kandev-dq")
    case = ET.SubElement(suite, "testcase", classname="kandev_dq", name=f"kandev-dq {command}")
    error = ET.SubElement(case, "error", message=xml_text(message), type="could_not_run")
    error.text = xml_text(message)
    for element in (root, suite):
        _set_counts(element, tests=1, failures=0)
        element.set("errors", "1")
        element.set("time", "0")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _suite(report: Report, name: str, rules: list[Rule], failing: tuple[str, ...]) -> ET.Element:
    suite = ET.Element("testsuite", name=name, timestamp=report.run_time)
    properties = ET.SubElement(suite, "properties")
    for key, value in (("checkpoint", report.scope), ("store", report.store)):
        ET.SubElement(properties, "property", name=key, value=xml_text(value))
    for deviation in report.project_deviations:  # the run's verdict is the project's
        ET.SubElement(
            properties, "property", name="project_deviation", value=xml_text(deviation.text())
        )
    cases = [_case(report, name, rule, failing) for rule in rules]
    suite.extend(cases)
    _set_counts(suite, tests=len(cases), failures=sum(c.find("failure") is not None for c in cases))
    suite.set("time", f"{report.suite_seconds.get(name, 0.0):.3f}")
    return suite


def _case(report: Report, suite: str, rule: Rule, failing: tuple[str, ...]) -> ET.Element:
    case = ET.Element("testcase", classname=f"kandev_dq.{suite}", name=rule.expectation)
    properties = ET.SubElement(case, "properties")
    for ac in rule.rules:
        ET.SubElement(properties, "property", name="ac", value=ac)
    ET.SubElement(properties, "property", name="severity", value=rule.severity)
    finding = xml_text(rule.message)
    if rule.success:
        return case
    if rule.severity in failing:
        failure = ET.SubElement(case, "failure", message=finding, type=rule.severity)
        explain = xml_text(report.explain_command(rule.expectation))
        failure.text = f"[{', '.join(rule.rules)}] {finding}\nexplain: {explain}"
    else:  # reported, not failing this run
        ET.SubElement(case, "system-out").text = f"{rule.severity}: {finding}"
    return case


def _set_counts(element: ET.Element, *, tests: int, failures: int) -> None:
    for key, value in (("tests", tests), ("failures", failures), ("errors", 0), ("skipped", 0)):
        element.set(key, str(value))
