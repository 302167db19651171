"""The names stores had before they were named by their identity, and the adoption of their
records.

Records of schema version 1 name a store by its URL as spelled (without credentials): one store
spelled two ways had two ledgers. A run names its store by what the store says it is (or the
user's ``--store-name``); the first time it does, the records kept under the spelling it was
given are moved to that name in one transaction, so its key ledger (AC-24), baseline, accepts
and run history carry on. Validation results stay as they were stored, under run names made
from the old name: :meth:`StoreNames.spelled_names` lets the live watermark and the previous
run still be found among them.
"""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.records.tables import (
    baselines,
    key_ledger,
    ledger_accepts,
    now_text,
    runs,
    store_names,
)
from kandev_dq.sql.dialect import insert_if_absent

#: The tables that name a store by ``store_identity``.
_NAMED = (baselines, key_ledger, ledger_accepts, runs)


class StoreNames:
    """The old names' part of :class:`~kandev_dq.records.database.Records`."""

    engine: sa.Engine
    dialect: str

    def adopt_spelled(self, spelled: str, key: str) -> bool:
        """Move the records kept under ``spelled`` (a store's name in version 1) to ``key``,
        once; True when this call moved them. Where both names hold a key's first sighting
        or a baseline, the earlier one stays: the oldest record is what write-once holds to."""
        if spelled == key or not self._held_under(spelled):
            return False
        with self.engine.begin() as conn:
            claimed = conn.execute(
                insert_if_absent(self.dialect, store_names, ["spelled"]),
                {"spelled": spelled, "records_key": key, "adopted_at": now_text()},
            )
            if claimed.rowcount == 0:  # another run adopted them first
                return False
            _keep_earliest(conn, key_ledger, spelled, key, "recorded_at", key_ledger.c.key_name)
            _keep_earliest(conn, baselines, spelled, key, "taken_at")
            for table in (ledger_accepts, runs):
                conn.execute(
                    table.update()
                    .where(table.c.store_identity == spelled)
                    .values(store_identity=key)
                )
        return True

    def spelled_names(self, key: str) -> list[str]:
        """The version-1 names whose records were moved to ``key``."""
        with self.engine.connect() as conn:
            return list(
                conn.scalars(
                    sa.select(store_names.c.spelled)
                    .where(store_names.c.records_key == key)
                    .order_by(store_names.c.spelled)
                )
            )

    def _held_under(self, name: str) -> bool:
        with self.engine.connect() as conn:
            return any(
                conn.execute(
                    sa.select(sa.literal(1)).where(table.c.store_identity == name).limit(1)
                ).first()
                for table in _NAMED
            )


def _keep_earliest(
    conn: sa.Connection,
    table: sa.Table,
    spelled: str,
    key: str,
    taken: str,
    *match: sa.ColumnElement,
) -> None:
    """Rename ``table``'s rows under ``spelled`` to ``key``; where ``key`` already holds a row
    for the same ``match`` columns, the one taken earlier (column ``taken``) is kept."""
    for old in conn.execute(sa.select(table).where(table.c.store_identity == spelled)).all():
        same = [table.c.store_identity == key, *(c == old._mapping[c.name] for c in match)]
        held = conn.execute(sa.select(table.c[taken]).where(*same)).first()
        mine = [table.c.store_identity == spelled, *(c == old._mapping[c.name] for c in match)]
        if held is not None and held[0] <= old._mapping[taken]:
            conn.execute(table.delete().where(*mine))
            continue
        if held is not None:
            conn.execute(table.delete().where(*same))
        conn.execute(table.update().where(*mine).values(store_identity=key))
