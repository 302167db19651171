"""A store's name in the records database: its key ledger (AC-24 write-once), run register, live
watermarks and run names.

One snapshot cannot show that a key was rewritten or deleted; a record across runs can, as long
as every run of one store finds the same record. A store is therefore named by what it says it
is, however its URL is spelled (:func:`~kandev_dq.store.reference.identity_key`), or by the
name the user gave it (``--store-name``, ``$KANDEV_DQ_STORE_NAME``, which keeps copies of one
store apart). Records an older kandev-dq kept under the URL as spelled are adopted the first
time the store is named so (:mod:`kandev_dq.records.names`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kandev_dq.project.settings import store_name_option
from kandev_dq.store.access import gx_facts, open_store
from kandev_dq.store.reference import StoreRef, identity_key, store_ref
from kandev_dq.store.snapshot import pin_of

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import URL

    from kandev_dq.records.database import Records

#: The fact family of a store's identity, on a run's snapshot.
STORE_IDENTITY = "kandev.store_identity"


def store_identity(store: StoreRef | URL | str, conn: sa.Connection | None = None) -> str:
    """The store's name in the records database: the user's name for it, else its identity,
    read through ``conn`` (the session the store is read with; else a read-only session of its
    own)."""
    ref = store_ref(store)
    if ref.name is not None:
        return ref.name
    if conn is not None:
        return identity_key(conn, ref.shown)
    opened = open_store(ref, read_only=True)
    try:
        with opened.engine.connect() as own:
            return identity_key(own, ref.shown)
    finally:
        opened.dispose()


def records_key(records: Records, store: StoreRef, conn: sa.Connection | None = None) -> str:
    """:func:`store_identity`, once the records an older kandev-dq kept under the store's
    spelled name are adopted (:meth:`~kandev_dq.records.Records.adopt_spelled`)."""
    key = store_identity(store, conn)
    records.adopt_spelled(store.spelled_name, key)
    return key


def validated_store(gx_engine: sa.Engine) -> StoreRef:
    """The store a GX metric validates through ``gx_engine``: as ``kandev-dq check`` named it
    (its pinned snapshot carries it); on a checkpoint run through GX's own API, the engine's
    URL, named ``$KANDEV_DQ_STORE_NAME`` when that is set."""
    pin = pin_of(gx_engine)
    if pin is not None and pin.store is not None:
        return pin.store
    return store_ref(gx_engine.url).named(store_name_option(None))


def validated_store_key(records: Records, gx_engine: sa.Engine) -> str:
    """The name in ``records`` of the store a GX metric validates through ``gx_engine``: the
    one ``kandev-dq check`` read with its snapshot; on a checkpoint run through GX's own API,
    the user's name, else the identity read in the facts' own read-only session."""
    pin = pin_of(gx_engine)
    if pin is not None and pin.records_key is not None:
        return pin.records_key
    store = validated_store(gx_engine)
    if store.name is None:
        key = gx_facts(gx_engine, STORE_IDENTITY, lambda conn: identity_key(conn, store.shown))
        return records_key(records, store.named(key))
    return records_key(records, store)


def accept_options(store: StoreRef, records: Records) -> dict[str, Any]:
    """How the write-once rule's remedy (``ledger accept``) names the store and the records
    database the run used: with the user needed to connect, never a password, and the
    store's name when the user gave one."""
    return {"store": store.connect_form, "records": records.ref.connect_form, "name": store.name}
