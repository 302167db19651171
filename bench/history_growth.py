"""``python -m bench --history-growth 10,2000``: a whole check run's cost against its history.

At one run every 5 minutes the records database holds about 2,000 runs of a checkpoint a week.
The goal: after the longest history a ``kandev-dq check`` run (the data docs build included)
costs at most :data:`RATIO_GOAL` times what it cost after the shortest, on a SQLite and on a
PostgreSQL records database.

One real run of ``--checkpoint`` (any checkpoint the project has; ``nightly`` by default) is
checked in process on a small sample store, into a template records database. For each records
dialect and each history length N, a fresh records database receives that run's rows (the key
ledger and the baseline included) and N - 1 copies of its results and register record under
earlier run times, and a copy of the project receives a copy of the run's data docs pages for
each of them (a site that has built every run). Then, ``--repeat`` rounds of one in-process
``run_check`` per history length, alternating so drift on a shared machine falls on both.
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

import sqlalchemy as sa

from bench.docs_history import copy_tables, one_checked_run, seed_earlier_runs, seed_pages
from bench.stores import Stores, postgres_server

#: The goal: a run after the longest history costs at most this times one after the shortest.
RATIO_GOAL = 1.2
DIALECTS = ("sqlite", "postgresql")


def _records_database(stores: Stores, dialect: str, label: str) -> str:
    """A fresh, empty records database of ``dialect`` (never the store under validation)."""
    return stores.empty(dialect, f"records_{label.replace('-', '_')}").target


def _check_seconds(project: Path, store: Path, checkpoint: str, records: str) -> float:
    from kandev_dq.run.check import run_check

    started = time.perf_counter()
    run_check(project, str(store), checkpoint, records=records)
    return time.perf_counter() - started


def measure(work: Path, lengths: list[int], repeat: int, checkpoint: str, dialects) -> dict:
    """Median seconds of a whole check run by records dialect and history length."""
    from kandev_dq.records import Records

    work, store, template_project, template_records = one_checked_run(
        Path(work) / "history-growth", checkpoint
    )
    server = postgres_server()
    if "postgresql" in dialects and server is None:
        raise SystemExit(
            "PostgreSQL needs KANDEV_BENCH_POSTGRES_URL or KANDEV_TEST_POSTGRES_URL "
            "(a server URL whose user may create databases), or pass --dialects sqlite"
        )
    stores = Stores(work, server)
    seconds: dict[str, dict[int, list[float]]] = {d: {n: [] for n in lengths} for d in dialects}
    try:
        targets: dict[tuple[str, int], tuple[Path, str]] = {}
        source = sa.create_engine(f"sqlite:///{template_records}")
        for dialect in dialects:
            for length in lengths:
                records = _records_database(stores, dialect, f"{dialect}-{length}")
                Records(records).dispose()  # kandev-dq creates its own tables
                target = Records(records)
                try:
                    copy_tables(source, target.engine)
                    seed_earlier_runs(target.engine, max(length - 1, 0))
                    if dialect == "postgresql":  # statistics, as autovacuum keeps them
                        with target.engine.connect().execution_options(
                            isolation_level="AUTOCOMMIT"
                        ) as conn:
                            conn.exec_driver_sql("ANALYZE")
                finally:
                    target.dispose()
                project = work / f"project-{dialect}-{length}"
                shutil.copytree(template_project, project)
                seed_pages(project, max(length - 1, 0))
                targets[dialect, length] = project, records
        source.dispose()
        for _ in range(max(repeat, 1)):
            for dialect in dialects:
                for length in lengths:  # alternating: drift falls on every length alike
                    project, records = targets[dialect, length]
                    seconds[dialect][length].append(
                        _check_seconds(project, store, checkpoint, records)
                    )
    finally:
        stores.cleanup()
    medians = {d: {n: statistics.median(v) for n, v in by.items()} for d, by in seconds.items()}
    shortest, longest = min(lengths), max(lengths)
    ratios = {d: by[longest] / by[shortest] for d, by in medians.items()}
    return {
        "checkpoint": checkpoint,
        "seconds": seconds,
        "medians": medians,
        "ratios": ratios,
        "flat": all(r <= RATIO_GOAL for r in ratios.values()),
        "shortest": shortest,
        "longest": longest,
    }


def render(found: dict, info: dict) -> str:
    rounds = len(next(iter(next(iter(found["seconds"].values())).values())))
    shortest, longest = found["shortest"], found["longest"]
    lines = [
        "# kandev-dq bench: a check run's cost against run history",
        "",
        f"- date: {info['date']}; command: `{info['command']}`",
        f"- machine: {info.get('cpus', '?')} CPU(s), load average {info['load_before']} before "
        "(shared with other work: read the ratio, not the seconds)",
        f"- what: a whole `check --checkpoint {found['checkpoint']}` run in process (GX's "
        "context, the store, the checkpoint, the data docs build, the records) after N "
        "recorded runs of it, each with its data docs pages on disk; medians of "
        f"{rounds} runs, the history lengths alternating",
        "",
        "| records database | runs recorded | check run (s), median | each run (s), in order |",
        "|---|---:|---:|---|",
    ]
    for dialect, by in found["medians"].items():
        for length, median in sorted(by.items()):
            each = " ".join(f"{s:.2f}" for s in found["seconds"][dialect][length])
            lines.append(f"| {dialect} | {length:,} | {median:.2f} | {each} |")
    lines.append("")
    for dialect, ratio in found["ratios"].items():
        verdict = "met" if ratio <= RATIO_GOAL else "NOT met"
        lines.append(
            f"- {dialect}: after {longest:,} runs a run costs {ratio:.2f}× what it cost after "
            f"{shortest:,}: the goal (at most {RATIO_GOAL}×) is {verdict}."
        )
    lines.append("")
    return "\n".join(lines)
