"""Facts behind the backfill reconciliation rules (CONTRACT §4): every ``source='backfill'`` row
against the row its message should have produced.

The expected rows are the statement the migration runner inserts,
:func:`kandev_dq.sql.mapping.backfill_select` (one winner per ``(task_session_id,
tool_call_id)``, AC-21b; the AC-21 predicate; the §2 NULL/zero/negative/empty rules), used here
as a subquery: the runner and this check share one definition. Each row is joined to the
expected row of its key and every field family is counted in ONE statement (``SUM(CASE …)`` over
the joined set); capped samples are read only for the families with a non-zero count.
Comparisons are NULL-safe (``IS DISTINCT FROM``) and timestamps are compared as exact instants
(:class:`kandev_dq.sql.dialect.utc_instant`).

A healthy store may legitimately differ from its messages in two ways, and neither is a fault:

* a live frame without an execution id merges onto the ``'unknown'`` backfill row (AC-1, AC-22):
  it keeps ``source``, ``observed_at`` and the first non-empty ``turn_id``, and moves the rest,
  writing ``updated_at`` at or after ``capture_since`` (live capture starts there; the backfill
  commits with its keys, before any live frame can touch its rows);
* a message updated after the backfill read it (a tool call settling during the upgrade): its
  ``updated_at`` is at or after ``capture_since`` minus ``window_minutes`` (the window covers a
  message committed between the backfill's snapshot and the ``capture_since`` sample).

Such rows are *drifted*: only their write-once fields (identity, ``observed_at``, the AC-21b
winner, a known ``turn_id``) are compared, and how many there are is disclosed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import CAPTURE_SINCE, Instant, MalformedKey, read_key
from kandev_dq.facts.shapes import BackfillFacts
from kandev_dq.sql.compared import stored_key_token
from kandev_dq.sql.dialect import (
    at_or_after,
    instant_param,
    instants_differ,
    store_traits,
    utc_instant,
)
from kandev_dq.sql.keys import read_keys
from kandev_dq.sql.listing import Listing, listing_of
from kandev_dq.sql.mapping import (
    BACKFILL_COLUMNS,
    COMPARED_AS_TOKENS,
    UNBOUNDED_TEXT,
    backfill_select,
    fenced,
    metadata_fields,
    qualifies,
    row_handle,
    settled_at,
    subagent_messages,
)
from kandev_dq.sql.messages import count_and_sample, message_doc, stored_metadata
from kandev_dq.sql.scan import Counted, Part, count_when, counted_scan, part
from kandev_dq.sql.shown import prepare
from kandev_dq.store.observe import (
    EXECUTION_COLUMN,
    SubagentsShape,
    message_handle,
    observe_subagents,
)

#: The field families, each judged by one rule.
FAMILIES = (
    "identity",
    "turn_id",
    "statuses",
    "metrics",
    "text",
    "observed_at",
    "settled_at",
    "winner",
    "orphan",
    "relabelled",
)
TEXT_FIELDS = (*UNBOUNDED_TEXT, "is_async")
#: Columns the comparison needs (``agent_execution_id`` reads as 'unknown' when absent).
REQUIRED_COLUMNS = tuple(c for c in BACKFILL_COLUMNS if c != EXECUTION_COLUMN)
_TEXT_SAMPLE = 120
#: SQLite: a row whose unbounded text, or whose message's metadata, holds more bytes than this
#: has its unbounded texts compared in a statement of its own (see :func:`_compare`).
APART_BYTES = 1 << 20


def _capture(keys: dict[str, str | None]) -> Instant | None:
    try:
        value = read_key(CAPTURE_SINCE, keys[CAPTURE_SINCE])
    except MalformedKey:
        return None
    return value if isinstance(value, Instant) else None


def _empty(reason: str, *, table_exists: bool) -> BackfillFacts:
    return {
        "evaluable": False,
        "reason": reason,
        "backfill_rows": 0,
        "expected_rows": None,
        "families": {name: {"count": 0, "sample": []} for name in FAMILIES},
        "table_exists": table_exists,
    }


@dataclass
class _Comparison:
    """Every stored row joined to the expected row of its key, with the predicates the families
    share. ``b`` is the stored row, ``e`` the expected one (NULL when no message maps to it),
    ``t`` the expected row's :data:`~kandev_dq.sql.mapping.READ_BY_ID` fields and its
    ``settled_at`` (on SQLite read from its message by handle, before the join). ``apart``
    (SQLite; None elsewhere): the rows whose unbounded texts the counting statement leaves to
    :func:`_texts_apart`, and ``pair_texts`` the statement comparing one of them."""

    b: Any
    e: Any
    t: Any
    #: The stored row's :data:`~kandev_dq.sql.mapping.COMPARED_AS_TOKENS` as compared with
    #: ``e``'s: their tokens, or the columns themselves for a listing.
    tokens: dict[str, sa.ColumnElement]
    #: Not NULL where an expected row is joined, one value per expected row.
    present: sa.ColumnElement
    #: The expected rows with ``t``, before the stored rows are joined.
    expected_side: sa.FromClause
    joined: sa.Join
    execution: sa.ColumnElement
    is_backfill: sa.ColumnElement[bool]
    relabel_candidate: sa.ColumnElement[bool]
    matched: sa.ColumnElement[bool]
    drifted: sa.ColumnElement[bool]
    apart: sa.ColumnElement[bool] | None = None
    pair_texts: sa.Select | None = None


@dataclass
class _Losers:
    """AC-21b: the rows not plainly the winner's, and the losing messages they may carry."""

    candidates: sa.ColumnElement[bool]
    joined: sa.Join
    lost: Any
    carried: sa.ColumnElement[bool]


def backfill_facts(conn: sa.Connection, window_minutes: float) -> BackfillFacts:
    shape = observe_subagents(conn)
    if not shape.table_exists:
        return _empty(f"{schema.SUBAGENTS} does not exist", table_exists=False)
    missing = [c for c in REQUIRED_COLUMNS if c not in shape.columns]
    if missing:
        return _empty(f"{schema.SUBAGENTS} lacks column(s) {', '.join(missing)}", table_exists=True)
    keys = read_keys(conn)
    prepare(conn)  # the digest of a key over the limit (sql/compared.py)
    cmp = _compare(conn, shape, _capture(keys), window_minutes)
    losers = _losers(cmp)
    # The listings join on the keys themselves: they run as pasted, where kandev-dq's digest
    # function is not registered (the statements the check runs join on tokens).
    listed = _compare(conn, shape, _capture(keys), window_minutes, key_tokens=False)
    listed_losers = _losers(listed)
    listed_rows = _family_rows(listed, _family_conditions(listed, listed_losers))
    # Every family's count in ONE statement; the winner family's own count and sample come
    # from the losers (the counting statement only finds its candidates, AC-21b).
    families_of = _family_conditions(cmp, losers)
    rows = _family_rows(cmp, families_of)
    conditions = {
        name: Counted(
            when=cond,
            sample=None if name == "winner" else rows[name],
            listing=None if name == "winner" else listed_rows[name],
        )
        for name, cond in families_of.items()
    }
    extra = [
        sa.func.count(sa.distinct(cmp.present)).label("expected_rows"),
        count_when(cmp.is_backfill).label("backfill_rows"),
        count_when(cmp.matched).label("matched_rows"),
        count_when(sa.and_(cmp.matched, cmp.drifted)).label("drifted_rows"),
    ]
    deferred = None
    if cmp.apart is not None:
        # The text family's rows holding a value over APART_BYTES are counted apart; its
        # sample and listing keep the one condition.
        text = conditions["text"]
        strict = sa.and_(cmp.matched, sa.not_(cmp.drifted))
        async_differs = _differs(cmp.b.is_async, cmp.e.is_async)
        conditions["text"] = Counted(
            when=text.when,
            sample=text.sample,
            listing=text.listing,
            count=count_when(
                sa.and_(
                    strict,
                    sa.or_(async_differs, sa.and_(sa.not_(cmp.apart), _texts_differ(cmp))),
                )
            ),
        )
        deferred = sa.and_(strict, sa.not_(async_differs), cmp.apart)
        pair = sa.func.json_array(*_exact(cmp.b.id), *_exact(cmp.t["id"]))
        pairs = sa.func.json_group_array(pair)
        extra.append(pairs.filter(deferred).label("texts_apart"))
    counts, families = counted_scan(
        conn,
        conditions,
        select_from=cmp.joined,
        where=sa.or_(cmp.is_backfill, cmp.relabel_candidate, cmp.present.is_not(None)),
        extra=extra,
    )
    if deferred is not None:
        differing = _texts_apart(conn, cmp, counts["texts_apart"])
        if differing is None:  # an id that finds no one row: counted in one statement
            differing = conn.execute(
                sa.select(count_when(sa.and_(deferred, _texts_differ(cmp)))).select_from(cmp.joined)
            ).scalar_one()
        if differing:
            total = counts["text"] + differing
            text = conditions["text"]
            families["text"] = part(conn, total, text.sample, "text", listing=text.listing)
    expected_rows = counts["expected_rows"]
    carrying_losers = _carrying_losers(cmp, losers)
    winner: Part = {
        "count": 0,
        "sample": [],
        "listing": listing_of(
            conn,
            _carrying_losers(listed, listed_losers),
            "row carries a losing message's values",
        ),
    }
    if counts["winner"]:  # only candidates are joined to the losers
        winner["count"], winner["sample"] = count_and_sample(conn, carrying_losers)
    return {
        "evaluable": True,
        "reason": "",
        "table_exists": True,
        "execution_column": shape.has_execution_column,
        "capture_since": keys[CAPTURE_SINCE],
        "backfill_rows": counts["backfill_rows"],
        "expected_rows": int(expected_rows),
        "expected_listing": _mapped_without_backfill(conn, listed),
        "compared_in_full": counts["matched_rows"] - counts["drifted_rows"],
        "write_once_fields_only": counts["drifted_rows"],
        "families": {name: winner if name == "winner" else families[name] for name in FAMILIES},
    }


def _mapped_without_backfill(conn: sa.Connection, cmp: _Comparison) -> Listing:
    """The message keys the backfill maps while the table holds no backfill row: what the
    not-vacuous rule counts when it fails, so empty once any backfill row is there."""
    e, t = cmp.e, cmp.t
    backfilled = sa.select(sa.literal(1)).select_from(cmp.b.source.table).where(cmp.is_backfill)
    return listing_of(
        conn,
        sa.select(
            t["id"].label("message_id"),
            t["task_session_id"].label("task_session_id"),
            e.tool_call_id,
            e.observed_at.label("created_at"),
        )
        .select_from(cmp.expected_side)
        .where(~backfilled.exists())
        .order_by(e.observed_at, t["id"]),
        "message key the backfill maps, and no backfill row",
    )


def _key(cmp: _Comparison) -> tuple[sa.ColumnElement, ...]:
    """The columns naming a compared pair in each sample: the row's key, the message's id."""
    b, message_id = cmp.b, cmp.t["id"]
    return (b.id.label("row_id"), b.task_session_id, b.tool_call_id, message_id.label("message_id"))


def _order(cmp: _Comparison) -> tuple[sa.ColumnElement, ...]:
    return (cmp.b.task_session_id, cmp.b.tool_call_id, cmp.b.id)


def _family_rows(
    cmp: _Comparison, conditions: dict[str, sa.ColumnElement[bool]]
) -> dict[str, sa.Select]:
    """Each family's offending pairs (but the winner's, read from the losers), in key order."""
    shown = _shown(cmp)
    return {
        name: sa.select(*_key(cmp), *shown[name])
        .select_from(cmp.joined)
        .where(cond)
        .order_by(*_order(cmp))
        for name, cond in conditions.items()
        if name != "winner"
    }


def _carrying_losers(cmp: _Comparison, losers: _Losers) -> sa.Select:
    """One row per backfill row carrying a losing message's values, whichever losers it
    matches (AC-21b)."""
    key, shown = _key(cmp), _shown(cmp)["winner"]
    return (
        sa.select(*key, *shown, sa.func.min(losers.lost.id).label("loser_id"))
        .select_from(losers.joined)
        .where(losers.candidates, losers.carried)
        .group_by(*key, *shown)
        .order_by(*_order(cmp))
    )


def _differs(left, right) -> sa.ColumnElement[bool]:
    return left.is_distinct_from(right)


def _compare(
    conn: sa.Connection,
    shape: SubagentsShape,
    capture: Instant | None,
    window_minutes: float,
    *,
    key_tokens: bool = True,
) -> _Comparison:
    """The expected rows fully joined to the stored rows of their keys (one read of the
    messages), and which rows drifted after the backfill (compared on write-once fields).
    Joined on the keys' tokens unless ``key_tokens`` is false (a listing)."""
    table = sa.table(
        schema.SUBAGENTS,
        *(sa.column(c.name, c.type) for c in schema.subagents.columns if c.name in shape.columns),
    )
    b = table.c
    unknown = sa.literal(schema.UNKNOWN_EXECUTION, sa.Text)
    execution = b[EXECUTION_COLUMN] if shape.has_execution_column else unknown
    # The backfill read only messages created before capture_since (sampled after its INSERT,
    # so a message committed between the MAX and the INSERT is still among them); later ones
    # are the live writer's. They are left out before the AC-21b ranking, not after: a later
    # execution reusing a tool_call_id (AC-22, AC-32) never "wins" a row written before it
    # existed. A fresh install with live traffic maps nothing. The expected rows are FULL
    # JOINed to the stored ones, so the counting statement reads the messages once and still
    # counts the expected rows no stored row met; no window holds every expected row with its
    # values (one 50 MB description cost SQLite hundreds of MB that way). (A CTE read twice
    # would be materialised, and PostgreSQL, misjudging how many rows its JSON filter keeps,
    # loops over it per row.)
    existed = instant_param("mapped_before", capture) if capture is not None else None
    # Fenced: PostgreSQL, misjudging the JSON filter, would pull a plain subquery up into
    # nested loops that rerun the mapping per row once a family's condition narrows the join.
    # SQLite materialises the expected rows for the FULL JOIN, copying each value twice: there
    # the rows carry their message's handle, and its id, session and text fields of unbounded
    # size are read from the message by it, before the join. (PostgreSQL would read every
    # message once more for them, server-side copies cost the check nothing.)
    handle = message_handle(conn)
    expected = backfill_select(
        store_traits(conn).name, existed, handle=handle, key_tokens=key_tokens
    )
    expected = fenced(expected).subquery("expected")
    e = expected.c
    # Joined on the key's token (sql/compared.py): the same pairs, and no 50 MB key held by
    # the ranking's sorter, the materialised rows and their index (0.9 GB on SQLite); the
    # task and turn ids are compared by token alike.
    tokens = {c: stored_key_token(b[c]) if key_tokens else b[c] for c in COMPARED_AS_TOKENS}
    key_matches = e.tool_call_id == tokens["tool_call_id"]
    apart = pair_texts = None
    expected_side: sa.FromClause = expected
    if handle is None:
        texts, present = e, e.id
        joined = expected.join(
            table, sa.and_(e.task_session_id == b.task_session_id, key_matches), full=True
        )
    else:
        # Read from the expected message's own row, its names tested once for all of them
        # (a subquery holding that test could not be flattened into this outer join); the
        # session joined on is the message's, so the rows' session index still drives it.
        message = schema.task_session_messages.alias("expected_texts")
        fields, walk = metadata_fields(
            message_doc(message),
            stored_metadata(message),
            UNBOUNDED_TEXT,
            "expected_texts_walk",
            True,
        )
        expected_side = expected.join(message, row_handle(message, handle) == e.handle).join(
            walk, sa.true()
        )
        joined = expected_side.join(
            table, sa.and_(message.c.task_session_id == b.task_session_id, key_matches), full=True
        )
        texts = {field.name: field for field in fields}
        # The id and session too (mapping.READ_BY_ID): a 50 MB one, carried, was sorted and
        # materialised whole at each step (1.1 GB). And updated_at: SQLite's text of any
        # size, copied into the materialised expected rows twice (updated_at, settled_at).
        texts["id"], texts["task_session_id"] = message.c.id, message.c.task_session_id
        present = e.handle
        texts["updated_at"] = message.c.updated_at
        texts["settled_at"] = settled_at(e.tool_status, message.c.updated_at)
        # The ranking above parsed every expected message, and SQLite keeps a statement's
        # last parses (text and binary form) until it ends: a huge description compared here
        # was held five times (that parse, the message read again, the field, the row's
        # value). A row or message over APART_BYTES (a size SQLite reads without the value)
        # is compared in a statement of its own, in the same snapshot: four (_texts_apart).
        apart = sa.and_(
            b.id.is_not(None),
            sa.or_(
                _octets(message.c.metadata) > APART_BYTES,
                *(_octets(b[c]) > APART_BYTES for c in UNBOUNDED_TEXT),
            ),
        )
        pair_texts = (
            sa.select(sa.func.count(), count_when(_texts_differ_of(b, texts)))
            .select_from(
                table.join(message, message.c.id == _stored("message")).join(walk, sa.true())
            )
            .where(b.id == _stored("row"))
        )

    is_backfill = b.source == "backfill"
    relabel_candidate = sa.and_(b.source == "live", execution == unknown)
    matched = sa.and_(is_backfill, present.is_not(None))
    if capture is not None:
        merged_since = instant_param("capture_since", capture)
        changed_since = instant_param(
            "message_changed_since", Instant(capture.micro - timedelta(minutes=window_minutes))
        )
        drifted = sa.or_(
            at_or_after(b.updated_at, merged_since), at_or_after(texts["updated_at"], changed_since)
        )
    else:
        drifted = sa.false()

    return _Comparison(
        b=b,
        e=e,
        t=texts,
        tokens=tokens,
        present=present,
        expected_side=expected_side,
        joined=joined,
        execution=execution,
        is_backfill=is_backfill,
        relabel_candidate=relabel_candidate,
        matched=matched,
        drifted=drifted,
        apart=apart,
        pair_texts=pair_texts,
    )


def _exact(column) -> tuple[sa.ColumnElement, sa.ColumnElement]:
    """A stored value as JSON carries any of them exactly: its bytes in hex and its type."""
    return sa.func.hex(column), sa.func.typeof(column)


def _stored(name: str) -> sa.ColumnElement:
    """The value :func:`_exact` carried (parameters ``<name>_hex`` and ``<name>_type``), a
    constant an index on the column it is compared with can look up."""
    raw = sa.func.unhex(sa.bindparam(f"{name}_hex", type_=sa.Text))
    return sa.case(
        (sa.bindparam(f"{name}_type", type_=sa.Text) == "blob", raw),
        else_=sa.cast(raw, sa.Text),
    )


def _octets(column) -> sa.ColumnElement:
    """A stored value's size in bytes, 0 for NULL (SQLite reads it from the record header)."""
    return sa.func.coalesce(sa.func.octet_length(column), 0)


def _texts_differ_of(b, texts) -> sa.ColumnElement[bool]:
    """A stored row's :data:`~kandev_dq.sql.mapping.UNBOUNDED_TEXT` fields against ``texts``."""
    return sa.or_(*(_differs(b[c], texts[c]) for c in UNBOUNDED_TEXT))


def _texts_differ(cmp: _Comparison) -> sa.ColumnElement[bool]:
    return _texts_differ_of(cmp.b, cmp.t)


def _texts_apart(conn: sa.Connection, cmp: _Comparison, pairs: str | None) -> int | None:
    """How many of the rows the counting statement left apart (a JSON array of their ids and
    their messages', as :func:`_exact` carries them) differ from their message in an
    unbounded text: one statement per row, each reading one row and one message by id. None
    when an id finds no row or several (a store whose ids are not its primary keys)."""
    differing = 0
    for row_hex, row_type, message_hex, message_type in json.loads(pairs or "[]"):
        found, differs = conn.execute(
            cmp.pair_texts,
            {
                "row_hex": row_hex,
                "row_type": row_type,
                "message_hex": message_hex,
                "message_type": message_type,
            },
        ).one()
        if found != 1:
            return None
        differing += differs
    return differing


def _losers(cmp: _Comparison) -> _Losers:
    b, e, joined, matched = cmp.b, cmp.e, cmp.joined, cmp.matched
    message_id = cmp.t["id"]
    # AC-21b needs the losing messages, which the joined set does not hold: rows that are not
    # plainly the winner's are counted in the one statement, and only when there are any is
    # a second statement joined (on the key, never correlated per row) to the losers.
    not_the_winner = sa.and_(
        matched, sa.or_(b.id != message_id, instants_differ(b.observed_at, e.observed_at))
    )
    sm = subagent_messages("loser_candidates")
    losers = (
        sa.select(sm.c.id, sm.c.task_session_id, sm.c.tool_call_id, sm.c.created_at)
        .where(qualifies(sm))
        .subquery("losers")
    )
    lost = losers.c
    with_losers = joined.join(
        losers,
        sa.and_(
            lost.task_session_id == b.task_session_id,
            lost.tool_call_id == b.tool_call_id,
            lost.id != message_id,
        ),
    )
    carries_loser = sa.or_(
        lost.id == b.id,
        sa.and_(
            utc_instant(lost.created_at) == utc_instant(b.observed_at),
            utc_instant(lost.created_at) != utc_instant(e.observed_at),
        ),
    )

    return _Losers(candidates=not_the_winner, joined=with_losers, lost=lost, carried=carries_loser)


def _family_conditions(cmp: _Comparison, losers: _Losers) -> dict[str, sa.ColumnElement[bool]]:
    """Each family's offence over the joined set (one rule each)."""
    b, e, execution, matched, drifted = cmp.b, cmp.e, cmp.execution, cmp.matched, cmp.drifted
    is_backfill, relabel_candidate = cmp.is_backfill, cmp.relabel_candidate
    task_id, turn_id = cmp.tokens["task_id"], cmp.tokens["turn_id"]
    unknown = sa.literal(schema.UNKNOWN_EXECUTION, sa.Text)
    strict = sa.and_(matched, sa.not_(drifted))
    not_the_winner = losers.candidates
    return {
        # AC-21: the message's own session (the join key) and task; AC-31: the sentinel.
        "identity": sa.and_(
            matched, sa.or_(_differs(task_id, e.task_id), _differs(execution, unknown))
        ),
        # AC-2a: a known turn is never lost or replaced; a NULL may be filled forward only
        # by a later (live) write.
        "turn_id": sa.and_(
            matched,
            sa.or_(
                sa.and_(e.turn_id.is_not(None), _differs(turn_id, e.turn_id)),
                sa.and_(e.turn_id.is_(None), b.turn_id.is_not(None), sa.not_(drifted)),
            ),
        ),
        # AC-10/AC-12: tool_status from top-level metadata.status, agent_status nested.
        "statuses": sa.and_(
            strict,
            sa.or_(
                _differs(b.tool_status, e.tool_status), _differs(b.agent_status, e.agent_status)
            ),
        ),
        # AC-7, AC-7a, AC-8, AC-9 (the mapping applies them).
        "metrics": sa.and_(strict, sa.or_(*(_differs(b[m], e[m]) for m in schema.METRIC_COLUMNS))),
        "text": sa.and_(strict, sa.or_(_differs(b.is_async, e.is_async), _texts_differ(cmp))),
        # AC-1a: observed_at is the message's created_at, exactly.
        "observed_at": sa.and_(matched, instants_differ(b.observed_at, e.observed_at)),
        # AC-23a: settled_at = updated_at iff terminal; updated_at = the message's updated_at.
        "settled_at": sa.and_(
            strict,
            sa.or_(
                instants_differ(b.settled_at, cmp.t["settled_at"]),
                instants_differ(b.updated_at, cmp.t["updated_at"]),
            ),
        ),
        # AC-21b: candidates only; the family is the candidates carrying a loser's values.
        "winner": not_the_winner,
        # AC-21a: no qualifying message has this key.
        "orphan": sa.and_(is_backfill, cmp.present.is_(None)),
        # AC-1: a backfill row relabelled 'live' (a heuristic, judged at warning).
        "relabelled": sa.and_(
            relabel_candidate,
            b.id == cmp.t["id"],
            utc_instant(b.observed_at) == utc_instant(e.observed_at),
        ),
    }


def _shown(cmp: _Comparison) -> dict[str, tuple]:
    """The columns each family's sample shows beside the keys."""
    b, e, execution = cmp.b, cmp.e, cmp.execution

    def short(column, label: str):
        return sa.func.substr(column, 1, _TEXT_SAMPLE).label(label)

    return {
        "identity": (
            b.task_id,
            e.task_id.label("message_task_id"),
            execution.label("agent_execution_id"),
        ),
        "turn_id": (b.turn_id, e.turn_id.label("message_turn_id")),
        "statuses": (
            b.tool_status,
            e.tool_status.label("message_tool_status"),
            b.agent_status,
            e.agent_status.label("message_agent_status"),
        ),
        "metrics": tuple(
            col for m in schema.METRIC_COLUMNS for col in (b[m], e[m].label(f"expected_{m}"))
        ),
        "text": tuple(
            col
            for c in TEXT_FIELDS
            for col in (
                (b[c], e[c].label(f"expected_{c}"))
                if c == "is_async"
                else (short(b[c], c), short(cmp.t[c], f"expected_{c}"))
            )
        ),
        "observed_at": (b.observed_at, e.observed_at.label("message_created_at")),
        "settled_at": (
            b.tool_status,
            b.settled_at,
            cmp.t["settled_at"].label("expected_settled_at"),
            b.updated_at,
            cmp.t["updated_at"].label("message_updated_at"),
        ),
        "winner": (b.observed_at, e.observed_at.label("winner_created_at")),
        "orphan": (b.task_id, b.observed_at),
        "relabelled": (execution.label("agent_execution_id"), b.observed_at),
    }
