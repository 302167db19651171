"""Writer-health rules (CONTRACT §6, AC-26 … AC-29): is the live writer keeping up?

All of them judge one family of facts (:mod:`kandev_dq.facts.health`), scoped by
``capture_since`` bound exactly. The shortfall is the alarm; the excess is attributed and
never an alarm; collisions are disclosed on their own; none of them is netted against another.
"""

from __future__ import annotations

from typing import ClassVar

from kandev_dq.facts.health import health_facts
from kandev_dq.facts.shapes import HealthFacts
from kandev_dq.verdicts.base import Family, Finding, LiveScopedVerdict

HEALTH = Family("kandev.health_facts", health_facts, windowed=True)


class _HealthVerdict(LiveScopedVerdict):
    """Rules that qualify the shortfall: without a comparison (AC-28a) they pass as "not
    run" — the shortfall rule carries that failure; repeating it would say one thing twice."""

    facts: ClassVar[Family] = HEALTH
    #: the rule reads rows of task_session_subagents, so a missing table makes it inapplicable
    needs_rows: ClassVar[bool] = False

    def judge(self, facts: HealthFacts) -> Finding:
        if facts["not_run"] is not None:
            return Finding(
                success=True,
                observed_value="not run",
                message=(
                    f"not run: {facts['not_run']} (AC-28a); reported by the writer-shortfall rule"
                ),
            )
        if self.needs_rows and not facts["table_exists"]:
            return Finding(
                success=True,
                observed_value="not applicable",
                message="task_session_subagents is missing: no rows",
            )
        return self.judge_compared(facts)

    def judge_compared(self, facts: HealthFacts) -> Finding:
        raise NotImplementedError


class ExpectNoWriterShortfallSinceCaptureSince(_HealthVerdict):
    """No qualifying subagent message since capture_since lacks its row: the alarm (AC-26/27).

    Counted over distinct ``(task_session_id, tool_call_id)`` keys, never rows: two messages
    describing one subagent are one key, and two rows of one key (a cross-execution reuse,
    AC-32) still cover it. Messages skipped by AC-2 (an empty identity) never qualify, and
    NULL/''/'null' metadata reads as ``{}`` (AC-23b). Both sides are read by one statement in
    one snapshot (AC-28b). The excess is a separate rule and is never subtracted, so a
    standing excess cannot hide a stopped writer's first missed subagent.

    AC-28a: without capture_since (absent, or not an RFC3339 instant) the comparison is not
    run and this rule fails with the key's state as its finding. It fails at **error**, not
    warning: the key's absence *is* the health signal (the backfill never succeeded, or the
    feature is not activated), and this is the one rule that can clear the writer. A warning
    would let a checkpoint pass without a comparison ever having run (CONTRACT §7 forbids a
    silently skipped check), and a suite must not rely on the activation suite running
    beside it — checkpoints compose suites freely. The activation state rule may report the
    same cause; two findings naming one cause are preferable to none.
    """

    def listing(self, facts: HealthFacts):
        return facts.get("shortfall", {}).get("listing")

    def counted_part(self, facts: HealthFacts):
        return facts.get("shortfall")

    def judge(self, facts: HealthFacts) -> Finding:
        if facts["not_run"] is not None:
            return Finding(
                success=False,
                observed_value="not run",
                message=(
                    f"writer health not compared: {facts['not_run']}; without capture_since the "
                    "comparison does not run (AC-28a) and the writer cannot be cleared"
                ),
                details={"capture_since": facts["capture_since"]},
            )
        part = facts["shortfall"]
        count = part["count"]
        details = {"since": facts["since"], "qualifying_keys": facts["qualifying_keys"]}
        if not facts["table_exists"]:
            details["table_exists"] = False
        if not count:
            return Finding(
                success=True,
                observed_value=0,
                message=f"every one of {facts['qualifying_keys']} qualifying key(s) since "
                f"{facts['since']} has a row",
                unexpected_count=0,
                details=details,
            )
        where = (
            "task_session_subagents is missing"
            if not facts["table_exists"]
            else "the live writer is stopped or failing"
        )
        return Finding(
            success=False,
            observed_value=count,
            message=(
                f"{count} of {facts['qualifying_keys']} qualifying (task_session_id, "
                "tool_call_id) "
                f"key(s) since {facts['since']} have no subagent row: {where}"
            ),
            unexpected_count=count,
            sample=part["sample"],
            details=details,
        )


class ExpectNoWriterExcessSinceCaptureSince(_HealthVerdict):
    """Row keys observed since capture_since without any subagent message since then (AC-27).

    Attributed, never an alarm (warning): a healthy writer reaches it when a message write
    fails after the row was written, or a subagent straddles the boundary. This side
    subtracts the *widest* message set (kind ``subagent_task``, no identity filter), counts
    distinct keys, and is never netted against the shortfall.
    """

    needs_rows: ClassVar[bool] = True

    def listing(self, facts: HealthFacts):
        return facts.get("excess", {}).get("listing")

    def counted_part(self, facts: HealthFacts):
        return facts.get("excess")

    def judge_compared(self, facts: HealthFacts) -> Finding:
        part = facts["excess"]
        count = part["count"]
        if not count:
            return Finding(
                success=True,
                observed_value=0,
                message=f"every row key since {facts['since']} has a message",
                unexpected_count=0,
            )
        return Finding(
            success=False,
            observed_value=count,
            message=f"{count} subagent row key(s) observed since {facts['since']} have no subagent "
            "message since then (a failed message write or a boundary straddle; not an alarm)",
            unexpected_count=count,
            sample=part["sample"],
        )


class ExpectNoCrossExecutionCollisionsSinceCaptureSince(_HealthVerdict):
    """Rows minus distinct keys among rows observed since capture_since (AC-27, AC-32).

    A tool_call_id reused by a later execution gives two correct rows for one key (AC-32);
    the number is disclosed at info, separately, so that neither the shortfall nor the
    excess is computed over rows.
    """

    needs_rows: ClassVar[bool] = True

    def listing(self, facts: HealthFacts):
        return facts.get("collisions", {}).get("listing")

    def judge_compared(self, facts: HealthFacts) -> Finding:
        part = facts["collisions"]
        count = part["count"]
        said = f"{part['rows']} row(s) over {part['keys']} key(s) since {facts['since']}"
        details = {"rows": part["rows"], "keys": part["keys"]}
        if not count:
            return Finding(
                success=True,
                observed_value=0,
                message=f"no collisions: {said}",
                unexpected_count=0,
                details=details,
            )
        return Finding(
            success=False,
            observed_value=count,
            message=(
                f"{count} cross-execution collision(s): {said} (legitimate under AC-32, disclosed)"
            ),
            unexpected_count=count,
            sample=part["sample"],
            details=details,
        )


class ExpectWriterToHaveWrittenSinceCaptureSince(_HealthVerdict):
    """``MAX(observed_at)`` over rows since capture_since is not NULL while qualifying
    messages exist since then (AC-29).

    The attribution is scoped: an unscoped MAX would be set by backfilled or pre-activation
    rows and read "healthy" on a writer that never ran. NULL with qualifying messages means
    the writer has produced nothing since activation: the strongest alarm (error).
    """

    def listing(self, facts: HealthFacts):
        return facts.get("qualifying_listing")

    def judge_compared(self, facts: HealthFacts) -> Finding:
        latest = facts["latest_observed_at"]
        if latest is not None:
            return Finding(
                success=True, observed_value=latest, message=f"latest subagent observed at {latest}"
            )
        qualifying = facts["qualifying_keys"]
        if not qualifying:
            return Finding(
                success=True,
                observed_value=None,
                message=f"no row since {facts['since']}, and no qualifying message either "
                "(judged by the subagent-activity rule)",
            )
        return Finding(
            success=False,
            observed_value=None,
            message=(
                f"MAX(observed_at) since {facts['since']} is NULL while {qualifying} qualifying "
                "key(s) exist: the writer has produced nothing since activation"
            ),
            unexpected_count=qualifying,
        )


class ExpectSubagentActivitySinceCaptureSince(_HealthVerdict):
    """Some subagent row has been observed since capture_since (AC-29).

    A NULL scoped ``MAX(observed_at)`` is never "healthy". When no qualifying message exists
    since capture_since either, nothing proves the writer works: a warning (a quiet or freshly
    activated store reaches it; a stopped writer with traffic is the error rule's case).
    """

    def judge_compared(self, facts: HealthFacts) -> Finding:
        latest = facts["latest_observed_at"]
        if latest is not None:
            return Finding(
                success=True, observed_value=latest, message=f"latest subagent observed at {latest}"
            )
        if facts["qualifying_keys"]:
            return Finding(
                success=True,
                observed_value=None,
                message="no row since capture_since; judged by the writer-has-written rule",
            )
        skipped_messages = facts["subagent_messages"]
        extra = (
            f" ({skipped_messages} subagent message key(s) without a full identity, AC-2)"
            if skipped_messages
            else ""
        )
        return Finding(
            success=False,
            observed_value=None,
            message=f"no subagent activity since {facts['since']}: MAX(observed_at) is NULL and no "
            f"qualifying message exists{extra}; the writer is unproven, not healthy",
            unexpected_count=1,
        )
