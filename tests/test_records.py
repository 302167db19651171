"""The run records database (AC-24 write-once across machines): the key ledger, the run register
and the validation results, on both record backends (a SQLite file and a PostgreSQL database).

The store under validation is a SQLite file in most cases: what varies here is the records
database, and it is the dialect-sensitive part (insert-if-absent, table creation, locking).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from kandev_dq.contract.instants import CAPTURE_SINCE
from kandev_dq.errors import KandevDqError
from kandev_dq.expectations.activation import BASELINE_DISCLOSURE
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project.files import copy_project
from kandev_dq.project.settings import KEEP_DAYS_VARIABLE, keep_days_setting
from kandev_dq.records import JSON_LEDGER, SCHEMA_VERSION, Records, schema_versions
from kandev_dq.records.accept import accept_key
from kandev_dq.records.identity import store_identity
from kandev_dq.report.history import history, render
from kandev_dq.report.site import build_docs
from kandev_dq.run.check import run_check
from kandev_dq.store.reference import resolve_url, store_ref
from tests.conftest import fresh_pg_database
from tests.gxhelpers import result
from tests.test_check_cli import kandev_dq

CAPTURE = "2026-07-30T01:39:37.271235Z"
REWRITTEN = "2026-07-30T01:39:37.272235Z"  # 1 ms later: an upsert, not write-once
WRITE_ONCE = "expect_activation_keys_to_be_write_once"
BASELINE = BASELINE_DISCLOSURE
FIRST_SIGHTING = "write-once baseline recorded now; rewrites before this run cannot be seen"


@pytest.fixture(params=["sqlite", "postgresql"])
def records(request, tmp_path):
    """A records database URL outside every project: a SQLite file, or a new PostgreSQL
    database (never the store's)."""
    if request.param == "sqlite":
        folder = tmp_path / "shared"
        folder.mkdir()
        yield str(folder / "records.db")
        return
    with fresh_pg_database("kdq_records") as url:
        yield url.render_as_string(hide_password=False)


def _healthy(target) -> StoreBuilder:
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    return store


def _identity(target) -> str:
    return store_identity(resolve_url(target.url))


# --- two machines, one records database -----------------------------------------------------------


def test_a_rewrite_seen_by_one_machine_fails_on_another(
    sqlite_target, built_project, tmp_path, records
):
    """AC-24 across ephemeral machines: two project folders share one records database; the
    first checks the store, its key is rewritten, and a check from the second folder fails."""
    first = copy_project(built_project, tmp_path / "machine-a")
    second = copy_project(built_project, tmp_path / "machine-b")
    store = _healthy(sqlite_target)

    baseline_run = run_check(first, sqlite_target.url, "nightly", records=records)
    assert result(baseline_run, WRITE_ONCE).success
    disclosed = result(baseline_run, BASELINE)
    assert not disclosed.success and disclosed.severity == "info"
    assert disclosed.message == FIRST_SIGHTING
    assert baseline_run.baseline_taken_at

    store.set_key(CAPTURE_SINCE, REWRITTEN)
    caught = run_check(second, sqlite_target.url, "nightly", records=records)
    write_once = result(caught, WRITE_ONCE)
    assert not write_once.success and not caught.success
    assert f"{CAPTURE!r} -> {REWRITTEN!r}" in write_once.message
    assert "kandev-dq ledger accept" in write_once.message  # the way out is named
    assert result(caught, BASELINE).success  # not a first sighting any more
    assert caught.baseline_taken_at == baseline_run.baseline_taken_at
    assert not (second / "uncommitted" / "records.db").exists()  # nothing kept locally

    # history on the second machine lists both runs and when the baseline was taken
    past = history(second, sqlite_target.url, records=records)
    assert [r.success for r in past.runs] == [False, True]
    assert past.baseline_taken_at == baseline_run.baseline_taken_at
    assert render(past)[1].startswith(f"write-once baseline taken {past.baseline_taken_at}")


# --- concurrency ----------------------------------------------------------------------------------

RACE = """
import json, sys, time
from pathlib import Path
from kandev_dq.records import Records
url, identity, value, go = sys.argv[1:5]
records = Records(url)
while not Path(go).exists():
    time.sleep(0.005)
records.record_first_sightings(identity, {"subagent_context_capture_since": value}, value)
baseline = records.take_baseline(identity, value)
print(json.dumps({"seen": records.expected_values(identity), "first": baseline.recorded_now}))
records.dispose()
"""


def test_eight_writers_racing_agree_on_one_first_value(tmp_path, records):
    """Insert-if-absent decided by the database: eight processes offering eight different first
    values at once, each reading back; exactly one row, and all eight read the same value."""
    go = tmp_path / "go"
    Records(records).dispose()  # tables exist before the race, as after any first run
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, records, "sqlite:/race.db", f"value-{i}", str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    time.sleep(1.0)  # every racer connected and waiting
    go.touch()
    outcomes = []
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        outcomes.append(json.loads(out))
    seen = {json.dumps(o["seen"], sort_keys=True) for o in outcomes}
    assert len(seen) == 1, seen
    assert sum(o["first"] for o in outcomes) == 1  # one baseline, taken by one racer
    with Records(records) as opened:
        [entry] = opened.ledger_entries("sqlite:/race.db")
    assert {"subagent_context_capture_since": entry.first_value} == outcomes[0]["seen"]


def test_eight_concurrent_checks_lose_no_first_sighting(
    sqlite_target, built_project, tmp_path, records
):
    """Eight `kandev-dq check` processes on one store and one records database: one first
    sighting per key, one baseline disclosure, and every run agrees write-once holds."""
    store = StoreBuilder(sqlite_target.engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    projects = [copy_project(built_project, tmp_path / f"p{i}") for i in range(8)]
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from kandev_dq.cli import main; main()",
                *("check", "--checkpoint", "nightly", "--store", sqlite_target.url),
                *("--project", str(folder), "--records", records, "--format", "json", "-q"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "KANDEV_STORE_URL"},
        )
        for folder in projects
    ]
    reports = []
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode in (0, 1), err
        reports.append(json.loads(out))
    outcomes = [
        {r["expectation"]: r for r in report["results"]}[WRITE_ONCE]["success"]
        for report in reports
    ]
    assert outcomes == [True] * 8
    disclosures = [
        r
        for report in reports
        for r in report["results"]
        if r["expectation"] == BASELINE and not r["success"]
    ]
    assert len(disclosures) == 1 and disclosures[0]["message"] == FIRST_SIGHTING
    assert len({report["baseline_taken_at"] for report in reports}) == 1
    with Records(records) as opened:
        entries = opened.ledger_entries(_identity(sqlite_target))
        assert sorted(e.key_name for e in entries) == sorted(
            k for k, v in reports[0]["keys"].items() if v is not None
        )
        assert len(opened.run_records(identity=_identity(sqlite_target))) == 8
        assert len(opened.result_keys()) == 8 * 3  # nightly's three suites, every run


# --- refusals -------------------------------------------------------------------------------------


def test_the_store_itself_is_refused_as_records(target, project):
    """Validation never writes to the store it validates: the same SQLite file, or the same
    PostgreSQL database (another schema or user included), is exit 2 before anything runs."""
    _healthy(target)
    same = target.url
    if target.dialect == "postgresql":  # the same database, named without the schema option
        same = make_url(target.url)._replace(query={}).render_as_string(hide_password=False)
    done = kandev_dq(
        "check", "--store", target.url, "--project", str(project), "--records", same, "-q"
    )
    assert done.returncode == 2, done.stderr
    assert "is the store under validation" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (project / "uncommitted").exists()


def _records_tables(target) -> list[str]:
    """The records tables a database holds, in any schema."""
    with target.engine.connect() as conn:
        if target.dialect == "sqlite":
            query = "SELECT name FROM sqlite_master WHERE name LIKE :prefix"
        else:
            query = "SELECT table_name FROM information_schema.tables WHERE table_name LIKE :prefix"
        return list(conn.execute(sa.text(query), {"prefix": "kandev_dq%"}).scalars())


def test_the_store_under_another_name_is_refused_as_records_before_any_write(
    target, project, tmp_path
):
    """The records database is compared with the store by what it is, not how it is spelled:
    a hard link to the SQLite file (its device and inode), the PostgreSQL server reached as
    ``localhost`` or ``[::ffff:127.0.0.1]`` (its system identifier, port and database). Each is
    exit 2 naming the records database, before anything is written: the SQLite file byte for
    byte as it was, no records table in the PostgreSQL database. (A hard link is refused first
    for its link count, which any records file with a second name is.)"""
    import hashlib

    _healthy(target)
    target.engine.dispose()
    if target.dialect == "sqlite":
        link = tmp_path / "hard-link.db"
        os.link(target.url, link)
        others = [f"sqlite:///{link}", str(link)]
    else:
        url = make_url(target.url)
        others = [
            f"postgresql://{url.username}@{host}:{url.port}/{url.database}"
            for host in ("localhost", "[::ffff:127.0.0.1]")
        ]
    store_file = Path(target.url) if target.dialect == "sqlite" else None
    before = store_file and hashlib.sha256(store_file.read_bytes()).hexdigest()
    for records in others:
        for command in (("check",), ("history",), ("ledger", "show")):
            done = kandev_dq(
                *command, "--store", target.url, "--project", str(project), "--records", records
            )
            assert done.returncode == 2, (command, records, done.stdout, done.stderr)
            [line] = done.stderr.strip().splitlines()[-1:]
            refusal = "has 2 names (hard links)" if "hard-link" in records else "is the store"
            assert refusal in line, line
            assert _records_tables(target) == []
            if store_file is not None:
                assert hashlib.sha256(store_file.read_bytes()).hexdigest() == before
    assert not (project / "uncommitted").exists()


def test_a_role_that_may_not_read_the_system_identifier_still_finds_the_store(pg_target):
    """Where ``pg_control_system()`` is revoked from PUBLIC, a role's session is placed by the
    server's start time: the same database is found under its two roles and spellings, and
    another database on the same server is not the store."""
    from kandev_dq.records import same_database
    from kandev_dq.store.reference import database_identity

    role = f"kdq_plain_{uuid.uuid4().hex[:8]}"
    admin = make_url(pg_target.url)._replace(query={})
    with pg_target.engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
        conn.exec_driver_sql("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC")
    try:
        plain = admin.set(username=role, host="localhost")
        found = database_identity(
            resolve_url(plain.render_as_string(hide_password=False)), read_only=True
        )
        assert found is not None and found.system is None and found.started
        assert database_identity(admin, read_only=True).system is not None
        assert same_database(admin, plain)
        assert not same_database(admin.set(database="postgres"), plain)
    finally:
        with pg_target.engine.begin() as conn:
            conn.exec_driver_sql("GRANT EXECUTE ON FUNCTION pg_control_system() TO PUBLIC")
            conn.exec_driver_sql(f'DROP ROLE "{role}"')


def test_an_unreachable_records_database_is_exit_2_and_the_store_is_untouched(
    sqlite_target, project
):
    """Never a pass with write-once skipped: one line naming the records database without its
    password, exit 2, and the store file byte for byte as it was."""
    _healthy(sqlite_target)
    sqlite_target.engine.dispose()
    before = Path(sqlite_target.url).read_bytes()
    unreachable = "postgresql://kandev:s3cret-pw@127.0.0.1:9/records"
    done = kandev_dq(
        "check", "--store", sqlite_target.url, "--project", str(project), "--records", unreachable
    )
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()[-1:]
    assert "records database" in line and "127.0.0.1:9/records" in line
    assert "s3cret-pw" not in done.stderr
    assert Path(sqlite_target.url).read_bytes() == before
    assert not (project / "uncommitted" / "data_docs").exists()


def test_a_records_path_without_its_folder_is_one_line_and_creates_nothing(
    sqlite_target, project, tmp_path
):
    """``--records`` under a file, or in a folder that does not exist outside the project:
    exit 2, one line naming the records database, no folder created, the store untouched."""
    _healthy(sqlite_target)
    sqlite_target.engine.dispose()
    before = Path(sqlite_target.url).read_bytes()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x", encoding="utf-8")
    missing = tmp_path / "not-yet" / "deeper"
    cases = {
        str(a_file / "records.db"): "is a file, not a folder",
        f"sqlite:///{a_file}/sub/records.db": "is a file, not a folder",
        str(missing / "records.db"): "does not exist",
    }
    for records, reason in cases.items():
        for command in (("check",), ("history",)):
            done = kandev_dq(
                *command,
                "--store",
                sqlite_target.url,
                "--project",
                str(project),
                "--records",
                records,
            )
            assert done.returncode == 2 and done.stdout == "", (records, done.stderr)
            [line] = done.stderr.strip().splitlines()[-1:]
            assert "records database" in line and reason in line, line
            assert "Traceback" not in done.stderr and "Error:" not in line, done.stderr
    assert not (tmp_path / "not-yet").exists()
    assert Path(sqlite_target.url).read_bytes() == before
    assert not (project / "uncommitted").exists()


# --- the JSON ledger of earlier versions ----------------------------------------------------------


def test_an_old_json_ledger_is_imported_and_a_rewrite_against_it_is_caught(
    sqlite_target, project, records
):
    """The first run with a records database imports uncommitted/key_ledger.json (once, the
    file left in place): a key rewritten since the JSON ledger saw it fails AC-24."""
    _healthy(sqlite_target)
    ledger = project / JSON_LEDGER
    ledger.parent.mkdir(parents=True)
    ledger.write_text(json.dumps({_identity(sqlite_target): {CAPTURE_SINCE: REWRITTEN}}))
    report = run_check(project, sqlite_target.url, "nightly", records=records)
    write_once = result(report, WRITE_ONCE)
    assert not write_once.success and f"{REWRITTEN!r} -> {CAPTURE!r}" in write_once.message
    assert result(report, BASELINE).success  # the baseline came from the JSON ledger
    assert ledger.is_file()
    with Records(records) as opened:
        [entry] = [
            e
            for e in opened.ledger_entries(_identity(sqlite_target))
            if e.key_name == CAPTURE_SINCE
        ]
        assert entry.first_value == REWRITTEN and entry.source == "imported key_ledger.json"
        assert opened.import_json_ledger(ledger) == 0  # imported once


# --- the way out: ledger accept -------------------------------------------------------------------


def test_ledger_accept_clears_the_failure_and_is_shown(sqlite_target, project, records):
    """A legitimate reset (a restored backup) is accepted with time, user and reason: the next
    run passes write-once, and history and the docs overview show the accept."""
    store = _healthy(sqlite_target)
    run_check(project, sqlite_target.url, "nightly", records=records)
    store.set_key(CAPTURE_SINCE, REWRITTEN)
    failed = result(run_check(project, sqlite_target.url, "nightly", records=records), WRITE_ONCE)
    assert not failed.success
    shown = f"sqlite:///{Path(sqlite_target.url).resolve()}"  # as every command names it
    # The way out names this store, the records the run used and this key, never placeholders.
    used = f"--records '{store_ref(records).connect_form}'"  # with its user, no password
    assert f"ledger accept --store '{shown}' {used} --key {CAPTURE_SINCE} --reason" in (
        failed.message
    )

    with pytest.raises(KandevDqError, match="--reason"):
        accept_key(project, sqlite_target.url, CAPTURE_SINCE, "  ", records)
    done = kandev_dq(
        *("ledger", "accept", "--store", sqlite_target.url, "--project", str(project)),
        *("--records", records, "--key", CAPTURE_SINCE, "--reason", "restored <b>backup</b>"),
    )
    assert done.returncode == 0, done.stderr
    assert f"accepted {CAPTURE_SINCE} = {REWRITTEN!r} (was {CAPTURE!r})" in done.stdout
    assert f" for {shown}, by " in done.stdout and "already expected" not in done.stdout

    after = run_check(project, sqlite_target.url, "nightly", records=records)
    assert result(after, WRITE_ONCE).success

    past = history(project, sqlite_target.url, records=records)
    [accept] = past.accepts
    assert (accept.key_name, accept.replaced_value, accept.accepted_value) == (
        CAPTURE_SINCE,
        CAPTURE,
        REWRITTEN,
    )
    assert accept.reason == "restored <b>backup</b>" and accept.accepted_by
    assert any("restored <b>backup</b>" in line for line in render(past))
    again = kandev_dq(
        *("ledger", "accept", "--store", sqlite_target.url, "--project", str(project)),
        *("--records", records, "--key", CAPTURE_SINCE, "--reason", "once more"),
    )
    assert again.returncode == 0, again.stderr
    assert "(the value it already expected: nothing changes)" in again.stdout
    shown = kandev_dq(
        *("ledger", "show", "--store", sqlite_target.url, "--project", str(project)),
        *("--records", records),
    )
    assert shown.returncode == 0 and "restored <b>backup</b>" in shown.stdout

    built = build_docs(project, records=records)
    page = built.overview.read_text(encoding="utf-8")
    assert "Accepted key resets" in page
    assert "restored &lt;b&gt;backup&lt;/b&gt;" in page and "<b>backup" not in page
    assert "Write-once baseline (AC-24)" in page and past.baseline_taken_at in page


# --- the records store itself ---------------------------------------------------------------------


def test_tables_are_created_once_and_versioned(records):
    for _ in range(2):
        with Records(records) as opened, opened.engine.connect() as conn:
            assert conn.execute(sa.select(schema_versions.c.version)).scalars().all() == [
                SCHEMA_VERSION
            ]


def test_a_newer_records_schema_is_refused(records):
    with Records(records) as opened, opened.engine.begin() as conn:
        conn.execute(schema_versions.insert(), {"version": SCHEMA_VERSION + 1, "applied_at": "x"})
    with pytest.raises(KandevDqError, match="newer than this kandev-dq"):
        Records(records)


def test_prune_drops_old_results_never_the_ledger(sqlite_target, project, records):
    """Retention: results and run records older than N days go; ledger rows, the baseline and
    accepts stay (write-once needs them forever, AC-24), and so does the newest finished run
    of the checkpoint on the store, which alerts on change compare the next run with."""
    store = _healthy(sqlite_target)
    run_check(project, sqlite_target.url, "nightly", records=records)
    newest = run_check(project, sqlite_target.url, "nightly", records=records)
    with Records(records) as opened:
        kept_ledger = opened.ledger_entries(_identity(sqlite_target))
        assert opened.prune(keep_days=1).results == 0  # today's results stay
        pruned = opened.prune(keep_days=0)
        assert (pruned.results, pruned.runs) == (3, 1)
        assert (pruned.kept_results, pruned.kept_runs) == (3, 1)
        [kept] = opened.run_records()
        assert kept["run_time"] == newest.run_time
        assert {key[-2] for key in opened.result_keys()} == {kept["run_key"]}
        assert opened.ledger_entries(_identity(sqlite_target)) == kept_ledger
        assert opened.baseline(_identity(sqlite_target)) is not None
    store.set_key(CAPTURE_SINCE, REWRITTEN)  # the pruned history still catches a rewrite
    after = run_check(project, sqlite_target.url, "nightly", records=records)
    assert not result(after, WRITE_ONCE).success
    done = kandev_dq(
        "records", "prune", "--keep-days", "0", "--project", str(project), "--records", records
    )
    assert done.returncode == 0 and "the key ledger is kept whole" in done.stdout


def test_prune_has_a_dry_run_and_keeps_the_newest_run(sqlite_target, project, records):
    """`records prune --dry-run` counts and drops nothing; the prune says what it dropped and
    what remains; afterwards `history` and the overview show the one run kept, the newest."""
    _healthy(sqlite_target)
    run_check(project, sqlite_target.url, "nightly", records=records)
    newest = run_check(project, sqlite_target.url, "nightly", records=records)
    prune = ("records", "prune", "--keep-days", "0", "--project", str(project))
    dry = kandev_dq(*prune, "--records", records, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would drop 3 validation result(s) and 1 run record(s)" in dry.stdout
    assert "3 result(s) and 1 run record(s) remain" in dry.stdout
    with Records(records) as opened:
        assert len(opened.result_keys()) == 6 and len(opened.run_records()) == 2
    done = kandev_dq(*prune, "--records", records)
    assert done.returncode == 0, done.stderr
    assert "dropped 3 validation result(s) and 1 run record(s)" in done.stdout
    again = kandev_dq(*prune, "--records", records)  # the newest run is never pruned
    assert "dropped 0 validation result(s) and 0 run record(s)" in again.stdout, again.stdout
    past = history(project, sqlite_target.url, records=records)
    assert [run.run_time for run in past.runs] == [newest.run_time]
    built = build_docs(project, records=records)
    overview = built.overview.read_text(encoding="utf-8")
    assert "No run to report findings of yet." not in overview


def test_the_project_keeps_results_through_kandev_dq_backend(project):
    """GX replaces a results store whose class name is not ``ValidationResultsStore`` with an
    in-memory one, silently: the project's store must load as kandev-dq's, over the records."""
    from kandev_dq.gx import results_store
    from kandev_dq.gx.context import load_context

    context = load_context(project)
    store = context.validation_results_store
    assert type(store) is results_store.ValidationResultsStore
    assert isinstance(store.store_backend, results_store.RecordsStoreBackend)


def test_pages_show_a_bounded_window_of_a_long_history(
    sqlite_target, project, records, monkeypatch
):
    """At a run every 5 minutes the records hold 2,000 runs a week: a run's index, overview
    and timeline show the newest runs only, and say so, and the run never lists every stored
    result (timed in `python -m bench --history-growth`)."""
    from bench.docs_history import seed_earlier_runs, seed_pages
    from kandev_dq import records as rec
    from kandev_dq.report import overview_model, overview_page
    from kandev_dq.report.history import TIMELINE_RUNS

    _healthy(sqlite_target)
    run_check(project, sqlite_target.url, "nightly", records=records)
    with Records(records) as opened:
        seed_earlier_runs(opened.engine, 299)  # 300 runs, each with its pages on disk
    seed_pages(project, 299)
    listed = {"every key": 0}
    every_key = rec.Records.result_keys
    monkeypatch.setattr(rec.Records, "result_keys", _counting(listed, "every key", every_key))
    report = run_check(project, sqlite_target.url, "nightly", records=records)
    monkeypatch.undo()
    assert listed["every key"] == 0
    site_folder = Path(report.docs_index).parent
    index = (site_folder / "index.html").read_text(encoding="utf-8")
    assert len(_result_pages(index)) == overview_model.INDEX_RESULTS_LIMIT < 301 * 3
    assert (
        f"This index lists the last {overview_model.INDEX_RESULTS_LIMIT} validation results"
        in index
    )
    assert "<code>kandev-dq history</code> lists more" in index
    overview = (site_folder / overview_page.OVERVIEW_PAGE).read_text(encoding="utf-8")
    assert (
        len(_result_pages(overview)) == overview_model.RUNS_SHOWN * 3
    )  # nightly's three suites a run
    assert f"this store's last {overview_model.RUNS_SHOWN} runs, newest first" in overview
    assert f"this store's last {TIMELINE_RUNS} run(s) (at most {TIMELINE_RUNS})" in overview
    past = history(project, sqlite_target.url, records=records)
    assert len(past.runs) == 20 and len(past.timeline.points) == TIMELINE_RUNS


def _result_pages(page: str) -> set[str]:
    """The validation result pages a docs page links to."""
    import re

    return set(re.findall(r"validations/[^\"'#]+?\.html", page))


def test_check_prunes_but_keeps_the_newest_run_of_each_name_and_the_ledger(
    sqlite_target, project, records, monkeypatch
):
    """$KANDEV_DQ_RECORDS_KEEP_DAYS prunes at the end of each check: old results and runs go,
    the ledger, the baseline and accepts stay (AC-24 write-once needs them forever), and so
    does the newest finished run of each run name (checkpoint and store), which alerts on
    change compare the next run with: the next run still knows what failed before."""
    import kandev_dq as kandev_dq_api
    from kandev_dq import records as rec

    store = _healthy(sqlite_target)
    first = run_check(project, sqlite_target.url, "nightly", records=records)
    accept_key(project, sqlite_target.url, CAPTURE_SINCE, "restored", records=records)
    other = "live@another-store"  # another checkpoint's runs, long ago: its newest one stays
    with Records(records) as opened, opened.engine.begin() as conn:
        [template] = conn.execute(sa.select(rec.runs)).mappings().all()
        for day in ("01", "02"):
            row = {k: v for k, v in template.items() if k != "id"}
            row |= {"run_name": other, "run_key": f"202001{day}T000000.000000Z"}
            conn.execute(rec.runs.insert(), row | {"run_time": f"2020-01-{day}T00:00:00Z"})
            conn.execute(
                rec.results.insert(),
                {
                    "result_key": json.dumps(["rows", other, row["run_key"], "batch"]),
                    **{"suite": "rows", "run_name": other, "run_key": row["run_key"]},
                    **{"stored_at": f"2020-01-{day}T00:00:00Z", "value": "{}"},
                },
            )
        ledger = opened.ledger_entries(_identity(sqlite_target))
        accepts = opened.accepts(_identity(sqlite_target))
    store.set_key(CAPTURE_SINCE, REWRITTEN)  # a standing failure from now on
    monkeypatch.setenv(KEEP_DAYS_VARIABLE, "0")
    second = kandev_dq_api.check(sqlite_target.url, "nightly", project, records=records)
    assert not result(second, WRITE_ONCE).success
    assert (second.pruned.results, second.pruned.runs) == (4, 2)  # the first run, 2020-01-01
    site = project / "uncommitted" / "data_docs" / "local_site" / "validations"
    pages = {page.parent.name for page in site.rglob("*.html")}  # the run keys with pages
    assert pages == {second.run_time.replace("-", "").replace(":", "")}  # the first's are gone
    third = run_check(project, sqlite_target.url, "nightly", records=records)
    assert third.changes["previous_run"] == second.run_time  # it was kept: not "new" again
    assert not result(third, WRITE_ONCE).new
    with Records(records) as opened:
        kept = {(r["run_name"], r["run_time"]) for r in opened.run_records()}
        assert kept == {(third.run_name, third.run_time), (other, "2020-01-02T00:00:00Z")}
        assert first.run_time not in {time for _, time in kept}
        assert {key[-2] for key in opened.result_keys()} == {
            r["run_key"] for r in opened.run_records()
        }
        assert opened.ledger_entries(_identity(sqlite_target)) == ledger
        assert opened.accepts(_identity(sqlite_target)) == accepts
        assert opened.baseline(_identity(sqlite_target)) is not None


def test_the_keep_days_setting_is_the_users_own(monkeypatch):
    """Automatic pruning comes from the user's environment or `check --keep-days`, never the
    project; a bad value is a one-line error before the run, never a silent no-prune."""

    monkeypatch.delenv(KEEP_DAYS_VARIABLE, raising=False)
    assert keep_days_setting() is None
    monkeypatch.setenv(KEEP_DAYS_VARIABLE, " 7 ")
    assert keep_days_setting() == 7 and keep_days_setting(30) == 30
    for bad in ("seven", "-1", "1.5", "²"):
        monkeypatch.setenv(KEEP_DAYS_VARIABLE, bad)
        with pytest.raises(KandevDqError, match=KEEP_DAYS_VARIABLE):
            keep_days_setting()
    with pytest.raises(KandevDqError, match="0 or more"):
        keep_days_setting(-1)


def test_a_checks_docs_build_does_not_reread_the_history(sqlite_target, project, monkeypatch):
    """Per-run docs cost stays flat (timed in `python -m bench --docs-history`): a run's own
    build neither re-parses every stored run time (GX's dateutil parse, six listings a build)
    nor reads more stored results as the history grows."""
    from great_expectations.core import run_identifier
    from great_expectations.data_context.types.resource_identifiers import (
        ValidationResultIdentifier,
    )

    from kandev_dq import records as rec
    from kandev_dq.gx.context import load_context
    from kandev_dq.gx.results_store import attach_records

    parse, get = run_identifier.parse, rec.Records.get_result
    _healthy(sqlite_target)
    url = str(project / "uncommitted" / "records.db")
    run_check(project, sqlite_target.url, "nightly", records=url)
    with Records(url) as opened:
        own = opened.result_keys()
        counts = {}
        for earlier in (25, 60):
            for i in range(len(opened.result_keys()) // 3 - 1, earlier):
                for key in own:  # the same results under an earlier run time
                    moved = (*key[:-2], f"20200101T{i // 60:02d}{i % 60:02d}00.000000Z", key[-1])
                    opened.put_result(moved, opened.get_result(key))
            calls = {"parse": 0, "read": 0}
            monkeypatch.setattr(run_identifier, "parse", _counting(calls, "parse", parse))
            monkeypatch.setattr(rec.Records, "get_result", _counting(calls, "read", get))
            context = load_context(project)
            attach_records(context, opened)
            context.build_data_docs(
                resource_identifiers=[ValidationResultIdentifier.from_tuple(k) for k in own]
            )
            monkeypatch.undo()
            counts[earlier] = (calls["parse"], calls["read"])
    assert counts[25][1] == counts[60][1] > 0  # the newest runs shown, however many exist
    assert counts[60][0] <= 10  # the pages on disk only, never every stored key


def _counting(calls: dict[str, int], name: str, function):
    def counted(*args, **kwargs):
        calls[name] += 1
        return function(*args, **kwargs)

    return counted


def test_no_environment_or_gx_variable_holds_the_records_password(
    sqlite_target, project, monkeypatch
):
    """A PostgreSQL records URL may carry a password (a CI secret): during a check no GX config
    variable and no environment variable holds it, and no output shows it."""
    from tests.test_no_hidden_channels import SEEN, _spy_on

    password = f"pw-{uuid.uuid4().hex}"  # the test server's trust auth accepts any password
    monkeypatch.delenv("KANDEV_DQ_RECORDS_URL", raising=False)
    _healthy(sqlite_target)
    _spy_on(project, "nightly")
    SEEN.clear()
    with fresh_pg_database("kdq_records") as records:
        with_password = records.set(password=password).render_as_string(hide_password=False)
        report = run_check(
            project, sqlite_target.url, "nightly", records=with_password, allow_project_code=True
        )
    assert report.results and len(SEEN) == 1, "the project's action ran during the check"
    assert [name for name, value in SEEN[0].items() if password in value] == []
    assert [name for name, value in os.environ.items() if password in value] == []
    assert password not in json.dumps(report.to_json(), default=str)
    assert report.records == records._replace(
        drivername="postgresql", username=None
    ).render_as_string(hide_password=False)


def _set_records_in_yml(project: Path, url: str) -> None:
    from ruamel.yaml import YAML

    yml = project / "great_expectations.yml"
    yaml = YAML()
    config = yaml.load(yml.read_text(encoding="utf-8"))
    config["stores"]["validation_results_store"]["store_backend"]["url"] = url
    with yml.open("w", encoding="utf-8") as handle:
        yaml.dump(config, handle)


def test_a_project_may_keep_its_records_only_in_its_own_folder(sqlite_target, project, tmp_path):
    """A project is data (trust, 3a): a records URL in its yml outside its folder would send
    the store's samples where the project's author chose. Exit 2 naming the file, nothing
    created there; `--records` (the user's own choice) or a file inside the project is used."""
    _healthy(sqlite_target)
    outside = tmp_path / "elsewhere" / "records.db"
    _set_records_in_yml(project, str(outside))
    done = kandev_dq("check", "--store", sqlite_target.url, "--project", str(project), "-q")
    assert done.returncode == 2, done.stderr
    assert "great_expectations.yml" in done.stderr and "--allow-project-code" in done.stderr
    assert not outside.parent.exists()

    _set_records_in_yml(project, "uncommitted/team-records.db")
    report = run_check(project, sqlite_target.url, "nightly")
    assert report.records.endswith("uncommitted/team-records.db") and report.results


def test_a_check_builds_each_results_pages_and_the_run_wide_pages_once(
    sqlite_target, project, monkeypatch
):
    """GX's docs action builds the site once per validation result; the overview (and its
    chart), the index and the assets are built once per run, after every result's pages."""
    from kandev_dq.report import gx_site

    calls = {"overview": 0, "assets": 0}
    monkeypatch.setattr(
        gx_site.KandevSiteBuilder,
        "write_overview",
        _counting(calls, "overview", gx_site.KandevSiteBuilder.write_overview),
    )
    monkeypatch.setattr(gx_site, "copy_assets", _counting(calls, "assets", gx_site.copy_assets))
    _healthy(sqlite_target)
    report = run_check(project, sqlite_target.url, "pre_release")
    assert calls == {"overview": 1, "assets": 1}
    docs = Path(report.docs_index).parent
    index = (docs / "index.html").read_text()
    pages = sorted((docs / "validations").rglob("*.html"))
    assert len(pages) == 5  # one per suite of pre_release
    for page in pages:  # the index, built after them, links every result page
        assert urllib.parse.quote(page.relative_to(docs).as_posix()) in index
