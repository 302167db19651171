"""``kandev-dq explain``: a rule's AC ids, sentence and listing query; with ``--run`` its rows,
read-only in one snapshot, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kandev_dq.cli import app
from kandev_dq.cli.checking import NOT_IN_PROJECT
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


def _stored_text(target, table: str, column: str) -> dict[str, str]:
    """Each row's ``column`` as the store holds it (its text), by id."""
    with target.engine.connect() as conn:
        query = sa.text(f"SELECT id, CAST({column} AS TEXT) FROM {table}")
        return dict(conn.execute(query).all())


def _listed_csv(rule: str, url: str) -> list[dict[str, str]]:
    """Every row ``explain --format csv`` lists for ``rule`` on the store at ``url``."""
    return list(
        csv.DictReader(io.StringIO(_explain(rule, "--store", url, "--format", "csv").stdout))
    )


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
    from kandev_dq.facts.rows import row_facts

    url = _built("orphan_rows", target)
    rule = "expect_no_orphan_subagent_rows"
    stored = _stored_text(target, "task_session_subagents", "observed_at")
    with target.engine.connect() as conn:
        sample = row_facts(conn)["rules"]["orphans"]["sample"]
    listed = _listed_csv(rule, url)
    table = _explain(rule, "--store", url, "--run").stdout
    assert listed and sample
    for row in [*listed, *sample]:
        assert row["observed_at"] == stored[row["id"]], row
        assert row["observed_at_utc"].endswith("Z") and row["observed_at_utc"] != row["observed_at"]
    for row in listed:  # the table (not a terminal: tab-separated) shows the same pair
        assert f"\t{row['observed_at']}\t{row['observed_at_utc']}\t" in table, row


def test_a_shortfall_shows_its_first_message_as_stored_beside_its_instant(target):
    """A key's earliest message (the shortfall's ``first_created_at``) as the store holds it,
    its exact instant beside it, in ``--format csv``, on both dialects."""
    url = _built("stopped_writer_behind_banked_excess", target)
    rule = "expect_no_writer_shortfall_since_capture_since"
    stored = _stored_text(target, "task_session_messages", "created_at")
    listed = _listed_csv(rule, url)
    assert listed
    for row in listed:
        assert row["first_created_at"] == stored[row["message_id"]], row
        assert row["first_created_at_utc"].endswith("Z"), row
        assert row["first_created_at_utc"] != row["first_created_at"], row


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


def _project_runs(project, suite: str, rule: str, severity: str, **arguments) -> None:
    """``project``'s suite ``suite`` runs ``rule`` at GX's ``severity`` with ``arguments``."""
    path = project / "expectations" / f"{suite}.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    entry = next(e for e in document["expectations"] if e["type"] == rule)
    entry["severity"] = severity
    entry["kwargs"] = entry.get("kwargs", {}) | arguments
    path.write_text(json.dumps(document), encoding="utf-8")


def test_explain_reads_the_rule_as_the_project_runs_it(target, project):
    """AC-24c: a rule the project runs at warning, with its own arguments, is explained at
    warning and judged with those arguments, with a store and without, as `check` runs it; a
    rule the project does not run says so."""
    from kandev_dq.run.check import run_check

    rule = "expect_activation_state_to_be_in_set"
    StoreBuilder(target.engine).create()  # no keys: not_activated, outside kandev-dq's set
    on = ("--store", target.url, "--project", str(project))
    assert ": FAILED: " in _explain(rule, *on).output
    _project_runs(project, "activation", rule, "warning", accepted_states=["not_activated"])

    explained = _explain(rule, *on)
    assert explained.exit_code == 0, explained.output
    first = explained.output.splitlines()[0]
    assert first.endswith("] warning, suite activation"), first
    assert ": passed: " in explained.output
    checked = run_check(project, target.url, "nightly")
    judged = next(r for r in checked.results if r.expectation == rule)
    assert judged.severity == "warning" and judged.success

    described = _explain(rule, "--project", str(project))
    assert "] warning, suite activation" in described.output.splitlines()[0]

    dropped = "expect_subagent_rows_to_have_identity"  # rows and live_rows run it
    for path in (project / "expectations").glob("*.json"):
        suite = json.loads(path.read_text(encoding="utf-8"))
        suite["expectations"] = [e for e in suite["expectations"] if e["type"] != dropped]
        path.write_text(json.dumps(suite), encoding="utf-8")
    assert NOT_IN_PROJECT in _explain(dropped, *on).output


def test_a_long_listing_query_is_printed_one_clause_per_line(target):
    """AC-26: the shortfall's listing (over 10 KB of SQL) reads one clause per line, each
    subquery indented, and still lists what the rule counted."""
    url = _built("stopped_writer", target)
    rule = "expect_no_writer_shortfall_since_capture_since"
    done = _explain(rule, "--store", url, "--run")
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    query = lines[
        lines.index("query:") + 1 : next(i for i, line in enumerate(lines) if line.endswith(";"))
        + 1
    ]
    assert len("\n".join(query)) > 10_000 and len(query) > 100
    assert max(len(line) for line in query) < 1_000
    assert sum(line.lstrip().startswith(("FROM", "WHERE", "GROUP BY")) for line in query) > 5
    assert "0 row(s)" not in lines[-1]
