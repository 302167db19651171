"""``live`` gives ``nightly``'s verdict on what it reads (CONTRACT §2, §5, §6; AC-26 … AC-29).

Random sequences of appended traffic, on SQLite and PostgreSQL: a healthy writer, a writer that
stops (a qualifying subagent message with no row, AC-26), a row with no message (excess,
AC-27), a row that drifts (a field no longer valid, its ``updated_at`` bumped: §2's rules), an
old message updated with ``updated_at`` bumped, and an old unrecorded message updated so. After
each step the live read (its window starting at the previous step's watermark minus the
overlap) is judged by every rule of the live suites beside the nightly read, at the facts and
judge level (no GX: the suites' GX path is tested end to end in ``test_live_checkpoint.py``):

* every rule live fails, nightly fails too, at the same severity and AC ids;
* every fault injected since the previous step that nightly reports, live reports too;
* AC-29's latest observation is nightly's, whether or not a row was observed in the window;
* a finding stays open: each live read re-reads the sessions its suite's failing rules counted
  the step before (as a run carries them to the next), so after a step that changes nothing,
  or one that changes something else, live's verdict is still nightly's;
* a full run settles the open findings: after a step where nightly ran, the next live read
  re-reads the sessions nightly's failing rules counted instead (a run after a full run takes
  its verdicts). A row rewritten with its ``updated_at`` left alone (no window sees it) may be
  missed by live until then, never after: live's verdict is nightly's again from the read
  after that nightly, and a row fixed so (unseen too) is never reported by live.
"""

from __future__ import annotations

from datetime import timedelta

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
from kandev_dq.run.project import suite_plan
from kandev_dq.sql.keys import read_keys

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
)


class Traffic:
    """A store written on a simulated clock: each step happens after the previous run."""

    def __init__(self, engine: sa.Engine):
        self.engine = engine
        self.store = StoreBuilder(engine).create()
        self.store.keys(CAPTURE, "", EXECUTION)
        self.sessions = [self.store.session(), self.store.session()]
        self.now = T0 + timedelta(minutes=1)
        self.count = 0

    def _key(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def _session(self, pick: int) -> str:
        return self.sessions[pick % len(self.sessions)]

    def apply(self, kind: str, arg, pick: int) -> set[str]:
        """Write one step's traffic at ``self.now``; the rules its faults break."""
        at = self.now
        if kind == "healthy":
            for _ in range(arg):
                key = self._key("ok")
                self.store.subagent_message(self._session(pick), at, key)
                self.store.subagent_row(self._session(pick), key, at)
            return set()
        if kind == "writer_stops":
            for _ in range(arg):
                self.store.subagent_message(self._session(pick), at, self._key("missed"))
            return {SHORTFALL}
        if kind == "excess":
            self.store.subagent_row(self._session(pick), self._key("rowonly"), at)
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
        self.store.subagent_message(
            self._session(pick), created, self._key("lateupdate"), updated_at=at
        )
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


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(step, st.integers(0, 7), st.integers(1, 90), st.booleans()),
        min_size=1,
        max_size=6,
    ),
    owner_indexes=st.booleans(),
)
def test_live_reports_what_nightly_reports_on_what_changed(target, steps, owner_indexes):
    """With upstream's indexes, or the owner's three added (other reads, one verdict)."""
    with target.engine.begin() as conn:  # each example starts from an empty database
        tables = sa.MetaData()
        tables.reflect(conn)
        tables.drop_all(conn)
    traffic = Traffic(target.engine)
    if owner_indexes:
        with target.engine.begin() as conn:
            for statement in owner_index_statements():
                conn.exec_driver_sql(statement)
    watermark = None  # the previous live run's: none before the first
    open_sessions: dict[str, tuple[str | None, ...] | None] = {}  # its suites' open findings
    unseen = False  # a hidden drift since the last nightly: live may not have seen it yet
    for (kind, arg), pick, minutes, nightly_runs in steps:
        traffic.now += timedelta(minutes=minutes)
        injected = traffic.apply(kind, arg, pick)
        windows = {
            suite: (
                ChangeWindow(None, "first run or open findings past the bound")
                if watermark is None or open_sessions.get(suite, ()) is None
                else ChangeWindow(
                    _rfc(watermark - OVERLAP), "since the last run", open_sessions.get(suite, ())
                )
            )
            for suite in LIVE_SUITES
        }
        with target.engine.connect() as conn:
            ledger = {"first_seen": read_keys(conn), "baseline": {"taken_at": CAPTURE}}
            nightly, nightly_open = _judged(conn, None, ledger)
            live, open_sessions = _judged(conn, windows, ledger)
            # AC-29's attribution is the table's, whatever the window holds.
            window = windows["live_writer_health"]
            latest = health_facts(conn, window).get("latest_observed_at")
            nightly_latest = health_facts(conn).get("latest_observed_at")
        where = f"after {kind} {arg} on {target.dialect}, owner's indexes: {owner_indexes}"
        assert latest == nightly_latest, where
        assert live <= nightly, where
        # What no window saw is live's only once a nightly has handed it over.
        unseen = unseen or kind == "hidden_drift"
        reported = {name for name, _, _ in nightly}
        caught = {name for name, _, _ in live}
        if not unseen:
            assert injected & reported <= caught, where
            # Every fault of these steps is a change a window sees, and stays open once seen.
            assert live == nightly, where
        watermark = traffic.now + timedelta(seconds=1)  # the run read after the step's writes
        if nightly_runs:
            # A full run after the live one: the next live run re-reads what it left open.
            open_sessions, unseen = nightly_open, False
