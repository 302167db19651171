"""Build small Kandev stores row by row: the vocabulary of tests, scenarios and the demo.

Timestamps may be given as datetimes (written in each dialect's native storage form) or as
text (written verbatim on SQLite, parsed on PostgreSQL), so any stored shape can be built.
"""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    parse_stored,
)

Stamp = datetime | str

T0 = datetime(2026, 7, 30, 1, 39, 37, 271235, tzinfo=UTC)
#: The payload fields under ``normalized.subagent_task``, in CONTRACT §1's order.
SUBAGENT_FIELDS = (
    "subagent_type",
    "description",
    "status",
    "agent_id",
    "child_session_id",
    "model",
    "total_tokens",
    "tool_use_count",
    "duration_ms",
    "is_async",
)


def subagent_metadata(
    tool_call_id: str | None,
    *,
    tool_status: str | None = "completed",
    parent_tool_call_id: str | None = None,
    **task: Any,
) -> dict[str, Any]:
    """A subagent message's metadata: ACP fields on top, the payload under normalized."""
    unknown = set(task) - set(SUBAGENT_FIELDS)
    if unknown:
        raise TypeError(f"unknown subagent_task field(s): {sorted(unknown)}")
    document: dict[str, Any] = {"normalized": {"kind": "subagent_task", "subagent_task": task}}
    if tool_call_id is not None:
        document["tool_call_id"] = tool_call_id
    if tool_status is not None:
        document["status"] = tool_status
    if parent_tool_call_id is not None:
        document["parent_tool_call_id"] = parent_tool_call_id
    return document


class StoreBuilder:
    """Writes sessions, turns, messages, subagent rows and keys into one store."""

    def __init__(self, engine: sa.Engine):
        self.engine = engine
        self._ids = itertools.count(1)

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):06d}"

    def _stamp(self, value: Stamp | None) -> Any:
        if value is None or self.engine.dialect.name == "sqlite":
            return value
        return parse_stored(value) if isinstance(value, str) else value

    def _insert(self, table: sa.Table, **values: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(table.insert().values(**values))

    def create(self, *, subagents: str | None = "amended") -> StoreBuilder:
        """Create the base tables and the subagents table (amended, pre_amendment or None)."""
        with self.engine.begin() as conn:
            schema.create_base_tables(conn)
            if subagents:
                schema.create_subagents_table(conn, amended=subagents == "amended")
        return self

    def session(self, task_id: str | None = None, at: Stamp = T0 - timedelta(days=1)) -> str:
        sid = self._id("session")
        at = self._stamp(at)
        self._insert(
            schema.task_sessions,
            id=sid,
            task_id=task_id or f"task-{sid}",
            started_at=at,
            updated_at=at,
        )
        return sid

    def turn(self, session_id: str) -> str:
        tid = self._id("turn")
        with self.engine.begin() as conn:
            task_id = conn.scalar(
                sa.select(schema.task_sessions.c.task_id).where(
                    schema.task_sessions.c.id == session_id
                )
            )
            conn.execute(
                schema.task_session_turns.insert().values(
                    id=tid, task_session_id=session_id, task_id=task_id
                )
            )
        return tid

    def message(
        self,
        session_id: str,
        created_at: Stamp,
        *,
        metadata: dict[str, Any] | str | None = None,
        turn_id: str | None = None,
        task_id: str | None = None,
        updated_at: Stamp | None = None,
        message_id: str | None = None,
    ) -> str:
        """One message; ``metadata`` is a dict (JSON-encoded) or raw text / NULL as given."""
        mid = message_id or self._id("message")
        if task_id is None:
            with self.engine.connect() as conn:
                task_id = conn.scalar(
                    sa.select(schema.task_sessions.c.task_id).where(
                        schema.task_sessions.c.id == session_id
                    )
                )
        raw = json.dumps(metadata) if isinstance(metadata, dict) else metadata
        self._insert(
            schema.task_session_messages,
            id=mid,
            task_session_id=session_id,
            task_id=task_id,
            turn_id=turn_id or self.turn(session_id),
            author_type="agent",
            content="subagent launched",
            type="tool_call",
            metadata=raw,
            created_at=self._stamp(created_at),
            updated_at=self._stamp(updated_at or created_at),
        )
        return mid

    def subagent_message(
        self,
        session_id: str,
        created_at: Stamp,
        tool_call_id: str | None = None,
        *,
        tool_status: str | None = "completed",
        turn_id: str | None = None,
        task_id: str | None = None,
        updated_at: Stamp | None = None,
        message_id: str | None = None,
        **task: Any,
    ) -> str:
        document = subagent_metadata(tool_call_id, tool_status=tool_status, **task)
        return self.message(
            session_id,
            created_at,
            metadata=document,
            turn_id=turn_id,
            task_id=task_id,
            updated_at=updated_at,
            message_id=message_id,
        )

    def subagent_row(
        self,
        session_id: str,
        tool_call_id: str,
        observed_at: Stamp,
        *,
        source: str = "live",
        agent_execution_id: str | None = None,
        **columns: Any,
    ) -> str:
        """One ``task_session_subagents`` row as a healthy writer leaves it, unless overridden."""
        rid = columns.pop("id", None) or str(uuid.uuid4())
        with self.engine.connect() as conn:
            task_id = conn.scalar(
                sa.select(schema.task_sessions.c.task_id).where(
                    schema.task_sessions.c.id == session_id
                )
            )
            has_execution = "agent_execution_id" in {
                c["name"] for c in sa.inspect(conn).get_columns(schema.SUBAGENTS)
            }
        values: dict[str, Any] = {
            "id": rid,
            "task_session_id": session_id,
            "task_id": task_id,
            "tool_call_id": tool_call_id,
            "source": source,
            "is_async": 0,
            "observed_at": self._stamp(observed_at),
            "updated_at": self._stamp(columns.pop("updated_at", None) or observed_at),
        }
        if has_execution:
            if agent_execution_id is None:
                agent_execution_id = "unknown" if source == "backfill" else str(uuid.uuid4())
            values["agent_execution_id"] = agent_execution_id
        for name in ("settled_at",):
            if name in columns:
                columns[name] = self._stamp(columns[name])
        values.update(columns)
        table = schema.subagents if has_execution else schema.pre_amendment_subagents
        with self.engine.begin() as conn:
            conn.execute(table.insert().values(**values))
        return rid

    def rekey(
        self, tool_call_id: str, new_tool_call_id: str, at: Stamp, *, of: str = "message"
    ) -> None:
        """Rewrite the ``tool_call_id`` of the subagent ``of`` (``"message"`` or ``"row"``)
        holding it, its ``updated_at`` bumped to ``at``: a change a window sees, whose old key
        keeps whatever else has it (a fault scenario)."""
        if of == "message":
            m = schema.task_session_messages
            # Every message holding that id as its metadata's key, the document rewritten whole.
            with self.engine.begin() as conn:
                found = conn.execute(
                    sa.select(m.c.id, m.c.metadata).where(m.c.metadata.contains(tool_call_id))
                ).all()
                for message_id, text in found:
                    document = json.loads(text)
                    if document.get("tool_call_id") != tool_call_id:
                        continue
                    document["tool_call_id"] = new_tool_call_id
                    conn.execute(
                        m.update()
                        .where(m.c.id == message_id)
                        .values(metadata=json.dumps(document), updated_at=self._stamp(at))
                    )
            return
        r = schema.subagents
        with self.engine.begin() as conn:
            conn.execute(
                sa.update(r)
                .where(r.c.tool_call_id == tool_call_id)
                .values(tool_call_id=new_tool_call_id, updated_at=self._stamp(at))
            )

    def keys(
        self,
        capture_since: str | None = None,
        backfill_through: str | None = None,
        execution_since: str | None = None,
    ) -> None:
        """Write the given keys (None leaves a key absent)."""
        given = {
            CAPTURE_SINCE: capture_since,
            BACKFILL_THROUGH: backfill_through,
            EXECUTION_SINCE: execution_since,
        }
        rows = [{"key": k, "value": v} for k, v in given.items() if v is not None]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(schema.kandev_meta.insert(), rows)

    def set_key(self, name: str, value: str | None) -> None:
        """Rewrite or delete a key (what a defective writer does; for fault scenarios)."""
        with self.engine.begin() as conn:
            conn.execute(schema.kandev_meta.delete().where(schema.kandev_meta.c.key == name))
            if value is not None:
                conn.execute(schema.kandev_meta.insert().values(key=name, value=value))
