"""Hostile projects and hostile values: a project's code never runs unasked, ``init`` never
deletes, a store value never drives the terminal or a Markdown renderer, and a password that
does not parse as part of a URL never shows."""

from __future__ import annotations

import io
import json

import pytest
from markdown_it import MarkdownIt
from rich.console import Console

import kandev_dq.cli as cli_module
from kandev_dq.errors import KandevDqError
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project.files import (
    PROJECT_FILE,
    PROJECT_ROOT_GUARD,
    generated_files,
    refuse_project_code,
)
from kandev_dq.run.progress import RichProgress
from kandev_dq.text import markdown_code, one_line, printable
from tests.gxhelpers import REPO
from tests.test_check_cli import CAPTURE, kandev_dq
from tests.test_reliability import cli

# --- project code ------------------------------------------------------------------------------

MARKER_MODULE = """\
from pathlib import Path

Path(__file__).with_name("MARKER").write_text("project code ran")
from kandev_dq.report.site import KandevSiteBuilder  # noqa: E402,F401
"""


def _project_naming_its_own_site_builder(project):
    plugins = project / "plugins"
    plugins.mkdir()
    (plugins / "marker_site.py").write_text(MARKER_MODULE)
    yml = project / PROJECT_FILE
    ours = "module_name: kandev_dq.report.site\n    class_name: KandevSiteBuilder"
    assert ours in yml.read_text()
    text = yml.read_text().replace(ours, ours.replace("kandev_dq.report.site", "marker_site"))
    yml.write_text(text.replace("plugins_directory:\n", "plugins_directory: plugins/\n"))
    return plugins / "MARKER"


def test_a_project_naming_its_own_module_runs_only_when_allowed(sqlite_target, project):
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    marker = _project_naming_its_own_site_builder(project)
    refused = kandev_dq("check", "--store", sqlite_target.url, "--project", str(project))
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.splitlines() == [
        f"kandev-dq: error: {project / PROJECT_FILE}: data_docs_sites.local_site: "
        "'marker_site.KandevSiteBuilder' is not a class kandev-dq writes for a data docs site "
        "(allowed: kandev_dq.report.site.KandevSiteBuilder); pass --allow-project-code to use it"
    ]
    assert not marker.exists()
    allowed = kandev_dq(
        "check", "--store", sqlite_target.url, "--project", str(project), "--allow-project-code"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert marker.read_text() == "project code ran"
    assert allowed.stderr.splitlines()[-1] == f"kandev-dq: project {project.resolve()}"


def test_checkpoints_plugins_and_checkpoint_stores_are_vetted_before_gx_reads_them(project):
    refuse_project_code(REPO)  # this checkout: its plugins folder is kandev-dq's own
    refuse_project_code(project)
    checkpoint = project / "checkpoints" / "nightly.json"
    document = json.loads(checkpoint.read_text())
    document["actions"].append(
        {"name": "tell", "type": "slack", "renderer": {"module_name": "os", "class_name": "x"}}
    )
    checkpoint.write_text(json.dumps(document))
    with pytest.raises(KandevDqError, match=r"nightly\.json: actions\[1\]\.renderer\.class_name: "):
        refuse_project_code(project)
    checkpoint.unlink()
    yml = project / PROJECT_FILE
    config = yml.read_text()
    yml.write_text(config.replace("plugins_directory:\n", "plugins_directory: plugins/\n"))
    with pytest.raises(KandevDqError, match="plugins_directory 'plugins/' is project code"):
        refuse_project_code(project)
    yml.write_text(config.replace("base_directory: checkpoints/", "base_directory: ../"))
    with pytest.raises(KandevDqError, match="keeps checkpoints outside the project folder"):
        refuse_project_code(project)


# --- init ----------------------------------------------------------------------------------------


def _theirs(folder):
    files = {
        "notes.txt": "mine",
        "expectations/mine.json": '{"name": "mine", "expectations": []}',
        "checkpoints/mine.json": '{"name": "mine"}',
        "validation_definitions/mine.json": '{"name": "mine"}',
        "uncommitted/validations/x.json": "{}",
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return files


def test_init_refuses_a_folder_that_is_not_empty(tmp_path, capsys):
    folder = tmp_path / "busy"
    folder.mkdir()
    theirs = _theirs(folder)
    code, _, err = cli(capsys, "init", str(folder))
    assert code == 2 and "is not empty: pass --force" in err
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == sorted(
        theirs
    )


def test_init_force_writes_only_its_own_files_and_deletes_nothing(tmp_path, capsys):
    folder = tmp_path / "busy"
    folder.mkdir()
    theirs = _theirs(folder)
    stale = folder / "expectations" / "activation.json"  # an older copy of kandev-dq's own
    stale.write_text('{"name": "activation", "expectations": []}')
    code, _, err = cli(capsys, "init", "--force", str(folder))
    assert code == 0, err
    for name, text in theirs.items():
        assert (folder / name).read_text() == text
    assert all(path.is_file() for path in generated_files(folder))
    assert json.loads(stale.read_text())["expectations"]  # replaced by the generated suite
    written = {p for p in folder.rglob("*") if p.is_file() and p.name != ".ge_store_backend_id"}
    assert written - set(generated_files(folder)) == {folder / n for n in theirs}


def test_init_force_leaves_a_gx_project_of_the_users_own_in_gx(tmp_path, capsys):
    """GX's project_root_dir folder gets kandev-dq's guard only where the user keeps nothing."""
    folder = tmp_path / "busy"
    (folder / "gx").mkdir(parents=True)
    theirs = folder / PROJECT_ROOT_GUARD
    theirs.write_text("config_version: 4.0\n")
    code, _, err = cli(capsys, "init", "--force", str(folder))
    assert code == 0, err
    assert theirs.read_text() == "config_version: 4.0\n"


# --- hostile values --------------------------------------------------------------------------

SCREEN = "\x1b[2J\x1b]0;t\x07\x1b[32mPASSED: all good\x1b[8m"
MARKUP = "[/x][link=http://x]y[/link]"
HTML = "`<img src=x onerror=alert(1)>"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b")


def _hostile_keys(target) -> StoreBuilder:
    store = StoreBuilder(target.engine).create()
    store.keys(MARKUP, HTML, SCREEN)
    return store


def _inert_in_text(output: str) -> None:
    assert not [c for c in RAW_CONTROLS if c in output], output


def test_escaping_shows_every_control_character_and_keeps_markdown_spans_closed():
    assert printable("a\x1b[2Jb\x9b\u202e\nc\td") == "a\\x1b[2Jb\\x9b\\u202e\nc\td"
    assert one_line("a\nb\x7f") == "a\\nb\\x7f"
    assert printable(printable(SCREEN)) == printable(SCREEN)
    html = (
        MarkdownIt("commonmark").enable("table").render(f"| v |\n|---|\n| {markdown_code(HTML)} |")
    )
    assert "<img" not in html and "<code>" in html


def test_migrate_dry_run_shows_hostile_keys_escaped(target, capsys):
    _hostile_keys(target)
    code, out, err = cli(capsys, "migrate", "--store", target.url, "--dry-run")
    assert code in (0, 1), err
    _inert_in_text(out)
    assert printable(SCREEN) in out and MARKUP in out


def test_check_on_a_terminal_reads_no_value_as_markup(sqlite_target, project, capsys, monkeypatch):
    _hostile_keys(sqlite_target)
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=2000, highlight=False)
    monkeypatch.setattr(cli_module.output, "out", terminal)
    code, _, err = cli(capsys, "check", "--store", sqlite_target.url, "--project", str(project))
    shown = screen.getvalue()
    assert code == 1, err  # [/x] does not crash the run
    assert "\x1b]8;" not in shown  # no OSC 8 hyperlink
    assert MARKUP in shown and "expect_activation_keys_to_be_well_formed" in shown
    assert not [c for c in ("\x1b[2J", "\x1b]0;", "\x07", "\x1b[8m") if c in shown]
    monkeypatch.undo()
    code, out, err = cli(capsys, "check", "--store", sqlite_target.url, "--project", str(project))
    assert code == 1, err
    _inert_in_text(out)
    assert "\\x1b[2J" in out


def test_progress_reads_no_project_name_as_markup():
    screen = io.StringIO()
    bar = RichProgress(Console(file=screen, force_terminal=True, width=300))
    suite = "[link=http://x]s[/link]"
    bar.started(f"[/x]{SCREEN}", [(suite, 1)])  # [/x] in a label would raise MarkupError
    bar.suite_done(suite, {"error": 1})
    bar.finished()
    shown = screen.getvalue()
    assert "\x1b]8;" not in shown and "\x1b[2J" not in shown and "\x07" not in shown
    assert f"[/x]{printable(SCREEN)}: {suite}: 1 rules" in shown


def test_history_and_errors_show_a_hostile_store_path_escaped(tmp_path, project, capsys):
    folder = tmp_path / f"{SCREEN}[x]"
    folder.mkdir()
    store = str(folder / "kandev.db")
    # A store whose identity cannot be read is an error for history too (AC-24's ledger is keyed
    # by it), so both commands refuse it, showing the path inert.
    for command in ("history", "check"):
        code, out, err = cli(capsys, command, "--store", store, "--project", str(project))
        assert code == 2 and "no SQLite store" in err, (command, err)
        assert printable(SCREEN) in err
        _inert_in_text(out + err)


def test_audit_summary_is_inert_markdown(sqlite_target, project, tmp_path, capsys):
    _hostile_keys(sqlite_target)
    out_dir = tmp_path / "audit"
    args = ("--store", sqlite_target.url, "--project", str(project), "--out", str(out_dir))
    code, out, err = cli(capsys, "audit", *args)
    assert code == 1, err
    _inert_in_text(out)
    summary = (out_dir / "SUMMARY.md").read_text()
    assert not [c for c in RAW_CONTROLS if c in summary]
    assert "<img" not in summary and "&lt;img src=x onerror=alert(1)&gt;" in summary
    html = MarkdownIt("commonmark").enable("table").render(summary)
    assert "<img" not in html and "<a " not in html.replace('<a href="data_docs/index.html"', "")


# --- URLs that do not parse ------------------------------------------------------------------


@pytest.mark.parametrize(
    "password", ["p@SECRETPW", "a@b:c/d SECRETPW", "pa:SECRETPW@x", "pa SECRETPW/x:y"]
)
def test_a_password_with_unencoded_characters_never_shows(password, project, capsys):
    for port in ("5432", "1"):
        url = f"postgresql://postgres:{password}@127.0.0.1:{port}/kdq_absent"
        for args in (
            ("check", "--store", url, "--project", str(project)),
            ("history", "--store", url, "--project", str(project)),
            ("migrate", "--store", url),
            ("migrate", "--store", url, "--dry-run"),
        ):
            code, out, err = cli(capsys, *args)
            assert code == 2, (args, out, err)
            assert "SECRETPW" not in out + err, (args, out, err)
            assert "@" not in password or "not a database URL: postgresql://***@127.0.0.1" in err
