"""A database named once: the store (or records database) a command works on, as one value.

A command reads its ``--store`` (or ``--records``) once, at its edge, into a
:class:`StoreRef`: the option as given, the kind of database, the SQLite file, the URL, the one
name every output shows it by, and the name the user gave the store (``--store-name``). Everything
after that (the refusals before GX, :func:`kandev_dq.store.access.open_store`, the
records-vs-store refusal, the run name, the key ledger) takes the reference and resolves nothing
again.

A store's name in the records database is what the store itself says it is, however the URL
spells it (:func:`identity_key`): the cluster's system identifier and the database on
PostgreSQL, the file's device and inode on SQLite; or the user's own name for it.

Importing SQLAlchemy takes a third of a second: a SQLite path and a plain PostgreSQL URL are
read here without it (the refusals of a missing file or an unreachable server come before it
loads, ``tests/test_cli_inputs.py``); any other URL, and :attr:`StoreRef.url`, load it lazily.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from kandev_dq.errors import StoreError
from kandev_dq.store.target import (
    APPLICATION_NAME,
    CONNECT_TIMEOUT_S,
    READ_ONLY_OPTION,
    connection_reason,
    is_conninfo,
    plain_postgres_shown,
    redact,
    refuse_unusable_sqlite_file,
    shown_sqlite,
    sqlite_path,
    without_secrets,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import sqlalchemy as sa
    from sqlalchemy.engine import URL

SQLITE = "sqlite"
POSTGRESQL = "postgresql"


@dataclass(frozen=True)
class StoreRef:
    """One database as a command named it, resolved once (:func:`store_ref`)."""

    #: The option as given (``--store``, ``$KANDEV_STORE_URL``, the default file): it may hold
    #: a password, so it is never shown (``repr`` leaves it out).
    given: str = field(repr=False)
    #: :data:`SQLITE` or :data:`POSTGRESQL`.
    kind: str
    #: The absolute SQLite file (None for PostgreSQL, and for SQLite's in-memory database).
    file: Path | None
    #: How every output, the JSON and the data docs name it (:func:`shown_store`).
    shown: str
    #: The user's own name for the store in the records database (``--store-name``,
    #: ``$KANDEV_DQ_STORE_NAME``), which keeps copies of one store apart; None: the store's
    #: identity names it (:func:`identity_key`).
    name: str | None = None

    def named(self, name: str | None) -> StoreRef:
        """This reference with the user's name for the store (None: named by its identity)."""
        if name is not None and not name.strip():
            raise StoreError("--store-name must not be empty")
        if name == self.name:
            return self
        named = replace(self, name=name)
        if "url" in self.__dict__:  # already read: kept, not read again
            named.__dict__["url"] = self.url
        return named

    @cached_property
    def url(self) -> URL:
        """The SQLAlchemy URL (``postgresql://`` uses psycopg 3); loads the SQL toolkit."""
        return resolve_url(self.given)

    @property
    def is_sqlite(self) -> bool:
        return self.kind == SQLITE

    @property
    def is_path(self) -> bool:
        """Named by a plain file path (not a ``sqlite://`` URL): a SQLite file the SQLite
        library alone can vet."""
        return sqlite_path(self.given) is not None

    @property
    def spelled_name(self) -> str:
        """How records written before stores were named by their identity name it: the URL as
        spelled, without credentials (a SQLite store as ``sqlite:/srv/k.db``). Read only to
        adopt those records (:meth:`kandev_dq.records.Records.adopt_spelled`)."""
        if self.is_sqlite:
            return "sqlite:" + self.shown.removeprefix("sqlite:///")
        return self.shown

    @property
    def connect_form(self) -> str:
        """The URL a command takes to reach this database again: the user kept (it may be
        needed to connect), never the password; a SQLite file by its absolute path."""
        if self.is_sqlite:
            return self.shown
        bare = without_secrets(self.url)._replace(drivername="postgresql")
        return bare.render_as_string(hide_password=False)

    def identity(self, *, read_only: bool) -> DatabaseIdentity | None:
        """What makes it one database, asked of the file system or the server through the
        session it is used with (``read_only``: as a store is read; else as the records database
        is written); None for a SQLite file not created yet (:func:`database_identity`)."""
        return database_identity(self.url, read_only=read_only)

    def same_database(self, other: StoreRef) -> bool:
        """Whether ``other``, a database that is read (the store under validation), is this
        one, which is written to (the records database): spelled alike (the same SQLite file,
        or the same PostgreSQL database named by the same host and port, whatever the user,
        options or schema), or found to be one (:meth:`identity`: a hard link, another spelling
        of the server's address, a service, several hosts). An identity that cannot be told is a
        :class:`StoreError`, never "another database" (docs/reliability.md, 8); ``other``'s is
        asked first, so a store that cannot be reached says so as opening it would."""
        if self.kind != other.kind:
            return False
        if self.is_sqlite:
            if self.file == other.file:
                return True
        else:
            place = _named_place(self.url)
            if place is not None and place == _named_place(other.url):
                return True
        theirs = other.identity(read_only=True)
        found = self.identity(read_only=False)
        return found is not None and theirs is not None and found.same_as(theirs)


#: libpq parameters that choose the server a session reaches, besides the URL's host and port.
_SERVER_PARAMETERS = ("host", "hostaddr", "port", "service", "servicefile")


def _named_place(url: URL) -> tuple | None:
    """The host, port and database a PostgreSQL URL names by itself; None when its query (or
    a service file, or the environment, for a missing host) may send it elsewhere."""
    if url.host is None or any(name in url.query for name in _SERVER_PARAMETERS):
        return None
    return url.host.lower(), url.port, url.database


def store_ref(given: str | StoreRef | URL) -> StoreRef:
    """The reference of a SQLite path, a ``postgresql://`` URL, a libpq connection string or
    any SQLAlchemy URL (text, or a URL object such as GX's engine's); a URL that cannot be
    read, or of another database, is a one-line :class:`StoreError` (exit 2). A reference is
    returned as it is."""
    if isinstance(given, StoreRef):
        return given
    if not isinstance(given, str):  # a SQLAlchemy URL, already read
        return _of_url(given.render_as_string(hide_password=False), given)
    file = sqlite_path(given)
    if file is not None:
        # Named as the URL of the path names it (sqlite_file): a ``%xx`` in a path reads as
        # it always has in outputs and in the records' store names.
        return StoreRef(given, SQLITE, file, shown_sqlite(Path(unquote(str(file))).resolve()))
    shown = plain_postgres_shown(given)
    if shown is not None:
        return StoreRef(given, POSTGRESQL, None, shown)
    return _of_url(given, resolve_url(given))


def connection_url(given: str) -> str:
    """The SQLAlchemy URL, as text, of a store named in any form ``--store`` takes (a SQLite
    path, a libpq string, ``postgresql://``), refused in ``check``'s words when it cannot be one
    (not a database URL; a SQLite path or URL naming a folder or no file)."""
    ref = store_ref(given)
    if ref.file is not None:  # a path or a sqlite:// URL: GX's engine would create the file
        refuse_unusable_sqlite_file(ref.file)
    return ref.url.render_as_string(hide_password=False)


def _of_url(given: str, url: URL) -> StoreRef:
    kind = url.get_backend_name()
    in_memory = kind == SQLITE and (not url.database or url.database == ":memory:")
    file = sqlite_file(url) if kind == SQLITE and not in_memory else None
    ref = StoreRef(given, kind, file, shown_store(url))
    ref.__dict__["url"] = url  # already read: cached_property's own slot
    return ref


def shown_records(given: str | StoreRef) -> str:
    """How outputs name a records database: as a store (:attr:`StoreRef.shown`), or, when it
    is not a database URL at all, the text without its secrets."""
    try:
        return store_ref(given).shown
    except StoreError:
        return redact(given if isinstance(given, str) else given.given)


def resolve_url(target: str) -> URL:
    """A SQLAlchemy URL for a URL or a SQLite file path (``postgresql://`` uses psycopg 3)."""
    import sqlalchemy as sa
    from sqlalchemy.engine import URL, make_url

    file = sqlite_path(target)
    if file is not None:
        return URL.create("sqlite", database=str(file))
    if is_conninfo(target) or _SEVERAL_HOSTS.match(target):
        return conninfo_url(target)
    try:
        url = make_url(target)
    except (sa.exc.ArgumentError, ValueError):  # ValueError: e.g. a port that is not a number
        raise StoreError(f"not a database URL: {redact(target)}") from None
    if "@" in (url.host or ""):  # the password holds an unencoded @: the rest reads as the host
        raise StoreError(f"not a database URL: {redact(target)} (percent-encode the password)")
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() not in (SQLITE, POSTGRESQL):
        raise StoreError(
            f"unsupported database {url.get_backend_name()!r}: use SQLite or PostgreSQL"
        )
    return url


#: The libpq parameters a SQLAlchemy URL holds in its own fields; the rest go to its query.
_URL_FIELDS = {"user": "username", "password": "password", "host": "host", "dbname": "database"}
#: A libpq URL naming several servers (``postgresql://h1:5432,h2:5432/db``), which libpq reads
#: and SQLAlchemy's URL parser cannot.
_SEVERAL_HOSTS = re.compile(r"postgres(?:ql)?://[^/?#]*,")


def conninfo_url(conninfo: str) -> URL:
    """The PostgreSQL URL of a libpq ``key=value`` connection string (or a libpq URL naming
    several servers), read by libpq itself; one libpq cannot read is refused without being
    shown (it may hold a password). Several hosts go to the URL's query, each with its port,
    as SQLAlchemy's PostgreSQL dialect reads them."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict
    from sqlalchemy.engine import URL

    try:
        params = {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}
    except ProgrammingError:
        raise StoreError(
            "not a database URL: a libpq connection string that libpq cannot read "
            "(not shown: it may hold a password)"
        ) from None
    hosts = params.get("host", "").split(",")
    several = len(hosts) > 1
    fields: dict[str, Any] = {
        field: params.pop(name)
        for name, field in _URL_FIELDS.items()
        if name in params and not (several and name == "host")
    }
    if several and "," not in params.get("port", ","):  # libpq: one port for every host
        params["port"] = ",".join([params["port"]] * len(hosts))
    if params.get("port", "").isdigit():
        fields["port"] = int(params.pop("port"))
    return URL.create("postgresql+psycopg", **fields, query=params)


def sqlite_file(url: URL) -> Path:
    """The absolute path of a SQLite store (a ``file:`` URI database included)."""
    return Path(unquote((url.database or "").removeprefix("file:"))).resolve()


def missing_sqlite_file(url: URL) -> bool:
    """A SQLite URL whose file does not exist (a PostgreSQL URL names a server: never)."""
    return url.get_backend_name() == SQLITE and not sqlite_file(url).is_file()


def shown_store(url: URL) -> str:
    """The one display form of a database: a URL ``--store`` accepts, without user or
    password; a SQLite file by its absolute path (``sqlite:////srv/k.db``). A plain PostgreSQL
    URL's fast form (:func:`~kandev_dq.store.target.plain_postgres_shown`) is this, unloaded."""
    if url.get_backend_name() == SQLITE:
        return shown_sqlite(sqlite_file(url))
    bare = without_secrets(url)._replace(drivername="postgresql", username=None)
    return bare.render_as_string(hide_password=False)


def with_pg_option(url: URL, option: str) -> URL:
    """``url`` with a libpq ``-c`` option added to the ``options`` it already carries (e.g. a
    search_path), which are kept."""
    options = " ".join(o for o in (url.query.get("options", ""), option) if o)
    return url.update_query_dict({"options": options})


def postgres_connector(url: URL, read_only: bool) -> Callable[[], Any]:
    """What SQLAlchemy would connect with, resolved once through the dialect's public API."""
    import sqlalchemy as sa

    if read_only:
        url = with_pg_option(url, READ_ONLY_OPTION)
    dialect = sa.create_engine(url).dialect  # creating an engine does not connect
    cargs, cparams = dialect.create_connect_args(url)
    cparams.update(connect_timeout=CONNECT_TIMEOUT_S, application_name=APPLICATION_NAME)

    def connect() -> Any:
        return dialect.connect(*cargs, **cparams)

    return connect


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
        """One database: on one cluster (by its system identifier when both sessions may read
        it) the same database, whichever server serves it: a streaming standby's primary is
        the store. Else one place (port and database) on a server started at one time, which
        every role may read."""
        if self.system is not None and other.system is not None:
            return (self.system, self.place[2:]) == (other.system, other.place[2:])
        return self.place == other.place and self.started == other.started


def database_identity(url: URL, *, read_only: bool) -> DatabaseIdentity | None:
    """The identity of the database ``url`` names, or a one-line :class:`StoreError` saying
    why it cannot be told (fail closed: an unknown identity is never taken for another
    database). None only for a SQLite file that does not exist yet: a database still to be
    created is none that exists. SQLite: a hard link or another path to the file is the same
    database. PostgreSQL: ``localhost``, ``127.0.0.1`` and ``[::ffff:127.0.0.1]`` are one
    server. The session is opened as the database is used (``read_only``: as a store is read,
    :func:`postgres_connector`; else without the read-only option, which a URL asking for a
    read-write session, ``target_session_attrs=read-write``, refuses), and it reads catalogue
    functions alone, in a ``BEGIN READ ONLY`` transaction either way."""
    shown = shown_store(url)
    if url.get_backend_name() == SQLITE:
        if not url.database or url.database == ":memory:":
            return None  # a new database each time it is opened
        try:
            found = sqlite_file(url).stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read {shown}: {exc.strerror or type(exc).__name__}") from None
        return DatabaseIdentity((SQLITE, found.st_dev, found.st_ino))
    import psycopg
    import sqlalchemy as sa

    try:
        conn = postgres_connector(url, read_only=read_only)()
    except sa.exc.ArgumentError as exc:
        raise StoreError(f"cannot open {shown}: {exc}") from None
    except psycopg.Error as exc:
        raise StoreError(connection_reason(shown, exc, url.username, url.password)) from None
    try:
        conn.read_only = True  # psycopg starts each transaction with BEGIN READ ONLY
        port, name, started = conn.execute(
            "SELECT current_setting('port'), current_database(), "
            "extract(epoch FROM pg_postmaster_start_time())::text"
        ).fetchone()
        try:
            cluster = conn.execute("SELECT system_identifier::text FROM pg_control_system()")
            system = cluster.fetchone()[0]
        except psycopg.errors.InsufficientPrivilege:  # revoked from PUBLIC on some servers
            system = None
        return DatabaseIdentity((POSTGRESQL, port, name), system, started)
    except psycopg.Error as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreError(f"cannot tell which database {shown} is: {detail}") from None
    finally:
        conn.close()


def identity_key(conn: sa.Connection, shown: str) -> str:
    """What the store read through ``conn`` says it is, as its name in the records database:
    ``postgresql:<system identifier>/<database>`` (``/<schema>`` after it when the store's
    tables are read from a schema other than ``public``), ``sqlite:<device>:<inode>``. Every
    spelling of one database reads one name, and so does a copy that keeps the identity (a
    pg_basebackup, a standby); a file copy is another file. An identity that cannot be read
    is a :class:`StoreError` naming why (``shown``: the store as outputs name it), never a new
    store."""
    if conn.dialect.name == SQLITE:
        rows = conn.exec_driver_sql("PRAGMA database_list").all()
        file = next((row[2] for row in rows if row[1] == "main"), "")
        if not file:
            raise StoreError(f"cannot tell which store {shown} is: it has no file")
        try:
            found = os.stat(file)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise StoreError(f"cannot tell which store {shown} is: {reason}") from None
        return f"{SQLITE}:{found.st_dev}:{found.st_ino}"
    import sqlalchemy as sa

    try:
        system, name, schema = conn.exec_driver_sql(
            "SELECT system_identifier::text, current_database(), current_schema() "
            "FROM pg_control_system()"
        ).one()
    except sa.exc.DBAPIError as exc:
        detail = (str(exc.orig).strip().splitlines() or [type(exc.orig).__name__])[0]
        raise StoreError(
            f"cannot tell which store {shown} is: {redact(detail)} (name it with --store-name, "
            "or grant EXECUTE on pg_control_system() to the role)"
        ) from None
    key = f"{POSTGRESQL}:{system}/{name}"
    return key if schema in (None, "public") else f"{key}/{schema}"
