"""Seeding a Kandev store in tests: sessions, turns, messages and subagent rows.

Timestamps may be datetimes (``StoredTimestamp`` writes Go's SQLite text, or naive UTC on
PostgreSQL) or text (stored verbatim on SQLite, for the storage forms CONTRACT §1 lists).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.lab.storebuilder import StoreBuilder

T0 = datetime(2026, 7, 30, 1, 39, 37, 271235, tzinfo=UTC)


def at(seconds: float = 0, *, micros: int = 0) -> datetime:
    """An instant relative to :data:`T0`."""
    return T0 + timedelta(seconds=seconds, microseconds=micros)


def subagent_metadata(
    tool_call_id: str | None,
    *,
    status: str | None = "completed",
    agent_status: str | None = "completed",
    parent_tool_call_id: str | None = None,
    kind: str = "subagent_task",
    **task: Any,
) -> dict:
    """A subagent message's metadata: ACP fields at the top level, the payload under
    ``normalized.subagent_task`` (CONTRACT §1). ``None`` leaves a field out."""
    payload = {"status": agent_status, **task}
    doc: dict[str, Any] = {
        "tool_call_id": tool_call_id,
        "status": status,
        "parent_tool_call_id": parent_tool_call_id,
        "normalized": {
            "kind": kind,
            "subagent_task": {k: v for k, v in payload.items() if v is not None},
        },
    }
    return {k: v for k, v in doc.items() if v is not None}


def add_session(
    conn: sa.Connection,
    session_id: str = "s1",
    task_id: str = "t1",
    *,
    turns: tuple[str, ...] = ("u1",),
) -> None:
    """A session and its turns (a turn id of '' makes messages with an empty turn_id legal)."""
    conn.execute(
        schema.task_sessions.insert().values(
            id=session_id, task_id=task_id, started_at=T0, updated_at=T0
        )
    )
    for turn in turns:
        conn.execute(
            schema.task_session_turns.insert().values(
                id=turn,
                task_session_id=session_id,
                task_id=task_id,
                created_at=T0,
                updated_at=T0,
            )
        )


def add_message(
    conn: sa.Connection,
    message_id: str,
    metadata: dict | str | None,
    *,
    session_id: str = "s1",
    task_id: str | None = "t1",
    turn_id: str = "u1",
    created_at: datetime | str = T0,
    updated_at: datetime | str | None = None,
    kind: str = "tool_call",
) -> None:
    """A message; a dict metadata is JSON-encoded, text or None is stored as given."""
    raw = json.dumps(metadata) if isinstance(metadata, dict) else metadata
    values = {
        "id": message_id,
        "task_session_id": session_id,
        "turn_id": turn_id,
        "content": "",
        "type": kind,
        "metadata": raw,
        "created_at": created_at,
        "updated_at": created_at if updated_at is None else updated_at,
    }
    values["task_id"] = task_id
    conn.execute(schema.task_session_messages.insert().values(**values))


def add_subagent_row(conn: sa.Connection, *, amended: bool = True, **values: Any) -> dict:
    """A ``task_session_subagents`` row (pre-amendment shape when ``amended`` is False)."""
    table = schema.subagents if amended else schema.pre_amendment_subagents
    row = {
        "id": values.pop("id"),
        "task_session_id": "s1",
        "task_id": "t1",
        "source": "live",
        "observed_at": T0,
        "updated_at": T0,
        **values,
    }
    conn.execute(table.insert().values(**row))
    return row


def subagent_rows(engine: sa.Engine) -> dict[str, dict]:
    """Every subagent row by id, as stored (SQLite: raw text, no conversion)."""
    with engine.connect() as conn:
        result = conn.execute(sa.text(f"SELECT * FROM {schema.SUBAGENTS}"))
        return {row["id"]: dict(row) for row in result.mappings()}


def meta_rows(engine: sa.Engine) -> dict[str, str]:
    """Every ``kandev_meta`` key (ours and others'), as stored."""
    with engine.connect() as conn:
        return dict(conn.execute(sa.text("SELECT key, value FROM kandev_meta")).all())


def set_key(engine: sa.Engine, key: str, value: str | None) -> None:
    """Write (or, with None, delete) a ``kandev_meta`` key directly."""
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM kandev_meta WHERE key = :k"), {"k": key})
        if value is not None:
            conn.execute(
                sa.text("INSERT INTO kandev_meta (key, value) VALUES (:k, :v)"),
                {"k": key, "v": value},
            )


def table_names(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def unconstrained_store(
    engine: sa.Engine, *, nullable: bool = False, unique: bool = False
) -> StoreBuilder:
    """A store whose subagents table has neither its UNIQUE nor its FK (both constraints
    bypassed, as a hostile or damaged store may have them); with ``nullable``, no NOT NULL
    either, but on the primary key; with ``unique``, its UNIQUE all the same."""
    columns = [
        sa.Column(
            c.name,
            c.type,
            primary_key=c.primary_key,
            nullable=c.nullable or (nullable and not c.primary_key),
        )
        for c in schema.subagents.c
    ]
    kept = [sa.UniqueConstraint(*schema.AMENDED_UNIQUE)] if unique else []
    table = sa.Table(schema.SUBAGENTS, sa.MetaData(), *columns, *kept)
    with engine.begin() as conn:
        schema.create_base_tables(conn)
        table.create(conn)
    return StoreBuilder(engine)
