"""The bench's Markdown: machine facts, the command, the ratio table, growth, targets."""

from __future__ import annotations

import statistics

#: The targets the table is read against.
PROCESS_RATIO = 1.5
MIGRATE_RATIO = 1.2
RSS_OVER_GX_MB = 100
#: One huge value may cost this many times its size on top of RSS_OVER_GX_MB.
RSS_PER_HUGE_VALUE = 3
RSS_GROWTH = 0.10
#: The SQL time each checkpoint may take, as a multiple of the single pass, and the overhead a
#: `check` process may add to GX's import + context and the SQL (seconds).
SINGLE_PASS_RATIO = {"pre_release": 2.0, "nightly": 1.5}
OVERHEAD_S = 1.0
TIME_GROWTH = 4.4
QUICK_SECONDS = 1.0


def _m(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _rules_ratio(r: dict) -> str:
    """The message-rules pass as a ratio to the single pass ("–" for a run that predates it)."""
    if not r.get("rules_pass"):
        return "–"
    return f"{_m(r['rules_pass']) / _m(r['single_pass']):.2f}×"


def _ok(flag: bool) -> str:
    return "yes" if flag else "**no**"


def rows_of(r: dict) -> list[tuple[str, float, float]]:
    """(step, kandev-dq seconds, floor seconds) for one store."""
    base = _m(r["baseline"])
    out = [("migrate (backfill)", _m(r["migrate"]), _m(r["migrate_floor"]))]
    for cp in ("pre_release", "nightly"):
        facts, floor = _m(r["facts"][cp]), _m(r["facts_floor"][cp])
        out.append((f"{cp}: facts in process", facts, floor))
        out.append((f"{cp}: `check` process", _m(r["process"][cp]), base + floor))
    return out


def quick_table(quick: dict[str, list[float]]) -> list[str]:
    """The sub-second rows: what a user types first, and typos, as whole processes."""
    # `--help` is Python, typer and the command table alone: the floor every row stands on. On a
    # shared machine its multiple reads through the load; the seconds do not.
    floor = _m(quick.get("`--help`", []))
    lines = [
        "",
        "## Commands that answer before GX loads (wall seconds, whole process)",
        "",
        f"| command | seconds (median) | slowest | × `--help` | under {QUICK_SECONDS:.0f} s |",
        "|---|---:|---:|---:|---|",
    ]
    for label, seconds in quick.items():
        median = _m(seconds)
        lines.append(
            f"| {label} | {median:.2f} | {max(seconds):.2f} | {median / floor:.1f} | "
            f"{_ok(median < QUICK_SECONDS)} |"
        )
    return lines


def render_quick(info: dict, quick: dict[str, list[float]]) -> str:
    """``--quick-only``: the machine, the command and the sub-second rows alone."""
    lines = [
        "# kandev-dq bench: commands that must answer in under a second",
        "",
        f"- date: {info['date']}; command: `{info['command']}` (medians of {info['repeat']} runs)",
        f"- machine: {info.get('cpus', '?')} CPU(s) ({info.get('cpu', '?')}), load average "
        f"{info['load_before']} before, {info['load_after']} after (shared with other work)",
        f"- software: Python {info['python']}, GX {info['great_expectations']}",
        *quick_table(quick),
    ]
    return "\n".join(lines) + "\n"


def render(info: dict, results: list[dict], quick: dict[str, list[float]] | None = None) -> str:
    lines = [
        "# kandev-dq bench",
        "",
        f"- date: {info['date']}; took {info.get('minutes', '?')} min",
        f"- command: `{info['command']}` (medians of {info['repeat']} runs; "
        "floors and measured runs alternate)",
        f"- machine: {info.get('cpus', '?')} CPU(s) ({info.get('cpu', '?')}), "
        f"{info.get('memory_gb', '?')} GB RAM, load average {info['load_before']} before, "
        f"{info['load_after']} after (shared with other work: read the ratios, not the seconds)",
        f"- software: Python {info['python']}, GX {info['great_expectations']}, "
        f"SQLAlchemy {info['sqlalchemy']}, SQLite {info['sqlite']}"
        + (f", PostgreSQL {info['postgresql']}" if info.get("postgresql") else ""),
        "",
        "Floors: migrate = a bare BEGIN, MAX, INSERT … SELECT (same predicate and mapping), "
        "COMMIT on an identical copy; facts = the same families of facts in hand-written raw "
        "SQL, one statement per family, in one read snapshot; `check` process = GX's import + "
        "`get_context` as a process (measured in the same round) + the floor facts.",
        "",
        "Stores: `sample.generate(scale)` (253 subagent messages per unit), migrated, then "
        f"{results[0]['live'] // results[0]['scale'] if results else 10} live subagent messages "
        "per unit (`sample.append_live_traffic`, a healthy writer); PostgreSQL statistics "
        "refreshed (`ANALYZE`) after generation and after the live traffic, as autovacuum "
        "would. `check` runs on a project with no earlier runs.",
        "",
        "## Time (seconds; ratio = kandev-dq / floor)",
        "",
        "| dialect | scale | messages | step | kandev-dq | floor | ratio |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for r in results:
        for step, measured, floor in rows_of(r):
            lines.append(
                f"| {r['dialect']} | {r['scale']} | {r['messages']:,} | {step} | "
                f"{measured:.2f} | {floor:.2f} | {measured / floor:.2f}× |"
            )
    lines += [
        "",
        "## Against the single-pass floor (the physical one)",
        "",
        "Single pass = one scan of the messages decoding every document once and counting "
        "the distinct subagent keys, plus one scan of the subagent rows: what any checker "
        "must read, whatever its rules. SQL ratio = kandev-dq's facts in process / single "
        "pass; process ratio = the whole `check` process / (GX import + `get_context` + single "
        "pass); overhead = the whole process - GX import + `get_context` - kandev-dq's facts. "
        "kandev-dq loads GX with the cyclic collector paused, which makes that load itself "
        "faster than GX's default one: the last column subtracts GX's import + `get_context` "
        "loaded that way instead (measured in the same round), so it is the time kandev-dq "
        "spends beyond loading GX and reading the store (its own imports, GX's run machinery, "
        "data docs). Rules pass = the same scan of the messages plus part of the tests the "
        "contract asks of every message (document validity, escaped or repeated names along "
        "the paths the reading takes, on SQLite the fixed part of the timestamps' text form, "
        "instants no clock wrote), nothing joined, as a ratio to the single pass. On SQLite, "
        "where a statement runs on one core and these are the cheapest forms found, it is a "
        "lower bound of an exact checker's SQL; PostgreSQL's parallel plans can beat it.",
        "",
        "| dialect | scale | single pass (s) | rules pass | checkpoint | SQL ratio | "
        "process ratio | overhead (s) | GX import + context, paused (s) | "
        "overhead beyond it (s) |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if not r.get("single_pass"):
            continue
        single, base = _m(r["single_pass"]), _m(r["baseline"])
        paused = _m(r["baseline_paused"])
        rules = _rules_ratio(r)
        for cp in ("pre_release", "nightly"):
            facts, process = _m(r["facts"][cp]), _m(r["process"][cp])
            lines.append(
                f"| {r['dialect']} | {r['scale']} | {single:.2f} | {rules} | {cp} "
                f"| {facts / single:.2f}× "
                f"| {process / (base + single):.2f}× | {process - base - facts:.2f} "
                f"| {paused:.2f} | {process - paused - facts:.2f} |"
            )
    lines += [
        "",
        "## Peak RSS (MB) of whole processes",
        "",
        "| dialect | scale | GX import + context | `check` pre_release | `check` nightly | "
        "worst over GX |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        base = _m(r["baseline_rss"])
        pre, night = _m(r["process_rss"]["pre_release"]), _m(r["process_rss"]["nightly"])
        lines.append(
            f"| {r['dialect']} | {r['scale']} | {base:.0f} | {pre:.0f} | {night:.0f} | "
            f"+{max(pre, night) - base:.0f} |"
        )

    huge = [r for r in results if r.get("huge_value_rss") is not None]
    if huge:
        lines += [
            "",
            "## Peak RSS (MB) with one huge description (`check` pre_release)",
            "",
            f"Bound: GX import + context + {RSS_OVER_GX_MB} MB + {RSS_PER_HUGE_VALUE}× the "
            "largest single stored value (one subagent description of ASCII text).",
            "",
            "In its message, then in its message and the row the backfill writes from it.",
            "",
            "| dialect | scale | value (MB) | GX import + context | in the message | "
            "and in its row | bound | met |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in huge:
            value = r["huge_value_mb"]
            bound = _m(r["baseline_rss"]) + RSS_OVER_GX_MB + RSS_PER_HUGE_VALUE * value
            peaks = [r["huge_value_rss"]]
            row = r.get("huge_value_row_rss")  # a run that predates the second case has none
            peaks += [row] if row is not None else []
            lines.append(
                f"| {r['dialect']} | {r['scale']} | {value:.0f} | {_m(r['baseline_rss']):.0f} | "
                f"{r['huge_value_rss']:.0f} | {f'{row:.0f}' if row is not None else '–'} | "
                f"{bound:.0f} | {_ok(max(peaks) <= bound)} |"
            )

    growth = _growth(results)
    if growth:
        lines += [
            "",
            "## Growth from the small to the large scale",
            "",
            "| dialect | step | small (s) | large (s) | time × | peak RSS change |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for dialect, step, small, large, rss in growth:
            rss_text = f"{rss:+.1%}" if rss is not None else ""
            lines.append(
                f"| {dialect} | {step} | {small:.2f} | {large:.2f} | {large / small:.2f}× | "
                f"{rss_text} |"
            )
    if quick:
        lines += quick_table(quick)
    lines += ["", "## Targets (largest scale)", ""]
    lines += _targets(results, growth)
    problems = [
        f"- {r['dialect']} scale {r['scale']}: {line}"
        for r in results
        for line in r.get("disagreements", [])
    ]
    lines += ["", "Floor and kandev-dq facts agree: " + ("yes" if not problems else "**no**")]
    lines += problems
    verdicts = {
        f"{r['dialect']} {r['scale']} {cp}": ok
        for r in results
        for cp, ok in r.get("verdict", {}).items()
    }
    if verdicts and not all(verdicts.values()):
        lines.append(
            "Checkpoints that failed: " + ", ".join(k for k, v in verdicts.items() if not v)
        )
    lines += plans_section(results, info.get("kept_plans", []))
    return "\n".join(lines) + "\n"


def plans_section(results: list[dict], kept: list[str] = ()) -> list[str]:
    """Where each statement's plan was kept: the first place to look when a ratio regresses."""
    plans = [path for r in results for path in r.get("plans", [])]
    if not plans:
        return []
    lines = [
        "",
        "## Query plans",
        "",
        "Every statement of kandev-dq's facts with its plan (SQLite `EXPLAIN QUERY PLAN`; "
        "PostgreSQL `EXPLAIN (ANALYZE, BUFFERS)`), from one untimed run after the timed ones, "
        "in the work folder (`--work`, default `bench/out`):",
        "",
        *(f"- `{path}`" for path in plans),
    ]
    if kept:
        lines += [
            "",
            "The largest scale's plans are kept beside this table, so that a regression shows "
            "its cause:",
            "",
            *(f"- [`{path}`]({path})" for path in kept),
        ]
    return lines


def _growth(results: list[dict]):
    out = []
    for dialect in dict.fromkeys(r["dialect"] for r in results):
        mine = sorted((r for r in results if r["dialect"] == dialect), key=lambda r: r["scale"])
        if len(mine) < 2:
            continue
        small, large = mine[0], mine[-1]
        for (step, s_time, _), (_, l_time, _) in zip(rows_of(small), rows_of(large), strict=True):
            rss = None
            for cp in ("pre_release", "nightly"):
                if step == f"{cp}: `check` process":
                    a, b = _m(small["process_rss"][cp]), _m(large["process_rss"][cp])
                    rss = b / a - 1
            out.append((dialect, step, s_time, l_time, rss))
    return out


def _targets(results: list[dict], growth) -> list[str]:
    lines = []
    for dialect in dict.fromkeys(r["dialect"] for r in results):
        r = max((r for r in results if r["dialect"] == dialect), key=lambda r: r["scale"])
        steps = {step: (m, f) for step, m, f in rows_of(r)}
        base = _m(r["baseline_rss"])
        worst = max(_m(r["process_rss"][cp]) for cp in ("pre_release", "nightly"))
        m, f = steps["pre_release: facts in process"]
        pm, pf = steps["pre_release: `check` process"]
        mm, mf = steps["migrate (backfill)"]
        lines.append(
            f"- {dialect} ({r['messages']:,} messages): pre_release facts {m / f:.2f}× "
            f"(≤ {PROCESS_RATIO}×: {_ok(m / f <= PROCESS_RATIO)}), whole process {pm / pf:.2f}× "
            f"({_ok(pm / pf <= PROCESS_RATIO)}); migrate {mm / mf:.2f}× "
            f"(≤ {MIGRATE_RATIO}×: {_ok(mm / mf <= MIGRATE_RATIO)}); peak RSS "
            f"+{worst - base:.0f} MB over GX (≤ {RSS_OVER_GX_MB}: "
            f"{_ok(worst - base <= RSS_OVER_GX_MB)})"
        )
        if r.get("single_pass"):
            single, gx = _m(r["single_pass"]), _m(r["baseline"])
            parts = []
            for cp, most in SINGLE_PASS_RATIO.items():
                ratio = _m(r["facts"][cp]) / single
                over = _m(r["process"][cp]) - gx - _m(r["facts"][cp])
                beyond = _m(r["process"][cp]) - _m(r["baseline_paused"]) - _m(r["facts"][cp])
                parts.append(
                    f"{cp} SQL {ratio:.2f}× the single pass (≤ {most}×: {_ok(ratio <= most)}), "
                    f"overhead {over:.2f} s (≤ {OVERHEAD_S:.0f} s: {_ok(over <= OVERHEAD_S)}; "
                    f"{beyond:.2f} s beyond GX loaded as kandev-dq loads it)"
                )
            lines.append(f"- {dialect} against the single pass: " + "; ".join(parts))
            if r.get("rules_pass"):
                rules = _m(r["rules_pass"])
                lines.append(
                    f"- {dialect} rules pass: {_rules_ratio(r)} the single pass, beside goals of "
                    + " and ".join(f"{most}× ({cp})" for cp, most in SINGLE_PASS_RATIO.items())
                    + "; kandev-dq's SQL is "
                    + " and ".join(
                        f"{_m(r['facts'][cp]) / rules:.2f}× it ({cp})" for cp in SINGLE_PASS_RATIO
                    )
                )
        mine = [g for g in growth if g[0] == dialect]
        if mine:
            worst_time = max(mine, key=lambda g: g[3] / g[2])
            rss = [g[4] for g in mine if g[4] is not None]
            lines.append(
                f"- {dialect} growth: worst time {worst_time[3] / worst_time[2]:.2f}× "
                f"({worst_time[1]}; ≤ {TIME_GROWTH}×: "
                f"{_ok(all(g[3] / g[2] <= TIME_GROWTH for g in mine))}), peak RSS "
                f"{max(rss):+.1%} (≤ +{RSS_GROWTH:.0%}: {_ok(max(rss) <= RSS_GROWTH)})"
            )
    return lines
