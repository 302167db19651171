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
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kandev_dq.contract import tables as schema_tables
from kandev_dq.contract.instants import (
    ACTIVATION_KEYS,
    BACKFILL_THROUGH,
    KEY_RANGE,
    MalformedKey,
    fixed_text,
    is_recognised_stored,
    parse_key,
    parse_stored,
)
from kandev_dq.records import Records, records_url
from kandev_dq.sql.dialect import recognised_utc_text, utc_instant
from kandev_dq.sql.mapping import subagent_messages
from kandev_dq.sql.messages import tolerating_unreadable_metadata
from kandev_dq.store import sqlite_driver
from tests.subagent_rows import add_message, add_session, at, subagent_metadata
from tests.test_hostile_stores import RESULT_FILE_BOUND
from tests.test_reliability import CAPTURE as CAPTURE_TEXT
from tests.test_reliability import _keep_store_url, cli, quick_project

__all__ = ["_keep_store_url", "quick_project"]  # fixtures used from test_reliability

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
_memory = sqlite_driver.create_engine("sqlite://")


#: CONTRACT §1's calendar at its edges: leap days (2000 and 2024, not 1900 nor 2026), the 30th
#: and 31st of each short month, month and day 00, 13 and 32, year 0000, hour 24.
_CALENDAR_EDGES = [
    *(f"{y}-02-29 01:39:37Z" for y in ("2000", "2024", "1900", "2026")),
    *(f"2026-{m:02d}-{d} 01:39:37.5+00:00" for m in range(1, 13) for d in ("30", "31")),
    "2026-00-10T01:39:37",
    "2026-13-10T01:39:37",
    "2026-01-00T01:39:37",
    "2026-01-32T01:39:37",
    "0000-01-01 00:00:00",
    "0001-01-01 00:00:00",
    "9999-12-31 23:59:59.999999Z",
    "2026-07-30 24:00:00",
]


#: SQLite's GLOB and ``length()`` stop at a NUL: a form followed by a NUL and more text is
#: recognised only if the shape's size is measured in bytes (CONTRACT §1 timestamps).
_NUL_TAILED = [
    "2026-07-30 01:39:37+00:00\x00x",
    "2026-07-30T01:39:37Z\x00",
    "2026-07-30 01:39:37.271235+00:00\x00 garbage after it",
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_near_stored, st.text(max_size=30)), min_size=1, max_size=25))
@example(_CALENDAR_EDGES)
@example(_NUL_TAILED)
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
        # Every other text field reads '' as NULL, as the backfill writes it (§2).
        "parent_tool_call_id": _text(_at(doc, "parent_tool_call_id")) or None,
        "tool_status": _text(_at(doc, "status")) or None,
        "agent_status": _text(_at(doc, *task, "status")) or None,
        "is_async": _flag(_at(doc, *task, "is_async")),
    }
    for name in ("subagent_type", "description", "agent_id", "child_session_id", "model"):
        fields[name] = _text(_at(doc, *task, name)) or None
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


def test_a_nul_led_field_is_read_as_its_text_on_sqlite(sqlite_target):
    """SQLite keeps ``"\\u0000…"`` (PostgreSQL's jsonb rejects the escape, a Known limit):
    a field that starts with NUL is text, not the empty text §2 reads as NULL, because its
    emptiness is tested in bytes (``length()`` stops at the NUL)."""
    nul = "\x00" + "x" * 300
    raw = json.dumps(
        subagent_metadata("tc-nul", status=nul, agent_status=nul, description=nul, model=nul)
    )
    sqlite_target.create_base(subagents=None)
    with sqlite_target.engine.begin() as conn:
        add_session(conn)
        add_message(conn, "m-nul", raw)
    with sqlite_target.engine.connect() as conn:
        sm = subagent_messages()
        (row,) = conn.execute(sa.select(sm)).mappings().all()
    expected = _expected_fields(raw)
    for name in ("tool_status", "agent_status", "description", "model"):
        assert row[name] == expected[name] == nul, name


# --- whole stores of hostile text, checked on both dialects -----------------------------------

_HOSTILE_SHORT = st.one_of(
    st.sampled_from(
        [
            "\x1b[2J\x1b]0;owned\x07\x1b[32mPASSED: all good\x1b[8m",
            "[/x]",
            "[link=https://example.invalid]click[/link]",
            "`|<img src=x onerror=alert(1)>",
            "<script>alert(1)</script>",
            "nul\x00inside",
            "\u202e\u2066bidi\r\n\t\x7f\x85",
            "",
        ]
    ),
    st.text(max_size=12),
)
#: Huge values too, except in identities: PostgreSQL's btree indexes hold at most 2704 bytes.
_HOSTILE = st.one_of(
    _HOSTILE_SHORT,
    st.integers(300_000, 1_100_000).map(lambda n: "h" * n),  # past the result bound
)
#: Identities written wherever they are referenced (a session's, a turn's and a row's keys).
_IDENTITIES = ("session", "task", "turn", "tool_call")
#: Message metadata fields and the subagent row's columns written from the same value.
_MIRRORED = ("description", "subagent_type", "model", "agent_id", "child_session_id")
#: Columns read by no comparison of a message with its row, given a value of their own.
_OWN = ("content", "author_id", "row_tool_status", "row_agent_status", "message_status")
#: Columns that take a byte that is not UTF-8 appended (SQLite; PostgreSQL gets U+FFFD).
_APPENDABLE = (
    ("task_session_messages", "content"),
    ("task_session_messages", "author_id"),
    ("task_session_subagents", "model"),
    ("task_session_subagents", "description"),
)


def _portable(value: str, dialect: str) -> str:
    """PostgreSQL TEXT holds no NUL: it gets the same text with the NUL spelled out."""
    return value.replace("\x00", "\\x00") if dialect == "postgresql" else value


def _deep(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def _write_hostile_store(target, plan: dict) -> None:
    from kandev_dq.contract import tables as schema

    text = {k: _portable(v, target.dialect) for k, v in plan["values"].items()}
    ids = {name: text.get(name, f"{name}-1") for name in _IDENTITIES}
    with target.engine.begin() as conn:
        for table in ("task_session_subagents", "task_session_messages", "task_session_turns"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
        conn.exec_driver_sql("DELETE FROM task_sessions")
        conn.exec_driver_sql("DELETE FROM kandev_meta")
        conn.execute(
            schema.task_sessions.insert().values(
                id=ids["session"], task_id=ids["task"], started_at=at(-60), updated_at=at(-60)
            )
        )
        conn.execute(
            schema.task_session_turns.insert().values(
                id=ids["turn"], task_session_id=ids["session"], task_id=ids["task"]
            )
        )
        mirrored = {name: text[name] for name in _MIRRORED if name in text}
        document = subagent_metadata(
            ids["tool_call"],
            status=text.get("message_status", "completed"),
            **mirrored,
        )
        for message_id, raw in (("m-subagent", json.dumps(document)), ("m-deep", plan["deep"])):
            conn.execute(
                schema.task_session_messages.insert().values(
                    id=message_id,
                    task_session_id=ids["session"],
                    task_id=ids["task"],
                    turn_id=ids["turn"],
                    author_id=text.get("author_id", ""),
                    content=text.get("content", ""),
                    metadata=raw,
                    created_at=at(10),
                    updated_at=at(10),
                )
            )
        conn.execute(
            schema.subagents.insert().values(
                id="r-1",
                task_session_id=ids["session"],
                task_id=ids["task"],
                turn_id=ids["turn"],
                tool_call_id=ids["tool_call"],
                agent_execution_id="unknown",
                tool_status=text.get("row_tool_status", "completed"),
                agent_status=text.get("row_agent_status", "completed"),
                source="live",
                observed_at=at(10),
                settled_at=at(10),
                updated_at=at(10),
                **mirrored,
            )
        )
        for key in ACTIVATION_KEYS:
            value = text.get(key, "" if key == BACKFILL_THROUGH else CAPTURE_TEXT)
            conn.execute(schema.kandev_meta.insert().values(key=key, value=value))
        for table, column in plan["not_utf8"]:
            tail = "CAST(x'ff' AS TEXT)" if target.dialect == "sqlite" else "'\ufffd'"
            conn.exec_driver_sql(f"UPDATE {table} SET {column} = coalesce({column}, '') || {tail}")


def _check(capsys, target, project) -> dict:
    uncommitted = project / "uncommitted"
    (uncommitted / "records.db").unlink(missing_ok=True)  # each store is a new store
    code, out, err = cli(
        capsys,
        "check",
        "--store",
        target.url,
        "--project",
        str(project),
        "--checkpoint",
        "pre_release",
        "--format",
        "json",
    )
    assert code in (0, 1) and "Traceback" not in err, err[-2000:]
    with Records(records_url(project)) as records:
        stored = [records.get_result(key) for key in records.result_keys()]
    assert stored and all(len(value.encode()) < RESULT_FILE_BOUND for value in stored)
    report = json.loads(out)
    return {"exit": code, "success": report["success"]}


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    identities=st.dictionaries(st.sampled_from(_IDENTITIES), _HOSTILE_SHORT, max_size=2),
    values=st.dictionaries(
        st.sampled_from(_MIRRORED + _OWN + ACTIVATION_KEYS), _HOSTILE, max_size=5
    ),
    deep=st.sampled_from([10, 1_500, 10_000]),
    not_utf8=st.sets(st.sampled_from(_APPENDABLE), max_size=2),
)
def test_hostile_stores_give_one_verdict_on_both_dialects(
    sqlite_target, pg_target, quick_project, capsys, identities, values, deep, not_utf8
):
    """Hostile text (control characters, rich markup, HTML, NUL, huge values, deep JSON, bytes
    that are not UTF-8) in identities, text columns, metadata fields and keys: exit 0 or 1 and
    no traceback, no result file over 1 MB, and the same verdict on SQLite and PostgreSQL."""
    plan = {"values": {**identities, **values}, "deep": _deep(deep), "not_utf8": sorted(not_utf8)}
    verdicts = {}
    for target in (sqlite_target, pg_target):
        if not sa.inspect(target.engine).has_table("task_sessions"):
            target.create_base()
        _write_hostile_store(target, plan)
        verdicts[target.dialect] = _check(capsys, target, quick_project)
    assert verdicts["sqlite"] == verdicts["postgresql"], plan["values"].keys()


# --- NUL-led values in every text column and key (SQLite) --------------------------------------

#: Every column SQLite stores as text in the two tables the rules read (timestamps included),
#: and every activation key: each may be led by a NUL, where SQLite's ``length()`` stops.
_NUL_TARGETS = tuple(
    (table.name, column.name)
    for table in (schema_tables.subagents, schema_tables.task_session_messages)
    for column in table.columns
    if not isinstance(column.type, sa.Integer)
) + tuple(("kandev_meta", key) for key in ACTIVATION_KEYS)
#: A timestamp or a key led by a NUL is in no recognised form: the run cannot pass.
_FAILS_WHEN_NUL_LED = {
    (table.name, column.name)
    for table in (schema_tables.subagents, schema_tables.task_session_messages)
    for column in table.columns
    if column.name.endswith("_at")
} | {("kandev_meta", key) for key in ACTIVATION_KEYS}
#: What ``explain`` and ``migrate --dry-run`` may print with NUL-led values past 1 MB.
_OUTPUT_BOUND = 100_000


def _lead_with_nul(target, chosen: dict) -> None:
    """Lead each chosen column (every row) or key with a NUL, ``pad`` ``x`` after its value;
    through a connection of its own, which enforces no foreign key (Kandev's stores do not)."""
    conn = sqlite_driver.connect(target.url)
    try:
        for (table, column), pad in chosen.items():
            if table == "kandev_meta":
                conn.execute(
                    "UPDATE kandev_meta SET value = char(0) || value || ? WHERE key = ?",
                    ("x" * pad, column),
                )
            else:
                conn.execute(
                    f"UPDATE {table} SET {column} = char(0) || coalesce({column}, '') || ?",
                    ("x" * pad,),
                )
        conn.commit()
    finally:
        conn.close()


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    chosen=st.dictionaries(
        st.sampled_from(_NUL_TARGETS),
        st.sampled_from([0, 40, 300_000, 1_100_000]),
        min_size=1,
        max_size=6,
    )
)
@example(chosen={target: 1_100_000 for target in _NUL_TARGETS})
def test_nul_led_values_anywhere_are_cut_by_their_bytes(
    sqlite_target, quick_project, capsys, chosen
):
    """SQLite: a NUL-led value (up to 1.1 MB) in any text column of the subagent rows and the
    messages, ids and metadata included, or in any activation key: check, explain and the
    migration's dry run exit 0 or 1 with no traceback and bounded output, no result file
    reaches 1 MB, and a NUL-led timestamp or key fails the run (CONTRACT §1, AC-24e)."""
    if not sa.inspect(sqlite_target.engine).has_table("task_sessions"):
        sqlite_target.create_base()
    _write_hostile_store(sqlite_target, {"values": {}, "deep": _deep(10), "not_utf8": []})
    _lead_with_nul(sqlite_target, chosen)
    verdict = _check(capsys, sqlite_target, quick_project)
    if _FAILS_WHEN_NUL_LED & chosen.keys():
        assert not verdict["success"], sorted(chosen)
    store, project = ["--store", sqlite_target.url], ["--project", str(quick_project)]
    for command in (
        ["explain", "expect_tool_status_in_acp_vocabulary", *store, *project, "--run"],
        ["explain", "expect_activation_keys_to_be_well_formed", *store, *project, "--run"],
        ["migrate", *store, "--dry-run"],
    ):
        code, out, err = cli(capsys, *command)
        assert code in (0, 1) and "Traceback" not in err, (command, err[-2000:])
        assert len(out.encode()) < _OUTPUT_BOUND and len(err.encode()) < _OUTPUT_BOUND, command
