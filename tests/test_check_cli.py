"""`kandev-dq check` as a user runs it: a fresh process, JSON shape, exit codes, GX pitfalls."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from kandev_dq.contract.rule_index import RULE_INDEX
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project.files import CHECKPOINTS
from tests.gxhelpers import check

CAPTURE = "2026-07-30T01:39:37.271235Z"
CHECK_JSON_KEYS = {
    *("store", "dialect", "checkpoint", "success", "state", "state_explanation", "keys"),
    "store_identity",  # the store's name in the records: its identity, or --store-name
    "results",
    *("run_name", "run_time", "duration_s", "finished_at", "counts", "docs_index", "versions"),
    *("records", "baseline_taken_at", "baseline_run", "changes", "suite_seconds", "windows"),
    *("pruned", "replica"),  # the standby's replay: None on a primary and on SQLite
    "project_deviations",  # where the project differs from kandev-dq's rules: [] for init's
    "explain_options",  # the store, project and records a failed rule's explain command names
    "selection",  # a partial run's suites and rules (check --suite/--rule): None for a whole run
}


def kandev_dq(
    *args: str, cwd=None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The CLI in a new process, without the caller's ``$KANDEV_STORE_URL``; ``env`` adds
    variables (a libpq service file)."""
    env = {k: v for k, v in os.environ.items() if k != "KANDEV_STORE_URL"} | (env or {})
    return subprocess.run(
        [sys.executable, "-c", "from kandev_dq.cli import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def test_json_output_in_a_fresh_process(target, project):
    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    done = kandev_dq("check", "--store", target.url, "--project", str(project), "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # exactly one JSON object on stdout
    assert set(report) == CHECK_JSON_KEYS
    assert report["project_deviations"] == []
    assert report["run_name"].startswith("nightly@")
    run_time = datetime.fromisoformat(report["run_time"])  # RFC 3339, UTC
    assert report["run_time"].endswith("Z") and run_time.utcoffset() == timedelta(0)
    finished_at = datetime.fromisoformat(report["finished_at"])  # the run's end, for monitors
    assert report["finished_at"].endswith("Z") and run_time < finished_at
    assert 0 < report["duration_s"] < 300
    assert report["counts"] == {
        **{
            s: sum(not r["success"] and r["severity"] == s for r in report["results"])
            for s in ("error", "warning", "info")
        },
        "passed": sum(r["success"] for r in report["results"]),
    }
    assert Path(report["docs_index"]).is_absolute() and Path(report["docs_index"]).is_file()
    versions = report["versions"]
    assert versions["great_expectations"].startswith("1.")
    assert versions["store_server"].startswith("SQLite " if target.dialect == "sqlite" else "Postg")
    assert set(versions) == {"kandev_dq", "great_expectations", "store_server"}
    assert report["dialect"] == target.dialect and report["state"] == "fully_activated"
    assert report["keys"]["subagent_context_backfill_through"] == ""
    first = report["results"][0]
    assert set(first) == {
        "expectation",
        "rules",
        "severity",
        "success",
        "observed_value",
        "unexpected_count",
        "message",
        "suite",
        "query",  # the SELECT listing what a failed rule counted; null where it passed
        "failing_since",  # a failed rule: since which run it fails on this store and checkpoint
        "new",  # a failed rule that did not fail in the last run
        "thresholds",  # the suite entry's warn_if / error_if; null where any count fails
    }
    assert all(r["query"] is None for r in report["results"] if r["success"])
    assert all(r["failing_since"] is None for r in report["results"] if r["success"])
    assert all(r["severity"] in ("error", "warning", "info") for r in report["results"])
    assert all(r["rules"] for r in report["results"])


def test_exit_codes(target, project):
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, None, CAPTURE)  # a partial pair: an error-severity failure
    failing = kandev_dq("check", "--store", target.url, "--project", str(project))
    assert failing.returncode == 1, failing.stderr
    assert "expect_activation_keys_to_be_paired" in failing.stdout
    missing = kandev_dq("check", "--store", str(project / "absent.db"), "--project", str(project))
    assert missing.returncode == 2
    assert missing.stderr.startswith("kandev-dq: error:") and len(missing.stderr.splitlines()) == 1


def test_a_failed_rule_names_its_explain_command_and_it_runs(target, project, tmp_path):
    """The report names, for each failed rule, the explain command with the store, project and
    records the run used; copied as printed, it lists what the rule counted (AC-24d)."""
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, None, CAPTURE)  # a partial pair: an error-severity failure
    records = tmp_path / "elsewhere" / "records.db"
    records.parent.mkdir()
    url = target.url
    if target.dialect == "postgresql":  # trust auth ignores it; the pointer must never show it
        url = sa.make_url(url).set(password="SECRETPW").render_as_string(hide_password=False)
    args = ("--store", url, "--project", str(project), "--records", str(records))
    failing = kandev_dq("check", *args)
    assert failing.returncode == 1, failing.stderr
    [pointer] = [
        line
        for line in failing.stdout.splitlines()
        if line.startswith("explain: kandev-dq explain expect_activation_keys_to_be_paired ")
    ]
    command = shlex.split(pointer.removeprefix("explain: "))
    assert command[-1] == "--run" and f"sqlite:///{records.resolve()}" in command
    assert str(project.resolve()) in command and "SECRETPW" not in failing.stdout
    listed = kandev_dq(*command[1:])
    assert listed.returncode == 0, listed.stderr
    first, *rest = listed.stdout.splitlines()
    assert first.startswith("expect_activation_keys_to_be_paired [AC-24d")
    # The same store, judged the same way, through the store option the pointer gave.
    [verdict] = [line for line in rest if line.startswith("on ")]
    assert f"({target.dialect}): FAILED: " in verdict


def test_fail_on_warning(target, project):
    # Only a warning fails: a backfill row inside the sentinel's window (AC-24f, AC-24d).
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    session = store.session()
    store.subagent_row(session, "toolu_raced", "2026-07-30 01:39:35+00:00", source="backfill")
    args = ("check", "--store", target.url, "--project", str(project))
    lenient = kandev_dq(*args)
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert "expect_no_backfill_rows_inside_sentinel_window" in lenient.stdout
    assert kandev_dq(*args, "--fail-on", "warning").returncode == 1


def test_a_suite_with_an_unknown_expectation_type_refuses_to_run(target, project):
    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    suite_path = project / "expectations" / "activation.json"
    suite = json.loads(suite_path.read_text())
    suite["expectations"].append(
        {"type": "expect_something_unregistered", "kwargs": {}, "meta": {}}
    )
    suite_path.write_text(json.dumps(suite))
    done = kandev_dq("check", "--store", target.url, "--project", str(project))
    assert done.returncode == 2
    assert f"{suite_path}: expectations[" in done.stderr  # not a rule of kandev-dq's (3a)
    assert "'expect_something_unregistered' is not one of kandev-dq's rules" in done.stderr
    allowed = ("--allow-project-code",)  # and GX's load is still counted under the opt-in
    done = kandev_dq("check", "--store", target.url, "--project", str(project), *allowed)
    assert done.returncode == 2
    assert "loaded" in done.stderr and "expectations" in done.stderr


def test_a_sql_error_inside_a_rule_is_a_failure_not_a_pass(target, project):
    # A subagents table missing a contract column makes the facts query fail.
    StoreBuilder(target.engine).create(subagents=None).keys(CAPTURE, "", CAPTURE)
    with target.engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE task_session_subagents (id TEXT PRIMARY KEY, task_session_id TEXT)"
            )
        )
    report = check(project, target)
    broken = [r for r in report.results if r.message.startswith("could not evaluate")]
    assert broken and all(not r.success for r in broken)
    assert not report.success


def test_the_project_folder_must_exist(target, tmp_path):
    StoreBuilder(target.engine).create()
    done = kandev_dq("check", "--store", target.url, "--project", str(tmp_path / "nowhere"))
    assert done.returncode == 2 and "not a kandev-dq project" in done.stderr


def test_validation_never_writes_to_the_store(sqlite_target, project):
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    sqlite_target.engine.dispose()
    before = Path(sqlite_target.url).read_bytes()
    os.chmod(sqlite_target.url, 0o444)
    done = kandev_dq(
        "check",
        "--store",
        sqlite_target.url,
        "--project",
        str(project),
        "--checkpoint",
        "pre_release",
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert Path(sqlite_target.url).read_bytes() == before


def test_check_and_history_name_the_store_alike(target, project):
    """One display form: no user, no password, a SQLite file by its absolute path."""
    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    args = ("--store", target.url, "--project", str(project))
    checked = json.loads(kandev_dq("check", *args, "--format", "json").stdout)
    listed = json.loads(kandev_dq("history", *args, "--format", "json").stdout)
    text = kandev_dq("check", *args).stdout
    assert checked["store"] == listed["store"]
    assert f" on {checked['store']} (" in text
    assert "@" not in checked["store"] and "+psycopg" not in checked["store"]
    if target.dialect == "sqlite":
        assert checked["store"] == f"sqlite:///{Path(target.url).resolve()}"


def test_junit_output_read_by_a_junit_consumer(target, project, tmp_path):
    from junitparser import JUnitXml

    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, None, CAPTURE)  # a partial pair: an error-severity failure
    args = ("--store", target.url, "--project", str(project), "--checkpoint", "pre_release")
    done = kandev_dq("check", *args, "--format", "junit")
    assert done.returncode == 1, done.stderr
    path = tmp_path / "junit.xml"
    path.write_text(done.stdout, encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    suites = {suite.name: suite for suite in xml}
    assert list(suites) == ["activation", "writer_health", "rows", "schema", "backfill"]
    # pre_release runs every suite that reads everything
    assert sum(suite.tests for suite in xml) == len(
        [rule for rule in RULE_INDEX if rule.suite in CHECKPOINTS["pre_release"]]
    )
    # Each suite's real duration, within the run's.
    assert all(suite.time > 0 for suite in xml) and sum(s.time for s in xml) <= xml.time + 0.01
    paired = next(
        c for c in suites["activation"] if c.name == "expect_activation_keys_to_be_paired"
    )
    [failure] = paired.result
    assert failure.type == "error" and failure.message
    # The failure's text names the command listing what the rule counted, as the run used it.
    assert "explain: kandev-dq explain expect_activation_keys_to_be_paired --store " in (
        failure.text
    )
    assert failure.text.endswith(" --run")
    props = [(p.get("name"), p.get("value")) for p in paired._elem.iter("property")]
    assert ("ac", "AC-24d") in props and ("severity", "error") in props


def test_the_verdict_line_says_which_run_it_is():
    from kandev_dq.run.check import CheckReport, verdict_line

    report = CheckReport(
        store="sqlite:////srv/kandev.db",
        dialect="sqlite",
        checkpoint="nightly",
        success=True,
        state="fully_activated",
        keys={},
        run_name="nightly@sqlite-srv-kandev-db",
        run_time="2026-11-30T19:04:36.042122Z",
    )
    line = verdict_line(report)
    assert line.startswith("PASSED: checkpoint nightly run nightly@sqlite-srv-kandev-db at ")
    assert "at 2026-11-30T19:04:36.042122Z on sqlite:////srv/kandev.db (sqlite)" in line


def _on_a_terminal(args: list[str], columns: int) -> str:
    """kandev-dq run on a pseudo-terminal ``columns`` wide; what it wrote there, escapes cut."""
    import fcntl
    import pty
    import re
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("KANDEV_STORE_URL", "COLUMNS")}
    env |= {"TERM": "xterm", "NO_COLOR": "1"}
    child = subprocess.Popen(
        [sys.executable, "-c", "from kandev_dq.cli import main; main()", *args],
        stdin=slave,
        stdout=slave,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    child.wait(timeout=300)
    os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.mark.parametrize("columns", [80, 120])
def test_rule_names_stay_whole_on_a_terminal(sqlite_target, project, columns):
    """A rule name is copied into `explain`: on an 80- or 120-column terminal, each failed
    rule's name is on one line, whole."""
    store = StoreBuilder(sqlite_target.engine).create()
    store.keys(CAPTURE, None, CAPTURE)  # a partial pair: error-severity failures
    report = check(project, sqlite_target, "nightly")
    flagged = [r.expectation for r in report.results if not r.success and r.severity != "info"]
    assert flagged
    args = ["check", "--store", sqlite_target.url, "--project", str(project), "--quiet"]
    shown = _on_a_terminal([*args, "--checkpoint", "nightly"], columns)
    lines = shown.splitlines()
    flagged_part = lines[: next(i for i, ln in enumerate(lines) if ln.startswith("FAILED: "))]
    assert all(len(line) <= columns for line in flagged_part), shown  # wrapped, not cut
    for name in flagged:
        assert any(name in line for line in lines), (name, shown)
