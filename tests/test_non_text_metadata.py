"""Metadata stored as something other than text is named, never skipped (AC-23b, AC-26).

SQLite keeps whatever a writer binds in ``metadata``: a BLOB (a Go ``[]byte`` bound as is),
or an integer or a real where the column has no TEXT affinity. A BLOB is read as the text of
its bytes (``docs/interpretations.md``), by the checks and the backfill through the one
message reading of ``sql/``, so a subagent message bound as bytes is a shortfall, and is
backfilled, exactly as the same message stored as text. Every such message is named at
warning by ``expect_message_metadata_to_be_json``, and by ``migrate``. PostgreSQL's column is
``text``: the same scenarios run there with the text the server keeps, to one verdict.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from kandev_dq.facts.stored_text import stored_text_facts
from kandev_dq.lab.storebuilder import T0, StoreBuilder, subagent_metadata
from kandev_dq.migration import runner as migrate
from kandev_dq.migration.runner import Status
from kandev_dq.store.access import open_store
from tests.gxhelpers import check, failed, result
from tests.pasted import read_only_rows
from tests.subagent_rows import subagent_rows
from tests.test_finding_queries import _emitted

CAPTURE = "2026-07-30T01:39:37.271235Z"  # == T0
EXECUTION = "2026-07-30T01:39:37.000001Z"
SHORTFALL = "expect_no_writer_shortfall_since_capture_since"
METADATA = "expect_message_metadata_to_be_json"
ACTIVITY = "expect_subagent_activity_since_capture_since"


def _bytes_or_text(target, document: dict) -> bytes | str:
    """The document as a Go ``[]byte`` binds it: bytes on SQLite (a BLOB); PostgreSQL's text
    column keeps any bound value as text, so there it is the same bytes as text."""
    raw = json.dumps(document)
    return raw.encode() if target.dialect == "sqlite" else raw


def _stopped_writer(target, *, metadata_of) -> tuple[StoreBuilder, str]:
    """An activated store, one healthy live subagent, and one subagent message after
    capture_since with no row, its metadata given by ``metadata_of(document)``."""
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", EXECUTION)
    session = store.session()
    store.subagent_message(session, T0 + timedelta(seconds=1), "toolu_ok")
    store.subagent_row(session, "toolu_ok", T0 + timedelta(seconds=1))
    missed = store.message(
        session,
        T0 + timedelta(seconds=2),
        metadata=metadata_of(subagent_metadata("toolu_missed")),
        message_id="m-missed",
    )
    return store, missed


@pytest.mark.parametrize("bound", ["bytes", "text"])
def test_a_subagent_message_bound_as_bytes_is_a_shortfall_as_text_is(target, project, bound):
    """The stopped writer is caught whatever type the metadata is bound as (AC-26); bytes are
    also named at warning (AC-23b), with the message's id and stored type in the sample."""
    as_bytes = bound == "bytes"
    _, missed = _stopped_writer(
        target,
        metadata_of=lambda doc: _bytes_or_text(target, doc) if as_bytes else json.dumps(doc),
    )
    report = check(project, target, "nightly")
    shortfall = result(report, SHORTFALL)
    assert shortfall.observed_value == 1 and shortfall.unexpected_count == 1
    assert "stopped or failing" in shortfall.message
    named = as_bytes and target.dialect == "sqlite"
    expected = {SHORTFALL: "error", **({METADATA: "warning"} if named else {})}
    assert failed(report, "writer_health") == expected
    assert not report.success
    metadata = result(report, METADATA)
    if not named:
        assert metadata.success
        return
    assert metadata.unexpected_count == 1 and "AC-23b" in metadata.rules
    assert "BLOB" in metadata.message and "not JSON" not in metadata.message
    with target.engine.connect() as conn:
        (row,) = stored_text_facts(conn)["metadata"]["sample"]
    assert row["id"] == missed and row["stored_type"] == "blob"
    assert row["metadata"].startswith('{"normalized"')


def _without_text_affinity(target, **create) -> StoreBuilder:
    """A store whose ``metadata`` column is declared without a type: SQLite then keeps an
    integer or a real as a number (a TEXT column would convert it to text)."""
    store = StoreBuilder(target.engine).create(**create)
    with target.engine.begin() as conn:
        conn.exec_driver_sql("PRAGMA writable_schema = ON")
        conn.exec_driver_sql(
            "UPDATE sqlite_master SET sql = replace(sql, 'metadata TEXT', 'metadata') "
            "WHERE name = 'task_session_messages'"
        )
        conn.exec_driver_sql("PRAGMA writable_schema = OFF")
    target.engine.dispose()  # the next connection reads the changed declaration
    return store


def test_integer_and_real_metadata_are_named(sqlite_target):
    """A number is no JSON object: unreadable (a message of no kind), named at warning with
    its stored type, and the rule's listing query returns exactly the counted rows."""
    store = _without_text_affinity(sqlite_target)
    store.keys(CAPTURE, "", EXECUTION)
    session = store.session()
    store.subagent_message(session, T0 + timedelta(seconds=1), "toolu_ok")
    store.subagent_row(session, "toolu_ok", T0 + timedelta(seconds=1))
    for message_id, number in {"m-integer": 5, "m-real": 1.5}.items():
        store.message(session, T0 + timedelta(seconds=3), metadata=number, message_id=message_id)
    with sqlite_target.engine.connect() as conn:
        stored = dict(
            conn.exec_driver_sql("SELECT id, typeof(metadata) FROM task_session_messages").all()
        )
        part = stored_text_facts(conn)["metadata"]
    assert stored["m-integer"] == "integer" and stored["m-real"] == "real"
    assert part["count"] == 2 and part["not_text"] == 2
    assert [(row["id"], row["stored_type"], row["metadata"]) for row in part["sample"]] == [
        ("m-integer", "integer", "5"),
        ("m-real", "real", "1.5"),
    ]
    sqlite_target.engine.dispose()
    emitted = {name: (count, query) for name, count, _s, query in _emitted(sqlite_target.url)}
    count, query = emitted[METADATA]
    assert count == 2
    listed = read_only_rows(sqlite_target.url, "sqlite", query)
    assert sorted(row["id"] for row in listed) == ["m-integer", "m-real"]
    assert SHORTFALL not in emitted  # numbers have no kind: no subagent message among them


def _dry_run_then_run(url: str):
    """The migration's dry run, then its run, on the store at ``url``: (plan, report)."""
    opened = open_store(url, read_only=False)
    try:
        return migrate.run(opened, dry_run=True), migrate.run(opened)
    finally:
        opened.dispose()


def test_migrate_names_integer_and_real_metadata(sqlite_target):
    """AC-23b: the backfill's dry run and its run name a number stored as metadata, as they
    name a BLOB: unreadable (no kind, nothing backfilled) and not stored as text."""
    store = _without_text_affinity(sqlite_target, subagents=None)
    session = store.session()
    store.subagent_message(session, T0 - timedelta(hours=2), "toolu_ok")
    for message_id, number in {"m-integer": 5, "m-real": 1.5}.items():
        store.message(session, T0 - timedelta(hours=1), metadata=number, message_id=message_id)
    sqlite_target.engine.dispose()
    plan, report = _dry_run_then_run(sqlite_target.url)
    named = {"count": 2, "ids": ["m-integer", "m-real"]}
    for step in (plan.step(migrate.STEP_BACKFILL), report.step(migrate.STEP_BACKFILL)):
        assert step.detail["metadata_not_text"] == step.detail["unreadable_metadata"] == named
        assert "an integer or a real" in step.reason and "m-integer" in step.reason
    assert report.ok and report.backfill_rows == 1, report.render()


def test_the_listing_of_bytes_metadata_returns_exactly_the_counted_rows(target):
    """The finding query as printed, run with no parameter on a read-only connection, lists
    exactly ``unexpected_count`` rows for both the metadata rule and the shortfall."""
    _stopped_writer(target, metadata_of=lambda doc: _bytes_or_text(target, doc))
    if target.dialect == "sqlite":
        target.engine.dispose()
    emitted = {name: (count, query) for name, count, _s, query in _emitted(target.url)}
    assert (METADATA in emitted) is (target.dialect == "sqlite")
    assert emitted[SHORTFALL][0] == 1
    for name, (count, query) in emitted.items():
        assert len(read_only_rows(target.url, target.dialect, query)) == count, name
    if target.dialect == "sqlite":
        listed = read_only_rows(target.url, "sqlite", emitted[METADATA][1])
        assert [(row["id"], row["stored_type"]) for row in listed] == [("m-missed", "blob")]


def test_checks_and_backfill_agree_on_bytes_holding_json(target, project):
    """The backfill inserts a subagent message bound as bytes as it would the same text, the
    dry run and the run report it (SQLite), and the checks reading the same mapping then find
    the row it should be: the reconciliation and the shortfall pass."""
    store = StoreBuilder(target.engine).create(subagents=None)
    session = store.session()
    document = subagent_metadata(
        "toolu_bytes",
        subagent_type="explorer",
        description="read the tree",
        total_tokens=120,
        tool_use_count=3,
        duration_ms=900,
    )
    text_id = store.subagent_message(session, T0 - timedelta(hours=2), "toolu_text")
    bytes_id = store.message(
        session,
        T0 - timedelta(hours=1),
        metadata=_bytes_or_text(target, document),
        message_id="m-bytes",
    )
    plan, report = _dry_run_then_run(target.url)
    assert plan.ok and plan.qualifying_messages == 2 and plan.backfill_rows == 2
    assert report.ok and report.backfill_rows == 2, report.render()
    rows = subagent_rows(target.engine)
    assert set(rows) == {text_id, bytes_id}
    row = rows[bytes_id]
    assert (row["tool_call_id"], row["subagent_type"], row["description"]) == (
        "toolu_bytes",
        "explorer",
        "read the tree",
    )
    assert (row["total_tokens"], row["tool_use_count"], row["duration_ms"]) == (120, 3, 900)
    planned = plan.step(migrate.STEP_BACKFILL)
    done = report.step(migrate.STEP_BACKFILL)
    assert done.status is Status.DONE and planned.status is Status.WOULD_RUN
    sqlite = target.dialect == "sqlite"
    if sqlite:
        for step in (planned, done):
            assert step.detail["metadata_not_text"] == {"count": 1, "ids": [bytes_id]}
            assert "BLOB" in step.reason and bytes_id in step.reason
    else:
        assert "metadata_not_text" not in planned.detail | done.detail

    checked = check(project, target, "pre_release")
    # No traffic since capture_since: the writer is unproven (AC-29), whatever the metadata.
    expected = {ACTIVITY: "warning", **({METADATA: "warning"} if sqlite else {})}
    assert failed(checked) == expected, [
        (r.expectation, r.message) for r in checked.results if not r.success
    ]


def test_a_blob_holding_jsonb_is_unreadable_not_read_as_json(sqlite_target):
    """SQLite's JSON functions would read a BLOB as JSONB, its binary form; upstream's Go
    reads the bytes as text and cannot parse them. Read as text too: unreadable, named and
    skipped by the backfill, which says so in its dry run."""
    store = StoreBuilder(sqlite_target.engine).create(subagents=None)
    session = store.session()
    store.message(session, T0, metadata="{}", message_id="m-jsonb")
    with sqlite_target.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE task_session_messages SET metadata = jsonb(?) WHERE id = 'm-jsonb'",
            (json.dumps(subagent_metadata("toolu_jsonb")),),
        )
        assert conn.exec_driver_sql("SELECT typeof(metadata) FROM task_session_messages").all() == [
            ("blob",)
        ]
    opened = open_store(sqlite_target.url)  # shows bytes that are not UTF-8 as U+FFFD
    try:
        with opened.engine.connect() as conn:
            part = stored_text_facts(conn)["metadata"]
        plan = migrate.run(opened, dry_run=True)
    finally:
        opened.dispose()
    assert part["count"] == 1 and part["not_text"] == 1
    assert [row["id"] for row in part["sample"]] == ["m-jsonb"]
    assert plan.qualifying_messages == 0 and plan.backfill_rows == 0
    detail = plan.step(migrate.STEP_BACKFILL).detail
    assert (
        detail["unreadable_metadata"]
        == detail["metadata_not_text"]
        == {
            "count": 1,
            "ids": ["m-jsonb"],
        }
    )
