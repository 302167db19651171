"""Query building blocks shared by the migration runner and every family of facts.

The subagent-message reading of ``task_session_messages`` (CONTRACT §1, §4) is written once
here: its JSON fields, the AC-21 source predicate, and capped samples of offending rows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from kandev_dq.dialect import json_flag, json_number, json_text, metadata_doc
from kandev_dq.instants import parse_stored
from kandev_dq.schema import task_session_messages as messages

SAMPLE_LIMIT = 20
SUBAGENT_KIND = "subagent_task"
_TASK = ("normalized", "subagent_task")


def subagent_messages(name: str = "subagent_messages") -> sa.Subquery:
    """Messages of kind ``subagent_task`` with their metadata fields as columns (AC-23b).

    The document is read once per row in an inner subquery (``OFFSET 0`` keeps PostgreSQL
    from flattening it and casting ``::jsonb`` once per field).
    """
    docs = (
        sa.select(
            messages.c.id,
            messages.c.task_session_id,
            messages.c.task_id,
            messages.c.turn_id,
            messages.c.created_at,
            messages.c.updated_at,
            metadata_doc(messages.c.metadata).label("doc"),
        )
        .offset(0)
        .subquery(f"{name}_docs")
    )
    doc = docs.c.doc
    return (
        sa.select(
            docs.c.id,
            docs.c.task_session_id,
            docs.c.task_id,
            docs.c.turn_id,
            docs.c.created_at,
            docs.c.updated_at,
            json_text(doc, "tool_call_id").label("tool_call_id"),
            json_text(doc, "parent_tool_call_id").label("parent_tool_call_id"),
            json_text(doc, "status").label("tool_status"),
            json_text(doc, *_TASK, "status").label("agent_status"),
            json_text(doc, *_TASK, "subagent_type").label("subagent_type"),
            json_text(doc, *_TASK, "description").label("description"),
            json_text(doc, *_TASK, "agent_id").label("agent_id"),
            json_text(doc, *_TASK, "child_session_id").label("child_session_id"),
            json_text(doc, *_TASK, "model").label("model"),
            json_flag(doc, *_TASK, "is_async").label("is_async"),
            json_number(doc, *_TASK, "total_tokens").label("total_tokens"),
            json_number(doc, *_TASK, "tool_use_count").label("tool_use_count"),
            json_number(doc, *_TASK, "duration_ms").label("duration_ms"),
        )
        .where(json_text(doc, "normalized", "kind") == SUBAGENT_KIND)
        .subquery(name)
    )


def non_empty(column) -> sa.ColumnElement:
    return sa.and_(column.is_not(None), column != "")


def qualifies(sm: sa.Subquery) -> sa.ColumnElement:
    """The AC-21 source predicate: session id, task id and tool_call_id all non-empty."""
    return sa.and_(
        non_empty(sm.c.task_session_id), non_empty(sm.c.task_id), non_empty(sm.c.tool_call_id)
    )


def display(value: Any) -> Any:
    """A value made JSON-safe and dialect-neutral (timestamps as ``…Z`` UTC text)."""
    if isinstance(value, datetime):
        return parse_stored(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] in " T":
        try:
            return parse_stored(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        except ValueError:
            return value
    if hasattr(value, "is_integer") and not isinstance(value, float | int):
        return int(value) if value == int(value) else float(value)
    return value


def count_and_sample(
    conn: sa.Connection, stmt: sa.Select, limit: int = SAMPLE_LIMIT
) -> tuple[int, list[dict[str, Any]]]:
    """How many rows ``stmt`` yields, and the first ``limit`` of them (never all of them)."""
    count = conn.execute(
        sa.select(sa.func.count()).select_from(stmt.subquery("offending"))
    ).scalar_one()
    if not count:
        return 0, []
    rows = conn.execute(stmt.limit(limit)).mappings()
    return count, [{k: display(v) for k, v in row.items()} for row in rows]
