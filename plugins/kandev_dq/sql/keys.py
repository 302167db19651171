"""The activation keys as stored in ``kandev_meta`` (CONTRACT §5), read by the runner and the
checks alike.

Each value is read as :func:`kandev_dq.sql.shown.shown` has it, cut inside the SQL: a key
longer than any instant arrives as its head, length and SHA-256, never whole, and that is the
form the report, the key ledger and the write-once comparison use (AC-24). SQLite keeps any
SQL type in the TEXT column: a BLOB, an INTEGER or a REAL is read as text naming its type
(``x'0001' (stored as BLOB)``), which no instant parses, so it is a malformed key
(AC-24e), never a crash, and a rewrite is still noticed.
"""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.contract.instants import ACTIVATION_KEYS
from kandev_dq.contract.tables import kandev_meta
from kandev_dq.sql.shown import prepare, shown

_TEXT = "text"


def read_keys(conn: sa.Connection) -> dict[str, str | None]:
    """The three activation keys, as shown, in one statement (None = absent, AC-24c).

    A store without ``kandev_meta`` (before the runner's first step) has every key absent.
    """
    keys: dict[str, str | None] = dict.fromkeys(ACTIVATION_KEYS)
    if not sa.inspect(conn).has_table(kandev_meta.name):
        return keys
    prepare(conn)
    value = kandev_meta.c.value
    if conn.dialect.name == "sqlite":
        stored_type = sa.func.typeof(value)
        # A BLOB as its hex literal: its bytes may be anything, an instant's included.
        readable = sa.case((stored_type == "blob", "x'" + sa.func.hex(value) + "'"), else_=value)
    else:  # PostgreSQL's TEXT column holds text only
        stored_type, readable = sa.literal(_TEXT), value
    rows = conn.execute(
        sa.select(
            kandev_meta.c.key, shown(readable).label("value"), stored_type.label("type")
        ).where(kandev_meta.c.key.in_(ACTIVATION_KEYS))
    )
    for key, shown_value, kind in rows:
        if shown_value is None:  # SQL NULL: no value (Kandev's column is NOT NULL DEFAULT '')
            continue
        keys[key] = (
            shown_value if kind == _TEXT else f"{shown_value} (stored as {kind.upper()}, not text)"
        )
    return keys
