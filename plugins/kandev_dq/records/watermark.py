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
A full run of the store after it (``nightly``, ``pre_release``: the live suite's full-read suite
over everything) settles them rule by rule: its failing rules carry their sessions the same way,
and its verdict replaces the live run's (:func:`open_findings`), so a fault it found gone is
closed and one it found, seen by a window or not, is re-read.

This run's watermark is the instant its snapshot began by the store's own clock, read just
before it (:attr:`kandev_dq.store.snapshot.PinnedRead.clock`); on a checkpoint run through GX's
own API, which pins no snapshot, the instant the window is decided, before any of the suite's
facts are read. On a PostgreSQL standby it is the primary's commit time of the last transaction
replayed (:mod:`kandev_dq.store.replication`), so a watermark never runs ahead of the data the
snapshot holds however far replay lags; a standby that has replayed nothing since it started,
or lags more than ``KANDEV_DQ_LIVE_MAX_GAP_HOURS``, is read in full, and the window says why.
The GX metric deciding it (:mod:`kandev_dq.gx.live_window`) reads the records database and the
store's clock and decides here, without GX.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.instants import MalformedKey, parse_key
from kandev_dq.contract.rule_index import LIVE_KEY, LIVE_SUITES, OPEN_SESSIONS, OPEN_SESSIONS_CUT
from kandev_dq.project.settings import MAX_GAP_VARIABLE, OVERLAP_VARIABLE, LiveSettings
from kandev_dq.records.database import Records
from kandev_dq.records.register import parse_run_name, store_tag
from kandev_dq.records.tables import now_text, results
from kandev_dq.sql.scan import CARRIED_SESSIONS
from kandev_dq.store.replication import Standby

#: How many of a suite's newest stored results are read for this store's last watermark: runs
#: of other stores sharing the records database come first; past them, the run reads in full.
CANDIDATES = 200


@dataclass(frozen=True)
class OpenFindings:
    """The findings a live suite's rules left open on a store: its failing rules that carried
    the sessions of what they counted, and those sessions (a NULL id as None); ``cut`` says why
    none could be carried (the next run reads in full); ``settled_by`` names the full run's
    checkpoint whose verdicts they are, where one ran after the suite's last live run."""

    findings: int = 0
    sessions: tuple[str | None, ...] = ()
    cut: str | None = None
    settled_by: str | None = None


@dataclass(frozen=True)
class LastRun:
    """What a live suite's newest stored run on a store leaves to the next: the watermark it
    read up to and the findings open since (its own, or a later full run's)."""

    watermark: str
    open: OpenFindings = OpenFindings()


#: One rule's verdict as it leaves the rule open: the sessions of what it counted, or why
#: none was carried (a string); None: passing, or judged whole every run (nothing to re-read).
RuleState = tuple[str | None, ...] | str | None


def last_watermark(records: Records, suite: str, identity: str) -> LastRun | None:
    """The watermark of the newest stored result of ``suite`` on the store ``identity``, and the
    findings open since: each rule's as that run left it, or as a full run of the store after
    it (``nightly``, ``pre_release``: the same rules over everything) judged it, which settles
    them (:func:`open_findings`). The run names of kandev-dq's runs name the store (other
    stores' runs are never read); a run through GX's API names none, so its result is read for
    the store it carries. Results stored under the store's spelled name, before stores were
    named by their identity, are its own (:meth:`~kandev_dq.records.Records.spelled_names`).
    """
    r = results.c
    names = {identity, *records.spelled_names(identity)}
    query = (
        sa.select(r.value, r.run_key)
        .where(
            r.suite == suite,
            sa.or_(
                r.run_name.is_(None),
                r.run_name.not_like("%@%"),
                *(r.run_name.like(f"%@{store_tag(name)}") for name in sorted(names)),
            ),
        )
        .order_by(r.stored_at.desc(), r.id.desc())
        .limit(CANDIDATES)
    )
    with records.engine.connect() as conn:
        for value, run_key in conn.execute(query):
            found = _live_states(value, names)
            if found is not None:
                watermark, states = found
                return LastRun(watermark, open_findings(records, suite, identity, states, run_key))
    return None


def open_findings(
    records: Records,
    suite: str,
    identity: str,
    states: dict[str, RuleState],
    after: str | None,
) -> OpenFindings:
    """The live suite's open findings: ``states`` (its last run's, at GX run time ``after``),
    each replaced by the verdict of the newest full run of its full-read suite on the store,
    where that run is later: a full run finding a fault gone closes it, one finding it still
    there hands it on with its sessions (AC-26)."""
    full_suite, expectations = LIVE_SUITES.get(suite, (None, ()))
    settled_by = None
    key = records.newest_of_suite(full_suite, identity) if full_suite else None
    if key is not None and (after is None or key[-2] > after):
        found = _document(records.get_result(key) or "")
        if found is not None:
            settled = {
                expectation: state
                for expectation, state in _rule_states(found).items()
                if expectation in expectations
            }
            if settled:
                states = states | settled
                settled_by = (parse_run_name(key[-3]) or ("a full", ""))[0]
    findings, cut = 0, None
    sessions: dict[str | None, None] = {}
    for state in states.values():
        if isinstance(state, str):
            cut = state
        elif state is not None:
            findings += 1
            sessions.update(dict.fromkeys(state))
    if len(sessions) > CARRIED_SESSIONS:  # a record no run of this bound wrote
        cut = f"more than {CARRIED_SESSIONS:,} open sessions recorded"
    return OpenFindings(findings, tuple(sessions), cut, settled_by)


def _document(value: str) -> dict[str, Any] | None:
    try:
        document = json.loads(value)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _live_states(value: str, names: set[str]) -> tuple[str, dict[str, RuleState]] | None:
    """The watermark of a stored live result for the store ``names`` name and its rules'
    states; None where it is no live read of that store."""
    document = _document(value)
    if document is None:
        return None
    watermark = None
    for result in document.get("results") or []:
        window = ((result.get("result") or {}).get("details") or {}).get(LIVE_KEY) or {}
        # A result an earlier release stored names the store by its records key in "store".
        named = window.get("records_key", window.get("store"))
        if named in names and isinstance(window.get("watermark"), str):
            watermark = window["watermark"]
            break
    if watermark is None:
        return None
    return watermark, _rule_states(document)


def _rule_states(document: dict[str, Any]) -> dict[str, RuleState]:
    """Each rule of a stored suite result, by expectation, as it leaves the rule open."""
    states: dict[str, RuleState] = {}
    for result in document.get("results") or []:
        if not isinstance(result, dict):
            continue
        expectation = str((result.get("expectation_config") or {}).get("type") or "")
        details = (result.get("result") or {}).get("details") or {}
        state: RuleState = None
        if result.get("success") is False:
            counted = details.get(OPEN_SESSIONS)
            if isinstance(counted, list):
                state = tuple(s for s in counted if s is None or isinstance(s, str))
            elif OPEN_SESSIONS_CUT in details:
                state = str(details[OPEN_SESSIONS_CUT])[:300]
        states[expectation] = state
    return states


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
        "open": {
            "findings": open_findings.findings,
            "sessions": len(open_findings.sessions),
            "settled_by": open_findings.settled_by,
        },
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
                f"{_left_by(suite, open_findings)} left open findings it could not carry "
                f"({open_findings.cut}): everything since capture_since is read, as nightly "
                "reads it"
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


def _left_by(suite: str, open_findings: OpenFindings) -> str:
    """The run whose verdicts the open findings are, as a window's reason names it."""
    if open_findings.settled_by is None:
        return f"the last live run of {suite} on this store"
    return f"the last {open_findings.settled_by} run on this store, judging {suite}'s rules,"


def _hours(gap: timedelta) -> str:
    return f"{gap.total_seconds() / 3600:.1f} h"
