"""Facts behind the stored-text rules: text that the SQL would otherwise read silently wrong.

* **Metadata that is not JSON** (AC-23b). Both dialects read it as ``{}`` — a message of no
  kind, skipped like any non-subagent message — SQLite through ``json_valid``, PostgreSQL by
  excluding the ids located after ``::jsonb`` rejected them
  (:func:`kandev_dq.sql.messages.tolerating_unreadable_metadata`). The rows are the same on both
  dialects: text that is neither NULL, blank nor JSON.
  Metadata nested deeper than :data:`kandev_dq.sql.dialect.JSON_MAX_DEPTH` is unreadable too:
  SQLite's ``json_valid`` is 0 for it, PostgreSQL counts it with ``metadata_too_deep``.
* **Member names repeated** in an object the message reading walks (AC-23b, AC-19): read
  last-wins on both dialects, and named (:func:`repeated_names`).
* **Timestamps in no recognised UTC text form** (AC-24e, SQLite only). The exact-instant
  construct reads the forms of CONTRACT §1; any other text would be compared as if it were
  one (``30/07/2026`` sorts after every 2026 date, ``…+02:00`` reads two hours late). Counted
  with :class:`kandev_dq.sql.dialect.recognised_utc_text`, pushed down as GLOB patterns.
* **Instants no clock can have written** (CONTRACT §1 timestamps, both dialects):
  ``infinity``, before 0001-01-02, after the run's clock plus a day
  (:func:`kandev_dq.sql.clock_range.beyond_any_clock`); one statement per table.

On SQLite one statement reads ``task_session_messages`` once for its text forms and metadata
(and one reads ``task_session_subagents`` for its text forms); PostgreSQL needs no text-form
scan (typed columns), and its metadata scan is skipped entirely when an earlier family of the
same snapshot already located the unreadable rows.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.tables import SUBAGENTS, subagents, task_session_messages
from kandev_dq.facts.shapes import StoredTextFacts
from kandev_dq.sql.clock_range import beyond_any_clock
from kandev_dq.sql.dialect import (
    metadata_doc,
    metadata_too_deep,
    recognised_utc_text,
    repeated_member,
)
from kandev_dq.sql.listing import listing_of, listing_of_union, union_of
from kandev_dq.sql.mapping import READ_PATHS
from kandev_dq.sql.messages import (
    Unreadable,
    current_unreadable,
    display,
    locate_unreadable_metadata,
    unreadable_sqlite,
)
from kandev_dq.sql.scan import Counted, count_when, counted_scan
from kandev_dq.store.observe import observe_subagents

#: The timestamp columns the rules compare, per table.
TIMESTAMP_COLUMNS: dict[str, tuple[str, ...]] = {
    task_session_messages.name: ("created_at", "updated_at"),
    SUBAGENTS: ("observed_at", "settled_at", "updated_at"),
}
_SAMPLE = 20
_SHOWN_CHARS = 60


def _misread(column) -> sa.ColumnElement:
    return sa.and_(column.is_not(None), sa.not_(recognised_utc_text(column)))


def stored_text_facts(conn: sa.Connection) -> StoredTextFacts:
    sqlite = conn.dialect.name == "sqlite"
    m = task_session_messages
    facts: dict[str, Any] = {"dialect": conn.dialect.name}
    timestamps: dict[str, int] = {}
    if sqlite:
        sums = [count_when(unreadable_sqlite(m.c.metadata)).label("unreadable")]
        sums += [count_when(_misread(m.c[name])).label(name) for name in TIMESTAMP_COLUMNS[m.name]]
        counts = conn.execute(sa.select(*sums)).mappings().one()
        unreadable_count = int(counts["unreadable"])
        timestamps.update({f"{m.name}.{n}": int(counts[n]) for n in TIMESTAMP_COLUMNS[m.name]})
        ids: tuple[str, ...] | None = None
    else:
        found = current_unreadable() or Unreadable()
        if found.ids is None:  # no earlier family of this snapshot has looked
            found.ids = locate_unreadable_metadata(conn)
        ids = found.ids
        unreadable_count = (
            len(ids) + conn.execute(sa.select(sa.func.count()).where(_too_deep(ids))).scalar_one()
        )
    facts["metadata"] = _unreadable_sample(conn, unreadable_count, ids)
    facts["repeated_names"] = repeated_names(conn, ids)

    shape = observe_subagents(conn)
    facts["out_of_range"] = _out_of_range(conn, shape)
    if not sqlite:
        facts["timestamps"] = {"applicable": False, "count": 0, "by_column": {}, "sample": []}
        return facts
    if shape.table_exists:
        present = [n for n in TIMESTAMP_COLUMNS[SUBAGENTS] if n in shape.columns]
        if present:
            row = (
                conn.execute(
                    sa.select(*(count_when(_misread(subagents.c[n])).label(n) for n in present))
                )
                .mappings()
                .one()
            )
            timestamps.update({f"{SUBAGENTS}.{n}": int(row[n]) for n in present})
    sample: list[dict[str, Any]] = []
    misread_listed = []
    for qualified, count in timestamps.items():
        table_name, column_name = qualified.split(".")
        table = m if table_name == m.name else subagents
        reason = f"{column_name} is in no recognised UTC text form"
        misread_listed.append((_misread_rows(table, column_name), reason))
        if count and len(sample) < _SAMPLE:
            sample += _misread_sample(conn, table, column_name, _SAMPLE - len(sample))
    facts["timestamps"] = {
        "applicable": True,
        "count": sum(timestamps.values()),
        "by_column": {k: v for k, v in timestamps.items() if v},
        "sample": sample,
        # One listing row per (row, column) counted, as the count sums them.
        "listing": listing_of_union(conn, misread_listed),
    }
    return facts


def _unreadable_sample(
    conn: sa.Connection, count: int, ids: tuple[str, ...] | None
) -> dict[str, Any]:
    m = task_session_messages
    stmt = sa.select(
        m.c.id,
        m.c.task_session_id,
        sa.cast(m.c.created_at, sa.Text).label("created_at"),
        sa.func.substr(m.c.metadata, 1, _SHOWN_CHARS).label("metadata"),
    )
    if ids is None:
        stmt = stmt.where(unreadable_sqlite(m.c.metadata))
    else:
        # PostgreSQL cannot test text for JSON without aborting (before version 16): the
        # located ids stand for that test, in the listing too.
        stmt = stmt.where(sa.or_(m.c.id.in_(ids), _too_deep(ids)))
    stmt = stmt.order_by(m.c.id)
    listing = listing_of(conn, stmt, "metadata is not JSON")
    if not count:
        return {"count": 0, "sample": [], "listing": listing}
    rows = conn.execute(stmt.limit(_SAMPLE)).mappings()
    return {
        "count": count,
        "sample": [{k: display(v) for k, v in row.items()} for row in rows],
        "listing": listing,
    }


def _too_deep(ids: tuple[str, ...]) -> sa.ColumnElement:
    m = task_session_messages
    return metadata_too_deep(m.c.metadata, id_column=m.c.id, excluded=ids)


def repeated_names(conn: sa.Connection, ids: tuple[str, ...] | None) -> dict[str, Any]:
    """Messages whose metadata repeats a member name along a path the reading takes
    (:data:`~kandev_dq.sql.mapping.READ_PATHS`; AC-23b, AC-19).

    Read as text with every member kept, the unreadable ``ids`` as ``{}``.
    """
    m = task_session_messages
    doc = metadata_doc(m.c.metadata, id_column=m.c.id, excluded=ids or (), as_text=True)
    docs = sa.select(m.c.id, m.c.task_session_id, m.c.created_at, doc.label("doc"))
    # Read once, never merged into the tests below. SQLite's own LIMIT for a lone OFFSET stays
    # a parameter even with literal binds, so the listing query spells it out.
    docs = (docs.limit(-1) if conn.dialect.name == "sqlite" else docs).offset(0).subquery("docs")
    repeated = sa.select(docs.c.id).where(repeated_member(docs.c.doc, *READ_PATHS))
    count = conn.execute(
        sa.select(sa.func.count()).select_from(repeated.subquery("repeated"))
    ).scalar_one()
    stmt = (
        sa.select(
            docs.c.id,
            docs.c.task_session_id,
            sa.cast(docs.c.created_at, sa.Text).label("created_at"),
            sa.func.substr(sa.cast(docs.c.doc, sa.Text), 1, _SHOWN_CHARS).label("metadata"),
        )
        .where(repeated_member(docs.c.doc, *READ_PATHS))
        .order_by(docs.c.id)
    )
    listing = listing_of(conn, stmt, "a member name the reading takes is repeated")
    if not count:
        return {"count": 0, "sample": [], "listing": listing}
    rows = conn.execute(stmt.limit(_SAMPLE)).mappings()
    return {
        "count": count,
        "sample": [{k: display(v) for k, v in row.items()} for row in rows],
        "listing": listing,
    }


def _misread_rows(table: sa.Table, column_name: str) -> sa.Select:
    column = table.c[column_name]
    return (
        sa.select(
            sa.literal(table.name, sa.Text).label("table"),
            sa.literal(column_name, sa.Text).label("column"),
            table.c.id,
            sa.func.typeof(column).label("stored_type"),
            sa.func.substr(sa.cast(column, sa.Text), 1, 40).label("value"),
        )
        .where(_misread(column))
        .order_by(table.c.id)
    )


def _misread_sample(
    conn: sa.Connection, table: sa.Table, column_name: str, limit: int
) -> list[dict[str, Any]]:
    stmt = _misread_rows(table, column_name).limit(limit)
    # Raw, not display()ed: the point is to show the text exactly as stored.
    return [dict(row) for row in conn.execute(stmt).mappings()]


def _out_of_range(conn: sa.Connection, shape) -> dict[str, Any]:
    """Instants no clock can have written, per compared column (CONTRACT §1 timestamps):
    one counted scan per table, named in a capped sample."""
    tables = [task_session_messages]
    if shape.table_exists:
        tables.append(subagents)
    by_column: dict[str, int] = {}
    sample: list[dict[str, Any]] = []
    listings = []
    for table in tables:
        names = [
            n
            for n in TIMESTAMP_COLUMNS[table.name]
            if table is task_session_messages or n in shape.columns
        ]
        conditions = {n: _beyond_in(table, n) for n in names}
        _, parts = counted_scan(conn, conditions, select_from=table)
        for name, found in parts.items():
            listings.append(found["listing"])
            if found["count"]:
                by_column[f"{table.name}.{name}"] = found["count"]
                sample += found["sample"]
    return {
        "count": sum(by_column.values()),
        "by_column": by_column,
        "sample": sample[:_SAMPLE],
        "listing": union_of(listings),
    }


def _beyond_in(table: sa.Table, name: str) -> Counted:
    beyond = beyond_any_clock(table.c[name])
    named = sa.select(
        sa.literal(table.name, sa.Text).label("table"),
        sa.literal(name, sa.Text).label("column"),
        table.c.id,
        sa.cast(table.c[name], sa.Text).label("value"),
    )
    return Counted(
        when=beyond,
        sample=named.where(beyond).order_by(table.c.id),
        reason=f"{name} holds an instant no clock can have written",
    )
