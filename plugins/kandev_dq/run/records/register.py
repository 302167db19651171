"""The run register's rows: each check run, recorded before GX runs it and finished after
(:mod:`kandev_dq.run.register` says what a run records)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from kandev_dq.run.records.tables import runs

#: A store's runs read at a time, newest first (:meth:`Register.finished_runs_of_store`).
STORE_RUNS_PAGE = 20


class Register:
    """The run register's part of :class:`~kandev_dq.run.records.database.Records`."""

    engine: sa.Engine
    dialect: str

    def register_run(self, record: dict[str, Any]) -> None:
        """Record a run before GX runs it (the docs built during the run read it)."""
        row = {**record, "keys": json.dumps(record.get("keys") or {}, default=str)}
        with self.engine.begin() as conn:
            conn.execute(runs.insert(), {**row, "finished": False})

    def finish_run(self, run_name: str, run_key: str, outcome: dict[str, Any]) -> None:
        values = {
            "finished": True,
            "success": outcome.get("success"),
            "counts": json.dumps(outcome.get("counts") or {}),
            "failed_rules": json.dumps(outcome.get("failed_rules") or []),
            "duration_s": outcome.get("duration_s"),
        }
        with self.engine.begin() as conn:
            conn.execute(
                runs.update()
                .where(runs.c.run_name == run_name, runs.c.run_key == run_key)
                .values(**values)
            )

    def last_finished_run(self, run_name: str, before: str | None = None) -> dict[str, Any] | None:
        """The newest finished run named ``run_name`` (one checkpoint on one store), of those
        with a run key before ``before`` when it is given."""
        query = (
            sa.select(runs)
            .where(runs.c.run_name == run_name, runs.c.finished.is_(True))
            .where(runs.c.run_key < before if before is not None else sa.true())
            # The run key is the run time as GX writes it: the (run_name, run_key) index serves.
            .order_by(runs.c.run_key.desc(), runs.c.id.desc())
            .limit(1)
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return _run_dict(row) if row is not None else None

    def finished_runs_of_store(
        self, identity: str, before: str | None, limit: int
    ) -> Iterator[dict[str, Any]]:
        """The store's finished runs (any checkpoint) with a run key before ``before``, newest
        first, at most ``limit``: read a page at a time through the (store, run time) index,
        so a caller stopping at the first few reads no more."""
        query = (
            sa.select(runs)
            .where(runs.c.store_identity == identity, runs.c.finished.is_(True))
            .where(runs.c.run_key < before if before is not None else sa.true())
            .order_by(runs.c.run_time.desc(), runs.c.id.desc())
        )
        for offset in range(0, limit, STORE_RUNS_PAGE):
            with self.engine.connect() as conn:
                page = conn.execute(
                    query.limit(min(STORE_RUNS_PAGE, limit - offset)).offset(offset)
                ).all()
            yield from (_run_dict(row) for row in page)
            if len(page) < STORE_RUNS_PAGE:
                return

    def run_records(
        self,
        *,
        identity: str | None = None,
        run_keys: list[str] | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Recorded runs, newest first (of one store, or with the given run keys)."""
        query = sa.select(runs).order_by(runs.c.run_time.desc(), runs.c.id.desc())
        if identity is not None:
            query = query.where(runs.c.store_identity == identity)
        if run_keys is not None:
            query = query.where(runs.c.run_key.in_(run_keys))
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_run_dict(row) for row in conn.execute(query)]


def _run_dict(row) -> dict[str, Any]:
    record = dict(row._mapping)
    record["keys"] = json.loads(record["keys"] or "{}")
    record["counts"] = json.loads(record["counts"]) if record["counts"] else None
    record["failed_rules"] = json.loads(record["failed_rules"]) if record["failed_rules"] else []
    record.pop("id", None)
    return record
