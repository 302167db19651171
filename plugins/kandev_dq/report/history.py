"""Past runs of one store, newest first, read back from GX's validation-results store.

GX keeps one validation result per suite and run under ``<project>/uncommitted/validations/
<suite>/<run name>/<run time>/<batch>.json``. ``kandev-dq check`` names each run
``<checkpoint>@<store tag>`` (:mod:`kandev_dq.run.checkpoint`), so a store's runs are the keys
whose run name carries its tag; they are listed and read through GX's own store API
(``context.validation_results_store.list_keys()``/``get()``). Runs made without kandev-dq (plain
GX, no run name) cannot be attributed to a store and are not listed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kandev_dq.contract.states import STATES
from kandev_dq.run.checkpoint import parse_run_name, store_tag
from kandev_dq.run.ledger import store_identity
from kandev_dq.run.project import load_context
from kandev_dq.run.results import RuleResult, rule_result
from kandev_dq.store.access import chosen_store, resolve_url, shown_store

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
    success: bool
    failures: dict[str, int]
    failed: list[FailedRule] = field(default_factory=list)


#: Runs the overview's timeline covers, newest last.
TIMELINE_RUNS = 30
#: The writer-health figures charted (AC-26, AC-27): each rule's observed value per run.
HEALTH_FIGURES = {
    "shortfall": "expect_no_writer_shortfall_since_capture_since",
    "excess": "expect_no_writer_excess_since_capture_since",
    "rows_since_capture": "expect_no_cross_execution_collisions_since_capture_since",
}
SEVERITY_ORDER = ("error", "warning", "info")


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
    #: The overview chart's series for this store (its last :data:`TIMELINE_RUNS` runs).
    timeline: Timeline | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def runs_of(results_store, tag: str) -> dict[tuple[str, Any], list]:
    """The result keys of each run of the store ``tag`` names, by (run name, run time)."""
    groups: dict[tuple[str, Any], list] = defaultdict(list)
    for key in results_store.list_keys():
        parsed = parse_run_name(key.run_id.run_name)
        if parsed and parsed[1] == tag:
            groups[(key.run_id.run_name, key.run_id.run_time)].append(key)
    return groups


def timeline(context, tag: str, limit: int = TIMELINE_RUNS) -> Timeline:
    """THE series the overview charts and ``history --format json`` gives: the last ``limit``
    runs of the store ``tag`` names, oldest first, read from GX's validation-results store (and
    the run register for the keys)."""
    from kandev_dq.run.register import load_register, run_key

    results_store = context.validation_results_store
    groups = runs_of(results_store, tag)
    chosen = sorted(groups, key=lambda group: group[1])[-max(limit, 0) :] if limit else []
    register = load_register(getattr(context, "root_directory", None))
    points: list[TimelinePoint] = []
    first_seen: dict[str, str] = {}
    for index, (name, when) in enumerate(chosen, start=1):
        suites: dict[str, str] = {}
        health: dict[str, int | None] = dict.fromkeys(HEALTH_FIGURES)
        state = None
        for key in groups[(name, when)]:
            suite_result = results_store.get(key)
            worst = "passed"
            for raw in suite_result.results:
                rule = rule_result(raw)
                if rule.expectation == STATE_EXPECTATION and rule.observed_value in STATES:
                    state = rule.observed_value
                for figure, expectation in HEALTH_FIGURES.items():
                    if rule.expectation == expectation:
                        health[figure] = _figure(figure, raw, rule)
                if not rule.success and (
                    worst == "passed"
                    or SEVERITY_ORDER.index(rule.severity) < SEVERITY_ORDER.index(worst)
                ):
                    worst = rule.severity
            suites[suite_result.suite_name] = worst
        run_time = when.isoformat().replace("+00:00", "Z")
        record = register.get(run_key(groups[(name, when)][0].run_id))
        present = None
        if record is not None:
            present = sorted(
                k for k, d in (record.get("keys") or {}).items() if d.get("kind") != "absent"
            )
            for k in present:
                first_seen.setdefault(k, run_time)
        points.append(
            TimelinePoint(
                run=index,
                run_time=run_time,
                checkpoint=parse_run_name(name)[0],  # type: ignore[index] - grouped keys parse
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


def history(
    project: Path, target: str | None, limit: int = 20, *, allow_project_code: bool = False
) -> History:
    """The last ``limit`` runs recorded for ``target`` in ``project``, newest first.

    The store is named from its URL alone, without connecting to it (history needs only
    results): its ledger identity finds its runs, and it is shown as every command shows it."""
    url = resolve_url(chosen_store(target))
    tag = store_tag(store_identity(url))
    context = load_context(project, allow_project_code=allow_project_code)
    results_store = context.validation_results_store
    groups = runs_of(results_store, tag)
    newest = sorted(groups, key=lambda group: group[1], reverse=True)[: max(limit, 0)]
    runs = [_past_run(results_store, name, when, groups[(name, when)]) for name, when in newest]
    return History(store=shown_store(url), runs=runs, timeline=timeline(context, tag))


def _past_run(results_store, name: str, when, keys: list) -> PastRun:
    checkpoint = parse_run_name(name)[0]  # type: ignore[index] - grouped keys all parse
    suites, failed, state = [], [], None
    for suite_result in (results_store.get(k) for k in keys):
        suites.append(suite_result.suite_name)
        for raw in suite_result.results:
            rule: RuleResult = rule_result(raw)
            if rule.expectation == STATE_EXPECTATION and rule.observed_value in STATES:
                state = rule.observed_value
            if not rule.success:
                failed.append(
                    FailedRule(
                        suite_result.suite_name,
                        rule.expectation,
                        rule.rules,
                        rule.severity,
                        rule.message,
                    )
                )
    failures = {s: sum(f.severity == s for f in failed) for s in ("error", "warning", "info")}
    success = failures["error"] == 0
    order = {"error": 0, "warning": 1, "info": 2}
    failed.sort(key=lambda f: (order.get(f.severity, 3), f.suite, f.expectation))
    return PastRun(
        run_time=when.isoformat().replace("+00:00", "Z"),
        checkpoint=checkpoint,
        run_name=name,
        suites=sorted(suites),
        state=state,
        success=success,
        failures=failures,
        failed=failed,
    )


def render(past: History) -> list[str]:
    """Plain lines: one per run, then its failed and warned rules, indented."""
    if not past.runs:
        return [f"no recorded kandev-dq runs for {past.store} in this project"]
    lines = [f"runs of {past.store}, newest first:"]
    for run in past.runs:
        verdict = "PASSED" if run.success else "FAILED"
        counts = run.failures
        lines.append(
            f"{run.run_time}  {run.checkpoint:<15} {run.state or '(state not recorded)':<16} "
            f"{verdict}  {counts['error']} error(s), {counts['warning']} warning(s), "
            f"{counts['info']} info"
        )
        for rule in run.failed:
            if rule.severity in ("error", "warning"):
                lines.append(f"    {rule.severity:<8} {rule.expectation} [{', '.join(rule.rules)}]")
    return lines
