"""Hostile stores: a key of any SQL type, an instant out of range and a huge value are each a
finding, never a crash, an unevaluable rule or a result too big to keep."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from kandev_dq.contract.instants import BACKFILL_THROUGH, CAPTURE_SINCE, EXECUTION_SINCE
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.migration import runner as migrate
from kandev_dq.migration.runner import Status
from kandev_dq.records import Records, records_url
from kandev_dq.records.identity import store_identity
from kandev_dq.run.check import run_check
from kandev_dq.store.access import open_store
from kandev_dq.store.reference import resolve_url
from tests.gxhelpers import result
from tests.subagent_rows import (
    add_message,
    add_session,
    add_subagent_row,
    at,
    subagent_metadata,
    subagent_rows,
)
from tests.test_reliability import (
    CAPTURE,
    _keep_store_url,
    activated_store,
    cli,
    quick_project,
    unevaluated,
)

__all__ = ["_keep_store_url", "quick_project"]  # fixtures this module uses from its neighbour


# --- keys of any SQL type, and the ledger ----------------------------------------------------


@pytest.mark.parametrize(
    "stored", ["x'0001'", "20260730", "1.5", "CAST('2026-07-30T01:39:37Z' AS BLOB)"]
)
def test_a_key_of_another_sql_type_is_malformed_not_a_crash(sqlite_target, quick_project, stored):
    """SQLite keeps any type in ``kandev_meta.value`` (PostgreSQL's TEXT column cannot): a BLOB,
    an integer or a real is a malformed key (AC-24e), even a BLOB holding an instant's bytes;
    the run ends with its verdict and its ledger."""
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    with sqlite_target.engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE kandev_meta SET value = {stored} WHERE key = '{EXECUTION_SINCE}'"
        )
    report = run_check(quick_project, sqlite_target.url, "nightly")
    assert unevaluated(report) == []
    well_formed = result(report, "expect_activation_keys_to_be_well_formed")
    assert not well_formed.success and EXECUTION_SINCE in well_formed.message
    json.dumps(report.to_json())
    with Records(records_url(quick_project)) as records:
        assert records.first_values(store_identity(resolve_url(sqlite_target.url)))
    assert result(
        run_check(quick_project, sqlite_target.url, "nightly"),
        "expect_activation_keys_to_be_write_once",
    ).success


# --- instants out of range --------------------------------------------------------------------

FAR_FUTURE = "9999-06-01 00:00:00+00:00"


#: (dialect, stamp): ``infinity`` and ``-infinity`` are PostgreSQL values; on SQLite that text
#: is in no UTC form at all (another rule's finding), so only the far future is stored there.
OUT_OF_RANGE = [
    ("sqlite", FAR_FUTURE),
    ("postgresql", FAR_FUTURE),
    ("postgresql", "infinity"),
    ("postgresql", "-infinity"),
    ("sqlite", "0001-01-01 23:59:59.999999+00:00"),
    ("postgresql", "0001-01-01 23:59:59.999999+00:00"),
]
#: Early but in range (CONTRACT §1: from 0001-01-02): no clock finding, on either dialect.
EARLY_IN_RANGE = ["0001-01-02 00:00:00+00:00", "0999-12-31 23:59:59+00:00"]


def _target_of(request, dialect: str):
    return request.getfixturevalue("sqlite_target" if dialect == "sqlite" else "pg_target")


def _store_with(target, *, row_at: str | None = None, message_at: str | None = None):
    store = activated_store(target)
    with target.engine.begin() as conn:
        add_session(conn, "s-far", "t-far", turns=("u-far",))
        add_message(
            conn,
            "m-far",
            subagent_metadata("tc-far"),
            session_id="s-far",
            task_id="t-far",
            turn_id="u-far",
            created_at=message_at or at(10),
        )
        add_subagent_row(
            conn,
            id="r-far",
            task_session_id="s-far",
            task_id="t-far",
            tool_call_id="tc-far",
            agent_execution_id="unknown",
            observed_at=row_at or at(10),
            updated_at=row_at or at(10),
        )
    return store


@pytest.mark.parametrize("dialect, stamp", OUT_OF_RANGE)
@pytest.mark.parametrize("where", ["row", "message"])
def test_an_instant_out_of_range_is_an_error_naming_it(
    request, quick_project, where, dialect, stamp
):
    target = _target_of(request, dialect)
    _store_with(target, **{f"{where}_at": stamp})
    report = run_check(quick_project, target.url, "pre_release")
    assert unevaluated(report) == []
    finding = result(report, "expect_timestamps_to_be_within_range")
    assert not finding.success and finding.severity == "error"
    assert f"{where[0]}-far" in finding.message and stamp.split(" ")[0] in finding.message
    assert not report.success


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
@pytest.mark.parametrize("stamp", EARLY_IN_RANGE)
def test_an_early_instant_in_range_is_no_range_finding(request, quick_project, dialect, stamp):
    target = _target_of(request, dialect)
    _store_with(target, row_at=stamp, message_at=stamp)
    report = run_check(quick_project, target.url, "pre_release")
    assert result(report, "expect_timestamps_to_be_within_range").success


@pytest.mark.parametrize("dialect, stamp", OUT_OF_RANGE)
def test_migrate_names_a_message_out_of_range_and_its_dry_run_predicts_it(request, dialect, stamp):
    """Such an instant would become ``backfill_through``, a write-once key (AC-24): the backfill
    fails naming the message, writes no row and no key (AC-24a), and the dry run says so."""
    target = _target_of(request, dialect)
    target.create_base(subagents=None)
    with target.engine.begin() as conn:
        add_session(conn)
        add_message(conn, "m-good", subagent_metadata("tc-good"), created_at=at(1))
        add_message(conn, "m-far", subagent_metadata("tc-far"), created_at=stamp)
    store = open_store(target.url, read_only=False)
    try:
        planned = migrate.run(store, dry_run=True)
        done = migrate.run(store)
    finally:
        store.dispose()
    for report in (planned, done):
        backfill = report.step(migrate.STEP_BACKFILL)
        assert backfill.status in (Status.WOULD_FAIL, Status.FAILED), report.render()
        assert "'m-far'" in backfill.reason and "'m-good'" not in backfill.reason
        assert report.exit_code == 1
    assert done.keys[CAPTURE_SINCE] is None and done.keys[BACKFILL_THROUGH] is None
    assert subagent_rows(target.engine) == {}


# --- huge values --------------------------------------------------------------------------------

FIVE_MB = 5_000_000
RESULT_FILE_BOUND = 1_000_000


def _far_row(conn, name: str, **columns) -> None:
    """A subagent row of the far session (``r-NAME``, ``tc-NAME``), observed at ``at(20)``."""
    add_subagent_row(
        conn,
        id=f"r-{name}",
        task_session_id="s-far",
        task_id="t-far",
        tool_call_id=f"tc-{name}",
        agent_execution_id="unknown",
        observed_at=at(20),
        updated_at=at(20),
        **columns,
    )


def test_result_files_stay_small_with_a_five_megabyte_value(target, quick_project):
    """A huge value is cut in SQL to its head, length and digest wherever a sample or a result
    takes it: no validation result file reaches 1 MB."""
    huge = "x" * FIVE_MB
    _store_with(target)
    with target.engine.begin() as conn:
        add_message(
            conn,
            "m-huge",
            subagent_metadata("tc-huge", description=huge),
            session_id="s-far",
            task_id="t-far",
            turn_id="u-far",
            created_at=at(20),
        )
        _far_row(conn, "huge", tool_status=huge, description=huge)
    report = run_check(quick_project, target.url, "pre_release")
    assert unevaluated(report) == []
    assert not result(report, "expect_tool_status_in_acp_vocabulary").success
    with Records(records_url(quick_project)) as records:
        stored = [records.get_result(key) for key in records.result_keys()]
    assert stored and all(len(value.encode()) < RESULT_FILE_BOUND for value in stored)
    assert any(f"[{FIVE_MB} characters" in value for value in stored)


def test_a_nul_led_value_is_cut_by_its_bytes(sqlite_target, quick_project):
    """SQLite: ``length()`` stops at the first NUL, so a NUL-led five-megabyte key or status
    once passed the cut whole. Measured in bytes, each is a head, a size and a digest in the
    results, the key ledger and the report."""
    huge = "\x00" + "x" * FIVE_MB
    _store_with(sqlite_target)
    with sqlite_target.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE kandev_meta SET value = ? WHERE key = ?", (huge, CAPTURE_SINCE)
        )
        _far_row(conn, "nul", tool_status=huge)
    sqlite_target.engine.dispose()
    report = run_check(quick_project, sqlite_target.url, "pre_release")
    assert unevaluated(report) == []
    assert len(json.dumps(report.to_json(), default=str)) < RESULT_FILE_BOUND
    with Records(records_url(quick_project)) as records:
        stored = [records.get_result(key) for key in records.result_keys()]
        ledger = records.ledger_entries(store_identity(resolve_url(sqlite_target.url)))
    assert stored and all(len(value.encode()) < RESULT_FILE_BOUND for value in stored)
    assert any(f"[{FIVE_MB + 1} bytes" in value for value in stored)
    (first,) = [e.first_value for e in ledger if e.key_name == CAPTURE_SINCE]
    assert len(first) < 100 and f"[{FIVE_MB + 1} bytes, sha256 " in first


def test_the_byte_cut_keeps_every_value_within_the_limit_as_it_was(target):
    """Both dialects: a value of at most 200 characters, 4-byte ones included, is shown whole
    as before (the key ledger reads earlier values alike), and one character more is cut by
    its characters."""
    import sqlalchemy as sa

    from kandev_dq.sql.shown import KEY_DISPLAY_LIMIT, prepare, shown

    within = "🦊" * KEY_DISPLAY_LIMIT
    with target.engine.connect() as conn:
        prepare(conn)
        read = lambda value: conn.execute(sa.select(shown(sa.literal(value, sa.Text)))).scalar()  # noqa: E731
        assert read(within) == within
        assert read(within + "x").startswith("🦊" * 40 + f"...[{KEY_DISPLAY_LIMIT + 1} characters")


#: What one command may print, one run may add to the records database, or one data docs
#: file may hold, with a two-megabyte key and status in the store: a store value only ever
#: arrives as its head, size and digest (AC-24 ledger, results, samples).
SURFACE_BOUND = 100_000
#: A data docs page also carries each failing rule's listing query (up to 25 KB of kandev-dq's
#: own SQL, whatever the store holds); a whole two-megabyte value would still be 5x over.
DOCS_PAGE_BOUND = 400_000
RECORDS_GROWTH_BOUND = 500_000
TWO_MB = 2_000_000


def _huge_key_and_status_store(target) -> str:
    """``capture_since``, one row's ``tool_status`` and another's ``source`` of two megabytes;
    on SQLite led by a NUL, where ``length()`` reads them as empty (PostgreSQL's TEXT holds
    no NUL)."""
    huge = ("\x00" if target.dialect == "sqlite" else "") + "x" * TWO_MB
    _store_with(target)
    with target.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE kandev_meta SET value = :value WHERE key = :key"),
            {"value": huge, "key": CAPTURE_SINCE},
        )
        _far_row(conn, "huge", tool_status=huge)
        _far_row(conn, "source", source=huge)  # grouped by the AC-25 disclosure
    target.engine.dispose()
    return huge


def _small(text: str, bound: int = SURFACE_BOUND) -> bool:
    return len(text.encode()) < bound and "x" * 1_000 not in text


def test_every_surface_stays_small_with_a_huge_key_and_status(target, quick_project, capsys):
    """AC-24, AC-12: a huge ``capture_since`` and ``tool_status`` (NUL-led on SQLite) reach no
    surface whole: check's text and JSON, the validation results, the ledger's first value, the
    records database's growth per run, history, the data docs, ledger show, the migration's
    dry run and explain's rows are each bounded, and each command still answers."""
    huge = _huge_key_and_status_store(target)
    size = f"[{len(huge.encode())} {'bytes' if huge[0] == chr(0) else 'characters'}, sha256 "
    store, project = ["--store", target.url], ["--project", str(quick_project)]
    records_db = quick_project / "uncommitted" / "records.db"
    check = ["check", *store, *project, "--checkpoint", "pre_release"]
    code, out, err = cli(capsys, *check)
    assert code == 1 and _small(out) and _small(err), (len(out), err[-500:])
    before = records_db.stat().st_size
    code, out, err = cli(capsys, *check, "--format", "json")
    assert code == 1 and _small(out) and "Traceback" not in err
    assert records_db.stat().st_size - before < RECORDS_GROWTH_BOUND
    with Records(records_url(quick_project)) as records:
        stored = [records.get_result(key) for key in records.result_keys()]
        ledger = records.ledger_entries(store_identity(resolve_url(target.url)))
    assert stored and all(_small(value) for value in stored)
    assert any(size in value for value in stored)
    (first,) = [e.first_value for e in ledger if e.key_name == CAPTURE_SINCE]
    assert len(first) < 100 and size in first
    commands = [
        ["history", *store, *project],
        ["ledger", "show", *store, *project],
        ["migrate", *store, "--dry-run"],
        ["explain", "expect_tool_status_in_acp_vocabulary", *store, *project, "--run"],
        ["explain", "expect_tool_status_in_acp_vocabulary", *store, *project, "--format", "csv"],
        ["explain", "expect_activation_keys_to_be_well_formed", *store, *project, "--run"],
        ["explain", "expect_activation_keys_to_be_write_once", *store, *project, "--run"],
        ["docs", *project],
    ]
    for command in commands:
        code, out, err = cli(capsys, *command)
        assert code in (0, 1) and _small(out) and _small(err), (command, len(out), err[-500:])
    built = [path for path in (quick_project / "uncommitted").rglob("*") if path.is_file()]
    docs = [path for path in built if path.suffix in (".html", ".json", ".md")]
    assert docs and all(_small(path.read_text(errors="replace"), DOCS_PAGE_BOUND) for path in docs)
