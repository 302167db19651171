"""The window a ``live`` suite reads, decided once per suite run from the records database.

A live suite judges what changed since its own last run on the store: the newest *stored*
result of that suite for that store (a stored result means the suite finished; a run that
crashed stores none and never moves the window on) carries, in every rule's details, the
watermark its run read up to. This run reads what changed at or after that watermark minus an
overlap (``KANDEV_DQ_LIVE_OVERLAP_MINUTES``, default 5), which covers the writer's clock skew
and transactions in flight when the last snapshot began. Without such a result, or when it is
older than ``KANDEV_DQ_LIVE_MAX_GAP_HOURS`` (default 24), the suite reads everything since
capture_since, as ``nightly`` does, and says why.

A finding stays open until a run re-reading what it counted finds it gone: the same result
carries, in each failing rule's details, the sessions of what that rule counted
(:data:`~kandev_dq.expectations.base.OPEN_SESSIONS`), and this run re-reads them whatever its
window (:attr:`~kandev_dq.facts.shapes.ChangeWindow.open_sessions`); a result that could not
carry them all (past :data:`~kandev_dq.sql.scan.CARRIED_SESSIONS`) makes this run read in full.

This run's watermark is the instant its snapshot began by the store's own clock, read just
before it (:attr:`kandev_dq.store.snapshot.PinnedRead.clock`); on a checkpoint run through GX's
own API, which pins no snapshot, the instant the window is decided, before any of the suite's
facts are read. On a PostgreSQL standby it is the primary's commit time of the last transaction
replayed (:mod:`kandev_dq.store.replication`), so a watermark never runs ahead of the data the
snapshot holds however far replay lags; a standby that has replayed nothing since it started,
or lags more than ``KANDEV_DQ_LIVE_MAX_GAP_HOURS``, is read in full, and the window says why.
The metric reaches the records database the way the write-once ledger does
(:mod:`kandev_dq.run.write_once`), so ``kandev-dq check``, the Python API and GX's own API
share one history of live runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.instants import MalformedKey, parse_key
from kandev_dq.contract.rule_index import LIVE_WINDOW
from kandev_dq.expectations.base import (
    LIVE_KEY,
    OPEN_SESSIONS,
    OPEN_SESSIONS_CUT,
    register_metric,
)
from kandev_dq.run import gx_adapter
from kandev_dq.run.checkpoint import store_tag
from kandev_dq.run.records import Records, now_text, refuse_the_store, results
from kandev_dq.run.settings import MAX_GAP_VARIABLE, OVERLAP_VARIABLE, LiveSettings, live_settings
from kandev_dq.run.write_once import records_of
from kandev_dq.sql.scan import CARRIED_SESSIONS
from kandev_dq.store.access import gx_facts
from kandev_dq.store.reference import store_ref
from kandev_dq.store.replication import Standby, server_clock
from kandev_dq.store.snapshot import pin_of

#: How many of a suite's newest stored results are read for this store's last watermark: runs
#: of other stores sharing the records database come first; past them, the run reads in full.
CANDIDATES = 200


@dataclass(frozen=True)
class OpenFindings:
    """The findings a live suite's last stored run left open on a store: its failing rules
    that carried the sessions of what they counted, and those sessions (a NULL id as None);
    ``cut`` says why none could be carried (the next run reads in full)."""

    findings: int = 0
    sessions: tuple[str | None, ...] = ()
    cut: str | None = None


@dataclass(frozen=True)
class LastRun:
    """What a live suite's newest stored run on a store leaves to the next: the watermark it
    read up to and the findings it left open."""

    watermark: str
    open: OpenFindings = OpenFindings()


def last_watermark(records: Records, suite: str, identity: str) -> LastRun | None:
    """The watermark and open findings of the newest stored result of ``suite`` on the store
    ``identity``: the run names of kandev-dq's runs name the store (other stores' runs are
    never read); a run through GX's API names none, so its result is read for the store it
    carries."""
    r = results.c
    query = (
        sa.select(r.value)
        .where(
            r.suite == suite,
            sa.or_(
                r.run_name.is_(None),
                r.run_name.not_like("%@%"),
                r.run_name.like(f"%@{store_tag(identity)}"),
            ),
        )
        .order_by(r.stored_at.desc(), r.id.desc())
        .limit(CANDIDATES)
    )
    with records.engine.connect() as conn:
        for (value,) in conn.execute(query):
            found = _carried(value, identity)
            if found is not None:
                return found
    return None


def _carried(value: str, identity: str) -> LastRun | None:
    try:
        document = json.loads(value)
    except ValueError:
        return None
    watermark, findings, cut = None, 0, None
    sessions: dict[str | None, None] = {}
    for result in document.get("results") or []:
        details = (result.get("result") or {}).get("details") or {}
        window = details.get(LIVE_KEY) or {}
        if window.get("store") != identity:
            continue
        if watermark is None and isinstance(window.get("watermark"), str):
            watermark = window["watermark"]
        if result.get("success") is not False:
            continue
        counted = details.get(OPEN_SESSIONS)
        if isinstance(counted, list):
            findings += 1
            sessions.update(dict.fromkeys(s for s in counted if s is None or isinstance(s, str)))
        elif OPEN_SESSIONS_CUT in details:
            cut = str(details[OPEN_SESSIONS_CUT])[:300]
    if len(sessions) > CARRIED_SESSIONS:  # a record no run of this bound wrote
        cut = f"more than {CARRIED_SESSIONS:,} open sessions recorded"
    if watermark is None:
        return None
    return LastRun(watermark, OpenFindings(findings, tuple(sessions), cut))


def decide(
    suite: str,
    previous: str | None,
    watermark: datetime | None,
    settings: LiveSettings,
    open_findings: OpenFindings = OpenFindings(),
    standby: Standby | None = None,
) -> dict[str, Any]:
    """The window (``start`` None: in full) and why, from the last run's watermark and this
    run's (None: unknown, a standby that has replayed nothing; none is recorded then); the
    sessions of the findings the last run left open are re-read whatever the window
    (``open_sessions``)."""
    decided: dict[str, Any] = {
        "suite": suite,
        "watermark": None if watermark is None else now_text(watermark),
        "previous": previous,
        "overlap_minutes": settings.overlap_minutes,
        "max_gap_hours": settings.max_gap_hours,
        "open": {"findings": open_findings.findings, "sessions": len(open_findings.sessions)},
        "open_sessions": list(open_findings.sessions),
    }
    if standby is not None:
        decided["replica"] = standby.to_json()
        stalled = standby.lag_seconds is not None and standby.lag_seconds > (
            settings.max_gap_hours * 3600
        )
        if watermark is None or stalled:
            return decided | {
                "start": None,
                "reason": (
                    f"the store is {standby.text()}"
                    + (
                        f", more than {settings.max_gap_hours:g} h ({MAX_GAP_VARIABLE})"
                        if stalled
                        else ""
                    )
                    + ": everything since capture_since is read, as nightly reads it"
                ),
            }
    assert watermark is not None  # a primary's or SQLite's clock always reads
    if previous is None:
        return decided | {
            "start": None,
            "reason": (
                f"first live run of {suite} on this store (no stored result of it): everything "
                "since capture_since is read, as nightly reads it"
            ),
        }
    try:
        last = parse_key(previous)
    except MalformedKey:
        return decided | {
            "start": None,
            "reason": f"the last watermark of {suite} is unreadable: everything is read",
        }
    if open_findings.cut is not None:
        # The open findings could not all be carried: re-reading fewer would close the rest.
        return decided | {
            "start": None,
            "reason": (
                f"the last live run of {suite} on this store left open findings it could not "
                f"carry ({open_findings.cut}): everything since capture_since is read, as "
                "nightly reads it"
            ),
        }
    gap = watermark - last.micro
    if gap < timedelta(0):
        # A clock set back, or a record not written by this clock: a window starting after
        # this run began would read nothing.
        return decided | {
            "start": None,
            "reason": (
                f"the last live run of {suite} on this store read up to {previous}, later than "
                "this run began: everything since capture_since is read, as nightly reads it"
            ),
        }
    if gap > timedelta(hours=settings.max_gap_hours):
        return decided | {
            "start": None,
            "reason": (
                f"the last live run of {suite} on this store read up to {previous}, "
                f"{_hours(gap)} ago, more than {settings.max_gap_hours:g} h "
                f"({MAX_GAP_VARIABLE}): everything since capture_since is read, as nightly "
                "reads it"
            ),
        }
    overlap = timedelta(minutes=settings.overlap_minutes)
    start = last.shifted(-(overlap // timedelta(microseconds=1)) * 1000)
    return decided | {
        "start": start.rfc3339nano(),
        "reason": (
            f"what changed since the last live run of {suite} read up to {previous}, minus the "
            f"{settings.overlap_minutes:g} min overlap ({OVERLAP_VARIABLE})"
        ),
    }


def _hours(gap: timedelta) -> str:
    return f"{gap.total_seconds() / 3600:.1f} h"


def live_window(execution_engine, params: dict[str, Any]) -> dict[str, Any]:
    """The window of the live suite ``params["live_window"]`` on the store being validated."""
    suite = params[LIVE_KEY]
    gx_engine = execution_engine.engine
    records = records_of(gx_adapter.validating_context(execution_engine))
    store = store_ref(gx_engine.url)
    refuse_the_store(records.ref, store)  # validation never writes to the store
    pin = pin_of(gx_engine)
    clock = pin.clock if pin is not None and pin.clock is not None else None
    if clock is None:  # GX's own path: the store's clock, before any of the suite's facts
        clock = gx_facts(gx_engine, "server clock", server_clock)
    identity = store.ledger_name
    last = last_watermark(records, str(suite), identity)
    settings = live_settings()
    if last is None:
        decided = decide(str(suite), None, clock.at, settings, standby=clock.standby)
    else:
        decided = decide(str(suite), last.watermark, clock.at, settings, last.open, clock.standby)
    return decided | {"store": identity}


register_metric(LIVE_WINDOW, live_window, (LIVE_KEY,))
