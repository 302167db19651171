"""Id lists and id forms.

* :func:`one_of` / :func:`looked_up` / :func:`excluded_ids` — a column is one of many ids,
  bound as ONE parameter (a ``text[]`` on PostgreSQL, a JSON array on SQLite): as a filter,
  or as the ids that drive the read; :func:`driving_ids`, the ids as a table to join a
  LATERAL read to (PostgreSQL).
* :class:`canonical_uuid` — a text is a UUID in canonical 8-4-4-4-12 hex form, in any case.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeDecorator


def one_of(column, ids: tuple[str, ...], name: str) -> ColumnElement:
    """``column`` is one of ``ids``, bound as ONE parameter ``name`` (a ``text[]`` on
    PostgreSQL, a JSON array on SQLite): a filter no join plan can repeat per row, whatever
    the planner believes about either side's size (PostgreSQL hashes the array; an index may
    take it as its condition)."""
    return _IdIn(column, sa.bindparam(name, list(ids), type_=_ID_ARRAY, unique=True))


def looked_up(column, ids: tuple[str, ...], name: str) -> ColumnElement:
    """:func:`one_of` for ids that drive the read: each one looked up by ``column``'s index
    (``IN (SELECT unnest(…))``, a set PostgreSQL sizes exactly) rather than tested against the
    rows of a walk of the table, which PostgreSQL chose for 5,000 changed rows' ids
    (bench/live.md). Never as a filter beside another read path: a nested loop planned for one
    row re-read the set once per row (41,000 times at 11M messages)."""
    return _IdIn(column, sa.bindparam(name, list(ids), type_=_ID_ARRAY, unique=True), drive=True)


def driving_ids(ids: tuple[str, ...], name: str) -> sa.TableValuedAlias:
    """``ids`` as a table of one column ``id`` (``unnest`` of ONE ``text[]`` parameter, on
    PostgreSQL alone), to join a LATERAL read to: each id then drives its own index range, the
    only plan such a join has, where a filter on the ids left the planner free to read a whole
    range of another index and test each row against them (bench/live.md)."""
    param = sa.bindparam(name, list(ids), type_=_ID_ARRAY, unique=True)
    return sa.func.unnest(param).table_valued("id").render_derived(name=name)


def excluded_ids(id_column, ids: tuple[str, ...]) -> ColumnElement:
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
    # A test already: SQLite must not get "(…) = 1" in a WHERE, which hides the list from the
    # planner and scans the table rather than looking each id up.
    _is_implicitly_boolean = True

    def __init__(self, column, param, *, drive: bool = False):
        self.column = column
        self.param = param
        self.drive = drive

    _traverse_internals = [
        ("column", InternalTraversal.dp_clauseelement),
        ("param", InternalTraversal.dp_clauseelement),
        ("drive", InternalTraversal.dp_boolean),
    ]


@compiles(_IdIn, "postgresql")
def _id_in_postgresql(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    param = compiler.process(element.param, **kw)
    if element.drive:
        return f"({col} IN (SELECT unnest({param})))"
    return f"({col} = ANY ({param}))"


@compiles(_IdIn, "sqlite")
def _id_in_sqlite(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    param = compiler.process(element.param, **kw)
    return f"({col} IN (SELECT value FROM json_each({param})))"


_UUID_GROUPS = (8, 4, 4, 4, 12)


class canonical_uuid(FunctionElement):  # noqa: N801 - reads as a SQL function
    """True when a text column is a UUID in canonical 8-4-4-4-12 hex form, in any case."""

    inherit_cache = True
    type = sa.Boolean()


@compiles(canonical_uuid, "sqlite")
def _uuid_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    pattern = "-".join("[0-9a-f]" * n for n in _UUID_GROUPS)
    return f"(lower({col}) GLOB '{pattern}')"


@compiles(canonical_uuid, "postgresql")
def _uuid_postgresql(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    pattern = "-".join(f"[0-9a-f]{{{n}}}" for n in _UUID_GROUPS)
    return f"({col} ~* '^{pattern}$')"
