"""Backfill reconciliation rules (CONTRACT §4): every ``source='backfill'`` row matches the row
its message should have produced, one field family per rule, plus the rows that should not
exist (AC-21a), the AC-21b winner, a backfill row relabelled live (AC-1) and a notice saying
when the comparison had nothing to compare.

All rules read one family of facts (:mod:`kandev_dq.facts.backfill`), built from the mapping
the migration runner inserts (:mod:`kandev_dq.sql.mapping`); a drifted row (merged by a live
frame, or its message updated after the backfill) is compared on its write-once fields only,
and the notice discloses how many.

Each class here is GX's face of the rule: its fields (GX declares an expectation's
parameters as fields) on a shared base; its judgement is the same-named verdict of
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
