"""The migration runner against CONTRACT §3–§5, every case on SQLite and on PostgreSQL.

Faults are injected with SQLAlchemy cursor listeners on the store's engine (a statement that
raises before or after it executes) or by replacing one step function with monkeypatch; the
order of statements is read off the same listeners.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    Instant,
    go_sqlite_text,
    parse_key,
)
from kandev_dq.migration import backfill as backfill_step
from kandev_dq.migration import runner as migrate
from kandev_dq.migration import schema_steps, transactions
from kandev_dq.migration.runner import Status
from kandev_dq.sql.keys import read_keys
from kandev_dq.store import sqlite_driver
from kandev_dq.store.access import open_store
from kandev_dq.store.observe import SubagentsShape, observe_subagents
from kandev_dq.store.reference import resolve_url, shown_store, with_pg_option
from tests.subagent_rows import (
    add_message,
    add_session,
    add_subagent_row,
    at,
    meta_rows,
    set_key,
    subagent_metadata,
    subagent_rows,
    table_names,
)

RFC3339NANO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z")
BACKFILL_INSERT = r"INSERT INTO task_session_subagents \("
KEY_INSERT = r"INSERT INTO kandev_meta"
MAX_SELECT = r"SELECT max\("
OTHER_KEY = ("some_other_feature_since", "2026-01-01T00:00:00Z")


class InjectedFault(Exception):
    """Raised by a test listener to make one statement fail."""


# --- harness ---------------------------------------------------------------------------------


@contextmanager
def opened(target, *, read_only: bool = False):
    store = open_store(target.url, read_only=read_only)
    try:
        yield store
    finally:
        store.dispose()


def run_migration(target, *listeners, dry_run: bool = False) -> migrate.MigrationReport:
    """One run on a freshly opened store, with ``(event, listener)`` pairs attached."""
    with opened(target) as store:
        for event, fn in listeners:
            sa.event.listen(store.engine, event, fn)
        return migrate.run(store, dry_run=dry_run)


def fail_on(pattern: str, *, after: bool = False, params: str | None = None):
    """A listener pair raising :class:`InjectedFault` on the first matching statement."""
    rx = re.compile(pattern, re.IGNORECASE)

    def listener(conn, cursor, statement, parameters, context, executemany):
        if rx.search(statement) and (params is None or params in str(parameters)):
            raise InjectedFault(f"injected fault on {pattern}")

    return ("after_cursor_execute" if after else "before_cursor_execute", listener)


class Recorder:
    """Every statement (before/after execution, with a clock) and every commit, in order."""

    def __init__(self):
        self.events: list[tuple[str, str, str, int]] = []
        self.isolation_at_insert: str | None = None

    def listeners(self):
        def before(conn, cursor, statement, parameters, context, executemany):
            self.events.append(("before", statement, str(parameters), time.time_ns()))

        def after(conn, cursor, statement, parameters, context, executemany):
            self.events.append(("after", statement, str(parameters), time.time_ns()))
            if re.search(BACKFILL_INSERT, statement) and conn.dialect.name == "postgresql":
                driver = conn.connection.driver_connection
                self.isolation_at_insert = driver.execute("SHOW transaction_isolation").fetchone()[
                    0
                ]

        def commit(conn):
            self.events.append(("commit", "", "", time.time_ns()))

        return [
            ("before_cursor_execute", before),
            ("after_cursor_execute", after),
            ("commit", commit),
        ]

    def find(self, pattern: str, kind: str = "before", params: str | None = None) -> list[int]:
        rx = re.compile(pattern, re.IGNORECASE)
        return [
            i
            for i, (k, stmt, p, _) in enumerate(self.events)
            if k == kind and rx.search(stmt) and (params is None or params in p)
        ]

    def statements(self) -> list[str]:
        return [stmt for k, stmt, _, _ in self.events if k == "before"]


def observe(target) -> SubagentsShape:
    with target.engine.connect() as conn:
        return observe_subagents(conn)


def keys(target) -> dict[str, str | None]:
    with target.engine.connect() as conn:
        return read_keys(conn)


def fresh_shape(target) -> SubagentsShape:
    """What a fresh store's table looks like, built on the same dialect."""
    if target.dialect == "sqlite":
        engine = sqlite_driver.create_engine("sqlite://")
        with engine.begin() as conn:
            schema.create_base_tables(conn)
            schema.create_subagents_table(conn)
            return observe_subagents(conn)
    with target.engine.connect() as conn:
        name = f"fresh_{uuid.uuid4().hex[:8]}"
        conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        conn.exec_driver_sql(f'SET LOCAL search_path TO "{name}"')
        schema.create_base_tables(conn)
        schema.create_subagents_table(conn)
        shape = observe_subagents(conn)
        conn.rollback()
        return shape


def stored(target, value: datetime):
    """A datetime as the test engine reads it back raw (Go text on SQLite, naive on PG)."""
    if target.dialect == "sqlite":
        return go_sqlite_text(value)
    return value.replace(tzinfo=None)


def rfc(value: datetime) -> str:
    return Instant.from_datetime(value).rfc3339nano()


def seed(target, build) -> None:
    with target.engine.begin() as conn:
        build(conn)


def is_instant_key(value: str | None) -> bool:
    return value is not None and RFC3339NANO.fullmatch(value) is not None


def assert_end_state(target, report, *, through: str | None) -> dict:
    """AC-33 (1)–(6), AC-24's keys and the report, on the live store; returns the state."""
    assert report.ok, report.render()
    shape = observe(target)
    assert shape == fresh_shape(target)
    assert shape.end_state_holds and shape.foreign_keys_hold
    assert schema.REBUILD_TABLE not in table_names(target.engine)
    found = keys(target)
    assert is_instant_key(found[EXECUTION_SINCE])
    assert is_instant_key(found[CAPTURE_SINCE])
    if through is not None:
        assert found[BACKFILL_THROUGH] == through
    rows = subagent_rows(target.engine)
    assert all(r["agent_execution_id"] not in (None, "") for r in rows.values())
    assert meta_rows(target.engine)[OTHER_KEY[0]] == OTHER_KEY[1]
    return {"keys": found, "rows": rows, "shape": shape}


def base_store(target, subagents: str | None) -> None:
    target.create_base(subagents=subagents)
    set_key(target.engine, *OTHER_KEY)


def history(conn) -> None:
    """Session s1 (turns u1 and ''), two subagent messages and one ordinary message."""
    add_session(conn, "s1", "t1", turns=("u1", ""))
    add_message(
        conn,
        "m1",
        subagent_metadata("tc-1", total_tokens=1200, tool_use_count=3, duration_ms=4500),
        created_at=at(0),
        updated_at=at(1),
    )
    add_message(
        conn,
        "m2",
        subagent_metadata(
            "tc-2",
            status="in_progress",
            agent_status="async_launched",
            total_tokens=50,
            is_async=True,
        ),
        turn_id="",
        created_at=at(10),
        updated_at=at(11),
    )
    add_message(conn, "m3", {"normalized": {"kind": "message"}}, created_at=at(20))


HISTORY_THROUGH = rfc(at(10))


# --- AC-17, AC-24f: a fresh store and a store that predates the feature -----------------------


def test_fresh_store_gets_the_table_execution_since_and_the_sentinel(target):
    base_store(target, None)
    report = run_migration(target)
    assert report.status(migrate.STEP_CREATE) is Status.DONE
    assert report.status(migrate.STEP_AMEND) is Status.ALREADY_DONE
    assert report.status(migrate.STEP_EXECUTION_SINCE) is Status.DONE
    assert report.status(migrate.STEP_BACKFILL) is Status.DONE
    state = assert_end_state(target, report, through="")
    assert state["rows"] == {}
    assert report.backfill_rows == 0


def test_store_predating_the_feature_is_backfilled(target):
    base_store(target, None)
    seed(target, history)
    report = run_migration(target)
    state = assert_end_state(target, report, through=HISTORY_THROUGH)
    assert set(state["rows"]) == {"m1", "m2"}
    assert report.backfill_rows == 2
    assert {r["source"] for r in state["rows"].values()} == {"backfill"}


# --- AC-33: upgrading a pre-amendment table ---------------------------------------------------


def _old_rows(target):
    """Pre-amendment rows; on SQLite in every stored timestamp shape (CONTRACT §1)."""

    def ts(text: str, value: datetime):
        return text if target.dialect == "sqlite" else value

    def build(conn):
        history(conn)
        add_subagent_row(
            conn,
            amended=False,
            id="old-1",
            tool_call_id="tc-old",
            turn_id=None,
            agent_status="async_launched",
            tool_status="pending",
            is_async=1,
            observed_at=ts("2026-07-30 01:39:37.1+00:00", at(micros=-171235)),
            updated_at=ts("2026-07-30T01:39:38Z", at(micros=728765)),
        )
        add_subagent_row(
            conn,
            amended=False,
            id="old-2",
            tool_call_id="tc-1",
            turn_id="u1",
            subagent_type="Explore",
            tool_status="completed",
            agent_status="completed",
            total_tokens=10,
            tool_use_count=0,
            duration_ms=None,
            source="live",
            observed_at=ts("2026-07-30 01:39:37+00:00", at(micros=-271235)),
            settled_at=ts("2026-07-30T01:39:39.000001Z", at(seconds=2, micros=-271234)),
            updated_at=ts("2026-07-30 01:39:39.000001+00:00", at(seconds=2, micros=-271234)),
        )

    return build


def test_pre_amendment_table_is_upgraded_with_every_row_intact(target):
    base_store(target, "pre_amendment")
    seed(target, _old_rows(target))
    before = subagent_rows(target.engine)
    shape_before = observe(target)
    assert shape_before.two_column_unique_remains and not shape_before.has_execution_column

    report = run_migration(target)

    assert report.status(migrate.STEP_AMEND) is Status.DONE
    state = assert_end_state(target, report, through=HISTORY_THROUGH)
    shape = state["shape"]
    assert shape.has_amended_unique and not shape.two_column_unique_remains
    assert shape.secondary_indexes == schema.SECONDARY_INDEXES
    after = state["rows"]
    for row_id, old in before.items():
        kept = after[row_id]
        assert kept["agent_execution_id"] == schema.UNKNOWN_EXECUTION
        assert {k: kept[k] for k in old} == old  # every value, timestamps as stored
    if target.dialect == "sqlite":
        with target.engine.connect() as conn:
            kinds = conn.execute(
                sa.text(
                    "SELECT typeof(observed_at), typeof(settled_at), typeof(duration_ms) "
                    "FROM task_session_subagents WHERE id = 'old-2'"
                )
            ).one()
        assert tuple(kinds) == ("text", "text", "null")
    # old-2 already held tc-1, so the backfill's 'unknown' row for m1 conflicted (AC-22)
    assert set(after) == {"old-1", "old-2", "m2"}
    assert after["old-2"]["source"] == "live"


def test_upgraded_table_behaves_like_a_fresh_one(target):
    base_store(target, "pre_amendment")
    seed(target, _old_rows(target))
    assert run_migration(target).ok
    with target.engine.begin() as conn:  # AC-32: only the execution id differs — both stay
        add_subagent_row(
            conn, id="live-a", tool_call_id="tc-old", agent_execution_id=str(uuid.uuid4())
        )
    with pytest.raises(sa.exc.IntegrityError), target.engine.begin() as conn:  # AC-3
        add_subagent_row(conn, id="dup", tool_call_id="tc-old")
    with target.engine.begin() as conn:  # AC-16: the cascade survived the rebuild
        conn.execute(sa.text("DELETE FROM task_sessions WHERE id = 's1'"))
    assert subagent_rows(target.engine) == {}


def _rename_two_column_unique(target) -> None:
    """The two-column UNIQUE under an odd name with its columns reversed."""
    with target.engine.begin() as conn:
        if target.dialect == "postgresql":
            name = conn.execute(
                sa.text(
                    "SELECT conname FROM pg_constraint WHERE conrelid = "
                    "to_regclass('task_session_subagents') AND contype = 'u'"
                )
            ).scalar_one()
            conn.exec_driver_sql(f'ALTER TABLE task_session_subagents DROP CONSTRAINT "{name}"')
            conn.exec_driver_sql(
                'ALTER TABLE task_session_subagents ADD CONSTRAINT "legacy pair" '
                "UNIQUE (tool_call_id, task_session_id)"
            )
        else:
            ddl = conn.execute(
                sa.text("SELECT sql FROM sqlite_master WHERE name = 'task_session_subagents'")
            ).scalar_one()
            conn.exec_driver_sql("DROP TABLE task_session_subagents")
            conn.exec_driver_sql(
                ddl.replace(
                    "UNIQUE (task_session_id, tool_call_id)",
                    'CONSTRAINT "legacy pair" UNIQUE (tool_call_id, task_session_id)',
                )
            )
            for index in schema.pre_amendment_subagents.indexes:
                index.create(conn)


def test_two_column_unique_is_found_by_its_columns_not_its_name(target):
    base_store(target, "pre_amendment")
    _rename_two_column_unique(target)
    assert observe(target).unique_keys == (("tool_call_id", "task_session_id"),)
    seed(target, _old_rows(target))
    report = run_migration(target)
    assert_end_state(target, report, through=HISTORY_THROUGH)


# --- AC-18 / AC-34: two runs, the full end state after each -----------------------------------


def test_two_runs_assert_the_full_end_state_after_each(target):
    base_store(target, "pre_amendment")
    seed(target, _old_rows(target))

    first = run_migration(target)
    state1 = assert_end_state(target, first, through=HISTORY_THROUGH)
    assert set(state1["rows"]) == {"old-1", "old-2", "m2"}
    assert [s.status for s in first.steps] == [
        Status.ALREADY_DONE,
        Status.ALREADY_DONE,
        Status.DONE,
        Status.DONE,
        Status.DONE,
    ]

    second = run_migration(target)
    state2 = assert_end_state(target, second, through=HISTORY_THROUGH)
    assert [s.status for s in second.steps] == [Status.ALREADY_DONE] * 5
    assert state2["keys"] == state1["keys"]  # byte-identical: write-once
    assert state2["rows"] == state1["rows"]
    assert meta_rows(target.engine) == {**state1["keys"], OTHER_KEY[0]: OTHER_KEY[1]}


# --- AC-33a: a failed rebuild -----------------------------------------------------------------


def _late_upgrade_statement(target) -> str:
    """The last DDL of the upgrade: failing there proves the whole upgrade is one transaction."""
    return r"CREATE INDEX idx_subagents_turn_id" if target.dialect == "sqlite" else r"ADD UNIQUE"


def test_failed_rebuild_leaves_the_old_table_whole_and_retries(target, caplog):
    base_store(target, "pre_amendment")
    seed(target, _old_rows(target))
    rows_before, shape_before = subagent_rows(target.engine), observe(target)

    with caplog.at_level(logging.WARNING, logger="kandev_dq.migration"):
        report = run_migration(target, fail_on(_late_upgrade_statement(target)))

    assert not report.ok
    assert report.status(migrate.STEP_AMEND) is Status.FAILED
    assert "InjectedFault" in report.step(migrate.STEP_AMEND).reason
    assert report.status(migrate.STEP_EXECUTION_SINCE) is Status.SKIPPED
    assert report.status(migrate.STEP_BACKFILL) is Status.SKIPPED  # AC-33c
    assert any(
        r.levelno == logging.WARNING
        and r.getMessage().startswith(f"migration failed name={migrate.STEP_AMEND} error=")
        for r in caplog.records
    )
    assert observe(target) == shape_before
    assert subagent_rows(target.engine) == rows_before
    assert schema.REBUILD_TABLE not in table_names(target.engine)
    assert keys(target) == dict.fromkeys((CAPTURE_SINCE, BACKFILL_THROUGH, EXECUTION_SINCE))

    retry = run_migration(target)
    assert retry.status(migrate.STEP_AMEND) is Status.DONE
    assert_end_state(target, retry, through=HISTORY_THROUGH)


# --- AC-33b: self-heal ------------------------------------------------------------------------


def test_amended_table_without_execution_since_gets_the_key_without_a_rebuild(target):
    base_store(target, "amended")
    seed(target, history)
    seed(target, lambda c: add_subagent_row(c, id="live-1", tool_call_id="tc-live"))
    recorder = Recorder()
    report = run_migration(target, *recorder.listeners())
    assert report.status(migrate.STEP_AMEND) is Status.ALREADY_DONE
    assert report.status(migrate.STEP_EXECUTION_SINCE) is Status.DONE
    ddl = [s for s in recorder.statements() if re.match(r"\s*(CREATE|ALTER|DROP)\b", s, re.I)]
    assert ddl == []
    assert_end_state(target, report, through=HISTORY_THROUGH)


def test_committed_rebuild_whose_key_write_failed_heals_on_the_next_run(target, monkeypatch):
    """The AC-33b self-heal state, reached for real: the step is replaced to raise."""
    base_store(target, "pre_amendment")
    seed(target, _old_rows(target))

    def broken(ctx):
        raise InjectedFault("kandev_meta write refused")

    monkeypatch.setattr(migrate, "write_execution_since", broken)
    first = run_migration(target)
    assert first.status(migrate.STEP_AMEND) is Status.DONE
    assert first.status(migrate.STEP_EXECUTION_SINCE) is Status.FAILED
    assert first.status(migrate.STEP_BACKFILL) is Status.SKIPPED  # AC-33c: clause 6 missing
    assert observe(target).end_state_holds
    assert keys(target) == dict.fromkeys((CAPTURE_SINCE, BACKFILL_THROUGH, EXECUTION_SINCE))

    monkeypatch.undo()
    recorder = Recorder()
    second = run_migration(target, *recorder.listeners())
    assert second.status(migrate.STEP_AMEND) is Status.ALREADY_DONE
    assert second.status(migrate.STEP_EXECUTION_SINCE) is Status.DONE
    assert not [s for s in recorder.statements() if re.match(r"\s*(CREATE|ALTER|DROP)\b", s, re.I)]
    assert_end_state(target, second, through=HISTORY_THROUGH)


# --- AC-33c: shape change and execution_since before the backfill, in one run ------------------


def test_upgrade_and_backfill_complete_in_one_run_in_order(target):
    base_store(target, "pre_amendment")
    seed(target, _old_rows(target))
    set_key(target.engine, BACKFILL_THROUGH, "")  # a partial pair: capture_since absent
    recorder = Recorder()
    report = run_migration(target, *recorder.listeners())
    state = assert_end_state(target, report, through="")
    assert "m2" in state["rows"]
    upgrade = recorder.find(_late_upgrade_statement(target))[0]
    execution = recorder.find(KEY_INSERT, params=EXECUTION_SINCE)[0]
    backfill = recorder.find(BACKFILL_INSERT)[0]
    capture = recorder.find(KEY_INSERT, params=CAPTURE_SINCE)[0]
    assert upgrade < execution < backfill < capture


# --- AC-24a / AC-24d: failures inside the backfill --------------------------------------------


def test_failed_backfill_writes_no_key_and_no_row_then_retries(target, caplog):
    base_store(target, "amended")
    seed(target, history)
    with caplog.at_level(logging.WARNING, logger="kandev_dq.migration"):
        report = run_migration(target, fail_on(BACKFILL_INSERT, after=True))
    assert report.status(migrate.STEP_BACKFILL) is Status.FAILED
    assert f"migration failed name={migrate.STEP_BACKFILL} error=" in caplog.text
    found = keys(target)
    assert found[CAPTURE_SINCE] is None and found[BACKFILL_THROUGH] is None
    assert is_instant_key(found[EXECUTION_SINCE])  # AC-24c: absent/present
    assert subagent_rows(target.engine) == {}

    retry = run_migration(target)
    state = assert_end_state(target, retry, through=HISTORY_THROUGH)
    assert set(state["rows"]) == {"m1", "m2"}
    assert state["keys"][EXECUTION_SINCE] == found[EXECUTION_SINCE]


def test_failed_second_key_write_leaves_neither_key_nor_rows(target):
    base_store(target, "amended")
    seed(target, history)
    report = run_migration(target, fail_on(KEY_INSERT, params=BACKFILL_THROUGH))
    assert report.status(migrate.STEP_BACKFILL) is Status.FAILED
    found = keys(target)
    assert found[CAPTURE_SINCE] is None and found[BACKFILL_THROUGH] is None
    assert subagent_rows(target.engine) == {}
    retry = run_migration(target)
    assert_end_state(target, retry, through=HISTORY_THROUGH)


@pytest.mark.parametrize("present", [CAPTURE_SINCE, BACKFILL_THROUGH])
def test_partial_pair_is_repaired_and_the_present_key_kept(target, present):
    base_store(target, "amended")
    seed(target, history)
    # What the old three-statement writer leaves: its insert committed, one key written.
    with target.engine.begin() as conn:
        conn.execute(backfill_step.backfill_statement(target.dialect))
    rows_before = subagent_rows(target.engine)
    legacy = "2026-07-30T09:00:00Z"
    set_key(target.engine, present, legacy)
    started = Instant.from_epoch_ns(time.time_ns())

    report = run_migration(target)

    assert report.status(migrate.STEP_BACKFILL) is Status.DONE
    assert report.backfill_rows == 0
    found = keys(target)
    assert found[present] == legacy
    if present == CAPTURE_SINCE:
        assert found[BACKFILL_THROUGH] == HISTORY_THROUGH  # the true high-water mark
    else:
        capture = parse_key(found[CAPTURE_SINCE])
        assert (capture.micro, capture.nanos) >= (started.micro, started.nanos)
    assert subagent_rows(target.engine) == rows_before
    assert_end_state(target, report, through=None)


def test_legacy_second_precision_keys_stay_byte_identical(target):
    base_store(target, "amended")
    seed(target, history)
    legacy = {
        CAPTURE_SINCE: "2026-07-30T01:39:37Z",
        BACKFILL_THROUGH: "2026-07-30T01:39:30Z",
        EXECUTION_SINCE: "2026-07-30T01:39:36Z",
    }
    for key, value in legacy.items():
        set_key(target.engine, key, value)
    before = meta_rows(target.engine)
    for _ in range(2):
        report = run_migration(target)
        assert report.ok
        assert report.status(migrate.STEP_EXECUTION_SINCE) is Status.ALREADY_DONE
        assert report.status(migrate.STEP_BACKFILL) is Status.ALREADY_DONE
        assert meta_rows(target.engine) == before
        assert subagent_rows(target.engine) == {}


def test_backfill_through_is_republished_across_retries(target):
    base_store(target, "amended")
    seed(target, history)
    first = run_migration(target)
    state = assert_end_state(target, first, through=HISTORY_THROUGH)

    set_key(target.engine, CAPTURE_SINCE, None)  # only capture_since lost
    again = run_migration(target)
    found = keys(target)
    assert found[BACKFILL_THROUGH] == HISTORY_THROUGH != ""
    assert found[CAPTURE_SINCE] != state["keys"][CAPTURE_SINCE]
    assert again.backfill_rows == 0

    for key in (CAPTURE_SINCE, BACKFILL_THROUGH):  # a retry after an earlier partial insert
        set_key(target.engine, key, None)
    third = run_migration(target)
    assert third.backfill_rows == 0  # nothing new inserted ...
    assert keys(target)[BACKFILL_THROUGH] == HISTORY_THROUGH  # ... yet the true mark (point 1)
    assert subagent_rows(target.engine) == state["rows"]


# --- AC-24 points 3 and 4: order of statements, snapshot, precision ----------------------------


def test_max_before_insert_capture_after_it_all_in_one_transaction(target):
    base_store(target, "amended")
    seed(target, history)
    recorder = Recorder()
    report = run_migration(target, *recorder.listeners())
    assert report.ok
    events = recorder.events
    max_at = recorder.find(MAX_SELECT)[0]
    insert_at = recorder.find(BACKFILL_INSERT)[0]
    insert_done = recorder.find(BACKFILL_INSERT, kind="after")[0]
    capture_at = recorder.find(KEY_INSERT, params=CAPTURE_SINCE)[0]
    through_at = recorder.find(KEY_INSERT, params=BACKFILL_THROUGH)[0]
    assert max_at < insert_at < insert_done < capture_at < through_at
    assert "LIMIT" not in events[insert_at][1].upper()
    commits = [i for i, e in enumerate(events) if e[0] == "commit"]
    assert not [c for c in commits if max_at < c < through_at]  # one transaction
    capture = parse_key(keys(target)[CAPTURE_SINCE])
    ended = Instant.from_epoch_ns(events[insert_done][3])
    assert (capture.micro, capture.nanos) >= (ended.micro, ended.nanos)
    if target.dialect == "postgresql":
        assert recorder.isolation_at_insert == "repeatable read"
    else:
        begins = recorder.find(r"^BEGIN IMMEDIATE")
        begin = max(b for b in begins if b < max_at)
        assert not [c for c in commits if begin < c < max_at]


def test_message_committed_after_the_max_is_not_claimed(target):
    """AC-24d rev. 3: the MAX never names a message the INSERT did not see."""
    base_store(target, "amended")
    seed(target, history)
    outcome = {}

    def late_writer(conn, cursor, statement, parameters, context, executemany):
        if not re.search(MAX_SELECT, statement, re.I) or outcome:
            return
        metadata = json.dumps(subagent_metadata("tc-late"))
        if target.dialect == "sqlite":  # BEGIN IMMEDIATE excludes every other writer
            other = sqlite_driver.connect(target.url, timeout=0.1)
            try:
                other.execute(
                    "INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, "
                    "content, metadata, created_at, updated_at) VALUES "
                    "('late', 's1', 't1', 'u1', '', ?, ?, ?)",
                    (metadata, go_sqlite_text(at(30)), go_sqlite_text(at(30))),
                )
                other.commit()
                outcome["committed"] = True
            except sqlite_driver.OperationalError as exc:
                outcome["committed"] = False
                outcome["error"] = str(exc)
            finally:
                other.close()
        else:
            with target.engine.begin() as other:
                add_message(other, "late", subagent_metadata("tc-late"), created_at=at(30))
            outcome["committed"] = True

    report = run_migration(target, ("after_cursor_execute", late_writer))
    assert report.ok, report.render()
    assert keys(target)[BACKFILL_THROUGH] == HISTORY_THROUGH
    assert "late" not in subagent_rows(target.engine)
    if target.dialect == "sqlite":
        assert outcome == {"committed": False, "error": "database is locked"}
    else:
        assert outcome == {"committed": True}


def test_written_keys_are_rfc3339_nano(target, monkeypatch):
    base_store(target, "amended")
    seed(
        target,
        lambda c: (
            add_session(c),
            add_message(c, "m1", subagent_metadata("tc-1"), created_at=at(micros=-5)),  # …271230
        ),
    )
    fixed = Instant.from_epoch_ns(1_785_375_577_123_456_789)
    for step_module in (schema_steps, backfill_step):  # execution_since and capture_since
        monkeypatch.setattr(step_module, "now_instant", lambda: fixed)
    report = run_migration(target)
    assert report.ok
    found = keys(target)
    assert found[CAPTURE_SINCE] == found[EXECUTION_SINCE] == fixed.rfc3339nano()
    assert found[CAPTURE_SINCE].endswith(".123456789Z")
    assert found[BACKFILL_THROUGH] == "2026-07-30T01:39:37.27123Z"  # Go trims trailing zeros
    for value in found.values():
        assert RFC3339NANO.fullmatch(value)
        assert parse_key(value).rfc3339nano() == value


def test_backfill_through_of_an_early_year_is_a_well_formed_key(target):
    """A history whose newest message lies before year 1000 (in range, CONTRACT §1) publishes
    a key with its year in four digits, which reads back as itself (AC-24)."""
    base_store(target, "amended")
    seed(
        target,
        lambda c: (
            add_session(c),
            add_message(
                c, "m1", subagent_metadata("tc-1"), created_at="0999-12-31 23:59:59.5+00:00"
            ),
        ),
    )
    assert run_migration(target).ok
    through = keys(target)[BACKFILL_THROUGH]
    assert through == "0999-12-31T23:59:59.5Z"
    assert parse_key(through).rfc3339nano() == through


def test_backfill_through_keeps_every_digit_of_a_nine_digit_column(sqlite_target):
    """Upstream's SQLite columns carry up to 9 fraction digits (CONTRACT §1): the published
    high-water mark is the true MAX, not its microsecond (seed point 1)."""
    base_store(sqlite_target, "amended")
    seed(
        sqlite_target,
        lambda c: (
            add_session(c),
            add_message(
                c, "m1", subagent_metadata("tc-1"), created_at="2026-07-30 01:39:16.813443524+00:00"
            ),
            add_message(
                c, "m2", subagent_metadata("tc-2"), created_at="2026-07-30 01:39:16.813443+00:00"
            ),
        ),
    )
    assert run_migration(sqlite_target).ok
    assert keys(sqlite_target)[BACKFILL_THROUGH] == "2026-07-30T01:39:16.813443524Z"


def test_unpatched_keys_round_trip(target):
    base_store(target, None)
    assert run_migration(target).ok
    found = keys(target)
    for key in (CAPTURE_SINCE, EXECUTION_SINCE):
        assert parse_key(found[key]).rfc3339nano() == found[key]


def test_backfill_through_is_utc_in_any_session_time_zone(target):
    base_store(target, "amended")
    seed(target, history)
    url = target.url
    if target.dialect == "postgresql":
        zoned = with_pg_option(make_url(url), "-cTimeZone=Asia/Kolkata")
        url = zoned.render_as_string(hide_password=False)
    store = open_store(url, read_only=False)
    try:
        report = migrate.run(store)
    finally:
        store.dispose()
    assert report.ok
    assert keys(target)[BACKFILL_THROUGH] == HISTORY_THROUGH


# --- CONTRACT §4: column mapping ----------------------------------------------------------------


def test_column_mapping(target):
    base_store(target, "amended")

    def build(conn):
        add_session(conn, "s1", "t1", turns=("u1", ""))
        metadata = subagent_metadata(
            "tc-a",
            status="in_progress",
            agent_status="completed",
            subagent_type="general-purpose",
            description="look around",
            agent_id="ag-1",
            child_session_id="child-1",
            model="opus",
            is_async=False,
            total_tokens=1200,
            tool_use_count=3,
            duration_ms=4500,
        )
        metadata["turn_id"] = "not-this-one"  # turn_id comes from the message's column
        add_message(conn, "ma", metadata, created_at=at(1), updated_at=at(2))
        add_message(
            conn,
            "mb",
            subagent_metadata(
                "tc-b", status="completed", agent_status="async_launched", is_async=True
            ),
            turn_id="",
            created_at=at(3),
            updated_at=at(4),
        )
        add_message(
            conn,
            "mc",
            subagent_metadata("tc-c", status="failed", agent_status=None),
            created_at=at(5),
            updated_at=at(6),
        )
        add_message(
            conn,
            "md",
            subagent_metadata("tc-d", status=None, agent_status="started"),
            created_at=at(7),
            updated_at=at(8),
        )

    seed(target, build)
    assert run_migration(target).ok
    rows = subagent_rows(target.engine)
    a, b, c, d = rows["ma"], rows["mb"], rows["mc"], rows["md"]
    assert a == {
        "id": "ma",
        "task_session_id": "s1",
        "task_id": "t1",
        "turn_id": "u1",
        "tool_call_id": "tc-a",
        "agent_execution_id": "unknown",
        "parent_tool_call_id": None,
        "subagent_type": "general-purpose",
        "description": "look around",
        "agent_id": "ag-1",
        "child_session_id": "child-1",
        "model": "opus",
        "agent_status": "completed",
        "tool_status": "in_progress",
        "is_async": 0,
        "total_tokens": 1200,
        "tool_use_count": 3,
        "duration_ms": 4500,
        "source": "backfill",
        "observed_at": stored(target, at(1)),
        "settled_at": None,
        "updated_at": stored(target, at(2)),
    }
    assert (b["tool_status"], b["agent_status"], b["is_async"]) == (
        "completed",
        "async_launched",
        1,
    )
    assert b["turn_id"] is None
    assert b["settled_at"] == b["updated_at"] == stored(target, at(4))
    assert (c["tool_status"], c["agent_status"], c["settled_at"]) == (
        "failed",
        None,
        stored(target, at(6)),
    )
    assert (d["tool_status"], d["agent_status"], d["settled_at"]) == (None, "started", None)


def test_nested_parent_tool_call_id(target):
    base_store(target, "amended")
    seed(
        target,
        lambda c: (
            add_session(c),
            add_message(c, "parent", subagent_metadata("tc-parent"), created_at=at(1)),
            add_message(
                c,
                "child",
                subagent_metadata("tc-child", parent_tool_call_id="tc-parent"),
                created_at=at(2),
            ),
        ),
    )
    assert run_migration(target).ok
    rows = subagent_rows(target.engine)
    assert rows["child"]["parent_tool_call_id"] == "tc-parent"
    assert rows["parent"]["parent_tool_call_id"] is None


def test_newest_message_then_greatest_id_supplies_the_row(target):
    """AC-21b, with SQLite text shapes that a raw string ordering gets wrong."""
    base_store(target, "amended")
    sqlite = target.dialect == "sqlite"

    def when(value: datetime, text: str):
        return text if sqlite else value

    def build(conn):
        add_session(conn, "s1", "t1")
        add_session(conn, "s2", "t2", turns=("u2",))
        for message_id, created in (
            ("m-a", at(5)),
            # 'T' sorts after ' ': as raw text this earlier instant would look newest
            ("m-d", when(at(6), "2026-07-30T01:39:43.271235Z")),
            # the newest instant twice, in two shapes; the greater id wins the tie
            ("m-b", when(at(7), "2026-07-30 01:39:44.271235")),
            ("m-c", at(7)),
        ):
            add_message(
                conn,
                message_id,
                subagent_metadata("tc-x", description=message_id),
                created_at=created,
            )
        add_message(
            conn,
            "m-other",
            subagent_metadata("tc-x", description="m-other"),
            session_id="s2",
            task_id="t2",
            turn_id="u2",
            created_at=at(1),
        )

    seed(target, build)
    report = run_migration(target)
    assert report.ok
    rows = subagent_rows(target.engine)
    assert set(rows) == {"m-c", "m-other"}
    assert rows["m-c"]["description"] == "m-c"
    assert keys(target)[BACKFILL_THROUGH] == rfc(at(7))


@pytest.mark.parametrize(
    "case",
    [
        "task_id_empty",
        "task_id_null",
        "session_id_empty",
        "tool_call_id_missing",
        "tool_call_id_empty",
        "tool_call_id_not_text",
        "kind_other",
    ],
)
def test_messages_without_identity_are_skipped(target, case):
    base_store(target, "amended")

    def build(conn):
        add_session(conn, "s1", "t1")
        add_session(conn, "", "t1", turns=("u-empty",))
        add_message(conn, "good", subagent_metadata("tc-good"), created_at=at(1))
        metadata = subagent_metadata("tc-bad")
        kwargs = {}
        if case == "task_id_empty":
            kwargs["task_id"] = ""
        elif case == "task_id_null":
            kwargs["task_id"] = None
        elif case == "session_id_empty":
            kwargs.update(session_id="", turn_id="u-empty")
        elif case == "tool_call_id_missing":
            del metadata["tool_call_id"]
        elif case == "tool_call_id_empty":
            metadata["tool_call_id"] = ""
        elif case == "tool_call_id_not_text":
            metadata["tool_call_id"] = 5
        else:
            metadata["normalized"]["kind"] = "tool_call"
        add_message(conn, "bad", metadata, created_at=at(9), **kwargs)

    seed(target, build)
    report = run_migration(target)
    assert report.status(migrate.STEP_BACKFILL) is Status.DONE
    assert set(subagent_rows(target.engine)) == {"good"}
    assert keys(target)[BACKFILL_THROUGH] == rfc(at(1))  # the skipped message is not the MAX


def test_metric_and_empty_text_rules(target):
    base_store(target, "amended")

    def build(conn):
        add_session(conn)
        add_message(
            conn,
            "async",
            subagent_metadata(
                "tc-1",
                agent_status="async_launched",
                total_tokens=100,
                tool_use_count=3,
                duration_ms=50,
            ),
            created_at=at(1),
        )
        add_message(
            conn,
            "zero",
            subagent_metadata("tc-2", total_tokens=0, tool_use_count=0, duration_ms=0),
            created_at=at(2),
        )
        add_message(
            conn,
            "negative",
            subagent_metadata("tc-3", total_tokens=-5, tool_use_count=-1, duration_ms=-3),
            created_at=at(3),
        )
        add_message(conn, "absent", subagent_metadata("tc-4"), created_at=at(4))
        add_message(
            conn,
            "empty",
            subagent_metadata(
                "tc-5",
                status="",
                agent_status="",
                parent_tool_call_id="",
                subagent_type="",
                description="",
                agent_id="",
                child_session_id="",
                model="",
            ),
            created_at=at(5),
        )

    seed(target, build)
    assert run_migration(target).ok
    rows = subagent_rows(target.engine)

    def metrics(row_id):
        row = rows[row_id]
        return row["total_tokens"], row["tool_use_count"], row["duration_ms"]

    assert metrics("async") == (None, None, None)
    assert metrics("zero") == (None, 0, None)
    assert metrics("negative") == (None, None, None)
    assert metrics("absent") == (None, None, None)
    assert rows["absent"]["is_async"] == 0
    empty = rows["empty"]
    assert all(empty[c] is None for c in schema.NULLABLE_TEXT_COLUMNS if c != "turn_id"), empty


def test_bad_metadata_does_not_abort_the_backfill(target):
    base_store(target, "amended")

    def build(conn):
        add_session(conn)
        for i, raw in enumerate([None, "", "null", "[]", '"text"', '{"normalized": 5}']):
            add_message(conn, f"bad-{i}", raw, created_at=at(10 + i))
        add_message(conn, "good", subagent_metadata("tc-good"), created_at=at(1))

    seed(target, build)
    report = run_migration(target)
    assert report.status(migrate.STEP_BACKFILL) is Status.DONE, report.render()
    assert set(subagent_rows(target.engine)) == {"good"}


def test_existing_live_rows_win(target):
    base_store(target, "amended")
    real = str(uuid.uuid4())

    def build(conn):
        history(conn)
        add_subagent_row(
            conn,
            id="live-unknown",
            tool_call_id="tc-1",
            description="live",
            observed_at=at(100),
            updated_at=at(100),
        )
        add_subagent_row(
            conn,
            id="live-real",
            tool_call_id="tc-2",
            agent_execution_id=real,
            observed_at=at(100),
            updated_at=at(100),
        )

    seed(target, build)
    before = subagent_rows(target.engine)
    report = run_migration(target)
    assert report.backfill_rows == 1
    rows = subagent_rows(target.engine)
    assert rows["live-unknown"] == before["live-unknown"]  # AC-22: the live row wins
    assert "m1" not in rows
    assert rows["live-real"] == before["live-real"]
    assert rows["m2"]["agent_execution_id"] == "unknown"  # accepted beside the real id


# --- concurrency and crashes ------------------------------------------------------------------


_CONCURRENT_CHILD = r"""
import json, os, sys, time
from kandev_dq.migration import runner as migrate
from kandev_dq.store.access import open_store
from kandev_dq.store.reference import resolve_url, shown_store
url, go = sys.argv[1], sys.argv[2]
store = open_store(url, read_only=False)
while not os.path.exists(go):
    time.sleep(0.002)
report = migrate.run(store)
print(json.dumps(report.to_dict()))
"""


def test_two_concurrent_runs_end_like_one(target, tmp_path):
    base_store(target, "pre_amendment")
    seed(target, _old_rows(target))
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CONCURRENT_CHILD, target.url, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    time.sleep(0.5)
    go.touch()
    reports = []
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["ok"] for r in reports), reports
    for step in (migrate.STEP_AMEND, migrate.STEP_EXECUTION_SINCE, migrate.STEP_BACKFILL):
        statuses = sorted(
            next(s["status"] for s in r["steps"] if s["name"] == step) for r in reports
        )
        assert statuses == ["already_done", "done"], (step, reports)
    state = assert_end_state(
        target, migrate.MigrationReport(target.dialect), through=HISTORY_THROUGH
    )
    assert set(state["rows"]) == {"old-1", "old-2", "m2"}


def test_a_run_waits_for_the_lock_holder(target, caplog):
    base_store(target, "amended")
    seed(target, history)
    holder_store = open_store(target.url, read_only=False)
    holder = holder_store.engine.connect()
    if target.dialect == "postgresql":
        key = transactions.advisory_lock_key(holder)
        holder.execute(sa.select(sa.func.pg_advisory_lock(sa.bindparam("k", key, sa.BigInteger))))
        holder.commit()
    else:
        holder.exec_driver_sql("BEGIN IMMEDIATE")
    result = {}
    with caplog.at_level(logging.INFO, logger="kandev_dq.migration"):
        thread = threading.Thread(target=lambda: result.update(report=run_migration(target)))
        thread.start()
        deadline = time.monotonic() + 20
        while transactions.WAITING_MESSAGE not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)
        waited = transactions.WAITING_MESSAGE in caplog.text
        assert thread.is_alive()  # blocked behind the holder
        if target.dialect == "postgresql":
            holder.execute(
                sa.select(sa.func.pg_advisory_unlock(sa.bindparam("k", key, sa.BigInteger)))
            )
            holder.commit()
        else:
            holder.rollback()
        thread.join(60)
    holder.close()
    holder_store.dispose()
    assert waited
    assert_end_state(target, result["report"], through=HISTORY_THROUGH)


_STALLING_CHILD = r"""
import re, sys, time
import sqlalchemy as sa
from kandev_dq.migration import runner as migrate
from kandev_dq.store.access import open_store
from kandev_dq.store.reference import resolve_url, shown_store
url, marker = sys.argv[1], sys.argv[2]
store = open_store(url, read_only=False)

def stall(conn, cursor, statement, parameters, context, executemany):
    if re.search(r"INSERT INTO task_session_subagents \(", statement):
        open(marker, "w").close()
        time.sleep(120)

sa.event.listen(store.engine, "after_cursor_execute", stall)
migrate.run(store)
"""


def test_process_killed_mid_backfill_leaves_no_key_and_no_row(target, tmp_path):
    base_store(target, "amended")
    seed(target, history)
    marker = tmp_path / "inserted"
    child = subprocess.Popen(
        [sys.executable, "-c", _STALLING_CHILD, target.url, str(marker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.02)
        assert marker.exists(), child.stderr.read() if child.poll() is not None else "timeout"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
        child.stderr.close()
    found = keys(target)
    assert found[CAPTURE_SINCE] is None and found[BACKFILL_THROUGH] is None
    assert subagent_rows(target.engine) == {}
    retry = run_migration(target)
    state = assert_end_state(target, retry, through=HISTORY_THROUGH)
    assert set(state["rows"]) == {"m1", "m2"}


# --- dry run ----------------------------------------------------------------------------------


def _everything(target) -> dict:
    """Every table's rows and the schema, for proving that nothing was written."""
    inspector = sa.inspect(target.engine)
    dump = {"shape": observe(target)}
    with target.engine.connect() as conn:
        for name in sorted(inspector.get_table_names()):
            rows = conn.execute(sa.text(f'SELECT * FROM "{name}"')).all()
            dump[name] = sorted(map(repr, rows))
            dump[f"{name}.columns"] = [c["name"] for c in inspector.get_columns(name)]
        if target.dialect == "sqlite":
            dump["sqlite_master"] = conn.execute(
                sa.text("SELECT type, name, sql FROM sqlite_master ORDER BY name")
            ).all()
    return dump


@pytest.mark.parametrize("read_only", [False, True])
def test_dry_run_writes_nothing_and_predicts_the_run(target, read_only):
    base_store(target, "pre_amendment")
    seed(target, _old_rows(target))
    seed(target, lambda c: add_message(c, "m1-older", subagent_metadata("tc-1"), created_at=at(-5)))
    before = _everything(target)
    with opened(target, read_only=read_only) as store:
        plan = migrate.run(store, dry_run=True)
    assert _everything(target) == before
    assert plan.ok and plan.dry_run
    assert plan.shape.describe() == "pre-amendment"
    assert plan.keys == dict.fromkeys((CAPTURE_SINCE, BACKFILL_THROUGH, EXECUTION_SINCE))
    assert plan.qualifying_messages == 3  # m1, m1-older, m2
    assert plan.backfill_rows == 1  # tc-1 is held by old-2; only m2's key is new
    assert {s.name: s.status for s in plan.steps} == {
        migrate.STEP_META: Status.ALREADY_DONE,
        migrate.STEP_CREATE: Status.ALREADY_DONE,
        migrate.STEP_AMEND: Status.WOULD_RUN,
        migrate.STEP_EXECUTION_SINCE: Status.WOULD_RUN,
        migrate.STEP_BACKFILL: Status.WOULD_RUN,
    }
    assert "pre-amendment" in plan.render()
    real = run_migration(target)
    assert real.backfill_rows == plan.backfill_rows
    after = run_migration(target, dry_run=True)
    assert [s.status for s in after.steps] == [Status.ALREADY_DONE] * 5
    assert after.backfill_rows == 0


# --- the command: which store, and a store that cannot take a write ---------------------------


def _migrate_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from kandev_dq.cli import main; main()", "migrate", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry run"])
def test_migrate_names_the_store_first(target, dry_run):
    target.create_base(subagents=None)
    done = _migrate_cli("--store", target.url, *(["--dry-run"] if dry_run else []))
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    verb = "dry run on" if dry_run else "migrating"
    assert first == f"{verb} {shown_store(resolve_url(target.url))} ({target.dialect})"


def test_migrate_refuses_a_read_only_server_in_one_line(pg_target):
    pg_target.create_base(subagents=None)
    from kandev_dq.lab.scenarios.registry import with_pg_options

    read_only = with_pg_options(pg_target.url, "-c default_transaction_read_only=on")
    done = _migrate_cli("--store", read_only)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert (
        line.startswith("kandev-dq: error: cannot write to postgresql://") and "read-only" in line
    )
    assert "Traceback" not in done.stderr


def test_a_read_only_sqlite_file_is_refused_before_any_step(sqlite_target):
    from kandev_dq.errors import StoreError
    from kandev_dq.store.access import require_writable

    sqlite_target.create_base(subagents=None)
    store = open_store(sqlite_target.url, read_only=True)  # as a file without write permission
    try:
        with pytest.raises(StoreError, match="the file or its folder is read-only"):
            require_writable(store)
    finally:
        store.dispose()


def test_migrate_refuses_a_locked_sqlite_store_in_one_line(sqlite_target):
    sqlite_target.create_base(subagents=None)
    holder = sqlite_driver.connect(sqlite_target.url, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process mid-write
        done = _migrate_cli("--store", sqlite_target.url)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "cannot write to sqlite:///" in line and "locked" in line
