"""Sample Kandev stores: the tables of CONTRACT §1 filled with realistic, seed-determined data.

Two modes:

* :func:`generate` writes *history* — sessions, turns and messages as a store holds them
  before the subagent feature is activated (the backfill's source, CONTRACT §4). Every scale
  unit has the same reference shape: 38 sessions, 127 turns, 253 subagent
  messages (190 ``async_launched``, 57 ``completed``, 5 ``started``, 1 without a status),
  a fixed fan-out per turn, one nested subagent, about ten ordinary messages per subagent
  message and a few legacy rows whose metadata is ``''``, ``'null'`` or NULL (AC-23b).
* :func:`append_live_traffic` appends subagent messages created after ``capture_since`` and,
  for a healthy writer, the ``task_session_subagents`` rows a correct live writer leaves
  (CONTRACT §2); a stopped writer leaves none (the AC-26 shortfall).

The same seed yields the same rows on both dialects. Timestamps are UTC; SQLite receives
Go's text form (``2026-07-30 01:39:37.271235+00:00``, zeros trimmed:
:func:`kandev_dq.lab.gotime.go_text`), PostgreSQL naive UTC; the columns holding instants are
named in :data:`INSTANT_COLUMNS`. Rows are produced one scale unit at a time and written in
chunks (executemany on SQLite, COPY on PostgreSQL), so memory stays flat at any scale.

The module is longer than most: history and live traffic share the message model, the
text generator, the launch metadata and the bulk writer, and each mode's rows depend on the
order of its draws from one seeded generator, which a split across modules would obscure.
"""

from __future__ import annotations

import json
import random
import string
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import CAPTURE_SINCE, parse_key, parse_stored
from kandev_dq.lab.gotime import go_text_us
from kandev_dq.lab.livewriter import healthy_live_row
from kandev_dq.sql.dialect import utc_instant

# --- the per-unit shape --------------------------------------------------------------------

SESSIONS_PER_UNIT = 38
#: subagent messages in a turn -> number of such turns (127 turns, 253 messages).
FANOUT_TURNS = {1: 65, 2: 12, 3: 42, 4: 5, 5: 2, 8: 1}
TURNS_PER_UNIT = sum(FANOUT_TURNS.values())
#: agent status (the nested ``subagent_task.status``; None = key absent) -> messages.
AGENT_STATUS_MIX: dict[str | None, int] = {
    "async_launched": 190,
    "completed": 57,
    "started": 5,
    None: 1,
}
SUBAGENT_MESSAGES_PER_UNIT = sum(k * n for k, n in FANOUT_TURNS.items())
COMPLETED_WITHOUT_MODEL = 8
WITHOUT_SUBAGENT_TYPE = 3
NESTED_PER_UNIT = 1
#: legacy metadata value -> rows per unit (AC-23b); keys name them in SampleSummary.
LEGACY_METADATA = {"empty": "", "null_text": "null", "sql_null": None}
LEGACY_PER_KIND = 2

assert SUBAGENT_MESSAGES_PER_UNIT == sum(AGENT_STATUS_MIX.values()) == 253

#: The instant generated history ends before when ``start`` is not given (fixed: deterministic).
DEFAULT_START = datetime(2026, 8, 3, tzinfo=UTC)
HISTORY_SPAN = timedelta(days=4)
#: Gap between the last generated message and ``start`` (covers every updated_at, too).
END_MARGIN = timedelta(hours=1)
CHUNK_MESSAGES = 20_000

MESSAGE_COLUMNS = (
    "id",
    "task_session_id",
    "task_id",
    "turn_id",
    "author_type",
    "author_id",
    "content",
    "requests_input",
    "type",
    "metadata",
    "created_at",
    "updated_at",
)
TURN_COLUMNS = (
    "id",
    "task_session_id",
    "task_id",
    "started_at",
    "completed_at",
    "metadata",
    "created_at",
    "updated_at",
)
SESSION_COLUMNS = ("id", "task_id", "started_at", "updated_at")
#: The columns of those rows holding instants (µs after the epoch until written).
INSTANT_COLUMNS = frozenset({"started_at", "completed_at", "created_at", "updated_at"})

_SUBAGENT_TYPES = (
    ("general-purpose", 50),
    ("Explore", 25),
    ("Plan", 10),
    ("code-reviewer", 8),
    ("test-runner", 7),
)
_MODELS = (
    ("claude-sonnet-4-5-20250929", 60),
    ("claude-haiku-4-5-20251001", 25),
    ("claude-opus-4-1-20250805", 15),
)
_OPENCODE_MODELS = ("anthropic/claude-sonnet-4-5", "openai/gpt-5", "google/gemini-2.5-pro")
_DESCRIPTIONS = (
    "Explore the session store layout",
    "Find every caller of the message repository",
    "Review the migration for lock ordering",
    "Run the integration suite and summarise failures",
    "Plan the websocket reconnect change",
    "Search for flaky tests in the orchestrator",
    "Audit error handling in the agent runner",
    "Map the task lifecycle state machine",
    "Check the frontend for stale session props",
    "Investigate the slow diff endpoint",
    "Draft tests for the subagent projection",
    "Trace how turns are closed on cancel",
)
_ORDINARY_TOOLS = ("read_file", "shell_exec", "code_search", "modify_file")
_FILES = (
    "internal/task/service.go",
    "internal/agent/lifecycle/manager.go",
    "internal/orchestrator/executor.go",
    "apps/web/components/session-panel.tsx",
    "internal/db/migrations.go",
    "internal/task/repository/sqlite/messages.go",
)
_PROSE = (
    "the session agent turn message task store backfill writer reads rows from and into "
    "subagent context schema migration index query returns error handler test fixture "
    "config build run check review plan explore search file line function struct method "
    "value key column table update insert select where order group join cascade delete "
    "timestamp instant fraction second offset sentinel execution status tool call result "
    "output input stream frame event websocket client server request response retry lock "
    "transaction commit rollback snapshot isolation repeatable read write health shortfall "
    "excess metric tokens duration count async launched completed started pending progress"
)
_ALNUM = string.ascii_letters + string.digits

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_SECOND = 1_000_000
_MS = 1000


@dataclass
class SampleSummary:
    """What :func:`generate` wrote."""

    scale: int
    seed: int
    sessions: int
    turns: int
    messages: int
    subagent_messages: int
    #: nested ``subagent_task.status`` -> messages; None counts messages without a status.
    by_agent_status: dict[str | None, int] = field(default_factory=dict)
    #: 'empty' ('' metadata), 'null_text' ('null'), 'sql_null' (NULL) -> messages (AC-23b).
    legacy_metadata: dict[str, int] = field(default_factory=dict)
    first_created_at: datetime | None = None
    last_created_at: datetime | None = None

    @property
    def ordinary_messages(self) -> int:
        return self.messages - self.subagent_messages


# --- store creation ------------------------------------------------------------------------


def create_store(
    engine: sa.Engine,
    *,
    subagents: Literal[None, "pre_amendment", "amended"] = None,
) -> None:
    """Create Kandev's base tables and, optionally, ``task_session_subagents`` in one shape.

    ``None`` is a store predating the feature (AC-17's starting point), ``"pre_amendment"``
    has the two-column UNIQUE and no ``agent_execution_id`` (AC-33's starting point).
    """
    if subagents not in (None, "pre_amendment", "amended"):
        raise ValueError(f"subagents must be None, 'pre_amendment' or 'amended', not {subagents!r}")
    with engine.begin() as conn:
        schema.create_base_tables(conn)
        if subagents is not None:
            schema.create_subagents_table(conn, amended=subagents == "amended")


# --- time ----------------------------------------------------------------------------------


def _micros(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(microseconds=1)


def _aware(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def _naive(us: int) -> datetime:
    return _NAIVE_EPOCH + timedelta(microseconds=us)


def _realistic(us: int, prev: int, rng: random.Random) -> int:
    """A strictly increasing instant after ``prev``, sometimes at a whole second or ms.

    Upstream writers stamp at µs, ms and second resolution, so stored widths vary (§1);
    rounding only ever moves down and never to or below ``prev``.
    """
    us = max(us, prev + 1)
    roll = rng.random()
    if roll < 0.10:
        candidate = us - us % _SECOND
    elif roll < 0.30:
        candidate = us - us % _MS
    else:
        return us
    return candidate if candidate > prev else us


# --- identifiers and text ------------------------------------------------------------------


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _tool_call_id(rng: random.Random) -> str:
    return "toolu_01" + "".join(rng.choices(_ALNUM, k=22))


def _weighted(rng: random.Random, pairs) -> str:
    return rng.choices([v for v, _ in pairs], weights=[w for _, w in pairs])[0]


class _Text:
    """Deterministic prose sliced into message bodies (cheap at a million rows)."""

    def __init__(self, rng: random.Random, size: int = 1 << 18) -> None:
        words = rng.choices(_PROSE.split(), k=size // 5)
        self.corpus = " ".join(words)
        self.rng = rng

    def body(self, low: int = 120, high: int = 6000) -> str:
        length = int(min(high, max(low, self.rng.lognormvariate(6.0, 0.75))))
        start = self.rng.randrange(len(self.corpus) - length)
        return self.corpus[start : start + length]


# --- message payloads ----------------------------------------------------------------------


@dataclass(slots=True)
class _Message:
    id: str
    session_id: str
    task_id: str
    turn_id: str
    author_type: str
    content: str
    type: str
    metadata: str | None
    natural: float = 0.0  # seconds on the session's own clock, before placement
    settle_after_us: int = 0  # updated_at - created_at
    requests_input: int = 0
    created_us: int = 0
    subagent: dict | None = None  # the parsed metadata of a subagent message

    def row(self) -> tuple:
        return (
            self.id,
            self.session_id,
            self.task_id,
            self.turn_id,
            self.author_type,
            "",
            self.content,
            self.requests_input,
            self.type,
            self.metadata,
            self.created_us,
            self.created_us + self.settle_after_us,
        )


def _subagent_metadata(
    rng: random.Random,
    status: str | None,
    *,
    tool_call_id: str,
    parent_tool_call_id: str | None = None,
    with_model: bool = True,
    with_type: bool = True,
    zero_metrics: bool = False,
    empty_strings: bool = False,
) -> tuple[dict, int]:
    """The metadata of one subagent message and how long after creation it was last updated.

    The top-level ``status`` is the ACP status of the launching tool call; the nested one is
    the child's own status. They differ in real traffic (AC-10..12: never conflate them).
    """
    task: dict = {}
    if with_type:
        task["subagent_type"] = _weighted(rng, _SUBAGENT_TYPES)
    task["description"] = rng.choice(_DESCRIPTIONS)
    if status is not None:
        task["status"] = status
    if status == "async_launched":
        # The launch call returns at once; the child keeps running with no metrics yet.
        tool_status = "completed" if rng.random() < 0.8 else "in_progress"
        task["agent_id"] = f"{rng.getrandbits(32):08x}"
        task["model"] = _weighted(rng, _MODELS)
        task["is_async"] = True
        if zero_metrics:
            task.update(total_tokens=0, tool_use_count=0, duration_ms=0)
        done = tool_status == "completed"
        settle = (rng.randint(80, 900) if done else rng.randint(0, 400)) * _MS
    elif status == "completed":
        tool_status = "completed"
        task["agent_id"] = f"{rng.getrandbits(32):08x}"
        if with_model:
            task["model"] = _weighted(rng, _MODELS)
        if rng.random() < 0.5:
            task["is_async"] = False
        duration = rng.randint(3_000, 900_000)
        task.update(
            total_tokens=rng.randint(1_500, 180_000),
            tool_use_count=0 if rng.random() < 0.06 else rng.randint(1, 60),
            duration_ms=duration,
        )
        settle = duration * _MS + rng.randint(5, 400) * _MS
    elif status == "started":
        # OpenCode reports a child session and no agent id; while running its metrics are
        # absent or zero (a reported 0 is stored NULL for tokens/duration, kept for tool
        # uses: AC-7a, AC-8).
        tool_status = "in_progress" if rng.random() < 0.6 else "pending"
        task["child_session_id"] = "ses_" + "".join(rng.choices(_ALNUM, k=26))
        task["model"] = rng.choice(_OPENCODE_MODELS)
        if zero_metrics:
            task.update(total_tokens=0, tool_use_count=0, duration_ms=0)
        settle = rng.randint(0, 300) * _MS
    else:
        # No status at all: the launching call failed before the child reported.
        tool_status = "failed"
        task["model"] = _weighted(rng, _MODELS)
        settle = rng.randint(200, 5_000) * _MS
    if empty_strings:
        # Some writers send '' for "not reported" (stored as NULL, CONTRACT §2).
        for key in ("description", "model", "agent_id", "child_session_id"):
            if key in task and rng.random() < 0.5:
                task[key] = ""
        if status == "started" and rng.random() < 0.5:
            task["agent_id"] = ""
    meta = {
        "tool_call_id": tool_call_id,
        "status": tool_status,
        "parent_tool_call_id": parent_tool_call_id,
        "normalized": {"kind": "subagent_task", "subagent_task": task},
    }
    return meta, settle


def _launch_message(
    rng: random.Random,
    where: tuple[str, str, str],
    text: _Text,
    meta: dict,
    settle: int,
    *,
    created_us: int = 0,
) -> _Message:
    """The agent's tool-call message launching a subagent, in ``(session, task, turn)``."""
    session_id, task_id, turn_id = where
    return _Message(
        id=_uuid(rng),
        session_id=session_id,
        task_id=task_id,
        turn_id=turn_id,
        author_type="agent",
        content=_subagent_content(rng, text, meta),
        type="tool_call",
        metadata=json.dumps(meta),
        settle_after_us=settle,
        created_us=created_us,
        subagent=meta,
    )


def _subagent_content(rng: random.Random, text: _Text, meta: dict) -> str:
    task = meta["normalized"]["subagent_task"]
    head = f"Task({task.get('subagent_type') or 'agent'}): {task.get('description') or ''}\n\n"
    return head + text.body(150, 3000)


def _ordinary(
    rng: random.Random, text: _Text, session_id: str, task_id: str, turn_id: str
) -> _Message:
    """One agent message that is not a subagent launch: text, a tool call, thinking, or a log."""
    roll = rng.random()
    settle = 0
    if roll < 0.45:
        kind = "message"
        metadata = "{}" if rng.random() < 0.8 else json.dumps({"stop_reason": "end_turn"})
    elif roll < 0.85:
        kind = "tool_call"
        tool = rng.choice(_ORDINARY_TOOLS)
        path = rng.choice(_FILES)
        metadata = json.dumps(
            {
                "tool_call_id": _tool_call_id(rng),
                "status": "failed" if rng.random() < 0.03 else "completed",
                "title": f"{tool} {path}",
                "normalized": {"kind": tool, tool: {"path": path}},
            }
        )
        settle = rng.randint(20, 4_000) * _MS
    elif roll < 0.95:
        kind = "thinking"
        metadata = "{}"
    else:
        kind = "log"
        metadata = json.dumps({"level": "info"})
    return _Message(
        id=_uuid(rng),
        session_id=session_id,
        task_id=task_id,
        turn_id=turn_id,
        author_type="agent",
        content=text.body(),
        type=kind,
        metadata=metadata,
        settle_after_us=settle,
        requests_input=1 if kind == "message" and rng.random() < 0.01 else 0,
    )


# --- writing -------------------------------------------------------------------------------


class _Writer:
    """Bulk writes in one transaction: executemany on SQLite, COPY on PostgreSQL."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.postgres = conn.dialect.name == "postgresql"
        self.stamp = _naive if self.postgres else go_text_us

    def _rows(self, table: sa.Table, columns: tuple[str, ...], rows: list[tuple]) -> None:
        if not rows:
            return
        # Instants are kept as µs until written: each dialect takes its own form of them.
        stamped = [c in INSTANT_COLUMNS for c in columns]
        if self.postgres:
            raw = self.conn.connection.dbapi_connection
            with (
                raw.cursor() as cursor,
                cursor.copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN") as copy,
            ):
                for row in rows:
                    copy.write_row(
                        [
                            self.stamp(v) if s and v is not None else v
                            for s, v in zip(stamped, row, strict=True)
                        ]
                    )
        else:
            self.conn.execute(
                table.insert(),
                [
                    {
                        c: (self.stamp(v) if s and v is not None else v)
                        for c, s, v in zip(columns, stamped, row, strict=True)
                    }
                    for row in rows
                ],
            )

    def sessions(self, rows: list[tuple]) -> None:
        self._rows(schema.task_sessions, SESSION_COLUMNS, rows)

    def turns(self, rows: list[tuple]) -> None:
        self._rows(schema.task_session_turns, TURN_COLUMNS, rows)

    def messages(self, rows: list[tuple]) -> None:
        self._rows(schema.task_session_messages, MESSAGE_COLUMNS, rows)


class _BulkSession:
    """One write transaction, with SQLite durability relaxed while it runs."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def __enter__(self) -> sa.Connection:
        self.conn = self.engine.connect()
        # Begin explicitly: COPY goes through the raw connection, which SQLAlchemy does not
        # see, and a connection it never saw begin would be rolled back on return to the pool.
        self.conn.begin()
        self.sqlite = self.conn.dialect.name == "sqlite"
        if self.sqlite:
            self.synchronous = self.conn.exec_driver_sql("PRAGMA synchronous").scalar()
            # Durability is pointless for a sample being built; the commit still lands.
            self.conn.exec_driver_sql("PRAGMA synchronous = OFF")
            if not self.conn.connection.dbapi_connection.in_transaction:
                # An autocommit connection would commit every row of an executemany.
                self.conn.exec_driver_sql("BEGIN")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.conn.commit()
            else:
                self.conn.rollback()
        finally:
            if self.sqlite:
                self.conn.exec_driver_sql(f"PRAGMA synchronous = {int(self.synchronous)}")
            self.conn.close()


# --- history -------------------------------------------------------------------------------


def generate(
    engine: sa.Engine,
    *,
    scale: int = 1,
    seed: int = 0,
    start: datetime | None = None,
) -> SampleSummary:
    """Write ``scale`` units of history ending before ``start``; return what was written.

    The base tables must exist (:func:`create_store`). Each unit covers an equal slice of
    the few days before ``start``; every ``created_at`` is strictly later than the one
    before it, so larger scales pack the same shape more densely.
    """
    if scale < 1:
        raise ValueError(f"scale must be at least 1, not {scale}")
    start = DEFAULT_START if start is None else start
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    end_us = _micros(start) - END_MARGIN // timedelta(microseconds=1)
    span_us = HISTORY_SPAN // timedelta(microseconds=1)
    window_us = span_us // scale
    begin_us = end_us - span_us

    rng = random.Random(f"kandev-dq sample {seed}")
    text = _Text(random.Random(rng.getrandbits(64)))
    summary = SampleSummary(
        scale=scale,
        seed=seed,
        sessions=0,
        turns=0,
        messages=0,
        subagent_messages=0,
        by_agent_status=Counter(),
        legacy_metadata=Counter({name: 0 for name in LEGACY_METADATA}),
    )
    prev_us = begin_us
    pending: tuple[list, list, list] = ([], [], [])
    with _BulkSession(engine) as conn:
        writer = _Writer(conn)
        for unit in range(scale):
            sessions, turns, messages = _unit(
                rng, text, begin_us + unit * window_us, window_us, prev_us, summary
            )
            prev_us = messages[-1][10]
            pending[0].extend(sessions)
            pending[1].extend(turns)
            pending[2].extend(messages)
            if len(pending[2]) >= CHUNK_MESSAGES or unit == scale - 1:
                writer.sessions(pending[0])
                writer.turns(pending[1])
                writer.messages(pending[2])
                pending = ([], [], [])
    summary.by_agent_status = dict(summary.by_agent_status)
    summary.legacy_metadata = dict(summary.legacy_metadata)
    summary.last_created_at = _aware(prev_us)
    return summary


def _unit(
    rng: random.Random,
    text: _Text,
    base_us: int,
    window_us: int,
    prev_us: int,
    summary: SampleSummary,
) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """One scale unit: session, turn and message rows, messages in created_at order.

    The steps draw from ``rng`` in a fixed order, so one seed always yields the same rows.
    """
    sessions = _unit_sessions(rng)
    plan = _UnitPlan.draw(rng)
    turn_members = _converse(rng, text, sessions, plan, summary)
    messages = [m for members in turn_members for m in members]
    _legacy_metadata(rng, messages, summary)
    messages.sort(key=lambda m: m.natural)
    _place(rng, messages, base_us, window_us, prev_us)
    if summary.first_created_at is None:
        summary.first_created_at = _aware(messages[0].created_us)
    session_rows, turn_rows = _session_and_turn_rows(rng, sessions, plan, turn_members)
    summary.sessions += len(session_rows)
    summary.turns += len(turn_rows)
    summary.messages += len(messages)
    summary.subagent_messages += sum(plan.fanouts)
    return session_rows, turn_rows, [m.row() for m in messages]


def _unit_sessions(rng: random.Random) -> list[tuple[str, str]]:
    """The unit's (session id, task id) pairs; a task sometimes gets a second session."""
    sessions: list[tuple[str, str]] = []
    tasks: list[str] = []
    for _ in range(SESSIONS_PER_UNIT):
        # A restart or a follow-up reuses an earlier task.
        task = rng.choice(tasks) if tasks and rng.random() < 0.2 else _uuid(rng)
        if task not in tasks:
            tasks.append(task)
        sessions.append((_uuid(rng), task))
    return sessions


@dataclass
class _UnitPlan:
    """Which turns the unit has and which subagent messages each launches, before any text.

    Turn ``t`` belongs to session ``turn_keys[t][0]`` and owns the subagent indices
    ``[first[t], first[t] + fanouts[t])``; ``parents`` maps a nested child to its parent.
    """

    turn_keys: list[tuple[int, str]]
    fanouts: list[int]
    first: list[int]
    statuses: list[str | None]
    without_model: set[int]
    without_type: set[int]
    tool_calls: list[str]
    parents: dict[int, int]

    @classmethod
    def draw(cls, rng: random.Random) -> _UnitPlan:
        per_session = [1] * SESSIONS_PER_UNIT
        for _ in range(TURNS_PER_UNIT - SESSIONS_PER_UNIT):
            per_session[rng.randrange(SESSIONS_PER_UNIT)] += 1
        fanouts = [k for k, n in FANOUT_TURNS.items() for _ in range(n)]
        rng.shuffle(fanouts)
        statuses = [s for s, n in AGENT_STATUS_MIX.items() for _ in range(n)]
        rng.shuffle(statuses)
        completed = [i for i, s in enumerate(statuses) if s == "completed"]
        without_model = set(rng.sample(completed, COMPLETED_WITHOUT_MODEL))
        without_type = set(rng.sample(range(SUBAGENT_MESSAGES_PER_UNIT), WITHOUT_SUBAGENT_TYPE))
        tool_calls = [_tool_call_id(rng) for _ in statuses]
        # Turns in session order.
        turn_keys: list[tuple[int, str]] = []
        for s, n in enumerate(per_session):
            turn_keys.extend((s, _uuid(rng)) for _ in range(n))
        first = [0]
        for k in fanouts:
            first.append(first[-1] + k)
        wide = [t for t, k in enumerate(fanouts) if k >= 2]
        parents: dict[int, int] = {}
        for t in rng.sample(wide, NESTED_PER_UNIT):
            child = first[t] + fanouts[t] - 1
            parents[child] = rng.randrange(first[t], child)
        return cls(
            turn_keys, fanouts, first, statuses, without_model, without_type, tool_calls, parents
        )


def _converse(
    rng: random.Random,
    text: _Text,
    sessions: list[tuple[str, str]],
    plan: _UnitPlan,
    summary: SampleSummary,
) -> list[list[_Message]]:
    """Every turn's messages, prompt first, on each session's own clock (``natural``)."""
    natural_span = HISTORY_SPAN.total_seconds()
    clock: dict[int, float] = {}
    turn_members: list[list[_Message]] = []
    for t, (s, turn_id) in enumerate(plan.turn_keys):
        session_id, task_id = sessions[s]
        # Sessions start at different times over the span; a user pauses between turns.
        now = clock.get(s)
        now = rng.uniform(0, 0.7 * natural_span) if now is None else now + rng.expovariate(1 / 1500)
        prompt = _Message(
            id=_uuid(rng),
            session_id=session_id,
            task_id=task_id,
            turn_id=turn_id,
            author_type="user",
            content=text.body(60, 1500),
            type="message",
            metadata="{}",
            natural=now,
        )
        k = plan.fanouts[t]
        # About ten ordinary messages per subagent message, the prompt included.
        ordinary = [
            _ordinary(rng, text, session_id, task_id, turn_id)
            for _ in range(rng.randint(8 * k, 12 * k) - 1)
        ]
        launches = [
            _launch(rng, text, plan, i, session_id, task_id, turn_id, summary)
            for i in range(plan.first[t], plan.first[t] + k)
        ]
        members = [prompt]
        previous = None
        for message in _interleave(rng, ordinary, launches):
            burst = previous is not None and previous.subagent and message.subagent
            now += rng.uniform(0.03, 0.3) if burst else rng.expovariate(1 / 4)
            message.natural = now
            members.append(message)
            previous = message
        clock[s] = now
        turn_members.append(members)
    return turn_members


def _launch(
    rng: random.Random,
    text: _Text,
    plan: _UnitPlan,
    i: int,
    session_id: str,
    task_id: str,
    turn_id: str,
    summary: SampleSummary,
) -> _Message:
    """The unit's subagent message number ``i``."""
    meta, settle = _subagent_metadata(
        rng,
        plan.statuses[i],
        tool_call_id=plan.tool_calls[i],
        parent_tool_call_id=plan.tool_calls[plan.parents[i]] if i in plan.parents else None,
        with_model=i not in plan.without_model,
        with_type=i not in plan.without_type,
        zero_metrics=rng.random() < 0.5,
    )
    summary.by_agent_status[plan.statuses[i]] += 1
    return _launch_message(rng, (session_id, task_id, turn_id), text, meta, settle)


def _interleave(
    rng: random.Random, ordinary: list[_Message], launches: list[_Message]
) -> list[_Message]:
    """A turn's body: parallel launches in one burst, or spread through the turn in order."""
    if rng.random() < 0.6:
        at = rng.randint(1, len(ordinary))
        return ordinary[:at] + launches + ordinary[at:]
    body = list(ordinary)
    for launch in launches:
        body.insert(rng.randint(1, len(body)), launch)
    # A nested child must follow its parent: keep launches in their own order.
    slots = sorted(i for i, m in enumerate(body) if m.subagent is not None)
    for slot, launch in zip(slots, launches, strict=True):
        body[slot] = launch
    return body


def _legacy_metadata(rng: random.Random, messages: list[_Message], summary: SampleSummary) -> None:
    """Give a few agent text messages the legacy metadata ``''``, ``'null'`` or NULL (AC-23b)."""
    candidates = [m for m in messages if m.type == "message" and m.author_type == "agent"]
    legacy = rng.sample(candidates, LEGACY_PER_KIND * len(LEGACY_METADATA))
    for n, message in enumerate(legacy):
        name = list(LEGACY_METADATA)[n // LEGACY_PER_KIND]
        message.metadata = LEGACY_METADATA[name]
        summary.legacy_metadata[name] += 1


def _place(
    rng: random.Random, messages: list[_Message], base_us: int, window_us: int, prev_us: int
) -> None:
    """Place the unit's messages (sorted) in its window: compressed if needed, then strictly
    increasing instants after ``prev_us``."""
    latest = messages[-1].natural or 1.0
    factor = min(1.0, 0.98 * window_us / (latest * _SECOND))
    prev = prev_us
    for message in messages:
        prev = _realistic(base_us + int(message.natural * _SECOND * factor), prev, rng)
        message.created_us = prev


def _session_and_turn_rows(
    rng: random.Random,
    sessions: list[tuple[str, str]],
    plan: _UnitPlan,
    turn_members: list[list[_Message]],
) -> tuple[list[tuple], list[tuple]]:
    """Session and turn rows spanning their placed messages."""
    turn_rows: list[tuple] = []
    bounds: dict[str, list[int]] = {}
    for (s, turn_id), members in zip(plan.turn_keys, turn_members, strict=True):
        session_id, task_id = sessions[s]
        started = members[0].created_us
        completed = members[-1].created_us + rng.randint(0, 2_000) * _MS
        turn_rows.append(
            (turn_id, session_id, task_id, started, completed, "{}", started, completed)
        )
        last_update = max(m.created_us + m.settle_after_us for m in members)
        span = bounds.setdefault(session_id, [started, last_update])
        span[0] = min(span[0], started)
        span[1] = max(span[1], last_update, completed)
    session_rows = []
    for session_id, task_id in sessions:
        first_us, last_us = bounds[session_id]
        session_rows.append((session_id, task_id, first_us - rng.randint(0, 2_000) * _MS, last_us))
    return session_rows, turn_rows


# --- live traffic --------------------------------------------------------------------------


def append_live_traffic(
    engine: sa.Engine,
    *,
    count: int,
    seed: int = 0,
    after: datetime | None = None,
    writer: Literal["healthy", "stopped"] = "healthy",
    until: datetime | None = None,
) -> int:
    """Append ``count`` subagent messages created after ``capture_since``; return ``count``.

    Each message gets a new turn (shared by a fan-out) in an existing session. A healthy
    writer also leaves one ``task_session_subagents`` row per message, obeying CONTRACT §2;
    a stopped one leaves none, which is what the writer-health shortfall detects (AC-26).
    The lower bound is the store's ``subagent_context_capture_since`` key; ``after`` is used
    when the key is absent (and, when both are given, the later of the two wins). Messages
    also follow every existing message, so repeated calls keep ``created_at`` increasing.
    ``until`` (e.g. now, for a run about to validate the store) bounds every instant written:
    the burst is compressed into the time since the lower bound, its order kept.
    """
    if writer not in ("healthy", "stopped"):
        raise ValueError(f"writer must be 'healthy' or 'stopped', not {writer!r}")
    if count < 0:
        raise ValueError(f"count must not be negative, not {count}")
    with _BulkSession(engine) as conn:
        _require_amended(conn)
        since_us = _capture_since_us(conn, after)
        sessions = conn.execute(
            sa.select(schema.task_sessions.c.id, schema.task_sessions.c.task_id).order_by(
                schema.task_sessions.c.id
            )
        ).all()
        if not sessions:
            raise ValueError("the store has no task_sessions to append live traffic to")
        latest = conn.execute(
            sa.select(sa.func.max(utc_instant(schema.task_session_messages.c.created_at)))
        ).scalar()
        prev = since_us if latest is None else max(since_us, _micros(parse_stored(latest)))
        # Seeded by the store's state too, so a second call never repeats the first's ids.
        rng = random.Random(f"kandev-dq live {seed} {prev}")
        text = _Text(random.Random(rng.getrandbits(64)), size=1 << 14)
        turns, messages, rows = _live(rng, text, sessions, count, prev, writer == "healthy")
        if until is not None:
            turns = _fit_before(turns, messages, rows, prev, _micros(until))
        out = _Writer(conn)
        out.turns(turns)
        out.messages([m.row() for m in messages])
        if rows:
            conn.execute(schema.subagents.insert(), rows)
    return count


_ROW_INSTANTS = ("observed_at", "settled_at", "updated_at")


def _fit_before(
    turns: list[tuple], messages: list[_Message], rows: list[dict], start_us: int, end_us: int
) -> list[tuple]:
    """Rescale a live burst's instants from ``start_us`` so none is after ``end_us``.

    The map is monotone, so every ordering the writer guarantees (observed_at <= updated_at,
    settled_at = the later of the two, §2) holds after it. Messages and rows change in place;
    the turns (tuples) are returned anew.
    """
    latest = max(
        [turn[4] for turn in turns]
        + [m.created_us + m.settle_after_us for m in messages]
        + [_micros(row[c]) for row in rows for c in _ROW_INSTANTS if row[c] is not None]
    )
    if latest <= end_us:
        return turns
    if end_us <= start_us:
        raise ValueError("'until' must be after capture_since and every existing message")

    def fit(us: int) -> int:
        return start_us + (us - start_us) * (end_us - start_us) // (latest - start_us)

    for m in messages:
        updated = fit(m.created_us + m.settle_after_us)
        m.created_us = fit(m.created_us)
        m.settle_after_us = updated - m.created_us
    for row in rows:
        for column in _ROW_INSTANTS:
            if row[column] is not None:
                row[column] = _aware(fit(_micros(row[column])))
    return [(*t[:3], fit(t[3]), fit(t[4]), t[5], fit(t[6]), fit(t[7])) for t in turns]


def _require_amended(conn: sa.Connection) -> None:
    inspector = sa.inspect(conn)
    if not inspector.has_table(schema.SUBAGENTS):
        raise ValueError(
            f"live traffic needs the amended {schema.SUBAGENTS} table; this store has none "
            "(create_store(engine, subagents='amended'))"
        )
    columns = {c["name"] for c in inspector.get_columns(schema.SUBAGENTS)}
    if "agent_execution_id" not in columns:
        raise ValueError(
            f"live traffic needs the amended {schema.SUBAGENTS} table; this one is the "
            "pre-amendment shape (no agent_execution_id)"
        )


def _capture_since_us(conn: sa.Connection, after: datetime | None) -> int:
    meta = schema.kandev_meta
    value = conn.execute(sa.select(meta.c.value).where(meta.c.key == CAPTURE_SINCE)).scalar()
    bounds = []
    if value is not None:
        bounds.append(_micros(parse_key(value).bound()))
    if after is not None:
        bounds.append(_micros(after))
    if not bounds:
        raise ValueError(
            f"kandev_meta has no {CAPTURE_SINCE} key and no 'after' instant was given: "
            "live traffic must be created after capture starts"
        )
    return max(bounds)


def _live(
    rng: random.Random,
    text: _Text,
    sessions: list,
    count: int,
    prev: int,
    healthy: bool,
) -> tuple[list[tuple], list[_Message], list[dict]]:
    statuses = list(AGENT_STATUS_MIX)
    weights = list(AGENT_STATUS_MIX.values())
    fanout_sizes = list(FANOUT_TURNS)
    fanout_weights = list(FANOUT_TURNS.values())
    executions: dict[str, str] = {}
    turns: list[tuple] = []
    messages: list[_Message] = []
    rows: list[dict] = []
    remaining = count
    now = prev
    while remaining:
        session_id, task_id = rng.choice(sessions)
        # One agent execution per session in this burst: the id a live frame carries.
        execution = executions.setdefault(session_id, _uuid(rng))
        turn_id = _uuid(rng)
        k = min(remaining, rng.choices(fanout_sizes, weights=fanout_weights)[0])
        now += rng.randint(1, 5_000) * _MS
        turn_start = now
        launched: list[str] = []
        for _ in range(k):
            now = _realistic(now + rng.randint(30, 3_000) * _MS, now, rng)
            tool_call_id = _tool_call_id(rng)
            parent = launched[0] if launched and rng.random() < 0.05 else None
            meta, settle = _subagent_metadata(
                rng,
                rng.choices(statuses, weights=weights)[0],
                tool_call_id=tool_call_id,
                parent_tool_call_id=parent,
                with_model=rng.random() > 0.14,
                with_type=rng.random() > 0.01,
                zero_metrics=rng.random() < 0.5,
                empty_strings=rng.random() < 0.1,
            )
            launched.append(tool_call_id)
            message = _launch_message(
                rng, (session_id, task_id, turn_id), text, meta, settle, created_us=now
            )
            messages.append(message)
            if healthy:
                rows.append(_live_row(rng, message, execution))
        completed = now + rng.randint(0, 2_000) * _MS
        turns.append(
            (turn_id, session_id, task_id, turn_start, completed, "{}", turn_start, completed)
        )
        remaining -= k
    return turns, messages, rows


def _live_row(rng: random.Random, message: _Message, execution: str) -> dict:
    """The row a healthy live writer leaves for one subagent message (CONTRACT §2)."""
    observed = message.created_us + rng.randint(0, 3_000)
    row = healthy_live_row(
        message.subagent,
        session_id=message.session_id,
        task_id=message.task_id,
        turn_id=message.turn_id,
        execution=execution,
        observed=_aware(observed),
        last_update=_aware(message.created_us + message.settle_after_us),
        unsettled_lag=lambda: timedelta(microseconds=rng.randint(0, 5_000)),
    )
    return {"id": _uuid(rng), **row}
