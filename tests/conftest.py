"""The store harness: every dialect-sensitive test runs on SQLite and on real PostgreSQL.

PostgreSQL comes from ``KANDEV_TEST_POSTGRES_URL`` (a server URL whose user may create
databases). Each test module gets a fresh database, each test a fresh schema in it. With
``CI=true`` an unset or unreachable PostgreSQL fails the run; elsewhere those cases skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from kandev_dq.contract import tables as schema
from kandev_dq.store import sqlite_driver

PG_ENV = "KANDEV_TEST_POSTGRES_URL"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@dataclass
class StoreTarget:
    """A fresh, empty database for one test: its URL and a read-write engine."""

    dialect: str
    url: str
    engine: sa.Engine

    def create_base(self, *, subagents: str | None = "amended") -> None:
        """Create Kandev's base tables, plus the subagents table in the given shape."""
        with self.engine.begin() as conn:
            schema.create_base_tables(conn)
            if subagents:
                schema.create_subagents_table(conn, amended=subagents == "amended")


def _pg_unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"PostgreSQL is required when CI=true: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL not available ({reason})")


@contextmanager
def fresh_pg_database(prefix: str) -> Iterator[URL]:
    """A new database on the test server, dropped afterwards; without a server, the test is
    skipped (failed under CI=true)."""
    server = os.environ.get(PG_ENV)
    if not server:
        _pg_unavailable(f"{PG_ENV} is not set")
    admin_url = make_url(server).set(drivername="postgresql+psycopg")
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except sa.exc.OperationalError as exc:
        admin.dispose()
        _pg_unavailable(str(exc.orig).splitlines()[0])
    try:
        yield admin_url.set(database=name)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(scope="module")
def pg_database():
    """A fresh PostgreSQL database for this module, dropped afterwards."""
    with fresh_pg_database("kdq_test") as url:
        yield url


def _pg_target(pg_database) -> StoreTarget:
    schema_name = f"t_{uuid.uuid4().hex[:10]}"
    base = pg_database.render_as_string(hide_password=False)
    with sa.create_engine(base).begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema_name}"')
    url = f"{base}?options={quote(f'-csearch_path={schema_name}')}"
    return StoreTarget("postgresql", url, sa.create_engine(url))


def _sqlite_target(tmp_path) -> StoreTarget:
    path = tmp_path / "kandev.db"
    engine = sqlite_driver.create_engine(f"sqlite:///{path}")

    @sa.event.listens_for(engine, "connect")
    def _fk(dbapi_conn, _record):
        dbapi_conn.execute("PRAGMA foreign_keys = ON")

    return StoreTarget("sqlite", str(path), engine)


@pytest.fixture(scope="session")
def built_project(tmp_path_factory):
    """The GX project as the code defines it (suites, checkpoints), built once per worker."""
    from kandev_dq.project.files import build_project

    return build_project(tmp_path_factory.mktemp("gx") / "project")


@pytest.fixture(scope="session")
def gx_built_project(tmp_path_factory):
    """The same project written by GX itself (the reference ``kandev-dq init`` is held to)."""
    from tests.gxhelpers import build_project_through_gx

    return build_project_through_gx(tmp_path_factory.mktemp("gx-reference") / "project")


@pytest.fixture
def project(built_project, tmp_path):
    """A private copy of the built project for one test (its own ledger, results, docs)."""
    from kandev_dq.project.files import copy_project

    return copy_project(built_project, tmp_path / "project")


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path) -> StoreTarget:
    """An empty store on each dialect."""
    if request.param == "postgresql":
        made = _pg_target(request.getfixturevalue("pg_database"))
    else:
        made = _sqlite_target(tmp_path)
    yield made
    made.engine.dispose()


@pytest.fixture
def another_target(target, request, tmp_path) -> StoreTarget:
    """A second empty store on ``target``'s dialect (two stores checked side by side)."""
    if target.dialect == "postgresql":
        made = _pg_target(request.getfixturevalue("pg_database"))
    else:
        (tmp_path / "another").mkdir()
        made = _sqlite_target(tmp_path / "another")
    yield made
    made.engine.dispose()


@pytest.fixture
def sqlite_target(tmp_path) -> StoreTarget:
    """An empty SQLite store, for the SQLite-only cases (e.g. text storage forms)."""
    made = _sqlite_target(tmp_path)
    yield made
    made.engine.dispose()


@pytest.fixture
def pg_target(request) -> StoreTarget:
    """An empty PostgreSQL store, for the PostgreSQL-only cases (e.g. session time zones)."""
    made = _pg_target(request.getfixturevalue("pg_database"))
    yield made
    made.engine.dispose()
