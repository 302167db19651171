"""Scheduled use: audit folders, run history, progress, credentials kept out (notifications:
``test_notifications.py``)."""

from __future__ import annotations

import json
import time
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from kandev_dq.contract.instants import BACKFILL_THROUGH
from kandev_dq.errors import KandevDqError, StoreError
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project import files as project_module
from kandev_dq.records import register as runs
from kandev_dq.report.audit import MARKER, run_audit
from kandev_dq.report.history import history, render
from kandev_dq.run.check import run_check
from kandev_dq.run.progress import PlainProgress, RichProgress
from kandev_dq.store import sqlite_driver
from kandev_dq.store.reference import store_ref
from tests.test_check_cli import CHECK_JSON_KEYS, kandev_dq

CAPTURE = "2026-07-30T01:39:37.271235Z"
PAIRED = "expect_activation_keys_to_be_paired"
TQDM_MARKS = ("Calculating Metrics", "it/s", "█", "\r")
PASSWORD = "s3cret"


def _healthy(target) -> StoreBuilder:
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    return store


def _files_containing(folder: Path, needle: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


# --- audit -------------------------------------------------------------------------------------


def test_audit_folder_is_self_contained(target, project, tmp_path):
    _healthy(target)
    out = tmp_path / "audit"
    done = run_audit(project, target.url, out)

    assert (out / "data_docs" / "index.html").is_file()
    assert (out / "data_docs" / "static").is_dir()  # the site's own assets came along
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == CHECK_JSON_KEYS  # exactly the `check --format json` shape
    assert summary == json.loads(json.dumps(done.report.to_json(), default=str))
    assert summary["checkpoint"] == "pre_release" and summary["dialect"] == target.dialect
    text = (out / "SUMMARY.md").read_text()
    assert "fully_activated" in text and "PASSED" in text
    assert f"({target.dialect})" in text and "kandev-dq " in text and "Ran at" in text
    assert "subagent_context_backfill_through" in text and "sentinel" in text

    # An earlier audit folder is rewritten; anything else non-empty is refused before a run.
    run_audit(project, target.url, out)
    assert (out / MARKER).is_file() and (out / "data_docs" / "index.html").is_file()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(KandevDqError, match="not a kandev-dq audit folder"):
        run_audit(project, target.url, busy)
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]


def test_one_store_per_page_in_the_audit_and_the_overview(
    target, another_target, project, tmp_path
):
    """Two stores share a project: an audit of one holds its results alone (no page, link or
    name of the other), and the overview's "Checkpoint runs" lists only the latest run's store,
    as its timeline does; the project's index lists both stores' results."""
    import html

    _healthy(target)
    _healthy(another_target)
    run_check(project, another_target.url, "nightly")
    other = html.escape(store_ref(another_target.url).shown, quote=True)
    done = run_audit(project, target.url, tmp_path / "audit")
    mine = runs.parse_run_name(done.report.run_name)[1]

    site = tmp_path / "audit" / "data_docs"
    pages = list((site / "validations").rglob("*.html"))
    assert pages  # the audit's own run is there
    named = {p.relative_to(site / "validations").parts[1] for p in pages}
    assert {runs.parse_run_name(name)[1] for name in named} == {mine}, named
    assert _files_containing(site, other) == []
    assert _files_containing(site, another_target.url) == []
    local = project / "uncommitted" / "data_docs" / "local_site"
    overview = (local / "overview.html").read_text(encoding="utf-8")
    assert html.escape(done.report.store, quote=True) in overview and other not in overview
    index = (local / "index.html").read_text(encoding="utf-8")
    assert "nightly@" in index
    # The index lists both stores' runs, with a Store column filtered as GX's others are (GX
    # writes the table's columns and rows into its script as Python reprs).
    column = {"field": "store", "title": "Store", "sortable": "true", "filterControl": "select"}
    assert repr(column)[1:-1] in index
    for shown in (done.report.store, store_ref(another_target.url).shown):
        assert f"'store': {html.escape(shown, quote=True)!r}" in index, shown


def test_audit_command_exits_like_check(sqlite_target, project, tmp_path):
    store = StoreBuilder(sqlite_target.engine).create()
    store.keys(CAPTURE, None, CAPTURE)  # a partial pair: an error-severity failure
    out = tmp_path / "audit"
    done = kandev_dq(
        "audit", "--store", sqlite_target.url, "--project", str(project), "--out", str(out), "-q"
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("FAILED:") and done.stderr == ""
    text = (out / "SUMMARY.md").read_text()
    assert PAIRED in text and "AC-24d" in text and "FAILED" in text
    assert json.loads((out / "summary.json").read_text())["success"] is False


# --- history -----------------------------------------------------------------------------------


def test_history_shows_when_a_rule_started_failing(target, project):
    store = _healthy(target)
    run_check(project, target.url, "nightly")
    time.sleep(0.01)  # distinct run times
    store.set_key(BACKFILL_THROUGH, None)  # a defective writer drops a key
    run_check(project, target.url, "nightly")

    past = history(project, target.url, limit=10)
    assert len(past.runs) == 2
    newest, oldest = past.runs
    assert newest.run_time > oldest.run_time
    assert [r.checkpoint for r in past.runs] == ["nightly", "nightly"]
    assert newest.suites == ["activation", "rows", "writer_health"]
    assert newest.state == oldest.state == "fully_activated"
    assert PAIRED in {f.expectation for f in newest.failed if f.severity == "error"}
    assert PAIRED not in {f.expectation for f in oldest.failed}
    assert newest.failures["error"] >= 1 and oldest.failures["error"] == 0
    assert not newest.success and oldest.success
    assert history(project, target.url, limit=1).runs[0].run_time == newest.run_time
    assert past.baseline_taken_at and oldest.run_time <= past.baseline_taken_at < newest.run_time
    lines = render(past)
    assert lines[1].startswith("write-once baseline taken ")  # AC-24: when it began
    assert lines[2].split()[0] == newest.run_time and "FAILED" in lines[2]
    assert any(PAIRED in line for line in lines)


def test_history_lists_only_the_asked_store(sqlite_target, project, tmp_path):
    _healthy(sqlite_target)
    run_check(project, sqlite_target.url, "nightly")
    other = tmp_path / "other" / "kandev.db"
    other.parent.mkdir()
    other_store = StoreBuilder(sqlite_driver.create_engine(f"sqlite:///{other}"))
    other_store.create()
    other_store.keys(CAPTURE, "", CAPTURE)
    other_store.engine.dispose()
    run_check(project, str(other), "post_migration")

    done = kandev_dq(
        "history", "--store", sqlite_target.url, "--project", str(project), "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert listed["store"] == f"sqlite:///{Path(sqlite_target.url).resolve()}"
    assert [r["checkpoint"] for r in listed["runs"]] == ["nightly"]
    assert set(listed["runs"][0]["failures"]) == {"error", "warning", "info"}
    never = tmp_path / "never-checked.db"
    with pytest.raises(StoreError, match="does not exist"):  # no identity: never a new store
        history(project, str(never))
    StoreBuilder(sqlite_driver.create_engine(f"sqlite:///{never}")).create().engine.dispose()
    nothing = history(project, str(never))
    assert nothing.runs == [] and "no recorded" in render(nothing)[0]


def test_history_lists_the_asked_checkpoints_only(target, project):
    """``history --checkpoint`` (repeatable) keeps a store's runs of those checkpoints; a
    checkpoint the project does not have is refused with the closest name."""
    _healthy(target)
    for checkpoint in ("nightly", "post_migration", "nightly"):
        run_check(project, target.url, checkpoint)
        time.sleep(0.01)  # distinct run times
    every = history(project, target.url).runs
    assert [r.checkpoint for r in every] == ["nightly", "post_migration", "nightly"]
    nightly = history(project, target.url, checkpoints=["nightly"]).runs
    assert [r.run_time for r in nightly] == [every[0].run_time, every[2].run_time]
    both = ("--checkpoint", "post_migration", "--checkpoint", "nightly")
    done = kandev_dq(
        "history", "--store", target.url, "--project", str(project), *both, "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["runs"]) == 3
    done = kandev_dq(
        "history", "--store", target.url, "--project", str(project), "--checkpoint", "nightlly"
    )
    assert done.returncode == 2 and "did you mean 'nightly'" in done.stderr, done.stderr


def test_run_names_are_safe_and_carry_no_credentials():
    """Run names are made of a store's records key (its identity, or the user's name, which
    may hold anything); the name records of an older version were keyed by holds no
    credentials either."""
    url = "postgresql://kandev:s3cret@db.internal:5432/kandev?password=s3cret&options=-csx"
    spelled = store_ref(url).spelled_name
    assert PASSWORD not in spelled and "password" not in spelled
    assert spelled == store_ref(url.replace("s3cret", "other")).spelled_name
    for identity in ("postgresql:7715956345377290409/kandev/s", "sqlite:2049:1234", "a <b> 'c'/d"):
        name = runs.run_name("pre_release", identity)
        assert all(c.isalnum() or c in "._-@" for c in name)
        assert runs.parse_run_name(name) == ("pre_release", runs.store_tag(identity))
    assert runs.store_tag("sqlite:/a/b.db") != runs.store_tag("sqlite:/a-b.db")
    assert len(runs.run_name("nightly", "sqlite:/" + "x" * 500)) < 120
    assert runs.parse_run_name(None) is None and runs.parse_run_name("manual") is None


# --- progress ----------------------------------------------------------------------------------


def test_json_stdout_is_one_object_and_stderr_has_no_tqdm(sqlite_target, project):
    _healthy(sqlite_target)
    yml = project / "great_expectations.yml"  # a project that asks GX for its bars
    yml.write_text(
        yml.read_text()
        .replace("globally: false", "globally: true")
        .replace("metric_calculations: false", "metric_calculations: true")
    )
    done = kandev_dq(
        "check", "--store", sqlite_target.url, "--project", str(project), "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) == CHECK_JSON_KEYS  # one object, nothing else
    assert done.stdout.count("\n") == 1
    assert not [mark for mark in TQDM_MARKS if mark in done.stderr], done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("kandev-dq: nightly: 3 suite(s), ")
    assert [line.split("] ")[1].split(":")[0] for line in lines[1:-1]] == [
        "activation",
        "writer_health",
        "rows",
    ]
    assert lines[-1] == f"kandev-dq: project {project.resolve()}"
    assert "globally: true" in yml.read_text()  # the override lived in memory only


def test_progress_displays():
    plain = StringIO()
    lines = PlainProgress(plain)
    lines.started("nightly", [("activation", 15), ("rows", 17)])
    lines.suite_done("activation", {"error": 1, "warning": 0, "info": 0})
    lines.suite_done("rows", {"error": 0, "warning": 2, "info": 0})
    lines.finished()
    assert plain.getvalue().splitlines() == [
        "kandev-dq: nightly: 2 suite(s), 32 rules",
        "kandev-dq: nightly: [1/2] activation: 15 rules, 1 error(s), 0 warning(s)",
        "kandev-dq: nightly: [2/2] rows: 17 rules, 0 error(s), 2 warning(s)",
    ]
    screen = StringIO()
    bar = RichProgress(Console(file=screen, force_terminal=True, width=100))
    bar.started("nightly", [("activation", 15), ("rows", 17)])
    bar.suite_done("activation", {"error": 0, "warning": 0, "info": 0})
    assert bar.bar.tasks[0].completed == 15 and bar.bar.tasks[0].total == 32
    bar.suite_done("rows", {"error": 0, "warning": 0, "info": 0})
    bar.finished()
    assert "activation: 15 rules" in screen.getvalue()


# --- the default project -----------------------------------------------------------------------


def test_no_project_outside_a_checkout_is_a_clear_error(tmp_path, monkeypatch):
    installed = tmp_path / "site-packages" / "kandev_dq" / "project.py"
    monkeypatch.setattr(project_module, "__file__", str(installed))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KandevDqError, match="kandev-dq init"):
        project_module.default_project()
    (tmp_path / project_module.PROJECT_FILE).write_text("config_version: 4.0\n")
    assert project_module.default_project() == tmp_path
