"""``kandev-dq ledger show`` and ``ledger accept``: reading a store's key ledger, and the one way
out of a permanent AC-24 failure after a legitimate reset (a restored backup).

An accept reads the key's current value from the store (read-only, as ``check`` does) and adds
a row to the records database with its time, user and reason; the first sighting itself is
never changed. The next ``check`` compares the key with the accepted value, and ``history``
and the data docs overview list every accept.
"""

from __future__ import annotations

from pathlib import Path

from kandev_dq.contract.instants import ACTIVATION_KEYS
from kandev_dq.errors import KandevDqError
from kandev_dq.project.settings import chosen_store
from kandev_dq.records.database import Records
from kandev_dq.records.identity import records_key
from kandev_dq.records.ledger import Accept, LedgerView
from kandev_dq.records.location import records_ref, refuse_the_store
from kandev_dq.sql.keys import read_keys
from kandev_dq.store.access import open_store
from kandev_dq.store.reference import StoreRef


def ledger_view(
    project: Path, target: str | StoreRef | None, records: str | None = None
) -> LedgerView:
    """A store's baseline, first sightings and accepts (the store itself is not opened)."""
    store = chosen_store(target)
    chosen = records_ref(project, records)
    refuse_the_store(chosen, store)  # opening records creates their tables: never in the store
    with Records(chosen) as opened:
        identity = records_key(opened, store)
        return LedgerView(
            store=store.shown,
            records=opened.shown,
            baseline=opened.baseline(identity),
            entries=opened.ledger_entries(identity),
            accepts=opened.accepts(identity),
        )


def accept_key(
    project: Path, target: str | StoreRef | None, key: str, reason: str, records: str | None = None
) -> Accept:
    """Accept ``key``'s current value in the store as its expected value from now on."""
    return accepted_for(project, target, key, reason, records)[0]


def accepted_for(
    project: Path,
    target: str | StoreRef | None,
    key: str,
    reason: str,
    records: str | None = None,
    *,
    store_name: str | None = None,
) -> tuple[Accept, StoreRef]:
    """:func:`accept_key`, and the store it accepted for, as read once (``store_name``: the
    user's name for it in the records, :func:`~kandev_dq.project.settings.chosen_store`)."""
    if key not in ACTIVATION_KEYS:
        raise KandevDqError(
            f"--key {key!r} is not an activation key ({', '.join(ACTIVATION_KEYS)})"
        )
    if not reason.strip():
        raise KandevDqError("--reason must say why the change is legitimate")
    chosen = records_ref(project, records)
    store = chosen_store(target, store_name)
    refuse_the_store(chosen, store)
    with Records(chosen) as opened:
        identity = records_key(opened, store)
        if opened.baseline(identity) is None:
            raise KandevDqError(
                f"no key ledger for {store.shown} in {opened.shown}: nothing to accept "
                "(run `kandev-dq check` first)"
            )
        opened_store = open_store(store, read_only=True)
        try:
            with opened_store.snapshot() as conn:
                now = read_keys(conn)[key]
        finally:
            opened_store.dispose()
        return opened.accept(identity, key, now, reason), store


def render_ledger(view: LedgerView) -> list[str]:
    lines = [f"key ledger of {view.store} (records: {view.records})"]
    if view.baseline is None:
        return [*lines, "no record of this store yet: its first check takes the baseline"]
    lines.append(
        f"write-once baseline taken {view.baseline.taken_at} ({view.baseline.source}); "
        "rewrites before it cannot be seen"
    )
    for entry in view.entries:
        lines.append(
            f"  {entry.key_name} = {entry.first_value!r}  first seen {entry.recorded_at} "
            f"({entry.source})"
        )
    for accept in view.accepts:
        lines.append(
            f"  accepted {accept.accepted_at} by {accept.accepted_by}: {accept.key_name} "
            f"{accept.replaced_value!r} -> {accept.accepted_value!r} ({accept.reason})"
        )
    return lines
