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
from urllib.parse import quote, unquote

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from kandev_dq.errors import StoreError
from kandev_dq.store import sqlite_driver
from kandev_dq.store.sidefiles import SideFiles
from kandev_dq.store.target import (  # noqa: F401 - re-exported: the store's names, one place
    APPLICATION_NAME,
    BUSY_TIMEOUT_S,
    CONNECT_TIMEOUT_S,
    DEFAULT_STORE,
    READ_ONLY_OPTION,
    STORE_URL_VARIABLE,
    chosen_store,
    connection_reason,
    is_conninfo,
    redact,
    refuse_missing_kandev_tables,
    refuse_unusable_sqlite_file,
    shown_sqlite,
    sqlite_path,
    without_secrets,
)


def resolve_url(target: str) -> URL:
    """A SQLAlchemy URL for a URL or a SQLite file path (``postgresql://`` uses psycopg 3)."""
    file = sqlite_path(target)
    if file is not None:
        return URL.create("sqlite", database=str(file))
    if is_conninfo(target):
        return conninfo_url(target)
    try:
        url = make_url(target)
    except (sa.exc.ArgumentError, ValueError):  # ValueError: e.g. a port that is not a number
        raise StoreError(f"not a database URL: {redact(target)}") from None
    if "@" in (url.host or ""):  # the password holds an unencoded @: the rest reads as the host
        raise StoreError(f"not a database URL: {redact(target)} (percent-encode the password)")
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(
            f"unsupported database {url.get_backend_name()!r}: use SQLite or PostgreSQL"
        )
    return url


#: The libpq parameters a SQLAlchemy URL holds in its own fields; the rest go to its query.
_URL_FIELDS = {"user": "username", "password": "password", "host": "host", "dbname": "database"}


def conninfo_url(conninfo: str) -> URL:
    """The PostgreSQL URL of a libpq ``key=value`` connection string, read by libpq itself;
    one libpq cannot read is refused without being shown (it may hold a password)."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}
    except ProgrammingError:
        raise StoreError(
            "not a database URL: a libpq key=value connection string that libpq cannot read "
            "(not shown: it may hold a password)"
        ) from None
    fields: dict[str, Any] = {
        field: params.pop(name) for name, field in _URL_FIELDS.items() if name in params
    }
    if params.get("port", "").isdigit() and "," not in fields.get("host", ""):
        fields["port"] = int(params.pop("port"))
    return URL.create("postgresql+psycopg", **fields, query=params)


def sqlite_file(url: URL) -> Path:
    """The absolute path of a SQLite store (a ``file:`` URI database included)."""
    return Path(unquote((url.database or "").removeprefix("file:"))).resolve()


def shown_store(url: URL) -> str:
    """How every command, its JSON and the data docs name a store: a URL ``--store`` accepts,
    without user or password; a SQLite file by its absolute path (``sqlite:////srv/k.db``)."""
    if url.get_backend_name() == "sqlite":
        return shown_sqlite(sqlite_file(url))
    bare = without_secrets(url)._replace(drivername="postgresql", username=None)
    return bare.render_as_string(hide_password=False)


def with_pg_option(url: URL, option: str) -> URL:
    """``url`` with a libpq ``-c`` option added to the ``options`` it already carries (e.g. a
    search_path), which are kept."""
    options = " ".join(o for o in (url.query.get("options", ""), option) if o)
    return url.update_query_dict({"options": options})


@dataclass
class Store:
    """An open Kandev store."""

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
        """The URL with no password: what GX's data source is configured with."""
        return without_secrets(self.url).render_as_string(hide_password=False)

    @property
    def shown(self) -> str:
        """The store as every output names it (:func:`shown_store`)."""
        return shown_store(self.url)

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


def _postgres_connector(url: URL, read_only: bool) -> Callable[[], Any]:
    """What SQLAlchemy would connect with, resolved once through the dialect's public API."""
    if read_only:
        url = with_pg_option(url, READ_ONLY_OPTION)
    dialect = sa.create_engine(url).dialect  # creating an engine does not connect
    cargs, cparams = dialect.create_connect_args(url)
    cparams.update(connect_timeout=CONNECT_TIMEOUT_S, application_name=APPLICATION_NAME)

    def connect() -> Any:
        return dialect.connect(*cargs, **cparams)

    return connect


def open_store(
    target: str | None,
    *,
    read_only: bool = True,
    must_exist: bool = True,
    require_kandev: bool = True,
) -> Store:
    """Open and probe a store; raise :class:`StoreError` with a one-line reason."""
    url = resolve_url(chosen_store(target))
    side_files = None
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            raise StoreError("an in-memory SQLite database is not a Kandev store")
        if read_only:
            side_files = SideFiles.before_open(Path(url.database))
        connect = _sqlite_connector(url.database, read_only, must_exist)
        engine = sa.create_engine("sqlite://", module=sqlite_driver.dbapi, creator=connect)
    else:
        connect = _postgres_connector(url, read_only)
        engine = sa.create_engine(url, creator=connect, pool_pre_ping=True)
    store = Store(
        url=url, engine=engine, read_only=read_only, connect=connect, side_files=side_files
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
    store = open_store(gx_engine.url.render_as_string(hide_password=False), read_only=True)
    try:
        return facts_for(store.engine, family, compute)
    finally:
        store.dispose()


@dataclass(frozen=True)
class DatabaseIdentity:
    """What makes two URLs one database, asked of the file system or of the server, never
    taken from how the URL is spelled (:func:`database_identity`)."""

    #: SQLite: the file's device and inode. PostgreSQL: the port the server listens on and
    #: the database's name.
    place: tuple
    #: PostgreSQL: the cluster's system identifier, where the role may read it.
    system: str | None = None
    #: PostgreSQL: when the server started (seconds since the epoch, to the microsecond).
    started: str | None = None

    def same_as(self, other: DatabaseIdentity) -> bool:
        """One database: one place, on one cluster (by its system identifier when both
        sessions may read it, else by the server's start time, which every role may read)."""
        if self.place != other.place:
            return False
        if self.system is not None and other.system is not None:
            return self.system == other.system
        return self.started == other.started


def database_identity(url: URL) -> DatabaseIdentity | None:
    """The identity of the database ``url`` names; None when it cannot be told (no such file,
    no answer). SQLite: a hard link or another path to the file is the same database.
    PostgreSQL: ``localhost``, ``127.0.0.1`` and ``[::ffff:127.0.0.1]`` are one server. Only a
    read-only session is opened, and it runs these reads alone."""
    if url.get_backend_name() == "sqlite":
        try:
            found = sqlite_file(url).stat()
        except OSError:
            return None
        return DatabaseIdentity(("sqlite", found.st_dev, found.st_ino))
    import psycopg

    try:
        conn = _postgres_connector(url, read_only=True)()
    except (psycopg.Error, sa.exc.ArgumentError):
        return None
    try:
        port, name, started = conn.execute(
            "SELECT current_setting('port'), current_database(), "
            "extract(epoch FROM pg_postmaster_start_time())::text"
        ).fetchone()
        try:
            cluster = conn.execute("SELECT system_identifier::text FROM pg_control_system()")
            system = cluster.fetchone()[0]
        except psycopg.errors.InsufficientPrivilege:  # revoked from PUBLIC on some servers
            system = None
        return DatabaseIdentity(("postgresql", port, name), system, started)
    except psycopg.Error:
        return None
    finally:
        conn.close()


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
