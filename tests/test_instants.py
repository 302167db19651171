"""Key parsing in Python (AC-24 point 3, AC-24e, AC-24f)."""

import contextlib
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    KEY_RANGE,
    SENTINEL,
    Instant,
    MalformedKey,
    Precision,
    parse_key,
    parse_stored,
    read_key,
)


@pytest.mark.parametrize(
    ("key", "micro", "nanos", "precision"),
    [
        ("2026-07-30T01:39:37Z", 0, 0, Precision.SECOND),
        ("2026-07-30T01:39:37.5Z", 500000, 0, Precision.MILLISECOND),
        ("2026-07-30T01:39:37.271Z", 271000, 0, Precision.MILLISECOND),
        ("2026-07-30T01:39:37.2712Z", 271200, 0, Precision.MICROSECOND),
        ("2026-07-30T01:39:37.271235Z", 271235, 0, Precision.MICROSECOND),
        ("2026-07-30T01:39:37.2712351Z", 271235, 100, Precision.NANOSECOND),
        ("2026-07-30T01:39:37.271235123Z", 271235, 123, Precision.NANOSECOND),
    ],
)
def test_every_precision_parses_exactly(key, micro, nanos, precision):
    parsed = parse_key(key)
    assert parsed.micro == datetime(2026, 7, 30, 1, 39, 37, micro, tzinfo=UTC)
    assert (parsed.nanos, parsed.precision) == (nanos, precision)


@pytest.mark.parametrize(
    ("key", "utc"),
    [
        ("2026-07-30T03:39:37+02:00", datetime(2026, 7, 30, 1, 39, 37, tzinfo=UTC)),
        ("2026-07-29T21:39:37.25-04:00", datetime(2026, 7, 30, 1, 39, 37, 250000, tzinfo=UTC)),
        ("2026-07-30T01:39:37+00:00", datetime(2026, 7, 30, 1, 39, 37, tzinfo=UTC)),
        ("2026-07-30T00:10:00+00:30", datetime(2026, 7, 29, 23, 40, tzinfo=UTC)),
    ],
)
def test_offsets_resolve_to_utc(key, utc):
    assert parse_key(key).micro == utc


def test_bound_rounds_sub_microsecond_digits_up():
    # A microsecond column is at-or-after a key with sub-µs digits iff >= the next µs (AC-24e).
    assert parse_key("2026-07-30T01:39:37.271235001Z").bound() == datetime(
        2026, 7, 30, 1, 39, 37, 271236, tzinfo=UTC
    )
    assert parse_key("2026-07-30T01:39:37.271235000Z").bound() == datetime(
        2026, 7, 30, 1, 39, 37, 271235, tzinfo=UTC
    )
    assert parse_key("2026-07-30T23:59:59.999999999Z").bound() == datetime(2026, 7, 31, tzinfo=UTC)


def test_sentinel_is_never_parsed():
    assert read_key(BACKFILL_THROUGH, "") is SENTINEL
    assert read_key(BACKFILL_THROUGH, None) is None
    with pytest.raises(MalformedKey, match="sentinel"):
        parse_key("")
    with pytest.raises(MalformedKey, match="sentinel"):
        read_key(CAPTURE_SINCE, "")  # only backfill_through may hold it (AC-24f)


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("2026-07-30 01:39:37.271235+00:00", "space separator"),
        ("2026-07-30T01:39:37", "no time zone"),
        ("2026-07-30T01:39:37.5", "no time zone"),
        ("2026-07-30T01:39:37.1234567890Z", "more than 9"),
        ("2026-13-30T01:39:37Z", "calendar"),
        ("2026-02-30T01:39:37Z", "calendar"),
        ("2026-07-30T25:39:37Z", "calendar"),
        ("2026-07-30T01:39:37+24:00", "offset"),
        ("2026-07-30", "not an RFC3339"),
        ("yesterday", "not an RFC3339"),
        (" 2026-07-30T01:39:37Z", "not an RFC3339"),
        ("2026-07-30T01:39:37Z'; DROP TABLE kandev_meta; --", "not an RFC3339"),
        ("2026-07-30T01:39:37.Z", "not an RFC3339"),
    ],
)
def test_malformed_keys_are_rejected_with_a_reason(key, reason):
    with pytest.raises(MalformedKey, match=reason):
        parse_key(key)


def test_a_ten_megabyte_key_is_rejected_without_scanning_it():
    with pytest.raises(MalformedKey, match="far longer than any RFC3339 instant"):
        parse_key("2026-07-30T01:39:37Z" + "9" * 10_000_000)


def test_rejects_non_text():
    with pytest.raises(MalformedKey, match="expected text"):
        parse_key(12345)  # type: ignore[arg-type]


def _epoch_ns(moment: datetime) -> int:
    return Instant.from_datetime(moment.replace(tzinfo=UTC)).to_epoch_ns()


#: Every instant a key may hold (CONTRACT §1), years before 1000 among them.
_KEY_EPOCH_NS = st.integers(
    min_value=_epoch_ns(KEY_RANGE[0]), max_value=_epoch_ns(KEY_RANGE[1]) + 999_999_999
)


@given(st.one_of(st.integers(min_value=0, max_value=4_102_444_800 * 10**9), _KEY_EPOCH_NS))
def test_rfc3339nano_round_trips(epoch_ns):
    instant = Instant.from_epoch_ns(epoch_ns)
    again = parse_key(instant.rfc3339nano())
    assert (again.micro, again.nanos) == (instant.micro, instant.nanos)


@given(st.text(max_size=40))
def test_arbitrary_text_never_escapes_as_another_exception(text):
    with contextlib.suppress(MalformedKey):
        parse_key(text)


@pytest.mark.parametrize(
    "stored",
    [
        "2026-07-30 01:39:37.27+00:00",
        "2026-07-30T01:39:37.270000Z",
        "2026-07-30 01:39:37.270000",
        "2026-07-30T01:39:37.27+00:00",
        datetime(2026, 7, 30, 1, 39, 37, 270000),
    ],
)
def test_stored_forms_parse_to_one_instant(stored):
    assert parse_stored(stored) == datetime(2026, 7, 30, 1, 39, 37, 270000, tzinfo=UTC)
