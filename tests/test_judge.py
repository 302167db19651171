"""Each expectation's ``judge(facts)`` on facts built by hand: no store, no GX run.

The end-to-end tests drive real stores through GX; these pin each rule's own logic (pass and
fail, and "not applicable" where a rule has it) in milliseconds. Families whose classes share
one ``judge`` are parametrised over every class of the family.
"""

from __future__ import annotations

import pytest

from kandev_dq.expectations import activation, backfill, health, rows, stored_text
from kandev_dq.expectations.base import KandevExpectation

OFFENDING = {"count": 2, "sample": [{"id": "r1"}, {"id": "r2"}]}
CLEAN = {"count": 0, "sample": []}


def _sharing_judge(module, base) -> list[type[KandevExpectation]]:
    return [
        cls
        for cls in vars(module).values()
        if isinstance(cls, type)
        and issubclass(cls, base)
        and cls is not base
        and cls.judge is base.judge
    ]


ROW_RULES = _sharing_judge(rows, rows._RowExpectation)
BACKFILL_RULES = [c for c in _sharing_judge(backfill, backfill._BackfillExpectation) if c.family]


def _row_facts(rule: str, part: dict, **extra) -> dict:
    return {"table_exists": True, "amended": True, "rules": {rule: part}, **extra}


@pytest.mark.parametrize("cls", ROW_RULES, ids=lambda c: c.__name__)
def test_a_row_rule_passes_on_no_offence_and_fails_with_its_sample(cls):
    rule = cls.at_default_severity()
    passed = rule.judge(_row_facts(cls.rule, CLEAN))
    assert passed.success and passed.unexpected_count == 0
    failed = rule.judge(_row_facts(cls.rule, OFFENDING))
    assert not failed.success
    assert failed.unexpected_count == 2
    assert failed.sample == OFFENDING["sample"]
    assert failed.message.startswith("2 ")


@pytest.mark.parametrize("cls", ROW_RULES, ids=lambda c: c.__name__)
def test_a_row_rule_does_not_apply_without_the_table(cls):
    finding = cls.at_default_severity().judge({"table_exists": False, "amended": False})
    assert finding.success and finding.observed_value == "not applicable"


def test_an_execution_id_rule_does_not_apply_to_a_pre_amendment_table():
    needing = [c for c in ROW_RULES if c.needs_execution_column]
    assert needing
    for cls in needing:
        finding = cls.at_default_severity().judge(
            {"table_exists": True, "amended": False, "rules": {cls.rule: OFFENDING}}
        )
        assert finding.success and finding.observed_value == "not applicable"


def _backfill_facts(family: str, part: dict, *, rows_present: int = 1) -> dict:
    families = {name: CLEAN for name in ("identity", "relabelled")}
    families[family] = part
    return {"evaluable": True, "reason": "", "backfill_rows": rows_present, "families": families}


@pytest.mark.parametrize("cls", BACKFILL_RULES, ids=lambda c: c.__name__)
def test_a_backfill_rule_passes_on_no_offence_and_fails_with_its_sample(cls):
    rule = cls.at_default_severity()
    assert rule.judge(_backfill_facts(cls.family, CLEAN)).success
    failed = rule.judge(_backfill_facts(cls.family, OFFENDING))
    assert not failed.success
    assert (failed.unexpected_count, failed.sample) == (2, OFFENDING["sample"])


@pytest.mark.parametrize("cls", BACKFILL_RULES, ids=lambda c: c.__name__)
def test_a_backfill_rule_is_not_evaluated_when_the_facts_are_not(cls):
    facts = {"evaluable": False, "reason": "the table lacks a column"}
    finding = cls.at_default_severity().judge(facts)
    assert finding.success and finding.observed_value == "not evaluated"
    assert "the table lacks a column" in finding.message


def test_a_backfill_rule_has_nothing_to_compare_without_backfill_rows():
    cls = next(c for c in BACKFILL_RULES if c.family != "relabelled")
    finding = cls.at_default_severity().judge(_backfill_facts(cls.family, CLEAN, rows_present=0))
    assert finding.success and finding.observed_value == 0


@pytest.mark.parametrize("window", [0, -1, 24 * 60 + 1])
def test_the_window_is_bounded_when_the_expectation_is_built(window):
    cls = BACKFILL_RULES[0]
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
    finding = SHORTFALL.at_default_severity().judge(_health_facts(CLEAN))
    assert finding.success and finding.unexpected_count == 0


def test_the_shortfall_rule_fails_on_a_missing_row_and_names_it():
    finding = SHORTFALL.at_default_severity().judge(_health_facts(OFFENDING))
    assert not finding.success
    assert (finding.unexpected_count, finding.sample) == (2, OFFENDING["sample"])


def test_the_shortfall_rule_fails_when_the_comparison_cannot_run():
    facts = {"not_run": "capture_since is absent", "capture_since": None}
    finding = SHORTFALL.at_default_severity().judge(facts)
    assert not finding.success and finding.observed_value == "not run"


METADATA = stored_text.ExpectMessageMetadataToBeJson


def test_metadata_that_is_json_passes_and_unreadable_metadata_fails():
    assert METADATA.at_default_severity().judge({"metadata": CLEAN}).success
    failed = METADATA.at_default_severity().judge({"metadata": OFFENDING})
    assert not failed.success and failed.unexpected_count == 2


def test_repeated_member_names_are_named_with_their_messages():
    rule = stored_text.ExpectMessageMetadataMemberNamesToBeUnique.at_default_severity()
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
    assert TIMESTAMPS.at_default_severity().judge(facts).success is success


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
    rule = STATE.at_default_severity(accepted_states=["fully_activated"])
    full = _activation_facts("fully_activated", amended=True, execution_since="2026-07-30T01Z")
    assert rule.judge(full).success
    failed = rule.judge(_activation_facts("capture_only", amended=True, execution_since=None))
    assert not failed.success and failed.unexpected_count == 1
    assert "AC-33b self-heal case" in failed.message and "kandev-dq migrate" in failed.message
    unamended = rule.judge(_activation_facts("capture_only", amended=False, execution_since=None))
    assert "self-heal" not in unamended.message and "amends it" in unamended.message


def test_a_pending_self_heal_is_a_warning_naming_the_command():
    rule = activation.ExpectExecutionSinceNotPendingSelfHeal.at_default_severity()
    pending = rule.judge(_activation_facts("capture_only", amended=True, execution_since=None))
    assert not pending.success and "`kandev-dq migrate`" in pending.message
    unamended = _activation_facts("capture_only", amended=False, execution_since=None)
    assert rule.judge(unamended).success
