"""Kandev's tables as CONTRACT §1 states them, in SQLAlchemy Core, for both dialects.

The amended ``task_session_subagents`` ("Amendment 1") and the pre-amendment shape are two
``Table`` objects over the same base tables, so a store of either shape is created from here
and every query names columns through these objects rather than through strings.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.types import TypeDecorator, UserDefinedType

from kandev_dq.contract.instants import Instant, go_sqlite_text, parse_stored


class _SqliteTimestamp(UserDefinedType):
    """``TIMESTAMP`` in DDL with no client-side conversion: SQLite keeps the text it is given."""

    cache_ok = True

    def get_col_spec(self, **kw):
        return "TIMESTAMP"


class StoredTimestamp(TypeDecorator):
    """A naive-UTC TIMESTAMP column (CONTRACT §1).

    Writes a datetime as Go's SQLite text on SQLite and as naive UTC wall clock on PostgreSQL;
    reads back an aware UTC datetime on both. Text is passed through as given, so tests and
    the sample generator can write every stored shape a real store holds.
    """

    impl = sa.TIMESTAMP
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name == "sqlite":
            return dialect.type_descriptor(_SqliteTimestamp())
        return dialect.type_descriptor(sa.TIMESTAMP(timezone=False))

    def process_bind_param(self, value, dialect):
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, Instant):
            value = value.micro
        if dialect.name == "sqlite":
            return go_sqlite_text(value)
        return Instant.from_datetime(value).micro.replace(tzinfo=None)

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        try:
            return parse_stored(value)
        except ValueError:
            return value  # an unrecognised shape is a finding for the caller, not a crash


metadata = sa.MetaData()

kandev_meta = sa.Table(
    "kandev_meta",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False, server_default=""),
)

task_sessions = sa.Table(
    "task_sessions",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("task_id", sa.Text, nullable=False),
    sa.Column("started_at", StoredTimestamp, nullable=False),
    sa.Column("updated_at", StoredTimestamp, nullable=False),
)

task_session_turns = sa.Table(
    "task_session_turns",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column(
        "task_session_id",
        sa.Text,
        sa.ForeignKey("task_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("task_id", sa.Text, nullable=False),
    sa.Column("started_at", StoredTimestamp),
    sa.Column("completed_at", StoredTimestamp),
    sa.Column("metadata", sa.Text, server_default="{}"),
    sa.Column("created_at", StoredTimestamp),
    sa.Column("updated_at", StoredTimestamp),
)

task_session_messages = sa.Table(
    "task_session_messages",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column(
        "task_session_id",
        sa.Text,
        sa.ForeignKey("task_sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("task_id", sa.Text, server_default=""),
    sa.Column(
        "turn_id",
        sa.Text,
        sa.ForeignKey("task_session_turns.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("author_type", sa.Text, nullable=False, server_default="user"),
    sa.Column("author_id", sa.Text, server_default=""),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("requests_input", sa.Integer, server_default="0"),
    sa.Column("type", sa.Text, nullable=False, server_default="message"),
    sa.Column("metadata", sa.Text, server_default="{}"),
    sa.Column("created_at", StoredTimestamp, nullable=False),
    sa.Column("updated_at", StoredTimestamp, nullable=False),
    sa.Index("idx_messages_session_id", "task_session_id"),
    sa.Index("idx_messages_created_at", "created_at"),
    sa.Index("idx_messages_session_created", "task_session_id", "created_at"),
    sa.Index("idx_messages_turn_id", "turn_id"),
    # Upstream's: what a live check reads messages updated since its last run through.
    sa.Index("idx_messages_session_updated", "task_session_id", "updated_at"),
)

BASE_TABLES = (kandev_meta, task_sessions, task_session_turns, task_session_messages)

SUBAGENTS = "task_session_subagents"
#: The name the SQLite rebuild (AC-33) gives the new table until it replaces the old one; a
#: table of this name left behind is a partial migration (AC-33a).
REBUILD_TABLE = f"{SUBAGENTS}__amended"
SECONDARY_INDEXES = {
    "idx_subagents_session_id": ("task_session_id",),
    "idx_subagents_task_id": ("task_id",),
    "idx_subagents_turn_id": ("turn_id",),
}
AMENDED_UNIQUE = ("task_session_id", "agent_execution_id", "tool_call_id")
PRE_AMENDMENT_UNIQUE = ("task_session_id", "tool_call_id")
UNKNOWN_EXECUTION = "unknown"
TERMINAL_TOOL_STATUSES = ("complete", "completed", "success", "error", "failed", "cancelled")
TOOL_STATUSES = ("pending", "in_progress", *TERMINAL_TOOL_STATUSES)
METRIC_COLUMNS = ("total_tokens", "tool_use_count", "duration_ms")
NULLABLE_TEXT_COLUMNS = (
    "turn_id",
    "parent_tool_call_id",
    "subagent_type",
    "description",
    "agent_id",
    "child_session_id",
    "model",
    "agent_status",
    "tool_status",
)


def _subagents_table(meta: sa.MetaData, *, amended: bool) -> sa.Table:
    execution = (
        [sa.Column("agent_execution_id", sa.Text, nullable=False, server_default=UNKNOWN_EXECUTION)]
        if amended
        else []
    )
    unique = AMENDED_UNIQUE if amended else PRE_AMENDMENT_UNIQUE
    return sa.Table(
        SUBAGENTS,
        meta,
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column(
            "task_session_id",
            sa.Text,
            sa.ForeignKey(task_sessions.c.id, ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("task_id", sa.Text, nullable=False),
        sa.Column("turn_id", sa.Text),
        sa.Column("tool_call_id", sa.Text, nullable=False),
        *execution,
        sa.Column("parent_tool_call_id", sa.Text),
        sa.Column("subagent_type", sa.Text),
        sa.Column("description", sa.Text),
        sa.Column("agent_id", sa.Text),
        sa.Column("child_session_id", sa.Text),
        sa.Column("model", sa.Text),
        sa.Column("agent_status", sa.Text),
        sa.Column("tool_status", sa.Text),
        sa.Column("is_async", sa.Integer, nullable=False, server_default="0"),
        sa.Column("total_tokens", sa.Integer),
        sa.Column("tool_use_count", sa.Integer),
        sa.Column("duration_ms", sa.Integer),
        sa.Column("source", sa.Text, nullable=False, server_default="live"),
        sa.Column("observed_at", StoredTimestamp, nullable=False),
        sa.Column("settled_at", StoredTimestamp),
        sa.Column("updated_at", StoredTimestamp, nullable=False),
        sa.UniqueConstraint(*unique),
        *(sa.Index(name, *cols) for name, cols in SECONDARY_INDEXES.items()),
    )


subagents = _subagents_table(metadata, amended=True)
_pre_amendment_metadata = sa.MetaData()
for _base in BASE_TABLES:
    _base.to_metadata(_pre_amendment_metadata)
pre_amendment_subagents = _subagents_table(_pre_amendment_metadata, amended=False)


def create_base_tables(conn: sa.Connection) -> None:
    """Create the tables a store predating the feature has (AC-17's starting point)."""
    metadata.create_all(conn, tables=list(BASE_TABLES))


def create_subagents_table(conn: sa.Connection, *, amended: bool = True) -> None:
    """Create ``task_session_subagents`` in the amended (default) or pre-amendment shape."""
    (subagents if amended else pre_amendment_subagents).create(conn)


def utc(value: datetime) -> datetime:
    """Aware UTC for any datetime (naive is UTC wall clock, CONTRACT §1)."""
    return Instant.from_datetime(value).micro
