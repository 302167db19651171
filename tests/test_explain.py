"""``kandev-dq explain``: a rule's AC ids, sentence and listing query; with ``--run`` its rows,
read-only in one snapshot, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kandev_dq.cli import app
from kandev_dq.contract.tables import kandev_meta
from kandev_dq.errors import ExitCode
from kandev_dq.expectations.activation import BASELINE_DISCLOSURE as BASELINE_RULE
from kandev_dq.lab import scenarios
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.run.explain import rules
from kandev_dq.text import csv_cell

runner = CliRunner()


def _explain(*args: str):
    return runner.invoke(app, ["explain", *args])


def _built(name: str, target) -> str:
    """Scenario ``name`` built into the (empty) test store; its URL."""
    if target.dialect == "sqlite":
        target.engine.dispose()
    scenarios.materialise(name, target.url)
    return target.url


def test_on_a_healthy_store_every_rule_lists_zero_rows(target):
    """AC-19: every rule of every suite, both dialects: its query runs and lists nothing."""
    url = _built("healthy_baseline", target)
    with_query = 0
    for name in rules():
        done = _explain(name, "--store", url, "--run")
        assert done.exit_code == 0, (name, done.output)
        if "counts no rows" in done.stdout or "but not on this store" in done.stdout:
            continue  # no query: a rule counting no rows, or rows this store cannot hold
        with_query += 1
        assert "query:\nSELECT " in done.stdout, name
        assert done.stdout.rstrip().endswith("\n0 row(s)"), (name, done.stdout[-300:])
    assert with_query >= 30  # the rules that count rows, messages or keys


def test_csv_writes_every_listed_row_and_the_table_counts_them(target):
    """AC-16: the orphan rows scenario, every orphan listed with its key (both dialects)."""
    url = _built("orphan_rows", target)
    rule = "expect_no_orphan_subagent_rows"
    table = _explain(rule, "--store", url, "--run")
    assert table.exit_code == 0, table.output
    assert "FAILED" in table.stdout
    total = int(table.stdout.rstrip().rsplit("\n", 1)[1].split()[0])
    assert total > 0
    listed = _explain(rule, "--store", url, "--format", "csv")
    assert listed.exit_code == 0, listed.output
    rows = list(csv.DictReader(io.StringIO(listed.stdout)))
    assert len(rows) == total
    assert {"id", "task_session_id", "tool_call_id", "observed_at_utc", "reason"} <= set(rows[0])
    assert len({row["id"] for row in rows}) == total


def test_stored_timestamps_show_as_stored_beside_their_instant(target):
    """AC-24e: explain --run, --format csv and a rule's sample show each timestamp as the store
    holds it (SQLite's text, PostgreSQL's text of its value), its exact instant beside it."""
    import sqlalchemy as sa

    from kandev_dq.facts.rows import row_facts

    url = _built("orphan_rows", target)
    rule = "expect_no_orphan_subagent_rows"
    with target.engine.connect() as conn:
        stored = dict(
            conn.execute(
                sa.text("SELECT id, CAST(observed_at AS TEXT) FROM task_session_subagents")
            ).all()
        )
        sample = row_facts(conn)["rules"]["orphans"]["sample"]
    listed = list(
        csv.DictReader(io.StringIO(_explain(rule, "--store", url, "--format", "csv").stdout))
    )
    table = _explain(rule, "--store", url, "--run").stdout
    assert listed and sample
    for row in [*listed, *sample]:
        assert row["observed_at"] == stored[row["id"]], row
        assert row["observed_at_utc"].endswith("Z") and row["observed_at_utc"] != row["observed_at"]
    for row in listed:  # the table (not a terminal: tab-separated) shows the same pair
        assert f"\t{row['observed_at']}\t{row['observed_at_utc']}\t" in table, row


def test_a_rule_without_rows_says_so_and_csv_refuses_it(sqlite_target):
    url = _built("healthy_baseline", sqlite_target)
    said = _explain("expect_three_column_unique_key", "--store", url, "--run")
    assert said.exit_code == 0 and "counts no rows" in said.stdout


def test_on_a_store_without_the_table_a_row_rule_says_the_table_is_missing(sqlite_target):
    """A rule counting rows of task_session_subagents, on a store predating it: the reason is
    the missing table, never "counts no rows"."""
    from kandev_dq.lab.sample import create_store

    create_store(sqlite_target.engine, subagents=None)
    sqlite_target.engine.dispose()
    said = _explain("expect_no_orphan_subagent_rows", "--store", sqlite_target.url, "--run")
    assert said.exit_code == 0, said.output
    assert "counts no rows" not in said.stdout
    assert "counts rows, but not on this store: task_session_subagents is missing" in said.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["explain", "expect_no_such_rule", "--store", "{store}"],
        ["explain", "expect_no_orphan_subagent_rows", "--store", "{missing}"],
        ["explain", "expect_three_column_unique_key", "--store", "{store}", "--format", "csv"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, sqlite_target, tmp_path):
    url = _built("healthy_baseline", sqlite_target)
    filled = [a.format(store=url, missing=tmp_path / "absent.db") for a in args]
    done = subprocess.run(
        [sys.executable, "-c", "from kandev_dq.cli import main; main()", *filled],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == ExitCode.COULD_NOT_RUN, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("kandev-dq: error: ")
    assert "Traceback" not in done.stderr


def test_csv_cells_cannot_run_as_formulas_or_drive_a_terminal():
    assert csv_cell("=HYPERLINK(1)") == "'=HYPERLINK(1)"
    assert csv_cell("@SUM(A1)") == "'@SUM(A1)"
    assert csv_cell("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert csv_cell(-3) == -3 and csv_cell(None) is None


def test_explain_judges_write_once_against_the_records_ledger_as_check_does(target, project):
    """AC-24: before any check, write-once is not judged (no baseline) and says so; after one,
    it passes as check's did; a key rewritten since fails with the accept command, on both
    dialects. explain itself records nothing: no first sighting, no baseline."""
    from kandev_dq.contract.instants import CAPTURE_SINCE
    from kandev_dq.run.check import run_check

    written = "2026-07-30T01:39:37.271235Z"
    store = StoreBuilder(target.engine).create()
    store.keys(written, "", written)
    on = ("--store", target.url, "--project", str(project))
    for rule in ("expect_activation_keys_to_be_write_once", BASELINE_RULE):
        before = _explain(rule, *on)
        assert before.exit_code == 0 and ": not judged: no run recorded this store" in before.output
    assert not (project / "uncommitted" / "records.db").exists(), "explain wrote the records"

    assert run_check(project, target.url, "nightly").success
    judged = _explain("expect_activation_keys_to_be_write_once", *on)
    assert ": passed: every key seen before still holds its first value" in judged.output
    taken = _explain(BASELINE_RULE, *on)
    assert ": passed: write-once baseline taken at" in taken.output

    with target.engine.begin() as conn:
        conn.execute(
            sa.update(kandev_meta)
            .where(kandev_meta.c.key == CAPTURE_SINCE)
            .values(value="2026-07-30T01:39:38Z")
        )
    rewritten = _explain("expect_activation_keys_to_be_write_once", *on)
    assert ": FAILED: key rewritten or deleted" in rewritten.output
    assert "kandev-dq ledger accept" in rewritten.output


@pytest.mark.parametrize(
    "rule", ["expect_no_orphan_subagent_rows", "expect_backfill_metrics_to_match_message"]
)
def test_without_a_store_explain_describes_the_rule_without_gx(rule, tmp_path):
    """No --store, no $KANDEV_STORE_URL, no default store: the rule's AC ids, severity, suite
    and sentence (the rule index, the class's own), what each AC says (the catalogue) and what
    it reads, before GX loads; the store is needed only for the query and --run."""
    from kandev_dq.contract.catalogue import BY_ID
    from kandev_dq.contract.rule_index import RULE_INDEX, RULE_SENTENCES, SUITE_TABLES
    from tests.test_cli_inputs import kandev_dq_probed

    done = kandev_dq_probed("explain", rule, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "GX not imported"
    # A rule a live suite runs too is listed once per suite, at one severity and AC ids.
    listed = [r for r in RULE_INDEX if r.expectation == rule]
    indexed = listed[0]
    suites = ", ".join(r.suite for r in listed)
    lines = done.stdout.splitlines()
    assert lines[0] == f"{rule} [{', '.join(indexed.rules)}] {indexed.severity}, suite {suites}"
    assert lines[1] == RULE_SENTENCES[rule] == type(rules()[rule].expectation).rule_text
    assert lines[2:-1] == [f"{ac}: {BY_ID[ac].summary}" for ac in indexed.rules]
    assert type(rules()[rule].expectation).rules == indexed.rules  # the class cites the same
    assert lines[-1].startswith(f"reads {', '.join(SUITE_TABLES[indexed.suite])};")
    assert "--store" in lines[-1]
