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


RUN_KEY_FORMAT = "%Y%m%dT%H%M%S.%fZ"


def earlier_keys(run_key: str, count: int) -> list[tuple[str, dt.datetime]]:
    """``count`` run keys (and their times) a minute apart, each before the last, from
    ``run_key``'s."""
    first = dt.datetime.strptime(run_key, RUN_KEY_FORMAT).replace(tzinfo=dt.UTC)
    times = [first - dt.timedelta(minutes=i) for i in range(1, count + 1)]
    return [(when.strftime(RUN_KEY_FORMAT), when) for when in times]


def copy_tables(source: sa.Engine, target: sa.Engine) -> None:
    """Every row of every records table of ``source`` into the same (empty) tables of
    ``target``, of either dialect (serial ids left to ``target``, whose sequences then
    stay right)."""
    from kandev_dq import records as rec

    with source.connect() as read, target.begin() as write:
        for table in rec.metadata.sorted_tables:
            columns = [c for c in table.c if c.name != "id"]
            rows = [dict(r) for r in read.execute(sa.select(*columns)).mappings()]
            if rows and table is not rec.schema_versions:  # kandev-dq wrote its own version
                write.execute(table.insert(), rows)


def seed_earlier_runs(engine: sa.Engine, earlier_runs: int) -> None:
    """Add ``earlier_runs`` copies of the one recorded run (its validation results and its
    register record), each a minute before the last: rows copied, nothing checked."""
    from kandev_dq import records as rec

    with engine.begin() as conn:
        results = conn.execute(sa.select(rec.results)).mappings().all()
        [run] = conn.execute(sa.select(rec.runs)).mappings().all()
        result_rows, run_rows = [], []
        for key, when in earlier_keys(run["run_key"], earlier_runs):
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


def seed_pages(project: Path, earlier_runs: int) -> int:
    """Copy the one run's data docs result pages for each of ``earlier_runs`` earlier run keys
    (:func:`earlier_keys`), as a site that built every run holds them; the pages copied."""
    site = Path(project) / "uncommitted" / "data_docs" / "local_site" / "validations"
    pages = sorted(site.rglob("*.html"))  # validations/<suite>/<run name>/<run key>/<batch>
    copied = 0
    for page in pages:
        run_folder = page.parent
        for key, _ in earlier_keys(run_folder.name, earlier_runs):
            target = run_folder.parent / key / page.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, target)
            copied += 1
    return copied


def sample_store(work: Path) -> Path:
    """A small migrated sample store (SQLite) in ``work``: what the checked run reads."""
    from kandev_dq.lab.sample import create_store, generate
    from kandev_dq.migration import runner as migration
    from kandev_dq.store.access import open_store

    store_file = Path(work) / "store.db"
    opened = open_store(str(store_file), read_only=False, must_exist=False, require_kandev=False)
    try:
        create_store(opened.engine, subagents="amended")
        generate(opened.engine, scale=1, seed=0)
        migration.run(opened)
    finally:
        opened.dispose()
    return store_file


def one_checked_run(work: Path, checkpoint: str) -> tuple[Path, Path, Path, Path]:
    """A fresh ``work`` folder with a sample store, a project, and a SQLite records database
    holding one real run of ``checkpoint`` (an unknown one fails, naming the known): the
    run every seeded one copies. (work, store, project, records)."""
    from kandev_dq.project.files import build_project
    from kandev_dq.run.check import run_check

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    store_file = sample_store(work)
    project = build_project(work / "project")
    records_file = work / "one-run.db"
    run_check(project, str(store_file), checkpoint, records=str(records_file))
    return work, store_file, project, records_file


def _build_seconds(project: Path, records_file: Path, run_keys: list) -> float:
    from kandev_dq.gx.context import load_context
    from kandev_dq.gx.results_store import attach_records
    from kandev_dq.records import Records

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

    work, store_file, template_project, template_records = one_checked_run(
        Path(work) / "docs-history", "nightly"
    )
    engine = sa.create_engine(f"sqlite:///{template_records}")
    with engine.connect() as conn:
        from kandev_dq.records import results

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
        seeded = sa.create_engine(f"sqlite:///{records_file}")
        seed_earlier_runs(seeded, max(length - 1, 0))
        seeded.dispose()
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
