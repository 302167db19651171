"""Opening a Kandev store: SQLAlchemy URLs, ``postgresql://`` URLs, or a plain SQLite path.

Validation opens stores read-only (SQLite ``mode=ro``; PostgreSQL read-only transactions) and
reads every fact of a run inside one snapshot. Anything that prevents a run is a
:class:`StoreError`: one line, exit code 2, never a password.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.engine import URL

from kandev_dq.errors import StoreError
from kandev_dq.store import sqlite_driver
from kandev_dq.store.reference import (
    StoreRef,
    postgres_connector,
    sqlite_file,
    store_ref,
)
from kandev_dq.store.sidefiles import SideFiles
from kandev_dq.store.target import (
    BUSY_TIMEOUT_S,
    connection_reason,
    refuse_missing_kandev_tables,
    refuse_unusable_sqlite_file,
    without_secrets,
)


@dataclass
class Store:
    """An open Kandev store."""

    #: The store as the command named it (:class:`~kandev_dq.store.reference.StoreRef`).
    ref: StoreRef
    url: URL
    engine: sa.Engine
    read_only: bool
    #: Opens one more DB-API connection exactly as :attr:`engine` does (read-only when the store
    #: is): how another engine, GX's, reads the store without ever being given its password.
    connect: Callable[[], Any]
    #: A read-only SQLite open: the WAL side files it may create, put back on dispose.
    side_files: SideFiles | None = None

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def engine_options(self) -> dict[str, Any]:
        """What another engine (GX's) is created with to read the store as :attr:`engine`
        does: its connections, and on SQLite the one SQLite library (:mod:`.sqlite_driver`)."""
        if self.dialect == "sqlite":
            return {"creator": self.connect, "module": sqlite_driver.dbapi}
        return {"creator": self.connect}

    @property
    def display_url(self) -> str:
        """The URL with no password, its user and driver kept: what GX's data source is
        configured with (GX connects through :attr:`connect`). Not a display: outputs name the
        store by :attr:`shown`."""
        return without_secrets(self.url).render_as_string(hide_password=False)

    @property
    def shown(self) -> str:
        """The store as every output names it (:attr:`StoreRef.shown`)."""
        return self.ref.shown

    def snapshot(self):
        """One consistent read: PostgreSQL REPEATABLE READ (read-only), SQLite one read txn."""
        from kandev_dq.store.snapshot import read_snapshot

        return read_snapshot(self.engine)

    def has_table(self, name: str) -> bool:
        return sa.inspect(self.engine).has_table(name)

    def dispose(self) -> None:
        self.engine.dispose()
        if self.side_files is not None:
            self.side_files.restore()


def _sqlite_connector(path: str, read_only: bool, must_exist: bool) -> Callable[[], Any]:
    file = Path(path)
    refuse_unusable_sqlite_file(file, must_exist=must_exist)
    mode = "ro" if read_only else "rwc"
    uri = f"file:{quote(str(file))}?mode={mode}"

    def connect() -> Any:
        conn = sqlite_driver.connect(
            uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA foreign_keys = ON")
        sqlite_driver.tolerate_bad_utf8(conn)
        return conn

    return connect


def open_store(
    target: StoreRef | str,
    *,
    read_only: bool = True,
    must_exist: bool = True,
    require_kandev: bool = True,
) -> Store:
    """Open and probe a store (a reference, or a URL or path read into one); raise
    :class:`StoreError` with a one-line reason."""
    ref = store_ref(target)
    url = ref.url
    side_files = None
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            raise StoreError("an in-memory SQLite database is not a Kandev store")
        if read_only:
            side_files = SideFiles.before_open(Path(url.database))
        connect = _sqlite_connector(url.database, read_only, must_exist)
        engine = sa.create_engine("sqlite://", module=sqlite_driver.dbapi, creator=connect)
    else:
        connect = postgres_connector(url, read_only)
        engine = sa.create_engine(url, creator=connect, pool_pre_ping=True)
    store = Store(
        ref=ref, url=url, engine=engine, read_only=read_only, connect=connect, side_files=side_files
    )
    try:
        with engine.connect() as conn:
            names = set(sa.inspect(conn).get_table_names())
    except sa.exc.DBAPIError as exc:
        store.dispose()
        raise StoreError(_connection_reason(store, exc)) from None
    if require_kandev:
        try:
            refuse_missing_kandev_tables(store.shown, names)
        except StoreError:
            store.dispose()
            raise
    return store


def gx_facts(gx_engine: sa.Engine, family: str, compute: Callable[[sa.Connection], Any]) -> Any:
    """The facts a GX metric asks of GX's engine: from the run's pinned snapshot when kandev-dq
    pinned one (``kandev-dq check``); else, on a checkpoint run through GX's own API, from
    kandev-dq's own read-only connection to the same URL (SQLite ``mode=ro``, PostgreSQL
    read-only transactions), opened for this family and closed after it: GX's engine connects
    read-write, and validation never writes to the store."""
    from kandev_dq.store.snapshot import facts_for, pin_of

    if pin_of(gx_engine) is not None:
        return facts_for(gx_engine, family, compute)
    store = open_store(gx_engine.url, read_only=True)
    try:
        return facts_for(store.engine, family, compute)
    finally:
        store.dispose()


def require_writable(store: Store) -> None:
    """Refuse (exit 2) a store that cannot take a write now: a read-only file or server, or a
    SQLite file another process holds locked. Takes and releases the write lock; writes nothing.
    """
    try:
        with store.engine.connect() as conn:
            if store.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, waited for as any write
                try:  # a write of the value already there, rolled back: fails on a read-only file
                    version = conn.exec_driver_sql("PRAGMA user_version").scalar()
                    conn.exec_driver_sql(f"PRAGMA user_version = {int(version)}")
                finally:
                    conn.exec_driver_sql("ROLLBACK")
                return
            if conn.exec_driver_sql("SHOW transaction_read_only").scalar() == "on":
                raise StoreError(
                    f"cannot write to {store.shown}: the server or the user's session is "
                    "read-only (a standby, or default_transaction_read_only)"
                )
    except sa.exc.DBAPIError as exc:
        lowered = str(exc.orig).lower()
        if "readonly" in lowered or "read-only" in lowered:
            reason = "the file or its folder is read-only"
        elif "locked" in lowered or "busy" in lowered:
            reason = f"another process holds it locked (waited {BUSY_TIMEOUT_S:.0f} s)"
        else:
            raise StoreError(_connection_reason(store, exc)) from None
        raise StoreError(f"cannot write to {store.shown}: {reason}; nothing was changed") from None


def _connection_reason(store: Store, exc: sa.exc.DBAPIError) -> str:
    journal = Path(f"{sqlite_file(store.url)}-journal") if store.dialect == "sqlite" else None
    return connection_reason(store.shown, exc.orig, store.url.username, store.url.password, journal)
