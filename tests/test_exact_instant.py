"""The exact-instant construct and key binding on both dialects (AC-24e, CONTRACT §1).

These pin the comparisons that a string comparison or ``julianday`` gets wrong: the 1-µs
boundary, a row later on the key's calendar day, whole seconds against fractions, trimmed
fraction widths, sub-microsecond key digits, and a non-UTC PostgreSQL session time zone. On
SQLite, whose columns carry up to 9 fraction digits (upstream's Go driver), the comparison is
exact to the nanosecond; on PostgreSQL (µs columns) to the microsecond (CONTRACT §1).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kandev_dq.contract.instants import (
    KEY_RANGE,
    STORAGE_FORMS,
    Instant,
    parse_key,
    parse_stored,
    parse_stored_instant,
)
from kandev_dq.contract.tables import StoredTimestamp
from kandev_dq.sql.dialect import (
    at_or_after,
    before,
    instant_param,
    instants_differ,
    json_flag,
    json_number,
    json_text,
    metadata_doc,
    utc_instant,
    utc_instant_latest,
)

probe_meta = sa.MetaData()
probe = sa.Table(
    "instant_probe",
    probe_meta,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("ts", StoredTimestamp, nullable=False),
    sa.Column("doc", sa.Text),
)


def _load(engine, rows: dict[str, str | datetime]) -> None:
    """Rows by id; SQLite text is stored verbatim, PostgreSQL gets the parsed instant."""
    with engine.begin() as conn:
        probe_meta.drop_all(conn)
        probe_meta.create_all(conn)
        if rows:
            conn.execute(
                probe.insert(),
                [
                    {"id": k, "ts": v if engine.dialect.name == "sqlite" else parse_stored(v)}
                    for k, v in rows.items()
                ],
            )


def _after(engine, key: str) -> set[str]:
    param = instant_param("key", parse_key(key))
    with engine.connect() as conn:
        after = set(conn.scalars(sa.select(probe.c.id).where(at_or_after(probe.c.ts, param))))
        earlier = set(conn.scalars(sa.select(probe.c.id).where(before(probe.c.ts, param))))
        total = set(conn.scalars(sa.select(probe.c.id)))
    assert after | earlier == total and not after & earlier  # a partition, no row lost
    return after


def test_one_microsecond_boundary(target):
    _load(
        target.engine,
        {
            "at": "2026-07-30 01:39:37.271235+00:00",
            "one_micro_before": "2026-07-30 01:39:37.271234+00:00",
            "one_micro_after": "2026-07-30 01:39:37.271236+00:00",
        },
    )
    assert _after(target.engine, "2026-07-30T01:39:37.271235Z") == {"at", "one_micro_after"}


def test_same_day_later_rows_are_after_and_previous_day_before(target):
    _load(
        target.engine,
        {
            "same_instant": "2026-07-30 01:39:37.271235+00:00",
            "late_same_day": "2026-07-30 23:59:59.999999+00:00",
            "previous_day": "2026-07-29 23:59:59+00:00",
            "early_same_day": "2026-07-30 00:00:00+00:00",
        },
    )
    # Compared as strings, the ' ' vs 'T' separator snaps the boundary to midnight.
    assert _after(target.engine, "2026-07-30T01:39:37Z") == {"same_instant", "late_same_day"}
    assert _after(target.engine, "2026-07-30T00:00:00Z") == {
        "same_instant",
        "late_same_day",
        "early_same_day",
    }


def test_years_before_1000_compare_exactly(target):
    """A key and values early in the range (CONTRACT §1 keys from 0001-01-02): the bound text
    keeps the year's four digits (``strftime`` wrote year 500 as ``500``, which sorted after
    every stored ``05…`` value on SQLite)."""
    _load(
        target.engine,
        {
            "first_day": "0001-01-02 00:00:00+00:00",
            "one_micro_before": "0500-03-01 11:59:59.999999+00:00",
            "at": "0500-03-01 12:00:00+00:00",
            "later_year": "0999-12-31 23:59:59+00:00",
            "modern": "2026-07-30 01:39:37+00:00",
        },
    )
    assert _after(target.engine, "0500-03-01T12:00:00Z") == {"at", "later_year", "modern"}
    assert _after(target.engine, "0001-01-02T00:00:00Z") == {
        "first_day",
        "one_micro_before",
        "at",
        "later_year",
        "modern",
    }


def test_whole_second_against_fraction(target):
    _load(
        target.engine,
        {
            "whole": "2026-07-30 01:39:37+00:00",
            "half": "2026-07-30 01:39:37.5+00:00",
            "next_whole": "2026-07-30 01:39:38+00:00",
            "just_after_whole": "2026-07-30 01:39:37.000001+00:00",
        },
    )
    assert _after(target.engine, "2026-07-30T01:39:37.5Z") == {"half", "next_whole"}
    assert _after(target.engine, "2026-07-30T01:39:37Z") == {
        "whole",
        "half",
        "next_whole",
        "just_after_whole",
    }
    # '…37Z' sorts after '…37.5Z' as text ('Z' > '.'); as instants it is earlier.
    assert _after(target.engine, "2026-07-30T01:39:37.000001Z") == {
        "half",
        "next_whole",
        "just_after_whole",
    }


@pytest.mark.parametrize("width", range(7))
def test_every_trimmed_fraction_width(target, width):
    digits = "123457"[:width]
    stored = f"2026-07-30 01:39:37{'.' + digits if digits else ''}+00:00"
    exact = datetime(2026, 7, 30, 1, 39, 37, int(digits.ljust(6, "0") or 0), tzinfo=UTC)
    _load(target.engine, {"row": stored})
    at_key = _key_text(exact)
    past_key = _key_text(exact + timedelta(microseconds=1))
    assert _after(target.engine, at_key) == {"row"}
    assert _after(target.engine, past_key) == set()


def test_sub_microsecond_key_digits(target):
    _load(
        target.engine,
        {
            "truncated_micro": "2026-07-30 01:39:37.271235+00:00",
            "next_micro": "2026-07-30 01:39:37.271236+00:00",
        },
    )
    # The key lies strictly inside the truncated microsecond: that row is before it.
    assert _after(target.engine, "2026-07-30T01:39:37.271235001Z") == {"next_micro"}
    assert _after(target.engine, "2026-07-30T01:39:37.271235999Z") == {"next_micro"}
    # Zero sub-µs digits: equality lands after (AC-24 point 3).
    assert _after(target.engine, "2026-07-30T01:39:37.271235000Z") == {
        "truncated_micro",
        "next_micro",
    }


def test_key_offsets_are_honoured(target):
    _load(target.engine, {"row": "2026-07-30 01:39:37+00:00"})
    assert _after(target.engine, "2026-07-29T21:39:37-04:00") == {"row"}
    assert _after(target.engine, "2026-07-29T21:39:37.000001-04:00") == set()


def test_every_sqlite_storage_form_reads_the_same_instant(sqlite_target):
    target = sqlite_target  # the forms are SQLite text; PostgreSQL stores a native TIMESTAMP
    moment = datetime(2026, 7, 30, 1, 39, 37, 270000, tzinfo=UTC)
    _load(target.engine, {name: form(moment) for name, form in STORAGE_FORMS.items()})
    with target.engine.connect() as conn:
        read = set(conn.scalars(sa.select(utc_instant(probe.c.ts))))
    assert read == {"2026-07-30 01:39:37.270000000"}
    assert _after(target.engine, "2026-07-30T01:39:37.27Z") == set(STORAGE_FORMS)
    assert _after(target.engine, "2026-07-30T01:39:37.270001Z") == set()


def test_non_utc_postgres_session_time_zone(pg_target):
    rows = {
        "at": "2026-07-30 01:39:37.271235+00:00",
        "one_micro_before": "2026-07-30 01:39:37.271234+00:00",
        "late_same_day": "2026-07-30 23:59:59.999999+00:00",
    }
    _load(pg_target.engine, rows)
    zoned = sa.create_engine(f"{pg_target.url}{quote(' -cTimeZone=America/New_York')}")
    try:
        with zoned.connect() as conn:
            assert conn.exec_driver_sql("SHOW TimeZone").scalar() == "America/New_York"
            read = dict(conn.execute(sa.select(probe.c.id, utc_instant(probe.c.ts))).all())
        assert read["at"] == datetime(2026, 7, 30, 1, 39, 37, 271235, tzinfo=UTC)
        assert _after(zoned, "2026-07-30T01:39:37.271235Z") == {"at", "late_same_day"}
        assert _after(zoned, "2026-07-29T21:39:37.271235-04:00") == {"at", "late_same_day"}
    finally:
        zoned.dispose()


pair_meta = sa.MetaData()
pairs = sa.Table(
    "instant_pairs",
    pair_meta,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("stored", StoredTimestamp),
    sa.Column("other", StoredTimestamp),
)
#: (stored, other, whether they hold different instants), by name.
PAIRS = {
    "one text": ("2026-07-30 01:39:37.271235", "2026-07-30 01:39:37.271235", False),
    "one instant, two forms": ("2026-07-30T01:39:37.27Z", "2026-07-30 01:39:37.270000", False),
    "one microsecond apart": ("2026-07-30 01:39:37.271235", "2026-07-30 01:39:37.271236", True),
    "whole second and fraction": ("2026-07-30 01:39:37", "2026-07-30 01:39:37.000001", True),
    "both NULL": (None, None, False),
    "NULL beside an instant": (None, "2026-07-30 01:39:37", True),
    "an instant beside NULL": ("2026-07-30 01:39:37", None, True),
}


def test_instants_differ_compares_the_instants_not_the_texts(target):
    """The backfill reconciliation's comparison (AC-1a, AC-23a): NULL-safe, exact, and blind
    to the stored form; SQLite's shortcut on identical texts changes no answer."""
    sqlite = target.engine.dialect.name == "sqlite"

    def stored(value):
        return value if sqlite or value is None else parse_stored(value)

    with target.engine.begin() as conn:
        pair_meta.drop_all(conn)
        pair_meta.create_all(conn)
        conn.execute(
            pairs.insert(),
            [{"id": k, "stored": stored(a), "other": stored(b)} for k, (a, b, _) in PAIRS.items()],
        )
        read = dict(
            conn.execute(
                sa.select(pairs.c.id, instants_differ(pairs.c.stored, pairs.c.other))
            ).all()
        )
    assert {k: bool(v) for k, v in read.items()} == {k: d for k, (_, _, d) in PAIRS.items()}


def test_instants_differ_on_any_sqlite_value_answers_as_the_exact_readings(sqlite_target):
    """Numbers, numeric-looking text, BLOBs and texts in no recognised form, in columns with
    and without an affinity: the shortcut answers exactly as comparing the readings does."""
    values = [
        "2026-07-30 01:39:37.5",
        "2026-07-30T01:39:37.500Z",
        "100",
        100,
        100.0,
        "1e2",
        b"2026-07-30 01:39:37.5",
        "30/07/2026",
        "",
        None,
    ]
    with sqlite_target.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE raw_pairs (a TIMESTAMP, b TIMESTAMP, c, d)")
        conn.exec_driver_sql(
            "INSERT INTO raw_pairs VALUES (?, ?, ?, ?)",
            [(x, y, x, y) for x in values for y in values],
        )
        raw = sa.table("raw_pairs", *(sa.column(n) for n in "abcd"))
        for left_name, right_name in [("a", "b"), ("c", "d"), ("a", "d"), ("c", "b")]:
            left, right = raw.c[left_name], raw.c[right_name]
            exact = utc_instant(left).is_distinct_from(utc_instant(right))
            rows = conn.execute(sa.select(left, right, instants_differ(left, right), exact)).all()
            assert [row[:2] for row in rows if bool(row[2]) != bool(row[3])] == []


def test_a_long_sqlite_text_reads_as_the_printed_statement_reads_it(sqlite_target):
    """A text over the head a reading takes (a 50 MB one held three copies per reading) reads
    exactly as the printed statement, which reads every value whole: whatever its fraction's
    tail holds past the head, a NUL, a multi-byte character, a BLOB."""
    second = "2026-07-30 01:39:37"
    values = [
        f"{second}.5" + "0" * 70,  # only trimmed characters after the digits
        f"{second}.5" + "0" * 70 + "x",  # another far past the head
        f"{second}." + "0" * 80 + "x",  # a whole second but for that one
        f"{second}.5" + "Z" * 80 + "x",
        f"{second}.5" + "0" * 60 + "+00:00" + "Z" * 20,
        f"{second}.123456789" + "7" * 80,
        f"{second}." + "0" * 9 + "\x00" + "5" * 80,  # GLOB and substr end at a NUL alike
        f"{second}.5" + "é" * 40 + "0" * 40,
        f"{second}x5" + "9" * 80,  # no '.' at the 20th character
        "v" * 1_000_000,
        (f"{second}.5" + "0" * 70 + "1").encode(),
        f"{second}.5",
    ]
    with sqlite_target.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE long_texts (n INTEGER, ts TIMESTAMP)")
        conn.exec_driver_sql("INSERT INTO long_texts VALUES (?, ?)", list(enumerate(values)))
        raw = sa.table("long_texts", sa.column("n"), sa.column("ts"))
        read = sa.select(raw.c.n, utc_instant(raw.c.ts), utc_instant_latest(raw.c.ts))
        read = read.order_by(raw.c.n)
        printed = str(read.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
        assert "octet_length" in str(read.compile(dialect=conn.dialect))
        assert "octet_length" not in printed
        assert conn.execute(read).all() == conn.exec_driver_sql(printed).all()


_instants = st.one_of(
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31, 23, 59, 59, 999999)
    ),
    # The whole range keys may take (CONTRACT §1), years before 1000 among them.
    st.datetimes(min_value=KEY_RANGE[0], max_value=KEY_RANGE[1]),
)


def _key_text(moment: datetime) -> str:
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(_instants, st.sampled_from(sorted(STORAGE_FORMS))), min_size=2, max_size=12),
    _instants,
)
def test_sql_order_equals_python_order(target, values, key_moment):
    moments = {f"r{i}": m.replace(tzinfo=UTC) for i, (m, _) in enumerate(values)}
    stored = {
        f"r{i}": STORAGE_FORMS[form](m.replace(tzinfo=UTC)) for i, (m, form) in enumerate(values)
    }
    _load(target.engine, stored)
    with target.engine.connect() as conn:
        sql_order = list(
            conn.scalars(sa.select(probe.c.id).order_by(utc_instant(probe.c.ts), probe.c.id))
        )
    assert sql_order == sorted(moments, key=lambda k: (moments[k], k))
    key = _key_text(key_moment)
    expected = {k for k, m in moments.items() if m >= key_moment.replace(tzinfo=UTC)}
    assert _after(target.engine, key) == expected


@pytest.mark.parametrize("raw", [None, "", "null", "  null ", "{}", "[1, 2]", '"text"', "42"])
def test_metadata_normalisation_never_raises(target, raw):
    _load(target.engine, {"row": "2026-07-30 01:39:37+00:00"})
    with target.engine.begin() as conn:
        conn.execute(probe.update().values(doc=raw))
        doc = metadata_doc(probe.c.doc)
        row = conn.execute(
            sa.select(
                json_text(doc, "normalized", "kind"),
                json_number(doc, "normalized", "subagent_task", "total_tokens"),
                json_flag(doc, "normalized", "subagent_task", "is_async"),
            )
        ).one()
    assert tuple(row) == (None, None, None)


def test_json_extraction_reads_typed_values(target):
    _load(target.engine, {"row": "2026-07-30 01:39:37+00:00"})
    document = (
        '{"status": "completed", "normalized": {"kind": "subagent_task", "subagent_task": '
        '{"status": "async_launched", "total_tokens": 12, "is_async": true, "model": 7}}}'
    )
    with target.engine.begin() as conn:
        conn.execute(probe.update().values(doc=document))
        doc = metadata_doc(probe.c.doc)
        row = conn.execute(
            sa.select(
                json_text(doc, "status"),
                json_text(doc, "normalized", "subagent_task", "status"),
                json_number(doc, "normalized", "subagent_task", "total_tokens"),
                json_flag(doc, "normalized", "subagent_task", "is_async"),
                json_text(doc, "normalized", "subagent_task", "model"),
            )
        ).one()
    assert (row[0], row[1], int(row[2]), row[3], row[4]) == (
        "completed",
        "async_launched",
        12,
        1,
        None,
    )


# --- nanosecond columns (SQLite; upstream's Go driver writes up to 9 digits) ------------------


def test_one_nanosecond_boundary_on_nine_digit_columns(sqlite_target):
    _load(
        sqlite_target.engine,
        {
            "at": "2026-07-30 01:39:16.813443524+00:00",
            "one_nano_before": "2026-07-30 01:39:16.813443523+00:00",
            "one_nano_after": "2026-07-30 01:39:16.813443525+00:00",
        },
    )
    assert _after(sqlite_target.engine, "2026-07-30T01:39:16.813443524Z") == {
        "at",
        "one_nano_after",
    }


def test_microsecond_key_against_nine_digit_columns(sqlite_target):
    _load(
        sqlite_target.engine,
        {
            "just_before": "2026-07-30 01:39:16.813442999+00:00",
            "at": "2026-07-30 01:39:16.813443+00:00",
            "inside_the_microsecond": "2026-07-30 01:39:16.813443001+00:00",
        },
    )
    assert _after(sqlite_target.engine, "2026-07-30T01:39:16.813443Z") == {
        "at",
        "inside_the_microsecond",
    }


@pytest.mark.parametrize("width", range(10))
def test_every_trimmed_fraction_width_to_nanoseconds(sqlite_target, width):
    digits = "813443527"[:width]
    stored = f"2026-07-30 01:39:16{'.' + digits if digits else ''}+00:00"
    exact = parse_stored_instant(stored)
    _load(sqlite_target.engine, {"row": stored})
    assert _after(sqlite_target.engine, exact.rfc3339nano()) == {"row"}
    assert _after(sqlite_target.engine, exact.shifted(1).rfc3339nano()) == set()


_epoch_ns = st.integers(
    min_value=Instant.from_datetime(datetime(2000, 1, 1)).to_epoch_ns(),
    max_value=Instant.from_datetime(datetime(2099, 12, 31, 23, 59, 59)).to_epoch_ns(),
)


def _at_width(epoch_ns: int, width: int) -> Instant:
    """An instant with only ``width`` fraction digits, as a writer of that precision holds it."""
    step = 10 ** (9 - width)
    return Instant.from_epoch_ns(epoch_ns - epoch_ns % step)


def _go_text(instant: Instant) -> str:
    return instant.rfc3339nano().replace("T", " ").replace("Z", "+00:00")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(_epoch_ns, st.integers(0, 9)), min_size=2, max_size=12),
    st.tuples(_epoch_ns, st.integers(0, 9)),
)
def test_sql_order_equals_python_order_at_every_width(sqlite_target, values, key):
    moments = {f"r{i}": _at_width(ns, width) for i, (ns, width) in enumerate(values)}
    _load(sqlite_target.engine, {k: _go_text(m) for k, m in moments.items()})
    with sqlite_target.engine.connect() as conn:
        sql_order = list(
            conn.scalars(sa.select(probe.c.id).order_by(utc_instant(probe.c.ts), probe.c.id))
        )
    assert sql_order == sorted(moments, key=lambda k: (moments[k], k))
    key_instant = _at_width(*key)
    expected = {k for k, m in moments.items() if m >= key_instant}
    assert _after(sqlite_target.engine, key_instant.rfc3339nano()) == expected


def test_a_whole_second_value_stands_for_its_whole_second(target):
    """SQLite's CURRENT_TIMESTAMP writes whole seconds (upstream's turn-end sweep): such a
    value's latest reading is the end of its second; any other value reads exactly."""
    _load(
        target.engine,
        {
            "swept": "2026-07-30 01:39:16",
            "fraction": "2026-07-30 01:39:16.5+00:00",
        },
    )
    with target.engine.connect() as conn:
        earliest = dict(conn.execute(sa.select(probe.c.id, utc_instant(probe.c.ts))).all())
        latest = dict(conn.execute(sa.select(probe.c.id, utc_instant_latest(probe.c.ts))).all())
    assert latest["fraction"] == earliest["fraction"]
    if target.engine.dialect.name == "sqlite":
        assert earliest["swept"] == "2026-07-30 01:39:16.000000000"
        assert latest["swept"] == "2026-07-30 01:39:16.999999999"
    else:
        assert latest["swept"] - earliest["swept"] == timedelta(microseconds=999999)
    assert earliest["swept"] < earliest["fraction"] < latest["swept"]
