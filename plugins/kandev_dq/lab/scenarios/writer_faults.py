"""Faults in writer health: a live writer that stopped (AC-26)."""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.lab.scenarios.baseline import SL, TL, baseline
from kandev_dq.lab.scenarios.mutations import add_after_live, delete_messages
from kandev_dq.lab.scenarios.registry import registered
from kandev_dq.lab.scenarios.rows import subagent_message, tool_call, uid


@registered(
    "stopped_writer",
    "The live writer stopped: subagent messages after capture_since have no rows",
    violates=("AC-26",),
    severity="error",
)
def _stopped(engine: sa.Engine) -> None:
    baseline(engine, writer="stopped")


@registered(
    "stopped_writer_behind_banked_excess",
    "Two rows without messages (excess) and one message without a row (shortfall)",
    violates=("AC-26",),
    severity="error",
)
def _banked_excess(engine: sa.Engine) -> None:
    baseline(engine)
    delete_messages(engine, uid("m-live-completed"), uid("m-live-running"))
    # fmt: off
    add_after_live(engine, lambda at: subagent_message(
        uid("m-live-missed"), SL, TL, uid("turn-live"), at, tool_call("LiveMissed"),
        tool_status="in_progress", status="async_launched", is_async=True,
        description="The first subagent the stopped writer missed",
    ))
    # fmt: on
