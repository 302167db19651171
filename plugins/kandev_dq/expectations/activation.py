"""GX's face of the activation-key rules (CONTRACT §5).

Each class declares only its fields (GX declares an expectation's parameters as fields) on a
shared base; its judgement, and why, is the same-named verdict of
:mod:`kandev_dq.verdicts.activation`, without GX.
"""

from __future__ import annotations

from typing import ClassVar

from kandev_dq.expectations.base import (
    KandevExpectation,
    LiveScopedExpectation,
    WindowedExpectation,
)
from kandev_dq.verdicts.activation import BASELINE_DISCLOSURE

__all__ = ["BASELINE_DISCLOSURE"]


class ExpectActivationKeysToBeWriteOnce(LiveScopedExpectation):
    pass


class ExpectWriteOnceBaselineToPredateThisRun(LiveScopedExpectation):
    pass


class ExpectBackfillThroughNotAfterCaptureSince(LiveScopedExpectation):
    pass


class ExpectActivationKeysToBePaired(LiveScopedExpectation):
    pass


class ExpectActivationStateToBeInSet(LiveScopedExpectation):
    accepted_states: list[str]
    success_keys: ClassVar[tuple[str, ...]] = ("accepted_states",)


class ExpectExecutionSinceOnlyOnAmendedSchema(LiveScopedExpectation):
    pass


class ExpectExecutionSinceNotPendingSelfHeal(LiveScopedExpectation):
    pass


class ExpectActivationKeysToBeWellFormed(LiveScopedExpectation):
    pass


class ExpectNewKeysToCarrySubsecondPrecision(LiveScopedExpectation):
    pass


class ExpectLegacyKeysToBeDisclosed(LiveScopedExpectation):
    pass


class ExpectBackfillThroughToCoverQualifyingMessages(LiveScopedExpectation):
    pass


class ExpectNoBackfillRowsAfterCaptureSince(LiveScopedExpectation):
    pass


class ExpectNoBackfillRowsAfterBackfillThrough(LiveScopedExpectation):
    pass


class ExpectNoBackfillRowsUnderSentinel(WindowedExpectation):
    pass


class ExpectNoBackfillRowsInsideSentinelWindow(WindowedExpectation):
    pass


class ExpectPopulationToBeDisclosed(KandevExpectation):
    pass
