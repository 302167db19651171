"""What every rule's verdict shares, without GX: findings, facts families, the verdict class.

A *family of facts* (activation, health, rows, schema, backfill, stored text) is one compute
function of :mod:`kandev_dq.facts` with the value keys it takes; every rule judging it reads
the same facts. A rule's verdict is one class here, keyed by its expectation's name (the GX
type name, derived from the class name as GX derives it): the family it judges, the arguments
it declares (with their defaults), and ``judge`` turning facts into a :class:`Finding`. Its
AC ids, severity and sentence come from the rule index (:mod:`kandev_dq.contract.rule_index`),
declared once. The GX expectation of the same name (:mod:`kandev_dq.expectations`) delegates
to it; ``kandev-dq explain`` judges with it directly, so describing a rule never imports GX.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from kandev_dq.contract.rule_index import RULE_SENTENCES, indexed
from kandev_dq.contract.severity import Severity
from kandev_dq.contract.thresholds import DETAILS_KEY, CountThresholds
from kandev_dq.sql.listing import Listing
from kandev_dq.sql.scan import Part


@dataclass(frozen=True)
class Family:
    """One family of facts: ``compute(conn, **params)``, ``params`` being its value keys.

    ``name`` is the GX metric computing it in a run; a ``windowed`` family also reads a live
    suite's change window when a run gives it one (:mod:`kandev_dq.records.watermark`)."""

    name: str
    compute: Callable[..., Mapping[str, Any]]
    value_keys: tuple[str, ...] = ()
    windowed: bool = False

    def key(self, params: Mapping[str, Any]) -> str:
        """The family read with ``params``, as a snapshot's cache of facts names it: a check
        and ``explain`` reading the same family in one snapshot read it once."""
        return self.name + repr(sorted(params.items()))


@dataclass(kw_only=True)
class Finding:
    """One rule's verdict on one snapshot."""

    success: bool
    observed_value: Any
    message: str
    unexpected_count: int | None = None
    sample: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    #: The query listing every counted item, for a rule that counts rows, messages or keys.
    listing: Listing | None = None


def counted(facts_part: Part | None, noun: str, fix: str) -> Finding:
    """The common shape: ``count`` offending rows with a capped ``sample`` of them."""
    part = facts_part or {"count": 0, "sample": []}
    count = part["count"]
    message = f"no {noun}" if not count else f"{count} {noun}; {fix}"
    return Finding(
        success=count == 0,
        observed_value=count,
        message=message,
        unexpected_count=count,
        sample=part["sample"],
        listing=part.get("listing"),
    )


def within_thresholds(found: Finding, thresholds: CountThresholds | None) -> Finding:
    """``found`` judged by a suite entry's count thresholds (:mod:`kandev_dq.contract.thresholds`)
    where its count alone decided it; a verdict reached on other grounds (a missing table, a
    state) stands. A rule counting nothing cannot take thresholds: it fails, saying so."""
    if thresholds is None:
        return found
    count = found.unexpected_count
    said = {"warn_if": str(thresholds.warn_if), "error_if": str(thresholds.error_if)}
    judged = replace(found, details={**found.details})
    if count is None:
        judged.success = False
        judged.message = (
            f"{thresholds.text()} given, but this rule counts nothing to compare with them: "
            "take them off its suite entry"
        )
        judged.details[DETAILS_KEY] = {**said, "fired": None}
        return judged
    if found.success != (count == 0):
        judged.details[DETAILS_KEY] = {**said, "fired": None}
        return judged
    fired = thresholds.fired(count)
    judged.success = fired is None
    judged.details[DETAILS_KEY] = {**said, "fired": fired}
    if fired is not None:
        judged.message = f"{found.message} ({fired} {said[fired]} holds)"
    elif count:
        judged.message = f"{found.message} (within the thresholds: {thresholds.text()})"
    return judged


def expectation_name(class_name: str) -> str:
    """The expectation type GX derives from a class name (``great_expectations.util``'s
    ``camel_to_snake``, the same two substitutions)."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", class_name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


#: An argument a suite must give (no default), e.g. the accepted activation states.
REQUIRED: Any = object()

#: Every rule's verdict class by its expectation's name.
VERDICTS: dict[str, type[Verdict]] = {}


class Verdict:
    """One rule's judgement. A class named ``Expect...`` is a rule, registered in
    :data:`VERDICTS` under its expectation name with its AC ids, severity and sentence from the
    rule index; any other is a base its rules share."""

    #: The family of facts the rule judges.
    facts: ClassVar[Family]
    #: Further metrics of a run the rule judges (by name), handed to ``judge`` beside the facts.
    judged_metrics: ClassVar[tuple[str, ...]] = ()
    #: The arguments the rule takes, with their defaults (:data:`REQUIRED`: no default); the
    #: family's value keys among them are passed to its compute function.
    arguments: ClassVar[dict[str, Any]] = {}
    expectation: ClassVar[str] = ""
    rules: ClassVar[tuple[str, ...]] = ()
    severity: ClassVar[Severity] = Severity.ERROR
    rule_text: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("Expect"):
            return
        cls.expectation = expectation_name(cls.__name__)
        entry = indexed(cls.expectation)
        cls.rules = entry.rules
        cls.severity = Severity(entry.severity)
        cls.rule_text = RULE_SENTENCES[cls.expectation]
        VERDICTS[cls.expectation] = cls

    def __init__(self, **given: Any) -> None:
        unknown = set(given) - set(self.arguments)
        if unknown:
            raise TypeError(f"{self.expectation} takes no argument {', '.join(sorted(unknown))}")
        for name, default in self.arguments.items():
            value = given.get(name, default)
            if value is REQUIRED:
                raise TypeError(f"{self.expectation} needs the argument {name}")
            setattr(self, name, copy.deepcopy(value))

    def params(self) -> dict[str, Any]:
        """The value keys the rule's family of facts takes, as this verdict's arguments."""
        return {key: getattr(self, key) for key in self.facts.value_keys}

    def judge(self, facts: Any) -> Finding:
        raise NotImplementedError

    def listing(self, facts: Any) -> Listing | None:
        """The query listing every item this rule counts, where its judge did not attach it
        (a rule that counts no rows has none)."""
        return None

    def counted_part(self, facts: Any) -> Part | None:
        """The part of ``facts`` whose items this rule counts, where they are one part: on a
        ``live`` read it carries their sessions, which stay open while the rule fails."""
        return None

    def finding(self, facts: Any) -> Finding:
        """The verdict on ``facts``, carrying the rule's listing query whether or not it failed."""
        found = self.judge(facts)
        if found.listing is None:
            found.listing = self.listing(facts)
        return found


class LiveScopedVerdict(Verdict):
    """A rule a ``live`` suite also runs: its GX expectation takes ``live_window`` (the live
    suite's name), and a run then reads its family over that suite's change window
    (:mod:`kandev_dq.records.watermark`); judged the same either way. Unset, the family is read
    in full (everything since capture_since), as ``explain`` reads it."""

    arguments: ClassVar[dict[str, Any]] = {"live_window": None}


class WindowedVerdict(Verdict):
    """A rule that tolerates writes shortly before ``capture_since``: a message committed
    between the backfill's snapshot and the ``capture_since`` sample (AC-24 point 4, AC-24f).
    Its family takes ``window_minutes``; the GX expectation bounds it (0 < minutes <= a day)."""

    arguments: ClassVar[dict[str, Any]] = {"window_minutes": 10.0}
