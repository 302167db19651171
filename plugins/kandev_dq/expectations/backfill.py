"""GX's face of the backfill reconciliation rules (CONTRACT §4).

Each class declares only its fields (GX declares an expectation's parameters as fields) on a
shared base; its judgement, and why, is the same-named verdict of
:mod:`kandev_dq.verdicts.backfill`, without GX.
"""

from __future__ import annotations

from kandev_dq.expectations.base import WindowedExpectation


class ExpectBackfillReconciliationNotVacuous(WindowedExpectation):
    pass


class ExpectBackfillIdentityToMatchMessage(WindowedExpectation):
    pass


class ExpectBackfillTurnIdToMatchMessage(WindowedExpectation):
    pass


class ExpectBackfillStatusesToMatchMessage(WindowedExpectation):
    pass


class ExpectBackfillMetricsToMatchMessage(WindowedExpectation):
    pass


class ExpectBackfillTextToMatchMessage(WindowedExpectation):
    pass


class ExpectBackfillObservedAtToBeMessageCreatedAt(WindowedExpectation):
    pass


class ExpectBackfillSettledAtToFollowToolStatus(WindowedExpectation):
    pass


class ExpectBackfillRowsFromWinningMessage(WindowedExpectation):
    pass


class ExpectNoBackfillRowsWithoutQualifyingMessage(WindowedExpectation):
    pass


class ExpectNoBackfillRowsRelabelledLive(WindowedExpectation):
    pass
