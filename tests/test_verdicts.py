"""Each rule is declared once: its AC ids and severity in the rule index, its judgement in its
verdict, and its GX class only declares the verdict's arguments as fields."""

from __future__ import annotations

import pytest

from kandev_dq.contract.rule_index import LIVE_SUITES, RULE_INDEX, RULE_SENTENCES, indexed
from kandev_dq.contract.severity import Severity
from kandev_dq.verdicts.base import REQUIRED, VERDICTS, expectation_name

NAMES = sorted({rule.expectation for rule in RULE_INDEX})


def test_every_indexed_expectation_has_one_verdict_and_no_verdict_is_unindexed():
    assert sorted(VERDICTS) == NAMES


def test_an_expectation_has_one_severity_and_one_set_of_ac_ids_in_every_suite():
    for rule in RULE_INDEX:
        own = indexed(rule.expectation)
        assert (rule.severity, rule.rules) == (own.severity, own.rules), rule
        assert rule.suite == own.suite or rule.suite in LIVE_SUITES, rule
    full_read = [rule for rule in RULE_INDEX if rule.suite not in LIVE_SUITES]
    assert len(full_read) == len(NAMES), "an expectation is in two full-read suites"


@pytest.mark.parametrize("name", NAMES)
def test_a_verdict_carries_the_index_s_ac_ids_severity_and_sentence(name):
    verdict = VERDICTS[name]
    assert verdict.expectation == name == expectation_name(verdict.__name__)
    assert verdict.rules == indexed(name).rules and verdict.rules
    assert verdict.severity is Severity(indexed(name).severity)
    assert verdict.rule_text == RULE_SENTENCES[name]


def test_gx_derives_the_same_expectation_name_from_a_class_name():
    from great_expectations.util import camel_to_snake

    for verdict in VERDICTS.values():
        assert camel_to_snake(verdict.__name__) == verdict.expectation
    assert expectation_name("ExpectABCToBeUUID") == camel_to_snake("ExpectABCToBeUUID")


@pytest.mark.parametrize("name", NAMES)
def test_the_gx_class_declares_exactly_the_verdict_s_arguments_and_takes_the_rest(name):
    from great_expectations.expectations.expectation import BatchExpectation
    from great_expectations.expectations.registry import get_expectation_impl

    import kandev_dq.expectations  # noqa: F401 - registers the types

    gx_class, verdict = get_expectation_impl(name), VERDICTS[name]
    assert gx_class.__name__ == verdict.__name__ and gx_class.verdict is verdict
    fields = {
        key: field
        for key, field in gx_class.__fields__.items()
        if key not in BatchExpectation.__fields__
    }
    assert set(fields) == set(verdict.arguments)
    for key, default in verdict.arguments.items():
        if default is REQUIRED:
            assert fields[key].required, key
        else:
            assert not fields[key].required and fields[key].default == default, key
    assert gx_class.rules == verdict.rules
    assert gx_class.default_severity.value == verdict.severity.gx
    assert gx_class.facts == verdict.facts.name
    assert gx_class.metric_dependencies == (verdict.facts.name, *verdict.judged_metrics)
    # What the rule checks and why, as help() and GX's tooling read it from the GX class.
    assert gx_class.__doc__ == verdict.__doc__ and gx_class.__doc__.strip()


def test_a_verdict_refuses_an_argument_it_does_not_declare_and_needs_a_required_one():
    with pytest.raises(TypeError, match="takes no argument window_minutes"):
        VERDICTS["expect_no_orphan_subagent_rows"](window_minutes=5)
    with pytest.raises(TypeError, match="needs the argument accepted_states"):
        VERDICTS["expect_activation_state_to_be_in_set"]()
    given = VERDICTS["expect_no_backfill_rows_inside_sentinel_window"](window_minutes=5)
    assert given.params() == {"window_minutes": 5}
    assert VERDICTS["expect_no_backfill_rows_under_sentinel"]().params() == {"window_minutes": 10.0}


def test_severity_words_and_ranks():
    assert [s.value for s in Severity] == ["error", "warning", "info"]
    assert [s.gx for s in Severity] == ["critical", "warning", "info"]
    assert [Severity.rank_of(w) for w in ("error", "warning", "info", "bogus", None)] == [
        0,
        1,
        2,
        3,
        3,
    ]
    assert Severity.from_gx("critical") is Severity.ERROR and Severity.from_gx(None) is (
        Severity.ERROR
    )
    assert Severity.from_gx("warning") is Severity.WARNING


def test_the_rules_a_live_suite_may_scope_are_the_verdicts_taking_a_live_window():
    from kandev_dq.contract.rule_index import LIVE_SCOPED

    taking = {name for name, verdict in VERDICTS.items() if "live_window" in verdict.arguments}
    assert taking == LIVE_SCOPED
    assert {name for names in LIVE_SUITES.values() for name in names[1]} <= taking
