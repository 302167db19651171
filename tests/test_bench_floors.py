"""The bench's single-scan floors: what they read and count, on both dialects (CONTRACT §1,
AC-19, AC-23b, AC-24e)."""

from __future__ import annotations

from bench import floors, measure, report
from bench.stores import Copy
from kandev_dq.facts.stored_text import stored_text_facts
from kandev_dq.store.access import open_store
from tests.benchhelpers import migrated_bench_store


def _stored_text(store: Copy) -> dict:
    opened = open_store(store.target, read_only=True)
    try:
        with opened.engine.connect() as conn:
            return stored_text_facts(conn)
    finally:
        opened.dispose()


def test_the_rules_pass_reads_what_the_single_pass_reads_and_agrees_with_kandev_dq(target):
    store = migrated_bench_store(target)

    _, single = measure.scan_floor(store)
    _, rules = measure.scan_floor(store, floors.message_rules_pass)

    assert single["messages"] > 0 and single["subagent_message_keys"] > 0
    assert (rules["messages"], rules["subagent_message_keys"]) == (
        single["messages"],
        single["subagent_message_keys"],
    )
    assert rules["unreadable"] == rules["timestamps"] == rules["out_of_range"] == 0
    assert floors.rules_agree(rules, _stored_text(store)) == []


def test_the_rules_pass_counts_what_it_tests_on_sqlite(sqlite_target):
    """One message with metadata that is not JSON (AC-23b), one with a date in a form the
    exact construct does not read (AC-24e), one dated in year 9999 (CONTRACT §1), one whose
    kind's name is escaped (AC-19)."""
    store = migrated_bench_store(sqlite_target)
    with sqlite_target.engine.begin() as conn:
        ids = [
            row[0]
            for row in conn.exec_driver_sql(
                "SELECT id FROM task_session_messages ORDER BY id LIMIT 4"
            )
        ]
        conn.exec_driver_sql(
            "UPDATE task_session_messages SET metadata = 'not json' WHERE id = ?", (ids[0],)
        )
        conn.exec_driver_sql(
            "UPDATE task_session_messages SET created_at = '30/07/2026 10:00' WHERE id = ?",
            (ids[1],),
        )
        conn.exec_driver_sql(
            "UPDATE task_session_messages SET updated_at = '9999-01-01 00:00:00' WHERE id = ?",
            (ids[2],),
        )
        conn.exec_driver_sql(
            "UPDATE task_session_messages SET metadata = "
            """'{"normalized": {"\\u006bind": "message"}}' WHERE id = ?""",
            (ids[3],),
        )

    _, rules = measure.scan_floor(store, floors.message_rules_pass)

    assert rules["unreadable"] == 1
    assert rules["timestamps"] == 1
    assert rules["out_of_range"] == 1
    assert rules["kind_path_walks"] == 1
    assert floors.rules_agree(rules, _stored_text(store)) == []


def test_rules_agree_names_a_contradiction():
    facts = {
        "metadata": {"count": 2},
        "timestamps": {"by_column": {"task_session_messages.created_at": 1}},
    }
    rules = {"unreadable": 1, "timestamps": 3}

    found = floors.rules_agree(rules, facts)

    assert found == [
        "rules pass unreadable: 1 != kandev-dq 2",
        "rules pass timestamps: 3 > kandev-dq 1",
    ]


def test_the_report_shows_the_rules_pass_beside_the_single_pass():
    run = {"single_pass": [2.0, 2.2, 2.1], "rules_pass": [6.0, 6.4, 6.2]}

    assert report._rules_ratio(run) == "2.95×"
    assert report._rules_ratio({"single_pass": [2.0]}) == "–"


def test_the_targets_set_kandev_dq_against_the_rules_pass():
    run = {
        "dialect": "sqlite",
        "scale": 4,
        "messages": 10,
        "single_pass": [1.0],
        "rules_pass": [3.0],
        "facts": {"pre_release": [9.0], "nightly": [6.0]},
        "facts_floor": {"pre_release": [8.0], "nightly": [5.0]},
        "process": {"pre_release": [15.0], "nightly": [12.0]},
        "process_rss": {"pre_release": [300], "nightly": [300]},
        "baseline": [5.0],
        "baseline_rss": [200],
        "baseline_paused": [4.5],
        "migrate": [2.0],
        "migrate_floor": [1.5],
    }

    lines = report._targets([run], [])

    assert lines[-1] == (
        "- sqlite rules pass: 3.00× the single pass, beside goals of 2.0× (pre_release) and "
        "1.5× (nightly); kandev-dq's SQL is 3.00× it (pre_release) and 2.00× it (nightly)"
    )


def test_the_rules_pass_counts_what_it_tests_on_postgresql(pg_target):
    """PostgreSQL's leg of the pass: one message dated in year 9999 (CONTRACT §1) and one whose
    kind's name is escaped (AC-19). Its typed columns and the jsonb cast leave no text form or
    unreadable document to count."""
    store = migrated_bench_store(pg_target)
    with pg_target.engine.begin() as conn:
        first, second = conn.exec_driver_sql(
            "SELECT id FROM task_session_messages ORDER BY id LIMIT 2"
        ).scalars()
        conn.exec_driver_sql(
            "UPDATE task_session_messages SET updated_at = '9999-01-01 00:00:00' WHERE id = %(id)s",
            {"id": first},
        )
        conn.exec_driver_sql(
            "UPDATE task_session_messages SET metadata = "
            """'{"normalized": {"\\u006bind": "message"}}' WHERE id = %(id)s""",
            {"id": second},
        )

    _, rules = measure.scan_floor(store, floors.message_rules_pass)

    assert rules["out_of_range"] == 1
    assert rules["kind_path_walks"] == 1
    assert floors.rules_agree(rules, _stored_text(store)) == []
