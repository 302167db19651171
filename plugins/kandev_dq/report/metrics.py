"""A finished run as Prometheus metric families, through ``prometheus_client``.

``check --format openmetrics`` prints one run's families, :func:`kandev_dq.api.metrics`
returns them as a registry, and a process checking stores again and again keeps a
:class:`CheckMetrics`: the latest finished run of each checkpoint on each store, and whether
each store's last attempt could read it, exposed whenever it is collected.

Labels never carry a credential or a store value: only the store's shown name (no user, no
password), the checkpoint, suite, expectation, AC ids, severity and activation state, each
escaped as every output escapes names (:func:`kandev_dq.text.one_line`). The exposition is the
library's own, never written here. GX is not imported: a run is read through the report's
plain fields (:class:`CheckedRun`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from kandev_dq.contract.rule_index import SHARED_RULES
from kandev_dq.contract.severity import SEVERITIES
from kandev_dq.contract.states import STATES
from kandev_dq.text import one_line

UP = "kandev_dq_up"
RULE_SUCCESS = "kandev_dq_rule_success"
RULE_UNEXPECTED = "kandev_dq_rule_unexpected"
ACTIVATION_STATE = "kandev_dq_activation_state"
LAST_RUN = "kandev_dq_last_run_timestamp_seconds"
RUN_DURATION = "kandev_dq_run_duration_seconds"
REPLICA_LAG = "kandev_dq_replica_lag_seconds"
OPEN_FINDINGS = "kandev_dq_open_findings"
#: The live window's overlap on the store: the replica-lag alert compares the lag with it.
LIVE_OVERLAP = "kandev_dq_live_overlap_seconds"
#: How often a checkpoint is run on a store, where the process running it knows (the stale
#: alert waits three of them).
RUN_INTERVAL = "kandev_dq_run_interval_seconds"

RULE_LABELS = ("store", "checkpoint", "suite", "expectation", "ac", "severity")

#: Each family: its labels and its help text.
FAMILIES: dict[str, tuple[tuple[str, ...], str]] = {
    UP: (("store",), "1 when the last attempt could read the store, else 0"),
    RULE_SUCCESS: (RULE_LABELS, "1 when the rule passed in the last run, 0 when it failed"),
    RULE_UNEXPECTED: (RULE_LABELS, "the rule's unexpected_count in the last run, where it counts"),
    ACTIVATION_STATE: (("store", "state"), "1 for the store's activation state (AC-24c), else 0"),
    LAST_RUN: (("store", "checkpoint"), "when the last finished run ended (Unix time)"),
    RUN_DURATION: (("store", "checkpoint"), "how long the last finished run took"),
    REPLICA_LAG: (("store",), "how far a standby store's replay lagged behind its primary"),
    OPEN_FINDINGS: (("store", "severity"), "rules failing in the newest run that judged them"),
    LIVE_OVERLAP: (("store",), "the overlap a live run reads before its last watermark"),
    RUN_INTERVAL: (("store", "checkpoint"), "how often the checkpoint is run on the store"),
}


class CheckedRun(Protocol):
    """What the families read of a finished run (:class:`kandev_dq.run.check.CheckReport`)."""

    store: str
    #: The checkpoint, or a partial run's checkpoint and part (its families stay apart).
    scope: str
    state: str
    finished_at: str
    duration_s: float
    replica: dict[str, Any] | None
    windows: dict[str, dict[str, Any]]
    results: list[Any]


@dataclass(frozen=True)
class RuleOutcome:
    suite: str
    expectation: str
    ac: str  #: the AC ids, comma-separated
    severity: str
    success: bool
    unexpected: int | None


@dataclass(frozen=True)
class FinishedRun:
    """The part of a run its families show: small, so that a long-running process keeps one
    per checkpoint and store at no cost that grows with the findings' messages."""

    store: str
    checkpoint: str
    state: str
    finished_at: float  #: Unix time
    duration_s: float
    replica_lag_s: float | None
    overlap_s: float | None
    rules: tuple[RuleOutcome, ...]

    @classmethod
    def of(cls, report: CheckedRun) -> FinishedRun:
        return cls(
            store=report.store,
            checkpoint=report.scope,
            state=report.state,
            finished_at=datetime.fromisoformat(report.finished_at).timestamp(),
            duration_s=float(report.duration_s),
            replica_lag_s=_number((report.replica or {}).get("lag_seconds")),
            overlap_s=_overlap_seconds(report.windows),
            rules=_outcomes(report.results),
        )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _overlap_seconds(windows: Mapping[str, Mapping[str, Any]]) -> float | None:
    """The overlap a live run's windows read with (one setting for every suite); None for a
    run reading no window."""
    for window in windows.values():
        minutes = _number(window.get("overlap_minutes"))
        if minutes is not None:
            return minutes * 60
    return None


def _outcomes(results: Iterable[Any]) -> tuple[RuleOutcome, ...]:
    """One outcome per label set: a suite listing one expectation twice (a project's own
    arguments) is one series, failing when either fails, counting what both counted."""
    merged: dict[tuple[str, str, str, str], RuleOutcome] = {}
    for r in results:
        key = (r.suite, r.expectation, ",".join(r.rules), r.severity)
        count = _number(r.unexpected_count)
        unexpected = None if count is None else int(count)
        seen = merged.get(key)
        if seen is not None:
            success = seen.success and bool(r.success)
            if unexpected is None or seen.unexpected is None:
                unexpected = unexpected if seen.unexpected is None else seen.unexpected
            else:
                unexpected += seen.unexpected
        else:
            success = bool(r.success)
        merged[key] = RuleOutcome(*key[:3], r.severity, success, unexpected)
    return tuple(merged.values())


class CheckMetrics(Collector):
    """The families of the latest finished run of each checkpoint on each store, and of each
    store's last attempt, for a registry to collect at any time (thread-safe: runs are
    recorded by one thread while another serves the scrape).

    Register it (``registry.register(metrics)``, or :meth:`registry`), then after each run
    call :meth:`finished` with its report, or :meth:`could_not_run` with the store's shown
    name when the run could not happen: the store's last finished results stay, with the
    time they were taken (``kandev_dq_last_run_timestamp_seconds``), and ``kandev_dq_up``
    goes 0."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, str], FinishedRun] = {}
        self._up: dict[str, bool] = {}
        self._intervals: dict[tuple[str, str], float] = {}

    def finished(self, report: CheckedRun) -> FinishedRun:
        run = FinishedRun.of(report)
        with self._lock:
            self._runs[(run.store, run.checkpoint)] = run
            self._up[run.store] = True
        return run

    def could_not_run(self, store: str) -> None:
        with self._lock:
            self._up[store] = False

    def every(self, store: str, checkpoint: str, seconds: float) -> None:
        """``checkpoint`` runs on ``store`` every ``seconds``."""
        with self._lock:
            self._intervals[(store, checkpoint)] = float(seconds)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            runs, up, intervals = list(self._runs.values()), dict(self._up), dict(self._intervals)
        return families(runs, up, intervals)

    def describe(self) -> Iterator[Metric]:
        """The family names, for a registry's check that no two collectors share one."""
        return (_family(name) for name in FAMILIES)

    def registry(self) -> CollectorRegistry:
        """A registry of its own holding only these families."""
        registry = CollectorRegistry(auto_describe=True)
        registry.register(self)
        return registry


def _family(name: str) -> GaugeMetricFamily:
    labels, documentation = FAMILIES[name]
    return GaugeMetricFamily(name, documentation, labels=list(labels))


def families(
    runs: Iterable[FinishedRun],
    up: Mapping[str, bool],
    intervals: Mapping[tuple[str, str], float] | None = None,
) -> Iterator[Metric]:
    """Every family with samples: each rule's from the newest run that judged it on the
    store, the run times of the latest run of each checkpoint on each store, and a store's
    own families (its state, replica lag, open findings) from its newest run."""
    runs = sorted(runs, key=lambda run: run.finished_at)  # oldest first: the newest wins
    made = {name: _family(name) for name in FAMILIES}

    def add(name: str, labels: Iterable[str], value: float) -> None:
        made[name].add_metric([one_line(label) for label in labels], value)

    for store, readable in sorted(up.items()):
        add(UP, [store], 1 if readable else 0)
    newest: dict[str, FinishedRun] = {}
    overlap: dict[str, float] = {}
    #: Each rule on each store as the newest run judging it left it, under its full-read
    #: suite: a rule a live suite runs is one finding whichever checkpoint judged it last
    #: (a stale nightly failure would keep an alert firing after live saw it recover).
    judged: dict[tuple[str, str, str], tuple[FinishedRun, RuleOutcome]] = {}
    for run in runs:
        newest[run.store] = run
        if run.overlap_s is not None:
            overlap[run.store] = run.overlap_s
        for rule in run.rules:
            shared = SHARED_RULES.get((rule.suite, rule.expectation), (rule.suite,))[0]
            judged[(run.store, shared, rule.expectation)] = (run, rule)
        add(LAST_RUN, [run.store, run.checkpoint], run.finished_at)
        add(RUN_DURATION, [run.store, run.checkpoint], run.duration_s)
    failing: dict[str, list[str]] = {}
    for run, rule in judged.values():
        labels = [run.store, run.checkpoint, rule.suite, rule.expectation, rule.ac, rule.severity]
        add(RULE_SUCCESS, labels, 1 if rule.success else 0)
        if rule.unexpected is not None:
            add(RULE_UNEXPECTED, labels, rule.unexpected)
        if not rule.success:
            failing.setdefault(run.store, []).append(rule.severity)
    for store, run in newest.items():
        for state in STATES:
            add(ACTIVATION_STATE, [store, state], 1 if state == run.state else 0)
        if run.replica_lag_s is not None:
            add(REPLICA_LAG, [store], run.replica_lag_s)
        # A finding stays open until a run that judges its rule again finds it gone.
        open_ = failing.get(store, [])
        for severity in (*SEVERITIES, *sorted(set(open_) - set(SEVERITIES))):
            add(OPEN_FINDINGS, [store, severity], open_.count(severity))
    for store, seconds in overlap.items():
        add(LIVE_OVERLAP, [store], seconds)
    for (store, checkpoint), seconds in sorted((intervals or {}).items()):
        add(RUN_INTERVAL, [store, checkpoint], seconds)
    return (family for family in made.values() if family.samples)


def openmetrics_text(registry: CollectorRegistry) -> str:
    """The registry's families in the OpenMetrics text format (``# EOF`` last), as the
    library writes it; node_exporter's textfile collector and a Pushgateway read it."""
    return generate_latest(registry).decode("utf-8")


def run_exposition(report: CheckedRun) -> str:
    """One finished run's families, as ``check --format openmetrics`` prints them."""
    metrics = CheckMetrics()
    metrics.finished(report)
    return openmetrics_text(metrics.registry())


def could_not_run_exposition(store: str | None) -> str:
    """What ``check --format openmetrics`` prints when the run could not happen: the store
    down (``kandev_dq_up`` 0) where it was named, else no family at all."""
    metrics = CheckMetrics()
    if store is not None:
        metrics.could_not_run(store)
    return openmetrics_text(metrics.registry())
