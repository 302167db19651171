"""The bench keeps the plan of every statement kandev-dq's facts execute, on both dialects."""

from __future__ import annotations

from bench import measure, report
from tests.benchhelpers import migrated_bench_store

#: A word every plan of the dialect holds (SQLite's EXPLAIN QUERY PLAN; PostgreSQL's ANALYZE).
PLAN_VOCABULARY = {"sqlite": ("SCAN",), "postgresql": ("Buffers:", "actual time=")}


def test_query_plans_of_the_nightly_facts(target, built_project, tmp_path):
    store = migrated_bench_store(target)
    out = tmp_path / "plans" / f"{target.dialect}-1-nightly.txt"

    written = measure.query_plans(store, measure.families(built_project, "nightly"), out)

    assert written == out and out.is_file()
    text = out.read_text()
    lines = text.splitlines()
    assert any(line.startswith("-- 1. kandev.") for line in lines)
    vocabulary = PLAN_VOCABULARY[target.dialect]
    plan_lines = [line for line in lines if not line.startswith("--")]
    assert any(word in line for line in plan_lines for word in vocabulary), text[:2000]
    assert not any(line.startswith("(no plan:") for line in lines), text[:2000]
    headers = [line for line in lines if line.startswith("-- ") and ". kandev." in line]
    assert [h.split(".", 1)[0] for h in headers] == [f"-- {n}" for n in range(1, len(headers) + 1)]


def test_report_names_the_plan_files():
    text = "\n".join(report.plans_section([{"plans": ["plans/sqlite-1-nightly.txt"]}]))

    assert "## Query plans" in text and "`plans/sqlite-1-nightly.txt`" in text
    assert report.plans_section([{}]) == []


def test_the_largest_scale_plans_are_kept_beside_the_table(tmp_path):
    """The work folder is not kept: the committed table links copies of its largest plans."""
    from bench.run import keep_plans

    work = tmp_path / "work"
    (work / "plans").mkdir(parents=True)
    results = []
    for scale in (1, 4):
        plan = f"plans/sqlite-{scale}-nightly.txt"
        (work / plan).write_text(f"plan at scale {scale}")
        results.append({"scale": scale, "plans": [plan]})

    kept = keep_plans(work, results, tmp_path / "bench" / "plans")

    assert kept == ["plans/sqlite-4-nightly.txt"]
    assert (tmp_path / "bench" / kept[0]).read_text() == "plan at scale 4"
    text = "\n".join(report.plans_section(results, kept))
    assert "[`plans/sqlite-4-nightly.txt`](plans/sqlite-4-nightly.txt)" in text


def test_the_floors_read_in_a_snapshot_of_their_own(pg_target):
    """A denominator never follows the code it measures: the floors' snapshot is read-only
    with JIT off, and keeps the server's planner costs, not kandev-dq's."""
    with measure.floor_snapshot(pg_target.engine) as conn:
        settings = {
            name: conn.exec_driver_sql(f"SHOW {name}").scalar_one()
            for name in ("transaction_read_only", "jit", "parallel_tuple_cost")
        }
    assert settings == {"transaction_read_only": "on", "jit": "off", "parallel_tuple_cost": "0.1"}


def test_a_plan_line_holding_a_window_of_ids_is_cut():
    """A line that prints thousands of bound ids whole is cut to PLAN_LINE_CHARS, marked."""
    long = "Index Cond: (id = ANY ('{" + ",".join(["0" * 36] * 1000) + "}'))"
    cut = measure._cut(long)
    assert cut.endswith(" …") and len(cut) == measure.PLAN_LINE_CHARS + 2
    assert measure._cut("Seq Scan on task_sessions") == "Seq Scan on task_sessions"
