"""GX's face of the stored-text rules.

Each class declares only its fields (GX declares an expectation's parameters as fields) on a
shared base; its judgement, and why, is the same-named verdict of
:mod:`kandev_dq.verdicts.stored_text`, without GX.
"""

from __future__ import annotations

from kandev_dq.expectations.base import KandevExpectation


class ExpectMessageMetadataToBeJson(KandevExpectation):
    pass


class ExpectMessageMetadataMemberNamesToBeUnique(KandevExpectation):
    pass


class ExpectTimestampsInRecognisedUtcForm(KandevExpectation):
    pass


class ExpectTimestampsToBeWithinRange(KandevExpectation):
    pass
