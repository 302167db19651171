"""Migration step 5, the backfill (AC-21 … AC-24): one ``INSERT … SELECT`` of
:func:`kandev_dq.sql.mapping.backfill_select` and both keys, in one transaction.

``MAX(created_at)`` is read first, then the insert, then ``capture_since`` is sampled, then the
keys are written (AC-24 points 1–4); it runs only once the AC-33 end state holds (AC-33c) and
unless both backfill keys are present (AC-24d).
"""

from __future__ import annotations

import logging
from datetime import datetime

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    now_instant,
    parse_stored_instant,
)
from kandev_dq.migration.report import (
    SHAPE_STEPS,
    STEP_EXECUTION_SINCE,
    STEP_META,
    MigrationError,
    Outcome,
    Status,
)
from kandev_dq.migration.transactions import (
    KEEP_ROWCOUNT,
    MigrationRun,
    dialect_insert,
    transaction,
    write_key,
)
from kandev_dq.sql import dialect
from kandev_dq.sql import messages as queries
from kandev_dq.sql.clock_range import beyond_any_clock
from kandev_dq.sql.keys import read_keys
from kandev_dq.sql.mapping import (
    BACKFILL_COLUMNS,
    backfill_select,
    fenced,
    is_source,
    message_documents,
    qualifies,
    subagent_messages,
)
from kandev_dq.store.observe import observe_subagents

log = logging.getLogger("kandev_dq.migration.backfill")

#: Attempts at the backfill transaction when PostgreSQL reports a serialization failure.
SERIALIZATION_ATTEMPTS = 3


# --- step 5: the backfill (AC-21 … AC-24) -----------------------------------------------------


def backfill_subagents(ctx: MigrationRun) -> Outcome:
    if ctx.failed(STEP_META):
        return Outcome(Status.SKIPPED, "kandev_meta is unavailable")
    failed = ctx.failed(*SHAPE_STEPS, STEP_EXECUTION_SINCE)
    if failed:
        return Outcome(Status.SKIPPED, f"AC-33c: {', '.join(failed)} failed")
    for attempt in range(1, SERIALIZATION_ATTEMPTS + 1):
        try:
            return _backfill_once(ctx)
        except sa.exc.DBAPIError as exc:
            retry = getattr(exc.orig, "sqlstate", None) == "40001"
            if not retry or attempt == SERIALIZATION_ATTEMPTS:
                raise
            log.info("backfill serialization failure, retrying (attempt %d)", attempt + 1)
    raise AssertionError("unreachable")


def _backfill_once(ctx: MigrationRun) -> Outcome:
    with transaction(ctx, snapshot=True) as conn:
        keys = read_keys(conn)
        if keys[CAPTURE_SINCE] is not None and keys[BACKFILL_THROUGH] is not None:
            return Outcome(Status.ALREADY_DONE)  # AC-24d: the guard is "both keys present"
        # AC-33c: the end state is the observed schema (clauses 1-4) plus its key (clause 6).
        shape = observe_subagents(conn)
        if not shape.end_state_holds:
            why = "; ".join(shape.problems())
            return Outcome(Status.SKIPPED, f"AC-33c: the end state does not hold: {why}")
        if keys[EXECUTION_SINCE] is None:
            return Outcome(Status.SKIPPED, f"AC-33c: {EXECUTION_SINCE} is absent")
        # AC-23b: metadata that is not JSON reads as {} (a message of no kind, skipped). On
        # PostgreSQL such a row would abort the MAX: it is then located in this transaction
        # (same snapshot) and excluded from the MAX and the INSERT alike.
        unreadable = queries.Unreadable()
        preflight = queries.tolerating_unreadable_metadata(  # MAX first, and what to refuse
            conn, lambda c: c.execute(backfill_preflight_statement(ctx.dialect)).one(), unreadable
        )
        if preflight.unmappable:  # fail the step naming the messages
            raise MigrationError(
                queries.tolerating_unreadable_metadata(conn, unmappable_timestamps, unreadable)
            )
        high = preflight.high
        with queries.reading_unreadable_as_empty(unreadable):
            insert = backfill_statement(ctx.dialect)
        rows = conn.execute(insert, execution_options=KEEP_ROWCOUNT).rowcount
        capture = now_instant()  # sampled after the INSERT completed, before the key writes
        through = backfill_through_value(high)
        wrote_capture = write_key(conn, CAPTURE_SINCE, capture.rfc3339nano())
        wrote_through = write_key(conn, BACKFILL_THROUGH, through)
        # Named in the report: SQLite read them as {} silently (and counted them); PostgreSQL
        # parsed only the documents that may name the subagent kind, so it looks for them.
        skipped = (
            unreadable.ids
            if unreadable.ids is not None
            else queries.locate_unreadable_metadata(conn)
            if ctx.dialect != "sqlite" or preflight.unreadable
            else ()
        )
        not_text = queries.locate_not_text_metadata(conn) if preflight.not_text else ()
    written = {CAPTURE_SINCE: wrote_capture, BACKFILL_THROUGH: wrote_through}
    parts = [f"inserted {rows} row(s)"]
    parts += [f"{'wrote' if w else 'kept existing'} {k}" for k, w in written.items()]
    detail = {
        "rows": rows,
        "capture_since": capture.rfc3339nano(),
        "backfill_through": through,
        "written": written,
    }
    notes, noted = metadata_notes(skipped, not_text)
    for note in notes:
        log.warning("backfill: %s", note)
    return Outcome(Status.DONE, "; ".join(parts + notes), detail | noted)


def metadata_notes(skipped: tuple[str, ...], not_text: tuple[str, ...]) -> tuple[list[str], dict]:
    """What the backfill says of the messages whose metadata it cannot take as stored
    (AC-23b), in its result and in the dry run alike: those read as ``{}`` and skipped, and
    (SQLite) those stored as a BLOB, an integer or a real, whose text is read (a BLOB's bytes,
    so a subagent message bound as bytes is inserted like the same message stored as text;
    see ``docs/interpretations.md``). Lines, and the report's detail."""
    notes: list[str] = []
    detail: dict = {}
    if skipped:
        notes.append(
            f"{len(skipped)} message(s) with metadata that is not JSON read as {{}} and "
            f"skipped (AC-23b): {_first_ids(skipped)}"
        )
        detail["unreadable_metadata"] = {"count": len(skipped), "ids": list(skipped[:20])}
    if not_text:
        notes.append(
            f"{len(not_text)} message(s) with metadata stored as a BLOB, an integer or a real, "
            "not as text: a BLOB read as the text of its bytes, a number as no kind (AC-23b): "
            f"{_first_ids(not_text)}"
        )
        detail["metadata_not_text"] = {"count": len(not_text), "ids": list(not_text[:20])}
    return notes, detail


def _first_ids(ids: tuple[str, ...]) -> str:
    return ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")


def unmappable_timestamps(conn: sa.Connection) -> str | None:
    """Why the backfill cannot map the qualifying messages, naming them; None when it can.

    A message's created_at and updated_at become a row's ``observed_at`` / ``settled_at`` and
    the MAX of created_at becomes ``backfill_through``, a write-once key (AC-24 point 1). So a
    qualifying message whose timestamp the exact-instant construct cannot read (SQLite text
    such as ``30/07/2026`` or a ``+02:00`` offset, AC-24e) or that no clock can have written
    (``infinity``, year 9999: CONTRACT §1 timestamps) fails the step: no row, no key (AC-24a),
    retried once the messages are fixed. The dry run reports the same reason.
    """
    sm = subagent_messages("msg")
    unmappable = beyond_any_clock(sm.c.created_at, sm.c.updated_at)
    if conn.dialect.name == "sqlite":
        unmappable = sa.or_(
            unmappable,
            sa.not_(dialect.recognised_utc_text(sm.c.created_at)),
            sa.not_(dialect.recognised_utc_text(sm.c.updated_at)),
        )
    stmt = (
        sa.select(
            sm.c.id,
            sa.cast(sm.c.created_at, sa.Text).label("created_at"),
            sa.cast(sm.c.updated_at, sa.Text).label("updated_at"),
        )
        .where(qualifies(sm), unmappable)
        .order_by(sm.c.id)
    )
    count, sample = queries.count_and_sample(conn, stmt, limit=3)
    if not count:
        return None
    shown = "; ".join(
        f"id {row['id']!r} created_at {str(row['created_at'])[:40]!r} "
        f"updated_at {str(row['updated_at'])[:40]!r}"
        for row in sample
    )
    return (
        f"{count} qualifying message(s) hold a timestamp the backfill cannot map: in no "
        "recognised UTC text form, infinite, before 0001-01-02 or after this run's clock plus "
        f"a day (e.g. {shown}); fix them and run again"
    )


def backfill_through_value(high: str | datetime | None) -> str:
    """RFC3339Nano of the source MAX(created_at), or ``''`` when nothing matched (AC-24f).

    Every digit the store holds is kept (seed point 1: the true high-water mark): up to 9 on
    SQLite, whose exact-instant text carries nanoseconds, 6 on PostgreSQL.
    """
    if high is None:
        return ""
    return parse_stored_instant(high).rfc3339nano()


# --- the backfill's statements ----------------------------------------------------------------


def backfill_statement(dialect_name: str):
    """AC-21 … AC-22: one ``INSERT … SELECT`` with ``ON CONFLICT (…) DO NOTHING``, no batching."""
    t = schema.subagents
    rows = backfill_select(dialect_name)
    stmt = dialect_insert(t, dialect_name).from_select(list(BACKFILL_COLUMNS), rows)
    return stmt.on_conflict_do_nothing(index_elements=[t.c[c] for c in schema.AMENDED_UNIQUE])


def backfill_preflight_statement(dialect_name: str) -> sa.Select:
    """The backfill's one read of the messages before its INSERT (one scan, one parse each).

    ``high``: MAX(created_at) over AC-21's source predicate, as :func:`backfill_through_statement`
    reads it (AC-24 point 1), over the messages it can map. ``unmappable``: the qualifying
    messages :func:`unmappable_timestamps` refuses (on PostgreSQL, whose columns are typed,
    only instants no clock can have written). SQLite only (0 on PostgreSQL, where metadata
    that may be a subagent message's and does not parse aborts the statement, and the rest
    is located after the INSERT): ``unreadable``, the messages whose metadata is not
    JSON, and ``not_text``, those whose metadata is stored as a BLOB, an integer or a real
    (:func:`kandev_dq.sql.messages.locate_unreadable_metadata` and
    :func:`~kandev_dq.sql.messages.locate_not_text_metadata` name them only when there are
    any). The aggregates read the predicate from a
    :func:`~kandev_dq.sql.mapping.fenced` subquery: PostgreSQL evaluates it once per message.
    """
    m = schema.task_session_messages
    sqlite = dialect_name == "sqlite"
    stored = (
        (
            queries.unreadable_sqlite(m.c.metadata).label("unreadable"),
            dialect.stored_not_as_text(m.c.metadata).label("not_text"),
        )
        if sqlite
        else ()
    )
    msg = message_documents("msg", extra=stored)
    flagged = sa.select(
        sa.case((is_source(msg), 1), else_=0).label("source"),
        msg.c.created_at,
        msg.c.updated_at,
        *([msg.c.unreadable, msg.c.not_text] if sqlite else []),
    )
    f = fenced(flagged).subquery("flagged").c

    def total(condition) -> sa.ColumnElement:
        return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)

    zero = sa.literal(0)
    unmappable = beyond_any_clock(f.created_at, f.updated_at)
    if sqlite:
        unmappable = sa.or_(
            unmappable,
            sa.not_(dialect.recognised_utc_text(f.created_at)),
            sa.not_(dialect.recognised_utc_text(f.updated_at)),
        )
    # The MAX leaves them out: PostgreSQL's infinity has no Python datetime to fetch.
    mapped = sa.and_(f.source == 1, sa.not_(unmappable))
    return sa.select(
        sa.func.max(sa.case((mapped, dialect.utc_instant(f.created_at)))).label("high"),
        total(sa.and_(f.source == 1, unmappable)).label("unmappable"),
        (total(f.unreadable == 1) if sqlite else zero).label("unreadable"),
        (total(f.not_text == 1) if sqlite else zero).label("not_text"),
    )


def backfill_through_statement(dialect_name: str) -> sa.Select:
    """MAX(created_at) over AC-21's source predicate, as an exact instant (AC-24 point 1)."""
    sm = subagent_messages("msg")
    return sa.select(sa.func.max(dialect.utc_instant(sm.c.created_at))).where(qualifies(sm))
