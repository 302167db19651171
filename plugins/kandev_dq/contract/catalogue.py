"""The contract's acceptance criteria, in this project's own words.

Rules the contract states without an AC id are catalogued under their section (``§2-…``).

Every expectation declares the AC ids it encodes; ``kandev-dq rules`` joins the two, and a test
fails when a data-observable criterion has no expectation or an expectation cites an id this
catalogue does not hold. Criteria that only the migration runner or a consumer can honour
(not visible in one snapshot of the data) are marked so and are covered by the runner's tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Criterion:
    ac: str
    section: str
    summary: str
    data_observable: bool


def _c(ac: str, section: str, summary: str, observable: bool = True) -> Criterion:
    return Criterion(ac, section, summary, observable)


CRITERIA: tuple[Criterion, ...] = (
    _c("AC-1", "rows", "A row's source is write-once: a backfilled row stays 'backfill'."),
    _c("AC-1a", "rows", "observed_at is write-once: a later live frame never moves it."),
    _c("AC-2", "rows", "Every row has a non-empty session id, task id and tool_call_id."),
    _c("AC-2a", "rows", "One row per key; the first non-empty turn_id wins, NULL filled forward."),
    _c("AC-3", "rows", "Exactly one row per (session, execution, tool_call_id)."),
    _c("AC-7", "rows", "An unreported metric is NULL, never 0."),
    _c("AC-7a", "rows", "total_tokens and duration_ms never hold 0: a reported 0 is NULL."),
    _c("AC-8", "rows", "tool_use_count keeps a reported 0."),
    _c("AC-9", "rows", "No metric is ever negative."),
    _c("AC-10", "rows", "Terminal tool statuses are exactly the six ACP terminal values."),
    _c("AC-11", "rows", "settled_at is set iff a terminal tool_status was observed."),
    _c("AC-12", "rows", "Terminality comes from tool_status only; its vocabulary is closed ACP."),
    _c("AC-13", "rows", "Reads order by observed_at, tool_call_id, agent_execution_id.", False),
    _c("AC-14", "rows", "The three-column key is unique (same rule as AC-3, as a constraint)."),
    _c("AC-16", "rows", "Deleting a session cascades: no orphan subagent rows."),
    _c("AC-17", "migration", "A store predating the feature gets the table, indexes, constraints."),
    _c("AC-18", "migration", "A second migration run changes nothing.", False),
    _c("AC-19", "migration", "PostgreSQL and SQLite reach identical results.", False),
    _c("AC-20", "migration", "Migration errors are logged at WARN and boot continues.", False),
    _c("AC-21", "backfill", "Backfill copies subagent_task messages with all three identities."),
    _c("AC-21a", "backfill", "Messages missing an identity are skipped, never fail the backfill."),
    _c("AC-21b", "backfill", "Several messages per key: newest created_at, then greatest id wins."),
    _c("AC-22", "backfill", "ON CONFLICT DO NOTHING: a live row wins, a replay is a no-op.", False),
    _c("AC-23a", "backfill", "settled_at is the message's updated_at iff tool_status is terminal."),
    _c("AC-23b", "backfill", "NULL, '' and 'null' metadata read as {} and abort nothing."),
    _c("AC-24", "activation", "Each activation key is written once and never overwritten."),
    _c("AC-24a", "activation", "No backfill key after a failed backfill; the retry stays open."),
    _c("AC-24b", "activation", "capture_since without execution_since: no execution id trusted."),
    _c("AC-24c", "activation", "Four states of (capture_since, execution_since) presence."),
    _c(
        "AC-24d", "activation", "The backfill and both of its keys commit atomically: no half pair."
    ),
    _c("AC-24e", "activation", "Keys compare to columns as exact instants, to the microsecond."),
    _c("AC-24f", "activation", "backfill_through = '' means nothing matched; never an instant."),
    _c("AC-25", "activation", "Consumers disclose the backfill/live and execution-identity split."),
    _c("AC-26", "health", "Writer health is answerable from the database alone."),
    _c("AC-27", "health", "Shortfall and excess are separate directed differences of keys."),
    _c("AC-28", "health", "The comparison is scoped at capture_since, bound exactly."),
    _c(
        "AC-28a",
        "health",
        "Without capture_since the comparison does not run; absence is the signal.",
    ),
    _c("AC-28b", "health", "A shortfall is read in one statement or confirmed by a second read."),
    _c("AC-29", "health", "Attribution is MAX(observed_at) since capture_since; NULL is an alarm."),
    _c("§1-is-async", "rows", "is_async is 0 or 1 (sticky once 1); the contract gives no AC id."),
    _c(
        "§1-timestamps",
        "rows",
        "Timestamps are instants a clock wrote: none infinite or after now + 1 day (no AC id).",
    ),
    _c("§2-empty-text", "rows", "'' is stored as NULL in every nullable TEXT column (no AC id)."),
    _c(
        "§2-timestamps", "rows", "observed_at <= updated_at and <= settled_at where set (no AC id)."
    ),
    _c("AC-30", "rows", "agent_execution_id is never NULL and never ''."),
    _c("AC-31", "rows", "agent_execution_id is a UUID or the single sentinel 'unknown'."),
    _c("AC-32", "rows", "Rows differing only in execution id are legitimate, not duplicates."),
    _c("AC-33", "schema", "The amended shape: column NOT NULL, 3-column UNIQUE, indexes intact."),
    _c("AC-33a", "schema", "A failed upgrade leaves the old table whole and no execution_since."),
    _c("AC-33b", "schema", "execution_since is written whenever the amended shape is observed."),
    _c("AC-33c", "migration", "Shape change and its key precede the backfill in one run.", False),
    _c("AC-34", "migration", "Re-running the migration leaves the end state in place.", False),
)

BY_ID = {criterion.ac: criterion for criterion in CRITERIA}
