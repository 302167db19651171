"""Exact UTC instants (CONTRACT §1, §5): every comparison of stored timestamps goes through these.

* :class:`utc_instant` — an exact, totally ordered reading of a naive-UTC TIMESTAMP column
  (CONTRACT §1, AC-24e), at the precision the store holds. SQLite: a fixed-width
  ``YYYY-MM-DD HH:MM:SS.fffffffff`` text (nanoseconds) built from every stored shape
  (``' '``/``T``, ``+00:00``/``Z``/none, 0-9 trimmed fraction digits, no ``.`` at a whole
  second) — never ``julianday``. PostgreSQL (µs columns): ``col AT TIME ZONE 'UTC'``, so the
  session time zone never enters.
* :class:`utc_instant_latest` — the latest instant a value may stand for: a whole-second value
  (SQLite's ``CURRENT_TIMESTAMP``) stands for any instant of its second (CONTRACT §1), so order
  rules between two columns compare one's earliest reading with the other's latest.
* :class:`instants_differ` — two values holding different instants, NULL-safe.
* :func:`at_or_after` / :func:`before` — a column against a parsed key bound as a parameter
  (:func:`instant_param`; equality lands after, AC-24 point 3), index-friendly on both dialects.
* :class:`recognised_utc_text` — whether a stored timestamp is one of the UTC text forms the
  SQLite exact-instant construct reads correctly (always true for PostgreSQL's typed column).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeDecorator

from kandev_dq.contract.instants import Instant, fixed_text


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


#: What follows the fraction digits: the offset, and trailing zeros (padded back to nine).
_FRACTION_TRIMMED = "'+-:0Z'"
#: A text with a character other than those at or past its 30th: its fraction's first nine
#: characters (from the 21st) are then its reading's (GLOB, like substr, ends at a NUL).
_LONGER_FRACTION = "'" + "?" * 29 + "*[^-+:0Z]*'"
#: A stored text longer than this many bytes (no recognised form has more than 35) is read
#: from its head (see :func:`_sqlite_reading`).
_READ_HEAD_BYTES = 64


def _sqlite_fraction(col: str, whole: str | None = None) -> str:
    # Fraction digits are whatever follows the '.', minus the offset; trailing zeros may be
    # dropped with it because they are padded back to nine (CONTRACT §1 trimmed widths).
    if whole is None:
        return (
            f"CASE WHEN substr({col}, 20, 1) = '.' "
            f"THEN rtrim(substr({col}, 21), {_FRACTION_TRIMMED}) ELSE '' END"
        )
    # ``col`` is the head of the text ``whole``: only the first nine fraction characters count,
    # and whether anything but trimmed characters follows them, tested in the head first and
    # in place past it (the same reading as above, never cutting off the tail).
    return (
        f"CASE WHEN substr({col}, 20, 1) = '.' THEN "
        f"CASE WHEN rtrim(substr({col}, 30), {_FRACTION_TRIMMED}) <> '' "
        f"OR {whole} GLOB {_LONGER_FRACTION} THEN substr({col}, 21, 10) "
        f"ELSE rtrim(substr({col}, 21, 9), {_FRACTION_TRIMMED}) END ELSE '' END"
    )


def _sqlite_fixed(col: str, fraction: str) -> str:
    return f"(substr({col}, 1, 10) || ' ' || substr({col}, 12, 8) || '.' || {fraction})"


def _sqlite_reading(col: str, reading, printed: bool) -> str:
    """``reading(text, whole)`` of the stored ``col``; a value over :data:`_READ_HEAD_BYTES`
    (a size SQLite reads from the record header) is read from its head, taken once. Each
    mention of a column loads its value into a register of its own, kept until the statement
    ends: a 50 MB text read in a dozen mentions was held about three times per reading.
    A ``printed`` statement (values inlined: a finding's listing) runs in any ``sqlite3``
    shell, older than 3.43 too, which has no ``octet_length``: it reads every value whole."""
    if printed:
        return reading(col, None)
    head = "kandev_instant_head"
    # Materialised: a plain subquery would be flattened, every mention of the head a mention
    # of the text again (and a LIMIT fence would read as a batch in the backfill, AC-22).
    from_head = (
        f"(WITH {head}_read AS MATERIALIZED "
        f"(SELECT substr({col}, 1, {_READ_HEAD_BYTES}) AS {head}) "
        f"SELECT {reading(head, col)} FROM {head}_read)"
    )
    return (
        f"(CASE WHEN octet_length({col}) > {_READ_HEAD_BYTES} THEN {from_head} "
        f"ELSE {reading(col, None)} END)"
    )


def _sqlite_exact(col: str, whole: str | None) -> str:
    fraction = _sqlite_fraction(col, whole)
    return _sqlite_fixed(col, f"substr(({fraction}) || '000000000', 1, 9)")


def _sqlite_latest(col: str, whole: str | None) -> str:
    fraction = _sqlite_fraction(col, whole)
    return _sqlite_fixed(
        col,
        f"(CASE WHEN ({fraction}) = '' THEN '999999999' "
        f"ELSE substr(({fraction}) || '000000000', 1, 9) END)",
    )


@compiles(utc_instant, "sqlite")
def _utc_instant_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return _sqlite_reading(col, _sqlite_exact, kw.get("literal_binds", False))


@compiles(utc_instant_latest, "sqlite")
def _utc_instant_latest_sqlite(element, compiler, **kw):
    col = compiler.process(list(element.clauses)[0], **kw)
    return _sqlite_reading(col, _sqlite_latest, kw.get("literal_binds", False))


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
    # One IN list costs less than testing the month, day and year one by one
    # (bench/measured-choices.md).
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
    substrings, what its digits leave) cost more over every message
    (bench/measured-choices.md). The length is in bytes: ``length()`` and GLOB stop at a NUL,
    so a form followed by a NUL and anything would match (the forms are ASCII, bytes and
    characters agree on them). Its BLOB's length, not ``octet_length``: a finding query runs
    in any ``sqlite3`` shell, older than 3.43 too."""
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
