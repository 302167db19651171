"""Every contact kandev-dq has with Great Expectations beyond its public calls, in one place.

GX 1.24 offers no public hook for three things a ``kandev-dq check`` run needs:

* **Reading the store with kandev-dq's connections.** The data source's URL
  (``${KANDEV_STORE_URL}``) is password-free; :func:`reading_with` gives the data source
  kandev-dq's own connection recipe as SQLAlchemy's ``creator`` (the data source's ``kwargs``
  reach ``create_engine``): no GX setting, config variable or environment variable holds the
  password, only the connect function GX calls. It returns the engine GX's execution engine
  then uses, the one the run's pinned snapshot is registered against
  (:func:`kandev_dq.store.snapshot.pinned`). GX builds that execution engine once per data
  source and reuses it while the data source's settings stay the same.
* **Hearing each suite's result as it is stored** (progress): :func:`on_each_result` wraps the
  validation-results store's ``store_validation_results``, which GX's ``ValidationDefinition``
  calls once per suite, in checkpoint order.
* **Running an action outside a checkpoint** (notifications): :func:`run_action` sets the
  action's private ``_data_context``, as GX's ``Checkpoint._run_actions`` does, before running it;
  :func:`action_fires` asks GX's own ``should_notify`` whether it will send, with the run's
  highest failed severity as the action's private helper reads it (and "some rule failed" as
  the success GX's severity rule expects, the run's own success being kandev-dq's verdict);
  :func:`silencing_actions` keeps GX's action log lines (Teams' holds the webhook URL) of a
  sending thread off stderr.
* **Finding the project a validation runs in** (the key ledger on a checkpoint run through GX's
  own API): :func:`validating_context` follows the execution engine's active batch to its data
  source and that data source's context, all public properties.
* **Naming what a suite judges in the data docs**: a suite's asset names one table it reads.
  :class:`KandevValidationResultsPageRenderer` and
  :class:`KandevExpectationSuitePageRenderer` override the protected classmethods GX's page
  renderers build the header, title and notes with (``tests/test_data_docs.py`` pins them).

``tests/test_gx_adapter.py`` pins the GX behaviour each of these relies on: a GX upgrade that
changes it breaks there, loudly, and only this module needs to follow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from great_expectations.render.renderer import (
    ExpectationSuitePageRenderer,
    ValidationResultsPageRenderer,
)
from great_expectations.render.renderer.site_index_page_renderer import SiteIndexPageRenderer

from kandev_dq.contract.rule_index import SUITE_TABLES
from kandev_dq.run.results import failed_by_severity, suite_verdict

#: How a suite's verdict (:func:`kandev_dq.run.results.suite_verdict`) reads in the data docs:
#: its word and its Font Awesome icon. Only ``failed`` reads as a failure (the exit code's rule).
SUITE_STATUS = {
    "passed": ("Succeeded", "fa-check-circle text-success"),
    "warning": ("Succeeded with warnings", "fa-exclamation-triangle text-warning"),
    "info": ("Succeeded with info findings", "fa-info-circle text-info"),
    "failed": ("Failed", "fa-times text-danger"),
}


@contextmanager
def reading_with(context, datasource: str, engine_options: dict[str, Any]) -> Iterator[sa.Engine]:
    """Make GX's SQL data source ``datasource`` create its engine with ``engine_options`` (the
    store's ``creator``, and its DB-API module); yield that engine, disposed when the block
    ends."""
    source = context.data_sources.get(datasource)
    source.kwargs = {**source.kwargs, **engine_options}
    engine = source.get_execution_engine().engine
    try:
        yield engine
    finally:
        engine.dispose()


@contextmanager
def on_each_result(context, report: Callable[[Any], None]) -> Iterator[None]:
    """Call ``report(suite_validation_result)`` right after GX stores each suite's result.

    A failing ``report`` propagates: the caller decides whether a display problem may stop a
    run (``kandev-dq``'s progress never does)."""
    store = context.validation_results_store
    store_results = store.store_validation_results

    def store_and_report(suite_validation_result, *args: Any, **kwargs: Any):
        stored = store_results(suite_validation_result, *args, **kwargs)
        report(suite_validation_result)
        return stored

    store.store_validation_results = store_and_report
    try:
        yield
    finally:
        del store.store_validation_results  # the class's own method again


def validating_context(execution_engine) -> Any:
    """The data context whose checkpoint or validation definition is running on
    ``execution_engine`` (the batch being validated names its data source, which names its
    context); None when GX validates a batch that belongs to no context."""
    batch = execution_engine.batch_manager.active_batch
    datasource = getattr(batch, "datasource", None)
    return getattr(datasource, "data_context", None)


def run_action(action, context, checkpoint_result) -> Any:
    """Run a GX validation action on a finished checkpoint result, as a checkpoint would."""
    from great_expectations.checkpoint.actions import ActionContext

    action._data_context = context
    return action.run(checkpoint_result=checkpoint_result, action_context=ActionContext())


def action_fires(action, checkpoint_result) -> bool:
    """Whether GX's notification ``action`` sends for this result, by GX's own rule: its
    ``notify_on`` against the run's success and highest failed severity (no ``notify_on``:
    always)."""
    from great_expectations.checkpoint.actions import should_notify

    notify_on = getattr(action, "notify_on", None)
    if notify_on is None:
        return True
    max_severity = action._get_max_severity_failure_from_checkpoint_result(checkpoint_result)
    # The run's success is kandev-dq's verdict (errors only); GX's severity rule needs a run
    # that failed at all to send a warning or info alert.
    any_failed = any(
        not result.success
        for suite in checkpoint_result.run_results.values()
        for result in suite.results
    )
    return should_notify(success=not any_failed, notify_on=notify_on, max_severity=max_severity)


def pagerduty_available() -> bool:
    """GX's PagerDuty action sends through ``pypd``, an optional package GX stubs when absent."""
    from great_expectations.compatibility.not_imported import NotImported
    from great_expectations.compatibility.pypd import pypd

    return not isinstance(pypd, NotImported)


class _DropThreadRecords(logging.Filter):
    def __init__(self, thread_prefix: str) -> None:
        super().__init__()
        self.thread_prefix = thread_prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.threadName.startswith(self.thread_prefix)


def silencing_actions(thread_prefix: str) -> None:
    """Drop the records GX's actions log from threads named ``thread_prefix...``.

    GX logs a failed send itself, at ERROR for email (``str`` of the SMTP error) and with the
    HTTP error's text, URL included, for Teams; the caller reports the failure in its own words.
    Installed once and kept: a sender that outlives its wait is still silenced."""
    gx_logger = logging.getLogger("great_expectations.checkpoint.actions")
    if not any(
        isinstance(f, _DropThreadRecords) and f.thread_prefix == thread_prefix
        for f in gx_logger.filters
    ):
        gx_logger.addFilter(_DropThreadRecords(thread_prefix))


class KandevValidationResultsPageRenderer(ValidationResultsPageRenderer):
    """GX's validation page, its "Data asset" naming the tables the suite judges (every suite
    runs against the one batch ``kandev_meta``, which GX would show for all of them)."""

    @classmethod
    def _render_validation_header(cls, validation_results):
        header = super()._render_validation_header(validation_results)
        params = header.subheader.string_template["params"]
        tables = SUITE_TABLES.get(validation_results.suite_name)
        if tables:
            params["data_asset_name"] = ", ".join(tables)
        # GX's "Status" fails a suite on any failed rule, an info disclosure too.
        word, icon = SUITE_STATUS[suite_verdict(failed_by_severity(validation_results))]
        params["success"] = word
        params["html_success_icon"] = f'<i class="fas {icon}" aria-hidden="true"></i>'
        return header

    def _determine_page_title(self, run_name, run_time, data_asset_name, expectation_suite_name):
        # The breadcrumb: suite, run and time; the batch name would only repeat "kandev_meta".
        return super()._determine_page_title(run_name, run_time, "", expectation_suite_name)


class KandevExpectationSuitePageRenderer(ExpectationSuitePageRenderer):
    """GX's suite page, without "across 0 columns" for a suite whose rules take no column."""

    @classmethod
    def _render_expectation_suite_notes(cls, expectations):
        notes = super()._render_expectation_suite_notes(expectations)
        if any("column" in e.kwargs for e in expectations.expectation_configurations):
            return notes
        count = len(expectations.expectations)
        tables = SUITE_TABLES.get(expectations.name)
        judged = f", judging {', '.join(tables)}" if tables else ""
        notes.text[0] = f"This Expectation suite currently contains {count} Expectations{judged}."
        return notes


class KandevSiteIndexTableRenderer(SiteIndexPageRenderer):
    """GX's index table, each result's status cell showing its suite's verdict.

    A link dict may carry ``kandev_verdict`` (:func:`kandev_dq.run.results.suite_verdict`); GX's
    own cell and filter text read only ``validation_success``, which fails on any failed rule.
    """

    @classmethod
    def _generate_validation_results_link_table(cls, index_links_dict):
        table = super()._generate_validation_results_link_table(index_links_dict)
        links = index_links_dict.get("validations_links", [])
        for row, link in zip(table.table_data, links, strict=True):
            verdict = link.get("kandev_verdict")
            if verdict is None:
                continue
            word, icon = SUITE_STATUS[verdict]
            cell = row["validation_success"]
            cell.string_template["styling"]["params"]["validation_success"]["classes"] = [
                "fas",
                *icon.split(),
                "ge-failed-icon" if verdict == "failed" else "ge-success-icon",
                f"kandev-status-{verdict}",
            ]
            cell.string_template["styling"]["params"]["validation_success"]["attributes"] = {
                "title": word
            }
            row["_validation_success_text"] = word
        return table
