"""The run records: the key ledger, the run register and the validation results, in a database.

Scheduled checks often run on machines that start empty (a CI job, a CronJob, a container). The
memory write-once needs (AC-24) and the run history therefore live in a records database that
outlives the machine: by default a SQLite file in the project's ``uncommitted/``, for teams any
PostgreSQL database. Which one (:func:`records_url`): ``--records URL``, else
``$KANDEV_DQ_RECORDS_URL``, else the ``url`` of the validation results store's backend in
``great_expectations.yml``, else ``uncommitted/records.db``.

* The records database is never the store under validation (:func:`refuse_the_store`), and one
  that cannot be opened is a one-line exit 2 naming it without credentials: a run never passes
  with write-once silently skipped.
* Its tables are created by kandev-dq itself, idempotently, and carry a schema version.
* The key ledger is append-only: ``UNIQUE(store_identity, key_name)`` and insert-if-absent, then
  the first value is read back, so concurrent checks lose no first sighting and all agree.
  A legitimate reset (a restored backup) is an *accept*: a new row with its time, user and
  reason, never an update or a delete of the first sighting.
* Each store's write-once *baseline* (the run that first recorded it) is kept, so a first run
  says that rewrites before it cannot be seen.
* Validation results are rows GX reads and writes through :class:`RecordsStoreBackend`.
* ``records prune`` drops old results and run records, never ledger rows, baselines or accepts.
"""

from __future__ import annotations

import datetime as dt
import getpass
import hashlib
import itertools
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL

from kandev_dq.errors import KandevDqError, StoreError
from kandev_dq.sql.dialect import insert_if_absent
from kandev_dq.store.access import (
    database_identity,
    open_store,
    redact,
    resolve_url,
    shown_store,
    sqlite_file,
    sqlite_path,
)

logger = logging.getLogger(__name__)

#: The environment variable naming the records database (never set by kandev-dq itself).
RECORDS_VARIABLE = "KANDEV_DQ_RECORDS_URL"
DEFAULT_RECORDS = Path("uncommitted") / "records.db"
#: The key ledger kept as a JSON file before the records database: imported on first use.
JSON_LEDGER = Path("uncommitted") / "key_ledger.json"
SCHEMA_VERSION = 1
#: Where a first sighting came from.
FROM_RUN = "run"
FROM_JSON = "imported key_ledger.json"
#: Results of one suite read at a time when looking for a store's newest.
SUITE_PAGE = 50

metadata = sa.MetaData()
schema_versions = sa.Table(
    "kandev_dq_schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.Text, nullable=False),
)
key_ledger = sa.Table(
    "kandev_dq_key_ledger",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("store_identity", sa.Text, nullable=False),
    sa.Column("key_name", sa.Text, nullable=False),
    sa.Column("first_value", sa.Text, nullable=False),
    sa.Column("recorded_at", sa.Text, nullable=False),
    sa.Column("run_name", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=False),
    sa.UniqueConstraint("store_identity", "key_name", name="kandev_dq_key_ledger_first"),
)
baselines = sa.Table(
    "kandev_dq_baselines",
    metadata,
    sa.Column("store_identity", sa.Text, primary_key=True),
    sa.Column("taken_at", sa.Text, nullable=False),
    sa.Column("run_name", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=False),
)
ledger_accepts = sa.Table(
    "kandev_dq_ledger_accepts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("store_identity", sa.Text, nullable=False, index=True),
    sa.Column("key_name", sa.Text, nullable=False),
    sa.Column("accepted_value", sa.Text, nullable=True),  # NULL: the key's absence accepted
    sa.Column("replaced_value", sa.Text, nullable=True),
    sa.Column("accepted_at", sa.Text, nullable=False),
    sa.Column("accepted_by", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
)
runs = sa.Table(
    "kandev_dq_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_name", sa.Text, nullable=False),
    sa.Column("run_key", sa.Text, nullable=False),  # the run time as GX writes it in keys
    sa.Column("run_time", sa.Text, nullable=False, index=True),  # RFC 3339, UTC
    sa.Column("checkpoint", sa.Text, nullable=False),
    sa.Column("store_identity", sa.Text, nullable=False, index=True),
    sa.Column("store", sa.Text, nullable=False),
    sa.Column("dialect", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=True),
    sa.Column("amended", sa.Boolean, nullable=True),
    sa.Column("keys", sa.Text, nullable=False),  # JSON
    sa.Column("finished", sa.Boolean, nullable=False, default=False),
    sa.Column("success", sa.Boolean, nullable=True),
    sa.Column("counts", sa.Text, nullable=True),  # JSON: failed rules by severity, passed
    sa.Column("failed_rules", sa.Text, nullable=True),  # JSON
    sa.Column("duration_s", sa.Float, nullable=True),
    sa.UniqueConstraint("run_name", "run_key", name="kandev_dq_runs_name_key"),
    # Each read a run makes is bounded, however long the history (the register's by run key,
    # a store's newest runs): a run every 5 minutes is 2,000 records a week.
    sa.Index("kandev_dq_runs_run_key", "run_key"),
    sa.Index("kandev_dq_runs_store_time", "store_identity", "run_time", "id"),
)
results = sa.Table(
    "kandev_dq_validation_results",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("result_key", sa.Text, nullable=False, unique=True),  # GX's key tuple, as JSON
    sa.Column("suite", sa.Text, nullable=True),
    sa.Column("run_name", sa.Text, nullable=True),
    sa.Column("run_key", sa.Text, nullable=True, index=True),
    sa.Column("stored_at", sa.Text, nullable=False, index=True),
    sa.Column("value", sa.Text, nullable=False),
    # A run's results, and a suite's newest result, read through an index.
    sa.Index("kandev_dq_results_run", "run_name", "run_key"),
    sa.Index("kandev_dq_results_suite_run_key", "suite", "run_key"),
)
imports = sa.Table(
    "kandev_dq_imports",
    metadata,
    sa.Column("source", sa.Text, primary_key=True),  # what was imported, by content digest
    sa.Column("imported_at", sa.Text, nullable=False),
)


def now_text(moment: dt.datetime | None = None) -> str:
    """RFC 3339 in UTC with microseconds and ``Z``: sorts as text on both dialects."""
    moment = moment or dt.datetime.now(dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


# --- choosing and opening the records database ----------------------------------------------------


def configured_url(root: Path) -> str | None:
    """The ``url`` the project's yml gives the results store's backend, if any (read without
    GX, as :func:`kandev_dq.run.project.refuse_project_code` reads the yml)."""
    from ruamel.yaml import YAML, YAMLError

    yml = Path(root) / "great_expectations.yml"
    try:
        config = YAML(typ="safe").load(yml.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError):
        return None
    if not isinstance(config, dict):
        return None
    name = config.get("validation_results_store_name", "validation_results_store")
    store = (config.get("stores") or {}).get(name) or {}
    backend = store.get("store_backend") if isinstance(store, dict) else None
    url = backend.get("url") if isinstance(backend, dict) else None
    return str(url) if url else None


def records_url(root: Path, given: str | None = None, *, allow_project_code: bool = False) -> str:
    """The records database of a project: ``given`` (``--records``), else
    ``$KANDEV_DQ_RECORDS_URL``, else the yml's setting, else ``uncommitted/records.db``.

    A project is data (docs/reliability.md, 3a): its yml may keep records only in a SQLite file
    inside its own folder. Anything else (a server the project's author chose would receive
    the store's samples) needs ``--allow-project-code``, or the user's own ``--records``.

    A SQLite file's folder is created only inside the project (``uncommitted/``): elsewhere a
    missing folder, or a file where a folder should be, is a one-line error naming the records
    database, with nothing created."""
    return _refuse_missing_folder(root, _chosen_records(root, given, allow_project_code))


def _chosen_records(root: Path, given: str | None, allow_project_code: bool) -> str:
    for candidate in (given, os.environ.get(RECORDS_VARIABLE)):
        if candidate:
            return candidate
    configured = configured_url(root)
    if configured:
        if not allow_project_code and not _inside(root, configured):
            raise KandevDqError(
                f"{Path(root) / 'great_expectations.yml'}: the results store's url names a "
                f"records database outside the project folder ({shown_records(configured)}); "
                f"pass --records or set {RECORDS_VARIABLE} yourself, or pass "
                "--allow-project-code to use it"
            )
        if sqlite_path(configured) is not None:  # a SQLite path, relative to the project
            return str((Path(root) / configured).resolve())
        return configured
    return str((Path(root) / DEFAULT_RECORDS).resolve())


def _refuse_missing_folder(root: Path, records: str) -> str:
    """``records``, unless it is a SQLite file whose folder cannot hold it: a file stands on
    its path, or the folder is missing outside the project (kandev-dq creates no folder
    it was not asked for)."""
    try:
        url = resolve_url(records)
    except KandevDqError:
        return records  # not a database URL: opening the records database says so
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return records
    folder = sqlite_file(url).parent
    existing = next(part for part in (folder, *folder.parents) if part.exists())
    if not existing.is_dir():
        raise KandevDqError(
            f"records database {shown_records(records)}: {existing} is a file, not a folder"
        )
    if existing != folder and not folder.is_relative_to(Path(root).resolve()):
        raise KandevDqError(
            f"records database {shown_records(records)}: the folder {folder} does not exist; "
            "create it first, or name a records database in a folder that exists"
        )
    return records


def _inside(root: Path, url: str) -> bool:
    """Whether ``url`` is a SQLite file inside the project folder ``root``."""
    target = str(Path(root) / url) if sqlite_path(url) is not None else url
    try:
        resolved = resolve_url(target)
    except KandevDqError:
        return False
    if resolved.get_backend_name() != "sqlite":
        return False
    return sqlite_file(resolved).is_relative_to(Path(root).resolve())


def same_database(a: URL, b: URL) -> bool:
    """Whether two URLs name one database: spelled alike (the same SQLite path, or the same
    PostgreSQL database on the same host and port, whatever the user, options or schema), or
    found to be one (:func:`~kandev_dq.store.access.database_identity`: a hard link, another
    spelling of the server's address)."""
    if a.get_backend_name() != b.get_backend_name():
        return False
    if a.get_backend_name() == "sqlite":
        if sqlite_file(a) == sqlite_file(b):
            return True
    else:
        host = lambda u: (u.host or "localhost").lower()  # noqa: E731
        if (host(a), a.port or 5432, a.database) == (host(b), b.port or 5432, b.database):
            return True
    found, other = database_identity(a), database_identity(b)
    return found is not None and other is not None and found.same_as(other)


def refuse_the_store(records: str, store: URL) -> None:
    """Exit 2 when the records database is the store under validation: validation never
    writes to the store it validates."""
    if same_database(resolve_url(records), store):
        raise KandevDqError(
            f"the records database {shown_records(records)} is the store under validation: "
            f"name another one with --records or {RECORDS_VARIABLE}"
        )


def shown_records(records: str) -> str:
    """The records database as outputs name it: no user, no password."""
    try:
        return shown_store(resolve_url(records))
    except KandevDqError:
        return redact(records)


class Records:
    """One open records database (tables created and versioned on open)."""

    def __init__(self, url: str):
        self.url = url
        self.shown = shown_records(url)
        resolved = resolve_url(url)
        if resolved.get_backend_name() == "sqlite":
            folder = sqlite_file(resolved).parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise KandevDqError(
                    f"records database {self.shown}: cannot create the folder {folder}: "
                    f"{exc.strerror or type(exc).__name__}"
                ) from None
        try:
            self._store = open_store(url, read_only=False, must_exist=False, require_kandev=False)
        except StoreError as exc:
            raise KandevDqError(f"records database: {exc}") from None
        self.engine = self._store.engine
        self.dialect = self.engine.dialect.name
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
                    # A records database made by an older kandev-dq gets the newer indexes.
                    _create_missing_indexes(conn)
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

    # --- the key ledger ---------------------------------------------------------------------------

    def record_first_sightings(
        self, identity: str, keys: dict[str, str | None], run_name: str, source: str = FROM_RUN
    ) -> None:
        """Insert each present key's value unless a first value is already recorded."""
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
            return
        statement = insert_if_absent(self.dialect, key_ledger, ["store_identity", "key_name"])
        with self.engine.begin() as conn:
            for row in rows:  # one at a time: each is decided by the database alone
                conn.execute(statement, row)

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

    # --- the run register -------------------------------------------------------------------------

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

    # --- validation results (through RecordsStoreBackend) -----------------------------------------

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

    # --- retention --------------------------------------------------------------------------------

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
    with (:mod:`kandev_dq.run.changes`: without it a standing failure alerts again as new),
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


def _create_missing_indexes(conn: sa.Connection) -> None:
    inspector = sa.inspect(conn)
    for table in metadata.sorted_tables:
        present = {index["name"] for index in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in present:
                index.create(conn)


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


def _result_parts(key: tuple[str, ...]) -> tuple[str | None, str | None, str | None]:
    """(suite, run name, run key) of a GX validation result key
    ``(*suite parts, run name, run time, batch)``; None for GX's own backend-id key."""
    if len(key) < 4:
        return None, None, None
    return ".".join(key[:-3]), key[-3], key[-2]


def _run_dict(row) -> dict[str, Any]:
    record = dict(row._mapping)
    record["keys"] = json.loads(record["keys"] or "{}")
    record["counts"] = json.loads(record["counts"]) if record["counts"] else None
    record["failed_rules"] = json.loads(record["failed_rules"]) if record["failed_rules"] else []
    record.pop("id", None)
    return record
