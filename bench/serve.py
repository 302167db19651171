"""``python -m bench --serve SCALE``: what a live cycle inside ``kandev-dq serve`` costs.

For each dialect, on a *small* store (scale 1, migrated an hour ago, the owner's three indexes
added) and a *large* one (``SCALE`` units; 400: 1.1M messages, the same):

1. ``check --checkpoint live`` as a whole process, after a healthy writer appended
   :data:`TRAFFIC` subagent messages: what a cron line pays per answer;
2. the same live run as a ``serve`` cycle (:class:`kandev_dq.exporter.Exporter`, in this
   process, GX and the project loaded once), 5 times, each after the same traffic; each of
   ``--repeat`` rounds measures 1 and 2 on both stores, after 3 warm-up cycles each;
3. on the small store, the soak: ``--cycles`` live cycles in one process (default 1,000), each
   after the same traffic, the overlap scaled to the cycles' pace (:func:`_soak`); the
   process's RSS after the 50th and after the last; then a fresh loop on the same store, warmed
   to its 100th cycle, and the soaked loop's cycles alternated with its, in CPU seconds: what
   a thousand cycles added to a cycle, measured side by side (cycles 51–100 against the last 50
   are shown too, but the machine's load may change between them).

The targets: a cycle ≤ 0.10× the one-shot process on the small store; the large store's cycle
≤ 1.3× the small store's; the soak's RSS within +10 % and its cycle time flat (the last 50's
median within 1.3× a fresh loop's, side by side). Written to ``bench/serve.md``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest.mock import patch

from bench import measure
from bench.live import _activated_earlier, _add_owner_indexes
from bench.stores import Copy, Stores
from kandev_dq.lab import sample
from kandev_dq.project.settings import OVERLAP_VARIABLE

#: Subagent messages a healthy writer appends before every measured run.
TRAFFIC = 10
WARM_UP = 3
CYCLE_RATIO = 0.10
SIZE_RATIO = 1.3
SOAK_RSS = 1.10
SOAK_TIME = 1.3
#: The fresh loop's cycles before the comparison (its first reads in full), and the cycles
#: each loop runs in it, alternating.
FRESH_WARM_UP = 100
SIDE_BY_SIDE = 50
#: The soak's overlap: about two of its back-to-back cycles (:func:`_soak`).
SOAK_OVERLAP_MINUTES = 0.02


def _say(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    import resource

    return pages * resource.getpagesize() / 2**20


def _traffic(store: Copy, seed: int) -> None:
    engine = store.engine()
    try:
        sample.append_live_traffic(engine, count=TRAFFIC, seed=seed, until=datetime.now(UTC))
    finally:
        engine.dispose()


def _store(stores: Stores, dialect: str, scale: int) -> Copy:
    _say(f"{dialect} scale {scale}: generating and migrating")
    store, _ = stores.generate(dialect, scale)
    with _activated_earlier(timedelta(hours=1)):
        _, migration = measure.kandev_migrate(store)
    if not migration.ok:
        raise SystemExit(f"migrate failed on the bench store:\n{migration.render()}")
    _add_owner_indexes(store)
    return store


class _Cycles:
    """A serve loop's live job on one store, in this process."""

    def __init__(self, store: Copy, project: Path) -> None:
        from kandev_dq.exporter import LIVE, Exporter, serve_settings

        settings = serve_settings(
            [store.target], project=project, records=str(project / "uncommitted" / "records.db")
        )
        object.__setattr__(settings, "log", lambda line: None)
        self.exporter = Exporter(settings)
        self.job = next(job for job in self.exporter.jobs if job.checkpoint == LIVE)
        self.store = store
        self.seed = 100

    def once(self) -> tuple[float, float]:
        """One cycle after the traffic: its wall seconds and this process's CPU seconds (every
        thread; the cycle runs in a worker), which other work on a shared machine barely moves."""
        self.seed += 1
        _traffic(self.store, self.seed)
        started, cpu = time.perf_counter(), time.process_time()
        if self.exporter.cycle(self.job) is None:
            raise SystemExit("a serve cycle could not run on the bench store")
        return time.perf_counter() - started, time.process_time() - cpu


def bench_dialect(
    stores: Stores, dialect: str, scale: int, project: Path, work: Path, repeat: int, cycles: int
) -> dict[str, Any]:
    result: dict[str, Any] = {"dialect": dialect, "scale": scale}
    sizes = {"small": 1, "large": scale}
    built = {label: _store(stores, dialect, size) for label, size in sizes.items()}
    one_shot_projects, loops = {}, {}
    for label, store in built.items():
        one_shot_projects[label] = measure.fresh_project(project, work / f"{dialect}-{label}-cli")
        measure.check_process(store, one_shot_projects[label], "live")  # the first reads all
        loops[label] = _Cycles(store, measure.fresh_project(project, work / f"{dialect}-{label}"))
        for _ in range(WARM_UP):
            loops[label].once()
    # Each round measures both stores, a one-shot process and five cycles each, so that load
    # on the shared machine falls on both sides of every ratio alike.
    one_shot: dict[str, list[float]] = {label: [] for label in sizes}
    timed: dict[str, list[float]] = {label: [] for label in sizes}
    for n in range(repeat):
        for label, store in built.items():
            _traffic(store, 10 + n)
            run = measure.check_process(store, one_shot_projects[label], "live")
            one_shot[label].append(run.seconds)
            timed[label] += [loops[label].once()[0] for _ in range(5)]
    for label, size in sizes.items():
        result[label] = {
            "scale": size,
            "one_shot_s": statistics.median(one_shot[label]),
            "one_shot_runs": one_shot[label],
            "cycle_s": statistics.median(timed[label]),
            "cycles": len(timed[label]),
        }
        _say(
            f"{dialect} {label}: one-shot live {result[label]['one_shot_s']:.2f} s, serve cycle "
            f"{result[label]['cycle_s']:.3f} s"
        )
    stores.drop(built["large"])
    result["size_ratio"] = result["large"]["cycle_s"] / result["small"]["cycle_s"]
    result["cycle_ratio"] = result["small"]["cycle_s"] / result["small"]["one_shot_s"]
    result["soak"] = _soak(
        loops["small"],
        cycles,
        lambda: _Cycles(built["small"], measure.fresh_project(project, work / f"{dialect}-fresh")),
    )
    stores.drop(built["small"])
    return result


def _soak(loop: _Cycles, cycles: int, fresh_loop: Callable[[], _Cycles]) -> dict[str, Any]:
    """``cycles`` cycles back to back, with the overlap scaled as the interval is: served, a
    5-minute overlap spans about one 5-minute interval; here it spans about two cycles (else
    each cycle would re-read every message of the last 5 minutes, hundreds of cycles' worth)."""
    _say(f"soak: {cycles} live cycles in one process")
    seconds, cpu, rss = [], [], {}
    with patch.dict(os.environ, {OVERLAP_VARIABLE: str(SOAK_OVERLAP_MINUTES)}):
        for n in range(1, cycles + 1):
            wall, used = loop.once()
            seconds.append(wall)
            cpu.append(used)
            if n in (50, cycles):
                rss[n] = _rss_mb()
            if n % 100 == 0:
                _say(f"soak: {n} cycles, RSS {_rss_mb():.0f} MB")
        # Beside a loop that has run 100 cycles, on the same store at the same moment: load on
        # the shared machine falls on both sides alike, as it cannot on cycles 20 minutes apart.
        fresh = fresh_loop()
        for _ in range(FRESH_WARM_UP):
            fresh.once()
        soaked_cpu, fresh_cpu = [], []
        for _ in range(SIDE_BY_SIDE):
            soaked_cpu.append(loop.once()[1])
            fresh_cpu.append(fresh.once()[1])
    return {
        "cycles": cycles,
        "rss_50_mb": rss[50],
        "rss_last_mb": rss[cycles],
        "early_s": statistics.median(seconds[50:100]),
        "late_s": statistics.median(seconds[-50:]),
        "early_cpu_s": statistics.median(cpu[50:100]),
        "late_cpu_s": statistics.median(cpu[-50:]),
        "soaked_cpu_s": statistics.median(soaked_cpu),
        "fresh_cpu_s": statistics.median(fresh_cpu),
    }


def _ok(flag: bool) -> str:
    return "met" if flag else "**not met**"


def render(info: dict, results: list[dict]) -> str:
    lines = [
        "# A live cycle inside `kandev-dq serve`",
        "",
        f"Measured {info['date']}; `{info['command']}`; Python {info['python']}, "
        f"GX {info['great_expectations']}, SQLite {info['sqlite']}"
        + (f", PostgreSQL {info['postgresql']}" if info.get("postgresql") else "")
        + f"; {info['cpus']} CPUs, load {info['load_before']} before, "
        f"{info['load_after']} after; {info['minutes']} minutes.",
        "",
        "Each store migrated an hour before, with the owner's three indexes; before every "
        f"measured run a healthy writer appends {TRAFFIC} subagent messages. *One-shot*: "
        "`check --checkpoint live` as a whole process (median of the runs listed). *Cycle*: "
        "the same run as a `serve` cycle in one process (GX and the project loaded once; the "
        "data docs rebuilt only when the verdict moves), median of the cycles counted.",
        "",
        "| dialect | store | scale | one-shot (s) | cycle (s) | cycles | cycle / one-shot "
        f"(≤ {CYCLE_RATIO:g}) | cycle / small cycle (≤ {SIZE_RATIO:g}) |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        for label in ("small", "large"):
            m = r[label]
            ratio = r["cycle_ratio"] if label == "small" else None
            size = r.get("size_ratio") if label == "large" else None
            lines.append(
                f"| {r['dialect']} | {label} | {m['scale']} | {m['one_shot_s']:.2f} "
                f"({', '.join(f'{s:.2f}' for s in m['one_shot_runs'])}) | {m['cycle_s']:.3f} "
                f"| {m['cycles']} | "
                + (f"{ratio:.3f} {_ok(ratio <= CYCLE_RATIO)}" if ratio is not None else "")
                + " | "
                + (f"{size:.2f} {_ok(size <= SIZE_RATIO)}" if size is not None else "")
                + " |"
            )
    lines += [
        "",
        "## Soak",
        "",
        "Live cycles on the small store in one process. RSS of the process after the 50th "
        f"cycle and after the last (≤ +{(SOAK_RSS - 1) * 100:.0f} %). Then a fresh loop on "
        f"the same store runs {FRESH_WARM_UP} cycles, and {SIDE_BY_SIDE} cycles of each loop "
        "alternate: the soaked loop's median cycle against the fresh one's "
        f"(≤ {SOAK_TIME:g}×), in this process's CPU seconds, measured side by side so that "
        "the shared machine's load falls on both alike (what the two loops share in the "
        "process, GX's caches, shows in its RSS). Cycles 51–100 against the soak's last "
        "50 are shown beside it (the load may differ between them). The cycles come back to "
        "back, so the overlap is scaled as the interval is "
        f"({SOAK_OVERLAP_MINUTES:g} minutes, about two cycles, as a served 5-minute overlap "
        "spans about one 5-minute interval); at the default 5 minutes each cycle would re-read "
        "the traffic of hundreds of cycles before it. CPU seconds count every thread; wall "
        "seconds are beside them. On PostgreSQL the server's own work is outside the CPU "
        "seconds (the small "
        "store's SQL is a few milliseconds of a cycle).",
        "",
        "| dialect | cycles | RSS after 50 (MB) | RSS after last (MB) | growth | CPU soaked (s) "
        "| CPU fresh (s) | soaked / fresh | CPU 51–100 (s) | CPU last 50 (s) | last / 51–100 "
        "| wall 51–100 (s) | wall last 50 (s) |",
        "|---|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s = r["soak"]
        growth = s["rss_last_mb"] / s["rss_50_mb"]
        ratio = s["soaked_cpu_s"] / s["fresh_cpu_s"]
        lines.append(
            f"| {r['dialect']} | {s['cycles']} | {s['rss_50_mb']:.0f} | {s['rss_last_mb']:.0f} "
            f"| {(growth - 1) * 100:+.1f} % {_ok(growth <= SOAK_RSS)} | {s['soaked_cpu_s']:.3f} "
            f"| {s['fresh_cpu_s']:.3f} | {ratio:.2f} {_ok(ratio <= SOAK_TIME)} "
            f"| {s['early_cpu_s']:.3f} | {s['late_cpu_s']:.3f} "
            f"| {s['late_cpu_s'] / s['early_cpu_s']:.2f} "
            f"| {s['early_s']:.3f} | {s['late_s']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def measure_serve(
    stores: Stores,
    dialects: list[str],
    scale: int,
    project: Path,
    work: Path,
    repeat: int,
    cycles: int,
) -> list[dict]:
    work.mkdir(parents=True, exist_ok=True)
    results = [bench_dialect(stores, d, scale, project, work, repeat, cycles) for d in dialects]
    shutil.rmtree(work, ignore_errors=True)
    return results
