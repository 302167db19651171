"""Insert-if-absent: ``INSERT ... ON CONFLICT (unique) DO NOTHING``."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

#: Both dialects spell it alike; SQLAlchemy offers it per dialect only.
_INSERTS = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def insert_if_absent(dialect: sa.Dialect, table: sa.Table, unique: Sequence[str]) -> sa.Insert:
    """``INSERT ... ON CONFLICT (unique) DO NOTHING`` for ``dialect`` (an engine's or a
    connection's): the database, not the caller, decides which of two concurrent writers holds
    a first value (AC-24 write-once)."""
    try:
        insert = _INSERTS[dialect.name]
    except KeyError:
        raise ValueError(f"no insert-if-absent for {dialect.name!r}") from None
    return insert(table).on_conflict_do_nothing(index_elements=list(unique))
