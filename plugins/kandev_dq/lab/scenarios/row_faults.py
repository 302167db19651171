"""Faults in the rows a writer or the backfill leaves (CONTRACT §2)."""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.contract.instants import parse_stored
from kandev_dq.lab.scenarios.baseline import (
    M_DUP_OLD,
    TC_COMPLETED,
    TC_DUP,
    TC_LIVE_ASYNC,
    TC_LIVE_COMPLETED,
    TC_LIVE_RUNNING,
    TC_STARTED,
    baseline,
    since_anchor,
)
from kandev_dq.lab.scenarios.mutations import drop_execution_not_null, stored_row, update_rows
from kandev_dq.lab.scenarios.registry import registered
from kandev_dq.lab.scenarios.rows import MILLISECOND, SECOND


@registered(
    "zero_total_tokens",
    "A completed live row stores total_tokens 0",
    violates=("AC-7a",),
    severity="error",
)
def _zero_tokens(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", total_tokens=0)


@registered(
    "zero_duration_ms",
    "A completed live row stores duration_ms 0",
    violates=("AC-7a",),
    severity="error",
)
def _zero_duration(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", duration_ms=0)


@registered(
    "zero_tool_use_count_unreported",
    "A backfill row stores tool_use_count 0 where its message reported none",
    violates=("AC-7",),
    severity="error",
)
def _zero_uses(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_STARTED, "backfill", tool_use_count=0)


@registered(
    "async_launched_with_zeros",
    "An async_launched live row stores the frame's zeros instead of NULL",
    violates=("AC-7",),
    severity="error",
)
def _async_zeros(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_ASYNC, "live", total_tokens=0, tool_use_count=0, duration_ms=0)


@registered(
    "empty_string_in_text_column",
    "A live row stores '' instead of NULL in agent_id",
    violates=("§2-empty-text",),
    severity="error",
)
def _empty_text(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_RUNNING, "live", agent_id="")


@registered(
    "negative_metric",
    "A completed live row stores a negative total_tokens",
    violates=("AC-9",),
    severity="error",
)
def _negative(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", total_tokens=-5)


@registered(
    "tool_status_from_agent_status",
    "An async_launched live row whose tool_status was filled from agent_status",
    violates=("AC-12",),
    severity="error",
)
def _conflated(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_ASYNC, "live", tool_status="async_launched")


@registered(
    "backfill_turn_id_null",
    "Backfill rows with a NULL turn_id although their messages have a turn",
    violates=("AC-2a",),
    severity="error",
)
def _turn_null(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, None, "backfill", turn_id=None)


@registered(
    "settled_at_on_non_terminal_row",
    "A live row still in progress has settled_at set",
    violates=("AC-11",),
    severity="error",
)
def _settled_early(engine: sa.Engine) -> None:
    baseline(engine)
    row = stored_row(engine, TC_LIVE_RUNNING)
    settled = parse_stored(row["observed_at"]) + 5 * MILLISECOND
    update_rows(engine, TC_LIVE_RUNNING, "live", settled_at=settled, updated_at=settled)


@registered(
    "updated_at_a_second_before_observed_at",
    "A live row's whole-second updated_at lies in the second before it was observed",
    violates=("§2-timestamps",),
    severity="error",
)
def _updated_before_observed(engine: sa.Engine) -> None:
    # A whole-second value spans its second (CONTRACT §1), so only an inversion past the
    # end of that second is a defect: here the second before the row's observed_at.
    baseline(engine)
    observed = parse_stored(stored_row(engine, TC_LIVE_COMPLETED)["observed_at"])
    swept = (observed - SECOND).strftime("%Y-%m-%d %H:%M:%S")
    update_rows(engine, TC_LIVE_COMPLETED, "live", updated_at=swept)


@registered(
    "settled_at_missing_on_terminal_row",
    "A completed live row has no settled_at",
    violates=("AC-11",),
    severity="error",
)
def _settled_missing(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", settled_at=None)


@registered(
    "execution_id_null",
    "agent_execution_id NOT NULL dropped (table rebuilt on SQLite) and a live row with NULL",
    violates=("AC-30",),
    severity="error",
)
def _execution_null(engine: sa.Engine) -> None:
    baseline(engine)
    drop_execution_not_null(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", agent_execution_id=None)


@registered(
    "execution_id_empty",
    "A live row with agent_execution_id ''",
    violates=("AC-30",),
    severity="error",
)
def _execution_empty(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_LIVE_COMPLETED, "live", agent_execution_id="")


@registered(
    "backfill_row_relabelled_live",
    "A backfill row whose source was changed to 'live'",
    violates=("AC-1",),
    severity="warning",
)
def _relabelled(engine: sa.Engine) -> None:
    baseline(engine)
    update_rows(engine, TC_COMPLETED, "backfill", source="live")


@registered(
    "ac21b_loser_in_backfill_row",
    "The backfill row of a duplicated subagent carries the older (losing) message's values",
    violates=("AC-21b",),
    severity="error",
)
def _loser(engine: sa.Engine) -> None:
    baseline(engine)
    # fmt: off
    update_rows(
        engine, TC_DUP, "backfill",
        id=M_DUP_OLD, observed_at=since_anchor(3600.25), updated_at=since_anchor(3600.3),
        settled_at=None,
        agent_status="async_launched", tool_status="in_progress",
        total_tokens=None, tool_use_count=None, duration_ms=None,
    )
    # fmt: on
