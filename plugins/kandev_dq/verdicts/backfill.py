"""Backfill reconciliation rules (CONTRACT §4): every ``source='backfill'`` row matches the row
its message should have produced, one field family per rule, plus the rows that should not
exist (AC-21a), the AC-21b winner, a backfill row relabelled live (AC-1) and a notice saying
when the comparison had nothing to compare.

All rules read one family of facts (:mod:`kandev_dq.facts.backfill`), built from the mapping
the migration runner inserts (:mod:`kandev_dq.sql.mapping`); a drifted row (merged by a live
frame, or its message updated after the backfill) is compared on its write-once fields only,
and the notice discloses how many.
"""

from __future__ import annotations

from typing import ClassVar

from kandev_dq.facts.backfill import backfill_facts
from kandev_dq.facts.shapes import BackfillFacts
from kandev_dq.verdicts.base import Family, Finding, WindowedVerdict, counted

BACKFILL = Family("kandev.backfill_facts", backfill_facts, ("window_minutes",))
NOTICE = "expect_backfill_reconciliation_not_vacuous"


class _BackfillVerdict(WindowedVerdict):
    facts: ClassVar[Family] = BACKFILL
    family: ClassVar[str] = ""
    noun: ClassVar[str] = ""
    fix: ClassVar[str] = ""

    def judge(self, facts: BackfillFacts) -> Finding:
        if not facts["evaluable"]:
            return Finding(
                success=True,
                observed_value="not evaluated",
                message=f"not evaluated: {facts['reason']} (see {NOTICE})",
            )
        if not facts["backfill_rows"] and self.family != "relabelled":
            return Finding(
                success=True,
                observed_value=0,
                message=f"no backfill rows: nothing to compare (see {NOTICE})",
            )
        return counted(facts["families"][self.family], self.noun, self.fix)


class ExpectBackfillReconciliationNotVacuous(_BackfillVerdict):
    """The reconciliation compared something, or says why not.

    Fails when ``task_session_subagents`` cannot be read (absent, or lacking a column the
    mapping fills), or when qualifying messages created before capture_since (the only ones
    the backfill maps; later ones are the live writer's) exist but no backfill row does: then
    every field rule of this suite passes vacuously (whether the keys are covered at all is
    the activation coverage rule's question). Its observed value discloses how many rows were
    compared in full and how many drifted rows on their write-once fields only.
    """

    def listing(self, facts: BackfillFacts):
        return facts.get("expected_listing")

    def judge(self, facts: BackfillFacts) -> Finding:
        if not facts["evaluable"]:
            return Finding(
                success=False,
                observed_value="not evaluated",
                message=f"not evaluated: {facts['reason']}",
                unexpected_count=1,
            )
        observed = {
            "expected_rows": facts["expected_rows"],
            "backfill_rows": facts["backfill_rows"],
            "compared_in_full": facts["compared_in_full"],
            "write_once_fields_only": facts["write_once_fields_only"],
        }
        if not facts["execution_column"]:
            observed["note"] = "pre-amendment table: agent_execution_id read as 'unknown'"
        if facts["expected_rows"] and not facts["backfill_rows"]:
            return Finding(
                success=False,
                observed_value=observed,
                message=(
                    f"{facts['expected_rows']} message key(s) the backfill maps, but no backfill "
                    "row: every reconciliation rule passes vacuously"
                ),
                unexpected_count=facts["expected_rows"],
            )
        if not facts["expected_rows"] and not facts["backfill_rows"]:
            return Finding(
                success=True,
                observed_value=observed,
                message="no qualifying message and no backfill row",
            )
        drifted = facts["write_once_fields_only"]
        tail = f", {drifted} drifted row(s) on write-once fields only" if drifted else ""
        return Finding(
            success=True,
            observed_value=observed,
            message=(
                f"{facts['backfill_rows']} backfill row(s) against {facts['expected_rows']} "
                "mapped "
                f"key(s): {facts['compared_in_full']} compared in full{tail}"
            ),
        )


class ExpectBackfillIdentityToMatchMessage(_BackfillVerdict):
    """A backfill row carries its message's session and task, and the ``'unknown'`` execution
    sentinel (AC-21, AC-31)."""

    family: ClassVar[str] = "identity"
    noun: ClassVar[str] = "backfill row(s) whose task or execution id is not the message's"
    fix: ClassVar[str] = "the backfill mapped the identity columns wrongly"


class ExpectBackfillTurnIdToMatchMessage(_BackfillVerdict):
    """``turn_id`` is the message's own column, ``''`` read as NULL, never JSON (AC-2a): a NULL
    on a row whose message has a turn is the classic fault; a NULL may be filled forward only
    by a later live write."""

    family: ClassVar[str] = "turn_id"
    noun: ClassVar[str] = "backfill row(s) whose turn_id is not the message's"
    fix: ClassVar[str] = "turn_id must come from the message's column, '' as NULL"


class ExpectBackfillStatusesToMatchMessage(_BackfillVerdict):
    """``tool_status`` is the top-level ``metadata.status`` and ``agent_status`` the nested
    ``normalized.subagent_task.status``, never swapped (AC-10, AC-12)."""

    family: ClassVar[str] = "statuses"
    noun: ClassVar[str] = "backfill row(s) whose tool_status or agent_status is not the message's"
    fix: ClassVar[str] = "tool_status is top-level metadata.status, agent_status the nested one"


class ExpectBackfillMetricsToMatchMessage(_BackfillVerdict):
    """Metrics follow §2: unreported is NULL (AC-7), a reported 0 is NULL in total_tokens and
    duration_ms (AC-7a) but kept in tool_use_count (AC-8), no negative (AC-9), none at all on
    an async_launched row."""

    family: ClassVar[str] = "metrics"
    noun: ClassVar[str] = "backfill row(s) whose metrics differ from the mapped message"
    fix: ClassVar[str] = "apply the NULL/zero/negative rules of CONTRACT §2"


class ExpectBackfillTextToMatchMessage(_BackfillVerdict):
    """parent_tool_call_id, subagent_type, description, agent_id, child_session_id, model and
    is_async are the message's, with ``''`` stored as NULL (AC-21, AC-23b)."""

    family: ClassVar[str] = "text"
    noun: ClassVar[str] = "backfill row(s) whose text fields or is_async differ from the message"
    fix: ClassVar[str] = "copy the same-named fields, '' as NULL"


class ExpectBackfillObservedAtToBeMessageCreatedAt(_BackfillVerdict):
    """``observed_at`` is the message's ``created_at``, the exact microsecond (AC-1a, AC-24e)."""

    family: ClassVar[str] = "observed_at"
    noun: ClassVar[str] = "backfill row(s) whose observed_at is not the message's created_at"
    fix: ClassVar[str] = "observed_at is write-once and comes from created_at"


class ExpectBackfillSettledAtToFollowToolStatus(_BackfillVerdict):
    """``settled_at`` is the message's ``updated_at`` iff the tool status is terminal, else
    NULL (AC-23a, AC-11); ``updated_at`` is the message's ``updated_at``."""

    family: ClassVar[str] = "settled_at"
    noun: ClassVar[str] = "backfill row(s) whose settled_at or updated_at is not the mapped one"
    fix: ClassVar[str] = "settled_at = message updated_at only for a terminal tool_status"


class ExpectBackfillRowsFromWinningMessage(_BackfillVerdict):
    """Several messages with one ``(task_session_id, tool_call_id)``: the row is the one with
    the greatest created_at, then greatest id (AC-21b); a row carrying a losing message's id
    or created_at is the fault."""

    family: ClassVar[str] = "winner"
    noun: ClassVar[str] = "backfill row(s) carrying a losing message's values"
    fix: ClassVar[str] = "newest created_at, then greatest id, supplies the row"


class ExpectNoBackfillRowsWithoutQualifyingMessage(_BackfillVerdict):
    """Every backfill row's key has a qualifying message: a subagent message with non-empty
    session id, task id and tool_call_id (AC-21a: the others are skipped)."""

    family: ClassVar[str] = "orphan"
    noun: ClassVar[str] = "backfill row(s) whose key has no qualifying message"
    fix: ClassVar[str] = "messages lacking an identity must be skipped"


class ExpectNoBackfillRowsRelabelledLive(_BackfillVerdict):
    """``source`` is write-once (AC-1): a ``'live'`` row with the ``'unknown'`` execution id,
    the winning message's id and exactly its created_at as observed_at is a backfill row
    relabelled.

    A heuristic, hence a warning: a live writer that reused the message's id and clock for a
    frame without an execution id would leave the same row, and only ``source`` differs.
    """

    family: ClassVar[str] = "relabelled"
    noun: ClassVar[str] = "live row(s) that look like relabelled backfill rows"
    fix: ClassVar[str] = "source is write-once: a live frame never turns 'backfill' into 'live'"
