"""Row verdicts (CONTRACT §2): identity, uniqueness, execution ids, NULLs, metrics, terminality.

Every rule here judges one count of a single scan over ``task_session_subagents``
(:mod:`kandev_dq.facts.rows`), read in the run's pinned snapshot; a rule says in its finding
when it does not apply (a missing or pre-amendment table). Why these are kandev-dq's own
expectations rather than GX's built-ins is said in :mod:`kandev_dq.expectations.rows`.

Each rule that passes trivially on an empty or all-NULL table has a partner noticing it:
rows exist when qualifying messages do, and completed rows do report metrics.
"""

from __future__ import annotations

from typing import ClassVar

from kandev_dq.contract.tables import TOOL_STATUSES
from kandev_dq.facts.rows import row_facts
from kandev_dq.facts.shapes import RowFacts
from kandev_dq.verdicts.base import Family, Finding, LiveScopedVerdict, counted

ROWS = Family("kandev.row_facts", row_facts, windowed=True)


class _RowVerdict(LiveScopedVerdict):
    """A row rule judged from one count of the shared scan (``rule``), with its sample."""

    facts: ClassVar[Family] = ROWS
    rule: ClassVar[str] = ""
    noun: ClassVar[str] = ""
    fix: ClassVar[str] = ""
    needs_execution_column: ClassVar[bool] = False

    def judge(self, facts: RowFacts) -> Finding:
        unavailable = self.not_applicable(facts)
        if unavailable is not None:
            return unavailable
        return counted(facts["rules"][self.rule], self.noun, self.fix)

    def listing(self, facts: RowFacts):
        return facts["rules"].get(self.rule, {}).get("listing")

    def counted_part(self, facts: RowFacts):
        return facts["rules"].get(self.rule)

    def not_applicable(self, facts: RowFacts) -> Finding | None:
        if not facts["table_exists"]:
            return Finding(
                success=True,
                observed_value="not applicable",
                message="task_session_subagents is missing: no rows to judge",
            )
        if self.needs_execution_column and not facts["amended"]:
            return Finding(
                success=True,
                observed_value="not applicable",
                message=(
                    "pre-amendment table: no agent_execution_id column to judge (see the schema "
                    "rules)"
                ),
            )
        return None


class ExpectSubagentRowsToHaveIdentity(_RowVerdict):
    """Every row has a non-empty task_session_id, task_id and tool_call_id (AC-2).

    A row without its identity cannot be matched to its message or its session.
    """

    rule: ClassVar[str] = "identity"
    noun: ClassVar[str] = "row(s) with an empty session id, task id or tool_call_id"
    fix: ClassVar[str] = "the writer must skip a frame without its identity (AC-2)"


class ExpectSubagentKeyToBeUnique(_RowVerdict):
    """Exactly one row per ``(task_session_id, agent_execution_id, tool_call_id)``
    (AC-3, AC-14). Two rows differing only in agent_execution_id are two keys (AC-32).

    On a pre-amendment table the key the table declares, ``(task_session_id, tool_call_id)``,
    is checked instead, and the finding says so.
    """

    rule: ClassVar[str] = "duplicate_rows"

    def judge(self, facts: RowFacts) -> Finding:
        unavailable = self.not_applicable(facts)
        if unavailable is not None:
            return unavailable
        part = facts["rules"][self.rule]
        key = "(" + ", ".join(facts["key"]) + ")"
        note = "" if facts["amended"] else " (pre-amendment table: its two-column key)"
        if not part["count"]:
            return Finding(
                success=True,
                observed_value=0,
                message=f"one row per {key}{note}",
                unexpected_count=0,
            )
        keys = part["keys"]
        return Finding(
            success=False,
            observed_value=keys,
            message=(
                f"{keys} key(s) {key} hold {part['count']} rows{note}: the UNIQUE constraint is "
                "missing or bypassed"
            ),
            unexpected_count=keys,
            sample=part["sample"],
            details={"rows": part["count"]},
        )


class ExpectAgentExecutionIdToBePresent(_RowVerdict):
    """agent_execution_id is never NULL and never ``''`` (AC-30): a frame without an
    execution id is stored with the sentinel ``'unknown'``."""

    rule: ClassVar[str] = "execution_missing"
    needs_execution_column: ClassVar[bool] = True
    noun: ClassVar[str] = "row(s) with a NULL or '' agent_execution_id"
    fix: ClassVar[str] = "store the sentinel 'unknown' instead (AC-30)"


class ExpectAgentExecutionIdToBeUuidOrUnknown(_RowVerdict):
    """agent_execution_id is a UUID (canonical 8-4-4-4-12 hex, any case) or exactly the
    sentinel ``'unknown'`` (AC-31); anything else cannot be a real execution id."""

    rule: ClassVar[str] = "execution_form"
    needs_execution_column: ClassVar[bool] = True
    noun: ClassVar[str] = "row(s) whose agent_execution_id is neither a UUID nor 'unknown'"
    fix: ClassVar[str] = "the writer stores an id that is not an execution's UUID"


class ExpectSubagentSourceToBeLiveOrBackfill(_RowVerdict):
    """``source`` is ``'live'`` or ``'backfill'`` (AC-1): the write-once origin of a row."""

    rule: ClassVar[str] = "source"
    noun: ClassVar[str] = "row(s) whose source is neither 'live' nor 'backfill'"
    fix: ClassVar[str] = "source is a closed two-value column"


class ExpectBackfillRowsToCarryUnknownExecution(_RowVerdict):
    """Every backfill row has agent_execution_id ``'unknown'`` (AC-31, AC-25): messages carry
    no execution id, so a backfill row claiming one invents it."""

    rule: ClassVar[str] = "backfill_not_unknown"
    needs_execution_column: ClassVar[bool] = True
    noun: ClassVar[str] = "backfill row(s) with an execution id other than 'unknown'"
    fix: ClassVar[str] = "the backfill writes the sentinel, or a live row's source was changed"


class ExpectNoEmptyStringsInNullableText(_RowVerdict):
    """No nullable TEXT column holds ``''``: "not reported" is NULL (CONTRACT §2).

    §2 gives this rule no AC id of its own (catalogued as ``§2-empty-text``); AC-2a's "first
    non-empty turn_id wins" relies on it. The finding breaks the count down by column.
    """

    rule: ClassVar[str] = "empty_text"
    noun: ClassVar[str] = "row(s) with '' in a nullable TEXT column"
    fix: ClassVar[str] = "the writer must store '' as NULL"

    def judge(self, facts: RowFacts) -> Finding:
        finding = super().judge(facts)
        if not finding.success:
            by_column = facts["empty_by_column"]
            finding.details["by_column"] = by_column
            finding.message += " (" + ", ".join(f"{k}: {v}" for k, v in by_column.items()) + ")"
        return finding


class ExpectNoNegativeMetrics(_RowVerdict):
    """No total_tokens, tool_use_count or duration_ms is negative (AC-9)."""

    rule: ClassVar[str] = "negative_metric"
    noun: ClassVar[str] = "row(s) with a negative metric"
    fix: ClassVar[str] = "a negative report is stored as NULL (AC-9)"


class ExpectNoZeroTokensOrDuration(_RowVerdict):
    """total_tokens and duration_ms never hold 0: a reported 0 is stored NULL (AC-7a).
    tool_use_count keeps a reported 0 (AC-8) and is not judged here."""

    rule: ClassVar[str] = "zero_metric"
    noun: ClassVar[str] = "row(s) with 0 in total_tokens or duration_ms"
    fix: ClassVar[str] = "a reported 0 is stored as NULL in those two columns (AC-7a)"


class ExpectAsyncLaunchedRowsToHaveNoMetrics(_RowVerdict):
    """A row with agent_status ``'async_launched'`` has all three metrics NULL (AC-7).

    The launch returns at once and the child has reported nothing yet; this is 75% of real
    traffic, the shape that must never be wrong. A 0 in any metric (tool_use_count
    included) is a fabricated report.
    """

    rule: ClassVar[str] = "async_launched_metrics"
    noun: ClassVar[str] = "async_launched row(s) with a metric"
    fix: ClassVar[str] = "an unreported metric is NULL, never 0 (AC-7)"


class ExpectSettledAtIffTerminalToolStatus(_RowVerdict):
    """settled_at is set exactly when tool_status is one of the six terminal values (AC-11,
    AC-10, AC-23a). Terminality never comes from agent_status."""

    rule: ClassVar[str] = "settled_terminal"
    noun: ClassVar[str] = "row(s) whose settled_at disagrees with tool_status terminality"
    fix: ClassVar[str] = "settle on the first terminal tool_status only (AC-11)"


class ExpectToolStatusInAcpVocabulary(_RowVerdict):
    """tool_status is NULL or one of the closed ACP values (AC-12, AC-10): ``pending``,
    ``in_progress`` and the six terminal ones. An agent_status value such as
    ``async_launched`` there means the two statuses were conflated."""

    rule: ClassVar[str] = "tool_status_vocabulary"
    noun: ClassVar[str] = "row(s) with a tool_status outside the ACP vocabulary"
    fix: ClassVar[str] = f"allowed: {', '.join(TOOL_STATUSES)}"

    def judge(self, facts: RowFacts) -> Finding:
        finding = super().judge(facts)
        if not finding.success:
            conflated = sorted(
                {
                    s["tool_status"]
                    for s in finding.sample
                    if s.get("tool_status") in {"async_launched", "started"}
                    or s.get("tool_status") == s.get("agent_status")
                }
            )
            if conflated:
                finding.message += (
                    f"; {', '.join(conflated)} is an agent_status value: "
                    "agent_status and tool_status were conflated"
                )
        return finding


class ExpectObservedAtNotAfterUpdatedOrSettled(_RowVerdict):
    """``observed_at <= updated_at`` and ``observed_at <= settled_at`` where set, compared as
    exact instants on both sides (CONTRACT §2). §2 gives this no AC id (catalogued as
    ``§2-timestamps``); it also cites AC-1a: observed_at is the first, write-once observation."""

    rule: ClassVar[str] = "timestamp_order"
    noun: ClassVar[str] = "row(s) observed after their updated_at or settled_at"
    # A whole-second updated_at/settled_at (SQLite's CURRENT_TIMESTAMP, upstream's turn-end
    # sweep) spans its second, so what remains is later than any reading of it (CONTRACT §1).
    fix: ClassVar[str] = (
        "each is later than any instant its updated_at or settled_at can stand for (a "
        "whole-second value counts as its whole second): observed_at was moved by a later "
        "frame, or the row (or, for a backfill row, its message) was stamped from another clock"
    )


class ExpectNoOrphanSubagentRows(_RowVerdict):
    """Every row's task_session_id names an existing task session (AC-16): deleting a
    session cascades to its subagent rows."""

    rule: ClassVar[str] = "orphans"
    noun: ClassVar[str] = "orphan row(s) whose task session does not exist"
    fix: ClassVar[str] = "the ON DELETE CASCADE foreign key is missing or disabled"


class ExpectIsAsyncToBeZeroOrOne(_RowVerdict):
    """is_async is 0 or 1 (CONTRACT §1: INTEGER NOT NULL, 0/1, sticky once 1).

    The contract gives this domain no AC id; it is catalogued as ``§1-is-async``.
    """

    rule: ClassVar[str] = "is_async"
    noun: ClassVar[str] = "row(s) whose is_async is neither 0 nor 1"
    fix: ClassVar[str] = "is_async is a 0/1 flag"


class ExpectSubagentRowsWhenQualifyingMessagesExist(_RowVerdict):
    """Rows exist whenever qualifying subagent messages do (AC-21, AC-26).

    Every other row rule passes on an empty table; this one notices the emptiness: a store
    with qualifying messages and no row (or no table) was never backfilled and is not being
    written. A warning: the activation and writer-health rules say why.
    """

    def listing(self, facts: RowFacts):
        return facts.get("qualifying_listing")

    def judge(self, facts: RowFacts) -> Finding:
        observed = {"rows": facts["rows"], "qualifying_messages": facts["qualifying_messages"]}
        if facts["rows"]:
            # Messages are read only for an empty table: a non-empty one needs no comparison.
            return Finding(
                success=True,
                observed_value={"rows": facts["rows"]},
                message=f"{facts['rows']} subagent row(s)",
            )
        if not facts["qualifying_messages"]:
            return Finding(
                success=True,
                observed_value=observed,
                message="no rows, and no qualifying message either",
            )
        where = "the table is missing" if not facts["table_exists"] else "the table is empty"
        return Finding(
            success=False,
            observed_value=observed,
            message=f"{facts['qualifying_messages']} qualifying subagent message(s) but {where}: "
            "not backfilled and not written",
            unexpected_count=facts["qualifying_messages"],
        )


class ExpectCompletedRowsToReportMetrics(_RowVerdict):
    """Completed subagents report metrics: not every ``agent_status='completed'`` row has all
    three metrics NULL (AC-7, AC-8).

    The metric rules (AC-7, AC-7a, AC-9) all pass on a writer that stores NULL for every
    metric; this disclosure (info) notices a table where no completed row reports any.
    """

    rule: ClassVar[str] = "completed_without_metrics"

    def judge(self, facts: RowFacts) -> Finding:
        unavailable = self.not_applicable(facts)
        if unavailable is not None:
            return unavailable
        part = facts["rules"][self.rule]
        completed, bare = facts["completed_rows"], part["count"]
        observed = {"completed_rows": completed, "without_metrics": bare}
        if not completed or bare < completed:
            return Finding(
                success=True,
                observed_value=observed,
                message=f"{bare} of {completed} completed row(s) report no metric",
            )
        return Finding(
            success=False,
            observed_value=observed,
            message=f"none of {completed} completed row(s) reports any metric: the writer may be "
            "dropping every metric (the metric rules cannot notice)",
            unexpected_count=bare,
            sample=part["sample"],
        )
