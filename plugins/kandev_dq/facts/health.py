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

**How it reads.** The messages at/after ``:since`` are read through the created_at index and
their documents parsed once (:func:`kandev_dq.sql.mapping.subagent_messages` with ``since``); the
rows at/after ``:since`` are read once. Both key sets are stacked (``UNION ALL``) and grouped by
key into one *ledger* saying, per key, on which side(s) it appears. Every count above comes
from one aggregate over that ledger: ONE statement for both sides and both differences, whose
cost is a sort of the window, whatever the planner believes about the window's size (a join
planned for one estimated row would compare every message key with every row key). Capped
samples are read from the same ledger only for a non-zero count.

**A live window** (:class:`~kandev_dq.facts.shapes.ChangeWindow` with a start) reads the same
ledger for the sessions where something changed at or after the start only (a message created
or updated, a row observed or updated: :func:`kandev_dq.facts.window.read_window`) and those
of its open findings, and counts every key there, not only the keys that changed: a message or
row whose tool_call_id was rewritten leaves its old key, which nothing of it names any more, to
what else holds it (a row without its message, AC-27), and that key lies in the same session.
A key lies within one session, so every count is nightly's restricted to those sessions: live
reports nothing nightly would not, and every fault of a key a changed message or row had before
or has after the change that nightly reports (CONTRACT §6), unless the change moved it to
another session (docs/interpretations.md, "What `live` cannot see").

AC-29's MAX(observed_at) over every row since ``:since`` is the ledger's when a row of it was
observed in the window (every such row's session changed, so the ledger holds the table's
latest row); only when none was is it read over the whole table, and when it is NULL the whole
record is read, as nightly reads it. On PostgreSQL the changed sessions are read first, in the
same snapshot, and bound as one array (:meth:`~kandev_dq.facts.window.WindowRead.in_sessions`);
listings keep the subquery.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.instants import CAPTURE_SINCE, Instant, MalformedKey, read_key
from kandev_dq.contract.tables import subagents
from kandev_dq.facts.shapes import ChangeWindow, HealthFacts
from kandev_dq.facts.window import WindowRead, read_window
from kandev_dq.sql.compared import key_shown, key_token, stored_key_token
from kandev_dq.sql.dialect import at_or_after, index_reads, instant_param, utc_instant
from kandev_dq.sql.keys import read_keys
from kandev_dq.sql.listing import listing_of
from kandev_dq.sql.mapping import qualifies, subagent_messages
from kandev_dq.sql.messages import display, sample_of
from kandev_dq.sql.scan import carry_sessions, count_when, part
from kandev_dq.sql.shown import prepare
from kandev_dq.store.observe import observe_subagents


def health_facts(conn: sa.Connection, window: ChangeWindow | None = None) -> HealthFacts:
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
    read = read_window(conn, window, with_rows=shape.table_exists)
    if read is not None and not read.full and not shape.table_exists:
        # AC-29: no table, no row since capture_since: every qualifying key since then is one
        # the writer missed, changed in the window or not: the whole record is read.
        read = read_window(conn, ChangeWindow(None, _SILENT), with_rows=False)
    ledger, counts = _counted(conn, bound, with_rows=shape.table_exists, read=read)
    latest = counts.latest
    if read is not None and not read.full and not counts.recent:
        # AC-29's MAX(observed_at) over every row since capture_since: the ledger holds every
        # row observed in the window (their sessions changed), so with one of them its latest
        # is the table's. Without one, the latest is older: read over all the rows (a scan,
        # the table having no index on observed_at), and if there is none, nothing was written
        # since capture_since and the whole record is read, as nightly reads it.
        latest = _latest_observed(conn, bound)
        if latest is None:
            read = read_window(conn, ChangeWindow(None, _SILENT), with_rows=True)
            ledger, counts = _counted(conn, bound, with_rows=True, read=read)
    if read is not None:
        facts["window"] = read.facts
    k = ledger.c
    listed = _ledger(bound, with_rows=shape.table_exists, read=read, listing=True).c

    facts["subagent_messages"] = int(counts.subagent_messages)
    facts["qualifying_keys"] = int(counts.qualifying_keys)
    # Without the table, nowhere to write: every qualifying key since capture_since lacks its
    # row (and no row is in excess).
    directed = [("shortfall", counts.shortfall, _missing, "qualifying key without a row")]
    if shape.table_exists:
        directed.append(("excess", counts.excess, _unmatched, "row key without a subagent message"))
    # A failing part reads the ledger again (its sample, its sessions): planned for the
    # window's indexes as its count was, or PostgreSQL scans the subagent rows for each.
    with index_reads(conn, small=read is not None and read.small):
        for name, count, items, reason in directed:
            facts[name] = part(
                conn, int(count), items(k), f"{reason} since capture_since", listing=items(listed)
            )
        # The sessions of what failed stay open for the next live run, whichever run found
        # it: a live run re-reads them, and a full run's verdict settles them (AC-26).
        carry_sessions(conn, [(facts[name], items(k)) for name, _, items, _ in directed])
    # AC-29: a silent writer leaves MAX(observed_at) since capture_since NULL; then every
    # qualifying key since then is one it did not write.
    silent = [listed.qualifying == 1]
    if shape.table_exists:
        since = subagents.alias("observed_since")  # never correlated with the ledger's rows
        silent.append(
            ~sa.select(sa.literal(1))
            .select_from(since)
            .where(at_or_after(since.c.observed_at, bound))
            .exists()
        )
    facts["qualifying_listing"] = listing_of(
        conn,
        sa.select(
            listed.task_session_id, listed.tool_call_id, listed.message_id, listed.first_created_at
        )
        .where(*silent)
        .order_by(listed.first_created_at, listed.task_session_id, listed.tool_call_id),
        "qualifying key, and no row observed since capture_since",
    )
    if not shape.table_exists:
        facts["latest_observed_at"] = None
        return facts

    keys, rows = int(counts.keys), int(counts.rows)
    # A window's ledger holds the changed sessions' rows only: the MAX is the table's (above).
    facts["latest_observed_at"] = display(latest)
    sample: list[dict[str, Any]] = []
    if rows > keys:
        colliding = sa.select(
            k.task_session_id,
            k.tool_call_id,
            k.rows,
            k.row_id,
            k.first_observed_at,
            k.last_observed_at,
        ).where(k.rows > 1)
        sample = sample_of(conn, colliding.order_by(k.task_session_id, k.tool_call_id))
    facts["collisions"] = {
        "count": rows - keys,
        "rows": rows,
        "keys": keys,
        "sample": sample,
        "listing": listing_of(
            conn,
            _further_rows(bound, read, with_execution=shape.has_execution_column),
            "a further row of a key already observed since capture_since (AC-32)",
        ),
    }
    return facts


def _missing(k) -> sa.Select:
    """The shortfall's keys (qualifying, no row) in the ledger whose columns are ``k``."""
    return (
        sa.select(k.task_session_id, k.tool_call_id, k.message_id, k.first_created_at, k.messages)
        .where(k.qualifying == 1, k.observed == 0)
        .order_by(k.first_created_at, k.task_session_id, k.tool_call_id)
    )


def _unmatched(k) -> sa.Select:
    """The excess's keys (a row, no subagent message) in the ledger whose columns are ``k``."""
    return (
        sa.select(k.task_session_id, k.tool_call_id, k.row_id, k.rows, k.first_observed_at)
        .where(k.observed == 1, k.messaged == 0)
        .order_by(k.first_observed_at, k.task_session_id, k.tool_call_id)
    )


def _further_rows(
    bound: sa.BindParameter, read: WindowRead | None, *, with_execution: bool
) -> sa.Select:
    """The collisions' rows: each row since ``:since`` after the first of its key (by observed
    instant, then id), so there are rows minus keys of them (AC-32), grouped by the key itself
    as a listing runs where kandev-dq's digest function is not registered."""
    r = subagents.c
    in_window = (
        [read.in_sessions(r.task_session_id, listing=True)] if read and not read.full else []
    )
    key = (r.task_session_id, r.tool_call_id)
    execution = [r.agent_execution_id] if with_execution else []
    ranked = (
        sa.select(
            r.task_session_id,
            r.tool_call_id,
            r.id,
            *execution,
            r.observed_at,
            sa.func.row_number()
            .over(partition_by=key, order_by=(utc_instant(r.observed_at), r.id))
            .label("nth_of_key"),
        )
        .where(at_or_after(r.observed_at, bound), *in_window)
        .subquery("rows_since")
    )
    c = ranked.c
    shown = [c.task_session_id, c.tool_call_id, c.id, *(c[x.key] for x in execution)]
    return (
        sa.select(*shown, c.observed_at)
        .where(c.nth_of_key > 1)
        .order_by(c.task_session_id, c.tool_call_id, c.nth_of_key)
    )


_NULL = sa.literal_column("NULL")
_SILENT = "no subagent row observed since capture_since: the whole record is read (AC-29)"


def _latest_observed(conn: sa.Connection, bound: sa.BindParameter) -> str | None:
    """``MAX(observed_at)`` over every row at/after ``:since`` (AC-29), as text."""
    r = subagents.c
    return conn.execute(
        sa.select(sa.cast(sa.func.max(utc_instant(r.observed_at)), sa.Text)).where(
            at_or_after(r.observed_at, bound)
        )
    ).scalar()


def _counted(
    conn: sa.Connection, bound: sa.BindParameter, *, with_rows: bool, read: WindowRead | None
) -> tuple[sa.Subquery, sa.Row]:
    """The ledger and its counts, in ONE statement (see the module's note); a window's planned
    for the indexes that read its sessions (:func:`~kandev_dq.sql.dialect.index_reads`)."""
    ledger = _ledger(bound, with_rows=with_rows, read=read)
    k = ledger.c
    prepare(conn)  # the digest of a key over the limit (sql/compared.py)
    with index_reads(conn, small=read is not None and read.small):
        counts = conn.execute(
            sa.select(
                count_when(k.messaged == 1).label("subagent_messages"),
                count_when(k.qualifying == 1).label("qualifying_keys"),
                count_when(sa.and_(k.qualifying == 1, k.observed == 0)).label("shortfall"),
                count_when(sa.and_(k.observed == 1, k.messaged == 0)).label("excess"),
                count_when(k.observed == 1).label("keys"),
                sa.func.coalesce(sa.func.sum(k.rows), 0).label("rows"),
                # As text: PostgreSQL's infinity has no Python datetime (CONTRACT §1 timestamps).
                sa.cast(sa.func.max(k.last_observed_at), sa.Text).label("latest"),
                sa.func.coalesce(sa.func.max(k.recent), 0).label("recent"),
            )
        ).one()
    return ledger, counts


def _ledger(
    bound: sa.BindParameter,
    *,
    with_rows: bool,
    read: WindowRead | None = None,
    listing: bool = False,
) -> sa.Subquery:
    """One row per ``(task_session_id, tool_call_id)`` key seen at/after ``:since``: whether a
    subagent message has it (``messaged``, the widest set), a qualifying one (``qualifying``,
    AC-21), a row (``observed``), with what each side shows of it, and whether a row of it was
    observed at/after the window ``read``'s start (``recent``). With a window, only the
    sessions where something changed, or of an open finding, are read, and every key of them
    is judged (for a ``listing``, as a subquery whatever the dialect: see
    :meth:`WindowRead.in_sessions`)."""
    windowed = read is not None and not read.full
    compared = (lambda key: key) if listing else key_token
    stored = (lambda key: key) if listing else stored_key_token
    # A listing keeps each timestamp as stored: it shows it beside its instant (README).
    instant = (lambda column: column) if listing else utc_instant
    no_instant = sa.type_coerce(_NULL, subagents.c.observed_at.type) if listing else _NULL

    def within(column) -> sa.ColumnElement[bool]:
        assert read is not None
        return read.in_sessions(column, listing=listing)

    # PostgreSQL's changed sessions, read first, drive the messages' read (a range of each):
    # as a filter it read every message since ``bound`` (AC-26's pairing reaches back to it).
    driving = read.session_ids if windowed and not listing else None
    sm = subagent_messages(
        "window_messages",
        since=bound,
        within=within if windowed and driving is None else None,
        sessions=driving,
    )
    messages = sa.select(
        compared(sm.c.task_session_id).label("task_session_id"),
        compared(sm.c.tool_call_id).label("key"),
        sa.literal(1).label("messaged"),
        sa.case((qualifies(sm), 1), else_=0).label("qualifying"),
        sa.literal(0).label("observed"),
        sa.case((qualifies(sm), compared(sm.c.id))).label("message_id"),
        sa.case((qualifies(sm), instant(sm.c.created_at))).label("first_created_at"),
        sa.case((qualifies(sm), 1), else_=0).label("messages"),
        _NULL.label("row_id"),
        sa.cast(sa.null(), sa.Integer).label("rows"),  # typed: summed even with no row side
        no_instant.label("first_observed_at"),
        no_instant.label("last_observed_at"),
        sa.literal(0).label("recent"),
    )
    sides = [messages]
    if with_rows:
        r = subagents.c
        in_window = [within(r.task_session_id)] if windowed else []
        observed = instant(r.observed_at)
        sides.append(
            sa.select(
                stored(r.task_session_id),
                stored(r.tool_call_id),
                sa.literal(0),
                sa.literal(0),
                sa.literal(1),
                _NULL,
                _NULL,
                sa.literal(0),
                stored(r.id),
                sa.literal(1),
                observed,
                observed,
                (
                    sa.case((at_or_after(r.observed_at, read.start), 1), else_=0)
                    if windowed
                    else sa.literal(0)
                ),
            ).where(at_or_after(r.observed_at, bound), *in_window)
        )
    stacked = sa.union_all(*sides).subquery("stacked")
    if listing:
        stacked = _extremes_as_stored(stacked)
    s = stacked.c
    # Grouped by the key's token, never by the key (a 50 MB one cost SQLite 0.6 GB in the
    # sorter and the samples): the same groups (sql/compared.py); so are the session and the
    # ids the groups keep. A listing groups by the key itself: it runs as pasted, where
    # kandev-dq's digest function is not registered.
    shown = (lambda token: token) if listing else key_shown
    return (
        sa.select(
            shown(s.task_session_id).label("task_session_id"),
            shown(s.key).label("tool_call_id"),
            sa.func.max(s.messaged).label("messaged"),
            sa.func.max(s.qualifying).label("qualifying"),
            sa.func.max(s.observed).label("observed"),
            shown(sa.func.min(s.message_id)).label("message_id"),
            sa.func.min(s.first_created_at).label("first_created_at"),
            sa.func.sum(s.messages).label("messages"),
            shown(sa.func.min(s.row_id)).label("row_id"),
            sa.func.sum(s.rows).label("rows"),
            sa.func.min(s.first_observed_at).label("first_observed_at"),
            sa.func.max(s.last_observed_at).label("last_observed_at"),
            sa.func.max(s.recent).label("recent"),
        )
        .group_by(s.task_session_id, s.key)
        .subquery("ledger")
    )


def _extremes_as_stored(stacked: sa.Subquery) -> sa.Subquery:
    """``stacked`` (a listing's, its timestamps as stored) with each key's earliest created,
    earliest observed and latest observed value as stored on all its lines, chosen by exact
    instant: the ledger's MIN/MAX then keep a stored text, which a listing shows beside its
    instant, where a MIN over stored texts would compare text (AC-24e)."""
    s = stacked.c
    key = (s.task_session_id, s.key)

    def stored(column, *, latest: bool = False) -> sa.ColumnElement:
        exact = utc_instant(column)
        order = (sa.case((column.is_(None), 1), else_=0), exact.desc() if latest else exact)
        chosen = sa.func.first_value(column, type_=column.type)
        return chosen.over(partition_by=key, order_by=order).label(column.key)

    extremes = {
        "first_created_at": stored(s.first_created_at),
        "first_observed_at": stored(s.first_observed_at),
        "last_observed_at": stored(s.last_observed_at, latest=True),
    }
    return sa.select(*(extremes.get(c.key, c) for c in s)).subquery("stacked_as_stored")
