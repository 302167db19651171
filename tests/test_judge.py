"""Each rule's verdict, ``judge(facts)`` on facts built by hand: no store, no GX.

The end-to-end tests drive real stores through GX; these pin each rule's own logic (pass and
fail, and "not applicable" where a rule has it) in milliseconds. Families whose classes share
one ``judge`` are parametrised over every class of the family.
"""

from __future__ import annotations

import pytest

from kandev_dq.contract.instants import BACKFILL_THROUGH, CAPTURE_SINCE, EXECUTION_SINCE
from kandev_dq.facts.activation import describe_key
from kandev_dq.verdicts import activation, backfill, health, rows, schema, stored_text
from kandev_dq.verdicts.base import Verdict

OFFENDING = {"count": 2, "sample": [{"id": "r1"}, {"id": "r2"}]}
CLEAN = {"count": 0, "sample": []}


def _sharing_judge(module, base) -> list[type[Verdict]]:
    return [
        cls
        for cls in vars(module).values()
        if isinstance(cls, type)
        and issubclass(cls, base)
        and cls is not base
        and cls.judge is base.judge
    ]


ROW_RULES = _sharing_judge(rows, rows._RowVerdict)
BACKFILL_RULES = [c for c in _sharing_judge(backfill, backfill._BackfillVerdict) if c.family]


def _row_facts(rule: str, part: dict, **extra) -> dict:
    return {"table_exists": True, "amended": True, "rules": {rule: part}, **extra}


@pytest.mark.parametrize("cls", ROW_RULES, ids=lambda c: c.__name__)
def test_a_row_rule_passes_on_no_offence_and_fails_with_its_sample(cls):
    rule = cls()
    passed = rule.judge(_row_facts(cls.rule, CLEAN))
    assert passed.success and passed.unexpected_count == 0
    failed = rule.judge(_row_facts(cls.rule, OFFENDING))
    assert not failed.success
    assert failed.unexpected_count == 2
    assert failed.sample == OFFENDING["sample"]
    assert failed.message.startswith("2 ")


@pytest.mark.parametrize("cls", ROW_RULES, ids=lambda c: c.__name__)
def test_a_row_rule_does_not_apply_without_the_table(cls):
    finding = cls().judge({"table_exists": False, "amended": False})
    assert finding.success and finding.observed_value == "not applicable"


def test_an_execution_id_rule_does_not_apply_to_a_pre_amendment_table():
    needing = [c for c in ROW_RULES if c.needs_execution_column]
    assert needing
    for cls in needing:
        finding = cls().judge(
            {"table_exists": True, "amended": False, "rules": {cls.rule: OFFENDING}}
        )
        assert finding.success and finding.observed_value == "not applicable"


def _backfill_facts(family: str, part: dict, *, rows_present: int = 1) -> dict:
    families = {name: CLEAN for name in ("identity", "relabelled")}
    families[family] = part
    return {"evaluable": True, "reason": "", "backfill_rows": rows_present, "families": families}


@pytest.mark.parametrize("cls", BACKFILL_RULES, ids=lambda c: c.__name__)
def test_a_backfill_rule_passes_on_no_offence_and_fails_with_its_sample(cls):
    rule = cls()
    assert rule.judge(_backfill_facts(cls.family, CLEAN)).success
    failed = rule.judge(_backfill_facts(cls.family, OFFENDING))
    assert not failed.success
    assert (failed.unexpected_count, failed.sample) == (2, OFFENDING["sample"])


@pytest.mark.parametrize("cls", BACKFILL_RULES, ids=lambda c: c.__name__)
def test_a_backfill_rule_is_not_evaluated_when_the_facts_are_not(cls):
    facts = {"evaluable": False, "reason": "the table lacks a column"}
    finding = cls().judge(facts)
    assert finding.success and finding.observed_value == "not evaluated"
    assert "the table lacks a column" in finding.message


def test_a_backfill_rule_has_nothing_to_compare_without_backfill_rows():
    cls = next(c for c in BACKFILL_RULES if c.family != "relabelled")
    finding = cls().judge(_backfill_facts(cls.family, CLEAN, rows_present=0))
    assert finding.success and finding.observed_value == 0


@pytest.mark.parametrize("window", [0, -1, 24 * 60 + 1])
def test_the_window_is_bounded_when_the_expectation_is_built(window):
    from kandev_dq.expectations import backfill as gx_backfill  # GX declares the bound

    cls = getattr(gx_backfill, BACKFILL_RULES[0].__name__)
    with pytest.raises(ValueError):
        cls.at_default_severity(window_minutes=window)


SHORTFALL = health.ExpectNoWriterShortfallSinceCaptureSince


def _health_facts(part: dict, **extra) -> dict:
    return {
        "not_run": None,
        "capture_since": "2026-07-30T12:00:00Z",
        "since": "2026-07-30T12:00:00.000000000Z",
        "table_exists": True,
        "qualifying_keys": 5,
        "shortfall": part,
        **extra,
    }


def test_the_shortfall_rule_passes_when_every_qualifying_key_has_a_row():
    finding = SHORTFALL().judge(_health_facts(CLEAN))
    assert finding.success and finding.unexpected_count == 0


def test_the_shortfall_rule_fails_on_a_missing_row_and_names_it():
    finding = SHORTFALL().judge(_health_facts(OFFENDING))
    assert not finding.success
    assert (finding.unexpected_count, finding.sample) == (2, OFFENDING["sample"])


def test_the_shortfall_rule_fails_when_the_comparison_cannot_run():
    facts = {"not_run": "capture_since is absent", "capture_since": None}
    finding = SHORTFALL().judge(facts)
    assert not finding.success and finding.observed_value == "not run"


METADATA = stored_text.ExpectMessageMetadataToBeJson


def test_metadata_that_is_json_passes_and_unreadable_metadata_fails():
    assert METADATA().judge({"metadata": CLEAN}).success
    failed = METADATA().judge({"metadata": OFFENDING})
    assert not failed.success and failed.unexpected_count == 2


def test_metadata_not_stored_as_text_is_named_apart_from_text_that_is_not_json():
    """AC-23b: SQLite metadata stored as a BLOB, an integer or a real is named whatever it
    holds, and said apart from text that is not JSON (a BLOB is still read as its text)."""
    rule = METADATA()
    only_bytes = rule.judge({"metadata": {**OFFENDING, "not_text": 2}})
    assert not only_bytes.success and only_bytes.unexpected_count == 2
    assert "2 message(s) hold metadata stored as a BLOB" in only_bytes.message
    assert "not JSON" not in only_bytes.message
    both = rule.judge({"metadata": {**OFFENDING, "not_text": 1}})
    assert "1 message(s) hold metadata text that is not JSON" in both.message
    assert "1 message(s) hold metadata stored as a BLOB" in both.message


def test_repeated_member_names_are_named_with_their_messages():
    rule = stored_text.ExpectMessageMetadataMemberNamesToBeUnique()
    assert rule.judge({"repeated_names": CLEAN}).success
    failed = rule.judge({"repeated_names": OFFENDING})
    assert not failed.success and failed.unexpected_count == 2
    assert failed.sample == OFFENDING["sample"] and "last one winning" in failed.message


TIMESTAMPS = stored_text.ExpectTimestampsInRecognisedUtcForm


@pytest.mark.parametrize(
    "timestamps, success",
    [
        ({"applicable": False}, True),
        ({"applicable": True, "count": 0, "by_column": {}, "sample": []}, True),
        (
            {
                "applicable": True,
                "count": 1,
                "by_column": {"task_session_messages.created_at": 1},
                "sample": [{"id": "m1"}],
            },
            False,
        ),
    ],
)
def test_timestamps_in_a_recognised_utc_form(timestamps, success):
    facts = {"dialect": "sqlite", "timestamps": timestamps}
    assert TIMESTAMPS().judge(facts).success is success


STATE = activation.ExpectActivationStateToBeInSet


def _activation_facts(state: str, *, amended: bool, execution_since: str | None) -> dict:
    return {
        "state": state,
        "amended": amended,
        "keys": {
            "subagent_context_capture_since": "2026-07-30T01:39:37.271235Z",
            "subagent_context_backfill_through": "",
            "subagent_context_execution_since": execution_since,
        },
        "schema_findings": [],
    }


def test_an_accepted_state_passes_and_capture_only_is_explained():
    rule = STATE(accepted_states=["fully_activated"])
    full = _activation_facts("fully_activated", amended=True, execution_since="2026-07-30T01Z")
    assert rule.judge(full).success
    failed = rule.judge(_activation_facts("capture_only", amended=True, execution_since=None))
    assert not failed.success and failed.unexpected_count == 1
    assert "AC-33b self-heal case" in failed.message and "kandev-dq migrate" in failed.message
    unamended = rule.judge(_activation_facts("capture_only", amended=False, execution_since=None))
    assert "self-heal" not in unamended.message and "amends it" in unamended.message


def test_a_pending_self_heal_is_a_warning_naming_the_command():
    rule = activation.ExpectExecutionSinceNotPendingSelfHeal()
    pending = rule.judge(_activation_facts("capture_only", amended=True, execution_since=None))
    assert not pending.success and "`kandev-dq migrate`" in pending.message
    unamended = _activation_facts("capture_only", amended=False, execution_since=None)
    assert rule.judge(unamended).success


CAPTURE = "2026-07-30T01:39:37.271235Z"
THROUGH = "2026-07-30T01:39:30.5Z"
EXECUTION = "2026-07-30T01:39:20.123456789Z"


def _keys_facts(
    capture: str | None = CAPTURE,
    through: str | None = THROUGH,
    execution: str | None = EXECUTION,
    **extra,
) -> dict:
    """Activation facts as :func:`activation_facts` builds them: raw keys and their reading."""
    keys = {CAPTURE_SINCE: capture, BACKFILL_THROUGH: through, EXECUTION_SINCE: execution}
    described = {name: describe_key(name, raw) for name, raw in keys.items()}
    return {"keys": keys, "described": described, "amended": True, "schema_findings": [], **extra}


STORE_SHOWN = "sqlite:////srv/kandev.db"


WRITE_ONCE = activation.ExpectActivationKeysToBeWriteOnce


def _with_ledger(facts: dict, **ledger) -> dict:
    """Facts as a ledger rule judges them: the store's, and the records database's ledger."""
    return facts | {activation.WRITE_ONCE_LEDGER: ledger}


def test_write_once_passes_when_every_key_holds_its_first_value():
    rule = WRITE_ONCE()
    finding = rule.judge(_with_ledger(_keys_facts(), first_seen={CAPTURE_SINCE: CAPTURE}))
    assert finding.success and finding.observed_value == 0


@pytest.mark.parametrize("now", ["2026-07-30T01:39:38Z", None], ids=["rewritten", "deleted"])
def test_write_once_fails_on_a_rewritten_or_deleted_key_naming_both_values(now):
    rule = WRITE_ONCE()
    ledger = {"first_seen": {CAPTURE_SINCE: CAPTURE}, "store": STORE_SHOWN}  # as check names it
    finding = rule.judge(_with_ledger(_keys_facts(capture=now), **ledger))
    assert not finding.success and finding.unexpected_count == 1
    assert finding.sample == [{"key": CAPTURE_SINCE, "first_seen": CAPTURE, "now": now}]
    assert f"{CAPTURE!r} -> {now!r}" in finding.message
    assert "kandev-dq ledger accept --store" in finding.message  # the way out, named (AC-24)
    # ... with this store and this key, never placeholders
    assert f"--store '{STORE_SHOWN}' --key {CAPTURE_SINCE} --reason" in finding.message


BASELINE = activation.ExpectWriteOnceBaselineToPredateThisRun
TAKEN = "2026-11-30T10:00:00.000000Z"


def test_a_baseline_taken_by_this_run_is_disclosed_at_info():
    """AC-24: a first run passes write-once vacuously, and says so."""
    rule = BASELINE()
    baseline = {"taken_at": TAKEN, "source": "run", "recorded_now": True}
    finding = rule.judge(_with_ledger(_keys_facts(), baseline=baseline))
    assert rule.severity.value == "info" and not finding.success
    assert finding.message == (
        "write-once baseline recorded now; rewrites before this run cannot be seen"
    )


def test_an_earlier_baseline_passes_naming_when_it_was_taken():
    """AC-24: with an earlier record of the store, write-once is really judged."""
    rule = BASELINE()
    baseline = {"taken_at": TAKEN, "source": "run", "recorded_now": False}
    finding = rule.judge(_with_ledger(_keys_facts(), baseline=baseline))
    assert finding.success and TAKEN in finding.message


def test_no_baseline_is_disclosed():
    """AC-24: a suite run without a records database has no baseline: never a silent pass."""
    finding = BASELINE().judge(_keys_facts())
    assert not finding.success and finding.observed_value == "no baseline"
    assert "rewrites cannot be seen" in finding.message


def test_write_once_fails_without_a_key_ledger():
    finding = WRITE_ONCE().judge(_keys_facts())
    assert not finding.success and finding.observed_value == "no ledger"
    assert "records database" in finding.message


PAIRED = activation.ExpectActivationKeysToBePaired


@pytest.mark.parametrize(
    "capture, through, observed",
    [
        (CAPTURE, THROUGH, "both present"),
        (CAPTURE, "", "both present"),
        (None, None, "both absent"),
    ],
)
def test_a_whole_key_pair_passes(capture, through, observed):
    finding = PAIRED().judge(_keys_facts(capture, through))
    assert finding.success and finding.observed_value == observed


@pytest.mark.parametrize(
    "capture, through, missing",
    [(CAPTURE, None, BACKFILL_THROUGH), (None, THROUGH, CAPTURE_SINCE)],
)
def test_a_partial_key_pair_fails_naming_the_missing_key(capture, through, missing):
    finding = PAIRED().judge(_keys_facts(capture, through))
    assert not finding.success and finding.unexpected_count == 1
    assert f"{missing} is missing" in finding.message and "kandev-dq migrate" in finding.message


ORDERED = activation.ExpectBackfillThroughNotAfterCaptureSince


@pytest.mark.parametrize("through", [THROUGH, CAPTURE], ids=["earlier", "equal"])
def test_backfill_through_at_or_before_capture_since_passes(through):
    finding = ORDERED().judge(_keys_facts(through=through))
    assert finding.success
    assert finding.observed_value == {"backfill_through": through, "capture_since": CAPTURE}


def test_backfill_through_after_capture_since_fails():
    # One nanosecond later than capture_since: compared exactly (AC-24e).
    later = "2026-07-30T01:39:37.271235001Z"
    finding = ORDERED().judge(_keys_facts(through=later))
    assert not finding.success and finding.unexpected_count == 1
    assert finding.message == "backfill_through is later than capture_since"


@pytest.mark.parametrize("through", ["", None, "yesterday"], ids=["sentinel", "absent", "bad"])
def test_backfill_through_that_is_no_instant_is_not_ordered(through):
    finding = ORDERED().judge(_keys_facts(through=through))
    assert finding.success and finding.observed_value == "not comparable"


ON_AMENDED = activation.ExpectExecutionSinceOnlyOnAmendedSchema


@pytest.mark.parametrize("execution, amended", [(EXECUTION, True), (None, False), (None, True)])
def test_execution_since_agreeing_with_the_schema_passes(execution, amended):
    finding = ON_AMENDED().judge(_keys_facts(execution=execution, amended=amended))
    assert finding.success and finding.observed_value == "consistent"


def test_execution_since_on_a_pre_amendment_table_fails_with_the_schema_findings():
    facts = _keys_facts(amended=False, schema_findings=["agent_execution_id is missing"])
    finding = ON_AMENDED().judge(facts)
    assert not finding.success and finding.unexpected_count == 1
    assert finding.message == "execution_since present but agent_execution_id is missing"
    missing_table = ON_AMENDED().judge(_keys_facts(amended=False))
    assert missing_table.message.endswith("the table is missing")


WELL_FORMED = activation.ExpectActivationKeysToBeWellFormed


def test_instants_and_the_sentinel_are_well_formed():
    finding = WELL_FORMED().judge(_keys_facts(through=""))
    assert finding.success
    assert finding.observed_value == {
        CAPTURE_SINCE: "instant",
        BACKFILL_THROUGH: "sentinel",
        EXECUTION_SINCE: "instant",
    }


@pytest.mark.parametrize(
    "capture, execution",
    [("2026-07-30 01:39:37+00:00", EXECUTION), (CAPTURE, "")],
    ids=["storage form", "sentinel outside backfill_through"],
)
def test_a_malformed_key_fails_naming_it(capture, execution):
    finding = WELL_FORMED().judge(_keys_facts(capture, execution=execution))
    assert not finding.success and finding.unexpected_count == 1
    (bad,) = finding.sample
    assert bad["key"] in (CAPTURE_SINCE, EXECUTION_SINCE) and bad["value"] in (capture, execution)
    assert finding.message.startswith(f"malformed key: {bad['key']}: ")


SUBSECOND = activation.ExpectNewKeysToCarrySubsecondPrecision
LEGACY = activation.ExpectLegacyKeysToBeDisclosed


@pytest.mark.parametrize(
    "keys, amended_build, legacy",
    [
        ({}, [], []),
        # A whole-second backfill key wholly before execution_since: the pre-amendment build's.
        (
            {"capture": "2026-07-30T01:39:10Z", "through": "2026-07-30T01:39:09Z"},
            [],
            [
                CAPTURE_SINCE,
                BACKFILL_THROUGH,
            ],
        ),
        # Reaching execution_since's second: written by the amended build (AC-33c order).
        ({"capture": "2026-07-30T01:39:20Z"}, [CAPTURE_SINCE], []),
        ({"execution": "2026-07-30T01:39:20Z"}, [EXECUTION_SINCE], []),
        ({"capture": "2026-07-30T01:39:37Z", "execution": None}, [], [CAPTURE_SINCE]),
    ],
    ids=["sub-second", "legacy", "backfill key after amendment", "execution_since", "no exec"],
)
def test_second_precision_keys_are_split_between_the_two_builds(keys, amended_build, legacy):
    facts = _keys_facts(**keys)
    new = SUBSECOND().judge(facts)
    assert new.success is not amended_build and new.observed_value == amended_build
    if amended_build:
        assert new.unexpected_count == len(amended_build) and "RFC3339Nano" in new.message
    old = LEGACY().judge(facts)
    assert old.success is not legacy and old.observed_value == legacy
    if legacy:
        assert old.unexpected_count == len(legacy) and "never rewrite" in old.message


COUNTED_ACTIVATION_RULES = [
    (
        activation.ExpectBackfillThroughToCoverQualifyingMessages,
        "uncovered_messages",
        "over-claims",
    ),
    (activation.ExpectNoBackfillRowsAfterCaptureSince, "backfill_after_capture", "too early"),
    (activation.ExpectNoBackfillRowsAfterBackfillThrough, "backfill_after_through", "under-claims"),
]


@pytest.mark.parametrize(
    "cls, part_name, fix", COUNTED_ACTIVATION_RULES, ids=lambda v: getattr(v, "__name__", v)
)
def test_a_counted_activation_rule_passes_clean_and_fails_with_its_sample(cls, part_name, fix):
    rule = cls()
    clean = rule.judge(_keys_facts(**{part_name: CLEAN}))
    assert clean.success and clean.unexpected_count == 0 and clean.message.startswith("no ")
    # Without the key the facts carry no part: nothing can offend.
    assert rule.judge(_keys_facts()).success
    failed = rule.judge(_keys_facts(**{part_name: OFFENDING}))
    assert not failed.success
    assert (failed.unexpected_count, failed.sample) == (2, OFFENDING["sample"])
    assert failed.message.startswith("2 ") and fix in failed.message


SENTINEL_RULES = [
    (activation.ExpectNoBackfillRowsUnderSentinel, "outside_window", "matched nothing"),
    (activation.ExpectNoBackfillRowsInsideSentinelWindow, "inside_window", "between the MAX"),
]


@pytest.mark.parametrize(
    "cls, part_name, said", SENTINEL_RULES, ids=lambda v: getattr(v, "__name__", v)
)
def test_a_sentinel_rule_judges_backfill_rows_only_under_the_sentinel(cls, part_name, said):
    rule = cls()
    not_sentinel = rule.judge({"sentinel": False, "table_exists": True})
    assert not_sentinel.success and not_sentinel.observed_value == "not the sentinel"
    facts = {
        "sentinel": True,
        "table_exists": True,
        "inside_window": CLEAN,
        "outside_window": CLEAN,
    }
    assert rule.judge(facts).success
    failed = rule.judge({**facts, part_name: OFFENDING})
    assert not failed.success and failed.unexpected_count == 2 and said in failed.message


def test_a_backfill_row_inside_the_window_is_not_an_error_under_the_sentinel():
    facts = {"sentinel": True, "table_exists": True, "inside_window": OFFENDING}
    assert activation.ExpectNoBackfillRowsUnderSentinel().judge(facts).success


def test_the_population_is_disclosed_and_always_passes():
    population = [
        {"source": "backfill", "rows": 3, "execution_identity": "unknown"},
        {"source": "live", "rows": 4, "execution_identity": "real"},
    ]
    rule = activation.ExpectPopulationToBeDisclosed()
    finding = rule.judge({"table_exists": True, "population": population})
    assert finding.success and finding.observed_value == population
    assert finding.message == "7 rows in 2 population cell(s)"
    empty = rule.judge({"table_exists": False, "population": []})
    assert empty.success and empty.message == "0 rows in 0 population cell(s)"


HEALTH_QUALIFIERS = [
    health.ExpectNoWriterExcessSinceCaptureSince,
    health.ExpectNoCrossExecutionCollisionsSinceCaptureSince,
    health.ExpectWriterToHaveWrittenSinceCaptureSince,
    health.ExpectSubagentActivitySinceCaptureSince,
]


@pytest.mark.parametrize("cls", HEALTH_QUALIFIERS, ids=lambda c: c.__name__)
def test_a_health_rule_passes_as_not_run_leaving_the_failure_to_the_shortfall(cls):
    facts = {"not_run": "capture_since is absent", "capture_since": None, "table_exists": True}
    finding = cls().judge(facts)
    assert finding.success and finding.observed_value == "not run"
    assert "capture_since is absent" in finding.message


@pytest.mark.parametrize(
    "cls", [c for c in HEALTH_QUALIFIERS if c.needs_rows], ids=lambda c: c.__name__
)
def test_a_health_rule_over_rows_does_not_apply_without_the_table(cls):
    finding = cls().judge(_health_facts(CLEAN, table_exists=False))
    assert finding.success and finding.observed_value == "not applicable"


EXCESS = health.ExpectNoWriterExcessSinceCaptureSince


def test_the_excess_rule_passes_without_excess_and_attributes_it_otherwise():
    rule = EXCESS()
    assert rule.judge(_health_facts(CLEAN, excess=CLEAN)).success
    failed = rule.judge(_health_facts(CLEAN, excess=OFFENDING))
    assert not failed.success
    assert (failed.unexpected_count, failed.sample) == (2, OFFENDING["sample"])
    assert "not an alarm" in failed.message


COLLISIONS = health.ExpectNoCrossExecutionCollisionsSinceCaptureSince


def test_collisions_are_rows_over_keys_and_disclosed_with_both_numbers():
    rule = COLLISIONS()
    none = {"count": 0, "rows": 3, "keys": 3, "sample": []}
    passed = rule.judge(_health_facts(CLEAN, collisions=none))
    assert passed.success and passed.details == {"rows": 3, "keys": 3}
    some = {"count": 1, "rows": 4, "keys": 3, "sample": [{"tool_call_id": "t1", "rows": 2}]}
    failed = rule.judge(_health_facts(CLEAN, collisions=some))
    assert not failed.success and failed.unexpected_count == 1
    assert failed.sample == some["sample"] and "4 row(s) over 3 key(s)" in failed.message


WRITTEN = health.ExpectWriterToHaveWrittenSinceCaptureSince
ACTIVITY = health.ExpectSubagentActivitySinceCaptureSince
LATEST = "2026-07-30T12:05:00.000000Z"


@pytest.mark.parametrize(
    "latest, qualifying, skipped, written, active",
    [
        (LATEST, 5, 0, True, True),
        (None, 5, 0, False, True),  # traffic and no row: the error rule's case, once
        (None, 0, 0, True, False),  # a quiet store: unproven, a warning
        (None, 0, 2, True, False),
    ],
    ids=["written", "stopped with traffic", "quiet", "only unidentified messages"],
)
def test_the_scoped_max_is_never_read_as_healthy_when_null(
    latest, qualifying, skipped, written, active
):
    facts = _health_facts(
        CLEAN, latest_observed_at=latest, qualifying_keys=qualifying, subagent_messages=skipped
    )
    has_written = WRITTEN().judge(facts)
    assert has_written.success is written and has_written.observed_value == latest
    if not written:
        assert has_written.unexpected_count == qualifying and "NULL" in has_written.message
    activity = ACTIVITY().judge(facts)
    assert activity.success is active and activity.observed_value == latest
    if not active:
        assert activity.unexpected_count == 1 and "unproven" in activity.message
        assert ("without a full identity" in activity.message) is bool(skipped)


def test_the_shortfall_says_when_the_table_itself_is_missing():
    facts = _health_facts(OFFENDING, table_exists=False)
    finding = SHORTFALL().judge(facts)
    assert not finding.success and "task_session_subagents is missing" in finding.message
    assert finding.details["table_exists"] is False


def _schema_facts(**changes) -> dict:
    """Schema facts as :func:`schema_facts` builds them for a fresh, amended table."""
    fk_session = {
        "columns": ["task_session_id"],
        "references": "task_sessions(id)",
        "on_delete": "CASCADE",
    }
    facts = {
        "table": "task_session_subagents",
        "table_exists": True,
        "shape": "amended",
        "rebuild_table_left": False,
        "rebuild_table": "task_session_subagents_rebuild",
        "execution_column": {"present": True, "nullable": False, "default": None},
        "clause_1": True,
        "unique_keys": [["task_session_id", "agent_execution_id", "tool_call_id"]],
        "clause_2": True,
        "two_column_unique_remains": False,
        "pure_pre_amendment": False,
        "clauses_1_to_3": True,
        "indexes": {"expected": {}, "missing": {}, "misshapen": {}, "unexpected": {}},
        "clause_4": True,
        "foreign_keys": [fk_session],
        "session_fk_cascades": True,
        "forbidden_foreign_keys": [],
        "no_fk_columns": ["turn_id", "agent_execution_id"],
    }
    return {**facts, **changes}


FK_ON_TURN = {"columns": ["turn_id"], "references": "task_turns(id)", "on_delete": "NO ACTION"}
SCHEMA_FAILURES = [
    (
        schema.ExpectExecutionColumnToBeNotNull,
        {"clause_1": False, "execution_column": {"present": True, "nullable": True}},
        "agent_execution_id is nullable (AC-33 clause 1)",
    ),
    (
        schema.ExpectExecutionColumnToBeNotNull,
        {"clause_1": False, "execution_column": {"present": False, "nullable": None}},
        "agent_execution_id is missing (AC-33 clause 1)",
    ),
    (
        schema.ExpectThreeColumnUniqueKey,
        {"clause_2": False, "unique_keys": [["task_session_id", "tool_call_id"]]},
        "no UNIQUE(task_session_id, agent_execution_id, tool_call_id) in that column order",
    ),
    (
        schema.ExpectNoTwoColumnUniqueKey,
        {"two_column_unique_remains": True},
        "UNIQUE(task_session_id, tool_call_id) remains (AC-33 clause 3)",
    ),
    (
        schema.ExpectSecondaryIndexesAsFreshStore,
        {
            "indexes": {
                "expected": {},
                "missing": {"idx_a": ["task_session_id"]},
                "misshapen": {"idx_b": {"columns": ["turn_id"], "unique": True, "partial": True}},
                "unexpected": {},
            }
        },
        "idx_a(task_session_id) is missing; idx_b is partial unique on (turn_id) (AC-33 clause 4)",
    ),
    (
        schema.ExpectSessionForeignKeyToCascade,
        {
            "session_fk_cascades": False,
            "foreign_keys": [
                {
                    "columns": ["task_session_id"],
                    "references": "task_sessions(id)",
                    "on_delete": "NO ACTION",
                }
            ],
        },
        "no cascading session foreign key: it is ON DELETE NO ACTION (AC-16)",
    ),
    (
        schema.ExpectSessionForeignKeyToCascade,
        {"session_fk_cascades": False, "foreign_keys": []},
        "no cascading session foreign key: there is no foreign key on task_session_id (AC-16)",
    ),
    (
        schema.ExpectNoForeignKeyOnTurnOrExecution,
        {"forbidden_foreign_keys": [FK_ON_TURN]},
        "forbidden foreign key(s): (turn_id) -> task_turns(id)",
    ),
    (
        schema.ExpectNoPartialSubagentsUpgrade,
        {"rebuild_table_left": True},
        "the rebuild table task_session_subagents_rebuild is left behind (AC-33a)",
    ),
    (
        schema.ExpectNoPartialSubagentsUpgrade,
        {"clauses_1_to_3": False, "shape": "half-amended"},
        "task_session_subagents is half-amended (AC-33a)",
    ),
]
SCHEMA_RULES = sorted({cls for cls, _, _ in SCHEMA_FAILURES}, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", SCHEMA_RULES, ids=lambda c: c.__name__)
def test_a_schema_rule_passes_on_a_fresh_amended_table(cls):
    finding = cls().judge(_schema_facts())
    assert finding.success and finding.unexpected_count is None


@pytest.mark.parametrize(
    "cls, changes, message", SCHEMA_FAILURES, ids=lambda v: getattr(v, "__name__", "")
)
def test_a_schema_rule_fails_naming_what_is_wrong(cls, changes, message):
    finding = cls().judge(_schema_facts(**changes))
    assert not finding.success and finding.unexpected_count >= 1
    assert message in finding.message


def test_every_schema_rule_is_tested():
    classes = {
        cls
        for cls in vars(schema).values()
        if isinstance(cls, type) and issubclass(cls, Verdict) and cls.rules
    }
    assert classes == {*SCHEMA_RULES, schema.ExpectSubagentsTableToExist}


def test_an_extra_index_is_reported_and_does_not_fail():
    indexes = {"expected": {}, "missing": {}, "misshapen": {}, "unexpected": {"idx_x": {}}}
    rule = schema.ExpectSecondaryIndexesAsFreshStore()
    finding = rule.judge(_schema_facts(indexes=indexes))
    assert finding.success and "extra index(es), not required: idx_x" in finding.message


def test_a_pre_amendment_table_is_no_partial_upgrade():
    facts = _schema_facts(clauses_1_to_3=False, pure_pre_amendment=True, shape="pre-amendment")
    assert schema.ExpectNoPartialSubagentsUpgrade().judge(facts).success


ABSENT_TABLE = {"table": "task_session_subagents", "table_exists": False, "shape": "absent"}


def test_the_table_rule_fails_without_the_table_and_passes_with_it():
    rule = schema.ExpectSubagentsTableToExist()
    present = rule.judge(_schema_facts())
    assert present.success and present.observed_value == "amended"
    absent = rule.judge({**ABSENT_TABLE, "rebuild_table_left": False})
    assert not absent.success and absent.unexpected_count == 1
    assert "run `kandev-dq migrate` (AC-17)" in absent.message


@pytest.mark.parametrize(
    "cls",
    [c for c in SCHEMA_RULES if c is not schema.ExpectNoPartialSubagentsUpgrade],
    ids=lambda c: c.__name__,
)
def test_a_clause_rule_cannot_hold_without_the_table(cls):
    finding = cls().judge(ABSENT_TABLE)
    assert not finding.success and finding.observed_value == "table absent"
    assert finding.message == "task_session_subagents does not exist: this cannot hold"
