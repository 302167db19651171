"""The few constructs that differ between SQLite and PostgreSQL, compiled per dialect.

Every query in kandev-dq reaches timestamps and message metadata only through these:

* :class:`utc_instant` — an exact, totally ordered reading of a naive-UTC TIMESTAMP column
  (CONTRACT §1, AC-24e), at the precision the store holds. SQLite: a fixed-width
  ``YYYY-MM-DD HH:MM:SS.fffffffff`` text (nanoseconds) built from every stored shape
  (``' '``/``T``, ``+00:00``/``Z``/none, 0-9 trimmed fraction digits, no ``.`` at a whole
  second) — never ``julianday``. PostgreSQL (µs columns): ``col AT TIME ZONE 'UTC'``, so the
  session time zone never enters.
* :class:`utc_instant_latest` — the latest instant a value may stand for: a whole-second value
  (SQLite's ``CURRENT_TIMESTAMP``) stands for any instant of its second (CONTRACT §1), so order
  rules between two columns compare one's earliest reading with the other's latest.
* :func:`at_or_after` / :func:`before` — a column against a parsed key bound as a parameter
  (equality lands after, AC-24 point 3), index-friendly on both dialects.
* :func:`metadata_doc`, :func:`json_text`, :func:`json_number`, :func:`json_flag` — JSON read
  out of the TEXT ``metadata`` column with NULL / ``''`` / ``'null'`` read as ``{}`` (AC-23b),
  member names decoded and the last of repeated names winning, nesting past
  :data:`JSON_MAX_DEPTH` unreadable, alike on both dialects (AC-19).
* :class:`metadata_text` — the ``metadata`` value as the text those readings start from
  (SQLite keeps a BLOB or a number a writer bound there), and :class:`stored_not_as_text`.
* :class:`repeated_member`, :class:`metadata_too_deep` — the messages those readings name.
* :class:`recognised_utc_text` — whether a stored timestamp is one of the UTC text forms the
  SQLite exact-instant construct reads correctly (always true for PostgreSQL's typed column).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeDecorator

from kandev_dq.contract.instants import Instant, fixed_text

# --- exact instants --------------------------------------------------------------------------


class utc_instant(FunctionElement):  # noqa: N801 - reads as a SQL function
    """The exact UTC instant held by a naive-UTC TIMESTAMP column (comparable, ordered)."""

    inherit_cache = True
    type = sa.Text()


class utc_instant_latest(FunctionElement):  # noqa: N801
    """The latest instant a column value may stand for (CONTRACT §1, measured upstream).

    A value whose sub-second part is zero (SQLite's ``CURRENT_TIMESTAMP`` writes whole
    seconds, as upstream's turn-end sweep does) stands for some instant in ``[s, s + 1 s)``:
    it reads as the last representable instant of that second. Any other value reads exactly,
    as :class:`utc_instant` does. Applied alike on both dialects, so one store gives one
    verdict (AC-19).
    """

    inherit_cache = True
    type = sa.Text()


def _sqlite_fraction(col: str) -> str:
    # Fraction digits are whatever follows the '.', minus the offset; trailing zeros may be
    # dropped with it because they are padded back to nine (CONTRACT §1 trimmed widths).
    return (
        f"CASE WHEN substr({col}, 20, 1) = '.' THEN rtrim(substr({col}, 21), '+-:0Z') ELSE '' END"
    )


def _sqlite_fixed(col: str, fraction: str) -> str:
    return f"(substr({col}, 1, 10) || ' ' || substr({col}, 12, 8) || '.' || {fraction})"


@compiles(utc_instant, "sqlite")
def _utc_instant_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return _sqlite_fixed(col, f"substr(({_sqlite_fraction(col)}) || '000000000', 1, 9)")


@compiles(utc_instant_latest, "sqlite")
def _utc_instant_latest_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    fraction = _sqlite_fraction(col)
    return _sqlite_fixed(
        col,
        f"(CASE WHEN ({fraction}) = '' THEN '999999999' "
        f"ELSE substr(({fraction}) || '000000000', 1, 9) END)",
    )


@compiles(utc_instant, "postgresql")
def _utc_instant_postgresql(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return f"({col} AT TIME ZONE 'UTC')"


@compiles(utc_instant_latest, "postgresql")
def _utc_instant_latest_postgresql(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return (
        f"((CASE WHEN date_trunc('second', {col}) = {col} "
        f"THEN {col} + interval '999999 microseconds' ELSE {col} END) AT TIME ZONE 'UTC')"
    )


class instants_differ(FunctionElement):  # noqa: N801
    """Two timestamp values holding different instants, NULL-safe: ``IS DISTINCT FROM`` over
    their :class:`utc_instant` readings.

    SQLite first compares the two stored texts byte for byte: one text is one instant, so the
    exact reading (a dozen string functions per side) is built only where they differ. A pair
    the backfill copied reads as equal that way (AC-1a, AC-23a). The unary ``+`` strips the
    columns' affinities: a TIMESTAMP column would otherwise read the text ``'1e2'`` beside it
    as the number 100, and call it equal to a stored 100 whose reading differs.
    """

    inherit_cache = True
    type = sa.Boolean()


@compiles(instants_differ, "sqlite")
def _instants_differ_sqlite(element, compiler, **kw):
    left_value, right_value = list(element.clauses)
    left, right = (compiler.process(v, **kw) for v in (left_value, right_value))
    exact = (compiler.process(utc_instant(v), **kw) for v in (left_value, right_value))
    return (
        f"(CASE WHEN typeof({left}) = 'text' AND +{left} = +{right} COLLATE BINARY THEN 0 "
        f"ELSE ({' IS NOT '.join(exact)}) END)"
    )


@compiles(instants_differ, "postgresql")
def _instants_differ_postgresql(element, compiler, **kw):
    left, right = (compiler.process(utc_instant(v), **kw) for v in element.clauses)
    return f"({left} IS DISTINCT FROM {right})"


class recognised_utc_text(FunctionElement):  # noqa: N801
    """True when a TIMESTAMP column's value is one the exact-instant construct reads exactly.

    SQLite keeps whatever text a writer gave it. :class:`utc_instant` reads the forms of
    CONTRACT §1 (``YYYY-MM-DD`` then ``' '`` or ``T``, ``HH:MM:SS``, an optional ``.`` with 1-9
    digits, then nothing, ``Z``, ``+00:00`` or ``-00:00``); any other text (``30/07/2026``, a
    ``+02:00`` offset, an epoch number, a BLOB, a 30th of February) would be silently misread,
    so the rules name such rows instead (:mod:`kandev_dq.facts.stored_text`). Mirrored in
    Python by :func:`kandev_dq.contract.instants.is_recognised_stored`. NULL stays NULL.

    PostgreSQL's naive ``TIMESTAMP`` holds typed values only: always true there.
    """

    inherit_cache = True
    type = sa.Boolean()


@compiles(recognised_utc_text, "sqlite")
def _recognised_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    # The digit classes already bound each field to two digits (the year to four); text
    # comparisons finish the ranges: the year is not 0000 (the whole text, without its
    # column's affinity, sorts at or after '0001'), the month and day are a day of the
    # calendar, the hour at most 23. Only 02-29 needs SQLite's calendar: with a modifier SQLite
    # normalises the date (2026-02-29 -> 2026-03-01), so equality holds exactly in a leap year.
    # 0.24 s against 0.29 s per 278k values for the month, day and year tested one by one.
    month_day = f"substr({col}, 6, 5)"
    return (
        f"(CASE WHEN {col} IS NULL THEN NULL WHEN typeof({col}) = 'text' "
        f"AND {_recognised_shape(col)} "
        f"AND +{col} >= '0001' AND substr({col}, 12, 2) <= '23' "
        f"AND ({month_day} IN ({_MONTH_DAYS}) OR ({month_day} = '02-29' "
        f"AND date(substr({col}, 1, 10), '+0 days') = substr({col}, 1, 10))) "
        f"THEN 1 ELSE 0 END)"
    )


#: Every ``MM-DD`` of a year that has no 29th of February.
_MONTH_DAYS = ", ".join(f"'{date(2001, 1, 1) + timedelta(days=n):%m-%d}'" for n in range(365))


def _recognised_shapes() -> dict[int, list[str]]:
    """The GLOB patterns of CONTRACT §1's text forms, by length: seconds, an optional ``.``
    with 1-9 digits, then nothing, ``Z``, ``+00:00`` or ``-00:00``. At most three share one."""
    d = "[0-9]"
    seconds = f"{d * 4}-[01]{d}-[0-3]{d}[ T][0-2]{d}:[0-5]{d}:[0-5]{d}"
    shapes: dict[int, list[str]] = {}
    for zone, width in (("", 0), ("Z", 1), ("[+-]00:00", 6)):
        shapes.setdefault(19 + width, []).append(seconds + zone)
        for digits in range(1, 10):
            shapes.setdefault(20 + digits + width, []).append(f"{seconds}.{d * digits}{zone}")
    return dict(sorted(shapes.items()))


_RECOGNISED_SHAPES = _recognised_shapes()


def _recognised_shape(col: str) -> str:
    """The value matches one of :data:`_RECOGNISED_SHAPES` whole. Dispatching on the length
    tests one to three patterns per row; testing the part after the seconds apart (its
    substrings, what its digits leave) cost a third more over every message. The length is
    in bytes: ``length()`` and GLOB stop at a NUL, so a form followed by a NUL and anything
    would match (the forms are ASCII, bytes and characters agree on them). Its BLOB's length,
    not ``octet_length``: a finding query runs in any ``sqlite3`` shell, older than 3.43 too."""
    whens = " ".join(
        f"WHEN {length} THEN " + " OR ".join(f"{col} GLOB '{pattern}'" for pattern in patterns)
        for length, patterns in _RECOGNISED_SHAPES.items()
    )
    return f"(CASE length(CAST({col} AS BLOB)) {whens} ELSE 0 END)"


@compiles(recognised_utc_text, "postgresql")
def _recognised_postgresql(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return f"(CASE WHEN {col} IS NULL THEN NULL ELSE TRUE END)"


class InstantParam(TypeDecorator):
    """Binds an :class:`Instant` (or aware datetime) exactly at the store's precision (AC-24e):
    nanoseconds on SQLite, the microsecond bound (rounded up) on PostgreSQL."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name == "postgresql":
            return dialect.type_descriptor(sa.TIMESTAMP(timezone=True))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        instant = value if isinstance(value, Instant) else Instant.from_datetime(value)
        return instant.bound() if dialect.name == "postgresql" else fixed_text(instant)

    def literal_processor(self, dialect):
        """Inlined (a finding's listing query): the very value the bound parameter carries, as
        a literal the dialect reads exactly in any session time zone (AC-24e)."""

        def render(value) -> str:
            bound = self.process_bind_param(value, dialect)
            if dialect.name == "postgresql":
                return f"TIMESTAMP WITH TIME ZONE '{bound.isoformat(sep=' ')}'"
            return f"'{bound}'"

        return render


def instant_param(name: str, value: Instant | datetime) -> sa.BindParameter:
    """A key (or instant) bound as a parameter, never pasted into SQL."""
    return sa.bindparam(name, value, type_=InstantParam())


class _InstantComparison(ColumnElement):
    inherit_cache = True
    type = sa.Boolean()
    # A comparison already: SQLite must not get "(…) = 1" in a WHERE, which hides the raw
    # column bound from the planner and turns an index range into a full scan.
    _is_implicitly_boolean = True

    def __init__(self, column, param, operator: str):
        self.column = column
        self.param = param
        self.operator = operator

    _traverse_internals = [
        ("column", InternalTraversal.dp_clauseelement),
        ("param", InternalTraversal.dp_clauseelement),
        ("operator", InternalTraversal.dp_string),
    ]


@compiles(_InstantComparison, "sqlite")
def _compare_sqlite(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    param = compiler.process(element.param, **kw)
    exact = compiler.process(utc_instant(element.column), **kw)
    if element.operator == ">=":
        # The key's whole second with a space separator is a lower bound valid for every
        # recognised stored shape (' ' sorts before 'T'), so the raw column can use its index
        # up to the second before the exact comparison decides (AC-24e): a live window of
        # minutes reads minutes of an index, not the key's whole day.
        return f"({col} >= substr({param}, 1, 19) AND {exact} >= {param})"
    # The exact reading starts with the value's first ten characters, so it can only be
    # earlier than the key when they are not later than the key's date: a cheap test first.
    return (
        f"({col} < substr({param}, 1, 10) OR "
        f"((substr({col}, 1, 10) || '') <= substr({param}, 1, 10) AND {exact} < {param}))"
    )


@compiles(_InstantComparison, "postgresql")
def _compare_postgresql(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    param = compiler.process(element.param, **kw)
    # Convert the bound instant to naive UTC wall clock instead of the column: exact in any
    # session time zone and keeps the column's index usable (CONTRACT §1).
    return f"({col} {element.operator} ({param} AT TIME ZONE 'UTC'))"


def at_or_after(column, param: sa.BindParameter) -> ColumnElement:
    """``column >= key`` exactly: equality lands on the after side (AC-24 point 3)."""
    return _InstantComparison(column, param, ">=")


def before(column, param: sa.BindParameter) -> ColumnElement:
    """``column < key`` exactly (AC-24 point 3)."""
    return _InstantComparison(column, param, "<")


# --- metadata JSON ---------------------------------------------------------------------------


class metadata_text(FunctionElement):  # noqa: N801
    """The ``metadata`` column as the text every reading of it starts from (AC-23b).

    SQLite keeps any value a writer binds, whatever the column's declared type: a BLOB (how a
    Go ``[]byte`` binds), or an integer or a real in a column without TEXT affinity. The text
    is ``CAST(metadata AS TEXT)``: the bytes a BLOB holds, read as the same bytes stored as
    text would be (``docs/interpretations.md``), and a number's text, which as JSON has no
    member (no kind, like ``{}``). Never the raw value: since 3.45 SQLite's JSON functions
    read a BLOB as JSONB, and ``GLOB`` finds no text in one. A text value is unchanged.
    PostgreSQL's column is ``text``: the column itself.
    """

    inherit_cache = True
    type = sa.Text()


@compiles(metadata_text, "sqlite")
def _metadata_text_sqlite(element, compiler, **kw):
    return f"CAST({compiler.process(element.clauses, **kw)} AS TEXT)"


@compiles(metadata_text, "postgresql")
def _metadata_text_postgresql(element, compiler, **kw):
    return compiler.process(element.clauses, **kw)


class stored_not_as_text(FunctionElement):  # noqa: N801
    """SQLite: ``metadata`` stored as a BLOB, an integer or a real rather than as text
    (AC-23b): named wherever it is read, whatever it holds. PostgreSQL's ``text`` column
    holds nothing else: false."""

    inherit_cache = True
    type = sa.Boolean()


@compiles(stored_not_as_text, "sqlite")
def _stored_not_as_text_sqlite(element, compiler, **kw):
    return f"(typeof({compiler.process(element.clauses, **kw)}) NOT IN ('text', 'null'))"


@compiles(stored_not_as_text, "postgresql")
def _stored_not_as_text_postgresql(element, compiler, **kw):
    return "false"


class metadata_doc(FunctionElement):  # noqa: N801
    """``metadata`` as a JSON document, with NULL / '' / 'null' / invalid text read as {} (AC-23b).

    SQLite's ``json_valid`` already reads text that is not JSON as ``{}``. PostgreSQL's
    ``::jsonb`` cast aborts the whole statement on such text instead, so the few messages
    whose metadata it cannot parse are located (only after a statement failed, see
    :func:`kandev_dq.sql.messages.locate_unreadable_metadata`) and passed here as ``excluded`` ids,
    with the table's ``id_column``: those rows read as ``{}`` too. The exclusion is compiled
    only when the list is non-empty, so the common statement is unchanged.

    Nesting deeper than :data:`JSON_MAX_DEPTH` reads as ``{}`` on both dialects (SQLite's own
    parser limit; PostgreSQL probes only documents with more brackets than the limit).

    PostgreSQL casts once per row (``::jsonb``); read it through a subquery column so the cast
    is not repeated per extracted field. ``as_text`` leaves the text uncast, every member as
    written, for :class:`repeated_member` (``jsonb`` keeps only the last of repeated names).

    ``mentions`` (a reader that keeps only documents holding that string value, such as the
    kind ``subagent_task``), PostgreSQL only: a text that holds neither it nor an escape
    (``\\u``, the only other way to spell its letters) reads as ``{}`` without being parsed
    (most messages: each read of them costs a fraction). SQLite evaluates the document at
    every reference of a flattened subquery, where the test would be repeated and cost more
    than its cheap ``json_valid`` saves.
    """

    inherit_cache = True
    type = sa.Text()
    _traverse_internals = FunctionElement._traverse_internals + [
        ("as_text", InternalTraversal.dp_plain_obj),
        ("mentions", InternalTraversal.dp_plain_obj),
    ]

    def __init__(
        self,
        column,
        *,
        id_column=None,
        excluded: Sequence[str] = (),
        as_text: bool = False,
        mentions: str | None = None,
    ):
        self.as_text = as_text
        self.mentions = mentions
        excluded = tuple(excluded)
        if excluded and id_column is None:
            raise ValueError("excluded ids need the id column they refer to")
        clauses = [column]
        if excluded:
            clauses.append(_excluded_ids(id_column, excluded))
        super().__init__(*clauses)


def one_of(column, ids: tuple[str, ...], name: str) -> ColumnElement:
    """``column`` is one of ``ids``, bound as ONE parameter ``name`` (a ``text[]`` on
    PostgreSQL, a JSON array on SQLite): a filter no join plan can repeat per row, whatever
    the planner believes about either side's size."""
    return _IdIn(column, sa.bindparam(name, list(ids), type_=_ID_ARRAY, unique=True))


def _excluded_ids(id_column, ids: tuple[str, ...]) -> ColumnElement:
    """``id_column`` is one of ``ids``: one array parameter on PostgreSQL, an IN list elsewhere."""
    return _IdIn(
        id_column, sa.bindparam("unreadable_metadata_ids", list(ids), type_=_ID_ARRAY, unique=True)
    )


class _IdArray(TypeDecorator):
    """A list of ids as one parameter: a ``text[]`` on PostgreSQL, a JSON array on SQLite."""

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect):
        if dialect.name == "postgresql":
            return dialect.type_descriptor(ARRAY(sa.Text))
        return dialect.type_descriptor(sa.Text())

    def process_bind_param(self, value, dialect):
        return list(value) if dialect.name == "postgresql" else json.dumps(list(value))


_ID_ARRAY = _IdArray()


class _IdIn(ColumnElement):
    inherit_cache = True
    type = sa.Boolean()
    # A test already: SQLite must not get "(…) = 1" in a WHERE, which hides the list from the
    # planner and scans the table rather than looking each id up.
    _is_implicitly_boolean = True

    def __init__(self, column, param):
        self.column = column
        self.param = param

    _traverse_internals = [
        ("column", InternalTraversal.dp_clauseelement),
        ("param", InternalTraversal.dp_clauseelement),
    ]


@compiles(_IdIn, "postgresql")
def _id_in_postgresql(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    return f"({col} = ANY ({compiler.process(element.param, **kw)}))"


@compiles(_IdIn, "sqlite")
def _id_in_sqlite(element, compiler, **kw):
    col = compiler.process(element.column, **kw)
    param = compiler.process(element.param, **kw)
    return f"({col} IN (SELECT value FROM json_each({param})))"


#: Deepest nesting of objects and arrays a metadata document may have (AC-23b, AC-19): the
#: SQLite kandev-dq reads with (3.45 and later, :mod:`kandev_dq.store.sqlite_driver`) stops past
#: 1,000 levels (``json_valid`` is 0 and the message reads as ``{}``); PostgreSQL parses far
#: deeper and raises "stack depth limit exceeded" near 100,000. Deeper documents are unreadable
#: on both dialects, so both read them as ``{}``.
JSON_MAX_DEPTH = 1000


def _pg_too_deep(col: str) -> str:
    # Each level takes two characters, and counting '{' and '[' bounds the depth from above
    # (brackets inside strings count too): only a document past both tests, the first read from
    # the value's header, is counted, then parsed once more and walked. Counted in bytes with
    # replace: translate decodes every character (nine times slower over large documents).
    return (
        f"(CASE WHEN octet_length({col}) > {2 * JSON_MAX_DEPTH} "
        f"AND octet_length({col}) - octet_length(replace(replace({col}, '{{', ''), '[', '')) "
        f"> {JSON_MAX_DEPTH} "
        f"THEN jsonb_path_exists({col}::jsonb, 'strict $.**{{{JSON_MAX_DEPTH} to last}} "
        f'? (@.type() == "object" || @.type() == "array")\') ELSE FALSE END)'
    )


def _doc_text(element, compiler, **kw) -> str:
    """The metadata text, or ``'{}'`` where it is unreadable (AC-23b), before any cast.

    Conditions are separate WHENs because only CASE fixes PostgreSQL's evaluation order: the
    depth probe parses the text, so it must never see an excluded (unparsable) row.
    """
    clauses = list(element.clauses)
    col = compiler.process(clauses[0], **kw)
    excluded = compiler.process(clauses[1], **kw) if len(clauses) > 1 else None
    unreadable = []
    if element.mentions is not None and compiler.dialect.name == "postgresql":
        unreadable.append(
            f"NOT (strpos({col}, {_quoted(element.mentions)}) > 0 "
            f"OR {_holds_escape(col, _percent(compiler))})"
        )
    if compiler.dialect.name == "postgresql":
        # A text holding '{' never trims to '' or 'null'; testing that first (most documents
        # open with it) spares a trimmed copy of each (0.36 -> 0.18 s over 1.1M messages).
        unreadable.append(
            f"{col} IS NULL OR (strpos({col}, '{{') = 0 AND btrim({col}) IN ('', 'null'))"
        )
        if excluded:
            unreadable.append(excluded)
        unreadable.append(_pg_too_deep(col))
    else:
        unreadable.append(f"NOT json_valid({col})")  # also 0 past JSON_MAX_DEPTH
        if excluded:
            unreadable.append(excluded)
    whens = " ".join(f"WHEN {condition} THEN '{{}}'" for condition in unreadable)
    return f"(CASE {whens} ELSE {col} END)"


@compiles(metadata_doc, "sqlite")
def _doc_sqlite(element, compiler, **kw):
    return _doc_text(element, compiler, **kw)


@compiles(metadata_doc, "postgresql")
def _doc_postgresql(element, compiler, **kw):
    text = _doc_text(element, compiler, **kw)
    return text if element.as_text else f"{text}::jsonb"


class metadata_too_deep(metadata_doc):  # noqa: N801
    """PostgreSQL: metadata that parses, but nests deeper than :data:`JSON_MAX_DEPTH` (AC-23b).

    :class:`metadata_doc` reads it as ``{}``; the rule on unreadable metadata names it, as it
    names SQLite's (whose ``json_valid`` is already 0 for it). ``excluded`` rows are never
    parsed. SQLite needs no such construct and has none.
    """

    inherit_cache = True
    type = sa.Boolean()


@compiles(metadata_too_deep, "postgresql")
def _too_deep_postgresql(element, compiler, **kw):
    clauses = list(element.clauses)
    col = compiler.process(clauses[0], **kw)
    skip = f"WHEN {compiler.process(clauses[1], **kw)} THEN FALSE " if len(clauses) > 1 else ""
    return f"(CASE WHEN {col} IS NULL THEN FALSE {skip}ELSE {_pg_too_deep(col)} END)"


class _JsonPath(FunctionElement):
    """A reading of ``path`` in the document ``doc`` (a :class:`metadata_doc`). ``stored``, the
    metadata text the document was built from, is what SQLite's test for escaped or repeated
    names reads: ``doc`` itself would be rebuilt for each of its patterns. An unreadable text
    is read as ``{}``, where both readings agree, so the test may pass it either way.

    ``exact`` instead is that test already made for the row (:class:`exact_walk_needed` over
    this path among others, read through :func:`once_per_row`): a reader of many fields then
    tests each document once, not once per field."""

    inherit_cache = True

    def __init__(self, doc, *path: str, stored=None, exact=None):
        self.path = tuple(path)
        self.tested = exact is not None
        test = exact if exact is not None else stored
        super().__init__(*((doc,) if test is None else (doc, test)))

    _traverse_internals = FunctionElement._traverse_internals + [
        ("path", InternalTraversal.dp_plain_obj),
        ("tested", InternalTraversal.dp_plain_obj),
    ]


class json_text(_JsonPath):  # noqa: N801
    """A JSON string at ``path`` as text; any other JSON type reads as NULL."""

    inherit_cache = True

    type = sa.Text()


class json_filled_text(_JsonPath):  # noqa: N801
    """A non-empty JSON string at ``path`` as text; ``""`` and any other JSON type read as NULL
    (CONTRACT §2's empty-as-NULL applied as the field is read). Tested by length, never
    through ``nullif``: SQLite's ``nullif`` copies its argument, and SQLite keeps that copy
    beside the extracted value (one more copy of a 50 MB description per row read). The
    length is in bytes: SQLite's ``length()`` stops at a NUL, so ``"\\u0000…"`` read as NULL."""

    inherit_cache = True

    type = sa.Text()


class json_number(_JsonPath):  # noqa: N801
    """A JSON number at ``path``; any other JSON type reads as NULL."""

    inherit_cache = True

    type = sa.Numeric()


class json_flag(_JsonPath):  # noqa: N801
    """A JSON boolean (or 0/1 number) at ``path`` as 1/0; anything else reads as NULL."""

    inherit_cache = True

    type = sa.Integer()


def _sqlite_path(path: tuple[str, ...]) -> str:
    return "'$." + ".".join(path) + "'"


def _pg_path(path: tuple[str, ...]) -> str:
    return "'{" + ",".join(path) + "}'"


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# SQLite's path lookup (``json_extract``, ``json_type``) compares member names as written: it
# misses an escaped name (``"\u006bind"`` is ``"kind"``) and takes the first of repeated names.
# JSON means the decoded name, and the reading decided for repeated names is the last one, as
# PostgreSQL reads them (AC-19: one classification on both dialects). ``json_each`` decodes
# names, so a document that may hold either takes an exact walk with it; the cheap text test
# below sends only those documents there, every other one keeps the single-parse fast path.

#: How often a member name's quoted text appears in a well-formed subagent message: ``status``
#: is read at two levels, and ``"subagent_task"`` is both a member name and the kind's value.
#: Only a cost hint: a document with more occurrences just takes the exact walk.
_WELL_FORMED_OCCURRENCES = {"status": 2, "subagent_task": 2}
#: The names read in two objects, with those objects (the steps reaching each): a well-formed
#: document writes such a name once in each, and two occurrences may instead be one object's
#: repeated member. When both objects hold the name, two occurrences are one in each.
#: (``"subagent_task"`` twice is its name and the kind: a repeated member makes three.)
_READ_IN_TWO_OBJECTS = {"status": ((), ("normalized", "subagent_task"))}


def _needs_exact(
    text: str, doc: str, path: tuple[str, ...], dialect: str, percent: str = "%"
) -> str:
    """True when a document's text may hold an escaped or a repeated name of ``path``.

    Any escaped spelling of a plain name needs :data:`_NAME_ESCAPE`; a repeated name shows its
    quoted text more often than a well-formed document does. A pattern with one more occurrence
    than allowed finds it (this runs over every message's document): GLOB on SQLite, where
    counting with ``replace`` cost more; on PostgreSQL ``replace`` counts them in less time than
    LIKE's pattern takes. ``percent`` is how the statement spells LIKE's ``%`` (doubled for a
    ``format`` driver) in the escape test.
    ``doc`` is the document ``text`` reads as (see :data:`_READ_IN_TWO_OBJECTS`).
    """
    repeated = [_repeated_text(text, doc, name, dialect) for name in dict.fromkeys(path)]
    return "(" + " OR ".join([_escaped_text(text, dialect, percent), *repeated]) + ")"


#: What an escaped spelling of a read name (or of the kind) needs: each is lowercase ASCII
#: letters and ``_``, so an escape of one of its characters is ``\\u005f`` or ``\\u0061`` to
#: ``\\u007a``, in either case. Other escapes (``\\u003c`` for ``<``, as Go writes it, accented
#: letters) spell no name: a document holding only those keeps the fast path.
_NAME_ESCAPE = "\\u00[5-7][0-9A-Fa-f]"


def _escaped_text(text: str, dialect: str, percent: str) -> str:
    if dialect == "sqlite":
        return f"{text} GLOB '*{_NAME_ESCAPE}*'"
    # The regular expression only runs on the rare text holding an escape at all.
    return f"({_holds_escape(text, percent)} AND {text} ~ '\\{_NAME_ESCAPE}')"


def _holds_escape(text: str, percent: str) -> str:
    """PostgreSQL: ``text`` holds ``\\u``. LIKE, not ``strpos``: over every message, strpos of
    these two characters cost 2.4 times LIKE's time (0.10 s against 0.04 s per 278k)."""
    return f"{text} LIKE '{percent}\\\\u{percent}'"


def _percent(compiler) -> str:
    """How a statement spells LIKE's ``%``: doubled for a ``format`` driver (psycopg)."""
    return "%%" if compiler.dialect.paramstyle in ("format", "pyformat") else "%"


def _occurs(text: str, name: str, times: int, dialect: str, exactly: bool = False) -> str:
    """``name``'s quoted text appears at least (PostgreSQL: or ``exactly``) ``times`` times in
    ``text``, never overlapping."""
    quoted = f'"{name}"'
    if dialect == "sqlite":
        assert not exactly
        return f"{text} GLOB {_quoted('*' + (quoted + '*') * times)}"
    if times == 1 and not exactly:  # strpos: half of LIKE's time (0.02 s against 0.05 s)
        return f"strpos({text}, {_quoted(quoted)}) > 0"
    return f"{_removed(text, quoted)} {'=' if exactly else '>='} {times * len(quoted.encode())}"


def _removed(text: str, quoted: str) -> str:
    """PostgreSQL: how many bytes removing every occurrence of ``quoted`` takes from ``text``,
    which counts them. 0.45 of the time of LIKE's '%"name"%"name"%' (eleven names over 105k
    subagent messages: 0.21 s against 0.48 s)."""
    return f"octet_length({text}) - octet_length(replace({text}, {_quoted(quoted)}, ''))"


def _repeated_text(text: str, doc: str, name: str, dialect: str, unpaired: bool = True) -> str:
    """``name`` may be repeated: written more often than a well-formed document writes it, or
    (``unpaired``, see :class:`unpaired_names`) as often, but missing from one of its objects."""
    usual = _WELL_FORMED_OCCURRENCES.get(name, 1)
    more = _occurs(text, name, usual + 1, dialect)
    if name not in _READ_IN_TWO_OBJECTS or not unpaired:
        return more
    absent = " OR ".join(
        _member_absent(doc, (*steps, name), dialect) for steps in _READ_IN_TWO_OBJECTS[name]
    )
    return f"({more} OR ({_occurs(text, name, usual, dialect)} AND ({absent})))"


def _member_absent(doc: str, path: tuple[str, ...], dialect: str) -> str:
    """No member at ``path``, read plainly (a name along it that is escaped or repeated
    already sends the document to the exact walk). A JSON ``null`` is a member."""
    if dialect == "sqlite":
        return f"json_type({doc}, {_sqlite_path(path)}) IS NULL"
    return f"({doc} #> {_pg_path(path)}) IS NULL"


def _may_repeat(
    text: str,
    doc: str,
    paths: tuple[tuple[str, ...], ...],
    dialect: str,
    percent: str = "%",
    mentioning: str | None = None,
    unpaired: bool = True,
) -> str:
    """:func:`_needs_exact` over every name of ``paths``, each object's names tested only in a
    text that names the object: a member of ``normalized.subagent_task`` can repeat only where
    ``"subagent_task"`` is written (an escaped spelling is caught by the ``\\u`` test). Most
    messages are not subagent messages, and skip most patterns. With ``mentioning``, no name
    is tested in a text that does not write that JSON string (nor any escape)."""
    tested: set[str] = set()
    groups = []
    for steps, names in _named_members(paths).items():
        fresh = [name for name in names if name not in tested]
        tested.update(fresh)
        if not fresh:
            continue
        repeated = " OR ".join(_repeated_text(text, doc, name, dialect, unpaired) for name in fresh)
        if steps:
            repeated = f"{_occurs(text, steps[-1], 1, dialect)} AND ({repeated})"
        groups.append(f"({repeated})")
    names = " OR ".join(groups)
    if mentioning is not None:
        names = f"{_occurs(text, mentioning, 1, dialect)} AND ({names})"
    return f"({_escaped_text(text, dialect, percent)} OR ({names}))"


def _sqlite_object(doc: str, steps: tuple[str, ...]) -> str:
    """The object reached by ``steps`` (last member of each name, names decoded), else NULL."""
    for depth, name in enumerate(steps):
        doc = _sqlite_member(doc, name, "CASE WHEN type = 'object' THEN value END", depth)
    return doc


def _sqlite_member(obj: str, name: str, read: str, depth: int) -> str:
    """``read`` (over ``json_each``'s ``type`` and ``value``) of ``obj``'s last member ``name``.

    The last member is the one with the greatest ``id``: SQLite takes a bare column from the
    row holding ``max()``. NULL when there is none (the aggregate still yields one row).
    """
    alias = f"kandev_member{depth}"
    return (
        f"(SELECT {read} FROM (SELECT {alias}.type AS type, {alias}.value AS value, "
        f"max({alias}.id) FROM json_each({obj}) AS {alias} "
        f"WHERE {alias}.key = {_quoted(name)}))"
    )


def _sqlite_read(element, compiler, fast: str, exact_read: str, **kw) -> str:
    """``fast`` (a path lookup over ``{doc}`` and ``{p}``) for the common document, else the
    same reading as ``exact_read`` over the last member reached with decoded names."""
    clauses = [compiler.process(clause, **kw) for clause in element.clauses]
    doc, test = clauses[0], clauses[-1]
    path = element.path
    exact = _sqlite_member(_sqlite_object(doc, path[:-1]), path[-1], exact_read, len(path))
    needs_exact = test if element.tested else _needs_exact(test, doc, path, "sqlite")
    return (
        f"(CASE WHEN {needs_exact} THEN {exact} "
        f"ELSE {fast.format(doc=doc, p=_sqlite_path(path))} END)"
    )


def _pg_read(element, compiler, read: str, **kw) -> str:
    """``read`` over ``{value}`` and ``{text}``, the jsonb document's value at the path and
    that value as text, on PostgreSQL, whose path operators already decode names and take the
    last of repeated ones. A path of one name is read with ``->``: unlike ``#>`` it builds no
    path array per row (0.09 s less over the three top-level fields of 105k documents)."""
    doc = compiler.process(list(element.clauses)[0], **kw)
    path = element.path
    if len(path) == 1:
        name = _quoted(path[0])
        return read.format(value=f"{doc} -> {name}", text=f"{doc} ->> {name}")
    p = _pg_path(path)
    return read.format(value=f"{doc} #> {p}", text=f"{doc} #>> {p}")


@compiles(json_text, "sqlite")
def _text_sqlite(element, compiler, **kw):
    return _sqlite_read(
        element,
        compiler,
        "(CASE WHEN json_type({doc}, {p}) = 'text' THEN json_extract({doc}, {p}) END)",
        "CASE WHEN type = 'text' THEN value END",
        **kw,
    )


@compiles(json_text, "postgresql")
def _text_postgresql(element, compiler, **kw):
    return _pg_read(
        element,
        compiler,
        "(CASE WHEN jsonb_typeof({value}) = 'string' THEN {text} END)",
        **kw,
    )


@compiles(json_filled_text, "sqlite")
def _filled_text_sqlite(element, compiler, **kw):
    return _sqlite_read(
        element,
        compiler,
        "(CASE WHEN json_type({doc}, {p}) = 'text' "
        "AND length(CAST(json_extract({doc}, {p}) AS BLOB)) > 0 "
        "THEN json_extract({doc}, {p}) END)",
        "CASE WHEN type = 'text' AND length(CAST(value AS BLOB)) > 0 THEN value END",
        **kw,
    )


@compiles(json_filled_text, "postgresql")
def _filled_text_postgresql(element, compiler, **kw):
    return _pg_read(
        element,
        compiler,
        "(CASE WHEN jsonb_typeof({value}) = 'string' THEN nullif({text}, '') END)",
        **kw,
    )


@compiles(json_number, "sqlite")
def _number_sqlite(element, compiler, **kw):
    return _sqlite_read(
        element,
        compiler,
        "(CASE WHEN json_type({doc}, {p}) IN ('integer', 'real') "
        "THEN json_extract({doc}, {p}) END)",
        "CASE WHEN type IN ('integer', 'real') THEN value END",
        **kw,
    )


@compiles(json_number, "postgresql")
def _number_postgresql(element, compiler, **kw):
    return _pg_read(
        element,
        compiler,
        "(CASE WHEN jsonb_typeof({value}) = 'number' THEN ({text})::numeric END)",
        **kw,
    )


@compiles(json_flag, "sqlite")
def _flag_sqlite(element, compiler, **kw):
    # json_each gives true/false as 1/0 with their own type names.
    return _sqlite_read(
        element,
        compiler,
        "(CASE json_type({doc}, {p}) WHEN 'true' THEN 1 WHEN 'false' THEN 0 "
        "WHEN 'integer' THEN (json_extract({doc}, {p}) <> 0) "
        "WHEN 'real' THEN (json_extract({doc}, {p}) <> 0) END)",
        "CASE type WHEN 'true' THEN 1 WHEN 'false' THEN 0 "
        "WHEN 'integer' THEN (value <> 0) WHEN 'real' THEN (value <> 0) END",
        **kw,
    )


@compiles(json_flag, "postgresql")
def _flag_postgresql(element, compiler, **kw):
    return _pg_read(
        element,
        compiler,
        "(CASE jsonb_typeof({value}) WHEN 'boolean' THEN "
        "CASE WHEN ({text})::boolean THEN 1 ELSE 0 END "
        "WHEN 'number' THEN CASE WHEN ({text})::numeric <> 0 THEN 1 ELSE 0 END END)",
        **kw,
    )


class may_hold_string(FunctionElement):  # noqa: N801
    """The text ``stored`` may be a document holding the JSON string ``value`` (lowercase ASCII
    letters and ``_`` only): it writes that string, or an escape that can spell one of its
    characters (:data:`_NAME_ESCAPE`, the only other way to write them). A test without a
    parse, for a reader keeping only documents that hold the value: most messages are then
    never parsed."""

    inherit_cache = True
    type = sa.Boolean()

    def __init__(self, stored, value: str):
        self.value = value
        super().__init__(stored)

    _traverse_internals = FunctionElement._traverse_internals + [
        ("value", InternalTraversal.dp_plain_obj)
    ]


@compiles(may_hold_string, "sqlite")
@compiles(may_hold_string, "postgresql")
def _may_hold_string(element, compiler, **kw):
    stored = compiler.process(list(element.clauses)[0], **kw)
    dialect = compiler.dialect.name
    written = _occurs(stored, element.value, 1, dialect)
    return f"({written} OR {_escaped_text(stored, dialect, _percent(compiler))})"


class _NamesAlong(FunctionElement):
    """A test of the member names along ``paths`` in a message's metadata: ``doc`` is its
    document, ``stored`` its text; with ``mentioning`` (a string value), only messages whose
    text writes that JSON string (or an escape) are tested, the names of ``paths`` being read
    only in messages holding it."""

    inherit_cache = True
    type = sa.Boolean()

    def __init__(
        self,
        doc,
        stored,
        *paths: tuple[str, ...],
        mentioning: str | None = None,
        unpaired: bool = True,
    ):
        self.paths = tuple(tuple(path) for path in paths)
        self.mentioning = mentioning
        self.unpaired = unpaired
        super().__init__(doc, stored)

    _traverse_internals = FunctionElement._traverse_internals + [
        ("paths", InternalTraversal.dp_plain_obj),
        ("mentioning", InternalTraversal.dp_plain_obj),
        ("unpaired", InternalTraversal.dp_plain_obj),
    ]


class exact_walk_needed(_NamesAlong):  # noqa: N801
    """True when the metadata may hold an escaped or a repeated name along one of ``paths``:
    the test of :class:`json_text` and its kin, made once for all of them, and the text test
    of :class:`repeated_member`. With ``unpaired=False`` it leaves out the names written as
    often as usual but missing from one of their objects: the caller counts those with
    :class:`unpaired_names`."""

    inherit_cache = True


@compiles(exact_walk_needed, "sqlite")
@compiles(exact_walk_needed, "postgresql")
def _exact_walk_needed(element, compiler, **kw):
    document, stored = (compiler.process(clause, **kw) for clause in element.clauses)
    dialect = compiler.dialect.name
    # PostgreSQL reads the two objects of a name like ``status`` from the text as ``json``.
    doc = f"({document})::json" if dialect == "postgresql" else document
    percent = _percent(compiler)
    return _may_repeat(
        stored, doc, element.paths, dialect, percent, element.mentioning, element.unpaired
    )


class unpaired_names(_NamesAlong):  # noqa: N801
    """PostgreSQL, per message: 1 when a name read in two objects (:data:`_READ_IN_TWO_OBJECTS`)
    along ``paths`` is written exactly as often as a well-formed document writes it, but one of
    its objects lacks it (so the occurrences may be one object's repeated member), else 0.

    The part of :class:`exact_walk_needed` that reads the document rather than its text, for a
    scan that also parses every document (``parse_every``: one that cannot be parsed fails the
    scan, AC-23b). Both take one parse of each document: reading the two paths as ``json``
    instead lexed each subagent message twice more (0.58 s of the stored-text scan's 3.06 s at
    1.1M messages; this form 2.22 s)."""

    inherit_cache = True
    type = sa.Integer()

    def __init__(self, doc, stored, *paths: tuple[str, ...], mentioning: str, parse_every: bool):
        self.parse_every = parse_every
        super().__init__(doc, stored, *paths, mentioning=mentioning)

    _traverse_internals = _NamesAlong._traverse_internals + [
        ("parse_every", InternalTraversal.dp_plain_obj),
    ]


@compiles(unpaired_names, "postgresql")
def _unpaired_names_postgresql(element, compiler, **kw):
    document, stored = (compiler.process(clause, **kw) for clause in element.clauses)
    names = [n for n in _READ_IN_TWO_OBJECTS if any(n in path for path in element.paths)]
    as_usual = " OR ".join(
        _occurs(stored, n, _WELL_FORMED_OCCURRENCES[n], "postgresql", exactly=True) for n in names
    )
    # strict: a step into a value that is not an object is an error, which makes the test
    # unknown (not true), as ``#>`` reads NULL there; lax mode would look inside arrays.
    present = " && ".join(
        "exists($" + "".join(f'."{step}"' for step in (*steps, n)) + ")"
        for n in names
        for steps in _READ_IN_TWO_OBJECTS[n]
    )
    parsed = f"({document})::jsonb"
    paired = f"jsonb_path_match({parsed}, {_quoted('strict ' + present)}, '{{}}', true)"
    mentioned = _occurs(stored, element.mentioning, 1, "postgresql")
    # Every other document parsed all the same (its value unused): the scan then reads each
    # document's JSON once whichever branch it takes.
    rest = f"WHEN {parsed} IS NULL THEN 0 " if element.parse_every else ""
    return (
        f"(CASE WHEN {mentioned} AND ({as_usual}) THEN (CASE WHEN {paired} THEN 0 ELSE 1 END) "
        f"{rest}ELSE 0 END)"
    )


class computed_once(FunctionElement):  # noqa: N801
    """``value`` as a column its subquery computes once per row, the subquery kept whole.

    PostgreSQL merges a plain subquery into the query reading it and recomputes a column's
    expression at every reference (a ``::jsonb`` parse once per field read). It never merges
    one whose select list holds a set-returning function; a one-element ``unnest`` is one, so
    the column is computed once per row, and, unlike an ``OFFSET 0`` fence, the subquery stays
    open to parallel workers and to the filters of the query reading it (those on other
    columns). SQLite: the value itself (its parse cache serves repeated reads).
    """

    inherit_cache = True

    def __init__(self, value):
        super().__init__(value)
        self.type = value.type


@compiles(computed_once, "sqlite")
def _computed_once_sqlite(element, compiler, **kw):
    return compiler.process(element.clauses, **kw)


@compiles(computed_once, "postgresql")
def _computed_once_postgresql(element, compiler, **kw):
    return f"unnest(ARRAY[{compiler.process(element.clauses, **kw)}])"


class _one_row(FunctionElement):  # noqa: N801
    """A one-row table whose ``value`` is its argument, evaluated once per row joined to it."""

    inherit_cache = True


@compiles(_one_row, "sqlite")
def _one_row_sqlite(element, compiler, **kw):
    # SQLite has no LATERAL, and a flattened subquery's expression is evaluated again at each
    # reference; a table-valued function takes correlated arguments and runs once per row.
    return f"json_each(json_array({compiler.process(element.clauses, **kw)}))"


@compiles(_one_row, "postgresql")
def _one_row_postgresql(element, compiler, **kw):
    # PostgreSQL's readers need no text test (its path operators read names exactly): the
    # value is never read, and never computed.
    return "(SELECT NULL::boolean AS value)"


def once_per_row(condition, name: str) -> sa.TableValuedAlias:
    """``condition`` as the ``value`` column of a one-row table named ``name``: joined to a
    row (``ON true``), SQLite evaluates it once for that row however often it is read."""
    return _one_row(condition).table_valued("value").alias(name)


class repeated_member(_NamesAlong):  # noqa: N801
    """True when an object along one of ``paths`` holds that path's member name more than once.

    JSON leaves repeated names open (RFC 8259); kandev-dq reads the last one on both dialects
    (``docs/interpretations.md``) and names such messages (AC-23b, AC-19). Names are compared
    decoded. ``doc`` is a :class:`metadata_doc` built ``as_text``. One text test over every name
    of ``paths`` decides which documents are parsed and walked; it reads ``stored``, the
    metadata text the document comes from (an unreadable one is read as ``{}``, which repeats
    nothing), so that the test does not rebuild the document once per name.

    With ``mentioning`` (a string value), only messages whose text writes that JSON string (or
    any escape) are tested: the names of ``paths`` are read only in messages holding it.
    """

    inherit_cache = True


def _named_members(paths: tuple[tuple[str, ...], ...]) -> dict[tuple[str, ...], list[str]]:
    """Each object the paths walk through (as the steps reaching it), with the names read in it."""
    objects: dict[tuple[str, ...], list[str]] = {}
    for path in paths:
        for depth, name in enumerate(path):
            names = objects.setdefault(path[:depth], [])
            if name not in names:
                names.append(name)
    return objects


@compiles(repeated_member, "sqlite")
def _repeated_sqlite(element, compiler, **kw):
    doc, stored = (compiler.process(clause, **kw) for clause in element.clauses)
    counts = " OR ".join(
        f"(SELECT count(*) FROM json_each({_sqlite_object(doc, steps)}) AS kandev_named "
        f"WHERE kandev_named.key = {_quoted(name)}) > 1"
        for steps, names in _named_members(element.paths).items()
        for name in names
    )
    may_repeat = _may_repeat(stored, doc, element.paths, "sqlite", mentioning=element.mentioning)
    return f"(CASE WHEN {may_repeat} THEN ({counts}) ELSE 0 END)"


@compiles(repeated_member, "postgresql")
def _repeated_postgresql(element, compiler, **kw):
    # ``json`` keeps every member; its path operators take the last of repeated names, as
    # ``jsonb`` does, and json_each lists every member, names decoded. Only an object may be
    # listed (json_each raises else). Parsed only when the text test lets the document through.
    document, stored = (compiler.process(clause, **kw) for clause in element.clauses)
    doc = f"({document})::json"
    counts = " OR ".join(
        f"(CASE WHEN json_typeof({_pg_object(doc, steps)}) = 'object' THEN "
        f"(SELECT count(*) FROM json_each({_pg_object(doc, steps)}) AS kandev_named "
        f"WHERE kandev_named.key = {_quoted(name)}) > 1 ELSE FALSE END)"
        for steps, names in _named_members(element.paths).items()
        for name in names
    )
    percent = _percent(compiler)
    may_repeat = _may_repeat(stored, doc, element.paths, "postgresql", percent, element.mentioning)
    return f"(CASE WHEN {may_repeat} THEN ({counts}) ELSE FALSE END)"


def _pg_object(doc: str, steps: tuple[str, ...]) -> str:
    return f"({doc} #> {_pg_path(steps)})" if steps else doc


# --- insert-if-absent ----------------------------------------------------------------------------


def insert_if_absent(dialect: str, table: sa.Table, unique: Sequence[str]) -> sa.Insert:
    """``INSERT ... ON CONFLICT (unique) DO NOTHING`` for ``dialect`` (``conn.dialect.name``):
    the database, not the caller, decides which of two concurrent writers holds a first value
    (AC-24 write-once). Both dialects spell it alike; SQLAlchemy offers it per dialect only."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        raise ValueError(f"no insert-if-absent for {dialect!r}")
    return insert(table).on_conflict_do_nothing(index_elements=list(unique))


@contextmanager
def index_reads(conn: sa.Connection, *, small: bool = True) -> Iterator[None]:
    """While the block runs, a ``small`` read (a live window's: what changed, and the keys
    and sessions it names, on a store with the indexes that read them) is planned for those
    indexes: PostgreSQL prices sequential scans out (``enable_seqscan``, in this transaction),
    as its estimates of a window's newest rows lie past its statistics and a list of thousands
    of ids let it scan the whole table instead. SQLite plans by its indexes: nothing to do.
    The setting is put back when the block ends; after a failure, the rollback that follows
    (to the facts' savepoint, or of the whole read) puts it back."""
    if not small or conn.dialect.name != "postgresql":
        yield
        return
    previous = conn.exec_driver_sql("SELECT current_setting('enable_seqscan')").scalar_one()
    conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
    yield
    conn.execute(sa.select(sa.func.set_config("enable_seqscan", previous, sa.true())))
