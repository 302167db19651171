"""Schema rules (CONTRACT §1, §3): the live shape of ``task_session_subagents``, one class per
AC-33 clause plus the table itself, the partial-upgrade check and the foreign keys.

Every rule reads the same observation (:mod:`kandev_dq.facts.schema_facts`). When the table is
absent, the table rule fails and every other rule fails too, saying that it cannot hold.

Each class here is GX's face of the rule: its fields (GX declares an expectation's
parameters as fields) on a shared base; its judgement is the same-named verdict of
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
