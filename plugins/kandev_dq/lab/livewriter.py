"""The row a healthy live writer leaves for one subagent message (CONTRACT §2), defined once.

The sample generator and the scenarios both record live subagents through
:func:`healthy_live_row`; they differ only in how they choose ids and instants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kandev_dq.contract import tables as schema

_TERMINAL = frozenset(schema.TERMINAL_TOOL_STATUSES)

#: An instant in whatever form the caller keeps: a datetime, or integer nanoseconds for a
#: writer that stamps at Go's resolution. It must order and add its lag.
When = TypeVar("When")


def _text(value: Any) -> str | None:
    """A reported text, or NULL for one not reported ('' included: CONTRACT §2)."""
    return value if isinstance(value, str) and value != "" else None


def healthy_live_row(
    metadata: dict[str, Any],
    *,
    session_id: str,
    task_id: str,
    turn_id: str | None,
    execution: str | None,
    observed: When,
    last_update: When,
    unsettled_lag: Callable[[], Any],
) -> dict[str, Any]:
    """The ``task_session_subagents`` columns for a subagent message's parsed ``metadata``.

    ``observed`` is when the writer saw the frame, ``last_update`` the message's last update;
    ``unsettled_lag`` is asked (only for a row that has not settled) how long after
    ``observed`` the row was last written. ``execution`` None leaves ``agent_execution_id``
    out (the pre-amendment table). The caller adds the row's ``id``.
    """
    task = metadata["normalized"]["subagent_task"]

    def metric(name: str, zero_is_null: bool) -> int | None:
        value = task.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return None  # AC-7 unreported, AC-9 never negative
        return None if value == 0 and zero_is_null else value  # AC-7a / AC-8

    agent_status, tool_status = _text(task.get("status")), _text(metadata.get("status"))
    launched = agent_status == "async_launched"
    settled = None
    if tool_status in _TERMINAL:  # AC-10..12: terminality from tool_status only
        settled = max(observed, last_update)
    row: dict[str, Any] = {
        "task_session_id": session_id,
        "task_id": task_id,
        "turn_id": _text(turn_id),
        "tool_call_id": metadata["tool_call_id"],
    }
    if execution is not None:
        row["agent_execution_id"] = execution
    row |= {
        "parent_tool_call_id": _text(metadata.get("parent_tool_call_id")),
        **{
            name: _text(task.get(name))
            for name in ("subagent_type", "description", "agent_id", "child_session_id", "model")
        },
        "agent_status": agent_status,
        "tool_status": tool_status,
        "is_async": 1 if task.get("is_async") is True else 0,
        # async_launched rows carry no metrics at all, whatever the frame said (AC-7).
        "total_tokens": None if launched else metric("total_tokens", True),
        "tool_use_count": None if launched else metric("tool_use_count", False),
        "duration_ms": None if launched else metric("duration_ms", True),
        "source": "live",
        "observed_at": observed,
        "settled_at": settled,
        "updated_at": settled if settled is not None else observed + unsettled_lag(),
    }
    return row
