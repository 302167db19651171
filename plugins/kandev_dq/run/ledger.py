"""A store's name in the key ledger (AC-24 write-once) and in run names.

One snapshot cannot show that a key was rewritten or deleted; a record across runs can. The
ledger itself lives in the records database (:mod:`kandev_dq.run.records`), which names
stores by :func:`store_identity`: no credentials.
"""

from __future__ import annotations

from sqlalchemy.engine import URL

from kandev_dq.store.access import shown_store, sqlite_file


def store_identity(url: URL) -> str:
    """A store's name in the ledger and in run names: the URL without user or password.

    It differs from :func:`~kandev_dq.store.access.shown_store` only in a SQLite store's
    prefix (``sqlite:/srv/k.db``), kept so that earlier ledgers and run names still match."""
    if url.get_backend_name() == "sqlite":
        return f"sqlite:{sqlite_file(url)}"
    return shown_store(url)
