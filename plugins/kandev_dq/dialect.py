"""The few constructs that differ between SQLite and PostgreSQL, compiled per dialect.

Every query in kandev-dq reaches timestamps and message metadata only through these:

* :class:`utc_instant` — an exact, totally ordered reading of a naive-UTC TIMESTAMP column
  (CONTRACT §1, AC-24e). SQLite: a fixed-width ``YYYY-MM-DD HH:MM:SS.ffffff`` text built from
  every stored shape (``' '``/``T``, ``+00:00``/``Z``/none, 0-6 trimmed fraction digits, no
  ``.`` at a whole second) — never ``julianday``. PostgreSQL: ``col AT TIME ZONE 'UTC'``, so
  the session time zone never enters.
* :func:`at_or_after` / :func:`before` — a column against a parsed key bound as a parameter
  (equality lands after, AC-24 point 3), index-friendly on both dialects.
* :func:`metadata_doc`, :func:`json_text`, :func:`json_number`, :func:`json_flag` — JSON read
  out of the TEXT ``metadata`` column with NULL / ``''`` / ``'null'`` read as ``{}`` (AC-23b).
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeDecorator

from kandev_dq.instants import Instant, fixed_text

# --- exact instants --------------------------------------------------------------------------


class utc_instant(FunctionElement):  # noqa: N801 - reads as a SQL function
    """The exact UTC instant held by a naive-UTC TIMESTAMP column (comparable, ordered)."""

    inherit_cache = True
    type = sa.Text()


@compiles(utc_instant, "sqlite")
def _utc_instant_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    # Fraction digits are whatever follows the '.', minus the offset; trailing zeros may be
    # dropped with it because they are padded back to six (CONTRACT §1 trimmed widths).
    fraction = (
        f"CASE WHEN substr({col}, 20, 1) = '.' THEN rtrim(substr({col}, 21), '+-:0Z') ELSE '' END"
    )
    return (
        f"(substr({col}, 1, 10) || ' ' || substr({col}, 12, 8) || '.' || "
        f"substr(({fraction}) || '000000', 1, 6))"
    )


@compiles(utc_instant, "postgresql")
def _utc_instant_postgresql(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return f"({col} AT TIME ZONE 'UTC')"


class InstantParam(TypeDecorator):
    """Binds an :class:`Instant` (or aware datetime) as the exact microsecond bound (AC-24e)."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name == "postgresql":
            return dialect.type_descriptor(sa.TIMESTAMP(timezone=True))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        bound = value.bound() if isinstance(value, Instant) else Instant.from_datetime(value).micro
        return bound if dialect.name == "postgresql" else fixed_text(bound)


def instant_param(name: str, value: Instant | datetime) -> sa.BindParameter:
    """A key (or instant) bound as a parameter, never pasted into SQL."""
    return sa.bindparam(name, value, type_=InstantParam())


class _InstantComparison(ColumnElement):
    inherit_cache = True
    type = sa.Boolean()

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

    PostgreSQL casts once per row (``::jsonb``); read it through a subquery column so the cast
    is not repeated per extracted field.
    """

    inherit_cache = True
    type = sa.Text()


@compiles(metadata_doc, "sqlite")
def _doc_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return f"(CASE WHEN json_valid({col}) THEN {col} ELSE '{{}}' END)"


@compiles(metadata_doc, "postgresql")
def _doc_postgresql(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    empty = f"{col} IS NULL OR btrim({col}) IN ('', 'null')"
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
