"""Count thresholds on a rule that counts, with dbt's names and meaning: ``warn_if``, ``error_if``.

A suite entry may carry them in its ``meta`` (``{"warn_if": ">5", "error_if": ">50"}``). As in
dbt, each is a comparison of the rule's count with a whole number (``>``, ``>=``, ``<``, ``<=``,
``=``, ``==``, ``!=``, ``<>``); one not given is ``!=0``, so a rule with neither fails on any
count, as without thresholds. ``error_if`` is asked first: when it holds, the rule fails at its
own severity; else, when ``warn_if`` holds, it fails as a warning (never above its own
severity); else it passes, its count within the thresholds.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kandev_dq.contract.severity import Severity

#: The suite entry's ``meta`` keys, in the order they are asked.
ERROR_IF, WARN_IF = "error_if", "warn_if"
_FORM = re.compile(r"\s*(>=|<=|!=|<>|==|=|>|<)\s*(\d{1,18})\s*")
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<>": operator.ne,
}
#: dbt's default for a threshold not given: any count fails.
DEFAULT = "!=0"
#: Where a result judged by thresholds says so (its ``details``): each, and which one fired.
DETAILS_KEY = "thresholds"


class ThresholdError(ValueError):
    """A threshold that is not a comparison with a whole number."""


@dataclass(frozen=True)
class Threshold:
    """One comparison of a count with a whole number."""

    op: str
    value: int

    @classmethod
    def parse(cls, text: object) -> Threshold:
        matched = _FORM.fullmatch(text) if isinstance(text, str) else None
        if matched is None:
            raise ThresholdError(
                "is not a count condition: a comparison and a whole number, as dbt writes "
                "them (>5, >=5, <5, <=5, =5, !=5)"
            )
        return cls(matched[1], int(matched[2]))

    def holds(self, count: int) -> bool:
        return _COMPARE[self.op](count, self.value)

    def __str__(self) -> str:
        return f"{self.op}{self.value}"


@dataclass(frozen=True)
class CountThresholds:
    """A suite entry's ``warn_if`` and ``error_if`` (each :data:`DEFAULT` when not given)."""

    warn_if: Threshold
    error_if: Threshold

    @classmethod
    def of(cls, meta: Mapping[str, object] | None) -> CountThresholds | None:
        """The thresholds a suite entry's ``meta`` gives; None when it gives neither.
        Raises :class:`ThresholdError` naming the key of one that cannot be read."""
        meta = meta or {}
        if WARN_IF not in meta and ERROR_IF not in meta:
            return None
        read = {}
        for key in (WARN_IF, ERROR_IF):
            try:
                read[key] = Threshold.parse(meta.get(key, DEFAULT))
            except ThresholdError as exc:
                raise ThresholdError(f"{key} {exc}") from None
        return cls(**read)

    def fired(self, count: int) -> str | None:
        """Which threshold the count meets, ``error_if`` first; None: within both."""
        if self.error_if.holds(count):
            return ERROR_IF
        if self.warn_if.holds(count):
            return WARN_IF
        return None

    def text(self) -> str:
        return f"warn_if {self.warn_if}, error_if {self.error_if}"


def severity_when_fired(fired: str | None, severity: str) -> str:
    """The severity word a rule fails at when ``fired`` met its count: its own for
    ``error_if``, a warning at most for ``warn_if``."""
    if fired == WARN_IF and severity == Severity.ERROR:
        return Severity.WARNING.value
    return severity
