"""A huge ``tool_call_id`` in a message's metadata: counted exactly like a short one by the
writer-health, backfill and coverage facts, on both dialects, and a whole ``check`` stays
within the memory bound of docs/reliability.md (GX import + context + 100 MB + 3x the value);
so does it with one huge value in any column of a message or a subagent row a check reads.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from bench import huge_value
from kandev_dq.contract import tables as schema
from kandev_dq.facts.activation import activation_facts
from kandev_dq.facts.backfill import backfill_facts
from kandev_dq.facts.health import health_facts
from kandev_dq.lab import sample
from kandev_dq.lab.storebuilder import T0, StoreBuilder
from kandev_dq.migration import runner as migrate
from kandev_dq.sql.compared import KEY_COMPARED_BYTES, key_marker
from kandev_dq.sql.scan import carry_sessions
from kandev_dq.store.access import open_store
from kandev_dq.store.observe import message_handle
from kandev_dq.store.snapshot import facts_for, pinned
from tests.benchhelpers import migrated_bench_store

#: Over the comparison limit many times over; small enough for a test's memory.
HUGE = 4 * KEY_COMPARED_BYTES
MEASURED_MB = 25
VALUE_MB = 50
#: The bound's parts (docs/reliability.md): beside GX's import and context, per value.
OVER_GX_MB = 100
PER_VALUE = 3


def read(target, family: str, compute):
    opened = open_store(target.url, read_only=True)
    try:
        with pinned(opened.engine):
            return facts_for(opened.engine, family, compute)
    finally:
        opened.dispose()


def live_key(build: StoreBuilder, session: str, key: str, *, with_row: bool) -> None:
    """A qualifying message written after capture_since, with its row when ``with_row``."""
    at = datetime.now(UTC)
    build.subagent_message(session, at, key, description="d", status="completed")
    if with_row:
        build.subagent_row(session, key, at)


def shortfall_excess(target) -> tuple[int, int]:
    facts = read(target, "health", health_facts)
    return facts["shortfall"]["count"], facts["excess"]["count"]


@pytest.mark.parametrize("size", [8, HUGE])
def test_writer_health_counts_a_huge_key_as_a_short_one(target, size):
    migrated_bench_store(target)
    build = StoreBuilder(target.engine)
    session = build.session(task_id="t-key")
    base = shortfall_excess(target)
    key = "k" * (size - 1)
    live_key(build, session, key + "a", with_row=True)
    assert shortfall_excess(target) == base  # present: no shortfall
    live_key(build, session, key + "b", with_row=False)
    assert shortfall_excess(target) == (base[0] + 1, base[1])  # absent: one
    # Differing from a key of the window only in its last byte: two keys, each counted.
    live_key(build, session, key + "c", with_row=False)
    build.subagent_row(session, key + "d", datetime.now(UTC))
    assert shortfall_excess(target) == (base[0] + 2, base[1] + 1)
    shown = read(target, "health", health_facts)["shortfall"]["sample"]
    assert all(len(row["tool_call_id"]) < 300 for row in shown)


@pytest.mark.parametrize("size", [8, HUGE])
def test_backfill_and_coverage_count_a_huge_key_as_a_short_one(target, size):
    sample.create_store(target.engine, subagents="amended")
    sample.generate(target.engine, scale=1, seed=0)
    build = StoreBuilder(target.engine)
    session = build.session(task_id="t-key")
    key = "k" * (size - 1)
    build.subagent_message(session, T0, key + "a", description="d", status="completed")
    build.subagent_message(session, T0, key + "b", description="d", status="completed")
    store = open_store(target.url, read_only=False)
    try:
        assert migrate.run(store).ok
    finally:
        store.dispose()
    backfill = read(target, "backfill", lambda conn: backfill_facts(conn, 10))
    assert backfill["families"]["orphan"]["count"] == 0
    expected = backfill["expected_rows"]
    assert backfill["backfill_rows"] == expected  # both keys mapped, each to its own row
    coverage = read(target, "activation", activation_facts)
    assert coverage["uncovered_messages"]["count"] == 0

    # A later message under one of the keys (never backfilled) leaves the counts as they are;
    # one differing in its last byte is a key of its own (a message the backfill never read).
    build.subagent_message(session, T0, key + "c", description="d", status="completed")
    coverage = read(target, "activation", activation_facts)
    assert coverage["uncovered_messages"]["count"] == 1
    assert len(coverage["uncovered_messages"]["sample"][0]["tool_call_id"]) < 300
    backfill = read(target, "backfill", lambda conn: backfill_facts(conn, 10))
    assert backfill["expected_rows"] == expected + 1
    assert backfill["families"]["orphan"]["count"] == 0


_MEASURE = """
import json, resource, subprocess, sys
run = subprocess.run(sys.argv[1:], capture_output=True)
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "exit": run.returncode}))
"""


def peak_rss(argv: list[str]) -> dict:
    """The peak RSS of ``argv`` run alone, from a small wrapper that measures its own child."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def gx_baseline_mb(built_project) -> float:
    """GX's import + context as a process: the bound's base."""
    load = "import great_expectations as gx; gx.get_context(mode='file', context_root_dir=%r)"
    return peak_rss([sys.executable, "-c", load % str(built_project)])["rss_mb"]


def check_peak(target, project) -> dict:
    check = [sys.executable, "-c", "from kandev_dq.cli import main; main()", "check"]
    return peak_rss(
        [
            *check,
            *("--project", str(project), "--store", target.url),
            *("--checkpoint", "pre_release", "--format", "json", "--quiet"),
        ]
    )


def test_a_check_with_a_huge_key_stays_within_the_memory_bound(target, project, gx_baseline_mb):
    migrated_bench_store(target)
    build = StoreBuilder(target.engine)
    value = "k" * (MEASURED_MB * 1_000_000)
    session = build.session(task_id="t-huge")
    build.subagent_message(session, T0, value, description="d", status="completed")
    live_key(build, build.session(task_id="t-huge-live"), value, with_row=False)
    del value
    found = check_peak(target, project)
    assert found["exit"] == 1  # the shortfall and the uncovered message are found
    bound = gx_baseline_mb + OVER_GX_MB + PER_VALUE * MEASURED_MB
    assert found["rss_mb"] <= bound, f"{found['rss_mb']:.0f} MB over the bound {bound:.0f} MB"


#: One column of each family a check reads (the bench's cases), a message's task id, read by
#: the reconciliation alone, and its updated_at, read by the reconciliation and the rules
#: apart from its created_at; a message's turn (a token in the reconciliation), a row's task
#: id and updated_at (read by the row rules and writer health), and an unbounded text of a
#: row; ``python -m bench --huge-value`` measures the bench's cases with repeats.
COLUMNS = [
    *huge_value.COLUMN_CASES.values(),
    ("message", "task_id"),
    ("message", "updated_at"),
    ("message", "turn_id"),
    ("row", "task_id"),
    ("row", "updated_at"),
    ("row", "parent_tool_call_id"),
]


@pytest.mark.parametrize(("table", "column"), COLUMNS, ids=[f"{t}.{c}" for t, c in COLUMNS])
def test_a_check_with_a_huge_value_in_any_column_stays_within_the_memory_bound(
    target, project, gx_baseline_mb, table, column
):
    if target.dialect == "postgresql" and (table, column) in huge_value.POSTGRES_CANNOT_HOLD:
        pytest.skip(
            f"PostgreSQL cannot store a huge {table} {column}: a btree index entry holds at "
            "most 2704 bytes, a TIMESTAMP no text"
        )
    migrated_bench_store(target)
    huge_value.plant_huge_value(target.engine, table, column, "v" * (VALUE_MB * 1_000_000))
    found = check_peak(target, project)
    assert found["exit"] in (0, 1)  # a verdict, not an error
    bound = gx_baseline_mb + OVER_GX_MB + PER_VALUE * VALUE_MB
    assert found["rss_mb"] <= bound, f"{found['rss_mb']:.0f} MB over the bound {bound:.0f} MB"


def test_a_session_read_as_a_token_is_not_carried_to_the_next_live_run():
    """The ledger groups a session over the key limit by its token, which names no session:
    the next live run then reads in full (AC-26) rather than re-read a session that is not."""
    token = key_marker(b"s" * (KEY_COMPARED_BYTES + 1)).rstrip()  # as key_shown shows it
    with sa.create_engine("sqlite://").connect() as conn:
        for sessions, carried in (([token[:-1]], [token[:-1]]), ([token], None)):
            rows = sa.union_all(
                *(sa.select(sa.literal(s).label("task_session_id")) for s in sessions)
            )
            found = {"count": 1, "sample": []}
            carry_sessions(conn, [(found, sa.select(rows.subquery().c.task_session_id))])
            assert found["sessions"] == carried


#: Ids over the key limit sharing their first KiB (and one that is that KiB): only the byte
#: after it orders them; the ranking and the sample carry none of them whole (AC-21b).
SHARED_HEAD = "m" * KEY_COMPARED_BYTES
LONG_IDS = (SHARED_HEAD + "a" + "z" * 200, SHARED_HEAD, SHARED_HEAD + "b", SHARED_HEAD + "a")


def tied_messages(target, *, key: str) -> list[str]:
    """One message per :data:`LONG_IDS` under ``key``, all created at one instant; their ids
    in byte order."""
    build = StoreBuilder(target.engine)
    session = build.session(task_id="t-tie")
    for message_id in LONG_IDS:
        build.subagent_message(session, T0, key, message_id=message_id, description=message_id)
    return sorted(LONG_IDS, key=lambda i: i.encode())


def migrated_with(target, add) -> object:
    sample.create_store(target.engine, subagents="amended")
    sample.generate(target.engine, scale=1, seed=0)
    added = add()
    store = open_store(target.url, read_only=False)
    try:
        assert migrate.run(store).ok
    finally:
        store.dispose()
    return added


def test_ids_over_the_key_limit_rank_and_list_in_byte_order(target):
    ordered = migrated_with(target, lambda: tied_messages(target, key="tc-tie"))
    rows = schema.subagents
    with target.engine.connect() as conn:
        (written,) = conn.execute(sa.select(rows.c.id).where(rows.c.tool_call_id == "tc-tie"))
    assert written.id == ordered[-1]  # the migration's winner: the greatest id (AC-21b)
    facts = read(target, "backfill", lambda conn: backfill_facts(conn, 10))
    assert {name: f["count"] for name, f in facts["families"].items() if f["count"]} == {}
    assert facts["expected_rows"] == facts["backfill_rows"]

    # The row rewritten from the loser whose id differs from the winner's in its last byte.
    with target.engine.begin() as conn:
        conn.execute(rows.update().where(rows.c.id == ordered[-1]).values(id=ordered[-2]))
    (carried,) = read(target, "backfill", lambda conn: backfill_facts(conn, 10))["families"][
        "winner"
    ]["sample"]
    assert digest_of(ordered[-2]) in carried["row_id"]

    assert_uncovered_in_byte_order(target, ordered)


def assert_uncovered_in_byte_order(target, ordered: list[str]) -> None:
    """With their row gone, the tied messages are sampled in byte order, each shown by its
    size and digest."""
    rows = schema.subagents
    with target.engine.begin() as conn:
        conn.execute(rows.delete().where(rows.c.tool_call_id == "tc-tie"))
    uncovered = read(target, "activation", activation_facts)["uncovered_messages"]
    assert uncovered["count"] == len(LONG_IDS)
    shown = [row["id"] for row in uncovered["sample"]]
    assert [next(i for i in ordered if digest_of(i) in s or s == i) for s in shown] == ordered


@pytest.mark.parametrize("target", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("hiding", "handle"),
    [
        (("rowid",), "_rowid_"),
        (("rowid", "_rowid_"), "oid"),
        (("ROWID", "_rowid_", "oid"), "id"),
        ("WITHOUT ROWID", "id"),
    ],
)
def test_messages_whose_rowid_is_hidden_are_named_by_another_name(target, hiding, handle):
    """SQLite names a message by its rowid; a column of that name hides it (every message
    holding the same value here), and a table without rowid has none: the next free name, or
    the id, names them, with the same facts."""
    ordered = migrated_with(target, lambda: tied_messages(target, key="tc-tie"))
    messages = schema.task_session_messages.name
    with target.engine.begin() as conn:
        if hiding == "WITHOUT ROWID":
            ddl = conn.exec_driver_sql(
                f"SELECT type, sql FROM sqlite_master WHERE tbl_name = '{messages}' "
                "AND sql IS NOT NULL ORDER BY type DESC"
            ).all()
            kept = conn.exec_driver_sql(f"SELECT * FROM {messages}").all()
            conn.exec_driver_sql(f"DROP TABLE {messages}")
            for kind, sql in ddl:
                conn.exec_driver_sql(f"{sql} WITHOUT ROWID" if kind == "table" else sql)
            marks = ", ".join("?" * len(kept[0]))
            conn.exec_driver_sql(
                f"INSERT INTO {messages} VALUES ({marks})", [tuple(r) for r in kept]
            )
        else:
            for name in hiding:
                conn.exec_driver_sql(f"ALTER TABLE {messages} ADD COLUMN {name} TEXT DEFAULT 'x'")
    assert read(target, "handle", message_handle) == handle
    facts = read(target, "backfill", lambda conn: backfill_facts(conn, 10))
    assert {name: f["count"] for name, f in facts["families"].items() if f["count"]} == {}
    assert facts["expected_rows"] == facts["backfill_rows"] > len(LONG_IDS)
    assert_uncovered_in_byte_order(target, ordered)


def digest_of(value: str) -> str:
    """The digest prefix a sample shows a long value by."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]
