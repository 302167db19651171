"""kandev-dq's Python API: what ``kandev-dq check`` and ``kandev-dq migrate`` do, as calls.

For Python schedulers (an Airflow ``PythonOperator``, a Dagster asset check, a Prefect task)
that would otherwise shell out to the CLI and parse its JSON::

    import kandev_dq

    report = kandev_dq.check(store="postgresql://kandev@db/kandev", checkpoint="nightly")
    report.success                  # the verdict: no error-severity rule failed
    report.to_json()                # exactly what `check --format json` prints
    report.exit_code("warning")     # the CLI's exit code, failing on warnings too

    plan = kandev_dq.migrate(store="./kandev.db", dry_run=True)   # what would run
    plan.to_dict(), plan.exit_code

    kandev_dq.metrics(report)       # a registry: its Prometheus families (--format openmetrics)

Exit codes (:class:`kandev_dq.errors.ExitCode`, as the CLI's): ``OK`` (0) every rule passed,
``FAILED`` (1) a rule of a failing severity failed (or a migration step failed),
``COULD_NOT_RUN`` (2) the run could not happen: the calls raise
:class:`kandev_dq.errors.KandevDqError` then, whose one-line message holds no credential and
whose ``exit_code`` is ``COULD_NOT_RUN``. Both calls open the store as the CLI does:
validation read-only, a dry run read-only, a migration read-write.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # GX and the SQL toolkit load only when a call needs them
    from prometheus_client.registry import CollectorRegistry

    from kandev_dq.gx.checkpoint import Progress
    from kandev_dq.migration.report import MigrationReport
    from kandev_dq.run.check import CheckReport
    from kandev_dq.store.reference import StoreRef


def check(
    store: str | StoreRef | None = None,
    checkpoint: str = "nightly",
    project: str | Path | None = None,
    *,
    records: str | None = None,
    allow_project_code: bool = False,
    progress: Progress | None = None,
    keep_days: int | None = None,
    strict: bool = False,
    store_name: str | None = None,
    suites: list[str] | None = None,
    rules: list[str] | None = None,
) -> CheckReport:
    """Run ``checkpoint`` of ``project`` against ``store``; the report ``--format json`` prints.

    ``store`` is a SQLAlchemy URL, a ``postgresql://`` URL or a SQLite path (default:
    ``$KANDEV_STORE_URL``, then ``~/.kandev/data/kandev.db``); ``project`` a kandev-dq GX project
    (default: the current folder when it is one, else the checkout kandev-dq runs from);
    ``records`` the records database (default: ``$KANDEV_DQ_RECORDS_URL``, then the project's).
    Inputs are vetted before GX loads, so a bad one fails in well under a second; a project
    naming code of its own is refused unless ``allow_project_code`` (docs/reliability.md, 3a).
    ``keep_days`` (default: ``$KANDEV_DQ_RECORDS_KEEP_DAYS``, else none) prunes the records
    database of results and runs older than that many days when the run ends.
    ``report.project_deviations`` names where the project's checkpoint and suites differ from
    kandev-dq's rules; ``strict`` refuses such a project (KandevDqError) before the store is
    opened. ``store_name`` (default: ``$KANDEV_DQ_STORE_NAME``) names the store in the records
    database instead of its identity, which copies of one store share (``--store-name``).
    ``suites`` and ``rules`` (``--suite``, ``--rule``) run only those suites of the checkpoint
    and those rules of them: a partial run, named and recorded as one
    (:mod:`kandev_dq.project.selection`; ``report.selection``).
    """
    from kandev_dq.project.files import reads_live
    from kandev_dq.project.settings import run_settings
    from kandev_dq.run import inputs

    # A bad setting fails before the run, and before GX loads.
    keep_days = run_settings(keep_days, live=reads_live(checkpoint))
    project = Path(project) if project is not None else None
    # The store and the records database are read once here, and the run works on those.
    vetted = inputs.run_inputs(
        project,
        store,
        checkpoint,
        allow_project_code,
        records,
        own_run_only=True,
        strict=strict,
        store_name=store_name,
        suites=suites,
        rules=rules,
    )
    folder = vetted.folder
    with loading_gx():
        from kandev_dq.run.check import run_check

    report = run_check(
        folder,
        vetted.store,
        checkpoint,
        progress,
        allow_project_code=allow_project_code,
        records=vetted.records,
        keep_days=keep_days,
        selection=vetted.selection,
    )
    if report.pruned is not None and report.pruned.result_keys:
        from kandev_dq.report.site import remove_result_pages

        remove_result_pages(folder, report.pruned.result_keys)
    return report


def metrics(*reports: CheckReport) -> CollectorRegistry:
    """A Prometheus registry holding the metric families of these finished runs (each
    store's latest run of each checkpoint wins), as ``check --format openmetrics`` prints one:
    for ``prometheus_client``'s ``push_to_gateway``, ``write_to_textfile`` or
    ``generate_latest``. A process that goes on checking keeps one
    :class:`kandev_dq.report.metrics.CheckMetrics` instead and records each run into it."""
    from kandev_dq.report.metrics import CheckMetrics

    held = CheckMetrics()
    for report in reports:
        held.finished(report)
    return held.registry()


def migrate(
    store: str | None = None,
    *,
    dry_run: bool = False,
    announce: Callable[[str, str], None] | None = None,
) -> MigrationReport:
    """Bring ``store`` to the contract's end state (schema change, then the one-time backfill),
    each step in its own transaction; with ``dry_run``, open it read-only and report the
    state and the steps that would run, writing nothing. ``announce(store, dialect)`` is called
    once the store is open, before anything is written."""
    from kandev_dq.run.inputs import refuse_unusable_store

    ref = refuse_unusable_store(store)
    from kandev_dq.migration import runner
    from kandev_dq.store.access import open_store, require_writable

    opened = open_store(ref, read_only=dry_run)
    try:
        if announce is not None:
            announce(opened.shown, opened.dialect)
        if not dry_run:
            require_writable(opened)
        report = runner.run(opened, dry_run=dry_run)
    finally:
        opened.dispose()
    report.store = opened.shown
    return report


@contextmanager
def loading_gx() -> Iterator[None]:
    """GX's import with the cyclic collector paused: it builds about 300,000 long-lived
    objects, which the collector walked about 700 times as they loaded (GX's import and
    ``get_context`` took 2.7 s instead of 1.8 s). Loaded modules live as long as the process:
    frozen, later collections skip them.
    Once GX is loaded (a second command in one process), nothing is paused or frozen."""
    if "great_expectations" in sys.modules:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
