"""``python -m bench``: generate stores, time kandev-dq against its floors, write the table.

For each dialect and scale, in this order:

1. a generated store predating the backfill (``sample.create_store`` + ``sample.generate``);
2. ``--repeat`` times, on two fresh identical copies: the floor backfill (BEGIN, MAX,
   INSERT … SELECT, COMMIT) and ``migrate.run`` (which also checks the rows agree);
3. on the last migrated copy, live traffic (``sample.append_live_traffic``, 10 subagent
   messages per scale unit, written between the capture key and the bench's clock), then
   ``--repeat`` rounds of: the single pass and the message-rules pass (two single-scan floors,
   :mod:`bench.floors`); the floor facts and kandev-dq's facts in process, for each
   checkpoint; GX's import + ``get_context`` as a process; and ``kandev-dq check --format
   json`` as a process, on a project with no run history;
4. one more, untimed run of kandev-dq's facts for each checkpoint that keeps every statement's
   query plan (SQLite ``EXPLAIN QUERY PLAN``; PostgreSQL ``EXPLAIN (ANALYZE, BUFFERS)`` in the
   same snapshot) in ``WORK/plans/<dialect>-<scale>-<checkpoint>.txt``, named in the results;
5. one subagent message whose description is 50 MB added, ``check --checkpoint pre_release``
   once more as a process: its peak RSS against GX's import + context + 100 MB + 3× the value;
   then the row the backfill writes from that message added too, and the same run again
   (:mod:`bench.huge_value`, which ``--huge-value`` runs alone with repeats).

Floors and measured runs alternate within each round; the table shows medians.

``--huge-value SCALE`` measures only step 5, ``--repeat`` times, on a store of that scale
(:mod:`bench.huge_value`, written to ``bench/huge-value.md``).

``--live SCALE`` measures only the ``live`` checkpoint on a store of that scale against a store
holding only what its window reads (:mod:`bench.live`, written to ``bench/live.md``); with
``--open-findings N``, each measured run also re-reads N open items
(``bench/live-open-findings.md``).

``--docs-history N,M`` measures only a check's data docs build after N and M stored runs
(:mod:`bench.docs_history`, written to ``bench/docs-history.md``). ``--history-growth N,M``
measures only a whole check run of ``--checkpoint`` after N and M recorded runs, on each of
``--dialects``' records databases (:mod:`bench.history_growth`, ``bench/history-growth.md``).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from bench import huge_value, measure, report
from bench.stores import Stores, postgres_server
from kandev_dq.errors import KandevDqError
from kandev_dq.lab import sample
from kandev_dq.project.files import build_project
from kandev_dq.store import sqlite_driver

CHECKPOINTS = ("pre_release", "nightly")
LIVE_PER_UNIT = huge_value.LIVE_PER_UNIT
HUGE_VALUE_CHARS = huge_value.HUGE_VALUE_CHARS
HERE = Path(__file__).resolve().parent


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scales", default="100,400", help="small,large scale units (default 100,400)"
    )
    parser.add_argument("--dialects", default="sqlite,postgresql")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the table (Markdown; default bench/results.md, with --quick-only WORK/quick.md)",
    )
    parser.add_argument(
        "--work", type=Path, default=HERE / "out", help="stores, projects, raw figures"
    )
    parser.add_argument(
        "--quick-only",
        action="store_true",
        help="time only the commands that must answer in under a second (no stores, no floors)",
    )
    parser.add_argument(
        "--live",
        type=int,
        metavar="SCALE",
        help="only the live checkpoint on a store of SCALE units (400: 1.1M messages) against a "
        "store of what its window reads alone; writes bench/live.md unless --out is given",
    )
    parser.add_argument(
        "--open-findings",
        type=int,
        default=0,
        metavar="N",
        help="with --live: N subagent messages without rows before the window, found by the "
        "first run and re-read by each measured one; writes bench/live-open-findings.md unless "
        "--out is given",
    )
    parser.add_argument(
        "--docs-history",
        metavar="N,M",
        help="only the data docs cost after N and M stored runs (e.g. 1,1000); writes "
        "bench/docs-history.md unless --out is given",
    )
    parser.add_argument(
        "--history-growth",
        metavar="N,M",
        help="only a whole check run's cost after N and M recorded runs (e.g. 10,2000), on "
        "each of --dialects' records databases; writes bench/history-growth.md unless --out "
        "is given",
    )
    parser.add_argument(
        "--huge-value",
        type=int,
        metavar="SCALE",
        help="only the peak RSS of check pre_release with one 50 MB description, in its message "
        "and in its message and backfilled row, and with one 50 MB value in a column of each "
        "family a check reads, on a store of SCALE units (the bench's step 5 with repeats); "
        "writes bench/huge-value.md unless --out is given",
    )
    parser.add_argument(
        "--serve",
        type=int,
        metavar="SCALE",
        help="only a live cycle inside `kandev-dq serve` against a one-shot live process, on a "
        "scale-1 store and one of SCALE units (400: 1.1M messages), and the soak; writes "
        "bench/serve.md unless --out is given",
    )
    parser.add_argument(
        "--cycles",
        type=int,
        default=1000,
        metavar="N",
        help="with --serve: the soak's live cycles in one process (default 1000)",
    )
    parser.add_argument(
        "--checkpoint",
        default="nightly",
        help="the checkpoint --history-growth runs (any checkpoint the project has; "
        "default nightly)",
    )
    return parser.parse_args(argv)


def say(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def bench_store(stores: Stores, dialect: str, scale: int, args, project: Path, fams) -> dict:
    say(f"{dialect} scale {scale}: generating")
    pristine, summary = stores.generate(dialect, scale)
    result: dict = {
        "dialect": dialect,
        "scale": scale,
        "messages": summary.messages,
        "subagent_messages": summary.subagent_messages,
        "live": LIVE_PER_UNIT * scale,
        "migrate": [],
        "migrate_floor": [],
        "facts": {cp: [] for cp in CHECKPOINTS},
        "facts_floor": {cp: [] for cp in CHECKPOINTS},
        "single_pass": [],
        "rules_pass": [],
        "process": {cp: [] for cp in CHECKPOINTS},
        "process_rss": {cp: [] for cp in CHECKPOINTS},
        "baseline": [],
        "baseline_rss": [],
        "baseline_paused": [],
        "huge_value_rss": None,
        "huge_value_row_rss": None,
        "disagreements": [],
        "plans": [],
    }

    migrated = None
    for round_ in range(args.repeat):
        say(f"{dialect} scale {scale}: migrate round {round_ + 1}/{args.repeat}")
        floor_copy = stores.copy(pristine, "floor")
        measured_copy = stores.copy(pristine, "migrate")
        seconds, floor_rows = measure.floor_migrate(floor_copy)
        result["migrate_floor"].append(seconds)
        stores.drop(floor_copy)
        seconds, migration = measure.kandev_migrate(measured_copy)
        result["migrate"].append(seconds)
        if not migration.ok or migration.backfill_rows != floor_rows:
            raise SystemExit(
                f"migrate disagrees with the floor: ok={migration.ok}, "
                f"{migration.backfill_rows} rows vs {floor_rows}\n{migration.render()}"
            )
        if migrated is not None:
            stores.drop(migrated)
        migrated = measured_copy
    stores.drop(pristine)

    say(f"{dialect} scale {scale}: live traffic ({result['live']} subagent messages)")
    engine = migrated.engine()
    try:
        # Bounded by the clock: unbounded, 40,000 messages a few seconds apart run more than
        # a day past it, which the timestamp-range rule rightly flags (CONTRACT §1).
        sample.append_live_traffic(engine, count=result["live"], seed=1, until=datetime.now(UTC))
    finally:
        engine.dispose()
    stores.analyze(migrated)

    runs_folder = args.work / "projects"
    for round_ in range(args.repeat):
        say(f"{dialect} scale {scale}: checks round {round_ + 1}/{args.repeat}")
        seconds, _ = measure.scan_floor(migrated)
        result["single_pass"].append(seconds)
        seconds, rules = measure.scan_floor(migrated, measure.floors.message_rules_pass)
        result["rules_pass"].append(seconds)
        for cp in CHECKPOINTS:
            seconds, floor_out = measure.floor_facts(migrated, fams[cp])
            result["facts_floor"][cp].append(seconds)
            seconds, kandev_out = measure.kandev_facts(migrated, fams[cp])
            result["facts"][cp].append(seconds)
            if round_ == 0:
                for line in measure.floors.agree(floor_out, kandev_out):
                    result["disagreements"].append(f"{cp}: {line}")
                stored_text = kandev_out.get("kandev.stored_text_facts")
                for line in measure.floors.rules_agree(rules, stored_text) if stored_text else ():
                    result["disagreements"].append(f"{cp}: {line}")
        fresh = measure.fresh_project(project, runs_folder / "baseline")
        base = measure.gx_baseline(fresh)
        result["baseline"].append(base.seconds)
        result["baseline_rss"].append(base.peak_rss_mb)
        fresh = measure.fresh_project(project, runs_folder / "baseline")
        result["baseline_paused"].append(measure.gx_baseline(fresh, collector_paused=True).seconds)
        for cp in CHECKPOINTS:
            fresh = measure.fresh_project(project, runs_folder / cp)
            run = measure.check_process(migrated, fresh, cp)
            result["process"][cp].append(run.seconds)
            result["process_rss"][cp].append(run.peak_rss_mb)
            if round_ == 0:
                verdict = json.loads(run.stdout)
                result.setdefault("verdict", {})[cp] = verdict["success"]
    say(f"{dialect} scale {scale}: query plans")
    for cp in CHECKPOINTS:
        plans = args.work / "plans" / f"{dialect}-{scale}-{cp}.txt"
        measure.query_plans(migrated, fams[cp], plans)
        result["plans"].append(plans.relative_to(args.work).as_posix())
    say(f"{dialect} scale {scale}: one {HUGE_VALUE_CHARS // 1_000_000} MB description")
    message_id = huge_value.add_huge_description(migrated)
    fresh = measure.fresh_project(project, runs_folder / "huge")
    result["huge_value_rss"] = measure.check_process(migrated, fresh, "pre_release").peak_rss_mb
    result["huge_value_mb"] = HUGE_VALUE_CHARS / 1_000_000
    say(f"{dialect} scale {scale}: the same description in its backfilled row too")
    huge_value.add_backfilled_row(migrated, message_id)
    fresh = measure.fresh_project(project, runs_folder / "huge")
    run = measure.check_process(migrated, fresh, "pre_release")
    result["huge_value_row_rss"] = run.peak_rss_mb
    stores.drop(migrated)
    for line in result["disagreements"]:
        say(f"WARNING {dialect} scale {scale}: {line}")
    return result


def machine() -> dict:
    import great_expectations

    facts = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "great_expectations": great_expectations.__version__,
        "sqlalchemy": sa.__version__,
        "sqlite": sqlite_driver.dbapi.sqlite_version,  # the library kandev-dq reads stores with
        "platform": platform.platform(),
    }
    try:
        facts["cpus"] = len(__import__("os").sched_getaffinity(0))
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        facts["cpu"] = names[0] if names else platform.processor()
        with open("/proc/meminfo") as f:
            total = next(int(ln.split()[1]) for ln in f if ln.startswith("MemTotal"))
        facts["memory_gb"] = round(total / 1024 / 1024, 1)
    except OSError:
        pass
    return facts


def load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.docs_history:
        return docs_history_main(args, argv)
    if args.history_growth:
        return history_growth_main(args, argv)
    if args.live:
        return live_main(args, argv)
    if args.huge_value:
        return huge_value_main(args, argv)
    if args.serve:
        return serve_main(args, argv)
    if args.out is None:  # a quick run never replaces the full table
        args.out = args.work / "quick.md" if args.quick_only else HERE / "results.md"
    scales = [int(s) for s in args.scales.split(",") if s]
    dialects = [d.strip() for d in args.dialects.split(",") if d.strip()]
    server = postgres_server()
    if args.quick_only:
        dialects = []  # the quick rows need no generated store and no server
    if "postgresql" in dialects and server is None:
        raise SystemExit(
            "PostgreSQL needs KANDEV_BENCH_POSTGRES_URL or KANDEV_TEST_POSTGRES_URL "
            "(a server URL whose user may create databases), or pass --dialects sqlite"
        )
    args.work.mkdir(parents=True, exist_ok=True)
    project = build_project(args.work / "project")
    fams = {cp: measure.families(project, cp) for cp in CHECKPOINTS}
    info = machine()
    info["load_before"] = load()
    info["command"] = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    results = []
    stores = Stores(args.work, server)
    try:
        for dialect in dialects:
            if dialect == "postgresql":
                info["postgresql"] = _server_version(server)
            for scale in scales:
                results.append(bench_store(stores, dialect, scale, args, project, fams))
    finally:
        stores.cleanup()
    say("commands that must answer in under a second")
    quick = measure.quick_commands(project, args.work / "quick", args.repeat)
    info["load_after"] = load()
    info["minutes"] = round((time.perf_counter() - started) / 60, 1)
    info["repeat"] = args.repeat
    if args.out == HERE / "results.md":  # the committed table keeps its largest plans
        info["kept_plans"] = keep_plans(args.work, results, HERE / "plans")
    (args.work / "results.json").write_text(
        json.dumps({"machine": info, "results": results, "quick": quick}, indent=1)
    )
    text = (
        report.render_quick(info, quick) if args.quick_only else report.render(info, results, quick)
    )
    args.out.write_text(text)
    print(text)
    return 0


def keep_plans(work: Path, results: list[dict], into: Path) -> list[str]:
    """The largest scale's plans, copied from the work folder (which is not kept) into
    ``into``, beside the results table; their paths relative to the table."""
    if not results:
        return []
    largest = max(r["scale"] for r in results)
    into.mkdir(parents=True, exist_ok=True)
    kept = []
    for plan in (p for r in results if r["scale"] == largest for p in r["plans"]):
        target = into / Path(plan).name
        shutil.copyfile(work / plan, target)
        kept.append(f"{into.name}/{target.name}")
    return kept


def docs_history_main(args, argv: list[str] | None) -> int:
    from bench import docs_history

    lengths = sorted({int(n) for n in args.docs_history.split(",") if n})
    info = machine()
    info["load_before"] = load()
    info["command"] = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    found = docs_history.measure(args.work, lengths, args.repeat)
    text = docs_history.render(found, info)
    out = args.out or HERE / "docs-history.md"
    out.write_text(text)
    print(text)
    return 0 if found["flat"] else 1


def history_growth_main(args, argv: list[str] | None) -> int:
    from bench import history_growth

    lengths = sorted({int(n) for n in args.history_growth.split(",") if n})
    dialects = [d.strip() for d in args.dialects.split(",") if d.strip()]
    info = machine()
    info["load_before"] = load()
    info["command"] = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        found = history_growth.measure(args.work, lengths, args.repeat, args.checkpoint, dialects)
    except KandevDqError as exc:  # an unknown --checkpoint, say: kandev-dq's own one line
        raise SystemExit(f"python -m bench: {exc}") from None
    text = history_growth.render(found, info)
    out = args.out or HERE / "history-growth.md"
    out.write_text(text)
    print(text)
    return 0 if found["flat"] else 1


def _one_step_setup(args, argv: list[str] | None):
    """What a bench of one step needs first: its dialects, the server, the project and the
    machine's facts (PostgreSQL asked for without a server is refused)."""
    dialects = [d.strip() for d in args.dialects.split(",") if d.strip()]
    server = postgres_server()
    if "postgresql" in dialects and server is None:
        raise SystemExit("PostgreSQL needs KANDEV_BENCH_POSTGRES_URL or KANDEV_TEST_POSTGRES_URL")
    args.work.mkdir(parents=True, exist_ok=True)
    project = build_project(args.work / "project")
    info = machine()
    info["load_before"] = load()
    info["command"] = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    if "postgresql" in dialects:
        info["postgresql"] = _server_version(server)
    return dialects, server, project, info


def live_main(args, argv: list[str] | None) -> int:
    from bench import live

    dialects, server, project, info = _one_step_setup(args, argv)
    started = time.perf_counter()
    stores = Stores(args.work, server)
    try:
        results = live.measure_live(
            stores,
            dialects,
            args.live,
            project,
            args.work / "live",
            args.repeat,
            args.open_findings,
        )
    finally:
        stores.cleanup()
    info["load_after"] = load()
    info["minutes"] = round((time.perf_counter() - started) / 60, 1)
    info["repeat"] = args.repeat
    (args.work / ("live-open-findings.json" if args.open_findings else "live.json")).write_text(
        json.dumps({"machine": info, "results": results}, indent=1)
    )
    table = HERE / ("live-open-findings.md" if args.open_findings else "live.md")
    out = args.out if args.out is not None else table
    if out == table:  # the committed table keeps its plans beside it
        for m in (m for r in results for m in r["indexes"].values()):
            kept = HERE / "plans" / Path(m["plans"]).name
            shutil.copyfile(args.work / "live" / m["plans"], kept)
            m["plans"] = f"plans/{kept.name}"
    text = live.render(info, results)
    out.write_text(text)
    print(text)
    return 0


def serve_main(args, argv: list[str] | None) -> int:
    from bench import serve

    dialects, server, project, info = _one_step_setup(args, argv)
    started = time.perf_counter()
    stores = Stores(args.work, server)
    try:
        results = serve.measure_serve(
            stores, dialects, args.serve, project, args.work / "serve", args.repeat, args.cycles
        )
    finally:
        stores.cleanup()
    info["load_after"] = load()
    info["minutes"] = round((time.perf_counter() - started) / 60, 1)
    (args.work / "serve.json").write_text(
        json.dumps({"machine": info, "results": results}, indent=1)
    )
    text = serve.render(info, results)
    (args.out if args.out is not None else HERE / "serve.md").write_text(text)
    print(text)
    return 0


def huge_value_main(args, argv: list[str] | None) -> int:
    from bench import huge_value

    dialects, server, project, info = _one_step_setup(args, argv)
    stores = Stores(args.work, server)
    try:
        results = huge_value.measure_huge(
            stores, dialects, args.huge_value, project, args.work / "huge", args.repeat
        )
    finally:
        stores.cleanup()
    info["load_after"] = load()
    info["repeat"] = args.repeat
    (args.work / "huge-value.json").write_text(
        json.dumps({"machine": info, "results": results}, indent=1)
    )
    text = huge_value.render(info, results)
    (args.out or HERE / "huge-value.md").write_text(text)
    print(text)
    return 0


def _server_version(server) -> str:
    engine = sa.create_engine(server)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SHOW server_version").scalar()
    finally:
        engine.dispose()
