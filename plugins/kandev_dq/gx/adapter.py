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
* **Naming the store as ``--store`` does on GX's own path**: :func:`store_url_from_environment`
  registers a configuration provider on the context that reads ``$KANDEV_STORE_URL`` from the
  process environment in any form ``--store`` takes (a SQLite path, a libpq string,
  ``postgresql://``) and gives the data source its SQLAlchemy URL, refused in ``check``'s
  words; a runtime environment naming the variable ranks above it, as GX ranks them. Only a
  context loaded through GX's API gets it: kandev-dq passes the store it reads itself.
* **Finding the project a validation runs in** (the key ledger on a checkpoint run through GX's
  own API): :func:`validating_context` follows the execution engine's active batch to its data
  source and that data source's context, all public properties.
* **Knowing whether an action sent** (notifications): :func:`delivered` reads the return value
  GX's notification actions give when they have sent, which no GX type declares.
* **Keeping results in the records database** (:mod:`kandev_dq.gx.results_store`):
  :class:`ValidationResultsStore` keeps GX's class name, which GX's config requires of a
  results store it is to keep (``DataContextConfig._init_stores``), reads keys back from the
  run-time format GX writes them in (``RunIdentifier.to_tuple``) in place of GX's own parse,
  lists a bounded window of keys to GX's page builders, stores a suite's ``success`` as
  kandev-dq's verdict, and adds to each result's ``meta`` its run's project deviations
  (:mod:`kandev_dq.project.deviations`), read from the project at the ``root_directory`` GX gives
  its stores, so the data docs name them whichever path ran the checkpoint.
* **Telling a docs build which pages to render** (:func:`building_pages`): GX's
  ``update_data_docs`` action calls the site builder with no argument of kandev-dq's, so the
  run says which pages it wants through a context variable the builder reads
  (:func:`pages_to_build`; :mod:`kandev_dq.report.gx_site`, the data docs' own seam).

``tests/test_gx_adapter.py`` pins the GX behaviour each of these relies on: a GX upgrade that
changes it breaks there, loudly, and only this module needs to follow. The data docs' site
builder, views and page and index renderers touch GX's site machinery in
:mod:`kandev_dq.report.gx_site`, the report layer's one seam (pinned in ``tests/test_gx_site.py``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.store import validation_results_store as gx_results
from great_expectations.data_context.types.resource_identifiers import (
    ExpectationSuiteIdentifier,
    ValidationResultIdentifier,
)

from kandev_dq.contract.rule_index import RULE_INDEX
from kandev_dq.contract.severity import Severity
from kandev_dq.gx.native_runs import name_and_record
from kandev_dq.project.deviations import RESULT_META_KEY, result_deviations
from kandev_dq.project.vetting import URL_VARIABLE, vet_on_gx_path
from kandev_dq.records.results import rule_result, suite_success
from kandev_dq.store.reference import connection_url


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


def store_url_from_environment(context) -> None:
    """Let ``$KANDEV_STORE_URL`` name the store in ``context`` as ``--store`` does (module
    docstring); asked each time GX reads its configuration, so a changed variable is read."""
    from great_expectations.core.config_provider import _AbstractConfigurationProvider

    class StoreUrlFromEnvironment(_AbstractConfigurationProvider):
        def get_values(self) -> dict[str, str]:
            given = os.environ.get(URL_VARIABLE)
            if not given or URL_VARIABLE in (context.runtime_environment or {}):
                return {}
            return {URL_VARIABLE: connection_url(given)}

    context.config_provider.register_provider(StoreUrlFromEnvironment())


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
    always). The severities are kandev-dq's reading of each result (:func:`rule_result`), so a
    count past ``warn_if`` alone is the warning it is reported as, not its entry's severity."""
    from great_expectations.checkpoint.actions import should_notify
    from great_expectations.expectations.metadata_types import FailureSeverity

    notify_on = getattr(action, "notify_on", None)
    if notify_on is None:
        return True
    failed = {
        read.severity
        for suite in checkpoint_result.run_results.values()
        for read in map(rule_result, suite.results)
        if not read.success
    }
    highest = min(failed, key=Severity.rank_of, default=None)
    max_severity = FailureSeverity(Severity(highest).gx) if highest in set(Severity) else None
    # The run's success is kandev-dq's verdict (errors only); GX's severity rule needs a run
    # that failed at all to send a warning or info alert.
    return should_notify(success=not failed, notify_on=notify_on, max_severity=max_severity)


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


#: What each GX action returns once it has sent (it returns a falsy value, or None, when not).
_DELIVERED = {
    "slack": ("slack_notification_result", "Slack notification succeeded."),
    "microsoft": ("microsoft_teams_notification_result", "Microsoft Teams notification succeeded."),
    "email": ("email_result", "success"),
    "pagerduty": ("pagerduty_alert_result", "success"),
    "opsgenie": ("opsgenie_alert_result", True),
}


def delivered(action_type: str, result: dict) -> bool:
    """Whether a GX action of ``action_type`` that returned ``result`` sent (an action of a
    type not listed sent unless it raised)."""
    key, sent = _DELIVERED.get(action_type, (None, None))
    return key is None or result.get(key) == sent


# --- the validation results store ----------------------------------------------------------------

#: How GX writes a run time into a result key (``RunIdentifier.to_tuple``).
RUN_TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"


class ValidationResultsStore(gx_results.ValidationResultsStore):
    """GX's validation results store, reading its keys back without re-parsing them.

    It keeps GX's class name: GX's config replaces a project's results store with an in-memory
    one unless some store's ``class_name`` is exactly ``ValidationResultsStore``
    (``DataContextConfig._init_stores``), and results would then be silently lost.

    GX turns every stored key into an identifier on each ``list_keys`` (a docs build lists them
    six times) and parses each run time with dateutil: with a long history that alone grew a
    check's docs build by seconds. Keys are identical either way: the run time GX itself wrote
    is read with its own format, and each key is built once per store instance.
    """

    def __init__(self, store_backend=None, runtime_environment=None, store_name=None) -> None:
        vet_on_gx_path((runtime_environment or {}).get("root_directory"))
        super().__init__(
            store_backend=store_backend,
            runtime_environment=runtime_environment,
            store_name=store_name,
        )
        self._keys: dict[tuple, Any] = {}
        self._listing: list | None = None
        #: The project GX loaded this store for (None: a context without a folder).
        self._root = (runtime_environment or {}).get("root_directory")

    def list_keys(self) -> list:
        """GX's listing of every stored key, unless a bounded window is in force
        (:meth:`listing_only`)."""
        if self._listing is not None:
            return list(self._listing)
        return super().list_keys()

    @contextmanager
    def listing_only(self, keys: list) -> Iterator[None]:
        """List only ``keys`` meanwhile: GX's page builders list the whole store to render a
        few pages of it, a cost growing with the history; kandev-dq gives them the window."""
        self._listing = list(keys)
        try:
            yield
        finally:
            self._listing = None

    def store_validation_results(self, suite_validation_result, *args: Any, **kwargs: Any):
        """Store a suite's result with GX's ``success`` set by kandev-dq's verdict (fail on
        error-severity rules only): GX's own ignores severity, so an info disclosure would fail
        a run through GX's API, its data docs status and its notifications, where
        ``kandev-dq check`` passes. GX derives the checkpoint's success from these afterwards.
        A result of an expectation that is not kandev-dq's (GX's built-ins) keeps its counts
        only (:func:`counts_only`): GX lists the store's values whole and unescaped.
        The run's project deviations go in its ``meta``: the data docs read them per run.
        A run GX named itself (through GX's API) is named and recorded as ``kandev-dq check``
        records its runs (:mod:`kandev_dq.gx.native_runs`)."""
        suite_validation_result.success = suite_success(suite_validation_result)
        for result in suite_validation_result.results:
            if result.expectation_config.type not in RULE_TYPES:
                result.result = counts_only(result.result)
        if self._root:
            meta = suite_validation_result.meta
            meta[RESULT_META_KEY] = [
                d.to_json()
                for d in result_deviations(
                    Path(self._root), meta.get("checkpoint_id"), suite_validation_result.suite_name
                )
            ]
            records = getattr(self.store_backend, "records", None)
            if records is not None:
                run_id = suite_validation_result.meta.get("run_id")
                name_and_record(records, Path(self._root), suite_validation_result, run_id)
        return super().store_validation_results(suite_validation_result, *args, **kwargs)

    def tuple_to_key(self, tuple_):
        key = self._keys.get(tuple_)
        if key is None:
            key = self._keys[tuple_] = _result_identifier(tuple_) or super().tuple_to_key(tuple_)
        return key


#: kandev-dq's own expectation types: their results carry values cut in SQL (in bytes).
RULE_TYPES = frozenset(rule.expectation for rule in RULE_INDEX)
#: What a result of GX's own expectations keeps: its counts, and an observed value cut short.
COUNTS = frozenset(
    {
        "element_count",
        "missing_count",
        "missing_percent",
        "unexpected_count",
        "unexpected_percent",
        "unexpected_percent_total",
        "unexpected_percent_nonmissing",
    }
)
SHOWN_CHARACTERS = 200


def counts_only(result: dict[str, Any] | None) -> dict[str, Any]:
    """A GX built-in's result without the store values it lists: its unexpected values and
    their indexes (a hostile store's 50 MB value, a script tag) are neither stored, nor shown
    in the data docs or a report; a store value as observed value (a text column's maximum) is
    cut short, and a list of values is counted."""
    kept = {key: value for key, value in (result or {}).items() if key in COUNTS}
    if "observed_value" in (result or {}):
        kept["observed_value"] = _short((result or {})["observed_value"])
    return kept


def _short(value: object) -> object:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple | set | dict):
        return f"{len(value)} values"
    return str(value)[:SHOWN_CHARACTERS]


def _result_identifier(tuple_) -> ValidationResultIdentifier | None:
    if len(tuple_) < 4:
        return None
    try:
        when = dt.datetime.strptime(tuple_[-2], RUN_TIME_FORMAT).replace(tzinfo=dt.UTC)
    except ValueError:
        return None  # not written by GX's own format: GX reads it its way
    return ValidationResultIdentifier(
        ExpectationSuiteIdentifier.from_tuple(tuple_[:-3]),
        RunIdentifier(tuple_[-3], when),
        tuple_[-1],
    )


# --- the data docs -------------------------------------------------------------------------------

#: Which pages a data docs build renders: ``all`` (any build outside a checkpoint run),
#: ``results`` (a checkpoint action's build: the given results' pages only) or ``run-wide``
#: (the one build after the checkpoint: overview, index, assets).
#: "none": a run whose pages are built later, or never (a live cycle whose verdict held).
DocsPages = Literal["all", "results", "run-wide", "none"]
_DOCS_PAGES: ContextVar[DocsPages] = ContextVar("kandev_dq_docs_pages", default="all")


@contextmanager
def building_pages(pages: DocsPages) -> Iterator[None]:
    """Have every data docs build in this block render ``pages`` only (:data:`DocsPages`).

    GX's ``update_data_docs`` action builds the site from inside ``Checkpoint.run`` with no
    argument kandev-dq could pass; a context variable reaches the builder through it, in this
    thread and context alone."""
    token = _DOCS_PAGES.set(pages)
    try:
        yield
    finally:
        _DOCS_PAGES.reset(token)


def pages_to_build() -> DocsPages:
    """The pages the data docs build running now renders (:func:`building_pages`)."""
    return _DOCS_PAGES.get()
