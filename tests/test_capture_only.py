"""A store upstream's build activated: capture_only with the amended schema (CONTRACT §3).

Upstream's build creates the table already amended and never writes execution_since, so every
store it activates reads capture_only. The check fails, as the contract requires, but it must
say what the state means (AC-24b), why the store is in it, and the one command that completes
it (AC-33b self-heal): in the finding, the text and JSON output, the data docs overview, the
audit's SUMMARY.md and the migration dry run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from kandev_dq.contract.states import CAPTURE_ONLY, SELF_HEAL, explain_state
from kandev_dq.lab import upstream
from kandev_dq.report.audit import run_audit
from tests.gxhelpers import check, failed, result

STATE_RULE = "expect_activation_state_to_be_in_set"
SELF_HEAL_RULE = "expect_execution_since_not_pending_self_heal"
MIGRATE = "`kandev-dq migrate`"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from kandev_dq.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_check_explains_capture_only_and_names_the_command(target, project, tmp_path):
    upstream.build_upstream_store(target.engine, seed=0)
    report = check(project, target, "nightly")
    assert report.state == CAPTURE_ONLY and not report.success
    assert failed(report, "activation") == {STATE_RULE: "error", SELF_HEAL_RULE: "warning"}
    assert "AC-33b self-heal case" in report.state_explanation
    assert MIGRATE in report.state_explanation
    assert report.state_explanation in result(report, STATE_RULE).message
    assert SELF_HEAL in result(report, SELF_HEAL_RULE).message
    assert report.to_json()["state_explanation"] == report.state_explanation

    overview = (project / "uncommitted" / "data_docs" / "local_site" / "overview.html").read_text()
    assert "AC-33b self-heal case" in _flat(overview)

    text = _cli("check", "--store", target.url, "--project", str(project))
    assert text.returncode == 1
    assert "AC-33b self-heal case" in text.stdout and "kandev-dq migrate" in text.stdout

    audited = run_audit(project, target.url, tmp_path / "audit")
    summary = (audited.folder / "SUMMARY.md").read_text(encoding="utf-8")
    assert "AC-33b self-heal case" in summary


def test_the_dry_run_says_it_writes_only_execution_since(target):
    upstream.build_upstream_store(target.engine, seed=0)
    done = _cli("migrate", "--store", target.url, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "state: capture_only" in done.stdout
    assert "AC-33b self-heal case" in _flat(done.stdout)
    planned = [line.split()[0] for line in done.stdout.splitlines() if "would_run" in line]
    assert planned == ["subagent_context_execution_since"]


def test_capture_only_on_a_pre_amendment_table_is_not_called_a_self_heal():
    explained = explain_state(CAPTURE_ONLY, amended=False)
    assert "self-heal" not in explained and "amends it" in explained
    assert json.dumps(explain_state("fully_activated"))  # every state has plain words
