"""``python -m bench --huge-value SCALE``: peak RSS of ``check --checkpoint pre_release`` with
one 50 MB subagent description, in its message alone and in its message and backfilled row,
and with one 50 MB ``tool_call_id`` in a message.

For each dialect:

1. a generated store of ``SCALE`` units, migrated, with live traffic up to the bench's clock
   (as :mod:`bench.run` builds its stores);
2. one subagent message (in a session of its own) whose description is
   :data:`HUGE_VALUE_CHARS` characters (:func:`add_huge_description`): the *message* case;
3. the row the backfill writes from that message, inserted by the backfill's own statement
   restricted to it (:func:`add_backfilled_row`): the *message and row* case, the store a
   backfill that ran after the message was written leaves (or a hostile store);
   the *key in message* case, a copy of the store of step 1 with one subagent message whose
   ``tool_call_id`` is :data:`HUGE_VALUE_CHARS` characters (:func:`add_huge_key`);
4. ``--repeat`` rounds of: GX's import + context as a process, then ``check --checkpoint
   pre_release`` as a process on each case (a copy of the store is kept after step 2).

The bound of each run: GX's import + context + :data:`~bench.report.RSS_OVER_GX_MB` +
:data:`~bench.report.RSS_PER_HUGE_VALUE` × the value (MB). :mod:`bench.run` measures both cases
once at each of its scales (its step 5); this measures only them, with repeats.
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench import measure
from bench.report import RSS_OVER_GX_MB, RSS_PER_HUGE_VALUE
from bench.stores import Copy, Stores
from kandev_dq.contract import tables as schema
from kandev_dq.lab import sample
from kandev_dq.lab.storebuilder import T0, StoreBuilder
from kandev_dq.sql.mapping import BACKFILL_COLUMNS, backfill_select

#: The largest single value of the hostile-store rows: one subagent description.
HUGE_VALUE_CHARS = 50_000_000
LIVE_PER_UNIT = 10
#: The cases, in the order they are built and shown.
CASES = ("message", "message and row", "key in message")


def _say(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] huge value: {message}", flush=True)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def add_huge_description(store: Copy) -> str:
    """One subagent message (in a session of its own) whose description is huge: memory must
    grow with the largest value, not with copies of it. Its id."""
    engine = store.engine()
    try:
        build = StoreBuilder(engine)
        session = build.session(task_id="bench-huge")
        return build.subagent_message(
            session, T0, "bench-huge", description="d" * HUGE_VALUE_CHARS, status="completed"
        )
    finally:
        engine.dispose()


def add_huge_key(store: Copy) -> None:
    """One subagent message (in a session of its own, before the backfill's mark, so that
    coverage, the reconciliation and no row compare it) whose ``tool_call_id`` is huge: keys
    are grouped and joined, and must be compared without being carried whole."""
    engine = store.engine()
    try:
        build = StoreBuilder(engine)
        session = build.session(task_id="bench-huge-key")
        build.subagent_message(session, T0, "k" * HUGE_VALUE_CHARS, status="completed")
    finally:
        engine.dispose()


def add_backfilled_row(store: Copy, message_id: str) -> None:
    """The ``task_session_subagents`` row the backfill writes from ``message_id``: the
    migration's own mapping (:func:`kandev_dq.sql.mapping.backfill_select`) restricted to it."""
    engine = store.engine()
    try:
        rows = backfill_select(engine.dialect.name).subquery("rows")
        one = sa.select(*(rows.c[c] for c in BACKFILL_COLUMNS)).where(rows.c.id == message_id)
        with engine.begin() as conn:
            conn.execute(schema.subagents.insert().from_select(list(BACKFILL_COLUMNS), one))
            t = schema.subagents
            inserted = conn.scalar(sa.select(sa.func.count()).where(t.c.id == message_id))
    finally:
        engine.dispose()
    if inserted != 1:
        raise RuntimeError(f"the backfill maps {inserted} rows from the huge message, not one")


def bound(baseline_mb: float, value_mb: float) -> float:
    return baseline_mb + RSS_OVER_GX_MB + RSS_PER_HUGE_VALUE * value_mb


def prepare(stores: Stores, dialect: str, scale: int) -> dict[str, Copy]:
    """A migrated store with live traffic and the huge message, and a copy of it with the
    message's backfilled row too."""
    _say(f"{dialect}: generating scale {scale}")
    store, _ = stores.generate(dialect, scale)
    _, migration = measure.kandev_migrate(store)
    if not migration.ok:
        raise SystemExit(f"migrate failed:\n{migration.render()}")
    engine = store.engine()
    try:
        live = LIVE_PER_UNIT * scale
        sample.append_live_traffic(engine, count=live, seed=1, until=datetime.now(UTC))
    finally:
        engine.dispose()
    keyed = stores.copy(store, "huge_key")
    _say(f"{dialect}: one {HUGE_VALUE_CHARS // 1_000_000} MB description, and key")
    message_id = add_huge_description(store)
    stores.analyze(store)
    with_row = stores.copy(store, "huge_row")
    add_backfilled_row(with_row, message_id)
    add_huge_key(keyed)
    stores.analyze(keyed)
    return {"message": store, "message and row": with_row, "key in message": keyed}


def measure_huge(
    stores: Stores, dialects: list[str], scale: int, project: Path, work: Path, repeat: int
) -> list[dict[str, Any]]:
    results = []
    for dialect in dialects:
        cases = prepare(stores, dialect, scale)
        found: dict[str, Any] = {
            "dialect": dialect,
            "scale": scale,
            "value_mb": HUGE_VALUE_CHARS / 1_000_000,
            "baseline_rss": [],
            "rss": {case: [] for case in CASES},
            "verdict": {},
        }
        for round_ in range(repeat):
            _say(f"{dialect}: round {round_ + 1}/{repeat}")
            fresh = measure.fresh_project(project, work / "baseline")
            found["baseline_rss"].append(measure.gx_baseline(fresh).peak_rss_mb)
            for case in CASES:
                fresh = measure.fresh_project(project, work / "check")
                run = measure.check_process(cases[case], fresh, "pre_release")
                found["rss"][case].append(run.peak_rss_mb)
                found["verdict"][case] = run.returncode
        for store in cases.values():
            stores.drop(store)
        results.append(found)
    return results


def render(info: dict, results: list[dict[str, Any]]) -> str:
    lines = [
        "# Peak RSS with one huge description or key",
        "",
        f"Measured {info['date']}; `{info['command']}`; Python {info['python']}, GX "
        f"{info['great_expectations']}, SQLite {info['sqlite']}"
        + (f", PostgreSQL {info['postgresql']}" if info.get("postgresql") else "")
        + f"; {info.get('cpus', '?')} CPUs, load {info['load_before']} before, "
        f"{info['load_after']} after; {info['repeat']} runs each (median, all runs listed).",
        "",
        "`check --checkpoint pre_release` as a whole process, on a migrated store with one "
        "subagent description of ASCII text in a message (*message*), and in that message and "
        "the row the backfill writes from it (*message and row*), and with one subagent "
        "message whose `tool_call_id` is as long (*key in message*). Bound: GX import + context + "
        f"{RSS_OVER_GX_MB} MB + {RSS_PER_HUGE_VALUE}× the value. Margin: the bound less the "
        "peak.",
        "",
        "| dialect | scale | value (MB) | case | GX import + context | peak RSS (MB) | runs | "
        "bound | margin | met | exit |",
        "|---|---:|---:|---|---:|---:|---|---:|---:|---|---:|",
    ]
    for r in results:
        base = _median(r["baseline_rss"])
        limit = bound(base, r["value_mb"])
        for case in CASES:
            peak = _median(r["rss"][case])
            runs = ", ".join(f"{v:.0f}" for v in r["rss"][case])
            lines.append(
                f"| {r['dialect']} | {r['scale']} | {r['value_mb']:.0f} | {case} | {base:.0f} | "
                f"{peak:.0f} | {runs} | {limit:.0f} | {limit - peak:.0f} | "
                f"{'yes' if peak <= limit else '**no**'} | {r['verdict'][case]} |"
            )
    return "\n".join(lines) + "\n"
