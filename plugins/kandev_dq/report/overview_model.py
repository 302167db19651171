"""The store overview's facts: the latest runs, their suites and the store they read.

What the data docs' overview page (:mod:`kandev_dq.report.overview_page`) and the index's
summary show, read from the validation results store as plain JSON through GX's public store
calls (``list_keys``, ``tuple_to_key``, the backend's ``get``), and from the records database:
the run register, the latest suites of the store, the write-once baseline and accepted resets,
the timeline and the changes since the last run of the same checkpoint. Each run's project
deviations are read from its results' ``meta``, where the results store put them.

The validation results carry neither the store a run read nor the raw key values.
``kandev-dq check`` records both from the run's own snapshot before GX runs the checkpoint
(:mod:`kandev_dq.records.register`); the overview reads that record, during the run's own build and
any later rebuild (``kandev-dq docs``) alike. Without a record it falls back on what the results
themselves say, read as every command reads them (:func:`kandev_dq.records.results.rule_result`).
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from kandev_dq.contract.instants import ACTIVATION_KEYS
from kandev_dq.gx.results_store import records_of
from kandev_dq.project.deviations import Deviation, stored_deviations
from kandev_dq.project.selection import Selection
from kandev_dq.records.changes import Changes, changes_since, previous_state
from kandev_dq.records.register import load_register, run_key
from kandev_dq.records.results import RuleResult, failed_by_severity, rule_result, suite_verdict
from kandev_dq.report.history import Timeline, timeline

logger = logging.getLogger(__name__)

#: Runs the overview lists, newest first: a build reads this many, however long the history
#: (a run every 5 minutes records 2,000 a week), so a run costs what the 10th did.
RUNS_SHOWN = 10
#: Validation results the index lists and a full build renders, newest first (GX's own
#: ``validation_results_limit``): the results of the overview's runs, three suites each.
#: ``history`` lists more, and the records keep every run until pruned.
INDEX_RESULTS_LIMIT = 3 * RUNS_SHOWN
ACTIVATION_SUITE = "activation"
HEALTH_SUITE = "writer_health"


@dataclass
class SuiteRun:
    """One stored validation result, as plain JSON."""

    suite: str
    run_key: str
    run_time: datetime
    page: str
    data: dict[str, Any]

    @property
    def results(self) -> list[dict[str, Any]]:
        return list(self.data.get("results") or [])

    @property
    def checkpoint_id(self) -> str | None:
        return (self.data.get("meta") or {}).get("checkpoint_id")

    @cached_property
    def rules(self) -> list[RuleResult]:
        """Each result as every command reads it."""
        return [rule_result(r) for r in self.results]

    def failures(self, severity: str) -> int:
        return sum(1 for r in self.rules if not r.success and r.severity == severity)

    @property
    def verdict(self) -> str:
        """The suite's verdict by the exit code's rule (:func:`suite_verdict`)."""
        return suite_verdict(failed_by_severity(self.data))


@dataclass
class Run:
    """The results of one checkpoint run (one run id), with what the register knows of it."""

    run_key: str
    run_time: datetime
    checkpoint: str | None
    suites: list[SuiteRun] = field(default_factory=list)
    record: dict[str, Any] | None = None

    @property
    def store(self) -> str | None:
        return (self.record or {}).get("store")

    @property
    def checked(self) -> str:
        """Its checkpoint as the pages name it, with what a partial run ran."""
        checkpoint = self.checkpoint or "(no checkpoint)"
        chosen = (self.record or {}).get("selection")
        if not chosen:
            return checkpoint
        return f"{checkpoint} ({Selection.from_json(checkpoint, chosen).text()})"

    @property
    def deviations(self) -> list[Deviation]:
        """Where the run's project differed from kandev-dq's rules, as its results carry it
        (stored with them on either path a checkpoint runs by)."""
        return stored_deviations(s.data.get("meta") for s in self.suites)

    def failures(self, severity: str) -> int:
        return sum(s.failures(severity) for s in self.suites)


@dataclass
class Overview:
    runs: list[Run]
    activation: SuiteRun | None = None
    health: SuiteRun | None = None
    #: The latest run's store over its last runs (:func:`kandev_dq.report.history.timeline`).
    timeline: Timeline | None = None
    #: The latest run's store in the records: its write-once baseline and accepted resets.
    baseline: Any = None
    accepts: list[Any] = field(default_factory=list)
    #: The latest run against the last run of its checkpoint on its store (new, since, resolved).
    changes: Changes | None = None

    @property
    def latest(self) -> Run | None:
        return self.runs[0] if self.runs else None


def collect_overview(context) -> Overview:
    """The overview of the latest run and its store's runs (one store per page), read from the
    validation results store (JSON only)."""
    store = context.validation_results_store
    records = records_of(context)
    # The newest runs' results only, read through an index: a run's docs build costs the
    # same after 2,000 runs as after 10.
    window = (
        [store.tuple_to_key(k) for k in records.results_of_newest_runs(RUNS_SHOWN)]
        if records is not None
        else store.list_keys()  # an older project's results in files: GX's own listing
    )
    recorded: dict[str, dict[str, Any] | None] = {}

    def record(name: str) -> dict[str, Any] | None:
        # Read run by run, as runs are shown: a build's cost does not grow with the history.
        if name not in recorded:
            recorded[name] = load_register(records, [name]).get(name)
        return recorded[name]

    keys = _newest_first(window)
    latest_record = record(run_key(keys[0].run_id)) if keys else None
    if records is not None and (latest_record or {}).get("store_identity"):
        # One store per page: the runs listed are the latest run's store's, as its timeline.
        own = records.results_of_newest_runs(RUNS_SHOWN, latest_record["store_identity"])
        keys = _newest_first([store.tuple_to_key(k) for k in own])

    checkpoints = _checkpoint_names(context)
    loaded: dict[Any, SuiteRun | None] = {}

    def load(key) -> SuiteRun | None:
        if key not in loaded:
            data = stored_json(store, key)
            if data is None:
                logger.warning("validation result %s is unreadable: skipped", key.to_tuple())
                loaded[key] = None
            else:
                loaded[key] = SuiteRun(
                    suite=key.expectation_suite_identifier.name,
                    run_key=run_key(key.run_id),
                    run_time=key.run_id.run_time,
                    page=_result_page(key),
                    data=data,
                )
        return loaded[key]

    runs: dict[str, Run] = {}
    for key in keys:
        name = run_key(key.run_id)
        if name not in runs and len(runs) == RUNS_SHOWN:
            break
        suite_run = load(key)
        if suite_run is None:
            continue
        run = runs.get(name)
        if run is None:
            run = runs[name] = Run(
                name,
                key.run_id.run_time,
                checkpoints.get(suite_run.checkpoint_id or ""),
                record=record(name),
            )
        run.suites.append(suite_run)
    for run in runs.values():
        run.suites.sort(key=lambda s: s.suite)
    overview = Overview(list(runs.values()))
    latest = overview.latest
    wanted_store = latest.store if latest else None
    identity = ((latest.record or {}) if latest else {}).get("store_identity")

    def newest(suite: str) -> SuiteRun | None:
        if records is not None and identity:  # however old: a checkpoint may lack the suite
            found = records.newest_of_suite(suite, identity)
            return load(store.tuple_to_key(found)) if found is not None else None
        for key in keys:
            if key.expectation_suite_identifier.name != suite:
                continue
            if (record(run_key(key.run_id)) or {}).get("store") != wanted_store:
                continue
            return load(key)
        return None

    if latest is not None and latest.record and records is not None:
        # As `check` marks them: against the last finished run of the same name before it (a
        # rule a live suite runs: the last run on the store that judged it).
        results = [rule_result(r, suite=s.suite) for s in latest.suites for r in s.results]
        previous = previous_state(
            records,
            latest.record["run_name"],
            latest.record["store_identity"],
            {s.suite for s in latest.suites},
            before=latest.run_key,
        )
        overview.changes = changes_since(previous, results, latest.record["run_time"])
    overview.activation = newest(ACTIVATION_SUITE)
    overview.health = newest(HEALTH_SUITE)
    if records is not None and identity:
        overview.baseline = records.baseline(identity)
        overview.accepts = records.accepts(identity)
        overview.timeline = timeline(records, identity)
    return overview


def _newest_first(keys: list) -> list:
    """Validation result keys, profiling runs left out, newest run first."""
    kept = [k for k in keys if "profiling" not in (k.run_id.run_name or "")]
    kept.sort(key=lambda k: (k.run_id.run_time, k.expectation_suite_identifier.name), reverse=True)
    return kept


def stored_json(store, key) -> dict[str, Any] | None:
    """One validation result as the JSON the results store holds (None: unreadable)."""
    try:
        raw = store.store_backend.get(store.key_to_tuple(key))
        return json.loads(raw) if isinstance(raw, (str, bytes)) else dict(raw)
    except Exception:  # noqa: BLE001 - one unreadable result must not hide the rest
        return None


def _checkpoint_names(context) -> dict[str, str]:
    try:
        return {str(c.id): c.name for c in context.checkpoints.all() if c.id}
    except Exception:  # noqa: BLE001 - the names are a convenience; ids still identify runs
        logger.warning("could not list checkpoints: runs are shown without their names")
        return {}


def _result_page(key) -> str:
    parts = ["validations", *key.expectation_suite_identifier.name.split(".")]
    parts += [*key.run_id.to_tuple(), key.batch_identifier]
    return urllib.parse.quote("/".join(parts) + ".html")


def by_type(suite_run: SuiteRun | None, fragment: str) -> RuleResult | None:
    if suite_run is None:
        return None
    return next((r for r in suite_run.rules if fragment in r.expectation), None)


def observed_of(rule: RuleResult | None) -> Any:
    return rule.observed_value if rule is not None else None


def amended(overview: Overview) -> bool | None:
    """Whether the latest run saw AC-33 clauses 1-3 hold (None when it was not recorded)."""
    latest = overview.latest
    return latest.record.get("amended") if latest is not None and latest.record else None


def key_view(overview: Overview) -> tuple[str | None, dict[str, dict[str, Any]], str]:
    """The latest run's state and keys, and where they come from.

    The register (the run's own snapshot) knows the raw values. Without it, the activation
    result's observed values give the state, each key's kind and precision, and the raw
    values of capture_since and backfill_through when both are instants.
    """
    latest = overview.latest
    if latest is not None and latest.record and latest.record.get("keys"):
        return latest.record.get("state"), latest.record["keys"], "this run's snapshot"
    activation = overview.activation
    if activation is None:
        return None, {}, "no record"
    kinds = observed_of(by_type(activation, "keys_to_be_well_formed"))
    precision = observed_of(by_type(activation, "subsecond_precision"))
    order = observed_of(by_type(activation, "backfill_through_not_after_capture_since"))
    state = observed_of(by_type(activation, "activation_state_to_be_in_set"))
    kinds = kinds if isinstance(kinds, dict) else {}
    precision = precision if isinstance(precision, dict) else {}
    raw_values = {}
    if isinstance(order, dict):
        raw_values = {
            "subagent_context_backfill_through": order.get("backfill_through"),
            "subagent_context_capture_since": order.get("capture_since"),
        }
    keys: dict[str, dict[str, Any]] = {}
    for name in ACTIVATION_KEYS:
        kind = kinds.get(name)
        if kind is None:
            continue
        entry: dict[str, Any] = {"kind": kind}
        if kind == "sentinel":
            entry["raw"] = ""
        elif raw_values.get(name) is not None:
            entry["raw"] = raw_values[name]
        if name in precision:
            entry["precision"] = precision[name]
        keys[name] = entry
    source = f"the activation result of {when_text(activation.run_time)}"
    return (state if isinstance(state, str) else None), keys, source


def when_text(moment: datetime | None) -> str:
    """An instant as the overview shows it (UTC, to the second)."""
    if moment is None:
        return "—"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
