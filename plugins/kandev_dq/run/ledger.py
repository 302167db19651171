"""A store's name in the key ledger (AC-24 write-once) and in run names.

One snapshot cannot show that a key was rewritten or deleted; a record across runs can. The
ledger itself lives in the records database (:mod:`kandev_dq.run.records`), which names
stores by :func:`store_identity`: no credentials.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kandev_dq.store.reference import StoreRef, store_ref

if TYPE_CHECKING:
    from sqlalchemy.engine import URL


def store_identity(store: URL | StoreRef | str) -> str:
    """A store's name in the ledger and in run names: the URL without user or password
    (:attr:`~kandev_dq.store.reference.StoreRef.ledger_name`).

    It differs from the store's display name only in a SQLite store's prefix
    (``sqlite:/srv/k.db``), kept so that earlier ledgers and run names still match."""
    return store_ref(store).ledger_name
