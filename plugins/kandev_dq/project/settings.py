"""The user's own settings: every environment variable kandev-dq reads, its default, and the
one order they are taken in: an option given to the command, else the environment, else the
project's setting (where a project may give one), else the default (:func:`chosen`).

They are read here, before GX or the SQL toolkit loads, so a bad value is a one-line error in
well under a second; a setting that decides what is deleted or trusted is the user's alone,
never a project's (a folder may be someone else's checkout). kandev-dq never writes a
credential into the environment. The notification channels' variables are named here too;
:mod:`kandev_dq.gx.notifications` reads them through GX's config provider (the environment,
or the project's ``config_variables.yml``) and hands GX's actions ``${VAR}`` references.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kandev_dq.errors import KandevDqError, StoreError
from kandev_dq.store.reference import StoreRef, store_ref

T = TypeVar("T")

#: The store: ``--store``, else this variable, else Kandev's default SQLite file. It is also the
#: GX config variable a project's data source takes its URL from (``${KANDEV_STORE_URL}``).
STORE_URL_VARIABLE = "KANDEV_STORE_URL"
DEFAULT_STORE = Path("~/.kandev/data/kandev.db")
#: The records database: ``--records``, else this variable, else the project's yml, else
#: ``uncommitted/records.db`` (:mod:`kandev_dq.records.location`).
RECORDS_VARIABLE = "KANDEV_DQ_RECORDS_URL"
#: The user's own name for the store in the records database: ``--store-name``, else this
#: variable, else the store's identity (:func:`kandev_dq.store.reference.identity_key`).
STORE_NAME_VARIABLE = "KANDEV_DQ_STORE_NAME"
#: The environment's opt-in to a project's own code on GX's path (``--allow-project-code``).
ALLOW_PROJECT_CODE_VARIABLE = "KANDEV_DQ_ALLOW_PROJECT_CODE"
#: An unexpected error shows its traceback instead of one line.
DEBUG_VARIABLE = "KANDEV_DQ_DEBUG"


def environment(variable: str) -> str | None:
    """The variable's value, None when it is unset or empty."""
    return os.environ.get(variable) or None


def chosen(
    option: T | None, variable: str, project: T | None = None, default: T | None = None
) -> T | str | None:
    """The one precedence of every setting: the option given, else the environment variable,
    else the project's setting, else the default (None: there is none)."""
    for candidate in (option, environment(variable), project, default):
        if candidate is not None and candidate != "":
            return candidate
    return None


def store_option(given: str | None) -> str:
    """The store a command works on: ``given`` (``--store``), else ``$KANDEV_STORE_URL``, else
    Kandev's default SQLite file when it exists; none of them is a one-line error (exit 2)."""
    default = DEFAULT_STORE.expanduser()
    found = chosen(given, STORE_URL_VARIABLE, default=str(default) if default.is_file() else None)
    if found is None:
        raise StoreError(
            f"no store given, and none at the default {DEFAULT_STORE}: "
            f"pass --store or set {STORE_URL_VARIABLE}"
        )
    return found


def store_name_option(given: str | None) -> str | None:
    """The user's name for the store (``--store-name``, else ``$KANDEV_DQ_STORE_NAME``); None:
    the store is named by its identity."""
    return chosen(given, STORE_NAME_VARIABLE)


def chosen_store(target: str | StoreRef | None, name: str | None = None) -> StoreRef:
    """The store a command works on (``--store``, else ``$KANDEV_STORE_URL``, else Kandev's
    default file: :func:`store_option`), read once into its reference,
    with the user's name for it in the records (``name``, ``--store-name``, else
    ``$KANDEV_DQ_STORE_NAME``; none: its identity names it). A plain path or PostgreSQL URL
    is read without the SQL toolkit; a URL that cannot be read is a one-line error."""
    if isinstance(target, StoreRef):
        return target if name is None else target.named(name)
    return store_ref(store_option(target)).named(store_name_option(name))


def records_option(given: str | None) -> str | None:
    """The user's own records database: ``given`` (``--records``), else
    ``$KANDEV_DQ_RECORDS_URL``; None leaves it to the project's setting and the default."""
    return chosen(given, RECORDS_VARIABLE)


def project_code_allowed_by_environment() -> bool:
    """Whether the environment opts in to project code (``KANDEV_DQ_ALLOW_PROJECT_CODE=1``)."""
    return environment(ALLOW_PROJECT_CODE_VARIABLE) == "1"


def debugging() -> bool:
    """Whether an unexpected error is raised whole (``$KANDEV_DQ_DEBUG`` set)."""
    return environment(DEBUG_VARIABLE) is not None


#: The notification channels' settings (:mod:`kandev_dq.gx.notifications`, which reads them
#: through GX's config provider): a channel's own ``KANDEV_DQ_<CHANNEL>_NOTIFY_ON`` and
#: ``_NOTIFY_WHEN`` rank above the shared ones.
PREFIX = "KANDEV_DQ_"
NOTIFY_ON = f"{PREFIX}NOTIFY_ON"
SLACK_WEBHOOK = f"{PREFIX}SLACK_WEBHOOK"
TEAMS_WEBHOOK = f"{PREFIX}TEAMS_WEBHOOK"
SMTP_HOST = f"{PREFIX}SMTP_HOST"
SMTP_PORT = f"{PREFIX}SMTP_PORT"
SMTP_SECURITY = f"{PREFIX}SMTP_SECURITY"
SMTP_USER = f"{PREFIX}SMTP_USER"
SMTP_PASSWORD = f"{PREFIX}SMTP_PASSWORD"
EMAIL_FROM = f"{PREFIX}EMAIL_FROM"
EMAIL_TO = f"{PREFIX}EMAIL_TO"
API_URL = f"{PREFIX}API_URL"
PAGERDUTY_ROUTING_KEY = f"{PREFIX}PAGERDUTY_ROUTING_KEY"
PAGERDUTY_API_KEY = f"{PREFIX}PAGERDUTY_API_KEY"
OPSGENIE_API_KEY = f"{PREFIX}OPSGENIE_API_KEY"
OPSGENIE_REGION = f"{PREFIX}OPSGENIE_REGION"
#: When a channel notifies: on a change of state (default) or on every run it reports
#: (:mod:`kandev_dq.records.changes`); ``KANDEV_DQ_NOTIFY_WHEN``, or per channel
#: ``KANDEV_DQ_<CHANNEL>_NOTIFY_WHEN``.
NOTIFY_WHEN = f"{PREFIX}NOTIFY_WHEN"


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
    raw = (environment(KEEP_DAYS_VARIABLE) or "").strip()
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
