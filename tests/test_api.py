"""The Python API: ``kandev_dq.check`` and ``kandev_dq.migrate`` return what the CLI prints.

``check`` gives the report ``kandev-dq check --format json`` prints and the same exit codes;
``migrate`` the report ``kandev-dq migrate --format json`` prints, and its dry run writes
nothing. Both on SQLite and PostgreSQL (AC-26 for a failing check, AC-21 and AC-33 for the
migration's end state).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import kandev_dq
from kandev_dq.errors import ExitCode, KandevDqError
from kandev_dq.lab.scenarios.running import materialise
from kandev_dq.project.files import copy_project
from tests.gxhelpers import in_a_fresh_interpreter
from tests.test_check_cli import kandev_dq as cli

#: What differs between two runs of one checkpoint on one store: when and how long it ran.
BASELINE = "expect_write_once_baseline_to_predate_this_run"
PER_RUN = {
    *("run_name", "run_time", "duration_s", "suite_seconds", "baseline_taken_at", "baseline_run"),
    *("records", "docs_index", "finished_at"),
    "explain_options",  # names the run's own project and records database
}


def _comparable(report: dict) -> dict:
    """A report without what belongs to its run (the baseline's time is when it was taken)."""
    kept = {key: value for key, value in report.items() if key not in PER_RUN}
    kept["results"] = [
        r
        | ({"observed_value": "when taken"} if r["expectation"] == BASELINE else {})
        | {"failing_since": "this run" if r["new"] else r["failing_since"]}
        for r in report["results"]
    ]
    return kept


def test_importing_the_package_loads_neither_gx_nor_the_sql_toolkit(tmp_path):
    script = (
        "import sys, kandev_dq\n"
        "assert callable(kandev_dq.check) and callable(kandev_dq.migrate)\n"
        "assert callable(kandev_dq.metrics)\n"
        "print(sorted(m for m in ('great_expectations', 'sqlalchemy') if m in sys.modules))\n"
    )
    assert in_a_fresh_interpreter(script, tmp_path).strip() == "[]"


@pytest.mark.parametrize("scenario, code", [("healthy_baseline", 0), ("stopped_writer", 1)])
def test_check_returns_the_report_the_cli_prints_as_json(scenario, code, target, project, tmp_path):
    """The same verdict, rules, findings and exit code as ``check --format json`` (AC-26), each
    in a project of its own (each run is its project's first: the same baseline disclosure)."""
    materialise(scenario, target.url)
    report = kandev_dq.check(target.url, "pre_release", project)
    assert report.exit_code() == ExitCode(code) and report.success is (code == 0)
    other = copy_project(project, tmp_path / "cli-project")
    done = cli(
        "check", "--store", target.url, "--checkpoint", "pre_release",
        "--project", str(other), "--format", "json",
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    assert _comparable(report.to_json()) == _comparable(json.loads(done.stdout))


def test_check_fails_on_warnings_when_asked(target, project):
    """A standing excess is a warning (AC-27): exit 0 by default, 1 failing on warnings."""
    materialise("standing_excess", target.url)
    report = kandev_dq.check(target.url, "nightly", project)
    assert report.success and report.failures("warning")
    assert report.exit_code() is ExitCode.OK
    assert report.exit_code("warning") is ExitCode.FAILED


def test_a_check_that_cannot_run_raises_one_line_with_exit_code_2(project, tmp_path):
    missing = tmp_path / "no-such.db"
    with pytest.raises(KandevDqError) as raised:
        kandev_dq.check(str(missing), "nightly", project)
    assert raised.value.exit_code is ExitCode.COULD_NOT_RUN
    assert str(missing) in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(KandevDqError, match="no checkpoint 'weekly'"):
        kandev_dq.check(str(missing), "weekly", project)


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_migrate_plans_without_writing_then_migrates(target, project):
    """The dry run reports the steps and writes nothing; the run brings the store to the
    contract's end state (AC-21, AC-33), which ``check`` then passes."""
    target.create_base(subagents=None)
    target.engine.dispose()
    before = _digest(target.url) if target.dialect == "sqlite" else None
    plan = kandev_dq.migrate(target.url, dry_run=True)
    assert plan.dry_run and plan.ok and plan.steps and plan.exit_code is ExitCode.OK
    assert plan.to_dict()["store"] == plan.store and plan.store.startswith(target.dialect)
    if before is not None:
        assert _digest(target.url) == before
    assert kandev_dq.check(target.url, "post_migration", project).success is False

    done = kandev_dq.migrate(target.url)
    assert not done.dry_run and done.ok and done.exit_code is ExitCode.OK
    assert kandev_dq.check(target.url, "post_migration", project).success


def test_the_cli_prints_the_api_migration_report(target):
    target.create_base(subagents=None)
    printed = cli("migrate", "--store", target.url, "--dry-run", "--format", "json")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == json.loads(
        json.dumps(kandev_dq.migrate(target.url, dry_run=True).to_dict(), default=str)
    )
