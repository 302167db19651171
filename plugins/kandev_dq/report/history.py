"""Past runs of one store, newest first, read back from the records database.

``kandev-dq check`` records each run in the run register of the records database
(:mod:`kandev_dq.records`): its time, checkpoint, state, verdict, failed rules by severity
and the failed rules themselves. ``history`` reads that register, so it works from any machine
and any project folder that points at the same records database, and reads neither GX nor the
store (the store is named from its URL alone). It also says when the store's write-once
baseline was taken and lists every accepted key reset (``kandev-dq ledger accept``, AC-24),
and gives the timeline the data docs overview charts (:func:`timeline`), read from the
validation results the records database keeps.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kandev_dq.contract.severity import SEVERITIES, Severity
from kandev_dq.contract.states import STATES
from kandev_dq.project.selection import Selection
from kandev_dq.project.settings import chosen_store
from kandev_dq.records import Accept, Records, records_ref, refuse_the_store
from kandev_dq.records.identity import records_key
from kandev_dq.records.results import RuleResult, rule_result
from kandev_dq.store.reference import StoreRef

STATE_EXPECTATION = "expect_activation_state_to_be_in_set"


@dataclass
class FailedRule:
    suite: str
    expectation: str
    rules: list[str]
    severity: str
    message: str


@dataclass
class PastRun:
    """One checkpoint run: its time (UTC), checkpoint, suites, state and failed rules."""

    run_time: str
    checkpoint: str
    run_name: str
    suites: list[str]
    state: str | None
    success: bool | None  #: None: the run did not finish (it was interrupted)
    failures: dict[str, int]
    failed: list[FailedRule] = field(default_factory=list)
    #: A partial run's suites and rules (``check --suite``/``--rule``); None: the whole
    #: checkpoint ran.
    selection: dict[str, list[str]] | None = None


#: Runs the overview's timeline covers, newest last.
TIMELINE_RUNS = 30
#: The writer-health figures charted (AC-26, AC-27): each rule's observed value per run.
HEALTH_FIGURES = {
    "shortfall": "expect_no_writer_shortfall_since_capture_since",
    "excess": "expect_no_writer_excess_since_capture_since",
    "rows_since_capture": "expect_no_cross_execution_collisions_since_capture_since",
}


@dataclass
class TimelinePoint:
    """One run of the timeline: each suite's verdict (``passed`` or the worst severity that
    failed), the writer-health figures, the activation state (AC-24c) and which keys were
    present (from the run register, where the run was recorded)."""

    run: int  #: 1 for the oldest run charted
    run_time: str
    checkpoint: str
    suites: dict[str, str]
    state: str | None
    health: dict[str, int | None]
    keys_present: list[str] | None


@dataclass
class Timeline:
    """The last runs of one store, oldest first, and the first run each key was seen in."""

    points: list[TimelinePoint]
    first_seen: dict[str, str]  #: key -> run time of the first charted run holding it

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class History:
    store: str
    runs: list[PastRun]
    records: str = ""
    #: When the write-once record of this store began, and where it came from (AC-24).
    baseline_taken_at: str | None = None
    baseline_source: str | None = None
    accepts: list[Accept] = field(default_factory=list)
    #: The overview chart's series for this store (its last :data:`TIMELINE_RUNS` runs).
    timeline: Timeline | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def history(
    project: Path,
    target: str | StoreRef | None,
    limit: int = 20,
    *,
    allow_project_code: bool = False,
    records: str | None = None,
    checkpoints: list[str] | None = None,
) -> History:
    """The last ``limit`` runs recorded for ``target``, newest first (of ``checkpoints`` only,
    when named).

    History loads no project code (nor GX); ``allow_project_code`` only lets the project's yml
    name a records database outside its folder (:func:`~kandev_dq.records.records_url`)."""
    store = chosen_store(target)
    chosen = records_ref(project, records, allow_project_code=allow_project_code)
    refuse_the_store(chosen, store)  # opening records creates their tables: never in the store
    with Records(chosen) as opened:
        identity = records_key(opened, store)
        baseline = opened.baseline(identity)
        recorded = opened.run_records(
            identity=identity, limit=max(limit, 0), checkpoints=checkpoints
        )
        runs = [_past_run(r) for r in recorded]
        return History(
            store=store.shown,
            runs=runs,
            records=opened.shown,
            baseline_taken_at=baseline.taken_at if baseline else None,
            baseline_source=baseline.source if baseline else None,
            accepts=opened.accepts(identity),
            timeline=timeline(opened, identity),
        )


def timeline(records: Records, identity: str, limit: int = TIMELINE_RUNS) -> Timeline:
    """THE series the overview charts and ``history --format json`` gives: the last ``limit``
    runs of the store ``identity`` names, oldest first, from the run register and the
    validation results of the records database (no GX)."""
    chosen = list(reversed(records.run_records(identity=identity, limit=max(limit, 0))))
    points: list[TimelinePoint] = []
    first_seen: dict[str, str] = {}
    stored = records.results_of_runs([(r["run_name"], r["run_key"]) for r in chosen])
    for index, record in enumerate(chosen, start=1):
        suites: dict[str, str] = {}
        health: dict[str, int | None] = dict.fromkeys(HEALTH_FIGURES)
        state = None
        for suite, value in stored[record["run_name"], record["run_key"]]:
            worst = "passed"
            for raw in json.loads(value).get("results") or []:
                rule = rule_result(raw)
                if rule.expectation == STATE_EXPECTATION and rule.observed_value in STATES:
                    state = rule.observed_value
                for figure, expectation in HEALTH_FIGURES.items():
                    if rule.expectation == expectation:
                        health[figure] = _figure(figure, raw, rule)
                if not rule.success and (
                    worst == "passed" or SEVERITIES.index(rule.severity) < SEVERITIES.index(worst)
                ):
                    worst = rule.severity
            suites[suite] = worst
        present = sorted(
            k for k, d in (record.get("keys") or {}).items() if d.get("kind") != "absent"
        )
        for k in present:
            first_seen.setdefault(k, record["run_time"])
        points.append(
            TimelinePoint(
                run=index,
                run_time=record["run_time"],
                checkpoint=record["checkpoint"],
                suites=dict(sorted(suites.items())),
                state=state,
                health=health,
                keys_present=present,
            )
        )
    return Timeline(points=points, first_seen=first_seen)


def _figure(figure: str, raw, rule: RuleResult) -> int | None:
    """A writer-health figure of one run: the rule's count, or the rows it compared."""
    if figure == "rows_since_capture":
        rows = (((raw.get("result") or {}).get("details")) or {}).get("rows")
        return rows if isinstance(rows, int) else None
    value = rule.observed_value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _past_run(record: dict[str, Any]) -> PastRun:
    failed = [
        FailedRule(
            f.get("suite", ""),
            f.get("expectation", ""),
            list(f.get("rules") or []),
            f.get("severity", ""),
            f.get("message", ""),
        )
        for f in record.get("failed_rules") or []
    ]
    failed.sort(key=lambda f: (Severity.rank_of(f.severity), f.suite, f.expectation))
    counts = record.get("counts") or {}
    return PastRun(
        run_time=record["run_time"],
        checkpoint=record["checkpoint"],
        run_name=record["run_name"],
        suites=sorted(counts.get("suites") or []),
        state=record.get("state"),
        success=record.get("success"),
        failures={s: int(counts.get(s, 0)) for s in SEVERITIES},
        failed=failed,
        selection=record.get("selection"),
    )


def _partial(run: PastRun) -> str:
    """What a partial run ran, after its counts (names from the project: the caller escapes)."""
    if run.selection is None:
        return ""
    return f"  ({Selection.from_json(run.checkpoint, run.selection).text()})"


def render(past: History) -> list[str]:
    """Plain lines: the baseline, accepted resets, then one line per run with its failed and
    warned rules, indented."""
    if not past.runs and past.baseline_taken_at is None:
        return [f"no recorded kandev-dq runs for {past.store} in {past.records}"]
    lines = [f"runs of {past.store}, newest first (records: {past.records}):"]
    if past.baseline_taken_at:
        lines.append(
            f"write-once baseline taken {past.baseline_taken_at} ({past.baseline_source}); "
            "rewrites before it cannot be seen"
        )
    for accept in past.accepts:
        lines.append(
            f"accepted {accept.accepted_at} by {accept.accepted_by}: {accept.key_name} "
            f"{accept.replaced_value!r} -> {accept.accepted_value!r} ({accept.reason})"
        )
    if not past.runs:  # the ledger outlives pruned runs: say the list is empty, not silently
        lines.append("no recorded runs (none kept in the records database)")
    for run in past.runs:
        verdict = {True: "PASSED", False: "FAILED", None: "UNFINISHED"}[run.success]
        counts = run.failures
        lines.append(
            f"{run.run_time}  {run.checkpoint:<15} {run.state or '(state not recorded)':<16} "
            f"{verdict}  {counts['error']} error(s), {counts['warning']} warning(s), "
            f"{counts['info']} info" + _partial(run)
        )
        for rule in run.failed:
            if rule.severity in ("error", "warning"):
                lines.append(f"    {rule.severity:<8} {rule.expectation} [{', '.join(rule.rules)}]")
    return lines
