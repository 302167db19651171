"""The backfill reconciliation with a description of several megabytes in a message and in the
row backfilled from it: counted as any other value on both dialects, and, on SQLite, held a
bounded number of times while the check compares it (docs/reliability.md, Known limits)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
import sqlean._sqlite3

from kandev_dq.contract import tables as schema
from kandev_dq.facts.backfill import APART_BYTES, backfill_facts
from kandev_dq.lab import sample
from kandev_dq.lab.storebuilder import T0, StoreBuilder
from kandev_dq.migration import runner as migrate
from kandev_dq.store.access import open_store
from kandev_dq.store.snapshot import facts_for, pinned

#: Over APART_BYTES, so the texts are compared apart on SQLite; large beside SQLite's page cache.
HUGE = 8 * APART_BYTES
#: How many times SQLite may hold the huge value while the facts are read: the message's text,
#: its parse, the field read from it and the row's own value (five with the ranking's parse
#: left in SQLite's JSON cache by the statement that ranked the messages).
COPIES = 4
#: What SQLite may allocate beside the copies: statements, sorts, cursors.
SLACK = 1 << 20


def store_with_huge_descriptions(target) -> None:
    """A small migrated store, plus two messages backfilled with the others: one with a huge
    description, one with a short one."""
    sample.create_store(target.engine, subagents="amended")
    sample.generate(target.engine, scale=1, seed=0)
    build = StoreBuilder(target.engine)
    session = build.session(task_id="t-huge")
    build.subagent_message(session, T0, "tc-huge", description="d" * HUGE, message_id="m-huge")
    build.subagent_message(session, T0, "tc-short", description="short", message_id="m-short")
    store = open_store(target.url, read_only=False)
    try:
        assert migrate.run(store).ok
    finally:
        store.dispose()


def text_family(target) -> dict:
    """The text family as a check reads it (kandev-dq's own read-only connection)."""
    opened = open_store(target.url, read_only=True)
    try:
        with opened.engine.connect() as conn:
            return backfill_facts(conn, window_minutes=10)["families"]["text"]
    finally:
        opened.dispose()


def set_description(target, row_id: str, value: str) -> None:
    t = schema.subagents
    with target.engine.begin() as conn:
        conn.execute(t.update().where(t.c.id == row_id).values(description=value))


def test_a_huge_description_is_compared_like_any_other(target):
    store_with_huge_descriptions(target)
    assert text_family(target)["count"] == 0

    set_description(target, "m-huge", "e" * HUGE)  # same size, other bytes
    found = text_family(target)
    assert found["count"] == 1
    assert [row["row_id"] for row in found["sample"]] == ["m-huge"]

    set_description(target, "m-short", "other")
    found = text_family(target)
    assert found["count"] == 2
    assert [row["row_id"] for row in found["sample"]] == ["m-huge", "m-short"]

    set_description(target, "m-huge", "d" * HUGE)
    assert text_family(target)["count"] == 1


@contextmanager
def sqlite_peak() -> Iterator[dict[str, int]]:
    """The most memory the SQLite library kandev-dq reads with allocated while the block ran,
    beyond what it held when the block began (its own high-water mark)."""
    library = ctypes.CDLL(sqlean._sqlite3.__file__)  # the loaded library, not another copy
    library.sqlite3_memory_used.restype = ctypes.c_int64
    library.sqlite3_memory_highwater.restype = ctypes.c_int64
    library.sqlite3_memory_highwater.argtypes = [ctypes.c_int]
    found: dict[str, int] = {}
    before = library.sqlite3_memory_used()
    library.sqlite3_memory_highwater(1)  # reset to what is in use now
    yield found
    found["bytes"] = library.sqlite3_memory_highwater(0) - before


def page_cache_bytes(engine: sa.Engine) -> int:
    """The most SQLite's page cache of one connection holds (pages read stay cached)."""
    with engine.connect() as conn:
        size = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
        page = conn.exec_driver_sql("PRAGMA page_size").scalar_one()
    return -size * 1024 if size < 0 else size * page


def test_sqlite_holds_a_huge_description_a_bounded_number_of_times(sqlite_target):
    store_with_huge_descriptions(sqlite_target)
    bound = COPIES * HUGE + page_cache_bytes(sqlite_target.engine) + SLACK
    opened = open_store(sqlite_target.url, read_only=True)
    try:
        with pinned(opened.engine), sqlite_peak() as peak:
            facts = facts_for(opened.engine, "backfill", lambda conn: backfill_facts(conn, 10))
    finally:
        opened.dispose()
    assert facts["families"]["text"]["count"] == 0
    assert peak["bytes"] >= 3 * HUGE  # the measure sees the value (parse, field, row)
    assert peak["bytes"] < bound, f"{peak['bytes'] / HUGE:.2f} times the value"


def test_the_threshold_reads_sizes_not_values(sqlite_target):
    """The test of sizes that sets a row apart costs no copy of the value."""
    store_with_huge_descriptions(sqlite_target)
    with sqlite_target.engine.connect() as conn, sqlite_peak() as peak:
        sizes = conn.execute(
            sa.select(sa.func.octet_length(schema.subagents.c.description)).where(
                schema.subagents.c.id == "m-huge"
            )
        ).scalar_one()
    assert sizes == HUGE
    assert peak["bytes"] < HUGE / 10


def test_a_row_id_of_any_bytes_finds_its_row(sqlite_target, monkeypatch):
    """The ids of the rows compared apart travel exactly: not UTF-8, NUL-led, a BLOB."""
    from kandev_dq.facts import backfill

    compared = []
    apart = backfill._texts_apart
    monkeypatch.setattr(
        backfill, "_texts_apart", lambda *args: compared.append(apart(*args)) or compared[-1]
    )
    store_with_huge_descriptions(sqlite_target)
    set_description(sqlite_target, "m-huge", "e" * HUGE)
    for stored in ("CAST(x'00ff41' AS TEXT)", "x'ff0041'"):
        with sqlite_target.engine.begin() as conn:
            conn.execute(
                sa.text(
                    f"UPDATE task_session_subagents SET id = {stored} "
                    "WHERE task_session_id = (SELECT task_session_id FROM task_session_messages "
                    "WHERE id = 'm-huge') AND tool_call_id = 'tc-huge'"
                )
            )
        assert text_family(sqlite_target)["count"] == 1
        assert compared[-1] == 1  # compared apart, by the id as stored


def test_rows_whose_ids_find_no_one_row_are_counted_in_one_statement(sqlite_target, monkeypatch):
    from kandev_dq.facts import backfill

    store_with_huge_descriptions(sqlite_target)
    monkeypatch.setattr(backfill, "_texts_apart", lambda conn, cmp, pairs: None)
    assert text_family(sqlite_target)["count"] == 0
    set_description(sqlite_target, "m-huge", "e" * HUGE)
    set_description(sqlite_target, "m-short", "other")
    assert text_family(sqlite_target)["count"] == 2
