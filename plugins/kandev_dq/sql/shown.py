"""Values as a sample, a result or the key ledger takes them: cut inside the SQL.

A store value may be any size (one 50 MB description, a 10 MB key). Wherever kandev-dq shows
or records a value it reads :func:`shown`, never the column: a value up to ``limit``
characters as stored, a longer one as its head, its length and a digest, so a huge value is
never fetched whole, and a rewrite beyond its head still changes what is recorded (AC-24
write-once).

The digest is SHA-256 on both dialects, so one value reads alike on either. PostgreSQL has
``sha256()``; SQLite has no hash function, so kandev-dq registers one on each connection it
reads with (:func:`prepare`): SQLite hands the value to Python's ``hashlib`` as bytes, once, for
a value over the limit only, and only the digest comes back.
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from kandev_dq.sql.compared import SQLITE_KEY_MARKER, key_marker

#: A value longer than this (an RFC3339 key has at most 35 characters) is shown and recorded
#: as its first :data:`SHOWN_HEAD_CHARS` characters, its length and a digest's head.
KEY_DISPLAY_LIMIT = 200
SHOWN_HEAD_CHARS = 40
SHOWN_DIGEST_CHARS = 16
_SQLITE_SHA256 = "kandev_dq_sha256"


def prepare(conn: sa.Connection) -> None:
    """Give a SQLite connection the digest functions :func:`shown` and
    :class:`~kandev_dq.sql.compared.key_token` use (a no-op elsewhere).
    Registering again replaces the same function: any read path may call this."""
    if conn.dialect.name == "sqlite":
        driver = conn.connection.driver_connection
        driver.create_function(_SQLITE_SHA256, 1, _sha256_hex, deterministic=True)
        driver.create_function(SQLITE_KEY_MARKER, 1, key_marker, deterministic=True)


def _sha256_hex(raw: bytes | None) -> str | None:
    return None if raw is None else hashlib.sha256(raw).hexdigest()


class sha256_hex(FunctionElement):  # noqa: N801 - reads as a SQL function
    """Lower-case hex SHA-256 of a text value's UTF-8 bytes (SQLite: its stored bytes)."""

    inherit_cache = True
    type = sa.Text()


@compiles(sha256_hex, "sqlite")
def _sha256_sqlite(element, compiler, **kw):
    (value,) = element.clauses
    return f"{_SQLITE_SHA256}(CAST({compiler.process(value, **kw)} AS BLOB))"


@compiles(sha256_hex, "postgresql")
def _sha256_postgresql(element, compiler, **kw):
    (value,) = element.clauses
    return f"encode(sha256(convert_to({compiler.process(value, **kw)}, 'UTF8')), 'hex')"


def shown(value: sa.ColumnElement, limit: int = KEY_DISPLAY_LIMIT) -> sa.ColumnElement:
    """``value`` as text when at most ``limit`` characters; else ``head...[N characters,
    sha256 D]``. The digest is only computed for a value over the limit.

    The cut also measures bytes: SQLite counts characters only up to a NUL, so a NUL-led
    50 MB value would pass whole. No value within the limit has more than 4 bytes a character,
    so the byte test cuts only such values, summarised by their size in bytes."""
    text = sa.cast(value, sa.Text)
    length = sa.func.length(text)
    size = sa.func.octet_length(text)  # bytes on both; SQLite's (3.43+) counts past a NUL
    count = sa.case(
        (length > limit, sa.cast(length, sa.Text) + " characters"),
        else_=sa.cast(size, sa.Text) + " bytes",
    )
    summary = (
        sa.func.substr(text, 1, SHOWN_HEAD_CHARS)
        + "...["
        + count
        + ", sha256 "
        + sa.func.substr(sha256_hex(text), 1, SHOWN_DIGEST_CHARS)
        + "]"
    )
    return sa.case((sa.and_(length <= limit, size <= 4 * limit), text), else_=summary)


class StoredText(sa.types.TypeDecorator):
    """A stored timestamp's own text, read as the store holds it (SQLite's text; PostgreSQL's
    text of its value): shown verbatim beside its exact instant, never normalised, so a
    text-form fault (AC-24e) is visible as the store has it."""

    impl = sa.Text
    cache_ok = True


def verbatim(column: sa.ColumnElement) -> sa.ColumnElement:
    """``column`` as its stored text (:class:`StoredText`)."""
    return sa.type_coerce(sa.cast(column, sa.Text), StoredText)
