"""Property tests for the three readers of hostile text: the key parser, the stored-timestamp
reader, and the backfill's JSON extraction.

What tests/test_instants.py and tests/test_exact_instant.py already cover (arbitrary short text
into the key parser, round trips, every known storage form in SQL order) is not repeated;
these add near-miss garbage (separators, widths, offsets, non-ASCII digits, the calendar's
edges) checked against an independent oracle, and random metadata documents read by SQL on
both dialects against the same rules computed in Python.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kandev_dq.contract.instants import (
    KEY_RANGE,
    MalformedKey,
    fixed_text,
    is_recognised_stored,
    parse_key,
    parse_stored,
)
from kandev_dq.sql.dialect import recognised_utc_text, utc_instant
from kandev_dq.sql.mapping import subagent_messages
from kandev_dq.sql.messages import tolerating_unreadable_metadata
from tests.subagent_rows import add_message, add_session

# --- activation keys: near-miss garbage against an oracle --------------------------------------

_KEY = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?(Z|[+-][0-9]{2}:[0-9]{2})"
)


def _expected_key(text: str) -> tuple[datetime, int] | None:
    """RFC3339 as CONTRACT §5 reads it, written independently of kandev_dq.contract.instants."""
    match = _KEY.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        wall = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    except ValueError:
        return None
    shift = timedelta(0)
    if offset != "Z":
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        if hours > 23 or minutes > 59:
            return None
        shift = timedelta(hours=hours, minutes=minutes) * (1 if offset[0] == "+" else -1)
    if not KEY_RANGE[0] <= wall <= KEY_RANGE[1] or not KEY_RANGE[0] <= wall - shift <= KEY_RANGE[1]:
        return None
    digits = (fraction or "").ljust(9, "0")
    micro = (wall - shift).replace(microsecond=int(digits[:6]), tzinfo=UTC)
    return micro, int(digits[6:])


_NUMBER_TEXT = st.one_of(
    st.integers(0, 99).map(lambda n: f"{n:02d}"),
    st.integers(0, 9).map(str),  # unpadded
    st.sampled_from(["٣٣", "０１", "1a", "", "-1"]),  # non-ASCII digits, garbage
)
_YEAR = st.one_of(
    st.sampled_from(["0000", "0001", "2026", "9999", "1970", "٢٠٢٦", "20260", "999"]),
    st.integers(0, 9999).map(lambda n: f"{n:04d}"),
)
_FRACTION = st.one_of(
    st.just(""),
    st.text("0123456789", min_size=0, max_size=12).map(lambda d: f".{d}"),
    st.sampled_from([".٣", ",5", ".5.5"]),
)
_OFFSET = st.one_of(
    st.sampled_from(["Z", "z", "", "+00:00", "-00:00", "+0000", "+05", "UTC", " Z", "Z "]),
    st.builds(
        lambda sign, h, m: f"{sign}{h:02d}:{m:02d}",
        st.sampled_from("+-"),
        st.integers(0, 25),
        st.integers(0, 61),
    ),
)
_near_keys = st.builds(
    lambda pre, y, mo, d, sep, h, mi, s, frac, off, post: (
        f"{pre}{y}-{mo}-{d}{sep}{h}:{mi}:{s}{frac}{off}{post}"
    ),
    st.sampled_from(["", "", "", " ", "\n"]),
    _YEAR,
    _NUMBER_TEXT,
    _NUMBER_TEXT,
    st.sampled_from(["T", "T", "T", "t", " ", "_", ""]),
    _NUMBER_TEXT,
    _NUMBER_TEXT,
    _NUMBER_TEXT,
    _FRACTION,
    _OFFSET,
    st.sampled_from(["", "", "", " ", "x", "\x00"]),
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_near_keys, st.text(max_size=45)))
def test_key_parser_accepts_exactly_rfc3339_and_reads_it_exactly(text):
    expected = _expected_key(text)
    try:
        parsed = parse_key(text)
    except MalformedKey:
        assert expected is None, text
        return
    assert expected is not None, text
    assert (parsed.micro, parsed.nanos) == expected
    parsed.bound()  # rounding up never overflows inside the accepted range


# --- stored timestamps (SQLite): the GLOB rule equals Python, the construct reads exactly ------

_SUFFIX = st.sampled_from(["", "Z", "+00:00", "-00:00", "+02:00", "z", " ", "+00", "Z "])
_near_stored = st.builds(
    lambda y, mo, d, sep, h, mi, s, frac, suffix: f"{y}-{mo}-{d}{sep}{h}:{mi}:{s}{frac}{suffix}",
    _YEAR,
    _NUMBER_TEXT,
    _NUMBER_TEXT,
    st.sampled_from([" ", "T", "t", "_"]),
    _NUMBER_TEXT,
    _NUMBER_TEXT,
    _NUMBER_TEXT,
    _FRACTION,
    _SUFFIX,
)
_probe = sa.table("probe", sa.column("id", sa.Integer), sa.column("ts"))
_memory = sa.create_engine("sqlite://")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_near_stored, st.text(max_size=30)), min_size=1, max_size=25))
def test_recognised_forms_in_sql_equal_python_and_read_exactly(texts):
    with _memory.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS probe")
        conn.exec_driver_sql("CREATE TABLE probe (id INTEGER PRIMARY KEY, ts TIMESTAMP)")
        conn.execute(_probe.insert(), [{"id": i, "ts": t} for i, t in enumerate(texts)])
        read = conn.execute(
            sa.select(_probe.c.id, recognised_utc_text(_probe.c.ts), utc_instant(_probe.c.ts))
        ).all()
    for i, recognised, instant in read:
        text = texts[i]
        assert bool(recognised) == is_recognised_stored(text), text
        if recognised:
            assert instant == fixed_text(parse_stored(text)), text


# --- the backfill's JSON extraction, on both dialects -------------------------------------------

_FIELDS = (
    "tool_call_id",
    "status",
    "parent_tool_call_id",
    "normalized",
    "kind",
    "subagent_task",
    "subagent_type",
    "description",
    "agent_id",
    "child_session_id",
    "model",
    "total_tokens",
    "tool_use_count",
    "duration_ms",
    "is_async",
)
_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=12,
)
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.integers(-(10**6), 10**6).map(lambda k: k / 8),  # exact in binary and in decimal
    st.just(-0.0),
    _TEXT,
    st.sampled_from(["subagent_task", "completed", "async_launched", "", "0"]),
)
_key = st.one_of(st.sampled_from(_FIELDS), _TEXT)
_anything = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_key, inner, max_size=4),
    max_leaves=12,
)
_task = st.dictionaries(st.sampled_from(_FIELDS[6:] + ("status",)), _anything, max_size=10)
_subagent_like = st.builds(
    lambda kind, task, top, drop: {
        k: v
        for k, v in {"normalized": {"kind": kind, "subagent_task": task}, **top}.items()
        if k not in drop
    },
    st.one_of(st.just("subagent_task"), _leaf),
    _task,
    st.dictionaries(st.sampled_from(["tool_call_id", "status", "parent_tool_call_id"]), _anything),
    st.sets(st.sampled_from(["normalized", "tool_call_id"]), max_size=1),
)
_raw = st.one_of(
    st.builds(lambda d, ascii_: json.dumps(d, ensure_ascii=ascii_), _subagent_like, st.booleans()),
    st.builds(lambda d: json.dumps(d), _anything),
    st.sampled_from([None, "", "null", "  null ", "{bad", "[1, 2", '{"a":}', '"text"', "42"]),
)

_MISSING = object()


def _doc(raw: str | None):
    """AC-23b in Python: NULL, blank, 'null' and text that is not JSON all read as {}."""
    if raw is None:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return {}


def _at(doc, *path):
    for name in path:
        if not isinstance(doc, dict) or name not in doc:
            return _MISSING
        doc = doc[name]
    return doc


def _text(value):
    return value if isinstance(value, str) else None


def _number(value):
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _flag(value):
    if isinstance(value, bool):
        return int(value)
    number = _number(value)
    return None if number is None else int(number != 0)


def _expected_fields(raw: str | None) -> dict | None:
    """What CONTRACT §4 / docs/interpretations.md ("JSON field types") extract, or None when
    the message is not of kind subagent_task."""
    doc = _doc(raw)
    if _text(_at(doc, "normalized", "kind")) != "subagent_task":
        return None
    task = ("normalized", "subagent_task")
    fields = {
        "tool_call_id": _text(_at(doc, "tool_call_id")),
        "parent_tool_call_id": _text(_at(doc, "parent_tool_call_id")),
        "tool_status": _text(_at(doc, "status")),
        "agent_status": _text(_at(doc, *task, "status")),
        "is_async": _flag(_at(doc, *task, "is_async")),
    }
    for name in ("subagent_type", "description", "agent_id", "child_session_id", "model"):
        fields[name] = _text(_at(doc, *task, name))
    for name in ("total_tokens", "tool_use_count", "duration_ms"):
        fields[name] = _number(_at(doc, *task, name))
    return fields


def _same_number(sql, python) -> bool:
    if sql is None or python is None:
        return sql is None and python is None
    return (
        Decimal(str(sql)) == Decimal(repr(python)) if isinstance(python, float) else sql == python
    )


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_raw, min_size=1, max_size=10))
def test_json_extraction_equals_python(target, documents):
    with target.engine.begin() as conn:
        if not sa.inspect(conn).has_table("task_sessions"):
            target.create_base(subagents=None)
            add_session(conn)
        conn.exec_driver_sql("DELETE FROM task_session_messages")
        for i, raw in enumerate(documents):
            add_message(conn, f"m{i:02d}", raw)

    def extract(conn: sa.Connection) -> list:
        sm = subagent_messages()  # built inside: unreadable ids located so far are excluded
        return conn.execute(sa.select(sm).order_by(sm.c.id)).mappings().all()

    with target.engine.connect() as conn:
        read = tolerating_unreadable_metadata(conn, extract)
        conn.rollback()
    got = {row["id"]: row for row in read}
    for i, raw in enumerate(documents):
        expected = _expected_fields(raw)
        row = got.get(f"m{i:02d}")
        if expected is None:
            assert row is None, raw
            continue
        assert row is not None, raw
        for name, value in expected.items():
            if name in ("total_tokens", "tool_use_count", "duration_ms"):
                assert _same_number(row[name], value), (name, row[name], value, raw)
            else:
                assert row[name] == value, (name, row[name], value, raw)
