"""The SQL behind a finding: one self-contained, read-only ``SELECT`` listing every item a rule
counted, derived from the construct the facts counted with and compiled for the store.

A rule's listing is the select its facts already declared to sample the offending rows
(:class:`~kandev_dq.sql.scan.Counted` ``sample``, or the statement a count was read from),
without a LIMIT, with two things added for a reviewer: each stored timestamp beside its exact
UTC instant (:class:`~kandev_dq.sql.dialect.utc_instant`, AC-24e) and a ``reason`` column. So a
rule whose condition changes cannot drift from its query: there is no second text of it.

It is compiled with every bound value inlined (``literal_binds``): keys are parsed instants
rendered as literals the dialect reads exactly (``InstantParam``), ids and texts as quoted
SQL strings, written as ``sqlite3`` and ``psql`` read them (no driver's ``%`` escaping).
Nothing in it comes from the URL or the environment, so it carries no password; every inlined
value is one the store holds, or a bound the rule states (the run's clock for instants no
clock can have written). It is compiled only when asked (a failed rule, or
``explain``), so a healthy run pays nothing for it.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from kandev_dq.contract.tables import StoredTimestamp
from kandev_dq.sql.dialect import utc_instant
from kandev_dq.sql.shown import verbatim

#: The column a listing adds to say why each row is listed.
REASON = "reason"
#: What a listing's exact-instant column is called, after the stored column it reads.
INSTANT_SUFFIX = "_utc"


def _stored_timestamp(column: sa.ColumnElement) -> sa.ColumnElement | None:
    """The stored timestamp a selected column shows (itself, or cast to text), else None."""
    inner = column.element if isinstance(column, sa.Label) else column
    if isinstance(inner, sa.Cast):
        inner = inner.clause
    return inner if isinstance(inner.type, StoredTimestamp | sa.DateTime) else None


def instant_columns(sample: sa.Select) -> list[sa.ColumnElement]:
    """``sample``'s columns, each stored timestamp as the text the store holds (verbatim, not
    parsed) with its exact instant beside it: what a listing and a sample show (AC-24e)."""
    columns: list[sa.ColumnElement] = []
    for column in sample.selected_columns:
        stored = _stored_timestamp(column)
        if stored is None:
            columns.append(column)
            continue
        columns.append(verbatim(stored).label(column.key))
        columns.append(utc_instant(stored).label(f"{column.key}{INSTANT_SUFFIX}"))
    return columns


def with_instants(sample: sa.Select) -> sa.Select:
    """``sample`` with :func:`instant_columns` (its rows, order and limit kept)."""
    return sample.with_only_columns(*instant_columns(sample), maintain_column_froms=True)


def listing_select(sample: sa.Select, reason: str) -> sa.Select:
    """``sample`` (its rows, order and columns) with every stored timestamp's exact instant
    beside it and the ``reason``, unlimited: the rows a rule counted, as a reviewer reads them."""
    columns = [*instant_columns(sample), sa.literal(reason, sa.Text).label(REASON)]
    return sample.limit(None).with_only_columns(*columns, maintain_column_froms=True)


def stacked(parts: Sequence[sa.Select]) -> sa.Select:
    """Several listings of one rule (one per column it reads) as one: ``UNION ALL``, so each
    counted (row, column) offence stays one result row. Their columns must line up."""
    if len(parts) == 1:
        return parts[0]
    union = sa.union_all(*(part.order_by(None) for part in parts)).subquery("listed")
    return sa.select(union)


@dataclass(frozen=True)
class Listing:
    """A rule's listing select and the dialect of the store it was built for."""

    select: sa.Select
    dialect: Dialect

    def sql(self) -> str:
        """The statement as a reviewer reads it and pastes it into ``sqlite3`` or ``psql``: one
        clause per line, each subquery indented (sqlparse changes whitespace alone)."""
        import sqlparse
        from sqlparse.exceptions import SQLParseError

        compiled = self.select.compile(
            dialect=as_clients_read(self.dialect), compile_kwargs={"literal_binds": True}
        )
        text = str(compiled).strip()
        with suppress(SQLParseError):  # past sqlparse's token limit: SQLAlchemy's breaks stay
            text = sqlparse.format(text, reindent=True, indent_width=2)
        return f"{text};"


def as_clients_read(dialect: Dialect) -> Dialect:
    """``dialect`` compiling text for the database's own client, not for its driver.

    A ``format``/``pyformat`` driver (psycopg) needs every ``%`` doubled, which psql would read
    as two: a listing holding ``%`` would then list other rows than its rule counted. The copy
    keeps what the dialect learnt from the server (``standard_conforming_strings``, version)
    and renders ``%`` once; its own type cache, as literal renderers are cached per dialect.
    """
    if not dialect.identifier_preparer._double_percents:
        return dialect
    plain = copy.copy(dialect)
    plain.paramstyle, plain.positional = "named", False
    plain._type_memos = weakref.WeakKeyDictionary()
    plain.identifier_preparer = plain.preparer(plain)
    return plain


def listing_of(conn: sa.Connection, sample: sa.Select, reason: str) -> Listing:
    """The listing of ``sample`` (see :func:`listing_select`) for ``conn``'s dialect."""
    return Listing(listing_select(sample, reason), conn.dialect)


def listing_of_union(conn: sa.Connection, samples: Sequence[tuple[sa.Select, str]]) -> Listing:
    """One listing of several samples, each with its own reason (see :func:`stacked`)."""
    return Listing(stacked([listing_select(s, reason) for s, reason in samples]), conn.dialect)


def union_of(listings: Sequence[Listing]) -> Listing | None:
    """Listings of one rule built apart (one per table), as one; None when there is none."""
    if not listings:
        return None
    return Listing(stacked([found.select for found in listings]), listings[0].dialect)
