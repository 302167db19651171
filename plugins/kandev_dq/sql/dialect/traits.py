"""What a store's dialect does differently, for the code above ``sql/`` that must choose.

Facts and records read these traits, never the dialect's name: each dialect's behaviour is
stated once, here, beside the constructs that spell its SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa


@dataclass(frozen=True)
class StoreTraits:
    #: The dialect's name, as reports show it and as ``sql/`` builders take it.
    name: str
    #: A column keeps any value a writer binds, whatever its declared type (SQLite): metadata
    #: stored as a BLOB or a number, timestamps in text forms the exact reading would misread
    #: (AC-23b, CONTRACT §1); and text is tested for JSON in SQL without aborting the
    #: statement. Else the columns are typed, and metadata that is not JSON is located apart.
    loose_values: bool
    #: Rows are named by their ``rowid`` (SQLite), else by their key: changed subagent rows,
    #: and the messages the backfill reconciliation and coverage read, whose ids and sessions
    #: are then never carried through SQLite's sorts and materialised subqueries.
    rows_by_rowid: bool
    #: A small set another read filters by is read first and bound as one array parameter:
    #: the planner, misjudging the set's size, would otherwise repeat a join per row
    #: (PostgreSQL). Else an uncorrelated subquery, computed once by design (SQLite).
    binds_read_sets: bool
    #: The query giving the server's (or library's) version, and how a report names it.
    version_query: str
    product: str


_TRAITS = {
    "sqlite": StoreTraits(
        name="sqlite",
        loose_values=True,
        rows_by_rowid=True,
        binds_read_sets=False,
        version_query="SELECT sqlite_version()",
        product="SQLite",
    ),
    "postgresql": StoreTraits(
        name="postgresql",
        loose_values=False,
        rows_by_rowid=False,
        binds_read_sets=True,
        version_query="SHOW server_version",
        product="PostgreSQL",
    ),
}


def store_traits(conn: sa.Connection | sa.Engine) -> StoreTraits:
    """The traits of ``conn``'s dialect (SQLite or PostgreSQL, the two a store may be)."""
    try:
        return _TRAITS[conn.dialect.name]
    except KeyError:
        raise ValueError(f"unsupported database dialect {conn.dialect.name!r}") from None


def server_version(conn: sa.Connection) -> str:
    """The store server's version: PostgreSQL's ``server_version``, or the SQLite library's."""
    traits = store_traits(conn)
    return f"{traits.product} {conn.exec_driver_sql(traits.version_query).scalar()}"
