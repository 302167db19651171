"""Planner fences: what keeps a value computed once per row, and a small read on its indexes.

* :class:`computed_once` — a subquery column computed once per row (PostgreSQL's ``::jsonb``
  parse not repeated per field read).
* :func:`once_per_row` — a condition as a one-row table joined to each row, evaluated once.
* :func:`index_reads` — a live window's small reads planned for their indexes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement


class computed_once(FunctionElement):  # noqa: N801
    """``value`` as a column its subquery computes once per row, the subquery kept whole.

    PostgreSQL merges a plain subquery into the query reading it and recomputes a column's
    expression at every reference (a ``::jsonb`` parse once per field read). It never merges
    one whose select list holds a set-returning function; a one-element ``unnest`` is one, so
    the column is computed once per row, and, unlike an ``OFFSET 0`` fence, the subquery stays
    open to parallel workers and to the filters of the query reading it (those on other
    columns). SQLite: the value itself (its parse cache serves repeated reads).
    """

    inherit_cache = True

    def __init__(self, value):
        super().__init__(value)
        self.type = value.type


@compiles(computed_once, "sqlite")
def _computed_once_sqlite(element, compiler, **kw):
    return compiler.process(element.clauses, **kw)


@compiles(computed_once, "postgresql")
def _computed_once_postgresql(element, compiler, **kw):
    return f"unnest(ARRAY[{compiler.process(element.clauses, **kw)}])"


class _one_row(FunctionElement):  # noqa: N801
    """A one-row table whose ``value`` is its argument, evaluated once per row joined to it."""

    inherit_cache = True


@compiles(_one_row, "sqlite")
def _one_row_sqlite(element, compiler, **kw):
    # SQLite has no LATERAL, and a flattened subquery's expression is evaluated again at each
    # reference; a table-valued function takes correlated arguments and runs once per row.
    return f"json_each(json_array({compiler.process(element.clauses, **kw)}))"


@compiles(_one_row, "postgresql")
def _one_row_postgresql(element, compiler, **kw):
    # PostgreSQL's readers need no text test (its path operators read names exactly): the
    # value is never read, and never computed.
    return "(SELECT NULL::boolean AS value)"


def once_per_row(condition, name: str) -> sa.TableValuedAlias:
    """``condition`` as the ``value`` column of a one-row table named ``name``: joined to a
    row (``ON true``), SQLite evaluates it once for that row however often it is read."""
    return _one_row(condition).table_valued("value").alias(name)


@contextmanager
def index_reads(conn: sa.Connection, *, small: bool = True) -> Iterator[None]:
    """While the block runs, a ``small`` read (a live window's: what changed, and the keys
    and sessions it names, on a store with the indexes that read them) is planned for those
    indexes: PostgreSQL prices sequential scans out (``enable_seqscan``, in this transaction),
    as its estimates of a window's newest rows lie past its statistics and a list of thousands
    of ids let it scan the whole table instead. SQLite plans by its indexes: nothing to do.
    The setting is put back when the block ends; after a failure, the rollback that follows
    (to the facts' savepoint, or of the whole read) puts it back."""
    if not small or conn.dialect.name != "postgresql":
        yield
        return
    previous = conn.execute(
        sa.select(*(sa.func.current_setting(name) for name in _WHOLE_TABLE_PLANS))
    ).one()
    for name in _WHOLE_TABLE_PLANS:
        conn.exec_driver_sql(f"SET LOCAL {name} = off")
    yield
    conn.execute(
        sa.select(
            *(
                sa.func.set_config(name, value, sa.true())
                for name, value in zip(_WHOLE_TABLE_PLANS, previous, strict=True)
            )
        )
    )


#: What walks a whole table: a sequential scan, and a merge join, which read every session of
#: the store in key order to join the window's rows to theirs (the index-only walk of
#: task_sessions it then took grows with the store).
_WHOLE_TABLE_PLANS = ("enable_seqscan", "enable_mergejoin")
