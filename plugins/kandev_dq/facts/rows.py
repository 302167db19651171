"""Facts behind the row rules (CONTRACT §2): every rule counted in one scan of the table.

One statement reads ``task_session_subagents`` once (left-joined to ``task_sessions`` for
orphans) and sums one ``CASE`` per rule, uniqueness counted beside it from the key index
(``GROUP BY`` the key); only the rules whose count is non-zero then fetch a capped sample of
offending rows, with their primary keys. Timestamps are compared through
:class:`~kandev_dq.sql.dialect.utc_instant` on both sides.

The table may be missing (a store predating the feature) or pre-amendment (no
``agent_execution_id``): rules that need what is not there are marked not applicable, never
crash; the schema suite reports the shape itself.

**A live window** judges only the rows observed or updated at or after its start (the table
has no index on either column: one scan, :func:`kandev_dq.facts.window.read_changed_rows`),
with the same predicates; uniqueness counts each changed row's key over the whole table, and
orphans are the same join to ``task_sessions``. Every offence it counts is one nightly counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.tables import (
    AMENDED_UNIQUE,
    METRIC_COLUMNS,
    NULLABLE_TEXT_COLUMNS,
    PRE_AMENDMENT_UNIQUE,
    TERMINAL_TOOL_STATUSES,
    TOOL_STATUSES,
    UNKNOWN_EXECUTION,
    subagents,
    task_sessions,
)
from kandev_dq.facts.shapes import ChangeWindow, RowFacts
from kandev_dq.facts.window import WindowRead, read_changed_rows
from kandev_dq.sql.dialect import (
    canonical_uuid,
    index_reads,
    utc_instant,
    utc_instant_latest,
)
from kandev_dq.sql.listing import Listing, listing_of
from kandev_dq.sql.mapping import qualifies, subagent_messages
from kandev_dq.sql.scan import Counted, carry_sessions, count_when, counted_scan
from kandev_dq.store.observe import observe_subagents

SOURCES = ("live", "backfill")
ZERO_IS_NULL_METRICS = ("total_tokens", "duration_ms")  # AC-7a; tool_use_count keeps 0 (AC-8)
ASYNC_LAUNCHED = "async_launched"
#: Conditions judged over the whole table only (no ``live`` suite runs their rule).
TABLE_WIDE = ("completed_without_metrics",)


def _blank(column) -> sa.ColumnElement:
    return sa.or_(column.is_(None), column == "")


# Each rule: its predicate over the scanned columns (``c``) and the columns its sample shows.
Predicate = Callable[[Any], sa.ColumnElement]


def _rules(amended: bool) -> dict[str, tuple[Predicate, tuple[str, ...]]]:
    terminal = TERMINAL_TOOL_STATUSES
    rules: dict[str, tuple[Predicate, tuple[str, ...]]] = {
        "identity": (
            lambda c: sa.or_(_blank(c.task_session_id), _blank(c.task_id), _blank(c.tool_call_id)),
            ("task_id",),
        ),
        "duplicate_rows": (lambda c: c.key_rows > 1, ("key_rows",)),
        "source": (
            lambda c: sa.or_(c.source.is_(None), c.source.not_in(SOURCES)),
            ("source",),
        ),
        "empty_text": (
            lambda c: sa.or_(*(c[name] == "" for name in NULLABLE_TEXT_COLUMNS)),
            NULLABLE_TEXT_COLUMNS,
        ),
        "negative_metric": (
            lambda c: sa.or_(*(c[name] < 0 for name in METRIC_COLUMNS)),
            METRIC_COLUMNS,
        ),
        "zero_metric": (
            lambda c: sa.or_(*(c[name] == 0 for name in ZERO_IS_NULL_METRICS)),
            ZERO_IS_NULL_METRICS,
        ),
        "async_launched_metrics": (
            lambda c: sa.and_(
                c.agent_status == ASYNC_LAUNCHED,
                sa.or_(*(c[name].is_not(None) for name in METRIC_COLUMNS)),
            ),
            ("agent_status", *METRIC_COLUMNS),
        ),
        "settled_terminal": (
            lambda c: sa.or_(
                sa.and_(c.settled_at.is_(None), c.tool_status.in_(terminal)),
                sa.and_(
                    c.settled_at.is_not(None),
                    sa.or_(c.tool_status.is_(None), c.tool_status.not_in(terminal)),
                ),
            ),
            ("tool_status", "settled_at"),
        ),
        "tool_status_vocabulary": (
            lambda c: sa.and_(c.tool_status.is_not(None), c.tool_status.not_in(TOOL_STATUSES)),
            ("tool_status", "agent_status"),
        ),
        # An inversion is a defect only when no reading of the two values is in order: a
        # whole-second updated_at/settled_at (SQLite's CURRENT_TIMESTAMP, upstream's turn-end
        # sweep) stands for any instant of its second (CONTRACT §1).
        "timestamp_order": (
            lambda c: sa.or_(
                utc_instant(c.observed_at) > utc_instant_latest(c.updated_at),
                sa.and_(
                    c.settled_at.is_not(None),
                    utc_instant(c.observed_at) > utc_instant_latest(c.settled_at),
                ),
            ),
            ("updated_at", "settled_at"),
        ),
        "orphans": (lambda c: c.parent_session.is_(None), ()),
        "is_async": (
            lambda c: sa.or_(c.is_async.is_(None), c.is_async.not_in((0, 1))),
            ("is_async",),
        ),
        "completed_without_metrics": (
            lambda c: sa.and_(
                c.agent_status == "completed",
                *(c[name].is_(None) for name in METRIC_COLUMNS),
            ),
            METRIC_COLUMNS,
        ),
    }
    if amended:
        rules["execution_missing"] = (lambda c: _blank(c.agent_execution_id), ())
        rules["execution_form"] = (
            lambda c: sa.and_(
                c.agent_execution_id != "",
                c.agent_execution_id != UNKNOWN_EXECUTION,
                sa.not_(canonical_uuid(c.agent_execution_id)),
            ),
            (),
        )
        rules["backfill_not_unknown"] = (
            lambda c: sa.and_(
                c.source == "backfill",
                sa.or_(c.agent_execution_id.is_(None), c.agent_execution_id != UNKNOWN_EXECUTION),
            ),
            ("source",),
        )
    return rules


def _scanned(
    amended: bool,
    *,
    with_key_counts: bool,
    read: WindowRead | None = None,
    listing: bool = False,
    key_kept_unique: bool = False,
) -> sa.Subquery:
    """The table as the rules read it: orphan marker, and (optionally) rows and rank per key.
    With a window ``read``, only the rows changed in it, each key counted over the table (in a
    ``listing``, named by the window's start rather than by the rows read for it), unless the
    store itself keeps the key unique (``key_kept_unique``): each key then holds its row alone."""
    r = subagents.c
    names = AMENDED_UNIQUE if amended else PRE_AMENDMENT_UNIQUE
    key = [r[name] for name in names]
    columns = [col for col in subagents.c if amended or col.name != "agent_execution_id"]
    extra = [task_sessions.c.id.label("parent_session")]
    windowed = read is not None and not read.full
    if with_key_counts and windowed and key_kept_unique:
        # A UNIQUE constraint over the NOT NULL key (AC-14): no row can share its key (AC-3),
        # so a changed row's key is not looked up again, a random read per row on a large store.
        extra += [sa.literal(1).label("key_rows"), sa.literal(1).label("key_rank")]
    elif with_key_counts and windowed:
        # Per changed row, through an index on the key: a window over the whole table would
        # sort every row. A key without a NULL part is one exact range of the key's UNIQUE
        # index; one with a NULL part is compared as nightly's partition compares keys, NULLs
        # equal (a test no index serves, for rows only a damaged store holds).
        same = subagents.alias("same_key")

        def held(*where) -> sa.ScalarSelect:
            return sa.select(sa.func.count()).select_from(same).where(*where).scalar_subquery()

        key_rows = sa.case(
            (
                sa.or_(*(r[name].is_(None) for name in names)),
                held(*(same.c[name].is_not_distinct_from(r[name]) for name in names)),
            ),
            else_=held(*(same.c[name] == r[name] for name in names)),
        )
        extra.append(key_rows.label("key_rows"))
        # Ranked among the changed rows (the statement's own rows, so a window function over
        # them): the listing names each key once, by its first one. Beside a window function
        # PostgreSQL counts each row's key once, where it re-ran the count at every reading.
        extra.append(sa.func.row_number().over(partition_by=key, order_by=r.id).label("key_rank"))
    elif with_key_counts:
        extra.append(sa.func.count().over(partition_by=key).label("key_rows"))
        extra.append(sa.func.row_number().over(partition_by=key, order_by=r.id).label("key_rank"))
    scanned = sa.select(*columns, *extra).select_from(
        subagents.outerjoin(task_sessions, task_sessions.c.id == subagents.c.task_session_id)
    )
    if windowed:
        scanned = scanned.where(read.row_changed(subagents, listing=listing))
    return scanned.subquery("scanned")


def row_facts(conn: sa.Connection, window: ChangeWindow | None = None) -> RowFacts:
    """Every row rule's count (one scan) and, for the failing ones, a capped sample; with a
    ``window``, of the rows changed in it only."""
    shape = observe_subagents(conn)
    amended = shape.has_execution_column
    facts: dict[str, Any] = {
        "table_exists": shape.table_exists,
        "amended": amended,
        "key": list(AMENDED_UNIQUE if amended else PRE_AMENDMENT_UNIQUE),
        "qualifying_messages": None,
        "rows": 0,
        "rules": {},
    }
    if not shape.table_exists:
        facts["qualifying_messages"], facts["qualifying_listing"] = _qualifying_messages(conn)
        return facts
    read = read_changed_rows(conn, window)
    if read is not None:
        facts["window"] = read.facts
    windowed = read is not None and not read.full
    rules = _rules(amended)
    kept = shape.keeps_unique(AMENDED_UNIQUE if amended else PRE_AMENDMENT_UNIQUE)
    scanned = _scanned(amended, with_key_counts=True, read=read, key_kept_unique=kept)
    c = scanned.c
    # A window's changed rows are read once, their keys counted beside each of them: the
    # scan the table needs (no index on observed_at or updated_at) is then the only one.
    plain = scanned if windowed else _scanned(amended, with_key_counts=False, read=read)
    # What a listing states (the window by its start), where the counts read the rows by key.
    listed = _scanned(amended, with_key_counts=True, read=read, listing=True, key_kept_unique=kept)
    listed_plain = listed if windowed else plain

    identity = [
        "id",
        "task_session_id",
        *(["agent_execution_id"] if amended else []),
        "tool_call_id",
    ]
    first_of_duplicated_key = sa.and_(c.key_rows > 1, c.key_rank == 1)
    if windowed:
        # Each duplicated key of a changed row counted once, by its first changed row (its
        # rank among them): a DISTINCT over the keys let SQLite walk the whole key index.
        held_rows = sa.func.coalesce(
            sa.func.sum(sa.case((first_of_duplicated_key, c.key_rows), else_=0)), 0
        )
        duplicated = None
    else:
        # Uniqueness (AC-3) counts the duplicated keys and the rows they hold, grouped by the
        # key beside the scan: a window in the scan passed every column of every row through a
        # sorter (bench/measured-choices.md). Its samples and listing read the window.
        duplicated = _duplicated_keys(amended)
        held_rows = sa.select(
            sa.func.coalesce(sa.func.sum(duplicated.c.key_rows), 0)
        ).scalar_subquery()

    def condition(name: str, pred: Predicate, shown: tuple[str, ...]) -> Counted:
        columns = [*identity, "observed_at", *shown]
        if name == "duplicate_rows":
            return Counted(
                count=held_rows,
                sample=_sample(scanned, pred, columns),
                listing=_sample(listed, pred, columns),
            )
        return Counted(
            when=pred(plain.c),
            sample=_sample(plain, pred, columns),
            listing=_sample(listed_plain, pred, columns),
        )

    conditions = {name: condition(name, pred, shown) for name, (pred, shown) in rules.items()}
    extra = [
        *(count_when(plain.c[name] == "").label(f"empty:{name}") for name in NULLABLE_TEXT_COLUMNS),
        count_when(plain.c.agent_status == "completed").label("completed_rows"),
        sa.func.count().label("rows"),
        *([count_when(first_of_duplicated_key).label("duplicated_keys")] if windowed else []),
    ]
    # A window's changed rows are looked up by id and their sessions by key, as the ledger's
    # are: PostgreSQL, pricing thousands of ids past its statistics, scanned both tables.
    with index_reads(conn, small=read is not None and read.small):
        counts, facts["rules"] = counted_scan(conn, conditions, select_from=plain, extra=extra)
        # The sessions of what failed stay open for the next live run, whichever run found it
        # (a table-wide rule is not judged on a part, so none of its sessions is carried).
        carry_sessions(
            conn,
            [
                (facts["rules"][name], counted.sample)
                for name, counted in conditions.items()
                if name not in TABLE_WIDE
            ],
        )
    facts["rows"] = int(counts["rows"])
    if not facts["rows"] and not windowed:
        # Only an empty table needs the messages read (the emptiness rule's other side).
        facts["qualifying_messages"], facts["qualifying_listing"] = _qualifying_messages(conn)
    facts["completed_rows"] = int(counts["completed_rows"])
    facts["empty_by_column"] = {
        name: int(counts[f"empty:{name}"])
        for name in NULLABLE_TEXT_COLUMNS
        if counts[f"empty:{name}"]
    }
    # The keys are counted apart, and only when some row shares its key: in the counting
    # statement their grouping ran a second time on every healthy table.
    held = facts["rules"]["duplicate_rows"]["count"]
    if not held:
        keys = 0
    elif duplicated is None:
        keys = int(counts["duplicated_keys"])
    else:
        keys = int(conn.execute(sa.select(sa.func.count()).select_from(duplicated)).scalar_one())
    facts["rules"]["duplicate_rows"]["keys"] = keys
    # The rule counts keys (AC-3): its listing is one row per duplicated key.
    shown = listed.c
    facts["rules"]["duplicate_rows"]["listing"] = listing_of(
        conn,
        sa.select(
            *(shown[name] for name in facts["key"]),
            shown.key_rows,
            shown.id.label("first_row_id"),
            shown.observed_at,
        )
        .where(shown.key_rows > 1, shown.key_rank == 1)
        .order_by(*(shown[name] for name in facts["key"])),
        "rows share this key",
    )
    return facts


def _duplicated_keys(amended: bool) -> sa.Subquery:
    """Each key held by more than one row, with its row count ``key_rows``."""
    key = [subagents.c[name] for name in (AMENDED_UNIQUE if amended else PRE_AMENDMENT_UNIQUE)]
    return (
        sa.select(sa.func.count().label("key_rows"))
        .select_from(subagents)
        .group_by(*key)
        .having(sa.func.count() > 1)
        .subquery("duplicated")
    )


def _sample(table: sa.Subquery, pred: Predicate, columns: list[str]) -> sa.Select:
    """The offending rows, primary key first, in observation order (sampled capped)."""
    c = table.c
    return (
        sa.select(*(c[name] for name in dict.fromkeys(columns)))
        .where(pred(c))
        .order_by(utc_instant(c.observed_at), c.id)
    )


def _qualifying_messages(conn: sa.Connection) -> tuple[int, Listing]:
    """Messages satisfying the AC-21 source predicate (what a backfill would copy): how many,
    and the listing of them."""
    sm = subagent_messages()
    count = conn.execute(sa.select(sa.func.count()).where(qualifies(sm))).scalar_one()
    every = (
        sa.select(sm.c.id, sm.c.task_session_id, sm.c.tool_call_id, sm.c.created_at)
        .where(qualifies(sm))
        .order_by(sm.c.created_at, sm.c.id)
    )
    return count, listing_of(conn, every, "qualifying message without a row")
