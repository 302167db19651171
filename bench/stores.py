"""Bench stores: one generated store per dialect and scale, and identical copies of it.

SQLite stores are files under the output folder, copied file by file. PostgreSQL stores are
databases the bench creates on the server (``KANDEV_BENCH_POSTGRES_URL``, else
``KANDEV_TEST_POSTGRES_URL``), copied with ``CREATE DATABASE … TEMPLATE …`` and all dropped at
the end. Copies are made outside every timed section.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from kandev_dq.lab import sample
from kandev_dq.store import sqlite_driver

POSTGRES_ENV = ("KANDEV_BENCH_POSTGRES_URL", "KANDEV_TEST_POSTGRES_URL")


def postgres_server() -> URL | None:
    for name in POSTGRES_ENV:
        value = os.environ.get(name)
        if value:
            return make_url(value).set(drivername="postgresql+psycopg")
    return None


@dataclass
class Copy:
    """One store: the target kandev-dq takes (a path or a URL) and a SQLAlchemy URL."""

    dialect: str
    target: str
    url: URL

    def engine(self, **kw) -> sa.Engine:
        # The SQLite library kandev-dq reads with: the floor is measured on the same engine.
        if self.dialect == "sqlite":
            return sqlite_driver.create_engine(self.url, **kw)
        return sa.create_engine(self.url, **kw)


@dataclass
class Stores:
    """Creates, copies and finally removes every store of one bench run."""

    folder: Path
    server: URL | None
    prefix: str = field(default_factory=lambda: f"kdq_bench_{uuid.uuid4().hex[:8]}")
    _databases: list[str] = field(default_factory=list)
    _files: list[Path] = field(default_factory=list)

    def _admin(self) -> sa.Engine:
        assert self.server is not None
        return sa.create_engine(self.server, isolation_level="AUTOCOMMIT")

    def _database(self, name: str, template: str | None = None) -> Copy:
        admin = self._admin()
        try:
            with admin.connect() as conn:
                clause = f' TEMPLATE "{template}"' if template else ""
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"{clause}')
        finally:
            admin.dispose()
        self._databases.append(name)
        url = self.server.set(database=name)
        return Copy("postgresql", url.render_as_string(hide_password=False), url)

    def _file(self, name: str) -> Copy:
        path = self.folder / f"{name}.db"
        path.unlink(missing_ok=True)
        self._files.append(path)
        return Copy("sqlite", str(path), URL.create("sqlite", database=str(path)))

    def generate(self, dialect: str, scale: int) -> tuple[Copy, sample.SampleSummary]:
        """A store predating the backfill: history, an empty amended table, no keys."""
        store = self._new(dialect, f"{self.prefix}_{scale}")
        engine = store.engine()
        try:
            sample.create_store(engine, subagents="amended")
            summary = sample.generate(engine, scale=scale, seed=0)
            self.analyze(store, engine)
        finally:
            engine.dispose()
        return store, summary

    def empty(self, dialect: str, label: str) -> Copy:
        """A new empty store (a database on the server, or a file not yet created)."""
        return self._new(dialect, f"{self.prefix}_{label}_{uuid.uuid4().hex[:6]}")

    def _new(self, dialect: str, name: str) -> Copy:
        return self._database(name) if dialect == "postgresql" else self._file(name)

    def copy(self, source: Copy, label: str) -> Copy:
        """An identical copy of ``source`` (no connection to it may be open)."""
        name = f"{self.prefix}_{label}_{uuid.uuid4().hex[:6]}"
        if source.dialect == "postgresql":
            return self._database(name, template=source.url.database)
        target = self._file(name)
        shutil.copyfile(source.target, target.target)
        return target

    @staticmethod
    def analyze(store: Copy, engine: sa.Engine | None = None) -> None:
        """PostgreSQL statistics, as autovacuum would have them (SQLite: left as Kandev has it)."""
        if store.dialect != "postgresql":
            return
        own = engine is None
        engine = engine or store.engine()
        try:
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("ANALYZE")
        finally:
            if own:
                engine.dispose()

    def drop(self, store: Copy) -> None:
        if store.dialect == "postgresql":
            admin = self._admin()
            try:
                with admin.connect() as conn:
                    conn.exec_driver_sql(
                        f'DROP DATABASE IF EXISTS "{store.url.database}" WITH (FORCE)'
                    )
            finally:
                admin.dispose()
            if store.url.database in self._databases:
                self._databases.remove(store.url.database)
        else:
            path = Path(store.target)
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            if path in self._files:
                self._files.remove(path)

    def cleanup(self) -> None:
        for name in list(self._databases):
            self.drop(Copy("postgresql", "", self.server.set(database=name)))
        for path in list(self._files):
            self.drop(Copy("sqlite", str(path), URL.create("sqlite", database=str(path))))
