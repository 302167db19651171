"""GX's face of the writer-health rules (CONTRACT §6).

Each class declares only its fields (GX declares an expectation's parameters as fields) on a
shared base; its judgement, and why, is the same-named verdict of
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
