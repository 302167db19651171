"""How ``kandev-dq check`` runs a GX checkpoint: the run's name, its progress, its notifications.

**Run names.** Every run is tagged through GX's own run identifier,
``checkpoint.run(run_id=RunIdentifier(run_name=...))``, named as the run register names it
(:func:`kandev_dq.records.register.run_name`). (GX 1.24 keeps a run's suite parameters only
inside the expectations that use them, never the asset's batch metadata, and rejects unknown
batch parameters: the run name is the one run-level field that round-trips.)

**The key ledger.** The write-once rules (AC-24) read and update it in the records database
themselves (:mod:`kandev_dq.gx.write_once`): a run needs no suite parameters, and a checkpoint
run through GX's own API judges write-once exactly as ``kandev-dq check`` does.

**Progress.** The checkpoint is run by GX as it is. kandev-dq only watches GX store each
validation result (one per suite, in checkpoint order) and reports it; GX's own tqdm bars are
switched off for the run, whatever the project's ``progress_bars`` say.

**Data docs.** GX's ``update_data_docs`` action builds the whole site once per validation
result (five times for ``pre_release``). During a checkpoint run each of those builds renders
its own result's pages only; the pages covering every run (the overview with its timeline,
the index, the assets) are built once, after the checkpoint, for the same sites
(:func:`kandev_dq.gx.adapter.building_pages`).

**Notifications** use GX's own action classes (Slack, Microsoft Teams, email, API, PagerDuty,
Opsgenie; :mod:`kandev_dq.gx.notifications` builds them from the environment or the project's
config variables). They are off unless a channel's settings are set. The actions are built for
this run only and run against its result after the checkpoint, the way GX runs a checkpoint's
own actions; they are never added to the saved checkpoint, so no webhook, key or password is
written to ``checkpoints/*.json``.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from kandev_dq.errors import KandevDqError
from kandev_dq.gx import adapter as gx_adapter
from kandev_dq.gx import notifications
from kandev_dq.project.selection import Selection
from kandev_dq.records.changes import ON_CHANGE, Changes, notifies
from kandev_dq.records.register import run_name
from kandev_dq.records.results import failed_by_severity

logger = logging.getLogger(__name__)


class Progress(Protocol):
    """What a checkpoint run reports while it runs (see :mod:`kandev_dq.run.progress`)."""

    def started(self, checkpoint: str, suites: list[tuple[str, int]]) -> None: ...

    def suite_done(self, suite: str, failed: dict[str, int]) -> None: ...

    def finished(self) -> None: ...


# --- running a checkpoint ----------------------------------------------------------------------


def new_run_id(checkpoint: str, identity: str, selection: Selection | None = None):
    """The GX run identifier of a run starting now, named for the store it validates (and the
    part of the checkpoint it runs)."""
    from great_expectations.core.run_identifier import RunIdentifier

    part = selection.name if selection is not None else None
    return RunIdentifier(
        run_name=run_name(checkpoint, identity, part), run_time=dt.datetime.now(dt.UTC)
    )


DOCS_ACTION = "update_data_docs"


def run_checkpoint(
    context,
    checkpoint: str,
    run_id,
    progress: Progress | None = None,
    suite_seconds: dict[str, float] | None = None,
    *,
    pages: bool = True,
    selection: Selection | None = None,
):
    """Run ``checkpoint`` as GX does; report its progress, and each suite's duration into
    ``suite_seconds`` (from the previous suite's result stored, or the run's start, to its own:
    GX times only the whole checkpoint). Without ``pages``, its data docs actions build
    nothing (GX refuses a checkpoint changed in memory), for :func:`build_pages` to build them
    later, or never. With ``selection``, only its suites and rules run (:func:`_run_part`)."""
    from great_expectations.data_context.types.base import ProgressBarsConfig

    from kandev_dq.gx import suites_store

    # In memory only (never saved): no tqdm bars, whatever the project's yml says.
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    with suites_store.choosing_rules(selection.rules if selection is not None else ()):
        gx_checkpoint = context.checkpoints.get(checkpoint)
        definitions = _definitions(gx_checkpoint, selection)
        with (
            _reporting(context, gx_checkpoint.name, definitions, progress, suite_seconds),
            gx_adapter.building_pages("results" if pages else "none"),
        ):
            if selection is None:
                result = gx_checkpoint.run(run_id=run_id)
            else:
                result = _run_part(context, gx_checkpoint, definitions, run_id)
    if pages:
        _build_run_wide_pages(context, gx_checkpoint)
    return result


def _definitions(gx_checkpoint, selection: Selection | None) -> list:
    """The validation definitions the run validates: the checkpoint's, or those of the
    selection's suites, each holding its chosen rules (loaded through kandev-dq's
    expectations store, :func:`~kandev_dq.gx.suites_store.choosing_rules`)."""
    definitions = list(gx_checkpoint.validation_definitions)
    if selection is None:
        return definitions
    chosen = []
    for definition in definitions:
        types = [e.expectation_type for e in definition.suite.expectations]
        if selection.rules and any(t not in selection.rules for t in types):
            raise KandevDqError(  # a project whose yml names GX's own expectations store
                "--rule needs kandev-dq's expectations store (kandev_dq.gx.suites_store), "
                "which this project's great_expectations.yml does not name"
            )
        if selection.takes_suite(definition.suite.name, types):
            chosen.append(definition)
    return chosen


def _run_part(context, gx_checkpoint, definitions: list, run_id):
    """A partial run: each chosen validation definition run as the checkpoint runs it (its
    result stored under the run's id, the checkpoint's id in its meta), then the checkpoint's
    actions, data docs first, on the result, as :meth:`Checkpoint.run` would. (GX refuses to run a
    checkpoint changed in memory, and a saved one would change the project.)"""
    from great_expectations.checkpoint.checkpoint import CheckpointResult
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    run_results = {}
    for definition in definitions:
        validated = definition.run(
            checkpoint_id=gx_checkpoint.id, result_format=gx_checkpoint.result_format, run_id=run_id
        )
        key = ValidationResultIdentifier(
            expectation_suite_identifier=ExpectationSuiteIdentifier(name=definition.suite.name),
            run_id=run_id,
            batch_identifier=validated.batch_id,
        )
        run_results[key] = validated
    result = CheckpointResult(
        run_id=run_id, run_results=run_results, checkpoint_config=gx_checkpoint
    )
    docs_first = sorted(gx_checkpoint.actions, key=lambda a: getattr(a, "type", "") != DOCS_ACTION)
    for action in docs_first:
        gx_adapter.run_action(action, context, result)
    return result


def build_pages(context, checkpoint: str, result) -> None:
    """The data docs pages of a run made without them (:func:`run_checkpoint`): its results'
    pages, then the run-wide ones, on the sites its docs actions name."""
    gx_checkpoint = context.checkpoints.get(checkpoint)
    names = _docs_sites(gx_checkpoint)
    if names == []:
        return
    try:
        with gx_adapter.building_pages("results"):
            context.build_data_docs(
                site_names=names, resource_identifiers=list(result.run_results), build_index=False
            )
    except Exception:  # noqa: BLE001 - GX's own action logs a docs failure and goes on
        logger.exception("kandev-dq: the data docs pages of the run could not be built")
    _build_run_wide_pages(context, gx_checkpoint)


def _docs_actions(gx_checkpoint) -> list:
    return [a for a in gx_checkpoint.actions if getattr(a, "type", "") == DOCS_ACTION]


def _docs_sites(gx_checkpoint) -> list[str] | None:
    """The sites the checkpoint's docs actions update: None for every site (an action naming
    none), [] when it has no such action."""
    actions = _docs_actions(gx_checkpoint)
    if any(not a.site_names for a in actions):
        return None
    return [name for a in actions for name in a.site_names]


def _build_run_wide_pages(context, gx_checkpoint) -> None:
    """The overview, index and assets of the sites the checkpoint's docs actions updated,
    once; like GX's action, a failure is logged and never fails the run."""
    names = _docs_sites(gx_checkpoint)
    if names == []:
        return
    try:
        with gx_adapter.building_pages("run-wide"):
            context.build_data_docs(site_names=names)
    except Exception:  # noqa: BLE001 - GX's own action logs a docs failure and goes on
        logger.exception("kandev-dq: the data docs index and overview could not be built")


@contextmanager
def _reporting(
    context,
    checkpoint: str,
    definitions: list,
    progress: Progress | None,
    suite_seconds: dict[str, float] | None,
) -> Iterator[None]:
    """Report each suite as GX stores its result (GX runs them in checkpoint order)."""
    if progress is None and suite_seconds is None:
        yield
        return
    last = [time.perf_counter()]

    def report(suite_validation_result) -> None:
        now = time.perf_counter()
        if suite_seconds is not None:
            suite_seconds[suite_validation_result.suite_name] = round(now - last[0], 3)
        last[0] = now
        if progress is None:
            return
        try:
            progress.suite_done(
                suite_validation_result.suite_name, failed_by_severity(suite_validation_result)
            )
        except Exception:  # noqa: BLE001 - a display problem never breaks a run
            logger.debug("progress report failed", exc_info=True)

    suites = [(v.suite.name, len(v.suite.expectations)) for v in definitions]
    if progress is not None:
        progress.started(checkpoint, suites)
    try:
        with gx_adapter.on_each_result(context, report):
            yield
    finally:
        if progress is not None:
            progress.finished()


# --- notifications -----------------------------------------------------------------------------

SENDER_THREAD = "kandev-dq-notify"


def notify(context, checkpoint_result, store: str = "", changes: Changes | None = None) -> None:
    """Run the configured notification actions on a finished run; never fails the run.

    A channel notifying on change (the default) is told of a run only when ``changes`` (this
    run against the last one of its checkpoint on its store) holds a new failure at a severity it
    reports, or a recovery: then one of its actions reports the run whatever it found. Each
    action that GX says fires is run the way a checkpoint runs its own, in a thread given
    :data:`SEND_TIMEOUT_S`; a send that fails or hangs is one warning line on stderr, naming
    the channel and the kind of failure, never the URL, key or password.
    """
    gx_adapter.silencing_actions(SENDER_THREAD)
    for channel in notifications.notification_channels(context, store):
        actions = channel.actions
        if changes is not None and channel.when == ON_CHANGE:
            change = notifies(changes, channel.severities)
            if change is None:
                continue  # a standing failure, or nothing this channel reports
            if change == "recovery":  # GX's notify-on rules report failed runs only
                actions = [_reporting_every_run(actions[0])]
        for action in actions:
            if not gx_adapter.action_fires(action, checkpoint_result):
                continue
            problem = _send(action, context, checkpoint_result)
            if problem:
                logger.warning(
                    "kandev-dq: warning: the %s notification was not sent: %s",
                    channel.name,
                    problem,
                )


def _reporting_every_run(action):
    """A copy of a GX notification action that reports a run whatever it found."""
    return action.copy(update={"notify_on": "all"}) if hasattr(action, "notify_on") else action


def _send(action, context, checkpoint_result) -> str | None:
    """Run one action; what went wrong, in words holding no secret, or None."""
    outcome: dict[str, Any] = {}

    def send() -> None:
        try:
            outcome["result"] = gx_adapter.run_action(action, context, checkpoint_result)
        except Exception as exc:  # noqa: BLE001 - reported by the caller, the run stands
            outcome["error"] = exc

    # GX posts and mails without a timeout: a receiver that never answers must not hang cron.
    sender = threading.Thread(target=send, name=SENDER_THREAD, daemon=True)
    sender.start()
    sender.join(notifications.SEND_TIMEOUT_S)
    if sender.is_alive():
        return f"no answer within {notifications.SEND_TIMEOUT_S:.0f} s"
    if "error" in outcome:
        return _failure(outcome["error"])
    if not gx_adapter.delivered(action.type, outcome.get("result") or {}):
        return "the receiver refused it or could not be reached"
    return None


def _failure(exc: BaseException) -> str:
    """An exception as a few words: its class and an HTTP status, never its text (it may
    hold the URL, and so a webhook's token)."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is None and exc.args and isinstance(exc.args[0], int):  # pypd's errors
        status = exc.args[0]
    return f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "")
