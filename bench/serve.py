"""``python -m bench --serve SCALE``: what a live cycle inside ``kandev-dq serve`` costs.

For each dialect, on a *small* store (scale 1, migrated an hour ago, the owner's three indexes
added) and a *large* one (``SCALE`` units; 400: 1.1M messages, the same):

1. ``check --checkpoint live`` as a whole process, ``--repeat`` times, each after a healthy
   writer appended :data:`TRAFFIC` subagent messages: what a cron line pays per answer;
2. the same live run as a ``serve`` cycle (:class:`kandev_dq.exporter.Exporter`, in this
   process, GX and the project loaded once), ``--repeat`` × 5 times after 3 warm-up cycles,
   each after the same traffic;
3. on the small store, the soak: ``--cycles`` live cycles in one process (default 1,000), each
   after the same traffic; the process's RSS after the 50th and after the last, and the median
   cycle of cycles 51–100 against the last 50.

The targets: a cycle ≤ 0.10× the one-shot process on the small store; the large store's cycle
≤ 1.3× the small store's; the soak's RSS within +10 % and its cycle time flat (the last 50's
median within 1.3× the early one's). Written to ``bench/serve.md``.
"""

from __future__ import annotations

import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import measure
from bench.live import _activated_earlier, _add_owner_indexes
from bench.stores import Copy, Stores
from kandev_dq.lab import sample

#: Subagent messages a healthy writer appends before every measured run.
TRAFFIC = 10
WARM_UP = 3
CYCLE_RATIO = 0.10
SIZE_RATIO = 1.3
SOAK_RSS = 1.10
SOAK_TIME = 1.3


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

    def once(self) -> float:
        self.seed += 1
        _traffic(self.store, self.seed)
        started = time.perf_counter()
        if self.exporter.cycle(self.job) is None:
            raise SystemExit("a serve cycle could not run on the bench store")
        return time.perf_counter() - started


def bench_dialect(
    stores: Stores, dialect: str, scale: int, project: Path, work: Path, repeat: int, cycles: int
) -> dict[str, Any]:
    result: dict[str, Any] = {"dialect": dialect, "scale": scale}
    small_cycle = None
    for label, size in (("small", 1), ("large", scale)):
        store = _store(stores, dialect, size)
        one_shot_project = measure.fresh_project(project, work / f"serve-{dialect}-{label}-cli")
        measure.check_process(store, one_shot_project, "live")  # the first reads everything
        one_shot = []
        for n in range(repeat):
            _traffic(store, 10 + n)
            one_shot.append(measure.check_process(store, one_shot_project, "live").seconds)
        _say(f"{dialect} {label}: one-shot live {statistics.median(one_shot):.2f} s")
        loop = _Cycles(store, measure.fresh_project(project, work / f"serve-{dialect}-{label}"))
        for _ in range(WARM_UP):
            loop.once()
        timed = [loop.once() for _ in range(5 * repeat)]
        cycle = statistics.median(timed)
        _say(f"{dialect} {label}: serve cycle {cycle:.3f} s")
        result[label] = {
            "scale": size,
            "one_shot_s": statistics.median(one_shot),
            "one_shot_runs": one_shot,
            "cycle_s": cycle,
            "cycles": len(timed),
        }
        if label == "small":
            small_cycle = cycle
            result["soak"] = _soak(loop, cycles)
        else:
            result["size_ratio"] = cycle / small_cycle
        stores.drop(store)
    result["cycle_ratio"] = result["small"]["cycle_s"] / result["small"]["one_shot_s"]
    return result


def _soak(loop: _Cycles, cycles: int) -> dict[str, Any]:
    _say(f"soak: {cycles} live cycles in one process")
    seconds, rss = [], {}
    for n in range(1, cycles + 1):
        seconds.append(loop.once())
        if n in (50, cycles):
            rss[n] = _rss_mb()
        if n % 100 == 0:
            _say(f"soak: {n} cycles, RSS {_rss_mb():.0f} MB")
    early, late = statistics.median(seconds[50:100]), statistics.median(seconds[-50:])
    return {
        "cycles": cycles,
        "rss_50_mb": rss[50],
        "rss_last_mb": rss[cycles],
        "early_s": early,
        "late_s": late,
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
        f"cycle and after the last (≤ +{(SOAK_RSS - 1) * 100:.0f} %); the median cycle of "
        f"cycles 51–100 against the last 50 (≤ {SOAK_TIME:g}×).",
        "",
        "| dialect | cycles | RSS after 50 (MB) | RSS after last (MB) | growth | cycle 51–100 (s) "
        "| last 50 (s) | ratio |",
        "|---|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in results:
        s = r["soak"]
        growth = s["rss_last_mb"] / s["rss_50_mb"]
        ratio = s["late_s"] / s["early_s"]
        lines.append(
            f"| {r['dialect']} | {s['cycles']} | {s['rss_50_mb']:.0f} | {s['rss_last_mb']:.0f} "
            f"| {(growth - 1) * 100:+.1f} % {_ok(growth <= SOAK_RSS)} | {s['early_s']:.3f} "
            f"| {s['late_s']:.3f} | {ratio:.2f} {_ok(ratio <= SOAK_TIME)} |"
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
