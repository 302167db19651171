"""Bad input is refused before GX is imported, in one line, exit 2; JSON callers get JSON.

The timings are in the bench (``python -m bench``: the sub-second rows), not here: a timed test
on a shared machine fails for the wrong reasons. What a test can prove is that the refusal
happens before the slow part: GX is not imported.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def kandev_dq_probed(*args: str, cwd=None, probe: str = NO_GX_PROBE) -> subprocess.CompletedProcess:
    """kandev-dq run with ``args`` in a child that says at exit whether ``probe``'s module was
    imported; HOME is ``cwd`` (no default store found there)."""
    env = {k: v for k, v in os.environ.items() if k != "KANDEV_STORE_URL"}
    env["HOME"] = str(cwd) if cwd else env.get("HOME", "")
    return subprocess.run(
        [sys.executable, "-c", probe, *args],
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
    "unknown checkpoint, the closest named": (
        ["check", "--store", "{store}", "--checkpoint", "nightlly"],
        "(known: live, nightly, post_migration, pre_release); did you mean 'nightly'?",
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
    "explain, a mistyped rule": (
        ["explain", "expect_no_orphan_subagent_row", "--store", "{store}"],
        "no expectation 'expect_no_orphan_subagent_row' (`kandev-dq rules` lists them); "
        "did you mean 'expect_no_orphan_subagent_rows'?",
    ),
    "scenarios build, a mistyped scenario": (
        ["scenarios", "build", "stoped_writer", "--store", "{tmp}/new.db"],
        "no scenario 'stoped_writer'; `kandev-dq scenarios list` names them all; "
        "did you mean 'stopped_writer'?",
    ),
    "explain, store missing": (
        ["explain", "expect_no_orphan_subagent_rows", "--store", "{tmp}/missing.db"],
        "the file does not exist",
    ),
    "store, unsupported URL": (
        ["check", "--store", "mysql://u@db/kandev"],
        "unsupported database 'mysql'",
    ),
    "store, not a database URL": (
        ["check", "--store", "postgresql://u@db:port/kandev"],
        "not a database URL",
    ),
    "audit, records the store itself": (
        ["audit", "--out", "{tmp}/audit", "--store", "{store}", "--records", "{store}"],
        "is the store under validation",
    ),
    "docs, records not a SQLite file": (
        ["docs", "--project", "{project}", "--records", "{text}"],
        "the file is not a SQLite database",
    ),
    "demo, a folder that is not a demo's": (
        ["demo", "--dir", "{tmp}"],
        "is not a kandev-dq demo folder",
    ),
    "demo, unreachable server": (
        ["demo", "--dir", "{tmp}/demo", "--postgres", "postgresql://127.0.0.1:9/demo"],
        "the server is not accepting connections",
    ),
}

#: Each --records a run refuses before GX loads: (the records database, the reason given).
RECORDS_ERRORS = {
    "folder missing": ("{tmp}/none/records.db", "the folder {tmp}/none does not exist"),
    "a file where its folder is": ("{text}/records.db", "is a file, not a folder"),
    "the store itself": ("{store}", "is the store under validation"),
    "not a database URL": ("mysql://u@db/records", "unsupported database 'mysql'"),
    "not a SQLite file": ("{text}", "the file is not a SQLite database"),
    "unreachable server": (
        "postgresql://127.0.0.1:9/records",
        "the server is not accepting connections",
    ),
    "newer schema": ("{newer}", "upgrade kandev-dq"),
}
BAD_INPUTS |= {
    f"records, {case}": (["check", "--store", "{store}", "--records", records], reason)
    for case, (records, reason) in RECORDS_ERRORS.items()
}


def _records_of_a_newer_kandev_dq(path) -> str:
    """A records database a later kandev-dq wrote (its schema version above this one's)."""
    import sqlalchemy as sa

    from kandev_dq.records import SCHEMA_VERSION, Records, schema_versions

    with Records(str(path)) as opened, opened.engine.begin() as conn:
        conn.execute(sa.insert(schema_versions).values(version=SCHEMA_VERSION + 1, applied_at="z"))
    return str(path)


@pytest.mark.parametrize("case", BAD_INPUTS, ids=str)
def test_bad_input_is_refused_before_gx_loads(case, kandev_store, project, tmp_path):
    args, reason = BAD_INPUTS[case]
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    text = tmp_path / "text.db"
    text.write_text("not a database\n", encoding="utf-8")
    fill = {
        "tmp": str(tmp_path),
        "store": kandev_store,
        "empty": str(empty),
        "text": str(text),
        "project": str(project),
        "newer": _records_of_a_newer_kandev_dq(tmp_path / "newer.db") if "{newer}" in args else "",
    }
    argv = [a.format(**fill) for a in args]
    reason = reason.format(**fill)
    if "--project" not in argv and argv[0] in ("check", "audit"):
        argv += ["--project", str(project)]
    done = kandev_dq_probed(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    error, probe = done.stderr.strip().splitlines()
    assert error.startswith("kandev-dq: error: ") and reason in error, error
    assert probe == "GX not imported"


#: Refusals answered before the SQL toolkit (a third of a second to import) loads: what they
#: read is a path, a SQLite file the SQLite library alone opens, or a plain PostgreSQL URL the
#: driver alone can try, so they stay well under the bench's one-second rows on a busy machine.
BEFORE_SQL_TOOLKIT = {
    "check, empty file": ["check", "--store", "{tmp}/k.db"],
    "check, text file": ["check", "--store", "{tmp}/text.db"],
    "check, SQLite file of another program": ["check", "--store", "{tmp}/other.db"],
    "check json, text file": ["check", "--store", "{tmp}/text.db", "--format", "json"],
    "check junit, SQLite file of another program": [
        "check",
        "--store",
        "{tmp}/other.db",
        "--format",
        "junit",
    ],
    "check openmetrics, text file": [
        "check",
        "--store",
        "{tmp}/text.db",
        "--format",
        "openmetrics",
    ],
    "audit, text file": ["audit", "--out", "{tmp}/audit", "--store", "{tmp}/text.db"],
    "migrate, empty file": ["migrate", "--store", "{tmp}/k.db", "--dry-run"],
    "migrate json, SQLite file of another program": [
        "migrate",
        "--store",
        "{tmp}/other.db",
        "--format",
        "json",
    ],
    "explain, text file": ["explain", "expect_no_orphan_subagent_rows", "--store", "{tmp}/text.db"],
    "demo, a folder that is not a demo's": ["demo", "--dir", "{tmp}"],
    "demo, a file": ["demo", "--dir", "{tmp}/text.db"],
    "check, store file missing": ["check", "--store", "{tmp}/missing.db"],
    "check, store is a folder": ["check", "--store", "{tmp}"],
    "check, no such project": ["check", "--store", "{tmp}/k.db", "--project", "{tmp}/none"],
    "check, unknown checkpoint": ["check", "--store", "{tmp}/k.db", "--checkpoint", "nightlly"],
    "audit, store file missing": ["audit", "--out", "{tmp}/audit", "--store", "{tmp}/m.db"],
    "migrate, store file missing": ["migrate", "--store", "{tmp}/missing.db"],
    "migrate, store is a folder": ["migrate", "--store", "{tmp}", "--dry-run"],
    "history, no such project": ["history", "--project", "{tmp}/none"],
    "docs, no such project": ["docs", "--project", "{tmp}/none"],
    "check, unreachable server": ["check", "--store", "postgresql://127.0.0.1:9/kandev"],
    "audit, unreachable server": [
        "audit",
        "--out",
        "{tmp}/a",
        "--store",
        "postgres://127.0.0.1:9/k",
    ],
    "migrate, unreachable server": ["migrate", "--store", "postgresql://u:p@127.0.0.1:9/kandev"],
}

#: Runs the CLI, then says on stderr whether the SQL toolkit was imported.
NO_SQL_PROBE = NO_GX_PROBE.replace("great_expectations", "sqlalchemy").replace("GX", "SQL")


@pytest.mark.parametrize("case", BEFORE_SQL_TOOLKIT, ids=str)
def test_refusal_answered_before_the_sql_toolkit_loads(case, project, tmp_path):
    """The fast-path contract behind the bench's sub-second rows: the one-line refusal comes
    before SQLAlchemy is imported."""
    (tmp_path / "k.db").write_bytes(b"")  # an empty file: SQLite reads it as a database
    (tmp_path / "text.db").write_text("not a database\n", encoding="utf-8")
    _another_programs_sqlite_file(tmp_path / "other.db")
    argv = [a.format(tmp=tmp_path) for a in BEFORE_SQL_TOOLKIT[case]]
    if "--project" not in argv and argv[0] in ("check", "audit"):
        argv += ["--project", str(project)]
    done = kandev_dq_probed(*argv, cwd=tmp_path, probe=NO_SQL_PROBE)
    assert done.returncode == 2, done.stderr
    error, probe = done.stderr.strip().splitlines()
    assert error.startswith("kandev-dq: error: "), error
    assert probe == "SQL not imported", error
    if "json" in argv:
        assert json.loads(done.stdout)["error"] == error.removeprefix("kandev-dq: error: ")
    if "junit" in argv:
        assert "<error message=" in done.stdout
    if "openmetrics" in argv:  # the store named, and down
        assert re.search(r'^kandev_dq_up\{store="[^"]+text\.db"\} 0\.0$', done.stdout, re.M)


@pytest.mark.parametrize("argv", [["--version"], ["--help"]], ids=str)
def test_version_and_help_answer_without_the_sql_toolkit(argv, tmp_path):
    """``--version`` and ``--help``, the floor of the bench's sub-second rows, load neither
    the SQL toolkit nor GX."""
    done = kandev_dq_probed(*argv, cwd=tmp_path, probe=NO_SQL_PROBE)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == ["SQL not imported"], done.stderr


def _another_programs_sqlite_file(path) -> None:
    """A SQLite database with tables of its own, none of them Kandev's."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("kind", ["empty file", "text file", "another program's", "Kandev's"])
def test_the_sqlite_probe_words_a_refusal_as_the_full_open_does(kind, tmp_path):
    """The refusal read with the SQLite library alone (no SQL toolkit) is the full open's, word
    for word; a Kandev store passes both."""
    from kandev_dq.store.access import open_store
    from kandev_dq.store.target import refuse_non_kandev_sqlite_file

    file = tmp_path / "store.db"
    if kind == "empty file":
        file.write_bytes(b"")
    elif kind == "text file":
        file.write_text("SQLite format 2\n" * 4, encoding="utf-8")
    elif kind == "another program's":
        _another_programs_sqlite_file(file)
    else:
        StoreBuilder(sqlite_driver_engine(file)).create()
        refuse_non_kandev_sqlite_file(file)
        open_store(str(file)).dispose()
        return
    probed = _refusal(refuse_non_kandev_sqlite_file, file)
    assert probed == _refusal(lambda f: open_store(str(f)), file)
    assert "not a Kandev store" in probed or "not a SQLite database" in probed


def sqlite_driver_engine(file):
    from kandev_dq.store import sqlite_driver

    return sqlite_driver.create_engine(f"sqlite:///{file}")


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


def test_check_junit_that_cannot_run_writes_a_junit_error(tmp_path, project):
    """The CI recipe's report exists and parses when the run cannot start: one testcase in
    error carrying the message (exit 2), written before GX loads."""
    from junitparser import Error, JUnitXml

    missing = str(tmp_path / "missing.db")
    done = kandev_dq_probed(
        "check", "--store", missing, "--project", str(project), "--format", "junit", cwd=tmp_path
    )
    assert done.returncode == 2 and "GX not imported" in done.stderr
    path = tmp_path / "junit.xml"
    path.write_text(done.stdout, encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    [case] = [case for suite in xml for case in suite]
    [error] = case.result
    assert isinstance(error, Error) and "the file does not exist" in error.message
    assert xml.errors == 1 and xml.failures == 0


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--format", "json", "--fail-on", "bogus"],
        ["check", "--format=json", "--checkpoint"],
        ["history", "--format", "json", "--limit", "0"],
        ["ledger", "show", "--format", "json", "--no-such-option"],
    ],
    ids=["bad value", "missing value", "out of range", "unknown option"],
)
def test_every_refusal_in_json_mode_prints_the_error_object(args, tmp_path):
    done = kandev_dq_probed(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    assert report["exit_code"] == 2 and report["error"], report
    assert "Error: " in done.stderr and "Traceback" not in done.stderr  # click's own words
    assert done.stderr.strip().splitlines()[-1] == "GX not imported"


def test_docs_open_without_a_browser_fails(project, monkeypatch):
    import webbrowser

    from typer.testing import CliRunner

    from kandev_dq.cli import app

    monkeypatch.setattr(webbrowser, "open", lambda url: False)
    done = CliRunner().invoke(app, ["docs", "--project", str(project), "--open"])
    assert isinstance(done.exception, KandevDqError)  # main() makes it one line, exit 2
    assert "no web browser" in str(done.exception)


#: A user, optionally a password (which may hold ``:``, punctuation and escapes), then ``@``.
USERINFO = (
    r"([A-Za-z0-9_.~-]|%[0-9A-F]{2}){0,8}(:([A-Za-z0-9_.:!$&'()*+,;=~-]|%[0-9a-f]{2}){0,12})?@"
)
PLAIN_POSTGRES_URLS = st.builds(
    lambda scheme, userinfo, host, port, database: f"{scheme}://{userinfo}{host}{port}/{database}",
    st.sampled_from(["postgresql", "postgres", "postgresql+psycopg"]),
    st.one_of(
        st.just(""),
        st.from_regex(
            r"[A-Za-z0-9_.%-]{0,8}(:[A-Za-z0-9_.%:!$&'()*+,;=~ -]{0,12})?@", fullmatch=True
        ),
    ),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9.-]{0,20}", fullmatch=True),
    st.one_of(st.just(""), st.integers(1, 65535).map(lambda port: f":{port}")),
    st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True),
)


@given(PLAIN_POSTGRES_URLS)
def test_a_plain_postgres_url_is_shown_as_every_command_shows_it(target):
    """The probe names the store it could not reach without SQLAlchemy: exactly as
    SQLAlchemy's rendering, which every other message, the JSON and the docs use. A URL it
    declines (a stray ``%`` or a space in the userinfo, which libpq would read otherwise) is
    left to SQLAlchemy, never shown otherwise."""
    from kandev_dq.store.reference import resolve_url, shown_store
    from kandev_dq.store.target import plain_postgres_shown

    shown = plain_postgres_shown(target)
    assert shown is None or shown == shown_store(resolve_url(target))
    if "%" not in target and " " not in target:
        assert shown is not None


@pytest.mark.parametrize(
    "target",
    [
        "postgresql://127.0.0.1:5432/x?sslmode=disable",
        "postgresql://[::1]:9/x",
        "sqlite:///x.db",
        "postgresql://u:pa ss@127.0.0.1:9/x",  # libpq would quote the password it cannot parse
        "postgresql://u:pa%zzss@127.0.0.1:9/x",
    ],
)
def test_any_other_url_is_left_to_the_full_open(target):
    from kandev_dq.store.target import plain_postgres_shown

    assert plain_postgres_shown(target) is None


def _refusal(call, target) -> str:
    with pytest.raises(KandevDqError) as refused:
        call(target)
    return str(refused.value)


def test_the_driver_probe_refuses_a_closed_port_as_the_full_open_does():
    from kandev_dq.store.access import open_store
    from kandev_dq.store.target import refuse_unreachable_server

    target = "postgresql://kandev:s3cret%21@127.0.0.1:9/kandev"
    probed = _refusal(refuse_unreachable_server, target)
    assert probed == _refusal(open_store, target)
    assert "not accepting connections" in probed and "s3cret" not in probed


@pytest.mark.parametrize("wrong", ["database", "username"])
def test_the_driver_probe_words_a_server_refusal_as_the_full_open_does(pg_database, wrong):
    from kandev_dq.store.access import open_store
    from kandev_dq.store.target import refuse_unreachable_server

    changed = {"database": "kdq_no_such_database"} if wrong == "database" else {}
    if wrong == "username":
        changed = {"username": "kdq_no_such_role", "password": "s3cret"}
    target = pg_database.set(**changed).render_as_string(hide_password=False)
    probed = _refusal(refuse_unreachable_server, target)
    assert probed == _refusal(open_store, target)
    assert "s3cret" not in probed


#: Commands that only list or describe: they answer without GX.
LISTING_COMMANDS = {
    "scenarios list": (["scenarios", "list"], "fresh_install"),
    "rules": (["rules"], "expect_no_orphan_subagent_rows"),
    "records prune, dry run": (
        ["records", "prune", "--keep-days", "30", "--dry-run", "--project", "{project}"],
        "would drop 0 validation result(s)",
    ),
}


@pytest.mark.parametrize("case", LISTING_COMMANDS, ids=str)
def test_listing_commands_load_no_gx(case, project, tmp_path):
    args, shown = LISTING_COMMANDS[case]
    done = kandev_dq_probed(*(a.format(project=project) for a in args), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert shown in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "GX not imported"


@pytest.mark.parametrize("runs", [0, 1], ids=["no run recorded", "a run recorded"])
@pytest.mark.parametrize("output", ["text", "json"])
def test_history_reads_the_records_without_gx(runs, output, kandev_store, project, tmp_path):
    """History reads the run register and the stored results as JSON: GX never loads, with
    no run recorded or with one (its failed rules read back as every command reads them)."""
    import kandev_dq

    for _ in range(runs):
        kandev_dq.check(store=kandev_store, checkpoint="nightly", project=project)
    argv = ["history", "--store", kandev_store, "--project", str(project), "--format", output]
    done = kandev_dq_probed(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "GX not imported", done.stderr
    if output == "json":
        past = json.loads(done.stdout)
        assert [run["checkpoint"] for run in past["runs"]] == ["nightly"] * runs
        assert len(past["timeline"]["points"]) == runs
    elif runs:
        lines = done.stdout.splitlines()
        assert lines[0].startswith("runs of "), done.stdout
        assert [line.split()[1] for line in lines if line[:4].isdigit()] == ["nightly"] * runs
    else:
        assert done.stdout.startswith("no recorded kandev-dq runs for ")


@pytest.mark.parametrize("target", ["postgresql"], indirect=True)  # --postgres takes a server
def test_demo_refuses_a_database_that_is_not_empty_before_gx_loads(target, tmp_path):
    """The demo writes a whole store only into an empty database: one holding a table is
    refused (exit 2) before GX loads, and nothing is written (its folder is not created)."""
    with target.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE someone_elses (id integer)")
    target.engine.dispose()
    demo = tmp_path / "demo"
    done = kandev_dq_probed("demo", "--dir", str(demo), "--postgres", target.url, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    error, probe = done.stderr.strip().splitlines()
    assert "is not empty (table someone_elses)" in error, error
    assert probe == "GX not imported"
    assert not demo.exists()


#: Rules ``explain`` judges on a store: a row rule that fails with its listing, a rule whose
#: family takes ``window_minutes``, a write-once rule judged against the records database, a
#: rule given its suite's arguments (the accepted states) and a schema rule counting no rows.
EXPLAINED = (
    "expect_no_orphan_subagent_rows",
    "expect_no_backfill_rows_inside_sentinel_window",
    "expect_backfill_metrics_to_match_message",
    "expect_activation_keys_to_be_write_once",
    "expect_activation_state_to_be_in_set",
    "expect_session_foreign_key_to_cascade",
)


def test_explain_on_a_store_answers_without_gx_as_the_check_through_gx_judges(target, project):
    """``explain RULE --store S`` (no ``--run``) judges with the rules' verdicts and never loads
    GX; what it says is what a check run through GX says of the same rule on the same store:
    AC ids, severity, suite, sentence, verdict, message and, for a failed rule, its query."""
    import kandev_dq
    from kandev_dq.contract.rule_index import RULE_SENTENCES
    from kandev_dq.lab import scenarios
    from kandev_dq.text import one_line

    if target.dialect == "sqlite":
        target.engine.dispose()
    scenarios.materialise("orphan_rows", target.url)
    report = kandev_dq.check(store=target.url, checkpoint="pre_release", project=project)
    judged = {(r.suite, r.expectation): r for r in report.results}
    assert not judged[("rows", EXPLAINED[0])].success  # the scenario's fault, with its query
    for rule in EXPLAINED:
        argv = ("explain", rule, "--store", target.url, "--project", str(project))
        done = kandev_dq_probed(*argv, cwd=project.parent)
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().splitlines()[-1] == "GX not imported", done.stderr
        lines = done.stdout.splitlines()
        found = next(r for (suite, name), r in judged.items() if name == rule)
        assert (
            lines[0] == f"{rule} [{', '.join(found.rules)}] {found.severity}, suite {found.suite}"
        )
        assert lines[1] == RULE_SENTENCES[rule]
        verdict = "passed" if found.success else "FAILED"
        assert lines[2] == one_line(
            f"on {report.store} ({report.dialect}): {verdict}: {found.message}"
        )
        if found.query is not None:
            assert lines[3] == "query:" and "\n".join(lines[4:]) == found.query
        elif found.success:  # a passed rule's listing is shown too (no rows to list)
            assert lines[3] == "query:" or lines[3].endswith(": no query"), lines
        else:
            assert lines[3].endswith(": no query"), lines
    # Its rows, read in the same snapshot, need no GX either.
    argv = ("explain", EXPLAINED[0], "--store", target.url, "--run")
    done = kandev_dq_probed(*argv, cwd=project.parent)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "GX not imported", done.stderr
    assert done.stdout.splitlines()[-1].endswith(" row(s)")
