"""What changed since the last run of a checkpoint on a store: alerts that fire on change.

A standing failure that alerts every night is soon an alert nobody reads. Each finished run's
register entry keeps its failed rules, each with the run time it has been failing *since*
(carried forward from run to run). A run compares its failed rules with those of the last
finished run of the same checkpoint on the same store (the same run name,
:func:`kandev_dq.run.checkpoint.run_name`): a rule failing now and not then is **new**, one
failing both times is **failing since** that run time, and one that failed then and passes now
is **resolved**. Notifications fire on a change of state by default (:func:`notifies`): a new
failure at a severity the channel reports, or a recovery, when none is left of what it reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kandev_dq.run.results import RuleResult

#: Notify on a change of state (the default), or on every run GX's notify-on rule reports.
ON_CHANGE, ALWAYS = "change", "always"
NOTIFY_WHEN = (ON_CHANGE, ALWAYS)


def rule_key(suite: str, expectation: str) -> str:
    return f"{suite}/{expectation}"


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

    def to_json(self) -> dict[str, Any]:
        return {
            "previous_run": self.previous_run,
            "new": list(self.new),
            "resolved": list(self.resolved),
        }


def changes_since(
    previous: dict[str, Any] | None, results: Iterable[RuleResult], run_time: str
) -> Changes:
    """Compare ``results`` (this run's, at ``run_time``) with ``previous``, the register entry of
    the last finished run of the same checkpoint on the same store (None: there is none)."""
    results = list(results)
    before = {
        rule_key(f.get("suite", ""), f.get("expectation", "")): f
        for f in (previous or {}).get("failed_rules") or []
    }
    previous_time = (previous or {}).get("run_time")
    changes = Changes(previous_run=previous_time)
    changes.before = {key: f.get("severity", "") for key, f in before.items()}
    for result in results:
        key = rule_key(result.suite, result.expectation)
        if result.success:
            if key in before:
                earlier = before[key]
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
        if key in before:
            changes.since[key] = before[key].get("since") or previous_time or run_time
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
