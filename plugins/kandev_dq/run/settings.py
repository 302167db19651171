"""The user's own settings of a run, read from the environment (never from a project: a
folder may be someone else's checkout) and checked before GX or the SQL toolkit loads, so a bad
value is a one-line error in well under a second."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from kandev_dq.errors import KandevDqError

#: The environment variable that prunes the records database at the end of every check run.
KEEP_DAYS_VARIABLE = "KANDEV_DQ_RECORDS_KEEP_DAYS"


def keep_days_setting(given: int | None = None) -> int | None:
    """How many days of results and runs a check keeps when it ends: ``given`` (``check
    --keep-days``), else ``$KANDEV_DQ_RECORDS_KEEP_DAYS``, else None (no automatic pruning).
    The user's own setting only: a project folder (maybe someone else's checkout) cannot
    make a check delete the user's records."""
    if given is not None:
        if given < 0:
            raise KandevDqError(f"--keep-days must be 0 or more, not {given}")
        return given
    raw = os.environ.get(KEEP_DAYS_VARIABLE, "").strip()
    if not raw:
        return None
    if not re.fullmatch(r"[0-9]+", raw):
        raise KandevDqError(
            f"{KEEP_DAYS_VARIABLE} must be a whole number of days (0 or more), not {raw[:40]!r}"
        )
    return int(raw)


OVERLAP_VARIABLE = "KANDEV_DQ_LIVE_OVERLAP_MINUTES"
MAX_GAP_VARIABLE = "KANDEV_DQ_LIVE_MAX_GAP_HOURS"
DEFAULT_OVERLAP_MINUTES = 5.0
DEFAULT_MAX_GAP_HOURS = 24.0


@dataclass(frozen=True)
class LiveSettings:
    overlap_minutes: float = DEFAULT_OVERLAP_MINUTES
    max_gap_hours: float = DEFAULT_MAX_GAP_HOURS


def live_settings(environ: dict[str, str] | None = None) -> LiveSettings:
    """The overlap and the longest gap from the user's environment; a value that is not a
    number in range is a one-line error naming the variable."""
    environ = os.environ if environ is None else environ
    return LiveSettings(
        overlap_minutes=_setting(environ, OVERLAP_VARIABLE, DEFAULT_OVERLAP_MINUTES, "minutes"),
        max_gap_hours=_setting(environ, MAX_GAP_VARIABLE, DEFAULT_MAX_GAP_HOURS, "hours"),
    )


#: Each setting's range: the overlap may be 0, the longest gap may not (every run would be full).
_RANGES = {OVERLAP_VARIABLE: (0.0, True, 24 * 60.0), MAX_GAP_VARIABLE: (0.0, False, 24 * 366.0)}


def _setting(environ, name: str, default: float, unit: str) -> float:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    low, low_allowed, high = _RANGES[name]
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (low < value <= high or (low_allowed and value == low)):
        shown = raw.strip()[:40].encode("ascii", "backslashreplace").decode()
        lowest = f"{low:g}" if low_allowed else f"more than {low:g}"
        raise KandevDqError(f"{name}={shown!r} is not a number of {unit} from {lowest} to {high:g}")
    return value


def run_settings(keep_days: int | None, *, live: bool) -> int | None:
    """Every setting a check run reads, checked at once before anything is opened: the live
    window's (for a checkpoint running live suites) and the days a run keeps (returned)."""
    if live:
        live_settings()
    return keep_days_setting(keep_days)
