"""GX's own column and table expectations in a kandev-dq project (docs/reliability.md, 3a).

A GX user adds ``expect_column_values_to_not_be_null`` to a suite as a habit. It is data, not
code: allowed without ``--allow-project-code`` with the arguments its class declares, refused
with SQL text (``row_condition``, a query), run on the suite's table, reported as the
project's rule (no AC ids, a deviation ``added``), and its result keeps counts, never the
store's values, which GX lists whole and unescaped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from kandev_dq.errors import KandevDqError
from kandev_dq.gx.adapter import COUNTS
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project import vetting
from kandev_dq.project.files import refuse_project_code
from kandev_dq.records import records_url
from kandev_dq.records.tables import results
from kandev_dq.run.check import run_check
from tests.test_check_cli import CAPTURE

#: A store value no page or report may show raw.
HOSTILE_STATUS = "<img src=x onerror=alert(1)>\x1b[2J" + "v" * 5000
SUITE = "rows"
BUILT_IN = {
    "type": "expect_column_values_to_be_in_set",
    "kwargs": {"column": "tool_status", "value_set": ["complete"]},
    "meta": {},
    "severity": "warning",
}


def _add(project: Path, expectation: dict) -> None:
    path = project / "expectations" / f"{SUITE}.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["expectations"].append(expectation)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")


def _store(target) -> StoreBuilder:
    """Activated, with two rows: one complete, one holding a hostile status."""
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    session = store.session()
    store.subagent_row(session, "toolu_ok", "2026-07-30 02:00:00+00:00", tool_status="complete")
    store.subagent_row(
        session, "toolu_bad", "2026-07-30 02:00:01+00:00", tool_status=HOSTILE_STATUS
    )
    return store


def test_a_built_in_with_its_declared_arguments_is_data(project):
    _add(project, BUILT_IN)
    refuse_project_code(project)  # no --allow-project-code needed


@pytest.mark.parametrize(
    "expectation",
    [
        {**BUILT_IN, "kwargs": {**BUILT_IN["kwargs"], "row_condition": 'tool_status=="x"'}},
        {**BUILT_IN, "kwargs": {**BUILT_IN["kwargs"], "condition_parser": "great_expectations"}},
        {"type": "unexpected_rows_expectation", "kwargs": {"unexpected_rows_query": "SELECT 1"}},
        {"type": "expect_query_results_to_match_comparison", "kwargs": {"base_query": "SELECT 1"}},
        {
            "type": "expect_table_row_count_to_equal_other_table",
            "kwargs": {"other_table_name": "x"},
        },
    ],
    ids=["row_condition", "condition_parser", "unexpected_rows", "query", "other_table"],
)
def test_a_built_in_taking_sql_or_another_table_is_refused(project, expectation):
    _add(project, expectation)
    with pytest.raises(KandevDqError, match="--allow-project-code"):
        refuse_project_code(project)


def test_the_built_ins_arguments_are_gx_classes_own_fields():
    """The vetting imports no GX: its table is held here to each class's fields, less GX's
    common ones and the conditions, which are SQL text."""
    from great_expectations.expectations.expectation import BatchExpectation
    from great_expectations.expectations.registry import get_expectation_impl

    gx_own = set(BatchExpectation.__fields__)
    conditions = {"row_condition", "condition_parser", "library_metadata"}
    for name, declared in vetting.GX_BUILT_INS.items():
        fields = set(get_expectation_impl(name).__fields__) - gx_own - conditions
        assert fields == declared, name
    assert not set(vetting.GX_BUILT_INS) & set(vetting.DECLARED_KWARGS)


def test_a_built_in_runs_as_a_project_rule_and_keeps_no_store_value(target, project):
    _store(target)
    _add(project, BUILT_IN)
    report = run_check(project, target.url, "nightly")
    [found] = [r for r in report.results if r.expectation == BUILT_IN["type"]]
    with target.engine.connect() as conn:
        others = conn.scalar(
            sa.text("SELECT COUNT(*) FROM task_session_subagents WHERE tool_status <> 'complete'")
        )
    assert others == 1
    assert not found.success and found.unexpected_count == others
    assert found.severity == "warning" and found.rules == [] and found.suite == SUITE
    assert (SUITE, BUILT_IN["type"], "added") in {
        (d.suite, d.expectation, d.kind) for d in report.project_deviations
    }
    # A warning, as the project set it (the hostile status fails kandev-dq's own rules too).
    assert found in report.failures("warning") and found not in report.failures("error")
    # The built-in's stored result keeps counts only; no page shows the value raw or whole.
    stored = sa.create_engine(f"sqlite:///{records_url(project)}")
    with stored.connect() as conn:
        documents = [json.loads(value) for value in conn.scalars(sa.select(results.c.value))]
    stored.dispose()
    [kept] = [
        r
        for document in documents
        for r in document["results"]
        if r["expectation_config"]["type"] == BUILT_IN["type"]
    ]
    assert set(kept["result"]) <= COUNTS | {"observed_value"}
    assert kept["result"]["unexpected_count"] == others and "onerror" not in json.dumps(kept)
    [shown] = [r for r in report.to_json()["results"] if r["expectation"] == BUILT_IN["type"]]
    assert "onerror" not in json.dumps(shown)
    pages = " ".join(
        p.read_text(encoding="utf-8") for p in (project / "uncommitted").rglob("*.html")
    )
    assert BUILT_IN["type"] in pages
    assert "<img src=x" not in pages and "\x1b" not in pages and "v" * 300 not in pages
    assert f"{others} unexpected of 2 rows" in found.message
