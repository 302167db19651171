"""`kandev-dq doctor`: one fact a line, what to do on each failing one, exit 0 or 2; read-only
(the store, and a records database that does not exist yet, are left as they were)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from kandev_dq.facts.window import owner_index_statements
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.records import SCHEMA_VERSION, Records
from tests.test_check_cli import CAPTURE
from tests.test_cli_inputs import kandev_dq_probed
from tests.test_hostile_project import SLACK, _add_action


def doctor(*args: str, cwd: Path) -> tuple[int, list[str], str]:
    """``kandev-dq doctor`` in a new process: its exit code, its stdout lines, and whether GX
    was imported."""
    done = kandev_dq_probed("doctor", *args, cwd=cwd)
    return done.returncode, done.stdout.splitlines(), done.stderr.strip().splitlines()[-1]


def facts(*args: str, cwd: Path) -> tuple[int, dict[str, list[tuple[str, str]]]]:
    """The JSON diagnosis: its exit code, and each fact's status and text by what it is about."""
    done = kandev_dq_probed("doctor", *args, "--format", "json", cwd=cwd)
    found = json.loads(done.stdout)
    assert found["exit_code"] == done.returncode and found["ok"] == (done.returncode == 0)
    by_subject: dict[str, list[tuple[str, str]]] = {}
    for fact in found["facts"]:
        by_subject.setdefault(fact["about"], []).append((fact["status"], fact["text"]))
    return done.returncode, by_subject


@pytest.fixture
def healthy(target):
    """A fully activated store holding one of the indexes its owner may add for live."""
    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    with target.engine.begin() as conn:
        conn.exec_driver_sql(owner_index_statements()[0])
    return target


def _file_state(target) -> bytes | None:
    return Path(target.url).read_bytes() if target.dialect == "sqlite" else None


def _tables(target) -> set[str]:
    return set(sa.inspect(target.engine).get_table_names())


def test_a_healthy_store_holds_every_fact_and_nothing_is_written(healthy, project, tmp_path):
    before, tables = _file_state(healthy), _tables(healthy)
    records = project / "uncommitted" / "records.db"
    code, lines, probe = doctor("--store", healthy.url, "--project", str(project), cwd=tmp_path)
    assert code == 0, lines
    assert probe == "GX not imported"
    assert lines[-1].startswith("doctor: all ") and lines[-1].endswith("a check can run here")
    assert all(line.startswith(("OK    ", "NOTE  ")) for line in lines[:-1]), lines

    code, found = facts("--store", healthy.url, "--project", str(project), cwd=tmp_path)
    assert code == 0
    assert found["kandev-dq"][0][0] == "ok" and found["Great Expectations"][0][0] == "ok"
    assert found["project"] == [("ok", str(project))]
    assert found["project vetting"][0][0] == "ok"
    [(status, store)] = found["store"]
    server = "PostgreSQL 15" if healthy.dialect == "postgresql" else "SQLite 3"
    assert status == "ok" and f"reachable, a Kandev store ({healthy.dialect}, {server}" in store
    assert found["activation"] == [("ok", "fully_activated")]
    assert found["live index on task_session_messages.updated_at"] == [
        ("ok", "idx_messages_updated_at")
    ]
    [(lacking, said)] = found["live index on task_session_subagents.observed_at"]
    assert lacking == "note" and said.endswith(
        "CREATE INDEX idx_subagents_observed_at ON task_session_subagents (observed_at) "
        "(docs/interpretations.md)"
    )
    assert [status for status, _ in found["records database"]] == ["ok", "ok"]
    assert found["records database"][1][1].endswith("will be created at first check")
    assert not records.exists() and not records.parent.exists()  # never created here
    assert _file_state(healthy) == before and _tables(healthy) == tables


def test_an_existing_records_database_is_read_with_its_schema(healthy, project, tmp_path):
    records = tmp_path / "records.db"
    Records(str(records)).dispose()
    before = records.read_bytes()
    argv = ("--store", healthy.url, "--project", str(project), "--records", str(records))
    code, found = facts(*argv, cwd=tmp_path)
    assert code == 0
    assert found["records database"][1] == (
        "ok",
        f"sqlite:///{records}: reachable, records schema {SCHEMA_VERSION}",
    )
    assert records.read_bytes() == before


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_an_unreachable_store_fails_saying_what_to_do(dialect, project, tmp_path):
    store = {
        "sqlite": str(tmp_path / "missing.db"),
        "postgresql": "postgresql://kandev@127.0.0.1:9/kandev",
    }[dialect]
    code, found = facts("--store", store, "--project", str(project), cwd=tmp_path)
    assert code == 2
    [(status, said)] = found["store"]
    reason = {"sqlite": "the file does not exist", "postgresql": "not accepting connections"}
    assert status == "fail" and reason[dialect] in said
    assert said.endswith("; pass --store URL|PATH, or set KANDEV_STORE_URL, to a Kandev store")
    assert "activation" not in found
    assert found["records database"][0][0] == "note"  # not compared with a store never read
    assert not (tmp_path / "missing.db").exists()


def test_a_hostile_project_fails_its_vetting_as_a_check_would(healthy, project, tmp_path):
    _add_action(project, SLACK)
    code, lines, probe = doctor("--store", healthy.url, "--project", str(project), cwd=tmp_path)
    assert code == 2 and probe == "GX not imported"
    [vetting] = [line for line in lines if line.startswith("FAIL  project vetting: ")]
    assert f"{project / 'checkpoints' / 'nightly.json'}: actions[1].slack_webhook" in vetting
    assert vetting.endswith("or pass --allow-project-code if you trust its author")
    assert lines[-1].startswith("doctor: 1 of ")
    code, found = facts("--project", str(tmp_path / "none"), "--store", healthy.url, cwd=tmp_path)
    [(status, said)] = found["project"]
    assert status == "fail" and said.endswith("or create one with `kandev-dq init DIR`")
    assert found["records database"] == [
        (
            "fail",
            "not found without a project: fix the project, or pass --records or set "
            "KANDEV_DQ_RECORDS_URL",
        )
    ]


def test_records_that_are_the_store_fail_and_nothing_is_written(healthy, project, tmp_path):
    before, tables = _file_state(healthy), _tables(healthy)
    argv = ("--store", healthy.url, "--project", str(project), "--records", healthy.url)
    code, found = facts(*argv, cwd=tmp_path)
    assert code == 2
    [(status, said)] = found["records database"]
    assert status == "fail" and "is the store under validation: name another one" in said
    assert found["store"][0][0] == "ok"
    assert _file_state(healthy) == before and _tables(healthy) == tables


def test_store_values_and_paths_are_shown_escaped(project, tmp_path):
    """A store in a folder whose name drives the terminal, with an index so named: the text
    output shows both escaped."""
    folder = tmp_path / "a\x1b[2Jb"
    folder.mkdir()
    path = folder / "kandev.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    StoreBuilder(engine).create().keys(CAPTURE, "", CAPTURE)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            'CREATE INDEX "idx_\x1b]0;owned\x07" ON task_session_messages (updated_at)'
        )
    engine.dispose()
    code, lines, _ = doctor("--store", str(path), "--project", str(project), cwd=tmp_path)
    assert code == 0, lines
    shown = "\n".join(lines)
    assert "\x1b" not in shown and "\x07" not in shown
    assert "a\\x1b[2Jb/kandev.db" in shown and "idx_\\x1b]0;owned\\x07" in shown


def test_a_store_not_yet_activated_is_a_note_and_no_store_at_all_a_failure(
    target, project, tmp_path
):
    """The activation state is said, and one short of fully activated is worth knowing, not a
    failure (a store before `migrate` is a store a check runs on); no store given and none at
    Kandev's default fails, saying what to pass."""
    StoreBuilder(target.engine).create().keys(CAPTURE, "", None)
    code, found = facts("--store", target.url, "--project", str(project), cwd=tmp_path)
    assert code == 0
    [(status, said)] = found["activation"]
    assert status == "note" and said.startswith("capture_only: `kandev-dq check` says")

    code, found = facts("--project", str(project), cwd=tmp_path)  # HOME is tmp_path: no store
    assert code == 2
    [(status, said)] = found["store"]
    assert status == "fail" and said.endswith("pass --store or set KANDEV_STORE_URL"), said
