"""The few constructs that differ between SQLite and PostgreSQL, compiled per dialect.

Every query in kandev-dq reaches timestamps and message metadata only through these:

* :class:`utc_instant` — an exact, totally ordered reading of a naive-UTC TIMESTAMP column
  (CONTRACT §1, AC-24e), at the precision the store holds. SQLite: a fixed-width
  ``YYYY-MM-DD HH:MM:SS.fffffffff`` text (nanoseconds) built from every stored shape
  (``' '``/``T``, ``+00:00``/``Z``/none, 0-9 trimmed fraction digits, no ``.`` at a whole
  second) — never ``julianday``. PostgreSQL (µs columns): ``col AT TIME ZONE 'UTC'``, so the
  session time zone never enters.
* :class:`utc_instant_latest` — the latest instant a value may stand for: a whole-second value
  (SQLite's ``CURRENT_TIMESTAMP``) stands for any instant of its second (CONTRACT §1), so order
  rules between two columns compare one's earliest reading with the other's latest.
* :func:`at_or_after` / :func:`before` — a column against a parsed key bound as a parameter
  (equality lands after, AC-24 point 3), index-friendly on both dialects.
* :func:`metadata_doc`, :func:`json_text`, :func:`json_number`, :func:`json_flag` — JSON read
  out of the TEXT ``metadata`` column with NULL / ``''`` / ``'null'`` read as ``{}`` (AC-23b).
* :class:`recognised_utc_text` — whether a stored timestamp is one of the UTC text forms the
  SQLite exact-instant construct reads correctly (always true for PostgreSQL's typed column).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeDecorator

from kandev_dq.contract.instants import Instant, fixed_text

# --- exact instants --------------------------------------------------------------------------


class utc_instant(FunctionElement):  # noqa: N801 - reads as a SQL function
    """The exact UTC instant held by a naive-UTC TIMESTAMP column (comparable, ordered)."""

    inherit_cache = True
    type = sa.Text()


class utc_instant_latest(FunctionElement):  # noqa: N801
    """The latest instant a column value may stand for (CONTRACT §1, measured upstream).

    A value whose sub-second part is zero (SQLite's ``CURRENT_TIMESTAMP`` writes whole
    seconds, as upstream's turn-end sweep does) stands for some instant in ``[s, s + 1 s)``:
    it reads as the last representable instant of that second. Any other value reads exactly,
    as :class:`utc_instant` does. Applied alike on both dialects, so one store gives one
    verdict (AC-19).
    """

    inherit_cache = True
    type = sa.Text()


def _sqlite_fraction(col: str) -> str:
    # Fraction digits are whatever follows the '.', minus the offset; trailing zeros may be
    # dropped with it because they are padded back to nine (CONTRACT §1 trimmed widths).
    return (
        f"CASE WHEN substr({col}, 20, 1) = '.' THEN rtrim(substr({col}, 21), '+-:0Z') ELSE '' END"
    )


def _sqlite_fixed(col: str, fraction: str) -> str:
    return f"(substr({col}, 1, 10) || ' ' || substr({col}, 12, 8) || '.' || {fraction})"


@compiles(utc_instant, "sqlite")
def _utc_instant_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return _sqlite_fixed(col, f"substr(({_sqlite_fraction(col)}) || '000000000', 1, 9)")


@compiles(utc_instant_latest, "sqlite")
def _utc_instant_latest_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    fraction = _sqlite_fraction(col)
    return _sqlite_fixed(
        col,
        f"(CASE WHEN ({fraction}) = '' THEN '999999999' "
        f"ELSE substr(({fraction}) || '000000000', 1, 9) END)",
    )


@compiles(utc_instant, "postgresql")
def _utc_instant_postgresql(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return f"({col} AT TIME ZONE 'UTC')"


@compiles(utc_instant_latest, "postgresql")
def _utc_instant_latest_postgresql(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return (
        f"((CASE WHEN date_trunc('second', {col}) = {col} "
        f"THEN {col} + interval '999999 microseconds' ELSE {col} END) AT TIME ZONE 'UTC')"
    )


class recognised_utc_text(FunctionElement):  # noqa: N801
    """True when a TIMESTAMP column's value is one the exact-instant construct reads exactly.

    SQLite keeps whatever text a writer gave it. :class:`utc_instant` reads the forms of
    CONTRACT §1 (``YYYY-MM-DD`` then ``' '`` or ``T``, ``HH:MM:SS``, an optional ``.`` with 1-9
    digits, then nothing, ``Z``, ``+00:00`` or ``-00:00``); any other text (``30/07/2026``, a
    ``+02:00`` offset, an epoch number, a BLOB, a 30th of February) would be silently misread,
    so the rules name such rows instead (:mod:`kandev_dq.facts.stored_text`). Mirrored in
    Python by :func:`kandev_dq.contract.instants.is_recognised_stored`. NULL stays NULL.

    PostgreSQL's naive ``TIMESTAMP`` holds typed values only: always true there.
    """

    inherit_cache = True
    type = sa.Boolean()


@compiles(recognised_utc_text, "sqlite")
def _recognised_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    d = "[0-9]"
    # The digit classes already bound month, day, hour, minute and second to two digits
    # each; plain text comparisons finish the ranges. Only a day of 29-31 needs SQLite's
    # calendar: with a modifier SQLite normalises the date (2026-02-30 -> 2026-03-02), so
    # equality holds exactly for a real day. Cheap checks first: this runs on every row.
    head = f"{d * 4}-[01]{d}-[0-3]{d}[ T][0-2]{d}:[0-5]{d}:[0-5]{d}*"
    # After the seconds: an offset alone, or '.', 1-9 digits, then an offset. Past the '.',
    # what the digits leave names the offset, and the length then bounds the digits.
    fraction = (
        f"CASE ltrim(substr({col}, 21), '0123456789') "
        f"WHEN '' THEN length({col}) BETWEEN 21 AND 29 "
        f"WHEN 'Z' THEN length({col}) BETWEEN 22 AND 30 "
        f"WHEN '+00:00' THEN length({col}) BETWEEN 27 AND 35 "
        f"WHEN '-00:00' THEN length({col}) BETWEEN 27 AND 35 ELSE 0 END"
    )
    return (
        f"(CASE WHEN {col} IS NULL THEN NULL WHEN typeof({col}) = 'text' "
        f"AND {col} GLOB '{head}' "
        f"AND substr({col}, 1, 4) <> '0000' "
        f"AND substr({col}, 6, 2) BETWEEN '01' AND '12' AND substr({col}, 9, 2) <> '00' "
        f"AND substr({col}, 12, 2) <= '23' "
        f"AND (substr({col}, 9, 2) <= '28' "
        f"OR date(substr({col}, 1, 10), '+0 days') = substr({col}, 1, 10)) "
        f"AND (substr({col}, 20) IN ('', 'Z', '+00:00', '-00:00') "
        f"OR (substr({col}, 20, 1) = '.' AND {fraction})) "
        f"THEN 1 ELSE 0 END)"
    )


@compiles(recognised_utc_text, "postgresql")
def _recognised_postgresql(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return f"(CASE WHEN {col} IS NULL THEN NULL ELSE TRUE END)"


class InstantParam(TypeDecorator):
    """Binds an :class:`Instant` (or aware datetime) exactly at the store's precision (AC-24e):
    nanoseconds on SQLite, the microsecond bound (rounded up) on PostgreSQL."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name == "postgresql":
            return dialect.type_descriptor(sa.TIMESTAMP(timezone=True))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        instant = value if isinstance(value, Instant) else Instant.from_datetime(value)
        return instant.bound() if dialect.name == "postgresql" else fixed_text(instant)


def instant_param(name: str, value: Instant | datetime) -> sa.BindParameter:
    """A key (or instant) bound as a parameter, never pasted into SQL."""
    return sa.bindparam(name, value, type_=InstantParam())


class _InstantComparison(ColumnElement):
    inherit_cache = True
    type = sa.Boolean()
    # A comparison already: SQLite must not get "(…) = 1" in a WHERE, which hides the raw
    # column bound from the planner and turns an index range into a full scan.
    _is_implicitly_boolean = True

    def __init__(self, column, param, operator: str):
        self.column = column
        self.param = param
        self.operator = operator

    _traverse_internals = [
        ("column", InternalTraversal.dp_clauseelement),
        ("param", InternalTraversal.dp_clauseelement),
        ("operator", InternalTraversal.dp_string),
    ]


@compiles(_InstantComparison, "sqlite")
def _compare_sqlite(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    param = compiler.process(element.param, **kw)
    exact = compiler.process(utc_instant(element.column), **kw)
    if element.operator == ">=":
        # The key's date is a lower bound valid for every stored shape, so the raw column
        # can use its index before the exact comparison decides (AC-24e, index-friendly).
        return f"({col} >= substr({param}, 1, 10) AND {exact} >= {param})"
    return f"({col} < substr({param}, 1, 10) OR {exact} < {param})"


@compiles(_InstantComparison, "postgresql")
def _compare_postgresql(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    param = compiler.process(element.param, **kw)
    # Convert the bound instant to naive UTC wall clock instead of the column: exact in any
    # session time zone and keeps the column's index usable (CONTRACT §1).
    return f"({col} {element.operator} ({param} AT TIME ZONE 'UTC'))"


def at_or_after(column, param: sa.BindParameter) -> ColumnElement:
    """``column >= key`` exactly: equality lands on the after side (AC-24 point 3)."""
    return _InstantComparison(column, param, ">=")


def before(column, param: sa.BindParameter) -> ColumnElement:
    """``column < key`` exactly (AC-24 point 3)."""
    return _InstantComparison(column, param, "<")


# --- metadata JSON ---------------------------------------------------------------------------


class metadata_doc(FunctionElement):  # noqa: N801
    """``metadata`` as a JSON document, with NULL / '' / 'null' / invalid text read as {} (AC-23b).

    SQLite's ``json_valid`` already reads text that is not JSON as ``{}``. PostgreSQL's
    ``::jsonb`` cast aborts the whole statement on such text instead, so the few messages
    whose metadata it cannot parse are located (only after a statement failed, see
    :func:`kandev_dq.sql.messages.locate_unreadable_metadata`) and passed here as ``excluded`` ids,
    with the table's ``id_column``: those rows read as ``{}`` too. The exclusion is compiled
    only when the list is non-empty, so the common statement is unchanged.

    PostgreSQL casts once per row (``::jsonb``); read it through a subquery column so the cast
    is not repeated per extracted field.
    """

    inherit_cache = True
    type = sa.Text()

    def __init__(self, column, *, id_column=None, excluded: Sequence[str] = ()):
        excluded = tuple(excluded)
        if excluded and id_column is None:
            raise ValueError("excluded ids need the id column they refer to")
        clauses = [column]
        if excluded:
            clauses.append(_excluded_ids(id_column, excluded))
        super().__init__(*clauses)


def _excluded_ids(id_column, ids: tuple[str, ...]) -> ColumnElement:
    """``id_column`` is one of ``ids``: one array parameter on PostgreSQL, an IN list elsewhere."""
    return _IdIn(
        id_column, sa.bindparam("unreadable_metadata_ids", list(ids), type_=_ID_ARRAY, unique=True)
    )


class _IdArray(TypeDecorator):
    """A list of ids as one parameter: a ``text[]`` on PostgreSQL, a JSON array on SQLite."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name == "postgresql":
            return dialect.type_descriptor(ARRAY(sa.Text))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value, dialect):
        return list(value) if dialect.name == "postgresql" else json.dumps(list(value))


_ID_ARRAY = _IdArray()


class _IdIn(ColumnElement):
    inherit_cache = True
    type = sa.Boolean()

    def __init__(self, column, param):
        self.column = column
        self.param = param

    _traverse_internals = [
        ("column", InternalTraversal.dp_clauseelement),
        ("param", InternalTraversal.dp_clauseelement),
    ]


@compiles(_IdIn, "postgresql")
def _id_in_postgresql(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    return f"({col} = ANY ({compiler.process(element.param, **kw)}))"


@compiles(_IdIn, "sqlite")
def _id_in_sqlite(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    param = compiler.process(element.param, **kw)
    return f"({col} IN (SELECT value FROM json_each({param})))"


@compiles(metadata_doc, "sqlite")
def _doc_sqlite(element, compiler, **kw):
    clauses = list(element.clauses)
    col = compiler.process(clauses[0], **kw)
    valid = f"json_valid({col})"
    if len(clauses) > 1:
        valid = f"{valid} AND NOT {compiler.process(clauses[1], **kw)}"
    return f"(CASE WHEN {valid} THEN {col} ELSE '{{}}' END)"


@compiles(metadata_doc, "postgresql")
def _doc_postgresql(element, compiler, **kw):
    clauses = list(element.clauses)
    col = compiler.process(clauses[0], **kw)
    empty = f"{col} IS NULL OR btrim({col}) IN ('', 'null')"
    if len(clauses) > 1:
        empty = f"{empty} OR {compiler.process(clauses[1], **kw)}"
    return f"(CASE WHEN {empty} THEN '{{}}' ELSE {col} END)::jsonb"


class _JsonPath(FunctionElement):
    inherit_cache = True

    def __init__(self, doc, *path: str):
        self.path = tuple(path)
        super().__init__(doc)

    _traverse_internals = FunctionElement._traverse_internals + [
        ("path", InternalTraversal.dp_plain_obj)
    ]


class json_text(_JsonPath):  # noqa: N801
    """A JSON string at ``path`` as text; any other JSON type reads as NULL."""

    inherit_cache = True

    type = sa.Text()


class json_number(_JsonPath):  # noqa: N801
    """A JSON number at ``path``; any other JSON type reads as NULL."""

    inherit_cache = True

    type = sa.Numeric()


class json_flag(_JsonPath):  # noqa: N801
    """A JSON boolean (or 0/1 number) at ``path`` as 1/0; anything else reads as NULL."""

    inherit_cache = True

    type = sa.Integer()


def _sqlite_path(path: tuple[str, ...]) -> str:
    return "'$." + ".".join(path) + "'"


def _pg_path(path: tuple[str, ...]) -> str:
    return "'{" + ",".join(path) + "}'"


@compiles(json_text, "sqlite")
def _text_sqlite(element, compiler, **kw):
    doc = compiler.process(list(element.clauses)[0], **kw)
    p = _sqlite_path(element.path)
    return f"(CASE WHEN json_type({doc}, {p}) = 'text' THEN json_extract({doc}, {p}) END)"


@compiles(json_text, "postgresql")
def _text_postgresql(element, compiler, **kw):
    doc = compiler.process(list(element.clauses)[0], **kw)
    p = _pg_path(element.path)
    return f"(CASE WHEN jsonb_typeof({doc} #> {p}) = 'string' THEN {doc} #>> {p} END)"


@compiles(json_number, "sqlite")
def _number_sqlite(element, compiler, **kw):
    doc = compiler.process(list(element.clauses)[0], **kw)
    p = _sqlite_path(element.path)
    return (
        f"(CASE WHEN json_type({doc}, {p}) IN ('integer', 'real') "
        f"THEN json_extract({doc}, {p}) END)"
    )


@compiles(json_number, "postgresql")
def _number_postgresql(element, compiler, **kw):
    doc = compiler.process(list(element.clauses)[0], **kw)
    p = _pg_path(element.path)
    return f"(CASE WHEN jsonb_typeof({doc} #> {p}) = 'number' THEN ({doc} #>> {p})::numeric END)"


@compiles(json_flag, "sqlite")
def _flag_sqlite(element, compiler, **kw):
    doc = compiler.process(list(element.clauses)[0], **kw)
    p = _sqlite_path(element.path)
    return (
        f"(CASE json_type({doc}, {p}) WHEN 'true' THEN 1 WHEN 'false' THEN 0 "
        f"WHEN 'integer' THEN (json_extract({doc}, {p}) <> 0) "
        f"WHEN 'real' THEN (json_extract({doc}, {p}) <> 0) END)"
    )


@compiles(json_flag, "postgresql")
def _flag_postgresql(element, compiler, **kw):
    doc = compiler.process(list(element.clauses)[0], **kw)
    p = _pg_path(element.path)
    return (
        f"(CASE jsonb_typeof({doc} #> {p}) WHEN 'boolean' THEN "
        f"CASE WHEN ({doc} #>> {p})::boolean THEN 1 ELSE 0 END "
        f"WHEN 'number' THEN CASE WHEN ({doc} #>> {p})::numeric <> 0 THEN 1 ELSE 0 END END)"
    )
