"""Refusing what a user named as the store, without the SQL toolkit.

Importing SQLAlchemy takes a third of a second; a typo in ``--store`` (a missing file, a folder,
a server that is not there) and the one-line error that reports any failure need none of it, so
they are answered here (a plain PostgreSQL URL is tried with the driver alone), on the reference
:mod:`kandev_dq.store.reference` reads, and :mod:`kandev_dq.store.access` builds on them once a
store is really opened.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from kandev_dq.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

#: Tables every rule reads: a database without one of them is not a Kandev store (exit 2).
KANDEV_TABLES = ("task_session_messages", "kandev_meta", "task_sessions")
#: How long opening (or reading) a SQLite store waits for another process's lock.
BUSY_TIMEOUT_S = 5.0
#: How long connecting to a PostgreSQL server may take before it counts as unreachable (s).
CONNECT_TIMEOUT_S = 5
#: How kandev-dq's sessions are named on a PostgreSQL server.
APPLICATION_NAME = "kandev-dq"
#: The libpq options making every transaction of a PostgreSQL session read-only.
READ_ONLY_OPTION = "-c default_transaction_read_only=on"
#: One character of a URL's user or password as RFC 3986 allows it unescaped, or one valid
#: percent-escape: anything else (a space, a stray ``%``) is left to SQLAlchemy's parser.
_USERINFO_PART = r"(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})"
#: A PostgreSQL URL of the plain shape ``scheme://[userinfo@]host[:port]/database``: no query,
#: no IPv6 or socket host, nothing percent-encoded outside the userinfo. For it, the store's
#: display form is its scheme, host, port and database as written (SQLAlchemy's rendering of
#: the same URL; a test holds the two equal), so it can be probed before SQLAlchemy loads.
_PLAIN_POSTGRES_URL = re.compile(
    r"(?:postgresql|postgres|postgresql\+psycopg)://"
    rf"(?:(?P<user>{_USERINFO_PART}*)(?::(?P<password>(?:{_USERINFO_PART}|:)*))?@)?"
    r"(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*)(?::(?P<port>[1-9][0-9]{0,4}))?"
    r"/(?P<database>[A-Za-z0-9_][A-Za-z0-9_.-]*)"
)
#: ``scheme://`` up to the last ``@`` on its line, in text that is not a parsable URL (the
#: last resort of redact): a password may hold an unencoded ``@``, ``:``, ``/`` or space.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\n]*)@")
#: A user name alone, no password: safe to show.
_USER_ONLY = re.compile(r"[^:/@\s]*")
#: The libpq connection parameters that are secrets: those libpq itself masks (``dispchar``
#: ``*``: password, sslpassword, oauth_client_secret) and the SCRAM keys, which authenticate as
#: the password does. A test holds this to the linked libpq's list.
SECRET_PARAMETERS = (
    "password",
    "sslpassword",
    "oauth_client_secret",
    "scram_client_key",
    "scram_server_key",
)
#: One secret setting in text: ``key=value`` as a URL query or a libpq connection string
#: writes it (a value quoted libpq's way, or running to a space, ``&`` or ``#``).
_SECRET_SETTING = re.compile(
    rf"(?i)(?<![A-Za-z0-9_])(?P<key>{'|'.join(SECRET_PARAMETERS)})(?P<eq>\s*=\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*'?|[^\s&#]*)"
)
#: A libpq ``key=value`` connection string (``host=db password=... dbname=kandev``): text
#: that starts with a parameter name and ``=``, which libpq and psql read as one. It is never
#: a SQLite path: name such a file ``./host=db``.
_CONNINFO = re.compile(r"\s*[A-Za-z_]+\s*=")


def is_conninfo(target: str) -> bool:
    """Whether ``target`` is a libpq ``key=value`` connection string (:data:`_CONNINFO`)."""
    return "://" not in target and _CONNINFO.match(target) is not None


def sqlite_path(target: str) -> Path | None:
    """The absolute SQLite file a plain path names; None for a URL or a libpq connection
    string."""
    if "://" in target or is_conninfo(target):
        return None
    return Path(target).expanduser().resolve()


def refuse_unusable_sqlite_file(file: Path, *, must_exist: bool = True) -> None:
    """Raise the one-line reason a SQLite path cannot be a store: a folder, or (when the
    store must exist already) no file there."""
    if file.is_dir():
        raise StoreError(f"{file} is a folder, not a SQLite file: pass the store's .db file")
    if must_exist and not file.is_file():
        raise StoreError(f"no SQLite store at {file}: the file does not exist")


def shown_sqlite(file: Path) -> str:
    """How every output names a SQLite store: its absolute path as a URL (``sqlite:////srv/k.db``)."""
    return f"sqlite:///{file}"


def refuse_non_kandev_sqlite_file(file: Path) -> None:
    """Raise the one-line reason the existing SQLite file ``file`` is not a Kandev store (not
    a database, an empty one, one without the Kandev tables), as the full open words it,
    read read-only with the SQLite library alone, before the SQL toolkit loads."""
    from kandev_dq.store import sqlite_driver
    from kandev_dq.store.sidefiles import SideFiles

    side_files = SideFiles.before_open(file)
    try:
        conn = sqlite_driver.connect(
            f"file:{quote(str(file))}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S
        )
        try:
            sqlite_driver.tolerate_bad_utf8(conn)  # a table name may hold any bytes
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        finally:
            conn.close()
    except sqlite_driver.Error as exc:
        journal = Path(f"{file}-journal")
        raise StoreError(connection_reason(shown_sqlite(file), exc, None, None, journal)) from None
    finally:
        side_files.restore()
    refuse_missing_kandev_tables(shown_sqlite(file), {name for (name,) in rows})


def refuse_missing_kandev_tables(shown: str, names: set[str]) -> None:
    """Raise unless the tables ``names`` of the store ``shown`` hold every Kandev table."""
    missing = [t for t in KANDEV_TABLES if t not in names]
    if missing:
        raise StoreError(f"{shown} is not a Kandev store: missing table(s) {', '.join(missing)}")


def refuse_unreachable_server(target: str) -> None:
    """For a plain PostgreSQL URL, try one connection with the driver alone and raise the
    one-line reason it fails (a server not listening, a wrong password or database) before
    the SQL toolkit loads; any other URL, or a connection that succeeds, is left to
    :func:`kandev_dq.store.access.open_store`."""
    shown = plain_postgres_shown(target)
    if shown is None:
        return
    import psycopg  # the driver on its own, without the SQL toolkit's import

    libpq_uri = "postgresql://" + target.split("://", 1)[1]
    try:
        psycopg.connect(
            libpq_uri,
            connect_timeout=CONNECT_TIMEOUT_S,
            application_name=APPLICATION_NAME,
            options=READ_ONLY_OPTION,  # it runs no statement; were it to, it could not write
        ).close()
    except psycopg.Error as exc:
        if not isinstance(exc, psycopg.OperationalError):
            return  # not a refusal by the server: the full open words it
        user, password = _PLAIN_POSTGRES_URL.fullmatch(target).group("user", "password")
        raise StoreError(
            connection_reason(
                shown,
                exc,
                None if user is None else unquote(user),
                None if password is None else unquote(password),
            )
        ) from None


def plain_postgres_shown(target: str) -> str | None:
    """The display form of a plain PostgreSQL URL (:data:`_PLAIN_POSTGRES_URL`), read without
    the SQL toolkit; None for any other target."""
    plain = _PLAIN_POSTGRES_URL.fullmatch(target)
    if plain is None:
        return None
    port = f":{plain['port']}" if plain["port"] else ""
    return f"postgresql://{plain['host']}{port}/{plain['database']}"


def connection_reason(
    where: str,
    error: BaseException,
    username: str | None,
    password: str | None,
    journal: Path | None = None,
) -> str:
    """The one line saying why the driver's ``error`` stopped a store (``where``, its display
    form) from opening, with the password, if the driver quoted it, masked. ``journal`` is a
    SQLite store's rollback journal: the driver reports only the primary code (READONLY), so a
    read-only open refused beside a non-empty journal is taken for the hot journal it is, and
    one refused for a WAL store's missing wal-index says so (:func:`_wal_index_uncreatable`)."""
    raw = str(error).strip().splitlines()
    detail = raw[0] if raw else type(error).__name__
    if password:
        detail = detail.replace(password, "***")
    detail = _hide_settings(detail)
    lowered = " ".join(raw).lower()
    if "password authentication failed" in lowered or "authentication failed" in lowered:
        return f"cannot open {where}: authentication failed for user {username!r}"
    if "does not exist" in lowered and "database" in lowered:
        return f"cannot open {where}: the database does not exist"
    if "connection refused" in lowered or "could not connect" in lowered or "timeout" in lowered:
        return f"cannot reach {where}: the server is not accepting connections"
    code = getattr(error, "sqlite_errorname", "")
    if (
        code.startswith("SQLITE_READONLY")
        and journal is not None
        and _wal_index_uncreatable(Path(str(journal).removesuffix("-journal")))
    ):
        return (
            f"cannot read {where}: it is in WAL mode with no -shm file, which SQLite must create "
            "to read it, and its folder is read-only to this user; run the check while Kandev "
            "has the store open (its writer creates the file), as a user who may write to the "
            "folder, or on a copy (`sqlite3 FILE '.backup COPY'`)"
        )
    if code == "SQLITE_READONLY_ROLLBACK" or (
        code == "SQLITE_READONLY" and journal is not None and _non_empty(journal)
    ):
        return (
            f"cannot read {where}: a writer crashed mid-transaction and left a hot journal that "
            "a read-only open cannot roll back; open the store once read-write (restart Kandev, "
            "or run `sqlite3 FILE 'PRAGMA quick_check'`) and run again"
        )
    if "file is not a database" in lowered:
        return f"cannot open {where}: the file is not a SQLite database"
    if "unable to open database" in lowered:
        return f"cannot open {where}: SQLite cannot open the file"
    if "locked" in lowered or "busy" in lowered:
        return (
            f"cannot read {where}: the database is locked by another process "
            f"(waited {BUSY_TIMEOUT_S:.0f} s)"
        )
    return f"cannot open {where}: {detail}"


def _wal_index_uncreatable(file: Path) -> bool:
    """A WAL-mode store (header bytes 18-19 are 2) without its ``-shm``, in a folder this user
    may not write: a reader needs that wal-index, and SQLite cannot create it there. With the
    side files present (a writer holds the store) SQLite reads it, and so does the check."""
    try:
        with file.open("rb") as opened:
            header = opened.read(20)
    except OSError:
        return False
    return (
        header[18:20] == b"\x02\x02"
        and not file.with_name(file.name + "-shm").exists()
        and not os.access(file.parent, os.W_OK)
    )


def _non_empty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def redact(text: str) -> str:
    """A URL (or any text holding one, or a libpq connection string) without its secrets.

    Text that does not parse as one URL, or parses with an ``@`` left in its host, has
    everything between ``//`` and the last ``@`` of the line hidden, unless that is a bare
    user name: a password with an unencoded ``@``, ``:``, ``/`` or space never shows. Every
    ``key=value`` naming a secret (:data:`SECRET_PARAMETERS`) shows as ``key=***``.
    """
    if "@" not in text and not _names_a_secret(text):
        # A URL carries a secret only before an ``@`` or as a ``key=`` parameter: text with
        # neither is returned as it is, without loading the SQL toolkit to parse it.
        return text
    if is_conninfo(text):
        return _hide_settings(text)
    from sqlalchemy.engine import make_url

    try:
        url = make_url(text)
    except Exception:  # noqa: BLE001 - not a parsable URL
        return _hide_settings(_USERINFO.sub(_hide_userinfo, text))
    secret_in_query = any(_is_secret(name) for name in url.query)
    if (url.password or secret_in_query) and "@" not in (url.host or ""):
        return without_secrets(url).render_as_string(hide_password=False)
    return _hide_settings(_USERINFO.sub(_hide_userinfo, text))


def _names_a_secret(text: str) -> bool:
    lowered = text.lower()
    return any(name in lowered for name in SECRET_PARAMETERS)


def _is_secret(name: str) -> bool:
    return name.lower() in SECRET_PARAMETERS


def _hide_settings(text: str) -> str:
    return _SECRET_SETTING.sub(lambda m: f"{m['key']}{m['eq']}***", text)


def _hide_userinfo(match: re.Match) -> str:
    if _USER_ONLY.fullmatch(match["userinfo"]):
        return match[0]
    return f"{match['head']}***@"


def without_secrets(url: URL) -> URL:
    """The URL with its password removed, and every secret query parameter libpq reads
    (:data:`SECRET_PARAMETERS`). ``URL.set(password=None)`` cannot do this: it ignores None."""
    secrets = [name for name in url.query if _is_secret(name)]
    return url._replace(password=None).difference_update_query(secrets)
