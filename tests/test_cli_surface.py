"""The command line a new user meets first: help, version, the rules table, listings."""

from __future__ import annotations

import subprocess
import sys

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kandev_dq import cli
from kandev_dq.contract.rule_index import RULE_INDEX
from tests.gxhelpers import in_a_fresh_interpreter
from tests.test_check_cli import kandev_dq

COMMANDS = [
    [],
    ["sample"],
    ["migrate"],
    ["check"],
    ["audit"],
    ["history"],
    ["explain"],
    ["docs"],
    ["demo"],
    ["init"],
    ["doctor"],
    ["rules"],
    ["scenarios"],
    ["scenarios", "list"],
    ["scenarios", "build"],
    ["scenarios", "matrix"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "(top)")
def test_help_shows_no_type_after_a_flag(command):
    shown = CliRunner().invoke(cli.app, [*command, "--help"])
    assert shown.exit_code == 0, shown.output
    assert "<bool>" not in shown.output
    assert "--help" in shown.output


def test_version():
    done = kandev_dq("--version")
    assert done.returncode == 0, done.stderr
    name, version = done.stdout.split()
    assert name == "kandev-dq" and version[0].isdigit()


def test_rules_needs_no_project_and_no_gx(tmp_path):
    script = (
        "import sys\n"
        "from kandev_dq.cli import app\n"
        "try:\n"
        "    app(['rules'])\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        "assert 'great_expectations' not in sys.modules, 'rules imported GX'\n"
    )
    assert "expect_activation_keys_to_be_write_once" in in_a_fresh_interpreter(script, tmp_path)


def test_loading_gx_leaves_the_collector_running_and_gx_frozen(tmp_path):
    # The collector is paused only while GX loads: a command that then reads a big store
    # must still free its cycles, also when the load fails.
    script = (
        "import gc, sys\n"
        "from kandev_dq.api import loading_gx\n"
        "try:\n"
        "    with loading_gx():\n"
        "        raise ImportError('no GX here')\n"
        "except ImportError:\n"
        "    pass\n"
        "assert gc.isenabled(), 'collector left off after a failed load'\n"
        "before = gc.get_freeze_count()\n"
        "with loading_gx():\n"
        "    assert not gc.isenabled()\n"
        "    import great_expectations\n"
        "assert gc.isenabled(), 'collector left off after loading GX'\n"
        "assert gc.get_freeze_count() > before + 100_000, gc.get_freeze_count()\n"
        "with loading_gx():\n"
        "    assert gc.isenabled(), 'paused although GX was already loaded'\n"
        "print('ok')\n"
    )
    assert in_a_fresh_interpreter(script, tmp_path).strip() == "ok"


def _rules_on(console: Console, monkeypatch) -> str:
    monkeypatch.setattr(cli.output, "out", console)
    done = CliRunner().invoke(cli.app, ["rules"])
    assert done.exit_code == 0, done.output
    return console.export_text()


@pytest.mark.parametrize("width", [80, 120])
def test_rules_never_cuts_an_expectation_name_on_a_terminal(width, monkeypatch):
    terminal = Console(width=width, force_terminal=True, color_system=None, record=True)
    shown = _rules_on(terminal, monkeypatch)
    lines = shown.splitlines()
    for rule in RULE_INDEX:
        assert any(rule.expectation in line for line in lines), rule.expectation
    assert max(len(line.rstrip()) for line in lines) <= width


def test_rules_off_a_terminal_prints_whole_tab_separated_lines():
    done = kandev_dq("rules")
    assert done.returncode == 0, done.stderr
    cells = [line.split("\t") for line in done.stdout.splitlines()]
    assert all(len(row) == 5 for row in cells)
    listed = {row[1] for row in cells}
    assert {rule.expectation for rule in RULE_INDEX} <= listed


def test_rules_markdown_is_kept(monkeypatch):
    done = CliRunner().invoke(cli.app, ["rules", "--markdown"])
    assert done.output.startswith("| AC | summary | expectation | suite | severity |")


def test_scenarios_list_off_a_terminal_prints_no_markdown():
    done = kandev_dq("scenarios", "list")
    assert done.returncode == 0, done.stderr
    assert "known gap" in done.stdout
    assert "**" not in done.stdout


def test_scenarios_build_reports_the_command_s_duration(tmp_path):
    """The figure `scenarios build` prints is the command's whole duration (loading included),
    and the part spent writing the store is named as such."""
    import re
    import time

    started = time.perf_counter()
    done = kandev_dq("scenarios", "build", "fresh_install", "--store", str(tmp_path / "s.db"))
    wall = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    found = re.search(r" in ([0-9.]+) s \(([0-9.]+) s of it writing the store\)", done.stdout)
    assert found, done.stdout
    total, writing = float(found.group(1)), float(found.group(2))
    assert writing <= total <= wall and total >= 0.5 * wall, (total, writing, wall)
    # The store named as every command names it (shown_store), not as it was typed.
    assert f"into sqlite:///{(tmp_path / 's.db').resolve()} in " in done.stdout


def test_between_runs_asks_for_the_store_build_made():
    shown = CliRunner().invoke(cli.app, ["scenarios", "between-runs", "--help"])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "an empty one" not in text and "`kandev-dq scenarios build` made" in text


def test_scenarios_build_names_a_postgres_store_without_its_user(pg_target):
    done = CliRunner().invoke(
        cli.app, ["scenarios", "build", "fresh_install", "--store", pg_target.url]
    )
    assert done.exit_code == 0, done.output
    assert "into postgresql://" in done.stdout and "@" not in done.stdout, done.stdout


def test_shell_completion_installs_and_completes(tmp_path, monkeypatch):
    """typer's completion: `--install-completion bash` writes the script, and the script's
    callback completes a command name. (typer finds the shell among the process's ancestors:
    a run under cron, an IDE or a detached job has none, so the user's bash is given.)"""
    import shellingham

    monkeypatch.setattr(shellingham, "detect_shell", lambda *_, **__: ("bash", "/bin/bash"))
    runner = CliRunner()
    done = runner.invoke(
        cli.app,
        ["--install-completion", "bash"],
        prog_name="kandev-dq",
        env={"HOME": str(tmp_path)},
    )
    assert done.exit_code == 0, done.output
    assert "_KANDEV_DQ_COMPLETE" in "".join(
        p.read_text() for p in tmp_path.rglob("*") if p.is_file()
    )
    env = {
        "_KANDEV_DQ_COMPLETE": "complete_bash",
        "COMP_WORDS": "kandev-dq scen",
        "COMP_CWORD": "1",
    }
    completed = runner.invoke(cli.app, [], prog_name="kandev-dq", env=env)
    assert completed.stdout.split() == ["scenarios"], completed.output


@pytest.mark.parametrize("group", [[], ["scenarios"], ["ledger"], ["records"]], ids=str)
def test_command_lists_never_cut_a_description_at_80_columns(group):
    shown = CliRunner().invoke(cli.app, [*group, "--help"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert all(len(line) <= 80 for line in lines), shown.output
    cut = [line for line in lines if line.endswith("...") and not line.startswith("Usage:")]
    assert cut == [], shown.output


def test_scenarios_list_and_build_load_no_gx():
    """Listing or describing scenarios is static: it must not wait for GX to import."""
    probe = (
        "import sys; from kandev_dq.lab.scenarios import SCENARIOS; "
        "from kandev_dq.lab.scenarios.running import RECORDS_DISCLOSURES as R; "
        "print('great_expectations' in sys.modules, sorted(R))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    from kandev_dq.expectations.activation import BASELINE_DISCLOSURE

    assert done.stdout.split(maxsplit=1) == ["False", f"{[BASELINE_DISCLOSURE]}\n"], done


def _completed(*words: str) -> list[str]:
    """What bash completion offers for the last of ``words`` (typer's protocol, as the script
    ``--install-completion`` writes asks it)."""
    env = {
        "_KANDEV_DQ_COMPLETE": "complete_bash",
        "COMP_WORDS": " ".join(("kandev-dq", *words)),
        "COMP_CWORD": str(len(words)),
    }
    done = CliRunner().invoke(cli.app, [], prog_name="kandev-dq", env=env)
    assert done.exit_code == 0, done.output
    return done.stdout.split()


def test_completion_offers_the_project_s_checkpoints_the_rules_and_the_scenarios(project):
    """TAB after an option or argument taking a checkpoint, a rule or a scenario offers those
    names: the checkpoints of the project the command line names, never a file name that holds
    a control character (a checkout is data)."""
    nightly = project / "checkpoints" / "nightly.json"
    (project / "checkpoints" / "weekly.json").write_text(nightly.read_text())
    (project / "checkpoints" / "wide\x1b[2J.json").write_text(nightly.read_text())
    assert _completed("check", "--project", str(project), "--checkpoint", "w") == ["weekly"]
    assert _completed("serve", "--project", str(project), "--full-checkpoint", "pre") == [
        "pre_release"
    ]
    assert _completed("explain", "expect_no_orphan") == ["expect_no_orphan_subagent_rows"]
    assert _completed("check", "--rule", "expect_no_orphan") == ["expect_no_orphan_subagent_rows"]
    # --suite: the suites of the checkpoint named before it (else nightly's)
    assert _completed("check", "--project", str(project), "--suite", "") == [
        "activation",
        "writer_health",
        "rows",
    ]
    live = ("check", "--project", str(project), "--checkpoint", "live", "--suite", "live_w")
    assert _completed(*live) == ["live_writer_health"]
    assert _completed("scenarios", "build", "stopped_w") == [
        "stopped_writer",
        "stopped_writer_behind_banked_excess",
    ]
    assert _completed("scenarios", "between-runs", "no_such") == []


def test_completion_functions_name_what_each_name_is(project, tmp_path):
    from kandev_dq.cli import options
    from kandev_dq.lab.scenarios import SCENARIOS

    rules = dict(options.complete_rules("expect_"))
    assert set(rules) == {rule.expectation for rule in RULE_INDEX}
    orphans = next(rule for rule in RULE_INDEX if rule.expectation.startswith("expect_no_orphan"))
    assert rules[orphans.expectation] == ", ".join(orphans.rules)
    assert dict(options.complete_scenarios("")) == {s.name: s.expected for s in SCENARIOS.values()}

    class Line:  # what click's parse of the command line so far holds
        def __init__(self, project):
            self.params = {"project": project}

    assert options.complete_checkpoints(Line(project), "") == [
        "live",
        "nightly",
        "post_migration",
        "pre_release",
    ]
    assert options.complete_checkpoints(Line(tmp_path / "none"), "") == []  # no project, no names


@pytest.mark.parametrize(
    ("typed", "known", "said"),
    [
        ("nightlly", ["live", "nightly", "pre_release"], "; did you mean 'nightly'?"),
        ("pre-release", ["post_migration", "pre_release"], "; did you mean 'pre_release'?"),
        ("weekly", ["live", "nightly", "pre_release"], ""),  # nothing close: nothing said
    ],
)
def test_did_you_mean_names_the_closest_known_names(typed, known, said):
    from kandev_dq.errors import did_you_mean

    assert did_you_mean(typed, known) == said
