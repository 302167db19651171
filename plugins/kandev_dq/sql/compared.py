"""Keys as the checks match, group and count them: exactly, and never carried whole.

A key may be any size (one 50 MB ``tool_call_id`` in a message's metadata). Grouped, sorted
or joined as it is, SQLite carries the whole value through each sorter and materialised
subquery, and keeps a copy at each place a statement reads it (a 50 MB key cost a check
0.9 GB). A key is therefore compared as its :class:`key_token`: the key itself up to
:data:`KEY_COMPARED_BYTES` bytes, else a text longer than that naming its size and its whole
SHA-256. Two tokens are equal iff their keys are: a key within the limit never equals a token
of a longer one (the token is longer than any such key), two keys within it compare as they
are, and two longer ones by size and full digest (256 bits, never a prefix), so keys
differing only in their last byte stay two. ``NULL`` stays ``NULL`` and ``''`` stays ``''``:
the AC-21 identity test reads the token as it reads the key.

SQLite hands a computed key's bytes once to Python, which measures it and hashes only a key
over the limit (registered by :func:`kandev_dq.sql.shown.prepare`); a stored column's size it
reads from the record header (:class:`stored_key_token`). PostgreSQL computes the token on
the server.
"""

from __future__ import annotations

import hashlib
import re

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

#: A key of at most this many bytes is compared as it is; a longer one by size and SHA-256.
KEY_COMPARED_BYTES = 1024
SQLITE_KEY_MARKER = "kandev_dq_key_marker"


#: A key over the limit as :func:`key_shown` shows it.
_SHOWN_MARKER = re.compile(r"\.\.\.\[\d+ bytes, sha256 [0-9a-f]{64}\]")


def shows_a_longer_key(shown: str) -> bool:
    """Whether ``shown`` (a key as :func:`key_shown` returns it) stands for a key over the
    limit rather than being the key: such a key cannot be named by what was shown."""
    return _SHOWN_MARKER.fullmatch(shown) is not None


def key_marker(raw: bytes | None) -> str | None:
    """The token of a key of more than :data:`KEY_COMPARED_BYTES` bytes (``raw``, its bytes):
    its size and SHA-256, padded with spaces past the limit. None for a shorter key."""
    if raw is None or len(raw) <= KEY_COMPARED_BYTES:
        return None
    named = f"...[{len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()}]"
    return named.ljust(KEY_COMPARED_BYTES + 1)


class key_token(FunctionElement):  # noqa: N801 - reads as a SQL function
    """A key as compared (see the module's note): itself, or the marker of a longer one."""

    inherit_cache = True
    type = sa.Text()


@compiles(key_token, "sqlite")
def _key_token_sqlite(element, compiler, **kw):
    (value,) = element.clauses
    key = compiler.process(value, **kw)
    # One reading of the key: a size test would be a second, and SQLite keeps a copy of a
    # computed key (a metadata field) at each place a statement reads it.
    return f"coalesce({SQLITE_KEY_MARKER}(CAST({key} AS BLOB)), {key})"


class stored_key_token(key_token):  # noqa: N801 - reads as a SQL function
    """:class:`key_token` of a stored column: SQLite reads its size from the record header
    without the value, so only a key over the limit reaches Python."""

    inherit_cache = True


@compiles(stored_key_token, "sqlite")
def _stored_key_token_sqlite(element, compiler, **kw):
    (value,) = element.clauses
    key = compiler.process(value, **kw)
    return (
        f"CASE WHEN octet_length({key}) <= {KEY_COMPARED_BYTES} THEN {key} "
        f"ELSE {SQLITE_KEY_MARKER}(CAST({key} AS BLOB)) END"
    )


@compiles(key_token, "postgresql")
def _key_token_postgresql(element, compiler, **kw):
    (value,) = element.clauses
    key = compiler.process(value, **kw)
    named = (
        f"'...[' || octet_length({key}) || ' bytes, sha256 ' || "
        f"encode(sha256(convert_to({key}, 'UTF8')), 'hex') || ']'"
    )
    return (
        f"CASE WHEN octet_length({key}) <= {KEY_COMPARED_BYTES} THEN {key} "
        f"ELSE rpad({named}, {KEY_COMPARED_BYTES + 1}) END"
    )


def key_shown(token: sa.ColumnElement) -> sa.ColumnElement:
    """A token as a sample or a listing shows its key: the key within the limit, else its
    size and digest (its head is not carried)."""
    return sa.case(
        (sa.func.octet_length(token) <= KEY_COMPARED_BYTES, token), else_=sa.func.rtrim(token)
    )


def byte_order(
    column: sa.ColumnElement, session: sa.ColumnElement, peers: sa.FromClause
) -> tuple[sa.ColumnElement, ...]:
    """Sort keys ordering ``column`` (the id of a message of ``session``) among its session's
    messages exactly as its bytes order, none holding more than :data:`KEY_COMPARED_BYTES`
    bytes of it (SQLite): the id itself within the limit, else its first bytes (of its own
    type, so types still order as SQLite orders them); then, for a longer id, how many of the
    session's messages (read from ``peers``, a messages table) have an id between that head
    and itself. Ids sharing a head lie in that range, so the count grows with the id; a
    shorter id equal to the head counts 0 and is the smaller. A sorter holding the id whole
    kept 50 MB per copy (AC-21b's tie-break). The ids AC-21b ranks together share a session:
    counted there, many long ids sharing a head cost what one session's rows already cost
    the reconciliation's join (docs/reliability.md, Known limits), not their number squared."""
    short = _octets(column) <= KEY_COMPARED_BYTES
    cut = (sa.literal_column("1"), sa.literal_column(str(KEY_COMPARED_BYTES)))
    head = sa.case(
        (short, column),
        (sa.func.typeof(column) == "blob", sa.func.substr(column, *cut)),
        else_=sa.cast(sa.func.substr(sa.cast(column, sa.LargeBinary), *cut), sa.Text),
    ).collate("BINARY")
    peer = peers.c.id.collate("BINARY")
    between = (
        sa.select(sa.func.count())
        .where(peers.c.task_session_id == session, peer >= head, peer < column)
        .scalar_subquery()
    )
    return head, sa.case((short, sa.literal_column("0")), else_=between)


class _octets(FunctionElement):  # noqa: N801 - reads as a SQL function
    """A value's size in bytes: SQLite's ``octet_length`` reads it from the record header; a
    printed statement (a finding's listing, values inlined) runs in any ``sqlite3`` shell,
    older than 3.43 too, which has none, and measures the value's bytes instead."""

    inherit_cache = True
    type = sa.Integer()


@compiles(_octets)
def _octets_default(element, compiler, **kw):
    (value,) = element.clauses
    value = compiler.process(value, **kw)
    if kw.get("literal_binds"):
        return f"length(CAST({value} AS BLOB))"
    return f"octet_length({value})"
