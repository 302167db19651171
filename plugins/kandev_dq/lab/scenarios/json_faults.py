"""Metadata JSON read one way on both dialects (AC-19, AC-23b): escaped member names, repeated
member names, and documents nested past the parsers' depth."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.lab.scenarios.baseline import EXECUTION_1, SL, TL, baseline, next_free
from kandev_dq.lab.scenarios.registry import registered
from kandev_dq.lab.scenarios.rows import (
    MICROSECOND,
    SECOND,
    healthy_row,
    insert_rows,
    subagent_message,
    tool_call,
    uid,
    writing,
)


def _json_subagent(name: str, at: datetime, rewrite: Callable[[str], str]) -> dict[str, Any]:
    """A live subagent message whose metadata text ``rewrite`` changes, meaning kept."""
    # fmt: off
    message = subagent_message(
        uid(f"m-live-{name}"), SL, TL, uid("turn-live"), at, tool_call(f"Live{name}"),
        tool_status="completed", updated=at + 30 * SECOND, subagent_type="general-purpose",
        description=f"Subagent written with {name} metadata", status="completed",
        agent_id="c0ffee09", model="claude-opus-4-1-20250805", is_async=False,
        total_tokens=4200, tool_use_count=3, duration_ms=30000,
    )
    # fmt: on
    return {**message, "metadata": rewrite(message["metadata"])}


def _add_json_subagent(
    engine: sa.Engine, name: str, rewrite: Callable[[str], str], *, row: bool
) -> None:
    message = _json_subagent(name, next_free(engine), rewrite)
    with writing(engine) as conn:
        insert_rows(conn, schema.task_session_messages, [message])
        if row:  # json.loads reads the text as JSON does: the row a correct writer leaves
            observed = message["created_at"] + 250 * MICROSECOND
            insert_rows(conn, schema.subagents, [healthy_row(message, EXECUTION_1, observed)])


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


@registered(
    "escaped_member_names_with_row",
    "A subagent message whose member names are \\u-escaped, with its live row",
)
def _escaped_with_row(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "escaped", _escape_names, row=True)


@registered(
    "escaped_member_names_without_row",
    "A subagent message whose member names are \\u-escaped, and no row: a shortfall",
    violates=("AC-26",),
    severity="error",
)
def _escaped_without_row(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "escaped", _escape_names, row=False)


@registered(
    "repeated_member_names",
    "A subagent message repeating member names (last one real), with the last one's row",
    severity="warning",
    discloses=("expect_message_metadata_member_names_to_be_unique",),
)
def _repeated_names(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "repeated", _repeat_names, row=True)


@registered(
    "metadata_nested_10000_deep",
    "A subagent message without a row, its metadata nested 10,000 deep: unreadable, read as {}",
    violates=("AC-23b",),
    severity="warning",
)
def _nested_10000(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "deep", _nest(10_000), row=False)


@registered(
    "metadata_nested_100000_deep",
    "As above at 100,000 levels, past PostgreSQL's own parser stack",
    violates=("AC-23b",),
    severity="warning",
)
def _nested_100000(engine: sa.Engine) -> None:
    baseline(engine)
    _add_json_subagent(engine, "deep", _nest(100_000), row=False)
