"""Instants as upstream's Go code writes them into a SQLite store (CONTRACT §1).

Go's SQLite driver stores a ``time.Time`` as text: ``YYYY-MM-DD HH:MM:SS``, a fraction of up to
9 digits with its trailing zeros trimmed (no ``.`` at a whole second), and ``+00:00``. Both
sample builders write their SQLite instants through :func:`go_text`; PostgreSQL columns take
the instant itself.
"""

from __future__ import annotations

import time

MICROSECOND_NS = 1_000
SECOND_NS = 1_000_000_000


def go_text(ns: int) -> str:
    """Go's SQLite text for the instant ``ns`` nanoseconds after the epoch (UTC)."""
    seconds, fraction = divmod(ns, SECOND_NS)
    head = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))
    digits = f"{fraction:09d}".rstrip("0")
    return f"{head}.{digits}+00:00" if digits else f"{head}+00:00"


def go_text_us(us: int) -> str:
    """:func:`go_text` of an instant kept in microseconds after the epoch."""
    return go_text(us * MICROSECOND_NS)
