"""The healthy baseline every scenario starts from, and the pre-amendment build."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    Instant,
    MalformedKey,
    parse_key,
    parse_stored,
)
from kandev_dq.errors import KandevDqError
from kandev_dq.lab import sample
from kandev_dq.lab.scenarios.rows import (
    MICROSECOND,
    MILLISECOND,
    SECOND,
    healthy_row,
    insert_rows,
    message_row,
    ordinary_message,
    session_row,
    store_url,
    subagent_message,
    tool_call,
    turn_row,
    uid,
    writing,
)
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.migration import backfill as migration_backfill
from kandev_dq.migration import runner as migrate
from kandev_dq.sql import keys, mapping
from kandev_dq.sql.dialect import utc_instant

#: Random subagents the healthy live writer records after capture_since (sample module).
LIVE_SUBAGENTS = 8


# --- the baseline's identities -----------------------------------------------------------------

S1, S2, S3, SL = uid("session-1"), uid("session-2"), uid("session-3"), uid("session-live")
T1, T2, TL = uid("task-1"), uid("task-2"), uid("task-live")
#: The execution a healthy live writer reports for the known live subagents (a real UUID).
EXECUTION_1 = uid("execution-1")
EXECUTION_2 = uid("execution-2")

TC_ASYNC = tool_call("HistAsyncLaunch")
TC_COMPLETED = tool_call("HistCompleted")
TC_STARTED = tool_call("HistStartedOpenCode")
TC_NESTED = tool_call("HistNestedChild")
TC_DUP = tool_call("HistDuplicated")
TC_NO_TASK = tool_call("HistNoTaskId")
TC_FAILED = tool_call("HistLaunchFailed")
TC_TIE = tool_call("HistTiedCreatedAt")
TC_NO_TURN = tool_call("HistEmptyTurn")
TC_LAST = tool_call("HistNewest")
TC_LIVE_ASYNC = tool_call("LiveAsyncLaunch")
TC_LIVE_COMPLETED = tool_call("LiveCompleted")
TC_LIVE_RUNNING = tool_call("LiveRunning")

M_DUP_OLD, M_DUP_NEW = uid("message-dup-old"), uid("message-dup-new")
M_LAST = uid("message-newest")


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


def since_anchor(seconds: float, micros: int = 0) -> datetime:
    return anchor() + timedelta(seconds=seconds, microseconds=micros)


def rfc3339_seconds(value: datetime) -> str:
    """What the pre-amendment writer's helpers produce (``time.RFC3339``, ``rfc3339Timestamp``):
    the instant truncated to the second."""
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def instant_of(value: datetime) -> Instant:
    return Instant.from_datetime(value)


def history(dialect: str) -> tuple[list[dict], list[dict], list[dict]]:
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
    u1, u2, u3, u4 = (uid(f"turn-{n}") for n in range(1, 5))
    sessions = [
        session_row(S1, T1, a),
        session_row(S2, T2, since_anchor(3500)),
        session_row(S3, T1, since_anchor(7100)),
    ]
    turns = [
        turn_row(u1, S1, T1, since_anchor(0.5)),
        turn_row(u2, S1, T1, since_anchor(120)),
        turn_row(u3, S2, T2, since_anchor(3600)),
        turn_row("", S3, T1, since_anchor(7199)),  # legacy: messages with an empty turn_id
        turn_row(u4, S3, T1, since_anchor(7300)),
    ]
    sonnet, opus = "claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805"
    newest = since_anchor(7300, 654321)
    newest_stored: datetime | str = (
        newest.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if dialect == "sqlite" else newest
    )
    # fmt: off
    messages = [
        message_row(
            uid("m-prompt-1"), S1, T1, u1, since_anchor(0.5), "{}", kind="message", author="user",
        ),
        subagent_message(
            uid("m-async"), S1, T1, u1, since_anchor(3, 125), TC_ASYNC,
            tool_status="completed", updated=since_anchor(3, 90125),
            subagent_type="Explore", description="Map the session store layout",
            status="async_launched", agent_id="a1b2c3d4", model=sonnet, is_async=True,
            total_tokens=0, tool_use_count=0, duration_ms=0,
        ),
        subagent_message(
            uid("m-completed"), S1, T1, u1, since_anchor(3.2), TC_COMPLETED,
            tool_status="completed", updated=since_anchor(51.5),
            subagent_type="general-purpose", description="Review the migration for lock order",
            status="completed", agent_id="9f8e7d6c", model=opus, is_async=False,
            total_tokens=15230, tool_use_count=0, duration_ms=48211,
        ),
        message_row(
            uid("m-read"), S1, T1, u1, since_anchor(4.75),
            {"tool_call_id": tool_call("ReadFile"), "status": "completed", "title": "read_file",
             "normalized": {"kind": "read_file", "read_file": {"path": "internal/db/db.go"}}},
        ),
        subagent_message(
            uid("m-started"), S1, T1, u2, since_anchor(120.5), TC_STARTED,
            tool_status="in_progress", updated=since_anchor(120.6),
            subagent_type="explore", description="Find every caller of the message repository",
            status="started", child_session_id="ses_3kq8Zr2mWbX9yT4aLp0vNc1dEf",
            model="openai/gpt-5",
        ),
        subagent_message(
            uid("m-nested"), S1, T1, u2, since_anchor(121), TC_NESTED,
            tool_status="in_progress", updated=since_anchor(121.05), parent=TC_COMPLETED,
            subagent_type="Plan", description="Plan the reconnect change",
            status="async_launched", agent_id="5e4d3c2b", model=sonnet, is_async=True,
        ),
        ordinary_message(uid("m-empty-meta"), S1, T1, u2, since_anchor(122.25), ""),
        message_row(
            uid("m-prompt-2"), S2, T2, u3, since_anchor(3600), "{}", kind="message", author="user",
        ),
        subagent_message(  # AC-21b: the older message of one subagent loses
            M_DUP_OLD, S2, T2, u3, since_anchor(3600.25), TC_DUP,
            tool_status="in_progress", updated=since_anchor(3600.3),
            subagent_type="general-purpose", description="Run the integration suite",
            status="async_launched", agent_id="77aa88bb", model=sonnet, is_async=True,
        ),
        subagent_message(  # ... and the newer one supplies the row
            M_DUP_NEW, S2, T2, u3, since_anchor(3605.5), TC_DUP,
            tool_status="completed", updated=since_anchor(3640),
            subagent_type="general-purpose", description="Run the integration suite",
            status="completed", agent_id="77aa88bb", model=sonnet, is_async=True,
            total_tokens=9120, tool_use_count=4, duration_ms=30500,
        ),
        ordinary_message(uid("m-null-text"), S2, T2, u3, since_anchor(3606), "null"),
        ordinary_message(uid("m-sql-null"), S2, T2, u3, since_anchor(3607), None),
        subagent_message(  # AC-2 / AC-21a: no tool_call_id, skipped
            uid("m-no-tool"), S2, T2, u3, since_anchor(3608), None,
            tool_status="completed", status="completed", description="No tool call id",
        ),
        subagent_message(  # AC-2 / AC-21a: no task id, skipped
            uid("m-no-task"), S2, "", u3, since_anchor(3609), TC_NO_TASK,
            tool_status="completed", status="completed", description="No task id",
        ),
        subagent_message(  # the launching call failed before the child reported: no agent status
            uid("m-failed"), S2, T2, u3, since_anchor(3610), TC_FAILED,
            tool_status="failed", updated=since_anchor(3612), model=sonnet,
            description="Audit error handling in the agent runner",
        ),
        subagent_message(  # AC-21b: a tie on created_at, the greatest id wins
            uid("m-tie-a"), S2, T2, u3, since_anchor(3700, 1), TC_TIE,
            tool_status="failed", description="Trace how turns close on cancel",
        ),
        subagent_message(
            uid("m-tie-b"), S2, T2, u3, since_anchor(3700, 1), TC_TIE,
            tool_status="cancelled", description="Trace how turns close on cancel",
        ),
        subagent_message(  # turn_id '' is stored as NULL (AC-2a); a whole-second created_at
            uid("m-no-turn"), S3, T1, "", since_anchor(7200), TC_NO_TURN,
            tool_status="completed", updated=since_anchor(7210),
            subagent_type="code-reviewer", description="Check the frontend for stale props",
            status="completed", agent_id="0a0b0c0d", model=opus,
            total_tokens=2210, tool_use_count=2, duration_ms=8000,
        ),
        subagent_message(  # the newest subagent message: backfill_through is its created_at
            M_LAST, S3, T1, u4, newest_stored, TC_LAST,
            tool_status="completed", updated=since_anchor(7390),
            subagent_type="test-runner", description="Draft tests for the projection",
            status="completed", agent_id="1c2d3e4f", model=sonnet,
            total_tokens=40110, tool_use_count=12, duration_ms=88400,
        ),
    ]
    # fmt: on
    return sessions, turns, messages


# --- reading back --------------------------------------------------------------------------------


def read_keys(engine: sa.Engine) -> dict[str, str | None]:
    with engine.connect() as conn:
        return keys.read_keys(conn)


def key_instant(engine: sa.Engine, key: str) -> Instant:
    value = read_keys(engine)[key]
    if not value:
        raise KandevDqError(f"the baseline has no usable {key} ({value!r})")
    return parse_key(value)


def latest_message(engine: sa.Engine) -> datetime | None:
    m = schema.task_session_messages
    with engine.connect() as conn:
        value = conn.execute(sa.select(sa.func.max(utc_instant(m.c.created_at)))).scalar()
    return None if value is None else parse_stored(value)


def next_free(engine: sa.Engine) -> datetime:
    """One second after the newest message and every key: where new live traffic goes."""
    candidates = [latest_message(engine) or anchor()]
    keys = read_keys(engine)
    for key in (CAPTURE_SINCE, EXECUTION_SINCE):
        value = keys[key]
        if value:
            try:
                candidates.append(parse_key(value).bound())
            except MalformedKey:  # a defective key in a column's form is still an instant
                candidates.append(parse_stored(value))
    return max(candidates) + SECOND


# --- the baseline, step by step ---------------------------------------------------------------


def create(engine: sa.Engine, *, subagents: str | None = None) -> None:
    """Kandev's base tables (a store predating the feature), optionally the subagents table."""
    StoreBuilder(engine).create(subagents=subagents)


def write_history(engine: sa.Engine, *, subagents: bool = True) -> None:
    """The baseline's history in one transaction (see :func:`history`)."""
    sessions, turns, messages = history(engine.dialect.name)
    if not subagents:
        messages = [m for m in messages if "subagent_task" not in (m["metadata"] or "")]
    with writing(engine) as conn:
        insert_rows(conn, schema.task_sessions, sessions)
        insert_rows(conn, schema.task_session_turns, turns)
        insert_rows(conn, schema.task_session_messages, messages)


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
        schema.REBUILD_TABLE in sql or ("ALTER TABLE" in sql and "ADD COLUMN" in sql)
    ),
}


class _InjectedFault(Exception):
    """A statement failed on purpose, to reproduce a failed migration step."""


def run_migration(engine: sa.Engine, *, fail: str | None = None) -> migrate.MigrationReport:
    """The real runner on this store; ``fail`` names a step to make fail (a test seam)."""
    from kandev_dq.store.access import open_store

    store = open_store(store_url(engine), read_only=False)
    log = logging.getLogger("kandev_dq.migration")
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
    start = start or next_free(engine)
    turn = uid("turn-live")
    # fmt: off
    messages = [
        subagent_message(
            uid("m-live-async"), SL, TL, turn, start, TC_LIVE_ASYNC,
            tool_status="completed", updated=start + 80 * MILLISECOND,
            subagent_type="Explore", description="Investigate the slow diff endpoint",
            status="async_launched", agent_id="c0ffee01", model="claude-sonnet-4-5-20250929",
            is_async=True, total_tokens=0, tool_use_count=0, duration_ms=0,
        ),
        subagent_message(
            uid("m-live-completed"), SL, TL, turn, start + step, TC_LIVE_COMPLETED,
            tool_status="completed", updated=start + step + 61 * SECOND,
            subagent_type="general-purpose", description="Summarise the failing tests",
            status="completed", agent_id="c0ffee02", model="claude-opus-4-1-20250805",
            is_async=False, total_tokens=18342, tool_use_count=7, duration_ms=61250,
        ),
        subagent_message(
            uid("m-live-running"), SL, TL, turn, start + 2 * step, TC_LIVE_RUNNING,
            tool_status="in_progress", updated=start + 2 * step + 40 * MILLISECOND,
            subagent_type="explore", description="Search for flaky tests",
            status="started", child_session_id="ses_9Xc2Lm4Np6Qr8St0Uv2Wx4Yz6A",
            model="openai/gpt-5",
        ),
    ]
    # fmt: on
    rows = [healthy_row(m, execution, m["created_at"] + 250 * MICROSECOND) for m in messages]
    with writing(engine) as conn:
        has_session = conn.execute(
            sa.select(sa.func.count()).where(schema.task_sessions.c.id == SL)
        ).scalar_one()
        if not has_session:
            insert_rows(conn, schema.task_sessions, [session_row(SL, TL, start - SECOND)])
        insert_rows(conn, schema.task_session_turns, [turn_row(turn, SL, TL, start - MILLISECOND)])
        insert_rows(conn, schema.task_session_messages, messages)
        insert_rows(conn, schema.subagents, rows)


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


# --- the pre-amendment build ---------------------------------------------------------------------


def legacy_capture() -> datetime:
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
    mapped = mapping.backfill_select(engine.dialect.name).subquery("mapped")
    captured = legacy_capture()
    with writing(engine) as conn:
        conn.execute(
            legacy.insert().from_select(columns, sa.select(*(mapped.c[c] for c in columns)))
        )
        newest = conn.execute(
            migration_backfill.backfill_through_statement(conn.dialect.name)
        ).scalar()
        conn.execute(  # the old writer truncated both keys to the second
            schema.kandev_meta.insert(),
            [
                {"key": CAPTURE_SINCE, "value": rfc3339_seconds(captured)},
                {"key": BACKFILL_THROUGH, "value": rfc3339_seconds(parse_stored(newest))},
            ],
        )
        turn = uid("turn-legacy-live")
        insert_rows(
            conn, schema.task_session_turns, [turn_row(turn, S3, T1, captured + 5 * SECOND)]
        )
        # fmt: off
        messages = [
            subagent_message(
                uid("m-legacy-live-1"), S3, T1, turn, captured + 10 * SECOND + 5 * MICROSECOND,
                tool_call("LegacyLiveLaunch"), tool_status="completed",
                updated=captured + 10 * SECOND + 90 * MILLISECOND, subagent_type="Explore",
                description="Map the task lifecycle", status="async_launched",
                agent_id="d00d0001", model="claude-haiku-4-5-20251001", is_async=True,
            ),
            subagent_message(
                uid("m-legacy-live-2"), S3, T1, turn, captured + 12 * SECOND,
                tool_call("LegacyLiveDone"),
                tool_status="completed", updated=captured + 40 * SECOND,
                subagent_type="general-purpose", description="Trace the cancel path",
                status="completed", agent_id="d00d0002", model="claude-haiku-4-5-20251001",
                total_tokens=5120, tool_use_count=3, duration_ms=27000,
            ),
        ]
        # fmt: on
        insert_rows(conn, schema.task_session_messages, messages)
        rows = [healthy_row(m, None, m["created_at"] + 300 * MICROSECOND) for m in messages]
        insert_rows(conn, legacy, rows)
