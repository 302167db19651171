"""Reading message metadata, shared by the migration runner and every family of facts.

How a message's metadata becomes a document (unreadable text as ``{}``, AC-23b), and capped
samples of offending rows. Which messages qualify and how they map to rows is
:mod:`kandev_dq.sql.mapping`.

**Metadata PostgreSQL cannot parse** (AC-23b). SQLite reads text that is not JSON as ``{}``
(``json_valid``); PostgreSQL's ``::jsonb`` aborts the whole statement on the first such row.
Rather than validating every document up front (a second pass over every message on every
run), a statement is simply run; only when it fails with PostgreSQL's JSON input error are
the offending messages located (:func:`locate_unreadable_metadata`: bisection over id ranges,
each probe in a SAVEPOINT of the same transaction, so in the same snapshot) and the statement
run again with those ids read as ``{}`` (:func:`message_doc`). Both dialects then read the same
rows the same way: as messages of no kind, skipped like any non-subagent message. PostgreSQL's
error names the whole token it could not read, so a text over ``PG_PARSED_BYTES`` is never
parsed by such a statement: it fails it short, and is decided on the server.

**Metadata stored as something other than text** (AC-23b, SQLite only). SQLite keeps a BLOB
(a Go ``[]byte`` bound as is), or an integer or a real where the column has no TEXT affinity.
Every reading starts from :func:`stored_metadata`, the value as text: a BLOB reads as the text
of its bytes, a number as a JSON scalar with no kind. Such messages are still named
(:class:`~kandev_dq.sql.dialect.stored_not_as_text`), by the rule on unreadable metadata and by
the migration.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa

from kandev_dq.contract.instants import parse_stored, utc_text
from kandev_dq.contract.tables import task_session_messages as messages
from kandev_dq.sql.dialect import (
    PG_PARSED_BYTES,
    metadata_doc,
    metadata_text,
    stored_not_as_text,
    utc_instant,
)
from kandev_dq.sql.shown import StoredText, prepare, shown

log = logging.getLogger("kandev_dq.sql.messages")
T = TypeVar("T")

SAMPLE_LIMIT = 20
_PG_TIMESTAMPTZ_TEXT = re.compile(
    r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}(:\d{2})?", re.ASCII
)
#: A sampled value longer than this is shown as its head, length and digest (cut in SQL).
SAMPLE_VALUE_CHARS = 200


# --- metadata PostgreSQL cannot parse (AC-23b) ---------------------------------------------------

#: PostgreSQL's errors for JSON text it cannot read: invalid input syntax (``{bad``, ``{"a":}``,
#: a lone surrogate escape), an escape it cannot store (``\u0000``), a number beyond
#: ``numeric`` (``1e999999``) and nesting that exhausts its parser's stack (``54001``, near
#: 100,000 levels; shallower documents past the depth limit are read as ``{}`` without
#: failing, see :data:`kandev_dq.sql.dialect.JSON_MAX_DEPTH`). Only a probe of the metadata
#: alone decides that a row is unreadable, so another error with one of these codes is
#: re-raised once nothing is found.
UNREADABLE_SQLSTATES = frozenset({"22P02", "22P05", "22003", "54001"})
#: Below this many rows a failing id range is probed row by row instead of halved again.
_PROBE_ROWS = 8


@dataclass
class Unreadable:
    """The messages of one snapshot whose metadata PostgreSQL cannot parse as JSON.

    ``ids`` is None until they have been looked for (nothing is excluded then), and a tuple
    (possibly empty) once they have: located once per snapshot, reused by every later read.
    """

    ids: tuple[str, ...] | None = None
    #: True while :func:`tolerating_unreadable_metadata` runs a statement before the ids are
    #: located: only then may a large text fail it short (``undecided_large``), since only
    #: then is its failure located. A statement built elsewhere reads as before.
    attempting: bool = False

    @property
    def large_undecided(self) -> bool:
        return self.ids is None and self.attempting


_UNREADABLE: ContextVar[Unreadable | None] = ContextVar("kandev_dq_unreadable", default=None)


def current_unreadable() -> Unreadable | None:
    return _UNREADABLE.get()


@contextmanager
def reading_unreadable_as_empty(found: Unreadable) -> Iterator[Unreadable]:
    """Every :func:`message_doc` built in this block reads ``found.ids`` as ``{}``."""
    token = _UNREADABLE.set(found)
    try:
        yield found
    finally:
        _UNREADABLE.reset(token)


def stored_metadata(table=messages) -> sa.ColumnElement:
    """``table``'s metadata as the text every reading starts from (AC-23b): a BLOB as the text
    of its bytes (SQLite), never handed raw to a JSON function; see :class:`metadata_text`."""
    return metadata_text(table.c.metadata)


def message_doc(table=messages, *, mentions: str | None = None) -> sa.ColumnElement:
    """A message's metadata document (AC-23b), reading the located unreadable ids as ``{}``
    (and, given ``mentions``, every text that cannot hold that value, unparsed).

    The ids are those of the enclosing :func:`reading_unreadable_as_empty` block when the
    statement is *built*: build statements inside the ``compute`` function given to
    :func:`tolerating_unreadable_metadata`, never before it.
    """
    found = _UNREADABLE.get()
    excluded = found.ids if found is not None and found.ids else ()
    return metadata_doc(
        stored_metadata(table),
        id_column=table.c.id,
        excluded=excluded,
        mentions=mentions,
        undecided_large=found is not None and found.large_undecided,
    )


def is_unreadable_json(exc: BaseException) -> bool:
    """True for the errors PostgreSQL raises on metadata text ``::jsonb`` cannot read."""
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) in UNREADABLE_SQLSTATES


def unreadable_sqlite(column) -> sa.ColumnElement:
    """SQLite: the stored ``column`` (raw, as in the table) that the reading cannot take as a
    document although it is neither NULL nor blank: text (or a BLOB's text) that
    ``metadata_doc`` reads as ``{}``, exactly the rows PostgreSQL's ``::jsonb`` rejects
    (``'null'`` is valid JSON), and an integer or a real, whose text is a JSON scalar with no
    member. ``json_valid`` comes first: SQLite stops at it for valid documents, so ``trim``
    runs only on the rare others instead of copying every message's metadata."""
    text = metadata_text(column)
    return sa.or_(
        sa.and_(
            sa.not_(sa.func.json_valid(text)),
            text.is_not(None),
            sa.func.trim(text) != "",
        ),
        sa.func.typeof(column).in_(("integer", "real")),
    )


def named_metadata(column) -> sa.ColumnElement:
    """The stored ``column`` the rule on unreadable metadata names (AC-23b), SQLite: what
    :func:`unreadable_sqlite` finds, and any value not stored as text (a BLOB too, read as
    its text but named: a writer that binds bytes is not writing what the contract says)."""
    return sa.or_(unreadable_sqlite(column), stored_not_as_text(column))


def locate_not_text_metadata(conn: sa.Connection) -> tuple[str, ...]:
    """Ids of messages whose metadata is stored as a BLOB, an integer or a real, in id order
    (SQLite; PostgreSQL's text column holds none, and is not read)."""
    if conn.dialect.name != "sqlite":
        return ()
    m = messages
    stmt = sa.select(m.c.id).where(stored_not_as_text(m.c.metadata)).order_by(m.c.id)
    return tuple(conn.scalars(stmt))


@contextmanager
def _savepoint(conn: sa.Connection, name: str) -> Iterator[None]:
    """A raw SAVEPOINT (works in the pinned snapshot and in the runner's transactions alike);
    rolled back, and released, when the block raises."""
    conn.exec_driver_sql(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {name}")
        conn.exec_driver_sql(f"RELEASE SAVEPOINT {name}")
        raise
    conn.exec_driver_sql(f"RELEASE SAVEPOINT {name}")


#: PostgreSQL: the texts over PG_PARSED_BYTES the server cannot parse, decided on the server,
#: so that its error (which names the whole token) never reaches the client. An anonymous
#: block writes nothing (a read-only transaction and a standby run it); its answer is a
#: setting local to the transaction, a JSON array of ids. Blank and ``null`` texts read as
#: ``{}`` before any parse (:class:`metadata_doc`), so they are not unreadable here either.
_PG_DECIDE_LARGE = f"""
DO $kandev_dq$
DECLARE
    found text[] := '{{}}';
    message record;
BEGIN
    FOR message IN
        SELECT id, metadata FROM {messages.name}
        WHERE octet_length(metadata) > {PG_PARSED_BYTES} ORDER BY id
    LOOP
        CONTINUE WHEN strpos(message.metadata, '{{') = 0
            AND btrim(message.metadata) IN ('', 'null');
        BEGIN
            PERFORM message.metadata::jsonb;
        EXCEPTION
            WHEN invalid_text_representation OR untranslatable_character
                OR numeric_value_out_of_range OR statement_too_complex THEN
                found := found || message.id;
        END;
    END LOOP;
    PERFORM set_config('kandev_dq.unreadable_large', array_to_json(found)::text, true);
END
$kandev_dq$"""


def _unreadable_large_metadata(conn: sa.Connection) -> list[str] | None:
    """PostgreSQL: ids of the messages whose metadata text, over PG_PARSED_BYTES, the server
    cannot parse; None where the database has no PL/pgSQL (they are then probed as the
    others are, and their error reaches the client whole)."""
    try:
        with _savepoint(conn, "kandev_dq_large"):
            conn.exec_driver_sql(_PG_DECIDE_LARGE)
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != "42704":  # undefined_object: no plpgsql
            raise
        return None
    found = conn.exec_driver_sql("SELECT current_setting('kandev_dq.unreadable_large')")
    return json.loads(found.scalar_one())


def locate_unreadable_metadata(conn: sa.Connection) -> tuple[str, ...]:
    """Ids of messages whose metadata text this dialect cannot read as JSON, in id order.

    SQLite: one statement (``json_valid``). PostgreSQL: the texts over PG_PARSED_BYTES are
    decided on the server (:data:`_PG_DECIDE_LARGE`); then one statement parses every other
    document; only when it fails is the id space halved, range by range, each probe in its
    own SAVEPOINT of the caller's transaction (so every probe reads the caller's snapshot; no
    write, so a read-only transaction is enough). A range of a few rows is probed row by row.
    """
    m = messages
    if conn.dialect.name != "postgresql":
        stmt = sa.select(m.c.id).where(unreadable_sqlite(m.c.metadata)).order_by(m.c.id)
        return tuple(conn.scalars(stmt))
    large = _unreadable_large_metadata(conn)
    probed = sa.true() if large is None else sa.func.octet_length(m.c.metadata) <= PG_PARSED_BYTES

    def readable(where: sa.ColumnElement) -> bool:
        probe = sa.select(sa.func.count(metadata_doc(stored_metadata(m)))).where(where)
        try:
            with _savepoint(conn, "kandev_dq_probe"):
                conn.execute(probe)
        except sa.exc.DBAPIError as exc:
            if not is_unreadable_json(exc):
                raise
            return False
        return True

    def in_range(low: str | None, high: str | None) -> sa.ColumnElement:
        parts = []
        if low is not None:
            parts.append(m.c.id >= low)
        if high is not None:
            parts.append(m.c.id < high)
        return sa.and_(probed, *parts)

    found: list[str] = list(large or ())
    pending: list[tuple[str | None, str | None]] = [(None, None)]
    while pending:
        low, high = pending.pop()
        where = in_range(low, high)
        if readable(where):
            continue
        rows = conn.execute(sa.select(sa.func.count()).where(where)).scalar_one()
        middle = None
        if rows > _PROBE_ROWS:
            middle = conn.execute(
                sa.select(m.c.id).where(where).order_by(m.c.id).offset(rows // 2).limit(1)
            ).scalar()
        if middle is None or middle == low:  # a few rows (or ids that do not split): one by one
            ids = conn.scalars(sa.select(m.c.id).where(where).order_by(m.c.id).distinct())
            found.extend(i for i in ids if not readable(sa.and_(probed, m.c.id == i)))
            continue
        pending.append((middle, high))
        pending.append((low, middle))
    return tuple(sorted(set(found)))


def tolerating_unreadable_metadata(
    conn: sa.Connection, compute: Callable[[sa.Connection], T], found: Unreadable | None = None
) -> T:
    """``compute(conn)`` with every message metadata PostgreSQL cannot parse read as ``{}``.

    The common path is the statement as it is (plus a SAVEPOINT on PostgreSQL, no extra
    scan). When it fails with PostgreSQL's JSON input error, the offending ids are located in
    the same transaction and ``compute`` runs once more with them excluded; ``found`` keeps
    them for the next reads of the same snapshot. Any other error propagates unchanged.
    """
    found = found if found is not None else Unreadable()
    with reading_unreadable_as_empty(found):
        if conn.dialect.name != "postgresql" or found.ids is not None:
            return compute(conn)
        try:
            found.attempting = True
            with _savepoint(conn, "kandev_dq_attempt"):
                return compute(conn)
        except sa.exc.DBAPIError as exc:
            if not is_unreadable_json(exc):
                raise
        finally:
            found.attempting = False
        # Located outside the handler, so the probes' errors are not chained to this one.
        # A statement failing on a large text alone finds none: it runs again, parsing it.
        found.ids = locate_unreadable_metadata(conn)
        if not found.ids:
            return compute(conn)
        log.info(
            "%d message(s) hold metadata that is not JSON; read as {} (AC-23b): %s",
            len(found.ids),
            ", ".join(found.ids[:5]) + (" ..." if len(found.ids) > 5 else ""),
        )
        return compute(conn)


# --- capped samples ------------------------------------------------------------------------


def display(value: Any) -> Any:
    """A value made JSON-safe and dialect-neutral (timestamps as ``…Z`` UTC text)."""
    if isinstance(value, datetime):
        return utc_text(parse_stored(value))
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] in " T":
        try:
            return utc_text(parse_stored(value))
        except ValueError:
            pass
        # PostgreSQL's text of a timestamptz (sample_of reads instants as text): "+00", or the
        # session's offset, never "+00:00".
        if _PG_TIMESTAMPTZ_TEXT.fullmatch(value):
            return utc_text(datetime.fromisoformat(value).astimezone(UTC))
        return value
    if hasattr(value, "is_integer") and not isinstance(value, float | int):
        return int(value) if value == int(value) else float(value)
    return value


def count_and_sample(
    conn: sa.Connection, stmt: sa.Select, limit: int = SAMPLE_LIMIT
) -> tuple[int, list[dict[str, Any]]]:
    """How many rows ``stmt`` yields, and the first ``limit`` of them (never all of them)."""
    count = conn.execute(
        sa.select(sa.func.count()).select_from(stmt.order_by(None).subquery("offending"))
    ).scalar_one()  # counted unordered: the order only picks the sample
    if not count:
        return 0, []
    return count, sample_of(conn, stmt, limit)


def sample_of(
    conn: sa.Connection, stmt: sa.Select, limit: int = SAMPLE_LIMIT
) -> list[dict[str, Any]]:
    """The first ``limit`` rows of ``stmt``, JSON-safe (for a count already read elsewhere).

    Every value but a number is read through :func:`~kandev_dq.sql.shown.shown`, cut inside
    the SQL: a huge value is never fetched whole, and a timestamp Python cannot hold
    (PostgreSQL's ``infinity``, CONTRACT §1 timestamps) reads as its text."""
    prepare(conn)
    stored = {c.key for c in stmt.selected_columns if isinstance(c.type, StoredText)}
    cut = stmt.with_only_columns(
        *(_cut(column) for column in stmt.selected_columns), maintain_column_froms=True
    )
    rows = conn.execute(cut.limit(limit)).mappings()
    return [{k: v if k in stored else display(v) for k, v in row.items()} for row in rows]


def _cut(column: sa.ColumnElement) -> sa.ColumnElement:
    if isinstance(column.type, sa.Integer | sa.Numeric | sa.Boolean):
        return column
    inner = column.element if isinstance(column, sa.Label) else column
    if isinstance(inner, utc_instant):
        # An instant reading is short by construction (it reads a 64-byte head at most): its
        # cut would read a huge stored column four more times over (docs/reliability.md).
        return sa.cast(inner, sa.Text).label(column.key)
    return shown(inner, SAMPLE_VALUE_CHARS).label(column.key)
