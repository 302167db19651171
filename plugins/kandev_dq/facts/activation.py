"""Facts behind the activation-key rules (CONTRACT §5, the seed): one snapshot, few scans.

Keys are parsed in Python and bound as exact instants (AC-24e); ``''`` is never parsed
(AC-24f). A second-precision key written by the pre-amendment build is read with the one
second of tolerance the seed discloses (AC-24 point 5): its true instant lies in [key, key+1s).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    EmptySentinel,
    Instant,
    MalformedKey,
    Precision,
    read_key,
)
from kandev_dq.contract.states import state_of
from kandev_dq.contract.tables import UNKNOWN_EXECUTION, subagents
from kandev_dq.contract.tables import task_session_messages as messages
from kandev_dq.facts.shapes import (
    ActivationFacts,
    ChangeWindow,
    DescribedKey,
    DisclosureFacts,
    SentinelBackfillFacts,
)
from kandev_dq.sql.compared import byte_order, key_shown, key_token, stored_key_token
from kandev_dq.sql.dialect import at_or_after, before, instant_param
from kandev_dq.sql.keys import read_keys
from kandev_dq.sql.mapping import qualifies, read_once, row_handle, subagent_messages
from kandev_dq.sql.messages import SAMPLE_VALUE_CHARS, display
from kandev_dq.sql.scan import Counted, counted_scan
from kandev_dq.sql.shown import prepare, shown
from kandev_dq.store.observe import message_handle, observe_subagents

_LEGACY_TOLERANCE = timedelta(seconds=1)
#: What coverage reads of a subagent message: its key, its identity (AC-21) and its creation.
COVERAGE_FIELDS = ("id", "task_session_id", "task_id", "tool_call_id", "created_at")
#: The columns :func:`~kandev_dq.sql.compared.byte_order` gives an id read by handle.
_ID_KEYS = ("id_head", "id_after")


def describe_key(name: str, raw: str | None) -> DescribedKey:
    """A key as a reviewer sees it: absent, sentinel, a parsed instant, or malformed (why)."""
    if raw is None:
        return {"kind": "absent"}
    try:
        value = read_key(name, raw)
    except MalformedKey as exc:
        return {"kind": "malformed", "raw": raw[:80], "error": str(exc)}
    if isinstance(value, EmptySentinel):
        return {"kind": "sentinel", "raw": ""}
    return {
        "kind": "instant",
        "raw": raw,
        "instant": value.rfc3339nano(),
        "precision": value.precision,
    }


def _instant(name: str, raw: str | None) -> Instant | None:
    try:
        value = read_key(name, raw)
    except MalformedKey:
        return None
    return value if isinstance(value, Instant) else None


def _latest_possible(key: Instant) -> Instant:
    """The latest instant a key may stand for: a legacy second-precision key spans 1 s."""
    if key.precision is Precision.SECOND:
        return key.shifted(_LEGACY_TOLERANCE // timedelta(microseconds=1) * 1000 - 1)
    return key


def _just_after(key: Instant) -> Instant:
    """The first nanosecond strictly after ``key`` (so ``col < it`` means ``col <= key``; the
    bound parameter rounds it up to the microsecond on PostgreSQL, AC-24e)."""
    return key.shifted(1)


def activation_facts(conn: sa.Connection, window: ChangeWindow | None = None) -> ActivationFacts:
    """The keys, the state and the schema observed; and, without a ``window``, the boundary
    offences counted over the table. A live read (with a window) judges the keys, their pair
    and the schema only: its rules read nothing else, whatever the window."""
    keys = read_keys(conn)
    shape = observe_subagents(conn)
    facts: dict[str, Any] = {
        "keys": keys,
        "described": {name: describe_key(name, raw) for name, raw in keys.items()},
        "state": state_of(keys),
        "table_exists": shape.table_exists,
        "amended": shape.clauses_1_to_3_hold,
        "schema_findings": shape.problems(),
    }
    if window is not None:
        facts["window"] = {
            "start": window.start,
            "full": window.start is None,
            "reason": window.reason,
            "reads": {"kandev_meta": "the keys, and the schema observed (no rows read)"},
        }
        return facts
    if not shape.table_exists:
        return facts
    capture = _instant(CAPTURE_SINCE, keys[CAPTURE_SINCE])
    through = _instant(BACKFILL_THROUGH, keys[BACKFILL_THROUGH])
    rows = subagents.c
    row_cols = [rows.id, rows.task_session_id, rows.tool_call_id, rows.source, rows.observed_at]
    is_backfill = rows.source == "backfill"

    # Every count in ONE statement (one scan of the rows, one read of the messages); a capped
    # sample is read afterwards only for a non-zero count.
    conditions = {"backfill_rows": Counted(when=is_backfill)}
    if capture is not None:
        # AC-24 point 4: every backfilled message predates capture_since (sampled after INSERT).
        bound = instant_param("capture_since", _just_after(_latest_possible(capture)))
        late = sa.and_(is_backfill, at_or_after(rows.observed_at, bound))
        conditions["backfill_after_capture"] = Counted(
            when=late, sample=sa.select(*row_cols).where(late).order_by(rows.observed_at, rows.id)
        )
    if through is not None:
        # Coverage: every qualifying message at or before backfill_through has a row (AC-24 pt 1).
        covered_until = instant_param("backfill_through", _just_after(through))
        handle = message_handle(conn)
        uncovered = _uncovered(covered_until, tokens=True, handle=handle)
        conditions["uncovered_messages"] = Counted(
            count=sa.select(sa.func.count())
            .select_from(uncovered.order_by(None).subquery("uncovered"))
            .scalar_subquery(),
            sample=uncovered,
            listing=_uncovered(covered_until, tokens=False, handle=handle),
        )
        # An under-claim (rows past the published mark) is disclosed, never an error.
        past = instant_param("through_latest", _just_after(_latest_possible(through)))
        under = sa.and_(is_backfill, at_or_after(rows.observed_at, past))
        conditions["backfill_after_through"] = Counted(
            when=under, sample=sa.select(*row_cols).where(under).order_by(rows.observed_at, rows.id)
        )
    prepare(conn)  # the digest of a key over the limit (sql/compared.py)
    found, parts = counted_scan(conn, conditions, select_from=subagents)
    facts["backfill_rows"] = int(found["backfill_rows"])
    facts.update(parts)
    return facts


def _uncovered(covered_until: sa.BindParameter, *, tokens: bool, handle: str | None) -> sa.Select:
    """Qualifying messages created up to ``backfill_through`` whose key no row has (AC-24
    point 1), in creation order; the key fields only, each read once per message
    (read_once). With ``tokens`` the key is read as its token (sql/compared.py), so a 50 MB
    one is neither copied into the read nor compared whole; a listing compares the keys
    themselves, as it runs where kandev-dq's digest function is not registered. With
    ``handle`` (SQLite, see :func:`~kandev_dq.sql.mapping.row_handle`) the read carries each
    message's handle in place of its id and session, ordered by
    :func:`~kandev_dq.sql.compared.byte_order`, and takes them from the message's row after
    it: a 50 MB id or session is neither materialised nor sorted whole."""
    keyed = subagent_messages(only=COVERAGE_FIELDS, handle=handle)

    def as_read(column):
        if tokens and column.name == "tool_call_id":
            return key_token(column).label(column.name)
        if tokens and handle and column.name == "task_session_id":
            return stored_key_token(column).label(column.name)
        return column

    read = [as_read(c) for c in keyed.c if not (handle and c.name == "id")]
    if handle:
        ids = byte_order(keyed.c.id, keyed.c.task_session_id, messages.alias("id_peers"))
        read += [key.label(name) for key, name in zip(ids, _ID_KEYS, strict=True)]
    sm = read_once(sa.select(*read)).subquery("keyed_messages")
    if handle:
        message = messages.alias("uncovered_message")
        source = sm.join(message, row_handle(message, handle) == sm.c.handle)
        message_id, session = message.c.id, message.c.task_session_id
        order = tuple(sm.c[name] for name in _ID_KEYS)
    else:
        source, message_id, session, order = sm, sm.c.id, sm.c.task_session_id, (sm.c.id,)
    covering = subagents.alias("covering")  # never correlated with the outer scan
    covering_key = stored_key_token(covering.c.tool_call_id) if tokens else covering.c.tool_call_id
    has_row = (
        sa.select(sa.literal(1))
        .where(covering.c.task_session_id == session, covering_key == sm.c.tool_call_id)
        .exists()
    )
    return (
        sa.select(
            message_id.label("id"),
            session.label("task_session_id"),
            (key_shown(sm.c.tool_call_id) if tokens else sm.c.tool_call_id).label("tool_call_id"),
            sm.c.created_at,
        )
        .select_from(source)
        .where(qualifies(sm), before(sm.c.created_at, covered_until), ~has_row)
        .order_by(sm.c.created_at, *order)
    )


def sentinel_backfill_facts(conn: sa.Connection, window_minutes: float) -> SentinelBackfillFacts:
    """Backfill rows on a store whose backfill_through is '' (AC-24f), split by the window.

    A message committed between the MAX and the INSERT under READ COMMITTED is inserted
    inside the backfill's transaction, just before capture_since: that window is tolerated.
    """
    keys = read_keys(conn)
    shape = observe_subagents(conn)
    facts: dict[str, Any] = {
        "sentinel": keys[BACKFILL_THROUGH] == "",
        "table_exists": shape.table_exists,
    }
    if not (facts["sentinel"] and shape.table_exists):
        return facts
    rows = subagents.c
    is_backfill = rows.source == "backfill"
    backfill = sa.select(rows.id, rows.task_session_id, rows.tool_call_id, rows.observed_at).where(
        is_backfill
    )
    capture = _instant(CAPTURE_SINCE, keys[CAPTURE_SINCE])
    if capture is None:
        every = backfill.order_by(rows.observed_at, rows.id)
        conditions = {"outside_window": Counted(when=sa.true(), sample=every)}
    else:
        start = instant_param(
            "window_start", Instant(capture.micro - timedelta(minutes=window_minutes))
        )
        inside = at_or_after(rows.observed_at, start)
        conditions = {
            "outside_window": Counted(
                when=~inside, sample=backfill.where(~inside).order_by(rows.observed_at)
            ),
            "inside_window": Counted(
                when=inside, sample=backfill.where(inside).order_by(rows.observed_at)
            ),
        }
    _, parts = counted_scan(conn, conditions, select_from=subagents, where=is_backfill)
    facts.update(parts)
    facts.setdefault("inside_window", {"count": 0, "sample": []})
    return facts


def disclosure_facts(conn: sa.Connection) -> DisclosureFacts:
    """AC-25: rows by source, by side of each key, and by execution identity."""
    keys = read_keys(conn)
    shape = observe_subagents(conn)
    if not shape.table_exists:
        return {"table_exists": False, "population": []}
    rows = subagents.c
    columns = []
    for label, name in (("capture_since", CAPTURE_SINCE), ("execution_since", EXECUTION_SINCE)):
        key = _instant(name, keys[name])
        if key is None:
            side = sa.literal("no key")
        else:
            side = sa.case(
                (at_or_after(rows.observed_at, instant_param(label, key)), "at_or_after"),
                else_="before",
            )
        columns.append(side.label(label))
    if shape.has_execution_column:
        identity = sa.case(
            (sa.column("agent_execution_id") == UNKNOWN_EXECUTION, "unknown"), else_="real"
        )
    else:
        identity = sa.literal("unknown")
    columns.append(identity.label("execution_identity"))
    # Grouped on bounded values read first: SQLite's grouping sorter carries each column the
    # grouped expressions read (a 50 MB source or execution id held there several times).
    cut = read_once(sa.select(stored_key_token(rows.source).label("source"), *columns))
    cut = cut.select_from(subagents).subquery("cut")
    grouped = sa.select(*cut.c, sa.func.count().label("rows"))
    grouped = grouped.group_by(*(sa.literal_column(str(i)) for i in range(1, len(columns) + 2)))
    cells = grouped.subquery("cells")
    # Each cell's source as shown, cut after grouping: a huge (or NUL-led) source is its
    # size and digest in the result (AC-25), and no row is cut only to be grouped.
    prepare(conn)
    shown_cells = sa.select(
        shown(key_shown(cells.c.source), SAMPLE_VALUE_CHARS).label("source"),
        *(cells.c[c.key] for c in columns),
        cells.c.rows,
    )
    result = conn.execute(
        shown_cells.order_by(*(sa.literal_column(str(i)) for i in range(1, len(columns) + 2)))
    )
    return {
        "table_exists": True,
        "population": [{k: display(v) for k, v in row.items()} for row in result.mappings()],
    }
