"""``python -m bench --huge-value SCALE``: peak RSS of ``check --checkpoint pre_release`` with
one 50 MB subagent description, in its message alone and in its message and backfilled row,
and with one 50 MB value in one column of each family a check reads (:data:`COLUMN_CASES`).

For each dialect:

1. a generated store of ``SCALE`` units, migrated, with live traffic up to the bench's clock
   (as :mod:`bench.run` builds its stores);
2. one subagent message (in a session of its own) whose description is
   :data:`HUGE_VALUE_CHARS` characters (:func:`add_huge_description`): the *message* case;
3. the row the backfill writes from that message, inserted by the backfill's own statement
   restricted to it (:func:`add_backfilled_row`): the *message and row* case, the store a
   backfill that ran after the message was written leaves (or a hostile store);
   each of :data:`COLUMN_CASES`, a copy of the store of step 1 with one value of
   :data:`HUGE_VALUE_CHARS` characters in one column of a message or a row
   (:func:`plant_huge_value`; on PostgreSQL only where it can be stored);
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
from kandev_dq.lab.storebuilder import T0, StoreBuilder, subagent_metadata
from kandev_dq.sql.mapping import BACKFILL_COLUMNS, backfill_select

#: The largest single value of the hostile-store rows: one subagent description.
HUGE_VALUE_CHARS = 50_000_000
LIVE_PER_UNIT = 10
#: One case per family of columns a check reads (see :data:`MESSAGE_COLUMNS`): where the
#: huge value is planted, alone, in a copy of the migrated store.
COLUMN_CASES = {
    "key in message": ("message", "metadata.tool_call_id"),
    "metadata not JSON": ("message", "metadata"),
    "message id": ("message", "id"),
    "message session": ("message", "task_session_id"),
    "message created_at": ("message", "created_at"),
    "row id": ("row", "id"),
    "row session": ("row", "task_session_id"),
    "row key": ("row", "tool_call_id"),
    "row execution id": ("row", "agent_execution_id"),
    "row source": ("row", "source"),
    "row status": ("row", "tool_status"),
    "row observed_at": ("row", "observed_at"),
}
#: The cases, in the order they are built and shown.
CASES = ("message", "message and row", *COLUMN_CASES)


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


#: Each column of the messages and the subagent rows a check reads, for one huge value.
#: ``message``: a subagent message before the backfill's mark with no row (coverage, the
#: reconciliation's expected rows and the rules read it); ``row``: a live subagent row matching
#: no message (the row rules and writer health read it). ``metadata.F``: field F of the
#: message's metadata; ``metadata``: the whole document, not JSON.
MESSAGE_COLUMNS = (
    "id",
    "task_session_id",
    "turn_id",
    "task_id",
    "created_at",
    "updated_at",
    "metadata",
    "metadata.tool_call_id",
    "metadata.parent_tool_call_id",
    "metadata.description",
)
#: Every column of the subagent rows but the integers (flags and metrics, which hold no text).
ROW_COLUMNS = tuple(c.name for c in schema.subagents.columns if not isinstance(c.type, sa.Integer))
#: PostgreSQL cannot hold a huge value here: a btree index entry is at most 2704 bytes (the
#: primary keys, the indexes of CONTRACT §1), and a TIMESTAMP column holds no text.
POSTGRES_CANNOT_HOLD = {
    ("message", "id"),
    ("message", "task_session_id"),
    ("message", "turn_id"),
    ("message", "created_at"),
    ("message", "updated_at"),
    *(("row", c) for c in (*schema.AMENDED_UNIQUE, "id", "task_id", "turn_id")),
    *(("row", c) for c in ("observed_at", "settled_at", "updated_at")),
}


def plant_huge_value(engine: sa.Engine, table: str, column: str, value: str) -> None:
    """``value`` in ``column`` of one subagent message or row (see :data:`MESSAGE_COLUMNS`),
    with a huge ``task_session_id`` or ``turn_id`` in the session or turn it names too."""
    build = StoreBuilder(engine)
    session = build.session(task_id="bench-huge")
    parents = {
        "task_session_id": schema.task_sessions.insert().values(
            id=value, task_id="bench-huge", started_at=T0, updated_at=T0
        ),
        "turn_id": schema.task_session_turns.insert().values(
            id=value, task_session_id=session, task_id="bench-huge"
        ),
    }
    if column in parents and (table, column) != ("row", "turn_id"):  # the row's names no turn
        with engine.begin() as conn:
            conn.execute(parents[column])
    if table == "row":
        key = value if column == "tool_call_id" else "bench-huge-row"
        row_id = build.subagent_row(session, key, datetime.now(UTC))
        where = schema.subagents.c.id == row_id
        planted = schema.subagents.update().where(where)
    else:
        field = column.removeprefix("metadata.")
        metadata = subagent_metadata(
            value if field == "tool_call_id" else "bench-huge",
            **({field: value} if field == "description" else {}),
        )
        if field == "parent_tool_call_id":
            metadata[field] = value
        if column == "metadata":
            metadata = value
        message_id = build.message(session, T0, metadata=metadata)
        m = schema.task_session_messages
        planted = m.update().where(m.c.id == message_id)
    if column != "tool_call_id" and not column.startswith("metadata"):
        with engine.begin() as conn:
            conn.execute(planted.values({column: value}))


def bound(baseline_mb: float, value_mb: float) -> float:
    return baseline_mb + RSS_OVER_GX_MB + RSS_PER_HUGE_VALUE * value_mb


def prepare(stores: Stores, dialect: str, scale: int) -> dict[str, Copy]:
    """A migrated store with live traffic and the huge message, a copy of it with the
    message's backfilled row too, and a copy of the store before the message for each of
    :data:`COLUMN_CASES` it can hold, with its huge value."""
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
    cases: dict[str, Copy] = {}
    for n, (case, (table, column)) in enumerate(COLUMN_CASES.items()):
        if dialect == "postgresql" and (table, column) in POSTGRES_CANNOT_HOLD:
            continue
        _say(f"{dialect}: one {HUGE_VALUE_CHARS // 1_000_000} MB {table} {column}")
        planted = cases[case] = stores.copy(store, f"huge_column_{n}")
        engine = planted.engine()
        try:
            plant_huge_value(engine, table, column, "v" * HUGE_VALUE_CHARS)
        finally:
            engine.dispose()
        stores.analyze(planted)
    _say(f"{dialect}: one {HUGE_VALUE_CHARS // 1_000_000} MB description")
    message_id = add_huge_description(store)
    stores.analyze(store)
    with_row = stores.copy(store, "huge_row")
    add_backfilled_row(with_row, message_id)
    return {"message": store, "message and row": with_row, **cases}


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
            for case in (case for case in CASES if case in cases):
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
        "the row the backfill writes from it (*message and row*), and with a value as long "
        "in one column of a subagent message or row (the other cases: *key in message* is its "
        "metadata's `tool_call_id`, *metadata not JSON* the whole document, *row status* "
        "`tool_status`). Bound: GX import + context + "
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
        for case in (case for case in CASES if r["rss"][case]):
            peak = _median(r["rss"][case])
            runs = ", ".join(f"{v:.0f}" for v in r["rss"][case])
            lines.append(
                f"| {r['dialect']} | {r['scale']} | {r['value_mb']:.0f} | {case} | {base:.0f} | "
                f"{peak:.0f} | {runs} | {limit:.0f} | {limit - peak:.0f} | "
                f"{'yes' if peak <= limit else '**no**'} | {r['verdict'][case]} |"
            )
    return "\n".join(lines) + "\n"
