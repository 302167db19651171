"""How scenario rows are written: stable ids, message and row shapes, one transaction."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import parse_stored
from kandev_dq.lab.livewriter import healthy_live_row
from kandev_dq.lab.storebuilder import subagent_metadata

MICROSECOND = timedelta(microseconds=1)
MILLISECOND = timedelta(milliseconds=1)
SECOND = timedelta(seconds=1)
_NAMESPACE = uuid.UUID("5b0d7c6e-0d7f-4f8e-9a53-6b1f3c2a9e41")


def uid(name: str) -> str:
    """A stable UUID for a named row: the same store on every build and both dialects."""
    return str(uuid.uuid5(_NAMESPACE, name))


def tool_call(name: str) -> str:
    """A tool_call_id shaped like an agent's (``toolu_01`` + 22 characters)."""
    return "toolu_01" + name.ljust(22, "0")[:22]


def stored_form(conn: sa.Connection, value: datetime | str) -> datetime | str:
    """A timestamp as the dialect stores it: text verbatim on SQLite, a datetime elsewhere."""
    if conn.dialect.name == "sqlite" or isinstance(value, datetime):
        return value
    return parse_stored(value)


# --- writing -----------------------------------------------------------------------------------


@contextlib.contextmanager
def transaction(conn: sa.Connection) -> Iterator[sa.Connection]:
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
def writing(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One write transaction on a connection of its own."""
    with engine.connect() as conn, transaction(conn):
        yield conn


def store_url(engine: sa.Engine) -> str:
    """The URL of the database ``engine`` writes to (a SQLite engine may be creator-built)."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("PRAGMA database_list").all()
        path = next(row[2] for row in rows if row[1] == "main")
        return f"sqlite:///{path}"
    return engine.url.render_as_string(hide_password=False)


def message_row(
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


def subagent_message(
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
    return message_row(mid, session, task, turn, created, meta, updated=updated)


def ordinary_message(
    mid: str, session: str, task: str, turn: str, created: datetime, metadata
) -> dict:
    return message_row(
        mid, session, task, turn, created, metadata, kind="message", content="Looking into it."
    )


def session_row(sid: str, task: str, started: datetime) -> dict[str, Any]:
    return {"id": sid, "task_id": task, "started_at": started, "updated_at": started}


def turn_row(tid: str, session: str, task: str, started: datetime) -> dict[str, Any]:
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


def insert_rows(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    stamps = {c.name for c in table.columns if isinstance(c.type, schema.StoredTimestamp)}
    conn.execute(
        table.insert(),
        [
            {
                k: (stored_form(conn, v) if k in stamps and v is not None else v)
                for k, v in row.items()
            }
            for row in rows
        ],
    )


def healthy_row(
    message: dict[str, Any], execution: str | None, observed: datetime
) -> dict[str, Any]:
    """The ``task_session_subagents`` row a healthy live writer leaves (CONTRACT §2)."""
    row = healthy_live_row(
        json.loads(message["metadata"]),
        session_id=message["task_session_id"],
        task_id=message["task_id"],
        turn_id=message["turn_id"],
        execution=execution,
        observed=observed,
        last_update=parse_stored(message["updated_at"]),
        unsettled_lag=lambda: MILLISECOND,
    )
    return {"id": uid(f"row-{message['id']}-{execution}"), **row}
