"""What ``kandev-dq init`` writes, as data: the rules each suite runs (at which severity, with
which arguments) and the suites each checkpoint runs, read from the rule index without GX.

:mod:`kandev_dq.project.files` writes a project from it; :mod:`kandev_dq.project.deviations`
measures a project against it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kandev_dq.contract.rule_index import LIVE_SUITES, RULE_INDEX
from kandev_dq.contract.severity import Severity

#: Arguments a suite gives one of its expectations beyond the class's defaults.
SUITE_KWARGS: dict[str, dict[str, Any]] = {
    "expect_activation_state_to_be_in_set": {"accepted_states": ["fully_activated"]},
}


@dataclass(frozen=True)
class Planned:
    """One expectation of a suite as its JSON records it: GX's type name, GX's severity word
    (``critical`` for kandev-dq's ``error``) and the suite's arguments."""

    type: str
    severity: str
    kwargs: dict[str, Any]


def suite_plan(suite: str) -> list[Planned]:
    """A suite's expectations, in order, read without GX from the rule index (its one list of
    which expectation runs in which suite at which severity). A live suite names itself to
    each of its rules (``live_window``): its window starts from its own last stored run."""
    live = {"live_window": suite} if suite in LIVE_SUITES else {}
    return [
        Planned(
            rule.expectation,
            Severity(rule.severity).gx,
            copy.deepcopy(SUITE_KWARGS.get(rule.expectation, {})) | live,
        )
        for rule in RULE_INDEX
        if rule.suite == suite
    ]


#: The suites init writes.
SUITE_NAMES: tuple[str, ...] = (
    "activation",
    "writer_health",
    "rows",
    "schema",
    "backfill",
    *LIVE_SUITES,
)

#: Checkpoint name -> the suites it runs, in order.
CHECKPOINTS: dict[str, tuple[str, ...]] = {
    "nightly": ("activation", "writer_health", "rows"),
    "pre_release": ("activation", "writer_health", "rows", "schema", "backfill"),
    "post_migration": ("schema", "activation", "backfill"),
    # Every few minutes: what changed since the last live run (kandev_dq.records.watermark).
    "live": ("live_activation", "live_writer_health", "live_rows"),
}
