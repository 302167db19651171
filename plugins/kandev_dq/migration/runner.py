"""The subagent-context migration runner: CONTRACT §3–§5, on SQLite and PostgreSQL.

Every run performs the same steps, in this order (AC-33c):

1. ``kandev_meta`` — make sure the key/value table exists.
2. ``create_task_session_subagents`` — a store that predates the feature gets the table in the
   amended shape (AC-17).
3. ``amend_task_session_subagents`` — a pre-amendment table is upgraded to the amended shape
   (AC-33): on SQLite a table rebuild in one transaction, on PostgreSQL ``ADD COLUMN`` plus
   swapping the two-column UNIQUE (looked up by its column set) for the three-column one.
4. ``subagent_context_execution_since`` — written whenever AC-33 clauses 1–3 are *observed* in
   the live schema (AC-33b), never because a rebuild fired.
5. ``backfill_task_session_subagents`` — only once the AC-33 end state holds (clauses 1–4
   observed, ``execution_since`` present: AC-33c) and unless both backfill keys are present
   (AC-24d): one ``INSERT … SELECT`` (AC-21 … AC-23b) and both keys, in one transaction:
   ``MAX(created_at)`` first, then the insert, then ``capture_since`` sampled, then the keys.

Errors are swallowed as upstream's runner does (AC-20): a failing step is logged at WARNING as
``migration failed name=<step> error=<reason>``, the remaining steps follow the contract, and
the :class:`~kandev_dq.migration.report.MigrationReport` says what happened. This module runs
the steps in order; the steps themselves live in :mod:`kandev_dq.migration.schema_steps` (1–4)
and :mod:`kandev_dq.migration.backfill` (5), their transactions and the run lock in
:mod:`kandev_dq.migration.transactions`, the dry run in :mod:`kandev_dq.migration.plan`. Every
module logs under ``kandev_dq.migration``.

Test seams: every step is looked up in this module's namespace when it runs, so a test can
monkeypatch one here to raise; or it can attach a ``before_cursor_execute`` listener to
``store.engine`` that raises on a matching statement.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kandev_dq.migration.backfill import backfill_subagents
from kandev_dq.migration.plan import plan
from kandev_dq.migration.report import (
    STEP_AMEND,
    STEP_BACKFILL,
    STEP_CREATE,
    STEP_EXECUTION_SINCE,
    STEP_LOCK,
    STEP_META,
    MigrationReport,
    Outcome,
    Status,
    StepResult,
)
from kandev_dq.migration.schema_steps import (
    amend_subagents_table,
    create_subagents_table,
    ensure_kandev_meta,
    write_execution_since,
)
from kandev_dq.migration.transactions import MigrationRun, reading, reset, run_lock
from kandev_dq.sql.keys import read_keys
from kandev_dq.store.access import Store
from kandev_dq.store.observe import observe_subagents

log = logging.getLogger("kandev_dq.migration.runner")


# --- entry point -----------------------------------------------------------------------------


def run(store: Store, *, dry_run: bool = False) -> MigrationReport:
    """Run (or, with ``dry_run``, plan) the subagent-context migrations; never raises for a step.

    ``store`` is opened with ``open_store(target, read_only=False)`` (a dry run also works on a
    read-only store).
    """
    report = MigrationReport(dialect=store.dialect, dry_run=dry_run)
    if dry_run:
        plan(store, report)
        log.info("%s", report.render())
        return report
    with store.engine.connect() as conn:
        ctx = MigrationRun(conn=conn, dialect=store.dialect)
        try:
            with run_lock(ctx):
                _run_steps(ctx, report)
        except Exception as exc:  # noqa: BLE001 - the runner swallows errors (AC-20)
            reset(conn)
            _record(report, ctx, StepResult(STEP_LOCK, Status.FAILED, _reason(exc)))
        try:
            with reading(conn):
                report.shape = observe_subagents(conn)
                report.keys = read_keys(conn)
        except Exception as exc:  # noqa: BLE001 - the report is best effort after a failure
            log.warning("could not observe the end state: %s", _reason(exc))
    return report


def _run_steps(ctx: MigrationRun, report: MigrationReport) -> None:
    # Steps are looked up by name at call time so that tests can monkeypatch any of them.
    _attempt(report, ctx, STEP_META, lambda: ensure_kandev_meta(ctx))
    _attempt(report, ctx, STEP_CREATE, lambda: create_subagents_table(ctx))
    _attempt(report, ctx, STEP_AMEND, lambda: amend_subagents_table(ctx))
    _attempt(report, ctx, STEP_EXECUTION_SINCE, lambda: write_execution_since(ctx))
    _attempt(report, ctx, STEP_BACKFILL, lambda: backfill_subagents(ctx))
    backfill = report.step(STEP_BACKFILL)
    if backfill is not None and "rows" in backfill.detail:
        report.backfill_rows = backfill.detail["rows"]


def _attempt(
    report: MigrationReport, ctx: MigrationRun, name: str, step: Callable[[], Outcome]
) -> StepResult:
    try:
        outcome = step()
    except Exception as exc:  # noqa: BLE001 - swallowed and reported (AC-20)
        reset(ctx.conn)
        result = StepResult(name, Status.FAILED, _reason(exc))
    else:
        result = StepResult(name, outcome.status, outcome.reason, outcome.detail)
    _record(report, ctx, result)
    return result


def _record(report: MigrationReport, ctx: MigrationRun, result: StepResult) -> None:
    report.steps.append(result)
    ctx.results[result.name] = result
    if result.status is Status.FAILED:
        log.warning("migration failed name=%s error=%s", result.name, result.reason)
    else:
        log.info("migration %s name=%s %s", result.status, result.name, result.reason)


def _reason(exc: BaseException) -> str:
    """One line: the driver's message when there is one, never the statement or parameters."""
    inner = getattr(exc, "orig", None) or exc
    lines = str(inner).strip().splitlines()
    text = lines[0] if lines else ""
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__
