"""``live`` gives ``nightly``'s verdict on what it reads (CONTRACT §2, §5, §6; AC-26 … AC-29).

Random sequences of appended traffic, on SQLite and PostgreSQL: a healthy writer, a writer that
stops (a qualifying subagent message with no row, AC-26), a row with no message (excess,
AC-27), a row that drifts (a field no longer valid, its ``updated_at`` bumped: §2's rules), an
old message updated with ``updated_at`` bumped, an old unrecorded message updated so, a message
or row whose tool_call_id is rewritten (its old key left to what else holds it), and a row
moved to another session (its old key left where no window reads). After
each step the live read (its window starting at the previous step's watermark minus the
overlap) is judged by every rule of the live suites beside the nightly read, at the facts and
judge level (no GX: the suites' GX path is tested end to end in ``test_live_checkpoint.py``):

* every rule live fails, nightly fails too, at the same severity and AC ids;
* every fault injected since the previous step that nightly reports, live reports too;
* AC-29's latest observation is nightly's, whether or not a row was observed in the window;
* every key a step's changes had before or have after them is counted by live's shortfall and
  excess exactly as by nightly's (a rewritten key's old one too), but a moved row's old key;
* a finding stays open: each live read re-reads the sessions its suite's failing rules counted
  the step before (as a run carries them to the next), so after a step that changes nothing,
  or one that changes something else, live's verdict is still nightly's;
* a full run settles the open findings: after a step where nightly ran, the next live read
  re-reads the sessions nightly's failing rules counted instead (a run after a full run takes
  its verdicts). A row rewritten with its ``updated_at`` left alone (no window sees it) may be
  missed by live until then, never after: live's verdict is nightly's again from the read
  after that nightly, and a row fixed so (unseen too) is never reported by live. So may a
  moved row's old key (docs/interpretations.md, "What `live` cannot see");
* a live run after one where nothing changed gives the verdict it takes over (the last live
  run's, or the full run's after it): the same failing rules, none resolved;
* on a PostgreSQL standby whose replay is paused while traffic is written and then resumed,
  each live read (its window starting at the previous read's watermark, the last replayed
  commit's time, with no overlap) is nightly's on the standby's snapshot.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import pytest
import sqlalchemy as sa
from great_expectations.expectations.registry import get_expectation_impl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kandev_dq.expectations  # noqa: F401 - registers the types
from kandev_dq.contract.instants import Instant
from kandev_dq.contract.rule_index import LIVE_SUITES, RULE_INDEX, WRITE_ONCE_LEDGER
from kandev_dq.contract.tables import subagents, task_session_messages
from kandev_dq.expectations.base import (
    FACTS_FAMILIES,
    OPEN_SESSIONS,
    OPEN_SESSIONS_CUT,
    carried,
)
from kandev_dq.facts.health import health_facts
from kandev_dq.facts.shapes import ChangeWindow
from kandev_dq.facts.window import owner_index_statements
from kandev_dq.lab.storebuilder import T0, StoreBuilder
from kandev_dq.project.files import suite_plan
from kandev_dq.sql.keys import read_keys
from kandev_dq.store.replication import server_clock
from tests.replica import streaming_pair

CAPTURE = "2026-07-30T01:39:37.271235Z"  # == T0
EXECUTION = "2026-07-30T01:39:37.000001Z"
OVERLAP = timedelta(minutes=5)

SHORTFALL = "expect_no_writer_shortfall_since_capture_since"
EXCESS = "expect_no_writer_excess_since_capture_since"
#: A drift: the column, its new value, and the rule it breaks (CONTRACT §2).
DRIFTS = {
    "zero_tokens": ("total_tokens", 0, "expect_no_zero_tokens_or_duration"),
    "negative_count": ("tool_use_count", -1, "expect_no_negative_metrics"),
    "conflated_status": ("tool_status", "async_launched", "expect_tool_status_in_acp_vocabulary"),
    "bad_async": ("is_async", 7, "expect_is_async_to_be_zero_or_one"),
}
#: A valid value of each drifted column, which a hidden fix writes back.
VALID = {"total_tokens": 10, "tool_use_count": 1, "tool_status": "completed", "is_async": 0}
#: (suite, expectation) -> (rule instance, severity, AC ids) for every rule of a live suite.
LIVE_RULES = {
    (rule.suite, rule.expectation): (
        get_expectation_impl(rule.expectation).at_default_severity(**planned.kwargs),
        rule.severity,
        rule.rules,
    )
    for suite in LIVE_SUITES
    for rule, planned in zip(
        [rule for rule in RULE_INDEX if rule.suite == suite], suite_plan(suite), strict=True
    )
}

step = st.one_of(
    st.tuples(st.just("healthy"), st.integers(1, 3)),
    st.tuples(st.just("writer_stops"), st.integers(1, 2)),
    st.tuples(st.just("excess"), st.just(1)),
    st.tuples(st.just("drift"), st.sampled_from(sorted(DRIFTS))),
    st.tuples(st.just("old_message_updated"), st.just(1)),
    st.tuples(st.just("old_unrecorded_updated"), st.just(1)),
    st.tuples(st.just("nothing"), st.just(0)),
    st.tuples(st.just("hidden_drift"), st.sampled_from(sorted(DRIFTS))),
    st.tuples(st.just("hidden_fix"), st.just(0)),
    st.tuples(st.just("rekey"), st.sampled_from(["message", "row"])),
    st.tuples(st.just("moved"), st.just(0)),
)
#: Steps whose fault may lie where no window reads: live may miss it until a nightly hands it
#: over (docs/interpretations.md, "What `live` cannot see").
UNSEEN = ("hidden_drift", "moved")


class Traffic:
    """A store written on a simulated clock: each step happens after the previous run."""

    def __init__(self, engine: sa.Engine):
        self.engine = engine
        self.store = StoreBuilder(engine).create()
        self.store.keys(CAPTURE, "", EXECUTION)
        self.sessions = [self.store.session(), self.store.session()]
        self.now = T0 + timedelta(minutes=1)
        self.count = 0
        #: The tool_call_ids of the messages and of the rows, each with its session, as now.
        self.keys: dict[str, dict[str, str]] = {"message": {}, "row": {}}
        #: The writer-health keys, (session, tool_call_id), the last step's changes had before
        #: or have after it, where a window reads them.
        self.touched: set[tuple[str, str]] = set()
        # A healthy subagent in each session before the first run: an old message or row
        # for a later step to rewrite the key of, outside that step's window.
        for session in self.sessions:
            key = self._key("seed")
            self._message(session, T0 + timedelta(seconds=30), key)
            self._row(session, key, T0 + timedelta(seconds=30))

    def _key(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def _session(self, pick: int) -> str:
        return self.sessions[pick % len(self.sessions)]

    def _message(self, session: str, at, key: str, **updated) -> None:
        self.store.subagent_message(session, at, key, **updated)
        self.keys["message"][key] = session
        self.touched.add((session, key))

    def _row(self, session: str, key: str, at) -> None:
        self.store.subagent_row(session, key, at)
        self.keys["row"][key] = session
        self.touched.add((session, key))

    def apply(self, kind: str, arg, pick: int) -> set[str]:
        """Write one step's traffic at ``self.now``; the rules its faults break."""
        at = self.now
        self.touched = set()
        if kind == "rekey":
            # Its tool_call_id rewritten: the old key keeps what else holds it (AC-26, AC-27).
            keys = self.keys[arg]
            if not keys:
                return set()
            old, new = list(keys)[pick % len(keys)], self._key("rekeyed")
            self.store.rekey(old, new, at, of=arg)
            keys[new] = keys.pop(old)
            self.touched |= {(keys[new], old), (keys[new], new)}
            return {SHORTFALL, EXCESS}
        if kind == "moved":  # a row moved to the other session: its old key left behind
            with self.engine.begin() as conn:
                r = subagents.c
                found = conn.execute(
                    sa.select(r.id, r.task_session_id, r.tool_call_id).order_by(r.id)
                ).all()
                if not found:
                    return set()
                row_id, session, key = found[pick % len(found)]
                elsewhere = next(s for s in self.sessions if s != session)
                conn.execute(
                    subagents.update()
                    .where(r.id == row_id)
                    .values(task_session_id=elsewhere, updated_at=self._stamp(at))
                )
            self.keys["row"][key] = elsewhere
            # Its old key, in a session nothing changed in, is one no window reads.
            self.touched.add((elsewhere, key))
            return {SHORTFALL, EXCESS}
        if kind == "healthy":
            for _ in range(arg):
                key = self._key("ok")
                self._message(self._session(pick), at, key)
                self._row(self._session(pick), key, at)
            return set()
        if kind == "writer_stops":
            for _ in range(arg):
                self._message(self._session(pick), at, self._key("missed"))
            return {SHORTFALL}
        if kind == "excess":
            self._row(self._session(pick), self._key("rowonly"), at)
            return {EXCESS}
        if kind in ("drift", "hidden_drift"):
            column, value, rule = DRIFTS[arg]
            # A hidden drift leaves updated_at alone: a rewrite no window sees.
            stamp = {"updated_at": self._stamp(at)} if kind == "drift" else {}
            with self.engine.begin() as conn:
                ids = conn.scalars(sa.select(subagents.c.id).order_by(subagents.c.id)).all()
                if not ids:
                    return set()
                conn.execute(
                    subagents.update()
                    .where(subagents.c.id == ids[pick % len(ids)])
                    .values({column: value, **stamp})
                )
            return {rule}
        if kind == "hidden_fix":  # every drifted row set right, updated_at left alone
            with self.engine.begin() as conn:
                for column, value, _ in DRIFTS.values():
                    fixed = VALID[column]
                    conn.execute(
                        subagents.update()
                        .where(subagents.c[column] == value)
                        .values({column: fixed})
                    )
            return set()
        if kind == "nothing":
            return set()
        if kind == "old_message_updated":
            with self.engine.begin() as conn:
                m = task_session_messages.c
                ids = conn.scalars(sa.select(m.id).order_by(m.id)).all()
                if ids:
                    conn.execute(
                        task_session_messages.update()
                        .where(m.id == ids[pick % len(ids)])
                        .values(updated_at=self._stamp(at))
                    )
            return set()
        # An unrecorded subagent created long before the window, updated in it (AC-26).
        created = T0 + (at - T0) / 3
        self._message(self._session(pick), created, self._key("lateupdate"), updated_at=at)
        return {SHORTFALL}

    def _stamp(self, at):
        return at if self.engine.dialect.name == "sqlite" else at.replace(tzinfo=None)


def _judged(
    conn, windows: dict[str, ChangeWindow] | None, ledger: dict
) -> tuple[set[tuple[str, str, tuple]], dict[str, tuple[str | None, ...] | None]]:
    """The failing (expectation, severity, AC ids) of every live-suite rule on one read (each
    suite through its own window, or nightly's read without ``windows``), and the sessions each
    suite's failing rules carry to its next read, as a run stores them (None: past the bound)."""
    facts_by_suite: dict[str, dict] = {}
    failing = set()
    carried_by_suite: dict[str, dict] = {}
    for (suite, expectation), (rule, severity, rules) in LIVE_RULES.items():
        if suite not in facts_by_suite:
            compute, _ = FACTS_FAMILIES[type(rule).facts]
            facts_by_suite[suite] = (
                compute(conn) if windows is None else compute(conn, window=windows[suite])
            )
        facts = {**facts_by_suite[suite], WRITE_ONCE_LEDGER: ledger}
        if not rule.finding(facts).success:
            failing.add((expectation, severity, rules))
            kept = carried(rule.judged_by().counted_part(facts))
            into = carried_by_suite.setdefault(suite, {})
            into.update(dict.fromkeys(kept.get(OPEN_SESSIONS, ())))
            if OPEN_SESSIONS_CUT in kept:
                into[OPEN_SESSIONS_CUT] = None
    open_sessions = {
        suite: None if OPEN_SESSIONS_CUT in kept else tuple(kept)
        for suite, kept in carried_by_suite.items()
    }
    return failing, open_sessions


def _rfc(at) -> str:
    return Instant.from_datetime(at).rfc3339nano()


#: Each live suite's open findings as its last read left them (None: past the bound).
Open = dict[str, tuple[str | None, ...] | None]


def _windows(watermark, open_sessions: Open, overlap: timedelta) -> dict[str, ChangeWindow]:
    """Each live suite's window after a read at ``watermark`` (None: none yet) that left
    ``open_sessions``, as :func:`kandev_dq.records.watermark.decide` gives it."""
    return {
        suite: (
            ChangeWindow(None, "first run or open findings past the bound")
            if watermark is None or open_sessions.get(suite, ()) is None
            else ChangeWindow(
                _rfc(watermark - overlap), "since the last run", open_sessions.get(suite, ())
            )
        )
        for suite in LIVE_SUITES
    }


class Reading(NamedTuple):
    """Live's and nightly's reads of one snapshot."""

    live: set
    live_open: Open
    nightly: set
    nightly_open: Open
    #: AC-29's latest observation, as live and as nightly read it.
    latest: tuple[str | None, str | None]
    #: Each writer-health count's keys, (session, tool_call_id), as live and as nightly count.
    keys: dict[str, tuple[set, set]]


def _counted_keys(facts: dict, name: str) -> set[tuple[str, str]]:
    counted = facts[name]
    assert counted["count"] == len(counted["sample"])  # the sample holds every counted key
    return {(key["task_session_id"], key["tool_call_id"]) for key in counted["sample"]}


def _compared(conn, windows: dict[str, ChangeWindow]) -> Reading:
    ledger = {"first_seen": read_keys(conn), "baseline": {"taken_at": CAPTURE}}
    nightly, nightly_open = _judged(conn, None, ledger)
    live, live_open = _judged(conn, windows, ledger)
    windowed, full = health_facts(conn, windows["live_writer_health"]), health_facts(conn)
    return Reading(
        live,
        live_open,
        nightly,
        nightly_open,
        (windowed.get("latest_observed_at"), full.get("latest_observed_at")),
        {
            name: (_counted_keys(windowed, name), _counted_keys(full, name))
            for name in ("shortfall", "excess")
        },
    )


def _empty(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        tables = sa.MetaData()
        tables.reflect(conn)
        tables.drop_all(conn)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(step, st.integers(0, 7), st.integers(1, 90), st.booleans(), st.booleans()),
        min_size=1,
        max_size=6,
    ),
    owner_indexes=st.booleans(),
)
def test_live_reports_what_nightly_reports_on_what_changed(target, steps, owner_indexes):
    """With upstream's indexes, or the owner's three added (other reads, one verdict); after
    a step, maybe a live run with nothing changed since (``idle_after``): its verdict is the
    one it takes over, the same failing rules, none resolved (the finding stays open)."""
    _empty(target.engine)  # each example starts from an empty database
    traffic = Traffic(target.engine)
    if owner_indexes:
        with target.engine.begin() as conn:
            for statement in owner_index_statements():
                conn.exec_driver_sql(statement)
    watermark = None  # the previous live run's: none before the first
    open_sessions: Open = {}  # its suites' open findings
    unseen = False  # a fault no window reads since the last nightly: live may miss it
    for (kind, arg), pick, minutes, nightly_runs, idle_after in steps:
        traffic.now += timedelta(minutes=minutes)
        injected = traffic.apply(kind, arg, pick)
        with target.engine.connect() as conn:
            read = _compared(conn, _windows(watermark, open_sessions, OVERLAP))
        live, open_sessions, nightly = read.live, read.live_open, read.nightly
        where = f"after {kind} {arg} on {target.dialect}, owner's indexes: {owner_indexes}"
        assert read.latest[0] == read.latest[1], where
        assert live <= nightly, where
        # Every key the step's changes had before or have after them is counted as nightly
        # counts it (a rewritten key's old one too; a moved row's old one is unseen).
        for name, (live_keys, nightly_keys) in read.keys.items():
            touched = traffic.touched
            assert live_keys & touched == nightly_keys & touched, (name, where)
        # What no window saw is live's only once a nightly has handed it over.
        unseen = unseen or kind in UNSEEN
        reported = {name for name, _, _ in nightly}
        caught = {name for name, _, _ in live}
        if not unseen:
            assert injected & reported <= caught, where
            # Every fault of these steps is a change a window sees (a rewritten key's old
            # one too), and stays open once seen.
            assert live == nightly, where
        watermark = traffic.now + timedelta(seconds=1)  # the run read after the step's writes
        taken_over = live
        if nightly_runs:
            # A full run after the live one: the next live run re-reads what it left open.
            open_sessions, unseen, taken_over = read.nightly_open, False, nightly
        if idle_after:
            traffic.now += timedelta(minutes=minutes)
            with target.engine.connect() as conn:
                idle = _compared(conn, _windows(watermark, open_sessions, OVERLAP))
            assert idle.live == taken_over, f"nothing changed {where}"
            open_sessions = idle.live_open
            watermark = traffic.now + timedelta(seconds=1)


@pytest.fixture(scope="module")
def replica():
    """One primary and its standby for the module: slow to start."""
    with streaming_pair() as pair:
        yield pair


def _psycopg(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(st.tuples(step, st.integers(0, 7), st.booleans()), min_size=1, max_size=4))
def test_live_on_a_standby_paused_and_resumed_is_nightly_on_its_snapshot(replica, steps):
    """On a PostgreSQL standby the watermark is the last replayed commit's time (never its
    clock): traffic written while replay is paused is read by the first live run after replay
    resumes, and each live read is nightly's on the standby's snapshot (its window starting at
    the previous read's watermark, no overlap: the watermark alone must cover the lag)."""
    primary_url, standby_url = replica.schema()
    primary, standby = _psycopg(primary_url), _psycopg(standby_url)
    traffic = Traffic(primary)
    watermark = None
    open_sessions: Open = {}
    unseen = False

    def read_standby(where: str) -> None:
        nonlocal watermark, open_sessions
        with standby.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            clock = server_clock(conn)  # before the snapshot's first read
            assert clock.standby is not None, where
            read = _compared(conn, _windows(watermark, open_sessions, timedelta(0)))
            conn.rollback()
        open_sessions = read.live_open
        assert read.latest[0] == read.latest[1] and read.live <= read.nightly, where
        if not unseen:
            assert read.live == read.nightly, where
        watermark = clock.at  # None: replayed nothing yet, the next read is in full

    try:
        replica.caught_up()
        for (kind, arg), pick, paused in steps:
            if paused:
                replica.pause()
            try:
                traffic.now = datetime.now(UTC)
                traffic.apply(kind, arg, pick)
                unseen = unseen or kind in UNSEEN
                if paused:
                    read_standby(f"{kind} {arg} written while replay is paused")
            finally:
                if paused:
                    replica.resume()
            replica.caught_up()
            read_standby(f"{kind} {arg} replayed")
    finally:
        primary.dispose()
        standby.dispose()
