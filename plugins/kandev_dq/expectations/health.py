"""Writer-health rules (CONTRACT §6, AC-26 … AC-29): is the live writer keeping up?

All of them judge one family of facts (:mod:`kandev_dq.facts.health`), scoped by
``capture_since`` bound exactly. The shortfall is the alarm; the excess is attributed and
never an alarm; collisions are disclosed on their own; none of them is netted against another.

Each class here is GX's face of the rule: its fields (GX declares an expectation's
parameters as fields) on a shared base; its judgement is the same-named verdict of
:mod:`kandev_dq.verdicts.health`, without GX.
"""

from __future__ import annotations

from kandev_dq.expectations.base import LiveScopedExpectation


class ExpectNoWriterShortfallSinceCaptureSince(LiveScopedExpectation):
    pass


class ExpectNoWriterExcessSinceCaptureSince(LiveScopedExpectation):
    pass


class ExpectNoCrossExecutionCollisionsSinceCaptureSince(LiveScopedExpectation):
    pass


class ExpectWriterToHaveWrittenSinceCaptureSince(LiveScopedExpectation):
    pass


class ExpectSubagentActivitySinceCaptureSince(LiveScopedExpectation):
    pass
