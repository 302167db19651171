"""GX's face of the schema rules (CONTRACT §1, §3).

Each class declares only its fields (GX declares an expectation's parameters as fields) on a
shared base; its judgement, and why, is the same-named verdict of
:mod:`kandev_dq.verdicts.schema`, without GX.
"""

from __future__ import annotations

from kandev_dq.expectations.base import KandevExpectation


class ExpectSubagentsTableToExist(KandevExpectation):
    pass


class ExpectExecutionColumnToBeNotNull(KandevExpectation):
    pass


class ExpectThreeColumnUniqueKey(KandevExpectation):
    pass


class ExpectNoTwoColumnUniqueKey(KandevExpectation):
    pass


class ExpectSecondaryIndexesAsFreshStore(KandevExpectation):
    pass


class ExpectNoPartialSubagentsUpgrade(KandevExpectation):
    pass


class ExpectSessionForeignKeyToCascade(KandevExpectation):
    pass


class ExpectNoForeignKeyOnTurnOrExecution(KandevExpectation):
    pass
