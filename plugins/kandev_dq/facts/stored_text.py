"""Facts behind the stored-text rules: text that the SQL would otherwise read silently wrong.

* **Metadata that is not JSON** (AC-23b). Both dialects read it as ``{}`` — a message of no
  kind, skipped like any non-subagent message — SQLite through ``json_valid``, PostgreSQL by
  excluding the ids located after ``::jsonb`` rejected them
  (:func:`kandev_dq.sql.messages.tolerating_unreadable_metadata`). The rows are the same on both
  dialects: text that is neither NULL, blank nor JSON.
  On SQLite, metadata stored as a BLOB, an integer or a real is named too, whatever it holds
  (:func:`kandev_dq.sql.messages.named_metadata`): a BLOB is read as the text of its bytes,
  a number as a scalar with no kind; ``not_text`` counts them.
  Metadata nested deeper than :data:`kandev_dq.sql.dialect.JSON_MAX_DEPTH` is unreadable too:
  SQLite's ``json_valid`` is 0 for it, PostgreSQL counts it with ``metadata_too_deep``.
* **Member names repeated** in an object the message reading walks (AC-23b, AC-19): read
  last-wins on both dialects, and named (:func:`_repeated_names`).
* **Timestamps in no recognised UTC text form** (AC-24e, SQLite only). The exact-instant
  construct reads the forms of CONTRACT §1; any other text would be compared as if it were
  one (``30/07/2026`` sorts after every 2026 date, ``…+02:00`` reads two hours late). Counted
  with :class:`kandev_dq.sql.dialect.recognised_utc_text`, pushed down as GLOB patterns.
* **Instants no clock can have written** (CONTRACT §1 timestamps, both dialects):
  ``infinity``, before 0001-01-02, after the run's clock plus a day
  (:func:`kandev_dq.sql.clock_range.beyond_any_clock`); one statement per table.

On SQLite one statement reads ``task_session_messages`` once for its text forms and metadata
(and one reads ``task_session_subagents`` for its text forms); PostgreSQL needs no text-form
test (typed columns), and its one read of the messages also parses every document: a document
it cannot parse fails the statement, and the snapshot's reading then locates the unreadable
ones and runs this again with them read as ``{}``
(:func:`kandev_dq.sql.messages.tolerating_unreadable_metadata`). A second read of the messages
walks the names of those whose text may repeat one, only when there are any.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.tables import SUBAGENTS, subagents, task_session_messages
from kandev_dq.facts.shapes import StoredTextFacts
from kandev_dq.sql.clock_range import beyond_any_clock
from kandev_dq.sql.dialect import (
    exact_walk_needed,
    metadata_doc,
    metadata_too_deep,
    recognised_utc_text,
    repeated_member,
    store_traits,
    stored_not_as_text,
    unpaired_names,
)
from kandev_dq.sql.listing import listing_of, listing_of_union, union_of
from kandev_dq.sql.mapping import FIELD_PATHS, KIND_PATH, SUBAGENT_KIND
from kandev_dq.sql.messages import (
    Unreadable,
    current_unreadable,
    display,
    named_metadata,
    stored_metadata,
)
from kandev_dq.sql.scan import Counted, Part, counted_scan, part
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


def _misread_conditions(source, names: tuple[str, ...]) -> dict[str, Counted]:
    """The conditions counting each column's misread values (see :func:`_misread_counts`).
    The last two columns are often one text (a row never updated keeps its first time):
    where they are, the value is tested once, for both."""
    conditions = {f"misread.{n}": Counted(when=_misread(source.c[n])) for n in names[:-2]}
    if len(names) < 2:
        return conditions | {f"misread.{n}": Counted(when=_misread(source.c[n])) for n in names}
    first, second = source.c[names[-2]], source.c[names[-1]]
    # Equal under BINARY: one text byte for byte, or values that are not texts (a text equal
    # to a number reads as one, so is no instant): the test answers alike for both. A NULL
    # beside anything is apart (and never misread).
    equal = sa.type_coerce(second, sa.Text).collate("BINARY") == first
    alike = sa.case((equal, 1), else_=0)
    return conditions | {
        f"misread.{first.name}.alike": Counted(when=sa.and_(alike == 1, _misread(first))),
        f"misread.{first.name}": Counted(when=sa.and_(alike == 0, _misread(first))),
        f"misread.{second.name}": Counted(when=sa.and_(alike == 0, _misread(second))),
    }


def _misread_counts(counts, table_name: str, names: tuple[str, ...]) -> dict[str, int]:
    """Each column's misread count, ``table.column`` to count, from the counting row of
    :func:`_misread_conditions`."""
    totals = {n: int(counts[f"misread.{n}"]) for n in names}
    if len(names) >= 2:
        alike = int(counts[f"misread.{names[-2]}.alike"])
        totals[names[-2]] += alike
        totals[names[-1]] += alike
    return {f"{table_name}.{n}": total for n, total in totals.items()}


def stored_text_facts(conn: sa.Connection) -> StoredTextFacts:
    traits = store_traits(conn)
    loose = traits.loose_values
    m = task_session_messages
    facts: dict[str, Any] = {"dialect": traits.name}
    found = current_unreadable() or Unreadable()
    # PostgreSQL: the unreadable ids, once located in this snapshot (None: none has failed).
    ids = None if loose else found.ids
    shape = observe_subagents(conn)

    # ONE pass over the messages: every condition below is counted in the same statement
    # (AC-23b metadata, AC-19 repeated names, CONTRACT §1 timestamp forms and range); only
    # messages whose text may repeat a name are walked afterwards, if there are any.
    # PostgreSQL, before the unreadable ids are located: a large text fails the scan short.
    docs = _message_documents(ids, loose, found.large_undecided)
    message_conditions = {
        f"may_repeat.{n}": Counted(when=test) for n, test in enumerate(_may_repeat(docs, loose))
    }
    message_conditions["unreadable"] = Counted(when=docs.c.unreadable)
    if loose:
        message_conditions["not_text"] = Counted(when=docs.c.not_text)
    if loose:
        message_conditions.update(_misread_conditions(docs, TIMESTAMP_COLUMNS[m.name]))
    message_conditions.update(
        {f"beyond.{n}": _beyond_in(docs, m.name, n) for n in TIMESTAMP_COLUMNS[m.name]}
    )
    # PostgreSQL: until the unreadable ids are known, the same pass parses every document
    # (AC-23b): one it cannot parse fails it (a scan of its own cost more,
    # bench/measured-choices.md). That parse also answers the name test that reads the
    # document (unpaired_names).
    parses_every = not loose and ids is None
    if not loose:
        unpaired = unpaired_names(
            docs.c.doc,
            docs.c.metadata,
            *FIELD_PATHS,
            mentioning=SUBAGENT_KIND,
            parse_every=parses_every,
        )
        message_conditions["may_repeat.unpaired"] = Counted(
            count=sa.func.coalesce(sa.func.sum(unpaired), 0)
        )
    counts, parts = counted_scan(conn, message_conditions, select_from=docs)
    if parses_every:
        ids = found.ids = ()  # every document parsed: none is unreadable
    unreadable_count = int(counts["unreadable"]) + (len(ids) if ids is not None else 0)
    facts["metadata"] = _unreadable_sample(conn, unreadable_count, ids)
    facts["metadata"]["not_text"] = int(counts["not_text"]) if loose else 0
    candidates = sum(int(counts[name]) for name in message_conditions if "may_repeat" in name)
    facts["repeated_names"] = _repeated_names(conn, docs, candidates)
    timestamps = _misread_counts(counts, m.name, TIMESTAMP_COLUMNS[m.name]) if loose else {}
    beyond = {f"{m.name}.{n}": parts[f"beyond.{n}"] for n in TIMESTAMP_COLUMNS[m.name]}

    # ONE pass over the subagent rows, for the same two timestamp conditions.
    present = (
        [n for n in TIMESTAMP_COLUMNS[SUBAGENTS] if n in shape.columns]
        if shape.table_exists
        else []
    )
    if present:
        row_conditions = {f"beyond.{n}": _beyond_in(subagents, SUBAGENTS, n) for n in present}
        if loose:
            row_conditions.update(_misread_conditions(subagents, tuple(present)))
        row_counts, row_parts = counted_scan(conn, row_conditions, select_from=subagents)
        beyond.update({f"{SUBAGENTS}.{n}": row_parts[f"beyond.{n}"] for n in present})
        if loose:
            timestamps.update(_misread_counts(row_counts, SUBAGENTS, tuple(present)))
    found_beyond = {k: v for k, v in beyond.items() if v["count"]}
    facts["out_of_range"] = {
        "count": sum(v["count"] for v in found_beyond.values()),
        "by_column": {k: v["count"] for k, v in found_beyond.items()},
        "sample": [row for v in found_beyond.values() for row in v["sample"]][:_SAMPLE],
        # One listing row per (row, column) counted, as the count sums them.
        "listing": union_of([v["listing"] for v in beyond.values()]),
    }
    if not loose:
        facts["timestamps"] = {"applicable": False, "count": 0, "by_column": {}, "sample": []}
        return facts
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


def _message_documents(ids: tuple[str, ...] | None, loose: bool, undecided: bool) -> sa.Subquery:
    """Each message's metadata read once as text with every member kept (the unreadable
    ``ids`` as ``{}``), beside the columns the other conditions read. Never fenced: a fenced
    SQLite subquery hands each reference its own copy of the document (a 50 MB one cost
    800 MB), and a fenced PostgreSQL one builds every document, where only the few whose text
    may repeat a name are read (bench/measured-choices.md)."""
    m = task_session_messages
    stored = stored_metadata(m)  # a BLOB's bytes as text on SQLite (AC-23b)
    doc = metadata_doc(
        stored, id_column=m.c.id, excluded=ids or (), as_text=True, undecided_large=undecided
    )
    columns = [m.c.id, m.c.task_session_id, *(m.c[n] for n in TIMESTAMP_COLUMNS[m.name])]
    # Which metadata the rule names (AC-23b): on SQLite what json_valid rejects and any
    # value not stored as text; on PostgreSQL, beside the located ``ids``, the documents
    # nested past the depth limit.
    unreadable = named_metadata(m.c.metadata) if loose else _too_deep(ids or (), undecided)
    columns.append(unreadable.label("unreadable"))
    if loose:
        columns.append(stored_not_as_text(m.c.metadata).label("not_text"))
    return sa.select(*columns, doc.label("doc"), stored.label("metadata")).subquery("docs")


def _name_tests(construct, docs: sa.Subquery) -> tuple[sa.ColumnElement[bool], ...]:
    """``construct`` over the names the reading takes: the kind's in any message, the fields'
    only where the kind may be ``subagent_task``, the only messages whose fields are read."""
    doc, stored = docs.c.doc, docs.c.metadata
    return (
        construct(doc, stored, KIND_PATH),
        construct(doc, stored, *FIELD_PATHS, mentioning=SUBAGENT_KIND),
    )


def _may_repeat(docs: sa.Subquery, loose: bool) -> tuple[sa.ColumnElement[bool], ...]:
    """The text tests of :func:`_repeated_names`: the messages that may repeat a name it reads.
    Counted apart, not joined by OR: SQLite took longer over the OR. On
    PostgreSQL the part that reads the document is counted apart (``unpaired_names``)."""
    return _name_tests(partial(exact_walk_needed, unpaired=loose), docs)


def _repeated_names(conn: sa.Connection, docs: sa.Subquery, candidates: int) -> Part:
    """Messages whose metadata repeats a member name along a path the reading takes
    (AC-23b, AC-19), along the paths of :func:`_name_tests`. Walked member by member only
    when the scan's text test let ``candidates`` through: in that scan, the walk's subqueries
    would keep PostgreSQL from reading the messages in parallel."""
    repeated = sa.or_(*_name_tests(repeated_member, docs))
    count = 0
    if candidates:
        walked = sa.select(sa.func.count()).select_from(docs).where(repeated)
        count = conn.execute(walked).scalar_one()
    named = sa.select(
        docs.c.id,
        docs.c.task_session_id,
        sa.cast(docs.c.created_at, sa.Text).label("created_at"),
        sa.func.substr(sa.cast(docs.c.doc, sa.Text), 1, _SHOWN_CHARS).label("metadata"),
    )
    sample = named.where(repeated).order_by(docs.c.id)
    return part(conn, count, sample, "a member name the reading takes is repeated")


def _unreadable_sample(
    conn: sa.Connection, count: int, ids: tuple[str, ...] | None
) -> dict[str, Any]:
    m = task_session_messages
    loose = store_traits(conn).loose_values  # else ``ids`` holds the located unreadable ones
    # The type a writer stored (SQLite keeps a BLOB or a number; PostgreSQL only text).
    stored_type = sa.func.typeof(m.c.metadata) if loose else sa.literal("text", sa.Text)
    stmt = sa.select(
        m.c.id,
        m.c.task_session_id,
        sa.cast(m.c.created_at, sa.Text).label("created_at"),
        stored_type.label("stored_type"),
        sa.func.substr(stored_metadata(m), 1, _SHOWN_CHARS).label("metadata"),
    )
    if loose:
        stmt = stmt.where(named_metadata(m.c.metadata))
    else:
        # PostgreSQL cannot test text for JSON without aborting (before version 16): the
        # located ids stand for that test, in the listing too.
        stmt = stmt.where(sa.or_(m.c.id.in_(ids), _too_deep(ids)))
    stmt = stmt.order_by(m.c.id)
    listing = listing_of(conn, stmt, "metadata is not JSON, or not stored as text")
    if not count:
        return {"count": 0, "sample": [], "listing": listing}
    rows = conn.execute(stmt.limit(_SAMPLE)).mappings()
    return {
        "count": count,
        "sample": [{k: display(v) for k, v in row.items()} for row in rows],
        "listing": listing,
    }


def _too_deep(ids: tuple[str, ...], undecided_large: bool = False) -> sa.ColumnElement:
    m = task_session_messages
    return metadata_too_deep(
        m.c.metadata, id_column=m.c.id, excluded=ids, undecided_large=undecided_large
    )


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


def _beyond_in(source, table_name: str, name: str) -> Counted:
    """Instants no clock can have written in one column (CONTRACT §1 timestamps)."""
    beyond = beyond_any_clock(source.c[name])
    named = sa.select(
        sa.literal(table_name, sa.Text).label("table"),
        sa.literal(name, sa.Text).label("column"),
        source.c.id,
        sa.cast(source.c[name], sa.Text).label("value"),
    )
    return Counted(
        when=beyond,
        sample=named.where(beyond).order_by(source.c.id),
        reason=f"{name} holds an instant no clock can have written",
    )
