"""One open records database: its tables created and versioned on open, its three parts (the
key ledger, the run register, the validation results) on one connection, and retention.

``records prune`` (and a pruning ``check``) drops old results and run records, never ledger
rows, baselines or accepts.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

import sqlalchemy as sa

from kandev_dq.errors import KandevDqError, StoreError
from kandev_dq.records.ledger import Ledger
from kandev_dq.records.names import StoreNames
from kandev_dq.records.register import Register
from kandev_dq.records.results import Results
from kandev_dq.records.tables import (
    SCHEMA_VERSION,
    metadata,
    now_text,
    results,
    runs,
    schema_versions,
)
from kandev_dq.sql.dialect import insert_if_absent
from kandev_dq.store.access import open_store
from kandev_dq.store.reference import StoreRef, store_ref
from kandev_dq.store.target import redact


class Records(Ledger, Register, Results, StoreNames):
    """One open records database (tables created and versioned on open)."""

    def __init__(self, url: str | StoreRef):
        #: The records database, read once (:mod:`kandev_dq.records.location`).
        self.ref = store_ref(url)
        #: As it was given (it may hold a password: never shown).
        self.url = self.ref.given
        self.shown = self.ref.shown
        if self.ref.file is not None:
            folder = self.ref.file.parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise KandevDqError(
                    f"records database {self.shown}: cannot create the folder {folder}: "
                    f"{exc.strerror or type(exc).__name__}"
                ) from None
        try:
            self._store = open_store(
                self.ref, read_only=False, must_exist=False, require_kandev=False
            )
        except StoreError as exc:
            raise KandevDqError(f"records database: {exc}") from None
        self.engine = self._store.engine
        self.dialect = self.engine.dialect
        try:
            self._create_tables()
        except sa.exc.DBAPIError as exc:
            self.dispose()
            reason = (str(exc.orig).strip().splitlines() or [type(exc.orig).__name__])[0]
            raise KandevDqError(
                f"records database {self.shown}: cannot create its tables: {redact(reason)}"
            ) from None

    def dispose(self) -> None:
        self._store.dispose()

    def __enter__(self) -> Records:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()

    def _create_tables(self) -> None:
        """Idempotent: concurrent first opens may race on CREATE TABLE; the loser retries."""
        for attempt in range(3):
            try:
                with self.engine.begin() as conn:
                    metadata.create_all(conn, checkfirst=True)
                    _add_what_is_missing(conn)
                break
            except sa.exc.DBAPIError:
                if attempt == 2:
                    raise
        with self.engine.begin() as conn:
            conn.execute(
                insert_if_absent(self.dialect, schema_versions, ["version"]),
                {"version": SCHEMA_VERSION, "applied_at": now_text()},
            )
            newest = conn.execute(sa.select(sa.func.max(schema_versions.c.version))).scalar()
        if newest and newest > SCHEMA_VERSION:
            raise KandevDqError(
                f"records database {self.shown} has schema version {newest}, newer than this "
                f"kandev-dq's {SCHEMA_VERSION}: upgrade kandev-dq"
            )

    def prune(
        self, keep_days: int, now: dt.datetime | None = None, *, dry_run: bool = False
    ) -> Pruned:
        """Drop validation results and run records older than ``keep_days`` (``dry_run``: only
        count them); never a ledger row, a baseline or an accept (write-once needs them
        forever, AC-24), and never the runs :func:`_kept_runs` names, nor their results. The
        counts include what is kept, so a reader sees what remains."""
        if keep_days < 0:
            raise KandevDqError(f"--keep-days must be 0 or more, not {keep_days}")
        cutoff = now_text((now or dt.datetime.now(dt.UTC)) - dt.timedelta(days=keep_days))
        with self.engine.begin() as conn:
            kept = _kept_runs(conn)
            old_results = [results.c.stored_at < cutoff]
            old_runs = [runs.c.run_time < cutoff]
            if kept:
                kept_results = sa.tuple_(results.c.run_name, results.c.run_key).in_(kept)
                old_results.append(sa.or_(results.c.run_key.is_(None), ~kept_results))
                old_runs.append(~sa.tuple_(runs.c.run_name, runs.c.run_key).in_(kept))

            def count(table: sa.Table, *where) -> int:
                query = sa.select(sa.func.count()).select_from(table).where(*where)
                return conn.execute(query).scalar()

            dropped_results, dropped_runs = count(results, *old_results), count(runs, *old_runs)
            dropped_keys = []
            if not dry_run:
                dropped_keys = [
                    tuple(json.loads(key))
                    for key in conn.scalars(sa.select(results.c.result_key).where(*old_results))
                ]
                conn.execute(results.delete().where(*old_results))
                conn.execute(runs.delete().where(*old_runs))
            total_results, total_runs = count(results), count(runs)
        if dry_run:
            total_results, total_runs = total_results - dropped_results, total_runs - dropped_runs
        return Pruned(
            cutoff,
            dropped_results,
            dropped_runs,
            total_results,
            total_runs,
            dry_run,
            keep_days,
            dropped_keys,
        )


def _kept_runs(conn: sa.Connection) -> list[tuple[str, str]]:
    """(run name, run key) of the runs a prune keeps, however old: the newest finished run of
    each run name (one checkpoint on one store), which alerts on change compare the next run
    with (:mod:`kandev_dq.records.changes`: without it a standing failure alerts again as new),
    and each unfinished run after it, which may still be running. An unfinished run before
    it was interrupted, and goes like any other."""
    newest = dict(
        conn.execute(
            sa.select(runs.c.run_name, sa.func.max(runs.c.run_key))
            .where(runs.c.finished.is_(True))
            .group_by(runs.c.run_name)
        ).all()
    )
    unfinished = conn.execute(
        sa.select(runs.c.run_name, runs.c.run_key).where(runs.c.finished.is_(False))
    ).all()
    running = [(name, key) for name, key in unfinished if key > newest.get(name, "")]
    return [*newest.items(), *running]


def _add_what_is_missing(conn: sa.Connection) -> None:
    """The columns (each nullable) and indexes a records database made by an older kandev-dq
    lacks."""
    inspector = sa.inspect(conn)
    for table in metadata.sorted_tables:
        columns = {column["name"] for column in inspector.get_columns(table.name)}
        indexes = {index["name"] for index in inspector.get_indexes(table.name)}
        for column in (c for c in table.columns if c.name not in columns):
            kind = column.type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}"))
        for index in (i for i in table.indexes if i.name not in indexes):
            index.create(conn)


@dataclass
class Pruned:
    cutoff: str
    results: int
    runs: int
    #: What remains (would remain, on a dry run) after the prune.
    kept_results: int = 0
    kept_runs: int = 0
    dry_run: bool = False
    keep_days: int | None = None
    #: The keys of the results dropped: their data docs pages go too.
    result_keys: list[tuple[str, ...]] = field(default_factory=list)

    def said(self, records: str) -> str:
        """The one line ``records prune`` and a pruning ``check`` say."""
        verb = "would drop" if self.dry_run else "dropped"
        return (
            f"{'dry run on' if self.dry_run else 'pruned'} {records}: {verb} "
            f"{self.results} validation result(s) and {self.runs} run record(s) from "
            f"before {self.cutoff}; {self.kept_results} result(s) and {self.kept_runs} "
            "run record(s) remain; the key ledger is kept whole"
        )
