"""The key ledger (AC-24 write-once): each store's first key values, its baseline, and accepts.

Append-only: ``UNIQUE(store_identity, key_name)`` and insert-if-absent, then the first value is
read back, so concurrent checks lose no first sighting and all agree. A legitimate reset (a
restored backup) is an *accept*: a new row with its time, user and reason, never an update or a
delete of the first sighting. Each store's write-once *baseline* (the run that first recorded
it) is kept, so a first run says that rewrites before it cannot be seen. The one update is of
a name: a run through GX's API is named only after its first suite, so what it recorded before
is given that name then (:meth:`Ledger.name_the_run`).
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from kandev_dq.errors import KandevDqError
from kandev_dq.records.tables import (
    baselines,
    imports,
    key_ledger,
    ledger_accepts,
    now_text,
)
from kandev_dq.sql.dialect import insert_if_absent

#: Where a first sighting came from.
FROM_RUN = "run"
FROM_JSON = "imported key_ledger.json"


class Ledger:
    """The key ledger's part of :class:`~kandev_dq.records.database.Records`."""

    engine: sa.Engine
    dialect: str

    def record_first_sightings(
        self, identity: str, keys: dict[str, str | None], run_name: str, source: str = FROM_RUN
    ) -> list[str]:
        """Insert each present key's value unless a first value is already recorded; the names
        of the keys this call recorded."""
        rows = [
            {
                "store_identity": identity,
                "key_name": name,
                "first_value": value,
                "recorded_at": now_text(),
                "run_name": run_name,
                "source": source,
            }
            for name, value in sorted(keys.items())
            if value is not None
        ]
        if not rows:
            return []
        statement = insert_if_absent(
            self.dialect, key_ledger, ["store_identity", "key_name"]
        ).returning(key_ledger.c.key_name)
        recorded: list[str] = []
        with self.engine.begin() as conn:
            for row in rows:  # one at a time: each is decided by the database alone
                recorded += conn.execute(statement, row).scalars()
        return recorded

    def name_the_run(
        self, identity: str, key_names: list[str], baseline: bool, unnamed: str, run_name: str
    ) -> None:
        """Give the first sightings of ``key_names`` and, with ``baseline``, the baseline of
        ``identity``, recorded under ``unnamed`` by a run not yet named then, that run's
        ``run_name``: each row this run recorded, never another run's."""
        if not key_names and not baseline:
            return
        with self.engine.begin() as conn:
            if key_names:
                conn.execute(
                    key_ledger.update()
                    .where(
                        key_ledger.c.store_identity == identity,
                        key_ledger.c.key_name.in_(key_names),
                        key_ledger.c.run_name == unnamed,
                    )
                    .values(run_name=run_name)
                )
            if baseline:
                conn.execute(
                    baselines.update()
                    .where(baselines.c.store_identity == identity, baselines.c.run_name == unnamed)
                    .values(run_name=run_name)
                )

    def take_baseline(self, identity: str, run_name: str, source: str = FROM_RUN) -> Baseline:
        """The store's write-once baseline; taken now when none was (``recorded_now``)."""
        statement = insert_if_absent(self.dialect, baselines, ["store_identity"]).returning(
            baselines.c.store_identity
        )
        with self.engine.begin() as conn:
            inserted = conn.execute(
                statement,
                {
                    "store_identity": identity,
                    "taken_at": now_text(),
                    "run_name": run_name,
                    "source": source,
                },
            ).all()
        baseline = self.baseline(identity)
        assert baseline is not None  # just inserted, or already there
        baseline.recorded_now = bool(inserted)
        return baseline

    def baseline(self, identity: str) -> Baseline | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(baselines).where(baselines.c.store_identity == identity)
            ).first()
        if row is None:
            return None
        return Baseline(row.taken_at, row.run_name, row.source)

    def first_values(self, identity: str) -> dict[str, str]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(key_ledger.c.key_name, key_ledger.c.first_value).where(
                    key_ledger.c.store_identity == identity
                )
            ).all()
        return {row.key_name: row.first_value for row in rows}

    def expected_values(self, identity: str) -> dict[str, str | None]:
        """What write-once compares each key with: its first value, or the value of its latest
        accept (None: the key's absence was accepted)."""
        expected: dict[str, str | None] = dict(self.first_values(identity))
        for accept in self.accepts(identity):  # oldest first: the latest one wins
            expected[accept.key_name] = accept.accepted_value
        return expected

    def accepts(self, identity: str | None = None) -> list[Accept]:
        query = sa.select(ledger_accepts).order_by(ledger_accepts.c.id)
        if identity is not None:
            query = query.where(ledger_accepts.c.store_identity == identity)
        with self.engine.connect() as conn:
            return [
                Accept(
                    r.store_identity,
                    r.key_name,
                    r.accepted_value,
                    r.replaced_value,
                    r.accepted_at,
                    r.accepted_by,
                    r.reason,
                )
                for r in conn.execute(query)
            ]

    def accept(self, identity: str, key: str, value_now: str | None, reason: str) -> Accept:
        """Record that ``key`` of this store legitimately holds ``value_now`` from now on."""
        replaced = self.expected_values(identity).get(key)
        accept = Accept(
            identity, key, value_now, replaced, now_text(), _current_user(), reason.strip()
        )
        with self.engine.begin() as conn:
            conn.execute(
                ledger_accepts.insert(),
                {
                    "store_identity": accept.store_identity,
                    "key_name": accept.key_name,
                    "accepted_value": accept.accepted_value,
                    "replaced_value": accept.replaced_value,
                    "accepted_at": accept.accepted_at,
                    "accepted_by": accept.accepted_by,
                    "reason": accept.reason,
                },
            )
        return accept

    def ledger_entries(self, identity: str) -> list[LedgerEntry]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(key_ledger)
                .where(key_ledger.c.store_identity == identity)
                .order_by(key_ledger.c.key_name)
            ).all()
        return [
            LedgerEntry(r.key_name, r.first_value, r.recorded_at, r.run_name, r.source)
            for r in rows
        ]

    def import_json_ledger(self, path: Path) -> int:
        """Import a JSON key ledger once (by content digest); the file itself is left in place.

        Returns the number of stores it named (0 when it was imported before or is absent)."""
        path = Path(path)
        if not path.is_file():
            return 0
        raw = path.read_bytes()
        source = f"{FROM_JSON} sha256:{hashlib.sha256(raw).hexdigest()}"
        try:
            ledger = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise KandevDqError(f"cannot import {path}: it is not a JSON key ledger") from None
        if not isinstance(ledger, dict):
            raise KandevDqError(f"cannot import {path}: it is not a JSON key ledger")
        with self.engine.connect() as conn:
            done = conn.execute(sa.select(imports).where(imports.c.source == source)).first()
        if done is not None:
            return 0
        for identity, keys in sorted(ledger.items()):
            if not isinstance(keys, dict):
                continue
            present = {str(k): str(v) for k, v in keys.items() if v is not None}
            self.record_first_sightings(str(identity), present, FROM_JSON, source=FROM_JSON)
            self.take_baseline(str(identity), FROM_JSON, source=FROM_JSON)
        with self.engine.begin() as conn:
            conn.execute(
                insert_if_absent(self.dialect, imports, ["source"]),
                {"source": source, "imported_at": now_text()},
            )
        return len(ledger)


@dataclass
class Baseline:
    """When a store's write-once record began: rewrites before ``taken_at`` cannot be seen."""

    taken_at: str
    run_name: str
    source: str
    recorded_now: bool = False

    def parameter(self) -> dict[str, Any]:
        """The suite parameter the baseline disclosure rule reads (AC-24)."""
        return {"taken_at": self.taken_at, "source": self.source, "recorded_now": self.recorded_now}


@dataclass
class Accept:
    store_identity: str
    key_name: str
    accepted_value: str | None
    replaced_value: str | None
    accepted_at: str
    accepted_by: str
    reason: str

    @property
    def unchanged(self) -> bool:
        """Whether the accepted value is the one already expected (the accept changes nothing)."""
        return self.accepted_value == self.replaced_value


@dataclass
class LedgerEntry:
    key_name: str
    first_value: str
    recorded_at: str
    run_name: str
    source: str


@dataclass
class LedgerView:
    """One store's ledger: its baseline, first sightings and accepts."""

    store: str
    records: str
    baseline: Baseline | None
    entries: list[LedgerEntry] = field(default_factory=list)
    accepts: list[Accept] = field(default_factory=list)


def _current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (a container without a passwd entry)
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"
