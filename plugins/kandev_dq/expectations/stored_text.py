"""Stored-text rules: values that the SQL would otherwise read silently wrong, named row by row.

All judge one family of facts (:mod:`kandev_dq.facts.stored_text`), read once per run.

Each class here is GX's face of the rule: its fields (GX declares an expectation's
parameters as fields) on a shared base; its judgement is the same-named verdict of
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
