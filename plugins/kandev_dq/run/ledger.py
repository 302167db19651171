"""The key ledger: the first value seen of each activation key, per store (AC-24 write-once).

One snapshot cannot show that a key was rewritten or deleted; a record across runs can. The
ledger lives beside the validation results (``uncommitted/key_ledger.json``), names stores
without credentials, only ever adds a first sighting, and is replaced atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.engine import URL

from kandev_dq.run.jsonfile import write_json_atomically
from kandev_dq.store.access import shown_store, sqlite_file


def store_identity(url: URL) -> str:
    """A store's name in the ledger and in run names: the URL without user or password.

    It differs from :func:`~kandev_dq.store.access.shown_store` only in a SQLite store's
    prefix (``sqlite:/srv/k.db``), kept so that earlier ledgers and run names still match."""
    if url.get_backend_name() == "sqlite":
        return f"sqlite:{sqlite_file(url)}"
    return shown_store(url)


class KeyLedger:
    def __init__(self, path: Path):
        self.path = Path(path)

    def _load(self) -> dict[str, dict[str, str]]:
        if not self.path.is_file():
            return {}
        return json.loads(self.path.read_text(encoding="utf-8"))

    def first_seen(self, identity: str) -> dict[str, str]:
        return dict(self._load().get(identity, {}))

    def record(self, identity: str, keys: dict[str, str | None]) -> None:
        """Add first sightings of present keys; a recorded value is never replaced.

        A value too long to be a key is recorded as :func:`~kandev_dq.sql.keys.read_keys` reads
        it (head, length, digest): a rewrite still differs."""
        ledger = self._load()
        seen = ledger.setdefault(identity, {})
        added = {k: v for k, v in keys.items() if v is not None and k not in seen}
        if not added:
            return
        seen.update(added)
        write_json_atomically(self.path, ledger)
