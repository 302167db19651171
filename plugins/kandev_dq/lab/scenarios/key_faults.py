"""Faults in the activation keys (AC-24 and its clauses)."""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    Instant,
    go_sqlite_text,
    parse_key,
)
from kandev_dq.lab import upstream
from kandev_dq.lab.scenarios.baseline import (
    S3,
    T1,
    baseline,
    instant_of,
    key_instant,
    read_keys,
    rfc3339_seconds,
)
from kandev_dq.lab.scenarios.mutations import add_messages, set_key
from kandev_dq.lab.scenarios.registry import registered
from kandev_dq.lab.scenarios.rows import (
    MILLISECOND,
    SECOND,
    subagent_message,
    tool_call,
    uid,
    writing,
)
from kandev_dq.migration import backfill as migration_backfill


def _go_space(value: str) -> str:
    """A key in a column's storage form (``2026-07-30 01:39:37.271235+00:00``)."""
    return go_sqlite_text(parse_key(value).micro)


@registered(
    "upstream_activated_without_execution_since",
    "A store upstream's build activated: amended table, both backfill keys, no execution_since",
    violates=("AC-24b",),
    severity="error",
)
def _upstream_without_execution_since(engine: sa.Engine) -> None:
    # Upstream's build never writes execution_since (CONTRACT §3, upstream departure): the
    # AC-33b self-heal case, which the check explains and `kandev-dq migrate` completes.
    upstream.build_upstream_store(engine, seed=0)


@registered(
    "capture_since_go_space_string",
    "capture_since written in a column's storage form, not RFC3339",
    violates=("AC-24e",),
    severity="error",
)
def _capture_go_space(engine: sa.Engine) -> None:
    baseline(engine)  # the same instant, in the wrong text form
    set_key(engine, CAPTURE_SINCE, _go_space(read_keys(engine)[CAPTURE_SINCE] or ""))


@registered(
    "backfill_through_go_space_string",
    "backfill_through written in a column's storage form, not RFC3339",
    violates=("AC-24e",),
    severity="error",
)
def _through_go_space(engine: sa.Engine) -> None:
    baseline(engine)  # the same instant, in the wrong text form
    set_key(engine, BACKFILL_THROUGH, _go_space(read_keys(engine)[BACKFILL_THROUGH] or ""))


@registered(
    "second_precision_capture_by_amended_build",
    "A build claiming Amendment 1 wrote capture_since at second precision",
    violates=("AC-24",),
    severity="error",
)
def _second_precision_amended(engine: sa.Engine) -> None:
    def truncate(engine: sa.Engine) -> None:
        capture = key_instant(engine, CAPTURE_SINCE).micro
        whole = capture.replace(microsecond=0) + SECOND  # after execution_since, as this build runs
        set_key(engine, CAPTURE_SINCE, rfc3339_seconds(whole))

    baseline(engine, after_migration=truncate)


@registered(
    "second_precision_backfill_through_by_amended_build",
    "The amended build wrote backfill_through with the old rfc3339Timestamp helper (seconds)",
    violates=("AC-24",),
    severity="error",
    known_gap="backfill_through's value (a message's created_at) is compared with "
    "execution_since as if it were the instant it was written: it is always earlier, so a "
    "second-precision backfill_through always reads as legacy (info only)",
)
def _through_seconds(engine: sa.Engine) -> None:
    def truncate(engine: sa.Engine) -> None:
        through = key_instant(engine, BACKFILL_THROUGH).micro
        set_key(engine, BACKFILL_THROUGH, rfc3339_seconds(through))

    baseline(engine, after_migration=truncate)


@registered(
    "second_precision_keys_by_amended_build",
    "The amended build wrote both keys with the old helpers: truncated to the second",
    violates=("AC-24",),
    severity="error",
)
def _keys_truncated(engine: sa.Engine) -> None:
    def truncate(engine: sa.Engine) -> None:
        # capture_since is sampled ms after execution_since: truncated, it lands in
        # execution_since's second (here always, so that the verdict does not depend on timing).
        execution = key_instant(engine, EXECUTION_SINCE).micro
        through = key_instant(engine, BACKFILL_THROUGH).micro
        set_key(engine, CAPTURE_SINCE, rfc3339_seconds(execution))
        set_key(engine, BACKFILL_THROUGH, rfc3339_seconds(through))

    baseline(engine, after_migration=truncate)


@registered(
    "capture_since_at_transaction_start",
    "capture_since sampled at transaction start: a message backfilled during the scan is after it",
    violates=("AC-24",),
    severity="error",
)
def _capture_at_start(engine: sa.Engine) -> None:
    def sampled_early(engine: sa.Engine) -> None:
        execution = key_instant(engine, EXECUTION_SINCE).micro
        capture = key_instant(engine, CAPTURE_SINCE).micro
        started = execution + (capture - execution) / 3  # the backfill's transaction began
        committed = execution + 2 * (capture - execution) / 3  # a message landed in its scan
        # fmt: off
        add_messages(engine, subagent_message(
            uid("m-in-scan"), S3, T1, uid("turn-4"), committed, tool_call("InScan"),
            tool_status="completed", status="completed", description="Committed mid-scan",
        ))
        # fmt: on
        with writing(engine) as conn:  # the same INSERT … SELECT saw it
            conn.execute(migration_backfill.backfill_statement(conn.dialect.name))
        set_key(engine, CAPTURE_SINCE, instant_of(started).rfc3339nano())
        set_key(engine, BACKFILL_THROUGH, instant_of(committed).rfc3339nano())

    baseline(engine, after_migration=sampled_early)


@registered(
    "backfill_through_after_insert",
    "backfill_through taken after the INSERT: it claims a message that has no row",
    violates=("AC-24d",),
    severity="error",
)
def _through_after_insert(engine: sa.Engine) -> None:
    def over_claim(engine: sa.Engine) -> None:
        late = key_instant(engine, CAPTURE_SINCE).micro - MILLISECOND  # between INSERT and MAX
        # fmt: off
        add_messages(engine, subagent_message(
            uid("m-after-insert"), S3, T1, uid("turn-4"), late, tool_call("AfterInsert"),
            tool_status="completed", status="completed", description="Committed too late",
        ))
        # fmt: on
        set_key(engine, BACKFILL_THROUGH, instant_of(late).rfc3339nano())

    baseline(engine, after_migration=over_claim)


@registered(
    "backfill_through_from_retry_rows",
    "A retry derived backfill_through from what it inserted: '' over old backfill rows",
    violates=("AC-24f",),
    severity="error",
)
def _through_from_retry(engine: sa.Engine) -> None:
    baseline(engine, after_migration=lambda e: set_key(e, BACKFILL_THROUGH, ""))


@registered(
    "partial_pair_capture_only",
    "capture_since without backfill_through (the old three-statement writer)",
    violates=("AC-24d",),
    severity="error",
)
def _capture_only(engine: sa.Engine) -> None:
    baseline(engine)
    set_key(engine, BACKFILL_THROUGH, None)


@registered(
    "partial_pair_through_only",
    "backfill_through without capture_since",
    violates=("AC-24d",),
    severity="error",
)
def _through_only(engine: sa.Engine) -> None:
    baseline(engine)
    set_key(engine, CAPTURE_SINCE, None)


def _resample_capture(engine: sa.Engine) -> None:
    capture = key_instant(engine, CAPTURE_SINCE)
    set_key(
        engine, CAPTURE_SINCE, Instant(capture.micro + MILLISECOND, capture.nanos).rfc3339nano()
    )


@registered(
    "key_rewritten_between_runs",
    "capture_since overwritten 1 ms later between two checks (an upsert, not write-once)",
    violates=("AC-24",),
    severity="error",
    between_runs=_resample_capture,
)
def _rewritten(engine: sa.Engine) -> None:
    baseline(engine)


@registered(
    "key_deleted_between_runs",
    "capture_since deleted between two checks",
    violates=("AC-24",),
    severity="error",
    between_runs=lambda engine: set_key(engine, CAPTURE_SINCE, None),
)
def _deleted(engine: sa.Engine) -> None:
    baseline(engine)
