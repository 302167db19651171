"""The fault corpus proves the suite's verdicts, on SQLite and PostgreSQL.

Each scenario of :mod:`kandev_dq.lab.scenarios` is built on both dialects and validated with
``pre_release``: a fault is caught at its severity by an expectation citing one of its AC ids, a
healthy scenario has no error and exactly the findings it declares, both dialects fail the same
expectations at the same severities, and ``docs/detection-matrix.md`` holds exactly the row the
code generates (its timing section aside). One test per scenario, so xdist spreads them.
"""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from kandev_dq.contract.catalogue import BY_ID
from kandev_dq.errors import KandevDqError
from kandev_dq.gx.context import SUITES
from kandev_dq.lab import scenarios
from kandev_dq.lab.scenarios import SCENARIOS, SEVERITIES
from kandev_dq.store.access import open_store
from tests.gxhelpers import REPO

MATRIX = REPO / "docs" / "detection-matrix.md"
REGENERATE = f"regenerate it: {scenarios.MATRIX_COMMAND}"

#: The faults this corpus must hold, each by at least one scenario (name -> AC it proves).
REQUIRED_FAULTS = {
    "capture_since_go_space_string": "AC-24e",
    "backfill_through_go_space_string": "AC-24e",
    "second_precision_capture_by_amended_build": "AC-24",
    "capture_since_at_transaction_start": "AC-24",
    "backfill_through_after_insert": "AC-24d",
    "backfill_through_from_retry_rows": "AC-24f",
    "partial_pair_capture_only": "AC-24d",
    "partial_pair_through_only": "AC-24d",
    "key_rewritten_between_runs": "AC-24",
    "key_deleted_between_runs": "AC-24",
    "execution_since_with_two_column_key": "AC-33b",
    "execution_since_absent_on_amended_table": "AC-33b",
    "pre_amendment_table": "AC-33",
    "missing_secondary_index": "AC-33",
    "zero_total_tokens": "AC-7a",
    "zero_duration_ms": "AC-7a",
    "zero_tool_use_count_unreported": "AC-7",
    "async_launched_with_zeros": "AC-7",
    "empty_string_in_text_column": "§2-empty-text",
    "negative_metric": "AC-9",
    "tool_status_from_agent_status": "AC-12",
    "backfill_turn_id_null": "AC-2a",
    "settled_at_on_non_terminal_row": "AC-11",
    "settled_at_missing_on_terminal_row": "AC-11",
    "execution_id_null": "AC-30",
    "execution_id_empty": "AC-30",
    "backfill_row_relabelled_live": "AC-1",
    "duplicate_rows_for_one_key": "AC-3",
    "orphan_rows": "AC-16",
    "stopped_writer": "AC-26",
    "stopped_writer_behind_banked_excess": "AC-26",
    "ac21b_loser_in_backfill_row": "AC-21b",
}
REQUIRED_HEALTHY = {
    "healthy_baseline",
    "fresh_install",
    "legacy_second_precision_keys",
    "live_rows_before_retried_capture",
    "real_uuid_before_execution_since",
    "standing_excess",
    "ac2_skipped_messages_after_capture",
    "two_messages_one_subagent",
    "cross_execution_collision",
    "legacy_metadata_after_capture",
    "rows_exactly_at_keys",
    "message_just_after_backfill_through",
    "postgres_session_not_utc",
}


def _severities() -> dict[str, str]:
    """Expectation type -> its severity word, as the code's suites build them."""
    words = {"critical": "error"}
    found = {}
    for build in SUITES.values():
        for expectation in build():
            severity = getattr(expectation.severity, "value", expectation.severity)
            found[expectation.expectation_type] = words.get(severity, severity)
    return found


def test_the_registry_holds_every_required_scenario():
    for name, ac in REQUIRED_FAULTS.items():
        assert name in SCENARIOS and ac in SCENARIOS[name].violates, name
    assert {n for n, s in SCENARIOS.items() if not s.fault} >= REQUIRED_HEALTHY


def test_every_declaration_is_consistent():
    severities = _severities()
    for scenario in SCENARIOS.values():
        assert scenario.summary and "|" not in scenario.summary, scenario.name
        if scenario.fault:
            assert scenario.severity in SEVERITIES and not scenario.discloses, scenario.name
            assert all(ac in BY_ID for ac in scenario.violates), scenario.name
            # Some expectation of the suites can catch it at that severity with that AC id.
            assert any(
                severities[e.expectation_type] == scenario.severity
                and set(type(e).rules) & set(scenario.violates)
                for build in SUITES.values()
                for e in build()
            ), scenario.name
        else:
            declared = {severities[d] for d in scenario.discloses}
            assert "error" not in declared, scenario.name
            worst = min(declared, key=SEVERITIES.index) if declared else None
            assert scenario.severity == worst, scenario.name


def test_the_committed_matrix_is_the_generated_one_apart_from_its_rows():
    text = MATRIX.read_text(encoding="utf-8")
    assert text.startswith(scenarios.matrix_header() + "\n"), REGENERATE
    assert list(scenarios.matrix_rows(text)) == list(SCENARIOS), REGENERATE
    assert scenarios.TIMING_HEADING in text.split(scenarios.matrix_header(), 1)[1]


def test_a_baseline_builds_well_under_a_second_on_sqlite(tmp_path):
    with scenarios.scratch_sqlite(tmp_path, "baseline") as url:
        started = time.perf_counter()
        scenarios.materialise("healthy_baseline", url)
        assert time.perf_counter() - started < 1.0


def test_build_refuses_a_store_that_holds_kandev_tables(tmp_path):
    with scenarios.scratch_sqlite(tmp_path, "taken") as url:
        scenarios.materialise("fresh_install", url)
        with pytest.raises(KandevDqError, match="already holds Kandev table"):
            scenarios.materialise("healthy_baseline", url)


def _capture_since(target: str) -> str | None:
    opened = open_store(target)
    try:
        return scenarios.read_keys(opened.engine)[scenarios.CAPTURE_SINCE]
    finally:
        opened.dispose()


def test_the_cli_lists_builds_and_mutates_between_runs(tmp_path):
    from typer.testing import CliRunner

    from kandev_dq.cli import app

    runner = CliRunner()
    listed = runner.invoke(app, ["scenarios", "list"])
    assert listed.exit_code == 0 and all(name in listed.stdout for name in SCENARIOS)
    store = str(tmp_path / "rewritten.db")
    built = runner.invoke(
        app, ["scenarios", "build", "key_rewritten_between_runs", "--store", store]
    )
    assert built.exit_code == 0, built.output
    assert "expected: fault: AC-24 at error" in built.stdout and "between-runs" in built.stdout
    before = _capture_since(store)
    mutated = runner.invoke(
        app, ["scenarios", "between-runs", "key_rewritten_between_runs", "--store", store]
    )
    assert mutated.exit_code == 0, mutated.output
    assert _capture_since(store) != before
    refused = runner.invoke(app, ["scenarios", "build", "healthy_baseline", "--store", store])
    assert isinstance(refused.exception, KandevDqError)


def test_the_time_zone_transform_reaches_the_postgresql_session(request):
    server = request.getfixturevalue("pg_database").render_as_string(hide_password=False)
    assert scenarios.non_utc_session("kandev.db") == "kandev.db"
    with scenarios.scratch_postgres(server) as url:
        store = open_store(scenarios.non_utc_session(url), require_kandev=False)
        try:
            with store.engine.connect() as conn:
                zone = conn.execute(sa.text("SHOW TimeZone")).scalar()
                path = conn.execute(sa.text("SHOW search_path")).scalar()
        finally:
            store.dispose()
    assert zone == scenarios.NON_UTC_ZONE and "kdq_scenario_" in path


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_verdict_on_both_dialects(name, built_project, tmp_path, request):
    scenario = SCENARIOS[name]
    committed = scenarios.matrix_rows(MATRIX.read_text(encoding="utf-8")).get(name)
    with scenarios.scratch_sqlite(tmp_path, name) as url:
        lite = scenarios.evaluate(name, url, built_project, tmp_path / "sqlite")
    assert scenarios.problems(scenario, lite) == []
    assert committed is not None and lite.cell() in committed, REGENERATE

    server = request.getfixturevalue("pg_database").render_as_string(hide_password=False)
    with scenarios.scratch_postgres(server) as url:
        pg = scenarios.evaluate(name, url, built_project, tmp_path / "postgresql")
    assert scenarios.problems(scenario, pg) == []
    assert lite.signature == pg.signature, "SQLite and PostgreSQL disagree"
    generated = scenarios.matrix_row(scenario, {"sqlite": lite, "postgresql": pg})
    assert committed == generated, REGENERATE


def test_the_matrix_command_needs_a_postgresql_database():
    from typer.testing import CliRunner

    from kandev_dq.cli import app

    refused = CliRunner().invoke(app, ["scenarios", "matrix", "--out", "matrix.md"])
    assert refused.exit_code == 2 and "--postgres" in refused.output
