"""Named stores that prove the suite's verdicts: a fault corpus and its detection matrix.

Every scenario builds a store on an empty database from the same **healthy baseline** — a small
Kandev store that predates the feature (sessions with subagent messages of every shape, AC-21b
duplicates, legacy ``''``/``'null'``/NULL metadata, messages AC-2 skips), migrated by the real
runner (:func:`kandev_dq.migration.runner.run`), then written to by a healthy live writer — plus
**one** mutation: the defect a faulty writer, migration or consumer leaves behind (a *fault*),
or a state that looks wrong but is correct (a *healthy* scenario).

A scenario declares what it proves: the AC ids it violates (none for a healthy one) and the
severity it must be caught at. A healthy scenario may *disclose* warning or info findings, and
only those it declares. Some faults need two check runs (a key rewritten or deleted between
them: the key ledger catches it), so a scenario may carry a ``between_runs`` mutation; and a
scenario may need a check-time condition, expressed as a transform of the store URL (a
PostgreSQL session in a non-UTC time zone).

``kandev-dq scenarios list`` and ``kandev-dq scenarios build NAME --store URL`` reproduce any of
them; :func:`detection_matrix` runs every scenario on both dialects through the ``pre_release``
checkpoint and renders ``docs/detection-matrix.md``::

    python -m kandev_dq.lab.scenarios matrix --postgres "$KANDEV_TEST_POSTGRES_URL" \\
        --out docs/detection-matrix.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    Instant,
    MalformedKey,
    go_sqlite_text,
    parse_key,
    parse_stored,
)
from kandev_dq.errors import KandevDqError
from kandev_dq.lab import sample
from kandev_dq.lab.storebuilder import StoreBuilder, subagent_metadata
from kandev_dq.migration import runner as migrate
from kandev_dq.sql.dialect import utc_instant

SEVERITIES = ("error", "warning", "info")
CHECKPOINT = "pre_release"
DIALECTS = ("sqlite", "postgresql")
DIALECT_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
#: Random subagents the healthy live writer records after capture_since (sample module).
LIVE_SUBAGENTS = 8
NON_UTC_ZONE = "America/New_York"

_US = timedelta(microseconds=1)
_MS = timedelta(milliseconds=1)
_S = timedelta(seconds=1)
_NAMESPACE = uuid.UUID("5b0d7c6e-0d7f-4f8e-9a53-6b1f3c2a9e41")


def _uid(name: str) -> str:
    """A stable UUID for a named row: the same store on every build and both dialects."""
    return str(uuid.uuid5(_NAMESPACE, name))


def _tc(name: str) -> str:
    """A tool_call_id shaped like an agent's (``toolu_01`` + 22 characters)."""
    return "toolu_01" + name.ljust(22, "0")[:22]


# --- the baseline's identities -----------------------------------------------------------------

S1, S2, S3, SL = _uid("session-1"), _uid("session-2"), _uid("session-3"), _uid("session-live")
T1, T2, TL = _uid("task-1"), _uid("task-2"), _uid("task-live")
#: The execution a healthy live writer reports for the known live subagents (a real UUID).
EXECUTION_1 = _uid("execution-1")
EXECUTION_2 = _uid("execution-2")

TC_ASYNC = _tc("HistAsyncLaunch")
TC_COMPLETED = _tc("HistCompleted")
TC_STARTED = _tc("HistStartedOpenCode")
TC_NESTED = _tc("HistNestedChild")
TC_DUP = _tc("HistDuplicated")
TC_NO_TASK = _tc("HistNoTaskId")
TC_FAILED = _tc("HistLaunchFailed")
TC_TIE = _tc("HistTiedCreatedAt")
TC_NO_TURN = _tc("HistEmptyTurn")
TC_LAST = _tc("HistNewest")
TC_LIVE_ASYNC = _tc("LiveAsyncLaunch")
TC_LIVE_COMPLETED = _tc("LiveCompleted")
TC_LIVE_RUNNING = _tc("LiveRunning")

M_DUP_OLD, M_DUP_NEW = _uid("message-dup-old"), _uid("message-dup-new")
M_LAST = _uid("message-newest")


# --- time --------------------------------------------------------------------------------------

_anchor_cache: list[datetime] = []


def anchor() -> datetime:
    """Where the baseline's history starts: three days before the first build of the process.

    Relative to the clock (the runner samples capture_since from it), whole-second, and fixed
    for the process so that every scenario of one run shares its history.
    """
    if not _anchor_cache:
        _anchor_cache.append(datetime.now(UTC).replace(microsecond=0) - timedelta(days=3))
    return _anchor_cache[0]


def _at(seconds: float, micros: int = 0) -> datetime:
    return anchor() + timedelta(seconds=seconds, microseconds=micros)


def _rfc3339_seconds(value: datetime) -> str:
    """What the pre-amendment writer's helpers produce (``time.RFC3339``, ``rfc3339Timestamp``):
    the instant truncated to the second."""
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def _instant(value: datetime) -> Instant:
    return Instant.from_datetime(value)


def _stored(conn: sa.Connection, value: datetime | str) -> datetime | str:
    """A timestamp as the dialect stores it: text verbatim on SQLite, a datetime elsewhere."""
    if conn.dialect.name == "sqlite" or isinstance(value, datetime):
        return value
    return parse_stored(value)


# --- writing -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _transaction(conn: sa.Connection) -> Iterator[sa.Connection]:
    """One write transaction on ``conn`` (an explicit BEGIN on autocommit SQLite)."""
    if not conn.in_transaction():
        conn.begin()
    raw = conn.connection.dbapi_connection
    if conn.dialect.name == "sqlite" and not raw.in_transaction:  # type: ignore[union-attr]
        conn.exec_driver_sql("BEGIN")
    try:
        yield conn
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


@contextlib.contextmanager
def _writing(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One write transaction on a connection of its own."""
    with engine.connect() as conn, _transaction(conn):
        yield conn


def store_url(engine: sa.Engine) -> str:
    """The URL of the database ``engine`` writes to (a SQLite engine may be creator-built)."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("PRAGMA database_list").all()
        path = next(row[2] for row in rows if row[1] == "main")
        return f"sqlite:///{path}"
    return engine.url.render_as_string(hide_password=False)


def _message(
    mid: str,
    session: str,
    task: str,
    turn: str,
    created: datetime | str,
    metadata: dict | str | None,
    *,
    updated: datetime | str | None = None,
    kind: str = "tool_call",
    author: str = "agent",
    content: str = "",
) -> dict[str, Any]:
    raw = json.dumps(metadata) if isinstance(metadata, dict) else metadata
    if not content and isinstance(metadata, dict):
        task_doc = metadata.get("normalized", {}).get("subagent_task", {})
        content = f"Task({task_doc.get('subagent_type') or 'agent'}): " + (
            task_doc.get("description") or "subagent"
        )
    return {
        "id": mid,
        "task_session_id": session,
        "task_id": task,
        "turn_id": turn,
        "author_type": author,
        "author_id": "",
        "content": content or "…",
        "requests_input": 0,
        "type": kind,
        "metadata": raw,
        "created_at": created,
        "updated_at": updated if updated is not None else created,
    }


def _subagent(
    mid: str,
    session: str,
    task: str,
    turn: str,
    created: datetime | str,
    tool_call_id: str | None,
    *,
    tool_status: str | None,
    updated: datetime | str | None = None,
    parent: str | None = None,
    **payload: Any,
) -> dict[str, Any]:
    """A subagent message: ACP fields on top, the payload under ``normalized.subagent_task``."""
    meta = subagent_metadata(
        tool_call_id, tool_status=tool_status, parent_tool_call_id=parent, **payload
    )
    return _message(mid, session, task, turn, created, meta, updated=updated)


def _ordinary(mid: str, session: str, task: str, turn: str, created: datetime, metadata) -> dict:
    return _message(
        mid, session, task, turn, created, metadata, kind="message", content="Looking into it."
    )


def _session(sid: str, task: str, started: datetime) -> dict[str, Any]:
    return {"id": sid, "task_id": task, "started_at": started, "updated_at": started}


def _turn(tid: str, session: str, task: str, started: datetime) -> dict[str, Any]:
    return {
        "id": tid,
        "task_session_id": session,
        "task_id": task,
        "started_at": started,
        "completed_at": started + timedelta(minutes=5),
        "metadata": "{}",
        "created_at": started,
        "updated_at": started + timedelta(minutes=5),
    }


def _insert(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    stamps = {c.name for c in table.columns if isinstance(c.type, schema.StoredTimestamp)}
    conn.execute(
        table.insert(),
        [
            {k: (_stored(conn, v) if k in stamps and v is not None else v) for k, v in row.items()}
            for row in rows
        ],
    )


def _history(dialect: str) -> tuple[list[dict], list[dict], list[dict]]:
    """Sessions, turns and messages a store holds before the feature: every subagent shape.

    Three sessions (two of one task), subagent messages that are async_launched (reporting
    zeros), completed with metrics (a reported tool_use_count of 0), started (OpenCode: a
    child session, no metrics), nested under another, launched and failed without a status,
    an AC-21b duplicate and an AC-21b tie on created_at, one on a turn whose id is ``''``, two
    that AC-2 skips (no tool_call_id; no task id), and ordinary messages whose metadata is
    ``''``, ``'null'`` and NULL (AC-23b). The newest subagent message is stored in the
    ``T…Z`` text form Python writes on SQLite.
    """
    a = anchor()
    u1, u2, u3, u4 = (_uid(f"turn-{n}") for n in range(1, 5))
    sessions = [_session(S1, T1, a), _session(S2, T2, _at(3500)), _session(S3, T1, _at(7100))]
    turns = [
        _turn(u1, S1, T1, _at(0.5)),
        _turn(u2, S1, T1, _at(120)),
        _turn(u3, S2, T2, _at(3600)),
        _turn("", S3, T1, _at(7199)),  # legacy: messages with an empty turn_id
        _turn(u4, S3, T1, _at(7300)),
    ]
    sonnet, opus = "claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805"
    newest = _at(7300, 654321)
    newest_stored: datetime | str = (
        newest.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if dialect == "sqlite" else newest
    )
    # fmt: off
    messages = [
        _message(_uid("m-prompt-1"), S1, T1, u1, _at(0.5), "{}", kind="message", author="user"),
        _subagent(
            _uid("m-async"), S1, T1, u1, _at(3, 125), TC_ASYNC,
            tool_status="completed", updated=_at(3, 90125),
            subagent_type="Explore", description="Map the session store layout",
            status="async_launched", agent_id="a1b2c3d4", model=sonnet, is_async=True,
            total_tokens=0, tool_use_count=0, duration_ms=0,
        ),
        _subagent(
            _uid("m-completed"), S1, T1, u1, _at(3.2), TC_COMPLETED,
            tool_status="completed", updated=_at(51.5),
            subagent_type="general-purpose", description="Review the migration for lock order",
            status="completed", agent_id="9f8e7d6c", model=opus, is_async=False,
            total_tokens=15230, tool_use_count=0, duration_ms=48211,
        ),
        _message(
            _uid("m-read"), S1, T1, u1, _at(4.75),
            {"tool_call_id": _tc("ReadFile"), "status": "completed", "title": "read_file",
             "normalized": {"kind": "read_file", "read_file": {"path": "internal/db/db.go"}}},
        ),
        _subagent(
            _uid("m-started"), S1, T1, u2, _at(120.5), TC_STARTED,
            tool_status="in_progress", updated=_at(120.6),
            subagent_type="explore", description="Find every caller of the message repository",
            status="started", child_session_id="ses_3kq8Zr2mWbX9yT4aLp0vNc1dEf",
            model="openai/gpt-5",
        ),
        _subagent(
            _uid("m-nested"), S1, T1, u2, _at(121), TC_NESTED,
            tool_status="in_progress", updated=_at(121.05), parent=TC_COMPLETED,
            subagent_type="Plan", description="Plan the reconnect change",
            status="async_launched", agent_id="5e4d3c2b", model=sonnet, is_async=True,
        ),
        _ordinary(_uid("m-empty-meta"), S1, T1, u2, _at(122.25), ""),
        _message(_uid("m-prompt-2"), S2, T2, u3, _at(3600), "{}", kind="message", author="user"),
        _subagent(  # AC-21b: the older message of one subagent loses
            M_DUP_OLD, S2, T2, u3, _at(3600.25), TC_DUP,
            tool_status="in_progress", updated=_at(3600.3),
            subagent_type="general-purpose", description="Run the integration suite",
            status="async_launched", agent_id="77aa88bb", model=sonnet, is_async=True,
        ),
        _subagent(  # ... and the newer one supplies the row
            M_DUP_NEW, S2, T2, u3, _at(3605.5), TC_DUP,
            tool_status="completed", updated=_at(3640),
            subagent_type="general-purpose", description="Run the integration suite",
            status="completed", agent_id="77aa88bb", model=sonnet, is_async=True,
            total_tokens=9120, tool_use_count=4, duration_ms=30500,
        ),
        _ordinary(_uid("m-null-text"), S2, T2, u3, _at(3606), "null"),
        _ordinary(_uid("m-sql-null"), S2, T2, u3, _at(3607), None),
        _subagent(  # AC-2 / AC-21a: no tool_call_id, skipped
            _uid("m-no-tool"), S2, T2, u3, _at(3608), None,
            tool_status="completed", status="completed", description="No tool call id",
        ),
        _subagent(  # AC-2 / AC-21a: no task id, skipped
            _uid("m-no-task"), S2, "", u3, _at(3609), TC_NO_TASK,
            tool_status="completed", status="completed", description="No task id",
        ),
        _subagent(  # the launching call failed before the child reported: no agent status
            _uid("m-failed"), S2, T2, u3, _at(3610), TC_FAILED,
            tool_status="failed", updated=_at(3612), model=sonnet,
            description="Audit error handling in the agent runner",
        ),
        _subagent(  # AC-21b: a tie on created_at, the greatest id wins
            _uid("m-tie-a"), S2, T2, u3, _at(3700, 1), TC_TIE,
            tool_status="failed", description="Trace how turns close on cancel",
        ),
        _subagent(
            _uid("m-tie-b"), S2, T2, u3, _at(3700, 1), TC_TIE,
            tool_status="cancelled", description="Trace how turns close on cancel",
        ),
        _subagent(  # turn_id '' is stored as NULL (AC-2a); a whole-second created_at
            _uid("m-no-turn"), S3, T1, "", _at(7200), TC_NO_TURN,
            tool_status="completed", updated=_at(7210),
            subagent_type="code-reviewer", description="Check the frontend for stale props",
            status="completed", agent_id="0a0b0c0d", model=opus,
            total_tokens=2210, tool_use_count=2, duration_ms=8000,
        ),
        _subagent(  # the newest subagent message: backfill_through is its created_at
            M_LAST, S3, T1, u4, newest_stored, TC_LAST,
            tool_status="completed", updated=_at(7390),
            subagent_type="test-runner", description="Draft tests for the projection",
            status="completed", agent_id="1c2d3e4f", model=sonnet,
            total_tokens=40110, tool_use_count=12, duration_ms=88400,
        ),
    ]
    # fmt: on
    return sessions, turns, messages


def _healthy_row(
    message: dict[str, Any], execution: str | None, observed: datetime
) -> dict[str, Any]:
    """The ``task_session_subagents`` row a healthy live writer leaves (CONTRACT §2)."""
    meta = json.loads(message["metadata"])
    task = meta["normalized"]["subagent_task"]

    def text(value) -> str | None:
        return value if isinstance(value, str) and value else None

    def metric(name: str, zero_is_null: bool) -> int | None:
        value = task.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return None
        return None if value == 0 and zero_is_null else value

    agent_status, tool_status = text(task.get("status")), text(meta.get("status"))
    launched = agent_status == "async_launched"
    settled = None
    if tool_status in schema.TERMINAL_TOOL_STATUSES:
        settled = max(observed, parse_stored(message["updated_at"]))
    row = {
        "id": _uid(f"row-{message['id']}-{execution}"),
        "task_session_id": message["task_session_id"],
        "task_id": message["task_id"],
        "turn_id": text(message["turn_id"]),
        "tool_call_id": meta["tool_call_id"],
        "parent_tool_call_id": text(meta.get("parent_tool_call_id")),
        **{k: text(task.get(k)) for k in ("subagent_type", "description", "agent_id")},
        **{k: text(task.get(k)) for k in ("child_session_id", "model")},
        "agent_status": agent_status,
        "tool_status": tool_status,
        "is_async": 1 if task.get("is_async") is True else 0,
        "total_tokens": None if launched else metric("total_tokens", True),
        "tool_use_count": None if launched else metric("tool_use_count", False),
        "duration_ms": None if launched else metric("duration_ms", True),
        "source": "live",
        "observed_at": observed,
        "settled_at": settled,
        "updated_at": settled if settled is not None else observed + _MS,
    }
    if execution is not None:
        row["agent_execution_id"] = execution
    return row


# --- reading back --------------------------------------------------------------------------------


def read_keys(engine: sa.Engine) -> dict[str, str | None]:
    with engine.connect() as conn:
        return migrate.read_keys(conn)


def _key_instant(engine: sa.Engine, key: str) -> Instant:
    value = read_keys(engine)[key]
    if not value:
        raise KandevDqError(f"the baseline has no usable {key} ({value!r})")
    return parse_key(value)


def _latest_message(engine: sa.Engine) -> datetime | None:
    m = schema.task_session_messages
    with engine.connect() as conn:
        value = conn.execute(sa.select(sa.func.max(utc_instant(m.c.created_at)))).scalar()
    return None if value is None else parse_stored(value)


def _next_free(engine: sa.Engine) -> datetime:
    """One second after the newest message and every key: where new live traffic goes."""
    candidates = [_latest_message(engine) or anchor()]
    keys = read_keys(engine)
    for key in (CAPTURE_SINCE, EXECUTION_SINCE):
        value = keys[key]
        if value:
            try:
                candidates.append(parse_key(value).bound())
            except MalformedKey:  # a defective key in a column's form is still an instant
                candidates.append(parse_stored(value))
    return max(candidates) + _S


# --- the baseline, step by step ---------------------------------------------------------------


def create(engine: sa.Engine, *, subagents: str | None = None) -> None:
    """Kandev's base tables (a store predating the feature), optionally the subagents table."""
    StoreBuilder(engine).create(subagents=subagents)


def write_history(engine: sa.Engine, *, subagents: bool = True) -> None:
    """The baseline's history in one transaction (see :func:`_history`)."""
    sessions, turns, messages = _history(engine.dialect.name)
    if not subagents:
        messages = [m for m in messages if "subagent_task" not in (m["metadata"] or "")]
    with _writing(engine) as conn:
        _insert(conn, schema.task_sessions, sessions)
        _insert(conn, schema.task_session_turns, turns)
        _insert(conn, schema.task_session_messages, messages)


_MIGRATION_FAULTS: dict[str, Callable[[str, Any], bool]] = {
    # The backfill's INSERT … SELECT fails (AC-24a: no key, retried next run).
    "backfill": lambda sql, params: (
        sql.lstrip().startswith(f"INSERT INTO {schema.SUBAGENTS}") and "SELECT" in sql
    ),
    # The execution_since write fails after the shape is in place (AC-33b self-heal case).
    "execution_since": lambda sql, params: (
        "INSERT INTO kandev_meta" in sql and EXECUTION_SINCE in repr(params)
    ),
    # The AC-33 upgrade of a pre-amendment table fails (AC-33a: the old table survives).
    "amend": lambda sql, params: (
        migrate.REBUILD_TABLE in sql or ("ALTER TABLE" in sql and "ADD COLUMN" in sql)
    ),
}


class _InjectedFault(Exception):
    """A statement failed on purpose, to reproduce a failed migration step."""


def run_migration(engine: sa.Engine, *, fail: str | None = None) -> migrate.MigrationReport:
    """The real runner on this store; ``fail`` names a step to make fail (a test seam)."""
    from kandev_dq.store.access import open_store

    store = open_store(store_url(engine), read_only=False)
    log = logging.getLogger(migrate.__name__)
    level = log.level
    try:
        if fail is not None:
            failing = _MIGRATION_FAULTS[fail]

            @sa.event.listens_for(store.engine, "before_cursor_execute")
            def _fail(conn, cursor, statement, parameters, context, executemany):
                if failing(statement, parameters):
                    raise _InjectedFault(f"{fail} failed")

            log.setLevel(logging.ERROR)  # the WARN of a failure we asked for is noise here
        report = migrate.run(store)
    finally:
        log.setLevel(level)
        store.dispose()
    if fail is None and not report.ok:
        raise KandevDqError("the baseline migration failed:\n" + report.render())
    return report


def write_known_live(
    engine: sa.Engine,
    start: datetime | None = None,
    *,
    step: timedelta = timedelta(milliseconds=500),
    execution: str = EXECUTION_1,
) -> None:
    """Three subagents a healthy live writer records in a session of their own: launched
    async (the frame reports zeros, the row holds NULLs), completed with metrics, and started
    (in progress, unsettled). Scenarios mutate these rows; their ids are fixed."""
    start = start or _next_free(engine)
    turn = _uid("turn-live")
    # fmt: off
    messages = [
        _subagent(
            _uid("m-live-async"), SL, TL, turn, start, TC_LIVE_ASYNC,
            tool_status="completed", updated=start + 80 * _MS,
            subagent_type="Explore", description="Investigate the slow diff endpoint",
            status="async_launched", agent_id="c0ffee01", model="claude-sonnet-4-5-20250929",
            is_async=True, total_tokens=0, tool_use_count=0, duration_ms=0,
        ),
        _subagent(
            _uid("m-live-completed"), SL, TL, turn, start + step, TC_LIVE_COMPLETED,
            tool_status="completed", updated=start + step + 61 * _S,
            subagent_type="general-purpose", description="Summarise the failing tests",
            status="completed", agent_id="c0ffee02", model="claude-opus-4-1-20250805",
            is_async=False, total_tokens=18342, tool_use_count=7, duration_ms=61250,
        ),
        _subagent(
            _uid("m-live-running"), SL, TL, turn, start + 2 * step, TC_LIVE_RUNNING,
            tool_status="in_progress", updated=start + 2 * step + 40 * _MS,
            subagent_type="explore", description="Search for flaky tests",
            status="started", child_session_id="ses_9Xc2Lm4Np6Qr8St0Uv2Wx4Yz6A",
            model="openai/gpt-5",
        ),
    ]
    # fmt: on
    rows = [_healthy_row(m, execution, m["created_at"] + 250 * _US) for m in messages]
    with _writing(engine) as conn:
        has_session = conn.execute(
            sa.select(sa.func.count()).where(schema.task_sessions.c.id == SL)
        ).scalar_one()
        if not has_session:
            _insert(conn, schema.task_sessions, [_session(SL, TL, start - _S)])
        _insert(conn, schema.task_session_turns, [_turn(turn, SL, TL, start - _MS)])
        _insert(conn, schema.task_session_messages, messages)
        _insert(conn, schema.subagents, rows)


def write_live_traffic(engine: sa.Engine, *, writer: str = "healthy") -> None:
    """Random live subagents after capture_since (:func:`kandev_dq.lab.sample.append_live_traffic`).

    Its ids and statuses vary from run to run; no scenario depends on them, and a healthy
    writer's rows are correct whatever they are.
    """
    sample.append_live_traffic(engine, count=LIVE_SUBAGENTS, seed=0, writer=writer)  # type: ignore[arg-type]


def baseline(
    engine: sa.Engine,
    *,
    after_migration: Callable[[sa.Engine], None] | None = None,
    writer: str = "healthy",
) -> None:
    """The healthy baseline: history, the real migration, known live rows, then live traffic.

    ``after_migration`` runs right after the migration (a defective key writer's work goes
    there, before any live traffic is placed after capture_since).
    """
    create(engine)
    write_history(engine)
    run_migration(engine)
    if after_migration is not None:
        after_migration(engine)
    write_known_live(engine)
    write_live_traffic(engine, writer=writer)


# --- mutations ---------------------------------------------------------------------------------


def set_key(engine: sa.Engine, key: str, value: str | None) -> None:
    """Rewrite (or, with None, delete) an activation key, as a defective writer does."""
    StoreBuilder(engine).set_key(key, value)


def update_rows(engine: sa.Engine, tool_call_id: str | None, source: str, /, **values: Any) -> None:
    """Change rows of one source (one tool call, or all with ``tool_call_id=None``)."""
    t = schema.subagents
    where = t.c.source == source
    if tool_call_id is not None:
        where = sa.and_(where, t.c.tool_call_id == tool_call_id)
    with _writing(engine) as conn:
        stamps = {c.name for c in t.columns if isinstance(c.type, schema.StoredTimestamp)}
        shaped = {
            k: (_stored(conn, v) if k in stamps and v is not None else v) for k, v in values.items()
        }
        conn.execute(t.update().where(where).values(**shaped))


def _row(engine: sa.Engine, tool_call_id: str, source: str = "live") -> dict[str, Any]:
    t = schema.subagents
    with engine.connect() as conn:
        found = (
            conn.execute(sa.select(t).where(t.c.tool_call_id == tool_call_id, t.c.source == source))
            .mappings()
            .one()
        )
    return dict(found)


def delete_messages(engine: sa.Engine, *message_ids: str) -> None:
    m = schema.task_session_messages
    with _writing(engine) as conn:
        conn.execute(m.delete().where(m.c.id.in_(message_ids)))


def add_messages(engine: sa.Engine, *messages: dict[str, Any]) -> None:
    with _writing(engine) as conn:
        _insert(conn, schema.task_session_messages, list(messages))


def _rebuild_sqlite(conn: sa.Connection, edit: Callable[[str], str]) -> None:
    """SQLite has no ALTER for constraints: rebuild the table from its DDL as ``edit`` changes
    it, keeping every row and the secondary indexes."""
    temp = f"{schema.SUBAGENTS}__scenario"
    ddl = str(sa.schema.CreateTable(schema.subagents).compile(dialect=conn.dialect))
    edited = edit(ddl)
    if edited == ddl:
        raise KandevDqError("the rebuild edit changed nothing")
    conn.exec_driver_sql(
        edited.replace(f"CREATE TABLE {schema.SUBAGENTS} ", f"CREATE TABLE {temp} ", 1)
    )
    conn.exec_driver_sql(f"INSERT INTO {temp} SELECT * FROM {schema.SUBAGENTS}")
    conn.exec_driver_sql(f"DROP TABLE {schema.SUBAGENTS}")
    conn.exec_driver_sql(f"ALTER TABLE {temp} RENAME TO {schema.SUBAGENTS}")
    for index in sorted(schema.subagents.indexes, key=lambda i: i.name):
        index.create(conn)


_PG_CONSTRAINTS = sa.text(
    """
    SELECT con.conname, con.contype,
           ARRAY(SELECT att.attname::text FROM pg_catalog.pg_attribute AS att
                 WHERE att.attrelid = con.conrelid AND att.attnum = ANY (con.conkey)
                 ORDER BY att.attname::text COLLATE "C") AS columns
    FROM pg_catalog.pg_constraint AS con
    WHERE con.conrelid = to_regclass(:table_name)
    """
)


def _pg_drop_constraint(conn: sa.Connection, contype: str, columns: tuple[str, ...]) -> None:
    """Drop a PostgreSQL constraint found by kind and column set (names are auto-generated)."""
    wanted = sorted(columns)
    rows = conn.execute(_PG_CONSTRAINTS, {"table_name": schema.SUBAGENTS}).all()
    names = [r.conname for r in rows if r.contype == contype and sorted(r.columns) == wanted]
    if not names:
        raise KandevDqError(f"no {contype!r} constraint on {wanted}")
    quote = conn.dialect.identifier_preparer.quote
    for name in names:
        conn.exec_driver_sql(f"ALTER TABLE {schema.SUBAGENTS} DROP CONSTRAINT {quote(name)}")


_AMENDED_UNIQUE_DDL = "UNIQUE (task_session_id, agent_execution_id, tool_call_id)"
_SESSION_FK_DDL = re.compile(r",\s*FOREIGN KEY\s*\(task_session_id\)[^\n]*")


def drop_execution_not_null(engine: sa.Engine) -> None:
    with _writing(engine) as conn:
        if conn.dialect.name == "sqlite":
            _rebuild_sqlite(
                conn,
                lambda ddl: ddl.replace(
                    "agent_execution_id TEXT DEFAULT 'unknown' NOT NULL",
                    "agent_execution_id TEXT DEFAULT 'unknown'",
                ),
            )
        else:
            conn.exec_driver_sql(
                f"ALTER TABLE {schema.SUBAGENTS} ALTER COLUMN agent_execution_id DROP NOT NULL"
            )


def drop_three_column_unique(engine: sa.Engine) -> None:
    with _writing(engine) as conn:
        if conn.dialect.name == "sqlite":
            _rebuild_sqlite(
                conn, lambda ddl: re.sub(r",\s*" + re.escape(_AMENDED_UNIQUE_DDL), "", ddl)
            )
        else:
            _pg_drop_constraint(conn, "u", schema.AMENDED_UNIQUE)


def add_two_column_unique(engine: sa.Engine) -> None:
    two = ", ".join(schema.PRE_AMENDMENT_UNIQUE)
    with _writing(engine) as conn:
        if conn.dialect.name == "sqlite":
            _rebuild_sqlite(
                conn,
                lambda ddl: ddl.replace(
                    _AMENDED_UNIQUE_DDL, f"{_AMENDED_UNIQUE_DDL}, UNIQUE ({two})"
                ),
            )
        else:
            conn.exec_driver_sql(f"ALTER TABLE {schema.SUBAGENTS} ADD UNIQUE ({two})")


def delete_session_unenforced(engine: sa.Engine, session_id: str) -> None:
    """Delete a session while the subagents' foreign key is not enforced, every other table's
    cascade still applying: SQLite with ``foreign_keys`` off (its per-connection default),
    PostgreSQL with the constraint dropped and re-added ``NOT VALID`` (old rows unchecked)."""
    sessions = schema.task_sessions
    turns, messages = schema.task_session_turns, schema.task_session_messages
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys = OFF")  # only outside a transaction
            try:
                with _transaction(conn):
                    conn.execute(messages.delete().where(messages.c.task_session_id == session_id))
                    conn.execute(turns.delete().where(turns.c.task_session_id == session_id))
                    conn.execute(sessions.delete().where(sessions.c.id == session_id))
            finally:
                conn.exec_driver_sql("PRAGMA foreign_keys = ON")
            return
        with _transaction(conn):
            _pg_drop_constraint(conn, "f", ("task_session_id",))
            conn.execute(sessions.delete().where(sessions.c.id == session_id))
            conn.exec_driver_sql(
                f"ALTER TABLE {schema.SUBAGENTS} ADD FOREIGN KEY (task_session_id) "
                "REFERENCES task_sessions (id) ON DELETE CASCADE NOT VALID"
            )


def drop_session_foreign_key(engine: sa.Engine) -> None:
    with _writing(engine) as conn:
        if conn.dialect.name == "sqlite":
            _rebuild_sqlite(conn, lambda ddl: _SESSION_FK_DDL.sub("", ddl))
        else:
            _pg_drop_constraint(conn, "f", ("task_session_id",))


# --- the pre-amendment build ---------------------------------------------------------------------


def _legacy_capture() -> datetime:
    """When the pre-amendment build activated: a day into the history, on a whole second."""
    return anchor() + timedelta(days=1)


def legacy_store(engine: sa.Engine) -> None:
    """A store the pre-amendment build activated: the two-column table, its backfill and
    keys at second precision (``time.RFC3339`` / ``rfc3339Timestamp``), and live rows it
    captured afterwards (no execution id)."""
    create(engine, subagents="pre_amendment")
    write_history(engine)
    legacy = schema.pre_amendment_subagents
    columns = [c.name for c in legacy.columns]
    mapped = migrate.backfill_select(engine.dialect.name).subquery("mapped")
    captured = _legacy_capture()
    with _writing(engine) as conn:
        conn.execute(
            legacy.insert().from_select(columns, sa.select(*(mapped.c[c] for c in columns)))
        )
        newest = conn.execute(migrate.backfill_through_statement(conn.dialect.name)).scalar()
        conn.execute(  # the old writer truncated both keys to the second
            schema.kandev_meta.insert(),
            [
                {"key": CAPTURE_SINCE, "value": _rfc3339_seconds(captured)},
                {"key": BACKFILL_THROUGH, "value": _rfc3339_seconds(parse_stored(newest))},
            ],
        )
        turn = _uid("turn-legacy-live")
        _insert(conn, schema.task_session_turns, [_turn(turn, S3, T1, captured + 5 * _S)])
        # fmt: off
        messages = [
            _subagent(
                _uid("m-legacy-live-1"), S3, T1, turn, captured + 10 * _S + 5 * _US,
                _tc("LegacyLiveLaunch"), tool_status="completed",
                updated=captured + 10 * _S + 90 * _MS, subagent_type="Explore",
                description="Map the task lifecycle", status="async_launched",
                agent_id="d00d0001", model="claude-haiku-4-5-20251001", is_async=True,
            ),
            _subagent(
                _uid("m-legacy-live-2"), S3, T1, turn, captured + 12 * _S, _tc("LegacyLiveDone"),
                tool_status="completed", updated=captured + 40 * _S,
                subagent_type="general-purpose", description="Trace the cancel path",
                status="completed", agent_id="d00d0002", model="claude-haiku-4-5-20251001",
                total_tokens=5120, tool_use_count=3, duration_ms=27000,
            ),
        ]
        # fmt: on
        _insert(conn, schema.task_session_messages, messages)
        rows = [_healthy_row(m, None, m["created_at"] + 300 * _US) for m in messages]
        _insert(conn, legacy, rows)


# --- the registry ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """A named store: the baseline plus one mutation, and what the suite must say about it.

    ``violates`` lists the AC ids a fault breaks (empty: a healthy scenario); ``severity`` is
    the severity a fault must be caught at, or for a healthy scenario the highest severity of
    the findings it ``discloses`` (the only non-error expectations it may fail; None: none).
    ``known_gap`` says why the current rules miss a fault: the scenario stays as it is, the
    matrix shows the miss, and the test fails once the gap closes (so the note goes too).
    """

    name: str
    summary: str
    build: Callable[[sa.Engine], None]
    violates: tuple[str, ...] = ()
    severity: str | None = None
    discloses: tuple[str, ...] = ()
    between_runs: Callable[[sa.Engine], None] | None = None
    check_url: Callable[[str], str] | None = None
    known_gap: str = ""

    @property
    def fault(self) -> bool:
        return bool(self.violates)

    @property
    def expected(self) -> str:
        """The expectation in words, for listings and the matrix."""
        if self.fault:
            gap = f"; **known gap**: {self.known_gap}" if self.known_gap else ""
            return f"fault: {', '.join(self.violates)} at {self.severity}{gap}"
        if self.discloses:
            return f"healthy; discloses {self.severity}"
        return "healthy"


SCENARIOS: dict[str, Scenario] = {}


def _scenario(
    name: str,
    summary: str,
    *,
    violates: tuple[str, ...] = (),
    severity: str | None = None,
    discloses: tuple[str, ...] = (),
    between_runs: Callable[[sa.Engine], None] | None = None,
    check_url: Callable[[str], str] | None = None,
    known_gap: str = "",
) -> Callable[[Callable[[sa.Engine], None]], Callable[[sa.Engine], None]]:
    def register(build: Callable[[sa.Engine], None]) -> Callable[[sa.Engine], None]:
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} is registered twice")
        SCENARIOS[name] = Scenario(
            name, summary, build, violates, severity, discloses, between_runs, check_url, known_gap
        )
        return build

    return register


def with_pg_options(url: str, option: str) -> str:
    """``url`` with a libpq ``-c`` option added to its ``options`` (PostgreSQL URLs only)."""
    if "://" not in url:
        return url
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return url
    options = " ".join(o for o in (parsed.query.get("options", ""), option) if o)
    return parsed.update_query_dict({"options": options}).render_as_string(hide_password=False)


def non_utc_session(url: str) -> str:
    """The check runs in a PostgreSQL session whose time zone is not UTC (SQLite: as is)."""
    return with_pg_options(url, f"-cTimeZone={NON_UTC_ZONE}")


# Healthy -----------------------------------------------------------------------------------------


@_scenario("healthy_baseline", "The baseline itself: history, the real migration, live rows")
def _healthy_baseline(engine: sa.Engine) -> None:
    baseline(engine)


@_scenario("fresh_install", "A store created empty: the backfill matched nothing ('' sentinel)")
def _fresh_install(engine: sa.Engine) -> None:
    create(engine)
    run_migration(engine)
    start = _next_free(engine)
    with _writing(engine) as conn:
        _insert(conn, schema.task_sessions, [_session(S1, T1, start)])
    write_known_live(engine, start + _S)
    write_live_traffic(engine)


@_scenario(
    "legacy_second_precision_keys",
    "Keys the pre-amendment build wrote at second precision, kept as they are",
    severity="info",
    discloses=("expect_legacy_keys_to_be_disclosed",),
)
def _legacy_keys(engine: sa.Engine) -> None:
    legacy_store(engine)
    run_migration(engine)  # rebuilds the table, writes execution_since; keeps both old keys
    write_known_live(engine)
    write_live_traffic(engine)


@_scenario(
    "legacy_partial_pair_repaired",
    "The old writer left backfill_through alone; the amended build wrote the missing key",
    severity="info",
    discloses=("expect_legacy_keys_to_be_disclosed",),
)
def _legacy_pair_repaired(engine: sa.Engine) -> None:
    legacy_store(engine)
    set_key(engine, CAPTURE_SINCE, None)  # the old writer's capture_since statement failed
    run_migration(engine)  # rebuild, execution_since, then the backfill repairs the pair
    write_known_live(engine)
    write_live_traffic(engine)


@_scenario(
    "live_rows_before_retried_capture",
    "The first backfill failed; live rows written before the retry precede capture_since",
)
def _retried_backfill(engine: sa.Engine) -> None:
    create(engine)
    write_history(engine)
    run_migration(engine, fail="backfill")  # execution_since only: no backfill key (AC-24a)
    # Microseconds apart so that all three precede the retry's capture_since.
    start = _key_instant(engine, EXECUTION_SINCE).bound() + 100 * _US
    write_known_live(engine, start, step=100 * _US)
    run_migration(engine)  # the retry: backfill and both keys
    write_live_traffic(engine)


@_scenario(
    "real_uuid_before_execution_since",
    "The execution_since write failed once: rows with real execution ids precede the key",
)
def _self_healed(engine: sa.Engine) -> None:
    create(engine)
    write_history(engine)
    run_migration(engine, fail="execution_since")  # table amended, key and backfill not
    write_known_live(engine, datetime.now(UTC), step=100 * _US)
    run_migration(engine)  # self-heal: execution_since, then the backfill
    write_live_traffic(engine)


@_scenario(
    "standing_excess",
    "A live row whose message write failed: excess since capture_since, attributed",
    severity="warning",
    discloses=("expect_no_writer_excess_since_capture_since",),
)
def _standing_excess(engine: sa.Engine) -> None:
    baseline(engine)
    delete_messages(engine, _uid("m-live-completed"))


def _after_live(engine: sa.Engine, *messages: Callable[[datetime], dict[str, Any]]) -> None:
    start = _next_free(engine)
    add_messages(engine, *(make(start + n * _S) for n, make in enumerate(messages)))


# fmt: off
@_scenario(
    "ac2_skipped_messages_after_capture",
    "Subagent messages without a tool_call_id or task id after capture_since: no row, no alarm",
)
def _ac2_skipped(engine: sa.Engine) -> None:
    baseline(engine)
    turn = _uid("turn-live")
    _after_live(
        engine,
        lambda at: _subagent(
            _uid("m-live-no-tool"), SL, TL, turn, at, None, tool_status="completed",
            status="completed", description="Frame without a tool call id",
        ),
        lambda at: _subagent(
            _uid("m-live-empty-tool"), SL, TL, turn, at, "", tool_status="pending",
            status="started", description="Frame with an empty tool call id",
        ),
        lambda at: _subagent(
            _uid("m-live-no-task"), SL, "", turn, at, _tc("LiveNoTask"),
            tool_status="completed", status="completed", description="Frame without a task",
        ),
    )


@_scenario(
    "two_messages_one_subagent",
    "A later message updates a live subagent: two messages, one key, one row",
)
def _two_messages(engine: sa.Engine) -> None:
    baseline(engine)
    _after_live(
        engine,
        lambda at: _subagent(
            _uid("m-live-running-update"), SL, TL, _uid("turn-live"), at, TC_LIVE_RUNNING,
            tool_status="in_progress", subagent_type="explore",
            description="Search for flaky tests", status="running",
            child_session_id="ses_9Xc2Lm4Np6Qr8St0Uv2Wx4Yz6A", model="openai/gpt-5",
        ),
    )


@_scenario(
    "cross_execution_collision",
    "A later execution reuses a tool_call_id: two rows differing only in execution id",
    severity="info",
    discloses=("expect_no_cross_execution_collisions_since_capture_since",),
)
def _collision(engine: sa.Engine) -> None:
    baseline(engine)
    at = _next_free(engine)
    turn = _uid("turn-live-2")
    message = _subagent(
        _uid("m-live-reused"), SL, TL, turn, at, TC_LIVE_COMPLETED,
        tool_status="completed", updated=at + 20 * _S, subagent_type="general-purpose",
        description="Summarise the failing tests again", status="completed",
        agent_id="c0ffee03", model="claude-opus-4-1-20250805",
        total_tokens=9001, tool_use_count=2, duration_ms=19000,
    )
    with _writing(engine) as conn:
        _insert(conn, schema.task_session_turns, [_turn(turn, SL, TL, at - _MS)])
        _insert(conn, schema.task_session_messages, [message])
        _insert(conn, schema.subagents, [_healthy_row(message, EXECUTION_2, at + 250 * _US)])


@_scenario(
    "legacy_metadata_after_capture",
    "Messages whose metadata is '', 'null' or NULL after capture_since abort nothing",
)
def _legacy_metadata(engine: sa.Engine) -> None:
    baseline(engine)
    turn = _uid("turn-live")
    _after_live(
        engine,
        *(
            lambda at, n=n, raw=raw: _ordinary(_uid(f"m-live-meta-{n}"), SL, TL, turn, at, raw)
            for n, raw in enumerate(("", "null", None))
        ),
    )


@_scenario(
    "rows_exactly_at_keys",
    "A message and row exactly at capture_since, a row exactly at execution_since",
)
def _exactly_at_keys(engine: sa.Engine) -> None:
    # The newest backfilled message sits exactly at backfill_through in every baseline.
    def at_keys(engine: sa.Engine) -> None:
        turn = _uid("turn-at-keys")
        made = []
        keys = ((EXECUTION_SINCE, "AtExecutionSince"), (CAPTURE_SINCE, "AtCaptureSince"))
        for key, label in keys:
            exact = _key_instant(engine, key).bound()  # the first microsecond at the key
            message = _subagent(
                _uid(f"m-at-{key}"), S3, T1, turn, exact, _tc(label),
                tool_status="in_progress", status="started", description=f"Launched at {key}",
                child_session_id="ses_" + label.ljust(26, "0"), model="openai/gpt-5",
            )
            made.append((message, _healthy_row(message, EXECUTION_1, exact)))
        with _writing(engine) as conn:
            _insert(conn, schema.task_session_turns, [_turn(turn, S3, T1, anchor())])
            _insert(conn, schema.task_session_messages, [m for m, _ in made])
            _insert(conn, schema.subagents, [r for _, r in made])

    baseline(engine, after_migration=at_keys)


@_scenario(
    "message_just_after_backfill_through",
    "A message 1 µs after backfill_through and before capture_since, without a row",
)
def _just_after_through(engine: sa.Engine) -> None:
    def late_message(engine: sa.Engine) -> None:
        at = _key_instant(engine, BACKFILL_THROUGH).micro + _US
        add_messages(engine, _subagent(
            _uid("m-just-after"), S3, T1, _uid("turn-4"), at, _tc("JustAfterThrough"),
            tool_status="completed", status="completed", description="Committed after the MAX",
        ))

    baseline(engine, after_migration=late_message)
# fmt: on


@_scenario(
    "postgres_session_not_utc",
    f"The check's PostgreSQL session runs in {NON_UTC_ZONE} (SQLite: the baseline)",
    check_url=non_utc_session,
)
def _not_utc(engine: sa.Engine) -> None:
    baseline(engine)


# Faults: activation keys -------------------------------------------------------------------------


def _go_space(value: str) -> str:
    """A key in a column's storage form (``2026-07-30 01:39:37.271235+00:00``)."""
    return go_sqlite_text(parse_key(value).micro)


@_scenario(
    "capture_since_go_space_string",
    "capture_since written in a column's storage form, not RFC3339",
    violates=("AC-24e",),
    severity="error",
)
def _capture_go_space(engine: sa.Engine) -> None:
    baseline(engine)  # the same instant, in the wrong text form
    set_key(engine, CAPTURE_SINCE, _go_space(read_keys(engine)[CAPTURE_SINCE] or ""))


@_scenario(
    "backfill_through_go_space_string",
    "backfill_through written in a column's storage form, not RFC3339",
    violates=("AC-24e",),
    severity="error",
)
def _through_go_space(engine: sa.Engine) -> None:
    baseline(engine)  # the same instant, in the wrong text form
    set_key(engine, BACKFILL_THROUGH, _go_space(read_keys(engine)[BACKFILL_THROUGH] or ""))


@_scenario(
    "second_precision_capture_by_amended_build",
    "A build claiming Amendment 1 wrote capture_since at second precision",
    violates=("AC-24",),
    severity="error",
)
def _second_precision_amended(engine: sa.Engine) -> None:
    def truncate(engine: sa.Engine) -> None:
        capture = _key_instant(engine, CAPTURE_SINCE).micro
        whole = capture.replace(microsecond=0) + _S  # after execution_since, as this build runs
        set_key(engine, CAPTURE_SINCE, _rfc3339_seconds(whole))

    baseline(engine, after_migration=truncate)


@_scenario(
    "second_precision_backfill_through_by_amended_build",
    "The amended build wrote backfill_through with the old rfc3339Timestamp helper (seconds)",
    violates=("AC-24",),
    severity="error",
    known_gap="backfill_through's value (a message's created_at) is compared with "
    "execution_since as if it were the instant it was written: it is always earlier, so a "
    "second-precision backfill_through always reads as legacy (info only)",
)
def _through_seconds(engine: sa.Engine) -> None:
    def truncate(engine: sa.Engine) -> None:
        through = _key_instant(engine, BACKFILL_THROUGH).micro
        set_key(engine, BACKFILL_THROUGH, _rfc3339_seconds(through))

    baseline(engine, after_migration=truncate)


@_scenario(
    "second_precision_keys_by_amended_build",
    "The amended build wrote both keys with the old helpers: truncated to the second",
    violates=("AC-24",),
    severity="error",
)
def _keys_truncated(engine: sa.Engine) -> None:
    def truncate(engine: sa.Engine) -> None:
        # capture_since is sampled ms after execution_since: truncated, it lands in
        # execution_since's second (here always, so that the verdict does not depend on timing).
        execution = _key_instant(engine, EXECUTION_SINCE).micro
        through = _key_instant(engine, BACKFILL_THROUGH).micro
        set_key(engine, CAPTURE_SINCE, _rfc3339_seconds(execution))
        set_key(engine, BACKFILL_THROUGH, _rfc3339_seconds(through))

    baseline(engine, after_migration=truncate)


@_scenario(
    "capture_since_at_transaction_start",
    "capture_since sampled at transaction start: a message backfilled during the scan is after it",
    violates=("AC-24",),
    severity="error",
)
def _capture_at_start(engine: sa.Engine) -> None:
    def sampled_early(engine: sa.Engine) -> None:
        execution = _key_instant(engine, EXECUTION_SINCE).micro
        capture = _key_instant(engine, CAPTURE_SINCE).micro
        started = execution + (capture - execution) / 3  # the backfill's transaction began
        committed = execution + 2 * (capture - execution) / 3  # a message landed in its scan
        # fmt: off
        add_messages(engine, _subagent(
            _uid("m-in-scan"), S3, T1, _uid("turn-4"), committed, _tc("InScan"),
            tool_status="completed", status="completed", description="Committed mid-scan",
        ))
        # fmt: on
        with _writing(engine) as conn:  # the same INSERT … SELECT saw it
            conn.execute(migrate.backfill_statement(conn.dialect.name))
        set_key(engine, CAPTURE_SINCE, _instant(started).rfc3339nano())
        set_key(engine, BACKFILL_THROUGH, _instant(committed).rfc3339nano())

    baseline(engine, after_migration=sampled_early)


@_scenario(
    "backfill_through_after_insert",
    "backfill_through taken after the INSERT: it claims a message that has no row",
    violates=("AC-24d",),
    severity="error",
)
def _through_after_insert(engine: sa.Engine) -> None:
    def over_claim(engine: sa.Engine) -> None:
        late = _key_instant(engine, CAPTURE_SINCE).micro - _MS  # between INSERT and MAX
        # fmt: off
        add_messages(engine, _subagent(
            _uid("m-after-insert"), S3, T1, _uid("turn-4"), late, _tc("AfterInsert"),
            tool_status="completed", status="completed", description="Committed too late",
        ))
        # fmt: on
        set_key(engine, BACKFILL_THROUGH, _instant(late).rfc3339nano())

    baseline(engine, after_migration=over_claim)


@_scenario(
    "backfill_through_from_retry_rows",
    "A retry derived backfill_through from what it inserted: '' over old backfill rows",
    violates=("AC-24f",),
    severity="error",
)
def _through_from_retry(engine: sa.Engine) -> None:
    baseline(engine, after_migration=lambda e: set_key(e, BACKFILL_THROUGH, ""))


@_scenario(
    "partial_pair_capture_only",
    "capture_since without backfill_through (the old three-statement writer)",
    violates=("AC-24d",),
    severity="error",
)
def _capture_only(engine: sa.Engine) -> None:
    baseline(engine)
    set_key(engine, BACKFILL_THROUGH, None)


@_scenario(
    "partial_pair_through_only",
    "backfill_through without capture_since",
    violates=("AC-24d",),
    severity="error",
)
def _through_only(engine: sa.Engine) -> None:
    baseline(engine)
    set_key(engine, CAPTURE_SINCE, None)


def _resample_capture(engine: sa.Engine) -> None:
    capture = _key_instant(engine, CAPTURE_SINCE)
    set_key(engine, CAPTURE_SINCE, Instant(capture.micro + _MS, capture.nanos).rfc3339nano())


@_scenario(
    "key_rewritten_between_runs",
    "capture_since overwritten 1 ms later between two checks (an upsert, not write-once)",
    violates=("AC-24",),
    severity="error",
    between_runs=_resample_capture,
)
def _rewritten(engine: sa.Engine) -> None:
    baseline(engine)


@_scenario(
    "key_deleted_between_runs",
    "capture_since deleted between two checks",
    violates=("AC-24",),
    severity="error",
    between_runs=lambda engine: set_key(engine, CAPTURE_SINCE, None),
)
def _deleted(engine: sa.Engine) -> None:
    baseline(engine)


# Faults: schema and execution_since --------------------------------------------------------------


@_scenario(
    "execution_since_with_two_column_key",
    "execution_since written while the two-column UNIQUE remains",
    violates=("AC-33b", "AC-33"),
    severity="error",
)
def _two_column_remains(engine: sa.Engine) -> None:
    baseline(engine)
    add_two_column_unique(engine)


@_scenario(
    "execution_since_absent_on_amended_table",
    "The amended schema holds but execution_since is absent: self-heal pending",
    violates=("AC-33b",),
    severity="warning",
)
def _execution_since_absent(engine: sa.Engine) -> None:
    baseline(engine)
    set_key(engine, EXECUTION_SINCE, None)


@_scenario(
    "pre_amendment_table",
    "The AC-33 upgrade failed: the pre-amendment table and legacy keys, no execution_since",
    violates=("AC-33",),
    severity="error",
)
def _pre_amendment(engine: sa.Engine) -> None:
    legacy_store(engine)
    run_migration(engine, fail="amend")


@_scenario(
    "missing_secondary_index",
    "idx_subagents_turn_id is missing",
    violates=("AC-33", "AC-17"),
    severity="error",
)
def _missing_index(engine: sa.Engine) -> None:
    baseline(engine)
    with _writing(engine) as conn:
        conn.exec_driver_sql("DROP INDEX idx_subagents_turn_id")


@_scenario(
    "duplicate_rows_for_one_key",
    "The three-column UNIQUE dropped and one live subagent written twice",
    violates=("AC-3", "AC-14"),
    severity="error",
)
def _duplicates(engine: sa.Engine) -> None:
    baseline(engine)
    drop_three_column_unique(engine)
    twin = _row(engine, TC_LIVE_COMPLETED)
    twin["id"] = _uid("row-duplicate")
    with _writing(engine) as conn:
        _insert(conn, schema.subagents, [twin])


@_scenario(
    "orphan_rows",
    "The session foreign key dropped, then a session deleted: its subagent rows remain",
    violates=("AC-16",),
    severity="error",
)
def _orphans(engine: sa.Engine) -> None:
    baseline(engine)
    drop_session_foreign_key(engine)
    with _writing(engine) as conn:  # its turns and messages still cascade
        conn.execute(schema.task_sessions.delete().where(schema.task_sessions.c.id == SL))


@_scenario(
    "orphan_rows_foreign_key_not_enforced",
    "A session deleted while the subagents' foreign key was not enforced: its rows remain",
    violates=("AC-16",),
    severity="error",
)
def _orphans_unenforced(engine: sa.Engine) -> None:
    baseline(engine)
    delete_session_unenforced(engine, SL)


# Faults: rows -------------------------------------------------------------------------------------


@_scenario(
    "zero_total_tokens",
    "A completed live row stores total_tokens 0",
    violates=("AC-7a",),
    severity="error",
)
def _zero_tokens(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", total_tokens=0)


@_scenario(
    "zero_duration_ms",
    "A completed live row stores duration_ms 0",
    violates=("AC-7a",),
    severity="error",
)
def _zero_duration(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", duration_ms=0)


@_scenario(
    "zero_tool_use_count_unreported",
    "A backfill row stores tool_use_count 0 where its message reported none",
    violates=("AC-7",),
    severity="error",
)
def _zero_uses(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_STARTED, "backfill", tool_use_count=0)


@_scenario(
    "async_launched_with_zeros",
    "An async_launched live row stores the frame's zeros instead of NULL",
    violates=("AC-7",),
    severity="error",
)
def _async_zeros(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_ASYNC, "live", total_tokens=0, tool_use_count=0, duration_ms=0)


@_scenario(
    "empty_string_in_text_column",
    "A live row stores '' instead of NULL in agent_id",
    violates=("§2-empty-text",),
    severity="error",
)
def _empty_text(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_RUNNING, "live", agent_id="")


@_scenario(
    "negative_metric",
    "A completed live row stores a negative total_tokens",
    violates=("AC-9",),
    severity="error",
)
def _negative(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", total_tokens=-5)


@_scenario(
    "tool_status_from_agent_status",
    "An async_launched live row whose tool_status was filled from agent_status",
    violates=("AC-12",),
    severity="error",
)
def _conflated(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_ASYNC, "live", tool_status="async_launched")


@_scenario(
    "backfill_turn_id_null",
    "Backfill rows with a NULL turn_id although their messages have a turn",
    violates=("AC-2a",),
    severity="error",
)
def _turn_null(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, None, "backfill", turn_id=None)


@_scenario(
    "settled_at_on_non_terminal_row",
    "A live row still in progress has settled_at set",
    violates=("AC-11",),
    severity="error",
)
def _settled_early(engine: sa.Engine) -> None:
    baseline(engine)
    row = _row(engine, TC_LIVE_RUNNING)
    settled = parse_stored(row["observed_at"]) + 5 * _MS
    update_rows(engine, TC_LIVE_RUNNING, "live", settled_at=settled, updated_at=settled)


@_scenario(
    "settled_at_missing_on_terminal_row",
    "A completed live row has no settled_at",
    violates=("AC-11",),
    severity="error",
)
def _settled_missing(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", settled_at=None)


@_scenario(
    "execution_id_null",
    "agent_execution_id NOT NULL dropped (table rebuilt on SQLite) and a live row with NULL",
    violates=("AC-30",),
    severity="error",
)
def _execution_null(engine: sa.Engine) -> None:
    baseline(engine)
    drop_execution_not_null(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", agent_execution_id=None)


@_scenario(
    "execution_id_empty",
    "A live row with agent_execution_id ''",
    violates=("AC-30",),
    severity="error",
)
def _execution_empty(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", agent_execution_id="")


@_scenario(
    "backfill_row_relabelled_live",
    "A backfill row whose source was changed to 'live'",
    violates=("AC-1",),
    severity="warning",
)
def _relabelled(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_COMPLETED, "backfill", source="live")


@_scenario(
    "ac21b_loser_in_backfill_row",
    "The backfill row of a duplicated subagent carries the older (losing) message's values",
    violates=("AC-21b",),
    severity="error",
)
def _loser(engine: sa.Engine) -> None:
    baseline(engine)
    # fmt: off
    update_rows(
        engine, TC_DUP, "backfill",
        id=M_DUP_OLD, observed_at=_at(3600.25), updated_at=_at(3600.3), settled_at=None,
        agent_status="async_launched", tool_status="in_progress",
        total_tokens=None, tool_use_count=None, duration_ms=None,
    )
    # fmt: on


# Faults: writer health -------------------------------------------------------------------------


@_scenario(
    "stopped_writer",
    "The live writer stopped: subagent messages after capture_since have no rows",
    violates=("AC-26",),
    severity="error",
)
def _stopped(engine: sa.Engine) -> None:
    baseline(engine, writer="stopped")


@_scenario(
    "stopped_writer_behind_banked_excess",
    "Two rows without messages (excess) and one message without a row (shortfall)",
    violates=("AC-26",),
    severity="error",
)
def _banked_excess(engine: sa.Engine) -> None:
    baseline(engine)
    delete_messages(engine, _uid("m-live-completed"), _uid("m-live-running"))
    # fmt: off
    _after_live(engine, lambda at: _subagent(
        _uid("m-live-missed"), SL, TL, _uid("turn-live"), at, _tc("LiveMissed"),
        tool_status="in_progress", status="async_launched", is_async=True,
        description="The first subagent the stopped writer missed",
    ))
    # fmt: on


# Metadata JSON read one way on both dialects (AC-19, AC-23b) -----------------------------------


def _json_subagent(name: str, at: datetime, rewrite: Callable[[str], str]) -> dict[str, Any]:
    """A live subagent message whose metadata text ``rewrite`` changes, meaning kept."""
    # fmt: off
    message = _subagent(
        _uid(f"m-live-{name}"), SL, TL, _uid("turn-live"), at, _tc(f"Live{name}"),
        tool_status="completed", updated=at + 30 * _S, subagent_type="general-purpose",
        description=f"Subagent written with {name} metadata", status="completed",
        agent_id="c0ffee09", model="claude-opus-4-1-20250805", is_async=False,
        total_tokens=4200, tool_use_count=3, duration_ms=30000,
    )
    # fmt: on
    return {**message, "metadata": rewrite(message["metadata"])}


def _add_json_subagent(engine: sa.Engine, name: str, rewrite: Callable[[str], str], *, row: bool):
    message = _json_subagent(name, _next_free(engine), rewrite)
    with _writing(engine) as conn:
        _insert(conn, schema.task_session_messages, [message])
        if row:  # json.loads reads the text as JSON does: the row a correct writer leaves
            observed = message["created_at"] + 250 * _US
            _insert(conn, schema.subagents, [_healthy_row(message, EXECUTION_1, observed)])


def _escape_names(raw: str) -> str:
    """Member names spelled with ``\\u`` escapes at each level the reading walks."""
    for plain, escaped in (
        ('"tool_call_id":', '"tool_\\u0063all_id":'),
        ('"kind":', '"\\u006bind":'),
        ('"subagent_task": {', '"subagent_\\u0074ask": {'),
        ('"total_tokens":', '"total_\\u0074okens":'),
    ):
        raw = raw.replace(plain, escaped)
    return raw


def _repeat_names(raw: str) -> str:
    """Each read level repeats a name; the last member is the real one."""
    return (
        raw.replace('"tool_call_id": ', '"tool_call_id": "toolu_decoy", "tool_call_id": ', 1)
        .replace('"kind": ', '"kind": "message", "kind": ', 1)
        .replace('"total_tokens": ', '"total_tokens": 1, "total_tokens": ', 1)
    )


def _nest(depth: int) -> Callable[[str], str]:
    """A member nesting ``depth`` arrays added to the document (one level deeper in all)."""
    return lambda raw: raw[:-1] + ', "trace": ' + "[" * depth + "]" * depth + "}"


@_scenario(
    "escaped_member_names_with_row",
    "A subagent message whose member names are \\u-escaped, with its live row",
)
def _escaped_with_row(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "escaped", _escape_names, row=True)


@_scenario(
    "escaped_member_names_without_row",
    "A subagent message whose member names are \\u-escaped, and no row: a shortfall",
    violates=("AC-26",),
    severity="error",
)
def _escaped_without_row(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "escaped", _escape_names, row=False)


@_scenario(
    "repeated_member_names",
    "A subagent message repeating member names (last one real), with the last one's row",
    severity="warning",
    discloses=("expect_message_metadata_member_names_to_be_unique",),
)
def _repeated_names(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "repeated", _repeat_names, row=True)


@_scenario(
    "metadata_nested_10000_deep",
    "A subagent message without a row, its metadata nested 10,000 deep: unreadable, read as {}",
    violates=("AC-23b",),
    severity="warning",
)
def _nested_10000(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "deep", _nest(10_000), row=False)


@_scenario(
    "metadata_nested_100000_deep",
    "As above at 100,000 levels, past PostgreSQL's own parser stack",
    violates=("AC-23b",),
    severity="warning",
)
def _nested_100000(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "deep", _nest(100_000), row=False)


# --- running scenarios ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Fired:
    """One failed expectation: its type, severity and the AC ids it cites."""

    expectation: str
    severity: str
    rules: tuple[str, ...]


@dataclass
class Verdict:
    """What ``pre_release`` said about one scenario on one dialect."""

    scenario: str
    dialect: str
    passed: bool
    state: str
    fired: tuple[Fired, ...]
    build_seconds: float = 0.0
    check_seconds: float = 0.0
    messages: dict[str, str] = field(default_factory=dict)

    def failed(self, severity: str | None = None) -> set[str]:
        return {f.expectation for f in self.fired if severity in (None, f.severity)}

    @property
    def signature(self) -> frozenset[tuple[str, str]]:
        """What must agree across dialects: each failed expectation with its severity."""
        return frozenset((f.expectation, f.severity) for f in self.fired)

    def cell(self) -> str:
        word = "PASSED" if self.passed else "FAILED"
        parts = [f"**{word}**"]
        for severity in SEVERITIES:
            names = sorted(f.expectation for f in self.fired if f.severity == severity)
            if names:
                parts.append(f"{severity}: " + ", ".join(f"`{n}`" for n in names))
        return "<br>".join(parts)


def problems(scenario: Scenario, verdict: Verdict) -> list[str]:
    """Why a verdict does not prove what the scenario declares (empty: it does).

    A known gap is the reverse: its fault must still be missed (else the note is stale).
    """
    if scenario.known_gap:
        missed = _problems(scenario, verdict)
        return [] if missed else [f"{scenario.name}: the known gap is closed; drop known_gap"]
    return _problems(scenario, verdict)


def _problems(scenario: Scenario, verdict: Verdict) -> list[str]:
    out: list[str] = []
    if scenario.fault:
        wanted = set(scenario.violates)
        if not any(
            f.severity == scenario.severity and wanted & set(f.rules) for f in verdict.fired
        ):
            fired = ", ".join(
                f"{f.expectation} ({f.severity}; {', '.join(f.rules)})" for f in verdict.fired
            )
            out.append(
                f"{scenario.name} on {verdict.dialect}: no {scenario.severity} failure citing "
                f"{', '.join(scenario.violates)}; fired: {fired or 'nothing'}"
            )
        if scenario.severity == "error" and verdict.passed:
            out.append(f"{scenario.name} on {verdict.dialect}: the verdict is PASSED")
        return out
    errors = verdict.failed("error")
    if errors:
        said = "; ".join(f"{e}: {verdict.messages.get(e, '')}" for e in sorted(errors))
        out.append(f"{scenario.name} on {verdict.dialect}: error failure(s) {said}")
    undeclared = verdict.failed() - errors - set(scenario.discloses)
    if undeclared:
        out.append(
            f"{scenario.name} on {verdict.dialect}: undeclared finding(s) {sorted(undeclared)}"
        )
    missing = set(scenario.discloses) - verdict.failed()
    if missing:
        out.append(
            f"{scenario.name} on {verdict.dialect}: declared finding(s) absent {sorted(missing)}"
        )
    return out


PROJECT_PARTS = ("great_expectations.yml", "expectations", "checkpoints", "validation_definitions")


def private_project(source: Path, destination: Path) -> Path:
    """A copy of a GX project for one scenario: its own key ledger and results, and no
    data-docs action (the verdicts are the point; building docs would dominate the run)."""
    destination.mkdir(parents=True, exist_ok=True)
    for part in PROJECT_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, destination / part, dirs_exist_ok=True)
        else:
            shutil.copy(source / part, destination / part)
    for checkpoint in (destination / "checkpoints").glob("*.json"):
        config = json.loads(checkpoint.read_text(encoding="utf-8"))
        config["actions"] = []
        checkpoint.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return destination


def materialise(name: str, target: str) -> float:
    """Build scenario ``name`` into the empty store ``target``; return the seconds it took.

    Refuses a store that already holds any Kandev table.
    """
    from kandev_dq.store.access import open_store

    scenario = get(name)
    store = open_store(target, read_only=False, must_exist=False, require_kandev=False)
    try:
        present = sorted(set(sa.inspect(store.engine).get_table_names()) & _KANDEV_TABLES)
        if present:
            raise KandevDqError(
                f"{store.display_url} already holds Kandev table(s) {', '.join(present)}: "
                "a scenario is built only into an empty store"
            )
        started = time.perf_counter()
        scenario.build(store.engine)
        return time.perf_counter() - started
    finally:
        store.dispose()


_KANDEV_TABLES = {t.name for t in schema.BASE_TABLES} | {schema.SUBAGENTS, migrate.REBUILD_TABLE}


def apply_between_runs(name: str, target: str) -> None:
    """Apply scenario ``name``'s mutation between its two check runs to the store ``target``."""
    from kandev_dq.store.access import open_store

    scenario = get(name)
    if scenario.between_runs is None:
        raise KandevDqError(f"scenario {name!r} is checked once: it has no between-runs mutation")
    store = open_store(target, read_only=False)
    try:
        scenario.between_runs(store.engine)
    finally:
        store.dispose()


def get(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KandevDqError(
            f"no scenario {name!r}; `kandev-dq scenarios list` names them all"
        ) from None


def evaluate(name: str, target: str, project: Path, workdir: Path) -> Verdict:
    """Build scenario ``name`` into ``target`` and run ``pre_release`` on it (twice, with its
    ``between_runs`` mutation in between, when it has one), in a private project copy."""
    from kandev_dq.run.check import run_check

    scenario = get(name)
    built = materialise(name, target)
    checked_url = scenario.check_url(target) if scenario.check_url else target
    Path(workdir).mkdir(parents=True, exist_ok=True)
    folder = private_project(project, Path(tempfile.mkdtemp(prefix=f"{name}-", dir=workdir)))
    started = time.perf_counter()
    if scenario.between_runs is not None:
        run_check(folder, checked_url, CHECKPOINT)
        apply_between_runs(name, target)
    report = run_check(folder, checked_url, CHECKPOINT)
    checked = time.perf_counter() - started
    fired = tuple(
        sorted(
            (
                Fired(r.expectation, r.severity, tuple(r.rules))
                for r in report.results
                if not r.success
            ),
            key=lambda f: (SEVERITIES.index(f.severity), f.expectation),
        )
    )
    return Verdict(
        scenario=name,
        dialect=report.dialect,
        passed=report.success,
        state=report.state,
        fired=fired,
        build_seconds=built,
        check_seconds=checked,
        messages={r.expectation: r.message for r in report.results if not r.success},
    )


@contextlib.contextmanager
def scratch_sqlite(folder: Path, name: str) -> Iterator[str]:
    """A new SQLite file for one scenario (removed afterwards)."""
    path = Path(folder) / f"{name}.db"
    path.unlink(missing_ok=True)
    try:
        yield str(path)
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


@contextlib.contextmanager
def scratch_postgres(server: str) -> Iterator[str]:
    """A new schema in the PostgreSQL database ``server`` names, dropped afterwards; yields a
    URL whose ``search_path`` is that schema."""
    from kandev_dq.store.access import resolve_url

    url = resolve_url(server)
    name = f"kdq_scenario_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        try:
            yield with_pg_options(
                url.render_as_string(hide_password=False), f"-csearch_path={name}"
            )
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        admin.dispose()


# --- the detection matrix -------------------------------------------------------------------------

MATRIX_COMMAND = (
    'python -m kandev_dq.lab.scenarios matrix --postgres "$KANDEV_TEST_POSTGRES_URL" '
    "--out docs/detection-matrix.md"
)
TIMING_HEADING = "## Timing"


def matrix_header() -> str:
    """Everything above the table's rows (no timing, nothing machine-specific)."""
    return "\n".join(
        [
            "# Detection matrix",
            "",
            f"<!-- generated by `{MATRIX_COMMAND}`; do not edit by hand -->",
            "",
            f"Regenerate: `{MATRIX_COMMAND}`",
            "",
            "Every scenario of `kandev_dq.lab.scenarios` is a small Kandev store: the healthy "
            "baseline (history that predates the feature, migrated by the real runner, then a "
            "healthy live writer) plus one mutation. Each is built on SQLite and on PostgreSQL "
            f"and validated with the `{CHECKPOINT}` checkpoint; a cell gives the verdict and "
            "every expectation that failed, by severity. A **fault** must be caught at its "
            "severity by an expectation citing one of its AC ids; a **healthy** scenario has no "
            "error, and only the findings it declares. A fault marked **known gap** is one the "
            "current rules miss: it stays in the corpus as it is, and the test fails once a "
            "rule catches it (then the note goes). "
            "`tests/test_detection_matrix.py` asserts all of that on both dialects, that the "
            "two dialects agree, and that this file is what the code generates. Reproduce a "
            "scenario with `kandev-dq scenarios build NAME --store URL`.",
            "",
            "| scenario | what it is | expected | " + " | ".join(DIALECT_NAMES.values()) + " |",
            "|---|---|---|" + "---|" * len(DIALECT_NAMES),
        ]
    )


def matrix_row(scenario: Scenario, verdicts: dict[str, Verdict]) -> str:
    cells = [verdicts[d].cell() if d in verdicts else "(not run)" for d in DIALECT_NAMES]
    return (
        f"| `{scenario.name}` | {scenario.summary} | {scenario.expected} | "
        + " | ".join(cells)
        + " |"
    )


def matrix_rows(text: str) -> dict[str, str]:
    """The table rows of a rendered matrix, by scenario name."""
    rows = {}
    for line in text.splitlines():
        found = re.match(r"\| `([a-z0-9_]+)` \|", line)
        if found:
            rows[found.group(1)] = line
    return rows


def render_matrix(verdicts: dict[tuple[str, str], Verdict], seconds: float | None = None) -> str:
    lines = [matrix_header()]
    for scenario in SCENARIOS.values():
        mine = {d: v for (name, d), v in verdicts.items() if name == scenario.name}
        lines.append(matrix_row(scenario, mine))
    lines += [
        "",
        TIMING_HEADING,
        "",
        "Measured when this file was generated (not compared by the test).",
        "",
    ]
    for dialect, label in DIALECT_NAMES.items():
        mine = [v for (_, d), v in verdicts.items() if d == dialect]
        if not mine:
            continue
        builds = [v.build_seconds * 1000 for v in mine]
        checks = [v.check_seconds * 1000 for v in mine]
        lines.append(
            f"- {label}: {len(mine)} scenarios; build median {statistics.median(builds):.0f} ms "
            f"(max {max(builds):.0f} ms); check median {statistics.median(checks):.0f} ms "
            f"(max {max(checks):.0f} ms)"
        )
    if seconds is not None:
        lines.append(f"- total: {seconds:.1f} s")
    return "\n".join(lines) + "\n"


def detection_matrix(
    postgres: str | None,
    *,
    project: Path | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> tuple[str, list[str]]:
    """Run every scenario on SQLite (and PostgreSQL when ``postgres`` names a database) and
    return the rendered matrix and every problem found (a fault not caught, an error on a
    healthy scenario, or dialects that disagree)."""
    from kandev_dq.run.project import build_project

    started = time.perf_counter()
    verdicts: dict[tuple[str, str], Verdict] = {}
    found: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kandev-dq-matrix-") as scratch:
        work = Path(scratch)
        source = project or build_project(work / "source-project")
        for name, scenario in SCENARIOS.items():
            for dialect in DIALECTS:
                if dialect == "postgresql" and not postgres:
                    continue
                holder = (
                    scratch_sqlite(work, name)
                    if dialect == "sqlite"
                    else scratch_postgres(postgres or "")
                )
                with holder as target:
                    verdict = evaluate(name, target, source, work / dialect)
                verdicts[(name, dialect)] = verdict
                found += problems(scenario, verdict)
                say(
                    f"{name} [{dialect}]: {'PASSED' if verdict.passed else 'FAILED'} "
                    f"{sorted(verdict.signature)}"
                )
            pair = [verdicts.get((name, d)) for d in DIALECTS]
            if all(pair) and pair[0].signature != pair[1].signature:  # type: ignore[union-attr]
                found.append(f"{name}: SQLite and PostgreSQL disagree")
    return render_matrix(verdicts, time.perf_counter() - started), found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kandev_dq.lab.scenarios", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="name every scenario")
    matrix = commands.add_parser("matrix", help="run every scenario and write the matrix")
    matrix.add_argument("--postgres", help="a PostgreSQL database to create scratch schemas in")
    matrix.add_argument("--out", type=Path, help="write here (default: stdout)")
    matrix.add_argument("--project", type=Path, help="GX project (default: built from the code)")
    args = parser.parse_args(argv)
    if args.command == "list":
        for scenario in SCENARIOS.values():
            print(f"{scenario.name:<44} {scenario.expected:<32} {scenario.summary}")
        return 0
    if not args.postgres:
        print(
            "kandev-dq: error: --postgres is required: the matrix covers both dialects",
            file=sys.stderr,
        )
        return 2
    text, found = detection_matrix(
        args.postgres, project=args.project, say=lambda line: print(line, file=sys.stderr)
    )
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    for problem in found:
        print(f"kandev-dq: problem: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
