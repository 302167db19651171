"""``python -m bench --docs-history 1,1000``: the data docs cost of one check against its history.

A check builds the data docs at its end (GX's ``UpdateDataDocsAction``: its own results' pages,
the index, the store overview). The goal: the build after 1,000 stored runs takes within 0.5 s
of the build after 1, so a year of nightly runs does not make every check slower.

For each history length N: a fresh SQLite records database holding one real ``nightly`` run
(checked in process on a small sample store) plus N - 1 synthetic earlier runs, each a copy
of that run's three validation results and its register record under an earlier run time.
Then, ``--repeat`` times, the docs build exactly as the check's action does it
(``context.build_data_docs(resource_identifiers=<the run's results>)``) is timed in process.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import statistics
import time
from pathlib import Path

import sqlalchemy as sa

#: The goal: the build after the longest history within this of the build after the shortest.
FLAT_WITHIN_S = 0.5


def _seed(records_file: Path, earlier_runs: int) -> None:
    """Add ``earlier_runs`` copies of the one recorded run, each a minute before the last."""
    from kandev_dq.run import records as rec

    engine = sa.create_engine(f"sqlite:///{records_file}")
    with engine.begin() as conn:
        results = conn.execute(sa.select(rec.results)).mappings().all()
        [run] = conn.execute(sa.select(rec.runs)).mappings().all()
        first = dt.datetime.strptime(run["run_key"], "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=dt.UTC)
        result_rows, run_rows = [], []
        for i in range(1, earlier_runs + 1):
            when = first - dt.timedelta(minutes=i)
            key = when.strftime("%Y%m%dT%H%M%S.%fZ")
            for row in results:
                parts = json.loads(row["result_key"])
                parts[-2] = key
                result_rows.append(
                    {
                        "result_key": json.dumps(parts),
                        "suite": row["suite"],
                        "run_name": row["run_name"],
                        "run_key": key,
                        "stored_at": rec.now_text(when),
                        "value": row["value"],
                    }
                )
            copied = {k: v for k, v in run.items() if k != "id"}
            run_rows.append({**copied, "run_key": key, "run_time": rec.now_text(when)})
        if result_rows:
            conn.execute(rec.results.insert(), result_rows)
            conn.execute(rec.runs.insert(), run_rows)
    engine.dispose()


def _build_seconds(project: Path, records_file: Path, run_keys: list) -> float:
    from kandev_dq.run.project import load_context
    from kandev_dq.run.records import Records
    from kandev_dq.run.results_store import attach_records

    with Records(str(records_file)) as records:
        context = load_context(project)
        attach_records(context, records)
        started = time.perf_counter()
        context.build_data_docs(resource_identifiers=run_keys)
        return time.perf_counter() - started


def measure(work: Path, lengths: list[int], repeat: int) -> dict:
    """Median docs-build seconds by history length (runs stored, the checked one included)."""
    from great_expectations.data_context.types.resource_identifiers import (
        ValidationResultIdentifier,
    )

    from kandev_dq.lab.sample import create_store, generate
    from kandev_dq.migration import runner as migration
    from kandev_dq.run.check import run_check
    from kandev_dq.run.project import build_project
    from kandev_dq.store.access import open_store

    work = Path(work) / "docs-history"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    store_file = work / "store.db"
    opened = open_store(str(store_file), read_only=False, must_exist=False, require_kandev=False)
    try:
        create_store(opened.engine, subagents="amended")
        generate(opened.engine, scale=1, seed=0)
        migration.run(opened)
    finally:
        opened.dispose()
    template_project = build_project(work / "project")
    template_records = work / "one-run.db"
    run_check(template_project, str(store_file), "nightly", records=str(template_records))
    engine = sa.create_engine(f"sqlite:///{template_records}")
    with engine.connect() as conn:
        from kandev_dq.run.records import results

        keys = [
            ValidationResultIdentifier.from_tuple(tuple(json.loads(k)))
            for k in conn.scalars(sa.select(results.c.result_key))
        ]
    engine.dispose()
    if len(keys) != 3:  # nightly's three suites: a build without results would measure nothing
        raise SystemExit(f"the checked run stored {len(keys)} validation result(s), not 3")
    seconds: dict[int, list[float]] = {}
    for length in lengths:
        records_file = work / f"records-{length}.db"
        shutil.copy(template_records, records_file)
        _seed(records_file, max(length - 1, 0))
        project = work / f"project-{length}"
        shutil.rmtree(project, ignore_errors=True)
        shutil.copytree(template_project, project)
        seconds[length] = [
            _build_seconds(project, records_file, keys) for _ in range(max(repeat, 1))
        ]
    medians = {n: statistics.median(v) for n, v in seconds.items()}
    shortest, longest = min(lengths), max(lengths)
    return {
        "seconds": seconds,
        "medians": medians,
        "difference": medians[longest] - medians[shortest],
        "flat": medians[longest] - medians[shortest] <= FLAT_WITHIN_S,
        "shortest": shortest,
        "longest": longest,
    }


def render(found: dict, info: dict) -> str:
    lines = [
        "# kandev-dq bench: data docs cost against run history",
        "",
        f"- date: {info['date']}; command: `{info['command']}`",
        f"- machine: {info.get('cpus', '?')} CPU(s), load average {info['load_before']} before "
        "(shared with other work: read the difference, not the seconds)",
        "- what: a check's own docs build (its results' pages, the index, the store overview) "
        "after N stored runs in a SQLite records database; medians of "
        f"{len(next(iter(found['seconds'].values())))} builds",
        "",
        "| runs stored | docs build (s) |",
        "|---:|---:|",
    ]
    for length, median in sorted(found["medians"].items()):
        lines.append(f"| {length:,} | {median:.2f} |")
    verdict = "met" if found["flat"] else "NOT met"
    lines += [
        "",
        f"After {found['longest']:,} runs the build takes {found['difference']:+.2f} s against "
        f"{found['shortest']:,} run(s): the goal (within {FLAT_WITHIN_S} s) is {verdict}.",
        "",
    ]
    return "\n".join(lines)
