"""GX's face of the row rules (CONTRACT §2): identity, uniqueness, execution ids, NULLs,
metrics, terminality.

Why custom classes and not GX's built-ins (``ExpectCompoundColumnsToBeUnique``,
``ExpectColumnValuesToNotBeNull``, ``ExpectColumnValuesToBeInSet``, …), although several fit a
rule's wording:

* **One shared scan.** Every rule here is one ``SUM(CASE …)`` of a single statement over
  ``task_session_subagents`` (:mod:`kandev_dq.facts.rows`), read in the run's pinned snapshot
  like every other family of facts. Built-ins issue one query each, on GX's own connections,
  outside that snapshot.
* **Works on a missing or pre-amendment table.** A built-in needs a batch of a second table
  asset; on a store predating the feature the batch itself fails and the rule becomes "could
  not evaluate", and ``agent_execution_id`` is absent from a pre-amendment table. Here such a
  rule says in its finding that it does not apply (the schema suite reports the shape).
* **Samples with keys, exact timestamps.** Samples are pushed down, capped and carry the
  primary key and the three-column key; ``observed_at <= updated_at`` compares exact instants
  (:class:`~kandev_dq.sql.dialect.utc_instant`), which a built-in pair comparison would compare
  as raw text on SQLite.

Each class here is GX's face of the rule: its fields (GX declares an expectation's
parameters as fields) on a shared base; its judgement is the same-named verdict of
:mod:`kandev_dq.verdicts.rows`, without GX.
"""

from __future__ import annotations

from kandev_dq.expectations.base import LiveScopedExpectation


class ExpectSubagentRowsToHaveIdentity(LiveScopedExpectation):
    pass


class ExpectSubagentKeyToBeUnique(LiveScopedExpectation):
    pass


class ExpectAgentExecutionIdToBePresent(LiveScopedExpectation):
    pass


class ExpectAgentExecutionIdToBeUuidOrUnknown(LiveScopedExpectation):
    pass


class ExpectSubagentSourceToBeLiveOrBackfill(LiveScopedExpectation):
    pass


class ExpectBackfillRowsToCarryUnknownExecution(LiveScopedExpectation):
    pass


class ExpectNoEmptyStringsInNullableText(LiveScopedExpectation):
    pass


class ExpectNoNegativeMetrics(LiveScopedExpectation):
    pass


class ExpectNoZeroTokensOrDuration(LiveScopedExpectation):
    pass


class ExpectAsyncLaunchedRowsToHaveNoMetrics(LiveScopedExpectation):
    pass


class ExpectSettledAtIffTerminalToolStatus(LiveScopedExpectation):
    pass


class ExpectToolStatusInAcpVocabulary(LiveScopedExpectation):
    pass


class ExpectObservedAtNotAfterUpdatedOrSettled(LiveScopedExpectation):
    pass


class ExpectNoOrphanSubagentRows(LiveScopedExpectation):
    pass


class ExpectIsAsyncToBeZeroOrOne(LiveScopedExpectation):
    pass


class ExpectSubagentRowsWhenQualifyingMessagesExist(LiveScopedExpectation):
    pass


class ExpectCompletedRowsToReportMetrics(LiveScopedExpectation):
    pass
