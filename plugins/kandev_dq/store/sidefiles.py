"""A WAL-mode SQLite store's side files, left as a read-only check found them.

Opening a WAL-mode store read-only creates its ``-wal`` and ``-shm`` when they are absent, and
a read-only connection can never checkpoint them away. SQLite gives them the store file's mode
(and, run as root, its owner), so the store's own writer can still open them; but left behind
they change the store's folder on every run. After a check, side files the check created are
removed when no other connection holds the store; one that does keeps them, as it would anyway.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from kandev_dq.store import sqlite_driver

SIDE_SUFFIXES = ("-wal", "-shm")


@dataclass(frozen=True)
class SideFiles:
    """The side files of one SQLite store that did not exist before a check opened it."""

    store: Path
    absent: tuple[Path, ...]

    @classmethod
    def before_open(cls, store: Path) -> SideFiles:
        sides = (store.with_name(store.name + suffix) for suffix in SIDE_SUFFIXES)
        return cls(store, tuple(side for side in sides if not side.exists()))

    def restore(self) -> None:
        """Remove the side files this check created, once every connection of the check is
        closed. Never raises: the run's verdict stands either way."""
        created = [side for side in self.absent if side.exists()]
        if len(created) == len(SIDE_SUFFIXES) and _empty(created[0]):
            _close_as_last_connection(self.store)


def _empty(wal: Path) -> bool:
    """An empty ``-wal`` holds no transaction a writer committed while the check ran."""
    with contextlib.suppress(OSError):
        return wal.stat().st_size == 0
    return False


def _close_as_last_connection(store: Path) -> None:
    """Let SQLite itself delete the side files, race-free: a connection allowed to write that
    closes last removes them (the WAL being empty, no page is copied); while another
    connection, in this process or another, holds the store, SQLite leaves them to it. The
    connection runs no statement that writes (``query_only``)."""
    with contextlib.suppress(sqlite_driver.Error):
        conn = sqlite_driver.connect(
            f"file:{quote(str(store))}?mode=rw", uri=True, timeout=0, isolation_level=None
        )
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        finally:
            conn.close()
