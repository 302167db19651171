"""Validation results: the rows GX reads and writes through
:class:`~kandev_dq.run.results_store.RecordsStoreBackend`, one per GX key."""

from __future__ import annotations

import itertools
import json

import sqlalchemy as sa

from kandev_dq.run.records.tables import now_text, results, runs
from kandev_dq.sql.dialect import insert_if_absent

#: Results of one suite read at a time when looking for a store's newest.
SUITE_PAGE = 50


class Results:
    """The validation results' part of :class:`~kandev_dq.run.records.database.Records`."""

    engine: sa.Engine
    dialect: str

    def put_result(self, key: tuple[str, ...], value: str) -> None:
        suite, run_name, run_key = _result_parts(key)
        text = json.dumps(list(key))
        row = {"suite": suite, "run_name": run_name, "run_key": run_key, "value": value}
        with self.engine.begin() as conn:
            updated = conn.execute(
                results.update()
                .where(results.c.result_key == text)
                .values(**row, stored_at=now_text())
            ).rowcount
            if not updated:
                conn.execute(
                    insert_if_absent(self.dialect, results, ["result_key"]),
                    {**row, "result_key": text, "stored_at": now_text()},
                )

    def get_result(self, key: tuple[str, ...]) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(
                sa.select(results.c.value).where(results.c.result_key == json.dumps(list(key)))
            ).scalar()

    def results_of_runs(
        self, run_ids: list[tuple[str, str]]
    ) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """(suite, stored result JSON) of each suite each recorded run (run name, run key)
        validated, by run: one indexed read for them all."""
        found: dict[tuple[str, str], list[tuple[str, str]]] = {run: [] for run in run_ids}
        if not run_ids:
            return found
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(results.c.run_name, results.c.run_key, results.c.suite, results.c.value)
                .where(results.c.run_key.in_(sorted({key for _, key in run_ids})))
                .order_by(results.c.suite)
            )
            for row in rows:
                if (row.run_name, row.run_key) in found:
                    found[row.run_name, row.run_key].append((row.suite, row.value))
        return found

    def result_keys(self) -> list[tuple[str, ...]]:
        """Every stored key: GX's own listing. A run reads a bounded window instead
        (:meth:`newest_result_keys`, :meth:`results_of_newest_runs`, :meth:`newest_of_suite`)."""
        with self.engine.connect() as conn:
            return [tuple(json.loads(k)) for k in conn.scalars(sa.select(results.c.result_key))]

    def newest_result_keys(self, limit: int) -> list[tuple[str, ...]]:
        """The ``limit`` newest validation results' keys, newest first (by GX's run time)."""
        query = (
            sa.select(results.c.result_key)
            .where(results.c.run_key.is_not(None))
            .order_by(results.c.run_key.desc(), results.c.suite.desc())
            .limit(max(limit, 0))
        )
        with self.engine.connect() as conn:
            return [tuple(json.loads(k)) for k in conn.scalars(query)]

    def results_of_newest_runs(self, runs: int) -> list[tuple[str, ...]]:
        """The keys of every result of the ``runs`` newest run times, newest first."""
        newest = (
            sa.select(results.c.run_key)
            .where(results.c.run_key.is_not(None))
            .distinct()
            .order_by(results.c.run_key.desc())
            .limit(max(runs, 0))
        )
        with self.engine.connect() as conn:
            keys = list(conn.scalars(newest))
            if not keys:
                return []
            query = (
                sa.select(results.c.result_key)
                .where(results.c.run_key.in_(keys))
                .order_by(results.c.run_key.desc(), results.c.suite.desc())
            )
            return [tuple(json.loads(k)) for k in conn.scalars(query)]

    def newest_of_suite(self, suite: str, identity: str) -> tuple[str, ...] | None:
        """The key of the newest result of ``suite`` from a recorded run of the store
        ``identity`` (None: there is none). Read newest first, a page at a time, through the
        (suite, run key) index: a planner joining from the runs would read every run of the
        store."""
        for offset in itertools.count(0, SUITE_PAGE):
            query = (
                sa.select(results.c.result_key, results.c.run_name, results.c.run_key)
                .where(results.c.suite == suite, results.c.run_key.is_not(None))
                .order_by(results.c.run_key.desc())
                .limit(SUITE_PAGE)
                .offset(offset)
            )
            with self.engine.connect() as conn:
                page = conn.execute(query).all()
                if not page:
                    return None
                ours = set(
                    conn.execute(
                        sa.select(runs.c.run_name, runs.c.run_key).where(
                            runs.c.store_identity == identity,
                            sa.tuple_(runs.c.run_name, runs.c.run_key).in_(
                                [(row.run_name, row.run_key) for row in page]
                            ),
                        )
                    ).all()
                )
            for row in page:
                if (row.run_name, row.run_key) in ours:
                    return tuple(json.loads(row.result_key))
        return None

    def remove_result(self, key: tuple[str, ...]) -> bool:
        with self.engine.begin() as conn:
            gone = conn.execute(
                results.delete().where(results.c.result_key == json.dumps(list(key)))
            ).rowcount
        return bool(gone)


def _result_parts(key: tuple[str, ...]) -> tuple[str | None, str | None, str | None]:
    """(suite, run name, run key) of a GX validation result key
    ``(*suite parts, run name, run time, batch)``; None for GX's own backend-id key."""
    if len(key) < 4:
        return None, None, None
    return ".".join(key[:-3]), key[-3], key[-2]
