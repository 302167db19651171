"""A rule's severity: kandev-dq's word, GX's word, and the order findings are listed in.

kandev-dq says ``error``, ``warning`` and ``info`` (the CLI, the JSON, the reports, the rule
index); GX says ``critical`` for ``error``. Errors come first wherever findings are listed.
"""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    """kandev-dq's word as the value (a ``str``: it compares and serialises as the word)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def gx(self) -> str:
        """GX's word, as a suite's JSON records it (GX's ``FailureSeverity`` values)."""
        return "critical" if self is Severity.ERROR else self.value

    @property
    def rank(self) -> int:
        """Listing order: errors, then warnings, then info."""
        return list(Severity).index(self)

    @classmethod
    def rank_of(cls, word: str | None) -> int:
        """The rank of kandev-dq's word; a word it does not know sorts after every severity."""
        try:
            return cls(word).rank
        except ValueError:
            return len(cls)

    @classmethod
    def from_gx(cls, word: str | None) -> Severity:
        """kandev-dq's severity for GX's word (no word is GX's default, ``critical``)."""
        return cls.ERROR if word in (None, "", cls.ERROR.gx) else cls(word)


#: kandev-dq's words, in listing order (errors first).
SEVERITIES = tuple(severity.value for severity in Severity)
