"""Exact instants: activation keys parsed in Python, and the stored forms of TIMESTAMP columns.

Keys are RFC3339 text with 0-9 fraction digits (CONTRACT §5, AC-24 point 3); columns hold UTC
wall clock at the precision of their store (CONTRACT §1): up to nanoseconds on SQLite (Go's
driver writes up to 9 fraction digits), microseconds on PostgreSQL. A key is never compared as
a string (AC-24e): it is parsed here into an :class:`Instant` and bound as a parameter, exact
to the nanosecond on SQLite and rounded *up* to the next microsecond on PostgreSQL when it
carries sub-microsecond digits, so that "column >= key" is exact on both.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

CAPTURE_SINCE = "subagent_context_capture_since"
BACKFILL_THROUGH = "subagent_context_backfill_through"
EXECUTION_SINCE = "subagent_context_execution_since"
ACTIVATION_KEYS = (CAPTURE_SINCE, BACKFILL_THROUGH, EXECUTION_SINCE)

_ONE_MICRO = timedelta(microseconds=1)
#: Keys are accepted between these UTC wall-clock instants (inclusive): a day's margin inside
#: Python's datetime range, so that rounding a key up, or widening it by a legacy second or a
#: window of minutes, can never overflow (a key in year 1 or 9999 is malformed anyway).
KEY_RANGE = (datetime(1, 1, 2), datetime(9999, 12, 30, 23, 59, 59))
# re.ASCII: RFC3339 digits are ASCII; without it ``\d`` also matches e.g. Arabic-Indic digits,
# which int() would then read as numbers.
_KEY_PATTERN = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})T(?P<time>\d{2}:\d{2}:\d{2})"
    r"(?:\.(?P<frac>\d{1,9}))?(?P<offset>Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)


class MalformedKey(ValueError):
    """A key value that is not an RFC3339 instant; the message says precisely why."""


class Precision(enum.StrEnum):
    """The resolution a key was written at, read off its fraction digits (Go trims zeros)."""

    SECOND = "second"
    MILLISECOND = "millisecond"
    MICROSECOND = "microsecond"
    NANOSECOND = "nanosecond"

    @classmethod
    def from_digits(cls, digits: int) -> Precision:
        if digits == 0:
            return cls.SECOND
        if digits <= 3:
            return cls.MILLISECOND
        if digits <= 6:
            return cls.MICROSECOND
        return cls.NANOSECOND


@dataclass(frozen=True, order=True)
class Instant:
    """An exact UTC instant: a microsecond datetime plus the sub-microsecond nanoseconds."""

    micro: datetime
    nanos: int = 0
    precision: Precision = Precision.NANOSECOND

    def __post_init__(self) -> None:
        if self.micro.tzinfo is None or self.micro.utcoffset() != timedelta(0):
            raise ValueError("Instant needs an aware UTC datetime")
        if not 0 <= self.nanos < 1000:
            raise ValueError("nanos must be in 0..999")

    @classmethod
    def from_datetime(cls, value: datetime) -> Instant:
        """A column value: naive datetimes are UTC wall clock (CONTRACT §1)."""
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return cls(value.astimezone(UTC), 0, Precision.MICROSECOND)

    @classmethod
    def from_epoch_ns(cls, epoch_ns: int) -> Instant:
        micros, nanos = divmod(epoch_ns, 1000)
        micro = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
        return cls(micro, nanos, Precision.NANOSECOND)

    def to_epoch_ns(self) -> int:
        since_epoch = self.micro - datetime(1970, 1, 1, tzinfo=UTC)
        return (since_epoch // _ONE_MICRO) * 1000 + self.nanos

    def shifted(self, nanoseconds: int) -> Instant:
        """This instant moved by ``nanoseconds`` (its precision is kept)."""
        moved = Instant.from_epoch_ns(self.to_epoch_ns() + nanoseconds)
        return Instant(moved.micro, moved.nanos, self.precision)

    def bound(self) -> datetime:
        """The microsecond a column must reach to be at or after this instant (AC-24e).

        A column holds whole microseconds, so for a key with a non-zero sub-microsecond part
        the column is at-or-after iff it is >= the key rounded up to the next microsecond.
        """
        return self.micro + _ONE_MICRO if self.nanos else self.micro

    def rfc3339nano(self) -> str:
        """The key as Go's time.RFC3339Nano writes it: trailing fraction zeros trimmed."""
        fraction = f"{self.micro.microsecond:06d}{self.nanos:03d}".rstrip("0")
        head = wall_text(self.micro, "T")
        return f"{head}.{fraction}Z" if fraction else f"{head}Z"

    def __str__(self) -> str:
        return self.rfc3339nano()


@dataclass(frozen=True)
class EmptySentinel:
    """``backfill_through = ''``: the backfill matched nothing (AC-24f). Never an instant."""

    def __str__(self) -> str:
        return "''"


SENTINEL = EmptySentinel()


def parse_key(value: str) -> Instant:
    """Parse an RFC3339 key (0-9 fraction digits, ``Z`` or a numeric offset) exactly."""
    if not isinstance(value, str):
        raise MalformedKey(f"expected text, got {type(value).__name__}")
    if value == "":
        raise MalformedKey("the empty string is the backfill sentinel, not an instant (AC-24f)")
    if len(value) > 64:
        # No count here: a key that long is read as its head, length and digest (sql.keys).
        raise MalformedKey("far longer than any RFC3339 instant")
    match = _KEY_PATTERN.fullmatch(value)
    if match is None:
        raise MalformedKey(_why_malformed(value))
    fraction = match["frac"] or ""
    try:
        wall = datetime.fromisoformat(f"{match['date']}T{match['time']}")
    except ValueError as exc:
        raise MalformedKey(f"not a calendar instant: {exc}") from None
    offset = match["offset"]
    if offset == "Z":
        delta = timedelta(0)
    else:
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        if hours > 23 or minutes > 59:
            raise MalformedKey(f"offset {offset} is out of range")
        delta = timedelta(hours=hours, minutes=minutes) * (1 if offset[0] == "+" else -1)
    digits = fraction.ljust(9, "0")
    utc_wall = wall - delta if KEY_RANGE[0] <= wall <= KEY_RANGE[1] else None
    if utc_wall is None or not KEY_RANGE[0] <= utc_wall <= KEY_RANGE[1]:
        raise MalformedKey(
            f"{value!r} lies outside 0001-01-02 .. 9999-12-30, the range whose instants "
            "kandev-dq can compare exactly"
        )
    micro = utc_wall.replace(tzinfo=UTC, microsecond=int(digits[:6]))
    return Instant(micro, int(digits[6:]), Precision.from_digits(len(fraction)))


def _why_malformed(value: str) -> str:
    shown = value if len(value) <= 40 else value[:37] + "..."
    if re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}.*", value):
        return f"{shown!r} uses a space separator (a column's storage form), not RFC3339's 'T'"
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?", value):
        return f"{shown!r} has no time zone designator ('Z' or an offset)"
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{10,}.*", value):
        return f"{shown!r} has more than 9 fraction digits"
    return f"{shown!r} is not an RFC3339 instant (YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM))"


def read_key(name: str, value: str | None) -> Instant | EmptySentinel | None:
    """Classify a ``kandev_meta`` value: absent, the AC-24f sentinel, or an instant.

    Only ``backfill_through`` may hold the sentinel; anything unparsable raises MalformedKey.
    """
    if value is None:
        return None
    if value == "" and name == BACKFILL_THROUGH:
        return SENTINEL
    return parse_key(value)


def now_instant() -> Instant:
    """The current instant at nanosecond resolution (for keys this build writes, AC-24)."""
    import time

    return Instant.from_epoch_ns(time.time_ns())


# --- stored column forms -------------------------------------------------------------------

_STORED_PATTERN = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<time>\d{2}:\d{2}:\d{2})"
    r"(?:\.(?P<frac>\d{1,9}))?(?P<offset>Z|[+-]00:00)?",
    re.ASCII,
)


def parse_stored(value: str | datetime) -> datetime:
    """A TIMESTAMP column value as an aware UTC datetime (µs; extra digits truncated)."""
    if isinstance(value, datetime):
        return Instant.from_datetime(value).micro
    match = _STORED_PATTERN.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not a recognised UTC timestamp storage form")
    micros = int((match["frac"] or "").ljust(6, "0")[:6])
    wall = datetime.fromisoformat(f"{match['date']}T{match['time']}")
    return wall.replace(microsecond=micros, tzinfo=UTC)


def parse_stored_instant(value: str | datetime) -> Instant:
    """A TIMESTAMP column value as an exact :class:`Instant`, all 9 fraction digits kept."""
    if isinstance(value, datetime):
        return Instant.from_datetime(value)
    match = _STORED_PATTERN.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not a recognised UTC timestamp storage form")
    digits = (match["frac"] or "").ljust(9, "0")
    wall = datetime.fromisoformat(f"{match['date']}T{match['time']}")
    micro = wall.replace(microsecond=int(digits[:6]), tzinfo=UTC)
    return Instant(micro, int(digits[6:]), Precision.from_digits(len(match["frac"] or "")))


def is_recognised_stored(value: object) -> bool:
    """True when ``value`` is stored text the SQLite exact-instant construct reads exactly.

    Stricter than :func:`parse_stored` (no surrounding whitespace is tolerated, because the
    SQL construct does not strip it): the Python mirror of
    :class:`kandev_dq.sql.dialect.recognised_utc_text`.
    """
    if not isinstance(value, str):
        return False
    match = _STORED_PATTERN.fullmatch(value)
    if match is None:
        return False
    try:
        datetime.fromisoformat(f"{match['date']}T{match['time']}")
    except ValueError:
        return False
    return True


def wall_text(value: datetime, sep: str) -> str:
    """``YYYY-MM-DD{sep}HH:MM:SS`` of ``value``'s wall clock, the year always in four digits:
    ``strftime("%Y")`` writes year 1 as ``1`` on glibc, and such a text compares wrongly
    against every stored one (CONTRACT §1: 0001-01-02 is in range)."""
    return value.replace(tzinfo=None).isoformat(sep=sep, timespec="seconds")


def go_sqlite_text(value: datetime) -> str:
    """The form Go's SQLite driver stores: space, trimmed fraction, ``+00:00`` (CONTRACT §1)."""
    value = value.astimezone(UTC) if value.tzinfo else value
    fraction = f"{value.microsecond:06d}".rstrip("0")
    head = wall_text(value, " ")
    return f"{head}.{fraction}+00:00" if fraction else f"{head}+00:00"


def fixed_text(value: Instant | datetime) -> str:
    """The fixed-width text the SQLite exact-instant construct yields (``…SS.fffffffff``,
    nanoseconds: CONTRACT §1, upstream's SQLite columns carry up to 9 digits)."""
    if isinstance(value, datetime):
        value = Instant.from_datetime(value)
    return f"{wall_text(value.micro, ' ')}.{value.micro.microsecond:06d}{value.nanos:03d}"


def _with_separator(value: datetime, sep: str, suffix: str, trim: bool) -> str:
    value = value.astimezone(UTC) if value.tzinfo else value
    fraction = f"{value.microsecond:06d}"
    if trim:
        fraction = fraction.rstrip("0")
    head = wall_text(value, sep)
    return f"{head}.{fraction}{suffix}" if fraction else f"{head}{suffix}"


def utc_text(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC: one form for an instant, whatever the dialect."""
    return _with_separator(value, "T", "Z", trim=False)


#: Every text form a UTC TIMESTAMP is known to take in a SQLite store (CONTRACT §1).
STORAGE_FORMS = {
    "go": go_sqlite_text,
    "go_t_z": lambda v: _with_separator(v, "T", "Z", trim=True),
    "python_space": lambda v: _with_separator(v, " ", "", trim=False),
    "python_t_offset": lambda v: _with_separator(v, "T", "+00:00", trim=False),
    "full_space_z": lambda v: _with_separator(v, " ", "Z", trim=False),
}
