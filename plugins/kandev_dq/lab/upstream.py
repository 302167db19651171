"""Stores in upstream Kandev's own shapes, built from the contract and from what its stores hold.

Nothing here is upstream code: the shapes come from CONTRACT §1, §3 and §4 and from stores
that upstream's Go code wrote (measured 2026-11):

* the full table set: the contract's tables beside tables that are not its concern
  (``workspaces``, ``tasks``) and a ``kandev_meta`` key of another feature;
* subagent launches are messages of ``type='tool_call'`` whose metadata is serialised as Go
  does it: compact JSON, top-level keys sorted, empty payload fields omitted, raw ACP tool
  statuses (``pending``, ``in_progress``, ``completed``, ``failed``);
* ``'null'`` metadata where an update carried a nil map (AC-23b);
* the turn-end sweep: every tool message still unfinished when its turn ends gets
  ``updated_at = CURRENT_TIMESTAMP``. On SQLite that is ``YYYY-MM-DD HH:MM:SS`` (whole
  seconds, no offset), so a sweep in the second a message was created reads *earlier* than
  its fractional ``created_at`` (CONTRACT §1); PostgreSQL keeps µs;
* instants at Go's resolution: up to 9 fraction digits on SQLite, trailing zeros trimmed;
  µs on PostgreSQL, where pgx truncates, keys included;
* nested subagents, and a tool_call_id a later turn of one session reuses (AC-21b);
* activation as upstream's build does it: the table created already amended, the backfill
  with ``capture_since`` and ``backfill_through``, and **no** ``execution_since`` (CONTRACT
  §3, "upstream departure"), so the store reads ``capture_only``.

A store lives three steps: :func:`build_upstream_store`, then kandev-dq's ``migrate`` (which
writes only ``execution_since``: the AC-33b self-heal), then :func:`append_upstream_live`, a
live writer in upstream's shape. The same seed yields the same rows on both dialects.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    Instant,
    parse_key,
    parse_stored,
)
from kandev_dq.lab.gotime import MICROSECOND_NS, SECOND_NS, go_text
from kandev_dq.lab.livewriter import healthy_live_row
from kandev_dq.lab.storebuilder import SUBAGENT_FIELDS
from kandev_dq.migration import backfill as migration_backfill
from kandev_dq.sql import keys
from kandev_dq.sql.dialect import utc_instant

MILLISECOND_NS = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Tables an upstream store holds that are no concern of the contract's.
OTHER_TABLES = sa.MetaData()
workspaces = sa.Table(
    "workspaces",
    OTHER_TABLES,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("created_at", schema.StoredTimestamp, nullable=False),
)
tasks = sa.Table(
    "tasks",
    OTHER_TABLES,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("workspace_id", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False, server_default="TODO"),
    sa.Column("created_at", schema.StoredTimestamp, nullable=False),
    sa.Column("updated_at", schema.StoredTimestamp, nullable=False),
)
#: A key of another feature in the shared ``kandev_meta`` (CONTRACT §1: never ours to touch).
OTHER_META_KEY = "telemetry_install_id"

UNFINISHED = ("pending", "in_progress")
SESSIONS = 6
TURNS_PER_SESSION = 4
HISTORY_SPAN = timedelta(days=2)
#: Every this many turns, one ends in the same second its last, unfinished launch began.
SAME_SECOND_SWEEP_EVERY = 6

_SUBAGENT_TYPES = ("general-purpose", "Explore", "Plan", "code-reviewer")
_MODELS = ("claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "claude-haiku-4-5-20251001")
_DESCRIPTIONS = (
    "Explore the session store layout",
    "Review the migration for lock ordering",
    "Run the integration suite and summarise failures",
    "Plan the websocket reconnect change",
    "Trace how turns are closed on cancel",
)


# --- instants ------------------------------------------------------------------------------


def now_ns() -> int:
    return time.time_ns()


def epoch_ns(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1) * MICROSECOND_NS


def current_timestamp_text(ns: int) -> str:
    """What SQLite's ``CURRENT_TIMESTAMP`` writes at ``ns``: whole seconds, no offset."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ns // SECOND_NS))


def _truncated(ns: int) -> datetime:
    """The µs a PostgreSQL column keeps of ``ns`` (pgx truncates)."""
    return _EPOCH + timedelta(microseconds=ns // MICROSECOND_NS)


def _column(dialect: str, ns: int) -> str | datetime:
    return go_text(ns) if dialect == "sqlite" else _truncated(ns)


def _key(dialect: str, ns: int) -> str:
    """An RFC3339Nano key as upstream writes it on this dialect (µs on PostgreSQL)."""
    if dialect != "sqlite":
        ns -= ns % MICROSECOND_NS
    return Instant.from_epoch_ns(ns).rfc3339nano()


# --- messages ------------------------------------------------------------------------------


def upstream_metadata(
    tool_call_id: str, tool_status: str, task: dict[str, Any], *, parent: str | None = None
) -> str:
    """A subagent launch's metadata as Go's ``json.Marshal`` writes it: compact, top-level
    keys sorted, empty payload fields omitted (``omitempty``), in the contract's field order."""
    payload = {k: task[k] for k in SUBAGENT_FIELDS if task.get(k) not in (None, "", 0, False)}
    top: dict[str, Any] = {
        "normalized": {"kind": "subagent_task", "subagent_task": payload},
        "status": tool_status,
        "title": "Task",
        "tool_call_id": tool_call_id,
    }
    if parent:
        top["parent_tool_call_id"] = parent
    return json.dumps(dict(sorted(top.items())), separators=(",", ":"), ensure_ascii=False)


@dataclass
class _Message:
    id: str
    turn_id: str
    author_type: str
    type: str
    content: str
    metadata: str | None
    created: int
    #: the last update for a finished message; None until the turn-end sweep stamps it
    updated: int | None = None
    swept: int | None = None
    subagent: dict[str, Any] | None = None

    @property
    def unfinished(self) -> bool:
        return self.updated is None

    def row(self, dialect: str, session_id: str, task_id: str) -> dict[str, Any]:
        if self.swept is not None:
            updated = (
                current_timestamp_text(self.swept)
                if dialect == "sqlite"
                else _truncated(self.swept)
            )
        else:
            updated = _column(dialect, self.updated or self.created)
        return {
            "id": self.id,
            "task_session_id": session_id,
            "task_id": task_id,
            "turn_id": self.turn_id,
            "author_type": self.author_type,
            "author_id": "",
            "content": self.content,
            "requests_input": 0,
            "type": self.type,
            "metadata": self.metadata,
            "created_at": _column(dialect, self.created),
            "updated_at": updated,
        }


@dataclass
class _Turn:
    id: str
    session_id: str
    task_id: str
    started: int
    ended: int = 0
    messages: list[_Message] = field(default_factory=list)

    def row(self, dialect: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "task_session_id": self.session_id,
            "task_id": self.task_id,
            "started_at": _column(dialect, self.started),
            "completed_at": _column(dialect, self.ended),
            "metadata": "{}",
            "created_at": _column(dialect, self.started),
            "updated_at": _column(dialect, self.ended),
        }


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _tool_call_id(rng: random.Random) -> str:
    return "toolu_01" + "".join(
        rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789", k=22)
    )


def _launch_payload(
    rng: random.Random, *, unfinished: bool = False
) -> tuple[dict[str, Any], str, int | None]:
    """A subagent's payload, its launching call's ACP status, and how long after creation the
    call finished (None: still unfinished when the turn ends, as ``unfinished`` demands)."""
    task: dict[str, Any] = {
        "subagent_type": rng.choice(_SUBAGENT_TYPES),
        "description": rng.choice(_DESCRIPTIONS),
    }
    roll = rng.random()
    if unfinished:
        roll = 0.5 * roll if roll < 0.5 else 0.8 + 0.12 * roll  # async or OpenCode only
    if roll < 0.55:  # async: the launch returns at once; the child keeps running
        task |= {"status": "async_launched", "agent_id": f"{rng.getrandbits(32):08x}"}
        task |= {"model": rng.choice(_MODELS), "is_async": True}
        if not unfinished and rng.random() < 0.8:
            return task, "completed", rng.randint(80, 900) * MILLISECOND_NS
        return task, "in_progress", None
    if roll < 0.8:
        duration = rng.randint(3_000, 120_000)
        task |= {"status": "completed", "agent_id": f"{rng.getrandbits(32):08x}"}
        task |= {"model": rng.choice(_MODELS), "duration_ms": duration}
        task |= {"total_tokens": rng.randint(1_500, 90_000), "tool_use_count": rng.randint(0, 30)}
        return task, "completed", duration * MILLISECOND_NS + rng.randint(5, 400) * MILLISECOND_NS
    if roll < 0.92:  # OpenCode: a child session, no agent id, no metrics yet
        task |= {"status": "started", "model": "openai/gpt-5"}
        task["child_session_id"] = "ses_" + "".join(rng.choices("0123456789abcdefXYZ", k=26))
        return task, rng.choice(UNFINISHED), None
    del task["subagent_type"]  # the launching call failed before the child reported
    return task, "failed", rng.randint(200, 5_000) * MILLISECOND_NS


def _launch(
    rng: random.Random,
    turn: _Turn,
    at: int,
    tool_call_id: str,
    parent: str | None,
    *,
    unfinished: bool = False,
) -> _Message:
    task, tool_status, finished_after = _launch_payload(rng, unfinished=unfinished)
    metadata = upstream_metadata(tool_call_id, tool_status, task, parent=parent)
    head = f"Task({task.get('subagent_type') or 'agent'}): {task['description']}"
    return _Message(
        id=_uuid(rng),
        turn_id=turn.id,
        author_type="agent",
        type="tool_call",
        content=head,
        metadata=metadata,
        created=at,
        updated=None if finished_after is None else at + finished_after,
        subagent=json.loads(metadata),
    )


def _ordinary(rng: random.Random, turn: _Turn, at: int) -> _Message:
    """An agent message that launches nothing: text, an ordinary tool call, or a nil update."""
    roll = rng.random()
    if roll < 0.5:
        kind, metadata, after = "message", "{}", 0
    elif roll < 0.9:
        status = rng.choice(("completed", "completed", "completed", "failed", "in_progress"))
        call = {
            "normalized": {"kind": "read_file", "read_file": {"path": "internal/task/service.go"}},
            "status": status,
            "title": "read_file",
            "tool_call_id": _tool_call_id(rng),
        }
        kind, metadata = "tool_call", json.dumps(call, separators=(",", ":"))
        after = None if status == "in_progress" else rng.randint(20, 3_000) * MILLISECOND_NS
    else:  # an update that carried a nil map serialises as 'null' (AC-23b)
        kind, metadata, after = "message", "null", 0
    return _Message(
        id=_uuid(rng),
        turn_id=turn.id,
        author_type="agent",
        type=kind,
        content="Looking into it.",
        metadata=metadata,
        created=at,
        updated=None if after is None else at + after,
    )


def _play_turn(
    rng: random.Random,
    turn: _Turn,
    *,
    launches: list[tuple[str, str | None]],
    same_second_sweep: bool,
) -> None:
    """A turn from its prompt to its end: ordinary messages and the given launches
    (tool_call_id, parent) interleaved, then the turn-end sweep of unfinished tool messages.

    With ``same_second_sweep`` the last launch stays unfinished and the turn ends in the
    second it began, so on SQLite its swept ``updated_at`` reads before its ``created_at``.
    """
    now = turn.started
    turn.messages.append(
        _Message(_uuid(rng), turn.id, "user", "message", "Please look into it.", "{}", now, now)
    )
    plan: list[tuple[str, str | None] | None] = [None] * rng.randint(2, 6) + list(launches)
    last = plan.pop() if same_second_sweep else None
    rng.shuffle(plan)
    # A nested child must follow its parent: keep launches in their own order.
    slots = [i for i, step in enumerate(plan) if step is not None]
    for slot, launch in zip(slots, [s for s in launches if s is not last], strict=True):
        plan[slot] = launch
    for step in plan:
        now += rng.randint(30, 4_000) * MILLISECOND_NS + rng.randint(1, 999)
        message = _ordinary(rng, turn, now) if step is None else _launch(rng, turn, now, *step)
        turn.messages.append(message)
    finished = [m.updated for m in turn.messages if m.updated is not None]
    turn.ended = max([now, *finished]) + rng.randint(10, 500) * MILLISECOND_NS
    if last is not None:
        # Begin a fraction into the next second and end before it is out.
        second = turn.ended // SECOND_NS + 1
        begun = second * SECOND_NS + rng.randint(100, 500) * MILLISECOND_NS + rng.randint(1, 999)
        turn.messages.append(_launch(rng, turn, begun, *last, unfinished=True))
        turn.ended = second * SECOND_NS + rng.randint(600, 950) * MILLISECOND_NS
    for message in turn.messages:
        if message.type == "tool_call" and message.unfinished:
            message.swept = turn.ended


# --- building ------------------------------------------------------------------------------


@dataclass
class UpstreamSummary:
    """What :func:`build_upstream_store` or :func:`append_upstream_live` wrote."""

    turns: int = 0
    messages: int = 0
    subagent_messages: int = 0
    swept: int = 0
    swept_in_creation_second: int = 0
    rows: int = 0


def build_upstream_store(
    engine: sa.Engine, *, seed: int = 0, activated_at: int | None = None
) -> UpstreamSummary:
    """History in upstream's shapes, then activation as upstream's build does it.

    The history spans the two days that end an hour before ``activated_at`` (nanoseconds;
    default now), on whole seconds. Activation creates the amended table, runs the backfill
    and writes ``capture_since`` and ``backfill_through`` in one transaction, and no
    ``execution_since``.
    """
    activated = now_ns() if activated_at is None else activated_at
    rng = random.Random(f"kandev-dq upstream {seed}")
    # On a whole second, so that a seed lays every instant out the same way in its second.
    end = activated - activated % SECOND_NS - 3600 * SECOND_NS
    begin = end - HISTORY_SPAN // timedelta(microseconds=1) * MICROSECOND_NS
    sessions = [(_uuid(rng), _uuid(rng)) for _ in range(SESSIONS)]
    turns = _history(rng, sessions, begin, end)
    with engine.begin() as conn:
        schema.create_base_tables(conn)
        OTHER_TABLES.create_all(conn)
        _write_workspace(conn, rng, sessions, turns, begin)
    summary = _write(engine, turns, [])
    _activate(engine, turns, activated)
    return summary


def _write_workspace(
    conn: sa.Connection,
    rng: random.Random,
    sessions: list[tuple[str, str]],
    turns: list[_Turn],
    created: int,
) -> None:
    """The workspace, its tasks and their sessions, and another feature's meta key."""
    dialect = conn.dialect.name
    workspace = _uuid(rng)
    conn.execute(
        workspaces.insert().values(
            id=workspace, name="kandev", created_at=_column(dialect, created)
        )
    )
    conn.execute(schema.kandev_meta.insert().values(key=OTHER_META_KEY, value=_uuid(rng)))
    first = {t.session_id: t.started for t in reversed(turns)}
    last = {t.session_id: t.ended for t in turns}
    conn.execute(
        tasks.insert(),
        [
            {
                "id": task_id,
                "workspace_id": workspace,
                "title": f"Task {n}",
                "created_at": _column(dialect, first[sid] - 2 * SECOND_NS),
                "updated_at": _column(dialect, last[sid]),
            }
            for n, (sid, task_id) in enumerate(sessions)
        ],
    )
    conn.execute(
        schema.task_sessions.insert(),
        [
            {
                "id": sid,
                "task_id": task_id,
                "started_at": _column(dialect, first[sid] - SECOND_NS),
                "updated_at": _column(dialect, last[sid]),
            }
            for sid, task_id in sessions
        ],
    )


def _history(
    rng: random.Random, sessions: list[tuple[str, str]], begin: int, end: int
) -> list[_Turn]:
    """Every session's turns, spread over ``[begin, end)``: nested launches, a reused
    tool_call_id in a session's last turn, and same-second sweeps every few turns."""
    turns: list[_Turn] = []
    slot = (end - begin) // (len(sessions) * TURNS_PER_SESSION)
    count = 0
    for s, (session_id, task_id) in enumerate(sessions):
        first_call: str | None = None
        for t in range(TURNS_PER_SESSION):
            start = begin + count * slot + rng.randint(0, slot // 4)
            turn = _Turn(_uuid(rng), session_id, task_id, start)
            calls = [_tool_call_id(rng) for _ in range(rng.randint(1, 3))]
            launches: list[tuple[str, str | None]] = [(c, None) for c in calls]
            if len(calls) > 1 and (s + t) % 3 == 0:
                launches[1] = (calls[1], calls[0])  # a nested child of the first launch
            if t == TURNS_PER_SESSION - 1 and first_call is not None:
                launches.append((first_call, None))  # a later execution reuses an id
            first_call = first_call or calls[0]
            count += 1
            _play_turn(
                rng,
                turn,
                launches=launches,
                same_second_sweep=count % SAME_SECOND_SWEEP_EVERY == 0,
            )
            turns.append(turn)
    return turns


def _write(engine: sa.Engine, turns: list[_Turn], rows: list[dict[str, Any]]) -> UpstreamSummary:
    """Turns, their messages and the given subagent rows, in one transaction."""
    dialect = engine.dialect.name
    messages = [m for turn in turns for m in turn.messages]
    with engine.begin() as conn:
        conn.execute(schema.task_session_turns.insert(), [t.row(dialect) for t in turns])
        conn.execute(
            schema.task_session_messages.insert(),
            [m.row(dialect, t.session_id, t.task_id) for t in turns for m in t.messages],
        )
        if rows:
            conn.execute(schema.subagents.insert(), rows)
    return UpstreamSummary(
        turns=len(turns),
        messages=len(messages),
        subagent_messages=sum(m.subagent is not None for m in messages),
        swept=sum(m.swept is not None for m in messages),
        swept_in_creation_second=sum(
            m.swept is not None and m.swept // SECOND_NS == m.created // SECOND_NS for m in messages
        ),
        rows=len(rows),
    )


def _activate(engine: sa.Engine, turns: list[_Turn], activated: int) -> None:
    """Upstream's activation: the amended table, then the backfill and its two keys in one
    transaction (AC-24d); ``execution_since`` is never written (CONTRACT §3)."""
    dialect = engine.dialect.name
    launched = [m.created for t in turns for m in t.messages if m.subagent is not None]
    through = _key(dialect, max(launched)) if launched else ""
    with engine.begin() as conn:
        schema.create_subagents_table(conn, amended=True)
    with engine.begin() as conn:
        conn.execute(migration_backfill.backfill_statement(dialect))
        conn.execute(
            schema.kandev_meta.insert(),
            [
                {"key": BACKFILL_THROUGH, "value": through},
                {"key": CAPTURE_SINCE, "value": _key(dialect, activated)},
            ],
        )


# --- the live writer -----------------------------------------------------------------------


def append_upstream_live(engine: sa.Engine, *, seed: int = 0, turns: int = 4) -> UpstreamSummary:
    """``turns`` new turns whose launches a healthy live writer records, in upstream's shapes.

    Each session's turns run in one agent execution (a real UUID). Messages and rows start
    a second after the newest message and every activation key; rows follow CONTRACT §2
    through :func:`kandev_dq.lab.livewriter.healthy_live_row`, stamped at Go's resolution.
    """
    dialect = engine.dialect.name
    rng = random.Random(f"kandev-dq upstream live {seed}")
    with engine.connect() as conn:
        sessions = [
            (r.id, r.task_id)
            for r in conn.execute(
                sa.select(schema.task_sessions.c.id, schema.task_sessions.c.task_id).order_by(
                    schema.task_sessions.c.id
                )
            )
        ]
        start = _next_free(conn)
    executions = {sid: _uuid(rng) for sid, _ in sessions}
    played: list[_Turn] = []
    rows: list[dict[str, Any]] = []
    now = start
    for n in range(turns):
        session_id, task_id = sessions[n % len(sessions)]
        turn = _Turn(_uuid(rng), session_id, task_id, now)
        calls = [_tool_call_id(rng) for _ in range(rng.randint(1, 3))]
        launches: list[tuple[str, str | None]] = [(c, None) for c in calls]
        if len(calls) > 1:
            launches[-1] = (calls[-1], calls[0])
        _play_turn(rng, turn, launches=launches, same_second_sweep=n == 0)
        for message in turn.messages:
            if message.subagent is not None:
                rows.append(_live_row(rng, dialect, message, turn, executions[session_id]))
        played.append(turn)
        now = turn.ended + rng.randint(1, 30) * SECOND_NS
    return _write(engine, played, rows)


def _next_free(conn: sa.Connection) -> int:
    """A second after the newest message and after every activation key present."""
    m = schema.task_session_messages
    latest = conn.execute(sa.select(sa.func.max(utc_instant(m.c.created_at)))).scalar()
    present = keys.read_keys(conn)
    candidates = [0 if latest is None else epoch_ns(parse_stored(latest))]
    for name in (CAPTURE_SINCE, EXECUTION_SINCE):
        if present.get(name):
            candidates.append(epoch_ns(parse_key(present[name]).bound()))
    return max(candidates) + SECOND_NS


def _live_row(
    rng: random.Random, dialect: str, message: _Message, turn: _Turn, execution: str
) -> dict[str, Any]:
    observed = message.created + rng.randint(1, 3_000) * MICROSECOND_NS + rng.randint(0, 999)
    row = healthy_live_row(
        message.subagent or {},
        session_id=turn.session_id,
        task_id=turn.task_id,
        turn_id=turn.id,
        execution=execution,
        observed=observed,
        last_update=message.updated if message.updated is not None else observed,
        unsettled_lag=lambda: rng.randint(0, 5_000) * MICROSECOND_NS,
    )
    for name in ("observed_at", "settled_at", "updated_at"):
        if row[name] is not None:
            row[name] = _column(dialect, row[name])
    return {"id": _uuid(rng), **row}
