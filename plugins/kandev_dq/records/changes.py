"""What changed since the last run of a checkpoint on a store: alerts that fire on change.

A standing failure that alerts every night is soon an alert nobody reads. Each finished run's
register entry keeps its failed rules, each with the run time it has been failing *since*
(carried forward from run to run). A run compares its failed rules with those of the last
finished run of the same checkpoint on the same store (the same run name,
:func:`kandev_dq.records.register.run_name`): a rule failing now and not then is **new**, one
failing both times is **failing since** that run time, and one that failed then and passes now
is **resolved**. Notifications fire on a change of state by default (:func:`notifies`): a new
failure at a severity the channel reports, or a recovery, when none is left of what it reported.

A rule a ``live`` suite runs is one finding per store, whichever run judges it: ``live`` over
what changed and its open findings, ``nightly`` or ``pre_release`` over everything. Its state
is the one the last finished run on the store that judged it left (:func:`previous_state`):
a full run finding a live finding still there keeps its "failing since", and one finding it
gone resolves it, once (the next live run has nothing left to resolve).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kandev_dq.contract.rule_index import SHARED_RULES, SHARED_SUITES
from kandev_dq.records.database import Records
from kandev_dq.records.results import RuleResult

#: Notify on a change of state (the default), or on every run GX's notify-on rule reports.
ON_CHANGE, ALWAYS = "change", "always"
NOTIFY_WHEN = (ON_CHANGE, ALWAYS)


def rule_key(suite: str, expectation: str) -> str:
    return f"{suite}/{expectation}"


def state_key(suite: str, expectation: str) -> str:
    """The key a rule's state is kept under on a store: a rule a live suite runs, under its
    full-read suite (one finding, whichever suite judged it); any other, under its own."""
    return rule_key(*SHARED_RULES.get((suite, expectation), (suite, expectation)))


#: The store's newest runs read, at most, for the last verdict of each rule a live suite runs
#: (each live, nightly or pre_release run judges them all: the first such run settles them).
STORE_RUNS = 200


def previous_state(
    records: Records, run_name: str, identity: str, suites: Iterable[str], before: str | None
) -> dict[str, Any] | None:
    """What a run of ``suites`` (run name ``run_name``, run key ``before``) on the store
    ``identity`` is compared with, as a register entry (its run time, its failed rules each
    with its ``since``): the last finished run of the same checkpoint on the store (of the same
    part, for a partial run), except for the rules a live suite runs, each as the last finished
    run on the store that judged it left it (whatever its checkpoint; a partial run judged the
    rules it ran). None: nothing was judged before."""
    shared = {SHARED_SUITES[suite] for suite in suites if suite in SHARED_SUITES}
    failed: dict[str, dict[str, Any]] = {}
    times: list[str] = []

    def take(run: dict[str, Any], settles: Callable[[tuple[str, str] | None], bool]) -> None:
        """The failed rules of ``run`` that it settles for this run (``settles`` is given a
        rule a live suite runs as its full-read suite's, any other as None)."""
        times.append(run["run_time"])
        for rule in run.get("failed_rules") or []:
            suite, expectation = rule.get("suite", ""), rule.get("expectation", "")
            if settles(SHARED_RULES.get((suite, expectation))):
                since = rule.get("since") or run["run_time"]
                failed[state_key(suite, expectation)] = {**rule, "since": since}

    own = records.last_finished_run(run_name, identity, before=before)
    if own is not None:
        take(own, lambda full: full is None or full[0] not in shared)
    left = {(full, e) for (suite, e), (full, _) in SHARED_RULES.items() if suite in shared}
    for run in records.finished_runs_of_store(identity, before, STORE_RUNS) if left else ():
        judged_suites = {
            SHARED_SUITES.get(suite) for suite in (run.get("counts") or {}).get("suites") or []
        }
        ran = set((run.get("selection") or {}).get("rules") or ()) or None
        judged = {
            (suite, e) for suite, e in left if suite in judged_suites and (ran is None or e in ran)
        }
        if judged:
            take(run, lambda full, judged=judged: full in judged)
            left -= judged
        if not left:
            break
    if not times:
        return None
    return {"run_time": max(times), "failed_rules": list(failed.values())}


@dataclass
class Changes:
    """This run's failed rules against the last run of its checkpoint on its store."""

    #: The run time of that last finished run; None when this is the first.
    previous_run: str | None = None
    #: Failing rule (``suite/expectation``) -> the run time it has been failing since.
    since: dict[str, str] = field(default_factory=dict)
    #: Failing rules that did not fail in the last run.
    new: list[str] = field(default_factory=list)
    #: Rules that failed in the last run and pass now: suite, expectation, severity, since.
    resolved: list[dict[str, Any]] = field(default_factory=list)
    #: The last run's failed rules (``suite/expectation`` -> severity).
    before: dict[str, str] = field(default_factory=dict)
    #: This run's failed rules (``suite/expectation`` -> severity).
    now: dict[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """Whether the verdict moved: a first run, a new failure or a recovery."""
        return self.previous_run is None or bool(self.new or self.resolved)

    def to_json(self) -> dict[str, Any]:
        return {
            "previous_run": self.previous_run,
            "new": list(self.new),
            "resolved": list(self.resolved),
        }


def changes_since(
    previous: dict[str, Any] | None, results: Iterable[RuleResult], run_time: str
) -> Changes:
    """Compare ``results`` (this run's, at ``run_time``) with ``previous``, a register entry as
    :func:`previous_state` gives it (None: nothing was judged before); a rule a live suite runs
    is compared under its full-read suite (:func:`state_key`)."""
    results = list(results)
    before = {
        state_key(f.get("suite", ""), f.get("expectation", "")): f
        for f in (previous or {}).get("failed_rules") or []
    }
    previous_time = (previous or {}).get("run_time")
    changes = Changes(previous_run=previous_time)
    # Only the rules this run judged: a partial run recovers nothing it did not run.
    judged = {state_key(r.suite, r.expectation) for r in results}
    changes.before = {key: f.get("severity", "") for key, f in before.items() if key in judged}
    for result in results:
        key = rule_key(result.suite, result.expectation)
        state = state_key(result.suite, result.expectation)
        if result.success:
            if state in before:
                earlier = before[state]
                changes.resolved.append(
                    {
                        "suite": result.suite,
                        "expectation": result.expectation,
                        "severity": earlier.get("severity"),
                        "since": earlier.get("since") or previous_time,
                    }
                )
            continue
        changes.now[key] = result.severity
        if state in before:
            changes.since[key] = before[state].get("since") or previous_time or run_time
        else:
            changes.since[key] = run_time
            changes.new.append(key)
    return changes


def notifies(changes: Changes, severities: Iterable[str]) -> str | None:
    """Whether a channel reporting ``severities`` is told of this run on change: ``"failure"``
    for a new failure at one of them, ``"recovery"`` when the last run had failures at them and
    this one has none, else None (nothing changed that the channel reports)."""
    wanted = set(severities)
    if any(changes.now[key] in wanted for key in changes.new):
        return "failure"
    had = any(severity in wanted for severity in changes.before.values())
    has = any(severity in wanted for severity in changes.now.values())
    return "recovery" if had and not has else None
