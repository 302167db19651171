"""Which expectation runs in which suite, at which severity, citing which ACs: read without GX.

``kandev-dq rules`` prints its table from here and the catalogue, and ``kandev-dq init`` writes
the suites from here (:func:`kandev_dq.project.plan.suite_plan`), so neither needs GX (slow to
import) nor a project. Each expectation's severity and AC ids are declared here once, in its
full-read suite: a live suite running it takes the same, and its verdict
(:mod:`kandev_dq.verdicts`) and GX class read them from :func:`indexed`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kandev_dq.contract.severity import Severity

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


@dataclass(frozen=True)
class IndexedRule:
    expectation: str
    suite: str
    #: kandev-dq's word (a :class:`Severity` in this index; a project's own word in coverage)
    severity: str
    rules: tuple[str, ...]


#: The GX metric giving the write-once rules (AC-24) this store's key ledger and baseline from the
#: records database: named here because the rules (below the records) depend on it by name.
WRITE_ONCE_LEDGER = "kandev.write_once_ledger"
#: The GX metric deciding a live suite's change window from the records database
#: (:mod:`kandev_dq.gx.live_window`, deciding with :mod:`kandev_dq.records.watermark`); the
#: windowed facts families depend on it by name.
LIVE_WINDOW = "kandev.live_window"
#: The value key naming the live suite whose last stored run starts a windowed family's window
#: (None: everything since capture_since, nightly's read). Its window is :data:`LIVE_WINDOW`,
#: decided once per validation.
LIVE_KEY = "live_window"
#: The details key of a failing live rule's counted sessions, which its next run re-reads
#: (the finding stays open until a run re-reading them finds it gone); or, past the bound,
#: of why none is carried (the next run reads in full).
OPEN_SESSIONS = "open_sessions"
OPEN_SESSIONS_CUT = "open_sessions_cut"


def severity_word(gx_severity: str | None) -> str:
    """kandev-dq's word for a GX severity, as this index writes it: GX's ``critical`` (and no
    severity, GX's default) is ``error``, the word the CLI, the JSON and the docs use;
    ``warning`` and ``info`` stay."""
    return Severity.ERROR.value if gx_severity in (None, "", Severity.ERROR.gx) else gx_severity


def _r(expectation: str, suite: str, severity: Severity, rules: tuple[str, ...]) -> IndexedRule:
    return IndexedRule(expectation, suite, severity, rules)


#: The suites reading everything (nightly's and pre_release's), in suite-file order.
_FULL_READ: tuple[IndexedRule, ...] = (
    _r(
        "expect_activation_keys_to_be_well_formed",
        "activation",
        ERROR,
        ("AC-24e", "AC-24f", "AC-24"),
    ),
    _r("expect_activation_keys_to_be_paired", "activation", ERROR, ("AC-24d", "AC-24a")),
    _r("expect_activation_state_to_be_in_set", "activation", ERROR, ("AC-24c", "AC-24b")),
    _r(
        "expect_execution_since_only_on_amended_schema",
        "activation",
        ERROR,
        ("AC-33b", "AC-33a", "AC-24c"),
    ),
    _r("expect_execution_since_not_pending_self_heal", "activation", WARNING, ("AC-33b",)),
    _r("expect_activation_keys_to_be_write_once", "activation", ERROR, ("AC-24",)),
    _r("expect_write_once_baseline_to_predate_this_run", "activation", INFO, ("AC-24",)),
    _r(
        "expect_backfill_through_not_after_capture_since",
        "activation",
        ERROR,
        ("AC-24", "AC-24d"),
    ),
    _r(
        "expect_backfill_through_to_cover_qualifying_messages",
        "activation",
        ERROR,
        ("AC-24", "AC-24d", "AC-24e", "AC-21"),
    ),
    _r(
        "expect_no_backfill_rows_after_capture_since",
        "activation",
        ERROR,
        ("AC-24", "AC-24e", "AC-25"),
    ),
    _r("expect_no_backfill_rows_after_backfill_through", "activation", INFO, ("AC-24", "AC-24e")),
    _r("expect_no_backfill_rows_under_sentinel", "activation", ERROR, ("AC-24f", "AC-24")),
    _r(
        "expect_no_backfill_rows_inside_sentinel_window",
        "activation",
        WARNING,
        ("AC-24f", "AC-24d"),
    ),
    _r("expect_new_keys_to_carry_subsecond_precision", "activation", ERROR, ("AC-24", "AC-24e")),
    _r("expect_legacy_keys_to_be_disclosed", "activation", INFO, ("AC-24", "AC-24e")),
    _r("expect_population_to_be_disclosed", "activation", INFO, ("AC-25", "AC-32")),
    _r("expect_backfill_reconciliation_not_vacuous", "backfill", WARNING, ("AC-21", "AC-25")),
    _r("expect_backfill_identity_to_match_message", "backfill", ERROR, ("AC-21", "AC-31")),
    _r("expect_backfill_turn_id_to_match_message", "backfill", ERROR, ("AC-2a", "AC-21")),
    _r(
        "expect_backfill_statuses_to_match_message",
        "backfill",
        ERROR,
        ("AC-10", "AC-12", "AC-21"),
    ),
    _r(
        "expect_backfill_metrics_to_match_message",
        "backfill",
        ERROR,
        ("AC-7", "AC-7a", "AC-8", "AC-9"),
    ),
    _r("expect_backfill_text_to_match_message", "backfill", ERROR, ("AC-21", "AC-23b")),
    _r(
        "expect_backfill_observed_at_to_be_message_created_at",
        "backfill",
        ERROR,
        ("AC-1a", "AC-24e"),
    ),
    _r("expect_backfill_settled_at_to_follow_tool_status", "backfill", ERROR, ("AC-23a", "AC-11")),
    _r("expect_backfill_rows_from_winning_message", "backfill", ERROR, ("AC-21b",)),
    _r(
        "expect_no_backfill_rows_without_qualifying_message",
        "backfill",
        ERROR,
        ("AC-21a", "AC-21"),
    ),
    _r("expect_no_backfill_rows_relabelled_live", "backfill", WARNING, ("AC-1",)),
    _r("expect_subagent_rows_to_have_identity", "rows", ERROR, ("AC-2",)),
    _r("expect_subagent_key_to_be_unique", "rows", ERROR, ("AC-3", "AC-14", "AC-32")),
    _r("expect_agent_execution_id_to_be_present", "rows", ERROR, ("AC-30",)),
    _r("expect_agent_execution_id_to_be_uuid_or_unknown", "rows", ERROR, ("AC-31",)),
    _r("expect_subagent_source_to_be_live_or_backfill", "rows", ERROR, ("AC-1",)),
    _r("expect_backfill_rows_to_carry_unknown_execution", "rows", ERROR, ("AC-31", "AC-25")),
    _r("expect_no_empty_strings_in_nullable_text", "rows", ERROR, ("§2-empty-text",)),
    _r("expect_no_negative_metrics", "rows", ERROR, ("AC-9",)),
    _r("expect_no_zero_tokens_or_duration", "rows", ERROR, ("AC-7a", "AC-8")),
    _r("expect_async_launched_rows_to_have_no_metrics", "rows", ERROR, ("AC-7",)),
    _r("expect_settled_at_iff_terminal_tool_status", "rows", ERROR, ("AC-11", "AC-10", "AC-23a")),
    _r("expect_tool_status_in_acp_vocabulary", "rows", ERROR, ("AC-12", "AC-10")),
    _r(
        "expect_observed_at_not_after_updated_or_settled",
        "rows",
        ERROR,
        ("§2-timestamps", "AC-1a"),
    ),
    _r("expect_no_orphan_subagent_rows", "rows", ERROR, ("AC-16",)),
    _r("expect_is_async_to_be_zero_or_one", "rows", ERROR, ("§1-is-async",)),
    _r("expect_subagent_rows_when_qualifying_messages_exist", "rows", WARNING, ("AC-21", "AC-26")),
    _r("expect_completed_rows_to_report_metrics", "rows", INFO, ("AC-7", "AC-8")),
    _r("expect_timestamps_in_recognised_utc_form", "rows", ERROR, ("AC-24e",)),
    _r("expect_timestamps_to_be_within_range", "rows", ERROR, ("§1-timestamps", "AC-24e")),
    _r("expect_subagents_table_to_exist", "schema", ERROR, ("AC-17",)),
    _r("expect_execution_column_to_be_not_null", "schema", ERROR, ("AC-33", "AC-30")),
    _r("expect_three_column_unique_key", "schema", ERROR, ("AC-33", "AC-14", "AC-3")),
    _r("expect_no_two_column_unique_key", "schema", ERROR, ("AC-33", "AC-32")),
    _r("expect_secondary_indexes_as_fresh_store", "schema", ERROR, ("AC-33", "AC-17")),
    _r("expect_no_partial_subagents_upgrade", "schema", ERROR, ("AC-33a", "AC-33")),
    _r("expect_session_foreign_key_to_cascade", "schema", ERROR, ("AC-16",)),
    _r("expect_no_foreign_key_on_turn_or_execution", "schema", ERROR, ("AC-17", "AC-2a", "AC-31")),
    _r(
        "expect_no_writer_shortfall_since_capture_since",
        "writer_health",
        ERROR,
        ("AC-26", "AC-27", "AC-28", "AC-28a", "AC-28b", "AC-23b"),
    ),
    _r(
        "expect_writer_to_have_written_since_capture_since",
        "writer_health",
        ERROR,
        ("AC-29", "AC-26", "AC-28"),
    ),
    _r(
        "expect_subagent_activity_since_capture_since",
        "writer_health",
        WARNING,
        ("AC-29", "AC-26"),
    ),
    _r(
        "expect_no_writer_excess_since_capture_since",
        "writer_health",
        WARNING,
        ("AC-27", "AC-26", "AC-28"),
    ),
    _r(
        "expect_no_cross_execution_collisions_since_capture_since",
        "writer_health",
        INFO,
        ("AC-27", "AC-32"),
    ),
    _r("expect_message_metadata_to_be_json", "writer_health", WARNING, ("AC-23b",)),
    _r(
        "expect_message_metadata_member_names_to_be_unique",
        "writer_health",
        WARNING,
        ("AC-23b", "AC-19"),
    ),
)


#: The ``live`` suites: each runs rules of a full-read suite, at their severities and AC ids,
#: over what changed since that live suite's last stored run on the store (CONTRACT §2, §5,
#: §6). Only rules whose finding on the changed part is one the whole store also gives: the
#: keys and the schema, writer health's directed differences and AC-29, the per-row rules.
#: (A table-wide disclosure such as "completed rows report metrics" is not judged on a part.)
LIVE_SUITES: dict[str, tuple[str, tuple[str, ...]]] = {
    "live_activation": (
        "activation",
        (
            "expect_activation_keys_to_be_well_formed",
            "expect_activation_keys_to_be_paired",
            "expect_activation_state_to_be_in_set",
            "expect_execution_since_only_on_amended_schema",
            "expect_activation_keys_to_be_write_once",
            "expect_write_once_baseline_to_predate_this_run",
            "expect_backfill_through_not_after_capture_since",
        ),
    ),
    "live_writer_health": (
        "writer_health",
        (
            "expect_no_writer_shortfall_since_capture_since",
            "expect_writer_to_have_written_since_capture_since",
            "expect_subagent_activity_since_capture_since",
            "expect_no_writer_excess_since_capture_since",
        ),
    ),
    "live_rows": (
        "rows",
        tuple(
            rule.expectation
            for rule in _FULL_READ
            if rule.suite == "rows"
            and rule.expectation
            not in (
                # Table-wide: a part of the table may lack what the whole has.
                "expect_subagent_rows_when_qualifying_messages_exist",
                "expect_completed_rows_to_report_metrics",
                # Stored text of every message and row (their own family, read in full).
                "expect_timestamps_in_recognised_utc_form",
                "expect_timestamps_to_be_within_range",
            )
        ),
    ),
}


#: Each rule a live suite runs, under its live suite's name and its full-read suite's, as
#: (full-read suite, expectation): the one finding it is on a store, whichever run judges it
#: (a live run over what changed and its open findings, a full run over everything).
SHARED_RULES: dict[tuple[str, str], tuple[str, str]] = {
    (suite, expectation): (full, expectation)
    for live, (full, expectations) in LIVE_SUITES.items()
    for expectation in expectations
    for suite in (live, full)
}
#: The full-read suite of a live suite, and of itself.
SHARED_SUITES: dict[str, str] = {
    suite: full for live, (full, _) in LIVE_SUITES.items() for suite in (live, full)
}


def _live_rules() -> tuple[IndexedRule, ...]:
    by_name = {(rule.suite, rule.expectation): rule for rule in _FULL_READ}
    return tuple(
        _r(
            expectation,
            live,
            by_name[(full, expectation)].severity,
            by_name[(full, expectation)].rules,
        )
        for live, (full, expectations) in LIVE_SUITES.items()
        for expectation in expectations
    )


#: In suite-file order (suites by name, expectations as each suite lists them). An expectation
#: a live suite runs is listed once per suite.
RULE_INDEX: tuple[IndexedRule, ...] = tuple(
    sorted((*_FULL_READ, *_live_rules()), key=lambda rule: rule.suite)
)
#: Each expectation's own entry, in its full-read suite: the severity and AC ids it has in
#: every suite (a live suite copies them), declared once.
_BY_EXPECTATION: dict[str, IndexedRule] = {rule.expectation: rule for rule in _FULL_READ}


def indexed(expectation: str) -> IndexedRule:
    """``expectation``'s entry in its full-read suite (KeyError for a name the index lacks)."""
    return _BY_EXPECTATION[expectation]


#: The expectations whose class declares ``live_window``: those judging the activation, row
#: and writer-health families of facts, which read a live window (the others read in full).
LIVE_SCOPED: frozenset[str] = frozenset(
    rule.expectation
    for rule in _FULL_READ
    if rule.suite in ("activation", "rows", "writer_health")
    and rule.expectation
    not in (
        "expect_no_backfill_rows_under_sentinel",
        "expect_no_backfill_rows_inside_sentinel_window",
        "expect_population_to_be_disclosed",
        "expect_message_metadata_to_be_json",
        "expect_message_metadata_member_names_to_be_unique",
        "expect_timestamps_in_recognised_utc_form",
        "expect_timestamps_to_be_within_range",
    )
)


#: The tables each suite's rules read, as its data docs name its "data asset" (GX's one asset,
#: ``kandev_meta``, is only the batch every suite is run against).
SUITE_TABLES: dict[str, tuple[str, ...]] = {
    "activation": ("kandev_meta", "task_session_subagents", "task_session_messages"),
    "backfill": ("task_session_subagents", "task_session_messages", "kandev_meta"),
    "rows": ("task_session_subagents", "task_session_messages", "task_sessions"),
    "schema": ("task_session_subagents",),
    "writer_health": ("task_session_subagents", "task_session_messages", "kandev_meta"),
    "live_activation": ("kandev_meta", "task_session_subagents"),
    "live_rows": ("task_session_subagents", "task_sessions"),
    "live_writer_health": ("task_session_messages", "task_session_subagents", "kandev_meta"),
}


#: Each rule's one sentence: what it checks, as ``rules``, ``explain``, the data docs and the
#: rule's verdict (:class:`kandev_dq.verdicts.base.Verdict` takes it from here, and its GX
#: class from the verdict) say it, read without GX.
RULE_SENTENCES: dict[str, str] = {
    "expect_activation_keys_to_be_well_formed": (
        "Present keys are RFC3339 instants (backfill_through may be '')"
    ),
    "expect_activation_keys_to_be_paired": (
        "capture_since and backfill_through are both present or both absent"
    ),
    "expect_activation_state_to_be_in_set": (
        "The store's activation state (AC-24c) is an accepted one"
    ),
    "expect_execution_since_only_on_amended_schema": (
        "execution_since is written only over the amended schema"
    ),
    "expect_execution_since_not_pending_self_heal": (
        "execution_since is present whenever the amended schema holds"
    ),
    "expect_activation_keys_to_be_write_once": (
        "Activation keys are write-once: never rewritten, never deleted"
    ),
    "expect_write_once_baseline_to_predate_this_run": "The write-once baseline predates this run",
    "expect_backfill_through_not_after_capture_since": (
        "backfill_through is not later than capture_since"
    ),
    "expect_backfill_through_to_cover_qualifying_messages": (
        "Every qualifying message up to backfill_through has a row"
    ),
    "expect_no_backfill_rows_after_capture_since": (
        "No backfill row is observed at or after capture_since"
    ),
    "expect_no_backfill_rows_after_backfill_through": (
        "backfill_through is not earlier than the newest backfill row"
    ),
    "expect_no_backfill_rows_under_sentinel": (
        "No backfill rows exist when backfill_through is the '' sentinel"
    ),
    "expect_no_backfill_rows_inside_sentinel_window": (
        "No backfill rows inside the backfill window under the sentinel"
    ),
    "expect_new_keys_to_carry_subsecond_precision": (
        "Keys written by the amended build carry sub-second precision"
    ),
    "expect_legacy_keys_to_be_disclosed": (
        "Legacy second-precision keys are disclosed, never rewritten"
    ),
    "expect_population_to_be_disclosed": (
        "The backfill/live and execution-identity split is disclosed"
    ),
    "expect_backfill_reconciliation_not_vacuous": (
        "The backfill reconciliation has backfill rows to compare"
    ),
    "expect_backfill_identity_to_match_message": (
        "Backfill rows carry their message's task and the 'unknown' id"
    ),
    "expect_backfill_turn_id_to_match_message": (
        "Backfill turn_id is the message's turn_id column ('' as NULL)"
    ),
    "expect_backfill_statuses_to_match_message": (
        "Backfill tool_status/agent_status come from the right fields"
    ),
    "expect_backfill_metrics_to_match_message": (
        "Backfill metrics follow the message and the §2 zero/NULL rules"
    ),
    "expect_backfill_text_to_match_message": (
        "Backfill text fields and is_async follow the message ('' as NULL)"
    ),
    "expect_backfill_observed_at_to_be_message_created_at": (
        "Backfill observed_at equals the message's created_at exactly"
    ),
    "expect_backfill_settled_at_to_follow_tool_status": (
        "Backfill settled_at is the message's updated_at iff terminal"
    ),
    "expect_backfill_rows_from_winning_message": (
        "Backfill rows come from the AC-21b winning message"
    ),
    "expect_no_backfill_rows_without_qualifying_message": (
        "No backfill row without a qualifying message"
    ),
    "expect_no_backfill_rows_relabelled_live": "No backfill row relabelled source='live'",
    "expect_subagent_rows_to_have_identity": (
        "Every row has a non-empty session id, task id and tool_call_id"
    ),
    "expect_subagent_key_to_be_unique": (
        "One row per (task_session_id, agent_execution_id, tool_call_id)"
    ),
    "expect_agent_execution_id_to_be_present": "agent_execution_id is never NULL or ''",
    "expect_agent_execution_id_to_be_uuid_or_unknown": (
        "agent_execution_id is a UUID or the sentinel 'unknown'"
    ),
    "expect_subagent_source_to_be_live_or_backfill": "source is 'live' or 'backfill'",
    "expect_backfill_rows_to_carry_unknown_execution": (
        "Backfill rows carry agent_execution_id 'unknown'"
    ),
    "expect_no_empty_strings_in_nullable_text": (
        "No '' in any nullable TEXT column ('' is stored as NULL)"
    ),
    "expect_no_negative_metrics": "No metric is negative",
    "expect_no_zero_tokens_or_duration": "total_tokens and duration_ms never hold 0",
    "expect_async_launched_rows_to_have_no_metrics": (
        "async_launched rows have all three metrics NULL"
    ),
    "expect_settled_at_iff_terminal_tool_status": "settled_at is set iff tool_status is terminal",
    "expect_tool_status_in_acp_vocabulary": "tool_status is in the closed ACP vocabulary",
    "expect_observed_at_not_after_updated_or_settled": (
        "observed_at is not later than updated_at or settled_at"
    ),
    "expect_no_orphan_subagent_rows": "No subagent row outlives its task session",
    "expect_is_async_to_be_zero_or_one": "is_async is 0 or 1",
    "expect_subagent_rows_when_qualifying_messages_exist": (
        "Subagent rows exist when qualifying subagent messages exist"
    ),
    "expect_completed_rows_to_report_metrics": "Completed subagent rows report metrics",
    "expect_timestamps_in_recognised_utc_form": (
        "Every compared timestamp is stored in a recognised UTC text form"
    ),
    "expect_timestamps_to_be_within_range": (
        "Every compared timestamp lies between 0001-01-02 and now + 1 day"
    ),
    "expect_subagents_table_to_exist": "task_session_subagents exists",
    "expect_execution_column_to_be_not_null": (
        "agent_execution_id is present and NOT NULL (AC-33 clause 1)"
    ),
    "expect_three_column_unique_key": (
        "UNIQUE(task_session_id, agent_execution_id, tool_call_id) exists (AC-33 clause 2)"
    ),
    "expect_no_two_column_unique_key": (
        "No two-column UNIQUE(task_session_id, tool_call_id) remains"
    ),
    "expect_secondary_indexes_as_fresh_store": (
        "The three secondary indexes are as a fresh store has them"
    ),
    "expect_no_partial_subagents_upgrade": (
        "No half-applied upgrade: no partial table, no rebuild table left"
    ),
    "expect_session_foreign_key_to_cascade": (
        "task_session_id references task_sessions(id) ON DELETE CASCADE"
    ),
    "expect_no_foreign_key_on_turn_or_execution": "No foreign key on turn_id or agent_execution_id",
    "expect_no_writer_shortfall_since_capture_since": (
        "Every qualifying subagent message since capture_since has a subagent row (shortfall 0)"
    ),
    "expect_writer_to_have_written_since_capture_since": (
        "The writer has observed a subagent since capture_since when qualifying messages exist"
    ),
    "expect_subagent_activity_since_capture_since": (
        "Some subagent activity has been observed since capture_since"
    ),
    "expect_no_writer_excess_since_capture_since": (
        "Every subagent row since capture_since has a subagent message"
    ),
    "expect_no_cross_execution_collisions_since_capture_since": (
        "Cross-execution collisions since capture_since are disclosed"
    ),
    "expect_message_metadata_to_be_json": (
        "Every message's metadata is JSON (or NULL, '' or 'null')"
    ),
    "expect_message_metadata_member_names_to_be_unique": (
        "No message's metadata repeats a member name the rules read"
    ),
}
