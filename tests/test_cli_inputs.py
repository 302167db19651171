"""Bad input is refused before GX is imported, in one line, exit 2; JSON callers get JSON.

The timings are in the bench (``python -m bench``: the sub-second rows), not here: a timed test
on a shared machine fails for the wrong reasons. What a test can prove is that the refusal
happens before the slow part: GX is not imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kandev_dq.errors import KandevDqError
from kandev_dq.lab.storebuilder import StoreBuilder

#: Runs the CLI, then says on stderr whether GX was imported (the process exit code is kept).
NO_GX_PROBE = """
import sys
from kandev_dq.cli import main
try:
    main()
finally:
    imported = 'great_expectations' in sys.modules
    print('GX imported' if imported else 'GX not imported', file=sys.stderr)
"""


def kandev_dq_probed(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KANDEV_STORE_URL"}
    env["HOME"] = str(cwd) if cwd else env.get("HOME", "")
    return subprocess.run(
        [sys.executable, "-c", NO_GX_PROBE, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


@pytest.fixture
def kandev_store(sqlite_target):
    StoreBuilder(sqlite_target.engine).create()
    return sqlite_target.url


BAD_INPUTS = {
    "store file missing": (["check", "--store", "{tmp}/missing.db"], "the file does not exist"),
    "store is a folder": (["check", "--store", "{tmp}"], "is a folder, not a SQLite file"),
    "not a Kandev store": (["check", "--store", "{empty}"], "is not a Kandev store"),
    "unknown checkpoint": (
        ["check", "--store", "{store}", "--checkpoint", "nightlly"],
        "no checkpoint 'nightlly' in",
    ),
    "unreachable server": (
        ["check", "--store", "postgresql://127.0.0.1:9/kandev"],
        "the server is not accepting connections",
    ),
    "no such project": (
        ["check", "--store", "{store}", "--project", "{tmp}/none"],
        "the folder does not exist",
    ),
    "audit, store missing": (
        ["audit", "--out", "{tmp}/audit", "--store", "{tmp}/missing.db"],
        "the file does not exist",
    ),
    "history, no such project": (["history", "--project", "{tmp}/none"], "does not exist"),
    "docs, no such project": (["docs", "--project", "{tmp}/none"], "does not exist"),
    "explain, no such rule": (
        ["explain", "expect_no_such_rule", "--store", "{store}"],
        "no expectation 'expect_no_such_rule'",
    ),
    "explain, store missing": (
        ["explain", "expect_no_orphan_subagent_rows", "--store", "{tmp}/missing.db"],
        "the file does not exist",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS, ids=str)
def test_bad_input_is_refused_before_gx_loads(case, kandev_store, project, tmp_path):
    args, reason = BAD_INPUTS[case]
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    fill = {"tmp": str(tmp_path), "store": kandev_store, "empty": str(empty)}
    argv = [a.format(**fill) for a in args]
    if "--project" not in argv and argv[0] in ("check", "audit"):
        argv += ["--project", str(project)]
    done = kandev_dq_probed(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    error, probe = done.stderr.strip().splitlines()
    assert error.startswith("kandev-dq: error: ") and reason in error, error
    assert probe == "GX not imported"


def test_no_store_names_the_default_it_looked_for(tmp_path):
    done = kandev_dq_probed("check", cwd=tmp_path)  # HOME is tmp_path: no default store there
    assert done.returncode == 2
    assert "~/.kandev/data/kandev.db" in done.stderr and "--store" in done.stderr


def test_check_json_that_cannot_run_prints_a_json_error(tmp_path, project):
    done = kandev_dq_probed(
        "check",
        "--store",
        str(tmp_path / "missing.db"),
        "--project",
        str(project),
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    report = json.loads(done.stdout)
    assert report["exit_code"] == 2 and "the file does not exist" in report["error"]


def test_docs_open_without_a_browser_fails(project, monkeypatch):
    import webbrowser

    from typer.testing import CliRunner

    from kandev_dq.cli import app

    monkeypatch.setattr(webbrowser, "open", lambda url: False)
    done = CliRunner().invoke(app, ["docs", "--project", str(project), "--open"])
    assert isinstance(done.exception, KandevDqError)  # main() makes it one line, exit 2
    assert "no web browser" in str(done.exception)
