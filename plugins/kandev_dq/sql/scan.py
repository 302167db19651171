"""Counted scans: a rule's conditions declared once, every count read in ONE statement, and a
capped sample (primary key first) read afterwards only for each non-zero count.

Every facts family reads its offences this way, so a healthy store costs one statement per
family whatever the number of rules, and a faulty one a few more, each capped at
:data:`~kandev_dq.sql.messages.SAMPLE_LIMIT` rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

import sqlalchemy as sa

from kandev_dq.sql.compared import shows_a_longer_key
from kandev_dq.sql.listing import Listing, listing_of, with_instants
from kandev_dq.sql.messages import sample_of


class Part(TypedDict):
    """How many rows broke one condition, a capped sample of them, and the query listing them
    all (compiled only when asked for)."""

    count: int
    sample: list[dict[str, Any]]
    listing: NotRequired[Listing]
    #: On a ``live`` read, the sessions of every counted item (:func:`carry_sessions`): what
    #: the next live run re-reads while the finding stays open; None past the carried bound.
    sessions: NotRequired[list[str | None] | None]


@dataclass(frozen=True)
class Counted:
    """One condition of a scan: the rows it flags (``when``) and how to sample them (``sample``,
    ordered and carrying primary keys; None when only the count is reported). ``count``
    replaces the row count when the condition is counted another way (a scalar subquery).
    The sample, unlimited, is also the rule's listing query, unless ``listing`` states the same
    rows otherwise (without bound value lists); ``reason`` says in it why a row is listed (the
    condition's name by default)."""

    when: sa.ColumnElement[bool] | None = None
    sample: sa.Select | None = None
    count: sa.ColumnElement | None = None
    reason: str = ""
    listing: sa.Select | None = None


def count_when(condition: sa.ColumnElement[bool]) -> sa.ColumnElement:
    """How many scanned rows satisfy ``condition`` (0, never NULL, over no rows)."""
    return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)


def part(
    conn: sa.Connection,
    count: int,
    sample: sa.Select | None,
    reason: str = "",
    *,
    listing: sa.Select | None = None,
) -> Part:
    """A count read by the counting statement, with a capped sample only when non-zero, and
    (given a ``reason``) the listing of every counted row the sample is taken from, or of
    ``listing``: the same rows stated in a form a reviewer can read (no bound value lists)."""
    shown = sample_of(conn, with_instants(sample)) if count and sample is not None else []
    found: Part = {"count": count, "sample": shown}
    listed = listing if listing is not None else sample
    if reason and listed is not None:
        found["listing"] = listing_of(conn, listed, reason)
    return found


def counted_scan(
    conn: sa.Connection,
    conditions: Mapping[str, Counted],
    *,
    select_from: sa.FromClause | None = None,
    where: sa.ColumnElement[bool] | None = None,
    extra: Iterable[sa.ColumnElement] = (),
) -> tuple[sa.RowMapping, dict[str, Part]]:
    """Every condition's count (and the labelled ``extra`` aggregates) in one statement, then
    a sample for each non-zero count. Returns the counting row and one :class:`Part` per
    condition that has a sample."""
    counts = [
        (c.count if c.count is not None else count_when(c.when)).label(name)
        for name, c in conditions.items()
    ]
    stmt = sa.select(*extra, *counts)
    if select_from is not None:
        stmt = stmt.select_from(select_from)
    if where is not None:
        stmt = stmt.where(where)
    row = conn.execute(stmt).mappings().one()
    parts = {
        name: part(
            conn,
            int(row[name]),
            c.sample,
            c.reason or name.replace("_", " "),
            listing=c.listing,
        )
        for name, c in conditions.items()
        if c.sample is not None
    }
    return row, parts


#: The sessions a live suite's open findings carry to its next run, at most (and their ids'
#: JSON, at most: a session id is the store's, of any length). Past either, the next run reads
#: in full rather than drop one; the bound keeps a stored result well under 1 MB.
CARRIED_SESSIONS = 5_000
CARRIED_CHARS = 200_000


def _token_of_longer(session: str | None) -> bool:
    return session is not None and shows_a_longer_key(session)


def carry_sessions(conn: sa.Connection, counted: Iterable[tuple[Part, sa.Select]]) -> None:
    """Give each failing part the distinct ``task_session_id`` of the items it counted
    (``sessions``), read from its ``sample`` (the rows counted, unlimited) in the same snapshot;
    past :data:`CARRIED_SESSIONS` or :data:`CARRIED_CHARS` over all the parts, or for a session
    read as the token of a longer id (which names no session), None to each."""
    failing = [(found, sample) for found, sample in counted if found["count"]]
    left, chars = CARRIED_SESSIONS, 0
    for found, sample in failing:
        inner = sample.order_by(None).subquery("counted")
        read = conn.execute(sa.select(inner.c.task_session_id).distinct().limit(left + 1)).scalars()
        sessions = [None if session is None else str(session) for session in read]
        left -= len(sessions)
        chars += len(json.dumps(sessions))
        # A session over the key limit is read as its token (sql/compared.py): not its id.
        if left < 0 or chars > CARRIED_CHARS or any(map(_token_of_longer, sessions)):
            for part_over, _ in failing:
                part_over["sessions"] = None
            return
        found["sessions"] = sessions
