"""Exit codes and the one error type every command turns into a one-line message."""

from __future__ import annotations

import difflib
import enum
from collections.abc import Iterable


class ExitCode(enum.IntEnum):
    """What every kandev-dq command returns."""

    OK = 0  #: every rule passed (or every migration step succeeded or was already done)
    FAILED = 1  #: an error-severity rule failed (or a migration step failed)
    COULD_NOT_RUN = 2  #: bad input, unreachable store, not a Kandev store, broken project


class KandevDqError(Exception):
    """A run could not happen; the message is one line and free of credentials."""

    exit_code = ExitCode.COULD_NOT_RUN


class StoreError(KandevDqError):
    """The store could not be opened or is not a Kandev store."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """What the one-line refusal of a mistyped ``name`` ends with: the closest of ``known``
    (difflib's ratio, as Python's own "Did you mean" for names), or nothing when none is
    close."""
    close = difflib.get_close_matches(name, dict.fromkeys(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def exception_message(result) -> str | None:
    """The error a GX validation result (a GX object or its stored JSON) carries, as one line:
    flat ``exception_info`` or GX's per-metric nested form (read without GX)."""
    info = result.get("exception_info") or {}
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    for value in info.values():
        if isinstance(value, dict) and value.get("raised_exception"):
            return str(value.get("exception_message")).splitlines()[0]
    return None
