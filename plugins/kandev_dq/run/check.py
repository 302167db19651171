"""Running a checkpoint against a live store and reading its verdict.

The store is opened read-only, one snapshot is pinned for the whole run, GX runs the
checkpoint (its actions build the data docs), and the results become a typed
:class:`CheckReport`. GX's own ``success`` ignores severity; the verdict here fails only on an
error-severity (GX ``critical``) failure, or on warnings too with ``fail_on="warning"``.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kandev_dq.contract.rule_index import WRITE_ONCE_LEDGER
from kandev_dq.contract.states import explain_state, state_of
from kandev_dq.errors import ExitCode, KandevDqError
from kandev_dq.expectations.base import window_text
from kandev_dq.gx import adapter as gx_adapter
from kandev_dq.gx import checkpoint as runs
from kandev_dq.gx.context import gx_version, load_context
from kandev_dq.gx.results_store import attach_records
from kandev_dq.project.deviations import Deviation, deviations_pointer, project_deviations
from kandev_dq.project.files import DATASOURCE, reads_live
from kandev_dq.project.selection import Selection
from kandev_dq.project.settings import chosen_store, run_settings
from kandev_dq.records import (
    JSON_LEDGER,
    Pruned,
    Records,
    records_ref,
    refuse_the_store,
)
from kandev_dq.records.changes import changes_since, previous_state, rule_key
from kandev_dq.records.identity import records_key
from kandev_dq.records.register import PARTIAL, finish_run, record_run, run_key, run_outcome
from kandev_dq.records.results import RuleResult, counted, failing_severities, rule_result
from kandev_dq.run.versions import kandev_dq_version
from kandev_dq.sql.dialect import server_version
from kandev_dq.sql.keys import read_keys
from kandev_dq.store.access import open_store
from kandev_dq.store.observe import observe_subagents
from kandev_dq.store.reference import StoreRef
from kandev_dq.store.replication import Standby
from kandev_dq.store.snapshot import pinned
from kandev_dq.text import command_options
from kandev_dq.verdicts import VERDICTS
from kandev_dq.verdicts.activation import BASELINE_DISCLOSURE


@dataclass
class CheckReport:
    store: str
    dialect: str
    checkpoint: str
    success: bool
    state: str
    keys: dict[str, str | None]
    #: What the state means, why a store is in it, and what moves it on (AC-24c).
    state_explanation: str = ""
    #: The store's name in the records database: what the store says it is
    #: (``postgresql:<system identifier>/<database>``, ``sqlite:<device>:<inode>``), or the
    #: user's ``--store-name``. Every spelling of one store shares its records.
    store_identity: str = ""
    #: The records database (no credentials) and when this store's write-once record began.
    records: str = ""
    baseline_taken_at: str = ""
    #: The run that took it (its run name): a reader of a pass can tell a baseline this machine
    #: recorded from one that came with the records database.
    baseline_run: str = ""
    results: list[RuleResult] = field(default_factory=list)
    docs_index: str | None = None
    run_name: str = ""
    run_time: str = ""  #: RFC 3339, UTC (``Z``)
    duration_s: float = 0.0
    #: When the run ended, records written and pruned (RFC 3339, UTC): a monitor's last run.
    finished_at: str = ""
    #: Each suite's own duration in the run (JUnit's per-suite ``time``).
    suite_seconds: dict[str, float] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    #: Against the last run of this checkpoint on this store: its run time, the rules failing
    #: now that did not then (``new``), and those that failed then and pass now (``resolved``).
    changes: dict[str, Any] = field(default_factory=dict)
    #: Each live suite's window: from when (None: in full, and why), this run's watermark,
    #: and which reads an index served and which fell back to a scan.
    windows: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The store is a PostgreSQL hot standby: its replay when the run's snapshot began (the lag
    #: behind its primary, :class:`~kandev_dq.store.replication.Standby`); None on a primary.
    replica: dict[str, Any] | None = None
    #: What the automatic prune at the run's end dropped and kept (``--keep-days``,
    #: ``$KANDEV_DQ_RECORDS_KEEP_DAYS``); None when no prune was asked for.
    pruned: Pruned | None = None
    #: Where the project's checkpoint and suites differ from kandev-dq's rules: the verdict is
    #: the project's (:mod:`kandev_dq.project.deviations`; empty when they do not).
    project_deviations: list[Deviation] = field(default_factory=list)
    #: The options of ``kandev-dq explain`` naming this run's store, project and records
    #: database (with the user needed to connect, never a password): a failed rule's
    #: :meth:`explain_command` is ready to copy.
    explain_options: str = ""
    #: A partial run's suites and rules (``check --suite``/``--rule``); None: the whole
    #: checkpoint ran.
    selection: dict[str, list[str]] | None = None

    @property
    def scope(self) -> str:
        """The checkpoint; of a partial run, the checkpoint and its part as the run's name gives
        them (``nightly.partial-suite.rows``): its metrics are never read as the checkpoint's."""
        if self.selection is None:
            return self.checkpoint
        return self.checkpoint + PARTIAL + Selection.from_json(self.checkpoint, self.selection).name

    def failures(self, severity: str) -> list[RuleResult]:
        return [r for r in self.results if not r.success and r.severity == severity]

    def explain_command(self, expectation: str) -> str:
        """The command listing what ``expectation`` counted on this run's store."""
        return f"kandev-dq explain {expectation} {self.explain_options} --run"

    def write_once_baseline(self) -> str | None:
        """What the text report says when the write-once rules pass against a baseline taken
        before this run: when, and by which run (AC-24). A pass means "no key changed since
        then", so the reader sees which record it rests on. None otherwise."""
        ledger_rules = [  # a project's own expectation (--allow-project-code) has no verdict
            r
            for r in self.results
            if r.expectation in VERDICTS
            and WRITE_ONCE_LEDGER in VERDICTS[r.expectation].judged_metrics
        ]
        predates = any(r.expectation == BASELINE_DISCLOSURE for r in ledger_rules)
        if not (predates and all(r.success for r in ledger_rules)):
            return None
        return (
            f"write-once: every key as first recorded, against the baseline taken "
            f"{self.baseline_taken_at} by run {self.baseline_run} (records: {self.records})"
        )

    def exit_code(self, fail_on: str = "error") -> ExitCode:
        failing = [r for s in failing_severities(fail_on) for r in self.failures(s)]
        return ExitCode.FAILED if failing else ExitCode.OK

    @property
    def counts(self) -> dict[str, int]:
        """Failed rules by severity, and the rules that passed."""
        return counted(self.results)

    def to_json(self) -> dict[str, Any]:
        report = asdict(self) | {"counts": self.counts}
        if report["pruned"] is not None:  # what was dropped is counted, not listed
            del report["pruned"]["result_keys"]
        return report


def run_check(
    project: Path,
    target: str | StoreRef | None,
    checkpoint: str,
    progress: runs.Progress | None = None,
    *,
    allow_project_code: bool = False,
    records: str | StoreRef | None = None,
    keep_days: int | None = None,
    context_for: Callable[[str], Any] | None = None,
    pages_on_change: bool = False,
    selection: Selection | None = None,
) -> CheckReport:
    """Validate ``target`` with ``checkpoint`` (or the part of it ``selection`` names: a
    partial run, named and recorded as one); never writes to the store.

    The run is named for its checkpoint and store (:func:`kandev_dq.records.register.run_name`, no
    credentials), reports to ``progress`` suite by suite, and notifies when configured. Its key
    ledger, register and results go to the records database (``records``, else the project's,
    :func:`kandev_dq.records.records_url`): refused when it is the store, exit 2 when it
    cannot be opened, both before the store is opened. When the run has finished, results and
    runs older than ``keep_days`` (else ``$KANDEV_DQ_RECORDS_KEEP_DAYS``) are pruned
    (:meth:`~kandev_dq.records.Records.prune`: never the ledger, nor the run alerts on
    change compare the next one with). ``context_for`` gives the GX context for the store's
    password-free URL (a process checking again and again keeps them); else it is loaded.
    ``pages_on_change``: the data docs are built only when the verdict moved
    (:attr:`~kandev_dq.records.changes.Changes.changed`), not on every run.
    """
    started = time.perf_counter()
    # A bad setting is a one-line error before anything is opened.
    keep_days = run_settings(keep_days, live=reads_live(checkpoint))
    deviations = project_deviations(project, checkpoint)
    # The store and the records database, each read once (already, when the API vetted them).
    store = chosen_store(target)
    chosen_records = records_ref(project, records, allow_project_code=allow_project_code)
    refuse_the_store(chosen_records, store)
    with Records(chosen_records) as ledger:
        ledger.import_json_ledger(Path(project) / JSON_LEDGER)
        report = _run_with_records(
            project,
            store,
            checkpoint,
            progress,
            ledger,
            allow_project_code,
            context_for,
            pages_on_change,
            selection,
        )
        report.project_deviations = deviations
        report.explain_options = command_options(
            (
                ("--store", store.connect_form),
                ("--store-name", store.name),
                ("--project", str(Path(project).resolve())),
                ("--records", chosen_records.connect_form),
            )
        )
        if keep_days is not None:
            report.pruned = ledger.prune(keep_days)
        report.duration_s = round(time.perf_counter() - started, 3)
        report.finished_at = rfc3339(dt.datetime.now(dt.UTC))
        return report


def _run_with_records(
    project: Path,
    target: StoreRef,
    checkpoint: str,
    progress: runs.Progress | None,
    records: Records,
    allow_project_code: bool,
    context_for: Callable[[str], Any] | None = None,
    pages_on_change: bool = False,
    selection: Selection | None = None,
) -> CheckReport:
    started = time.perf_counter()
    store = open_store(target, read_only=True)
    try:
        if context_for is not None:
            context = context_for(store.display_url)
        else:
            context = load_context(
                project,
                store_url=store.display_url,
                allow_project_code=allow_project_code,
                own_run_only=True,  # a check writes its own run's pages only
            )
        attach_records(context, records)
        if checkpoint not in {c.name for c in context.checkpoints.all()}:
            known = ", ".join(sorted(c.name for c in context.checkpoints.all()))
            raise KandevDqError(f"no checkpoint {checkpoint!r} in {project} (known: {known})")
        with (
            gx_adapter.reading_with(context, DATASOURCE, store.engine_options) as gx_engine,
            pinned(store.engine, reader=gx_engine) as run,
        ):
            # The store's name in the records, read in the run's own snapshot session.
            identity = records_key(records, store.ref, run.connection)
            run_id = runs.new_run_id(checkpoint, identity, selection)
            run.run_name, run.store, run.records_key = run_id.run_name, store.ref, identity
            keys = read_keys(run.connection)
            server = server_version(run.connection)
            amended = observe_subagents(run.connection).clauses_1_to_3_hold
            standby = run.clock.standby if run.clock is not None else None
            # Before GX runs: the data docs it builds during the run show this record.
            chosen = selection.to_json() if selection is not None else None
            record_run(
                records,
                run_id,
                checkpoint,
                identity,
                store.shown,
                store.dialect,
                keys,
                amended,
                chosen,
            )
            # The write-once rules take the key ledger from the records database themselves
            # (kandev_dq.gx.write_once), as on a checkpoint run through GX's own API.
            suite_seconds: dict[str, float] = {}
            outcome = runs.run_checkpoint(
                context,
                checkpoint,
                run_id,
                progress,
                suite_seconds=suite_seconds,
                pages=not pages_on_change,
                selection=selection,
            )
        baseline = records.baseline(identity)
        report = CheckReport(
            store=store.shown,
            dialect=store.dialect,
            checkpoint=checkpoint,
            success=True,
            state=state_of(keys),
            keys=keys,
            state_explanation=explain_state(state_of(keys), amended=amended),
            results=[
                rule_result(r, suite=v.suite_name)
                for v in outcome.run_results.values()
                for r in v.results
            ],
            store_identity=identity,
            records=records.shown,
            baseline_taken_at=baseline.taken_at if baseline else "",
            baseline_run=baseline.run_name if baseline else "",
            suite_seconds=suite_seconds,
            selection=chosen,
        )
        report.replica = standby.to_json() if standby is not None else None
        report.windows = live_windows(outcome)
        report.success = not report.failures("error")
        report.docs_index = _docs_index(project)
        report.run_name = run_id.run_name
        report.run_time = rfc3339(run_id.run_time)
        report.versions = {
            "kandev_dq": kandev_dq_version(),
            "great_expectations": gx_version(),
            "store_server": server,
        }
        # Against the last finished run of this checkpoint on this store (the same run name),
        # and, for a rule a live suite runs, the last run on the store that judged it.
        previous = previous_state(
            records,
            run_id.run_name,
            identity,
            {r.suite for r in report.results},
            before=run_key(run_id),
        )
        changes = changes_since(previous, report.results, report.run_time)
        for r in report.results:
            key = rule_key(r.suite, r.expectation)
            r.failing_since, r.new = changes.since.get(key), key in changes.new
        report.changes = changes.to_json()
        if pages_on_change and changes.changed:
            runs.build_pages(context, checkpoint, outcome)
        runs.notify(context, outcome, store.shown, changes)
        finish_run(
            records,
            run_id,
            run_outcome(report.results, report.success, time.perf_counter() - started),
        )
        return report
    finally:
        store.dispose()


def live_windows(outcome) -> dict[str, dict[str, Any]]:
    """The window each live suite of a checkpoint result read, as its rules carry it."""
    windows: dict[str, dict[str, Any]] = {}
    for validation in outcome.run_results.values():
        for result in validation.results:
            window = ((result.result or {}).get("details") or {}).get("live_window")
            if window:
                windows.setdefault(validation.suite_name, window)
    return windows


def window_lines(report: CheckReport) -> list[str]:
    """How each live suite's window reads in the text report (the store's index names among
    it, cut to a bounded length: the caller escapes the line), after the standby's lag where
    the store is one."""
    replica = (
        [f"replica: read on {Standby.from_json(report.replica).text()}"] if report.replica else []
    )
    return replica + [
        f"{suite} {window_text({k: v for k, v in window.items() if k != 'replica'})}"
        for suite, window in report.windows.items()
    ]


def _docs_index(project: Path) -> str | None:
    index = Path(project).resolve() / "uncommitted" / "data_docs" / "local_site" / "index.html"
    return str(index) if index.is_file() else None


def rfc3339(moment: dt.datetime) -> str:
    """``2026-11-30T19:04:36.042122Z``: UTC, microseconds, ``Z``."""
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def verdict_line(report: CheckReport) -> str:
    errors, warnings = len(report.failures("error")), len(report.failures("warning"))
    word = "PASSED" if report.success else "FAILED"
    # The run's name and time: a log appending nightly runs reads which verdict is which.
    return (
        f"{word}: checkpoint {report.checkpoint} run {report.run_name} at {report.run_time} "
        f"on {report.store} ({report.dialect}), "
        f"state {report.state}; {errors} error(s), {warnings} warning(s) "
        f"of {len(report.results)} rules{_partial(report)}"
        f"{deviations_pointer(report.project_deviations)}"
    )


def _partial(report: CheckReport) -> str:
    """What a partial run ran, after its rule count (names from the project: the caller
    escapes the line)."""
    if report.selection is None:
        return ""
    return f" ({Selection.from_json(report.checkpoint, report.selection).text()})"


def deviation_lines(report: CheckReport) -> list[str]:
    """Each project deviation as the text report lists it (names from a project file: the
    caller escapes the line)."""
    return [f"deviation: {deviation.text()}" for deviation in report.project_deviations]
