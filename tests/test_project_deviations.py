"""A project that differs from kandev-dq's rules is named on every run, and ``--strict`` refuses it.

A project's suites decide the verdict: a rule removed, every severity set to ``info``, an emptied
suite or a widened argument would pass a store kandev-dq's rules fail, with nothing but the rule
count to show it. Each difference is a deviation, named in the text report, the JSON, the JUnit
XML and the data docs overview; ``--strict`` exits 2 naming them, before the store or the records
database is opened (docs/reliability.md, 3a).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from junitparser import JUnitXml

import kandev_dq
from kandev_dq.errors import KandevDqError
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project.deviations import KINDS, RESULT_META_KEY, Deviation, project_deviations
from kandev_dq.project.files import CHECKPOINTS
from tests.test_check_cli import CAPTURE
from tests.test_check_cli import kandev_dq as cli

REMOVED = ("rows", "expect_no_orphan_subagent_rows")
EMPTIED = "writer_health"
ARGUMENT = ("activation", "expect_activation_state_to_be_in_set")
WIDENED = ["fully_activated", "capture_only"]
#: Each case's deviation, as (suite, expectation, kind), on the nightly checkpoint.
NAMED = {
    "removed": (*REMOVED, "removed"),
    "severity": ("rows", "expect_no_negative_metrics", "severity"),
    "emptied": (EMPTIED, "", "emptied"),
    "arguments": (*ARGUMENT, "arguments"),
}


def _edit(path: Path, change) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")


def _suite(project: Path, name: str) -> Path:
    return project / "expectations" / f"{name}.json"


def remove_rule(project: Path) -> None:
    suite, expectation = REMOVED

    def drop(document):
        document["expectations"] = [e for e in document["expectations"] if e["type"] != expectation]

    _edit(_suite(project, suite), drop)


def every_severity_info(project: Path) -> None:
    def lower(document):
        for expectation in document["expectations"]:
            expectation["severity"] = "info"

    for path in (project / "expectations").glob("*.json"):
        _edit(path, lower)


def empty_suite(project: Path) -> None:
    _edit(_suite(project, EMPTIED), lambda document: document.update(expectations=[]))


def change_argument(project: Path) -> None:
    suite, expectation = ARGUMENT

    def widen(document):
        for held in document["expectations"]:
            if held["type"] == expectation:
                held["kwargs"]["accepted_states"] = WIDENED

    _edit(_suite(project, suite), widen)


CASES = {
    "removed": remove_rule,
    "severity": every_severity_info,
    "emptied": empty_suite,
    "arguments": change_argument,
}


def deviate(project: Path) -> Path:
    """``project`` with every case applied: what each surface must name."""
    for change in CASES.values():
        change(project)
    return project


def _named(deviations) -> set[tuple[str, str, str]]:
    return {(d["suite"], d["expectation"], d["kind"]) for d in deviations}


# --- the comparison, without GX ---------------------------------------------------------------


def test_the_project_init_writes_has_no_deviation(project):
    for checkpoint in CHECKPOINTS:
        assert project_deviations(project, checkpoint) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_change_is_named(project, case):
    CASES[case](project)
    found = project_deviations(project, "nightly")
    assert NAMED[case] in {(d.suite, d.expectation, d.kind) for d in found}
    assert {d.kind for d in found} <= set(KINDS)


def test_the_kinds_say_what_differs(project):
    deviate(project)
    found = {
        (d.suite, d.expectation, d.kind): d.detail for d in project_deviations(project, "nightly")
    }
    assert found[NAMED["removed"]] == "kandev-dq runs it at error"
    assert found[NAMED["severity"]] == "info in the project, error in kandev-dq's rules"
    assert found[NAMED["emptied"]] == "the suite holds no rule: none of kandev-dq's 7 rules run"
    assert found[NAMED["arguments"]] == (
        '{"accepted_states": ["fully_activated", "capture_only"]} in the project, '
        '{"accepted_states": ["fully_activated"]} in kandev-dq\'s rules'
    )
    # An emptied suite is one deviation, not one per rule it lost.
    assert not [key for key in found if key[0] == EMPTIED and key[2] != "emptied"]


def test_a_checkpoint_running_other_suites_and_a_rule_added(project):
    def swap(document):  # nightly without rows, with schema
        document["validation_definitions"] = [
            d for d in document["validation_definitions"] if d["name"] != "rows"
        ] + [{"id": "0", "name": "schema"}]

    _edit(project / "checkpoints" / "nightly.json", swap)
    _edit(
        _suite(project, "activation"),
        lambda document: document["expectations"].append(
            {"id": "1", "kwargs": {}, "meta": {}, "severity": "info", "type": REMOVED[1]}
        ),
    )
    found = project_deviations(project, "nightly")
    assert [(d.suite, d.expectation, d.kind) for d in found[:2]] == [
        ("rows", "", "suite_removed"),
        ("schema", "", "suite_added"),
    ]
    assert ("activation", REMOVED[1], "added") in {(d.suite, d.expectation, d.kind) for d in found}
    # A suite the checkpoint no longer runs is not compared; the one it runs now is.
    assert not [d for d in found if d.suite == "rows" and d.expectation]


# --- every surface, on both dialects ------------------------------------------------------------


def test_check_names_each_deviation_in_text_json_junit_and_the_docs(target, project):
    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    deviate(project)
    args = ("check", "--store", target.url, "--project", str(project))

    as_json = cli(*args, "--format", "json")
    assert as_json.returncode == 0, as_json.stderr  # every severity info: the project passes it
    listed = json.loads(as_json.stdout)["project_deviations"]
    assert _named(listed) >= set(NAMED.values())
    assert all(set(d) == {"suite", "expectation", "kind", "detail"} for d in listed)
    texts = [Deviation(**d).text() for d in listed]

    as_text = cli(*args)
    assert as_text.returncode == 0, as_text.stderr
    verdict = next(line for line in as_text.stdout.splitlines() if line.startswith("PASSED"))
    assert verdict.endswith(
        f"; {len(listed)} project deviation(s) from kandev-dq's rules "
        "(listed below; project_deviations in --format json)"
    )
    assert [f"deviation: {text}" for text in texts] == [
        line for line in as_text.stdout.splitlines() if line.startswith("deviation: ")
    ]

    as_junit = cli(*args, "--format", "junit")
    junit = project / "junit.xml"
    junit.write_text(as_junit.stdout, encoding="utf-8")
    for suite in JUnitXml.fromfile(str(junit)):
        named = [p.value for p in suite.properties() if p.name == "project_deviation"]
        assert named == texts, suite.name
    # The emptied suite ran holding no rule: a suite of no tests, carrying the deviations too.
    assert [s.tests for s in JUnitXml.fromfile(str(junit)) if s.name == EMPTIED] == [0]

    overview = project / "uncommitted" / "data_docs" / "local_site" / "overview.html"
    page = overview.read_text(encoding="utf-8")
    assert f"deviates from kandev-dq's rules in {len(listed)} place(s)" in page
    for text in texts:  # names from a project file: escaped
        assert html.escape(text, quote=False) in page


def test_strict_refuses_a_deviating_project_before_opening_anything(target, project):
    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    deviate(project)
    records = project / "uncommitted" / "records.db"
    for command in (("check",), ("check", "--format", "json"), ("audit", "--out", "audit")):
        done = cli(*command, "--store", target.url, "--project", str(project), "--strict")
        assert done.returncode == 2, done.stdout + done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith("kandev-dq: error: --strict: the project's ")
        for suite, expectation, kind in NAMED.values():
            where = f"{suite}/{expectation}" if expectation else suite
            assert f"{where} ({kind})" in line
        assert not records.exists()  # refused before the records database was opened
        if "json" in command:  # the error document a pipeline parses
            assert json.loads(done.stdout)["error"] == line.removeprefix("kandev-dq: error: ")


def test_strict_runs_the_project_init_writes(target, project):
    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    done = cli(
        "check", "--store", target.url, "--project", str(project), "--strict", "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["project_deviations"] == []


# --- the Python API, the audit, GX's own path ----------------------------------------------------


def test_the_api_names_deviations_and_refuses_them_under_strict(sqlite_target, project):
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    change_argument(project)
    with pytest.raises(KandevDqError, match="--strict: .*activation/expect_activation_state"):
        kandev_dq.check(sqlite_target.url, project=project, strict=True)
    assert not (project / "uncommitted" / "records.db").exists()
    report = kandev_dq.check(sqlite_target.url, project=project)
    assert [(d.suite, d.expectation, d.kind) for d in report.project_deviations] == [
        NAMED["arguments"]
    ]
    assert report.to_json()["project_deviations"][0]["kind"] == "arguments"


def test_the_audit_keeps_the_deviations(sqlite_target, project, tmp_path):
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    remove_rule(project)
    out = tmp_path / "audit"
    done = cli("audit", "--out", str(out), "--store", sqlite_target.url, "--project", str(project))
    assert done.returncode == 0, done.stderr
    said = f"deviation: {REMOVED[0]}/{REMOVED[1]}: removed: kandev-dq runs it at error"
    assert said in done.stdout.splitlines()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert _named(summary["project_deviations"]) == {NAMED["removed"]}
    assert "## Project deviations from kandev-dq's rules: 1" in (out / "SUMMARY.md").read_text()


def test_a_checkpoint_run_through_gx_keeps_its_deviations_for_the_docs(
    sqlite_target, project, tmp_path
):
    from kandev_dq.lab.scenarios.running import materialise
    from tests.test_gx_native import native_runs, nightly

    sqlite_target.engine.dispose()
    materialise("healthy_baseline", sqlite_target.url)
    empty_suite(project)
    [outcome] = native_runs([nightly(project, sqlite_target.url)], tmp_path)
    assert outcome["success"] is True
    import sqlite3

    records = sqlite3.connect(project / "uncommitted" / "records.db")
    try:
        stored = [
            json.loads(v)
            for (v,) in records.execute("SELECT value FROM kandev_dq_validation_results")
        ]
    finally:
        records.close()
    assert stored and all(
        _named(result["meta"][RESULT_META_KEY]) == {NAMED["emptied"]} for result in stored
    )
    page = (project / "uncommitted" / "data_docs" / "local_site" / "overview.html").read_text()
    assert f"{EMPTIED}: emptied: the suite holds no rule" in page
    assert "deviates from kandev-dq's rules in 1 place(s)" in page


def test_a_hostile_suite_name_stays_one_inert_line(project):
    hostile = "rows\x1b[2J\nPASSED"

    def rename(document):
        document["validation_definitions"].append({"id": "2", "name": hostile})

    _edit(project / "checkpoints" / "nightly.json", rename)
    with pytest.raises(KandevDqError) as refused:
        kandev_dq.check("absent.db", project=project, strict=True)
    [line] = str(refused.value).splitlines()
    assert "rows\\x1b[2J\\nPASSED (suite_added)" in line
