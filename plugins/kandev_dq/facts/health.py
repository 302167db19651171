"""Facts behind the writer-health rules (CONTRACT §6, AC-26 … AC-29): one snapshot, few reads.

Everything is scoped by ``:since = capture_since``, parsed in Python and bound as an exact
instant (AC-24e, AC-28). Two *directed* set differences over distinct
``(task_session_id, tool_call_id)`` keys are read, never one signed number (AC-27):

* **shortfall** — keys of qualifying messages (kind ``subagent_task`` and session id, task id,
  tool_call_id all non-empty, AC-21) created at/after ``:since`` with no subagent row observed
  at/after ``:since``. Both sides are read by one statement (AC-28b), inside the run's pinned
  snapshot, so the count needs no second confirming read.
* **excess** — keys of rows observed at/after ``:since`` with no subagent message at all
  (the widest message set: kind only, no identity filter) created at/after ``:since``.

Rows minus distinct keys among rows at/after ``:since`` (cross-execution collisions, AC-32) are
reported on their own. ``MAX(observed_at)`` is read over rows at/after ``:since`` only (AC-29).
Without a usable capture_since nothing is compared (AC-28a); the reason is the fact.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from kandev_dq.dialect import at_or_after, instant_param, utc_instant
from kandev_dq.facts.activation import read_keys
from kandev_dq.instants import CAPTURE_SINCE, Instant, MalformedKey, read_key
from kandev_dq.observe import observe_subagents
from kandev_dq.queries import count_and_sample, display, qualifies, subagent_messages
from kandev_dq.schema import subagents


def health_facts(conn: sa.Connection) -> dict[str, Any]:
    raw = read_keys(conn)[CAPTURE_SINCE]
    shape = observe_subagents(conn)
    facts: dict[str, Any] = {
        "capture_since": raw,
        "table_exists": shape.table_exists,
        "not_run": None,
    }
    if raw is None:
        facts["not_run"] = f"{CAPTURE_SINCE} is absent"
        return facts
    try:
        since = read_key(CAPTURE_SINCE, raw)
    except MalformedKey as exc:
        facts["not_run"] = f"{CAPTURE_SINCE} is malformed ({exc})"
        return facts
    if not isinstance(since, Instant):  # only backfill_through may hold the '' sentinel
        facts["not_run"] = f"{CAPTURE_SINCE} is not an instant"
        return facts
    facts["since"] = since.rfc3339nano()
    bound = instant_param("since", since)

    qualifying = _qualifying_keys(bound)
    facts["subagent_messages"], facts["qualifying_keys"] = _message_keys(conn, bound)
    if not shape.table_exists:
        # Nowhere to write: every qualifying key since capture_since lacks its row.
        q = qualifying.subquery("qualifying")
        missing = sa.select(q).order_by(q.c.first_created_at, q.c.task_session_id, q.c.tool_call_id)
        facts["shortfall"] = _counted(conn, missing)
        facts["latest_observed_at"] = None
        return facts

    facts["shortfall"] = _counted(conn, _shortfall(qualifying, bound))
    facts["excess"] = _counted(conn, _excess(bound))
    observed = _observed_keys(bound).subquery("observed")
    summary = conn.execute(
        sa.select(
            sa.func.count().label("keys"),
            sa.func.coalesce(sa.func.sum(observed.c.rows), 0).label("rows"),
            sa.func.max(observed.c.last_observed_at).label("latest"),
        )
    ).one()
    keys, rows = int(summary.keys), int(summary.rows)
    facts["latest_observed_at"] = display(summary.latest)
    sample: list[dict[str, Any]] = []
    if rows > keys:
        colliding = sa.select(observed).where(observed.c.rows > 1)
        _, sample = count_and_sample(
            conn, colliding.order_by(observed.c.task_session_id, observed.c.tool_call_id)
        )
    facts["collisions"] = {"count": rows - keys, "rows": rows, "keys": keys, "sample": sample}
    return facts


def _qualifying_keys(bound: sa.BindParameter) -> sa.Select:
    """Distinct keys of qualifying messages created at/after ``:since`` (AC-21 predicate)."""
    sm = subagent_messages()
    return (
        sa.select(
            sm.c.task_session_id,
            sm.c.tool_call_id,
            sa.func.min(sm.c.id).label("message_id"),
            sa.func.min(utc_instant(sm.c.created_at)).label("first_created_at"),
            sa.func.count().label("messages"),
        )
        .where(qualifies(sm), at_or_after(sm.c.created_at, bound))
        .group_by(sm.c.task_session_id, sm.c.tool_call_id)
    )


def _message_keys(conn: sa.Connection, bound: sa.BindParameter) -> tuple[int, int]:
    """Distinct keys of every subagent message since ``:since``, and of the qualifying ones,
    in one read of the messages."""
    sm = subagent_messages()
    keys = (
        sa.select(sa.func.max(sa.case((qualifies(sm), 1), else_=0)).label("qualifying"))
        .where(at_or_after(sm.c.created_at, bound))
        .group_by(sm.c.task_session_id, sm.c.tool_call_id)
        .subquery("message_keys")
    )
    row = conn.execute(
        sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(keys.c.qualifying), 0))
    ).one()
    return int(row[0]), int(row[1])


def _widest_messages(bound: sa.BindParameter) -> sa.Select:
    """Distinct keys of every subagent message created at/after ``:since`` (no identity filter)."""
    sm = subagent_messages("any_subagent_messages")
    return (
        sa.select(sm.c.task_session_id, sm.c.tool_call_id)
        .where(at_or_after(sm.c.created_at, bound))
        .distinct()
    )


def _observed_keys(bound: sa.BindParameter) -> sa.Select:
    """Distinct keys of rows observed at/after ``:since``, with their row counts."""
    r = subagents.c
    return (
        sa.select(
            r.task_session_id,
            r.tool_call_id,
            sa.func.count().label("rows"),
            sa.func.min(r.id).label("row_id"),
            sa.func.min(utc_instant(r.observed_at)).label("first_observed_at"),
            sa.func.max(utc_instant(r.observed_at)).label("last_observed_at"),
        )
        .where(at_or_after(r.observed_at, bound))
        .group_by(r.task_session_id, r.tool_call_id)
    )


def _shortfall(qualifying: sa.Select, bound: sa.BindParameter) -> sa.Select:
    """Qualifying keys with no row observed at/after ``:since``: both sides in one statement."""
    q = qualifying.subquery("qualifying")
    o = _observed_keys(bound).subquery("observed")
    joined = q.outerjoin(
        o, sa.and_(o.c.task_session_id == q.c.task_session_id, o.c.tool_call_id == q.c.tool_call_id)
    )
    return (
        sa.select(
            q.c.task_session_id,
            q.c.tool_call_id,
            q.c.message_id,
            q.c.first_created_at,
            q.c.messages,
        )
        .select_from(joined)
        .where(o.c.task_session_id.is_(None))
        .order_by(q.c.first_created_at, q.c.task_session_id, q.c.tool_call_id)
    )


def _excess(bound: sa.BindParameter) -> sa.Select:
    """Row keys observed at/after ``:since`` with no subagent message at all since then."""
    o = _observed_keys(bound).subquery("observed")
    w = _widest_messages(bound).subquery("messaged")
    joined = o.outerjoin(
        w, sa.and_(w.c.task_session_id == o.c.task_session_id, w.c.tool_call_id == o.c.tool_call_id)
    )
    return (
        sa.select(
            o.c.task_session_id,
            o.c.tool_call_id,
            o.c.row_id,
            o.c.rows,
            o.c.first_observed_at,
        )
        .select_from(joined)
        .where(w.c.task_session_id.is_(None))
        .order_by(o.c.first_observed_at, o.c.task_session_id, o.c.tool_call_id)
    )


def _counted(conn: sa.Connection, stmt: sa.Select) -> dict[str, Any]:
    count, sample = count_and_sample(conn, stmt)
    return {"count": count, "sample": sample}
