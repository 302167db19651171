"""The ``live`` checkpoint end to end, on SQLite and PostgreSQL (CONTRACT §2, §5, §6).

Its window comes from the records database: a first run reads everything since
capture_since and says so; the next reads what changed since the last stored run's watermark
minus the overlap; a gap longer than the setting, or a run whose results were never stored,
reads further back. A writer that stops is reported by the first live run after its first
unrecorded subagent, at error, with nightly's AC ids (AC-26). Reads use the store's indexes
where it has them, and say so; without one they fall back to a scan, and say that.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import Instant, parse_key
from kandev_dq.errors import KandevDqError
from kandev_dq.facts import window as window_module
from kandev_dq.facts.health import health_facts
from kandev_dq.facts.rows import row_facts
from kandev_dq.facts.shapes import ChangeWindow
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project.settings import MAX_GAP_VARIABLE, OVERLAP_VARIABLE
from kandev_dq.records import Records, records_url, results
from kandev_dq.run.check import run_check, window_lines
from kandev_dq.sql import scan
from kandev_dq.sql.listing import Listing
from kandev_dq.store.access import open_store
from kandev_dq.text import one_line
from tests.gxhelpers import failed, result
from tests.pasted import read_only_rows
from tests.subagent_rows import unconstrained_store
from tests.test_changes import _overview_text
from tests.test_notifications import configure, receiver  # noqa: F401 - fixture

SHORTFALL = "expect_no_writer_shortfall_since_capture_since"
EXCESS = "expect_no_writer_excess_since_capture_since"
ZERO = "expect_no_zero_tokens_or_duration"
NEGATIVE = "expect_no_negative_metrics"
LIVE_SUITES = ("live_activation", "live_writer_health", "live_rows")


def _rfc(moment: datetime) -> str:
    return Instant.from_datetime(moment).rfc3339nano()


@pytest.fixture
def activated(target):
    """A store activated two hours ago, its writer healthy: two subagents since then."""
    store = StoreBuilder(target.engine).create()
    capture = datetime.now(UTC) - timedelta(hours=2)
    store.keys(_rfc(capture), "", _rfc(capture))
    session = store.session()
    for n in range(2):
        at = capture + timedelta(minutes=n + 1)
        store.subagent_message(session, at, f"toolu_old_{n}")
        store.subagent_row(session, f"toolu_old_{n}", at, total_tokens=10, duration_ms=5)
    store.capture, store.main_session = capture, session
    return store


def live(project, target):
    return run_check(project, target.url, "live")


def failing(report) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(r.expectation, r.severity, tuple(r.rules)) for r in report.results if not r.success}


def test_first_run_reads_in_full_the_next_the_window_and_a_long_gap_in_full_again(
    activated, target, project, monkeypatch
):
    first = live(project, target)
    assert set(first.windows) == set(LIVE_SUITES)
    for window in first.windows.values():
        assert window["start"] is None and "first live run" in window["reason"]
    assert "every one of 2 qualifying key(s)" in result(first, SHORTFALL).message
    assert failed(first) == {}

    # After it: a new subagent whose row stores a 0 (AC-7a), and an old row rewritten with its
    # updated_at left alone (what live cannot see; nightly still reads everything).
    now = datetime.now(UTC)
    session = activated.main_session
    activated.subagent_message(session, now, "toolu_new")
    activated.subagent_row(session, "toolu_new", now, total_tokens=0)
    old = activated.capture + timedelta(minutes=3)
    activated.subagent_message(session, old, "toolu_rewritten")
    activated.subagent_row(session, "toolu_rewritten", old, tool_use_count=-1)

    second = live(project, target)
    for suite, window in second.windows.items():
        read_to = parse_key(first.windows[suite]["watermark"])
        assert window["start"] == read_to.shifted(-5 * 60 * 10**9).rfc3339nano(), suite
        assert window["previous"] == first.windows[suite]["watermark"]
    # Every key of the changed session is judged (a key rewritten there leaves its old one
    # behind), and only the changed rows.
    assert "every one of 4 qualifying key(s)" in result(second, SHORTFALL).message
    assert failed(second) == {ZERO: "error"}
    assert result(second, ZERO).observed_value == 1
    nightly = run_check(project, target.url, "nightly")
    assert failed(nightly) == {ZERO: "error", NEGATIVE: "error"}

    monkeypatch.setenv(MAX_GAP_VARIABLE, "0.0001")  # 0.36 s
    time.sleep(0.5)
    third = live(project, target)
    for window in third.windows.values():
        assert window["start"] is None and "more than 0.0001 h" in window["reason"]
    assert failed(third) == {ZERO: "error", NEGATIVE: "error"}


def test_each_live_finding_query_lists_what_its_window_counted(activated, target, project):
    """A live finding's query, pasted as printed, lists exactly what the window counted (AC-19),
    on both dialects: the changed items, not the faults before the window that nightly counts,
    with ids holding ``%``, quotes, backslashes and ``$$``."""
    live(project, target)
    now, session = datetime.now(UTC), activated.main_session
    activated.subagent_message(session, now, "toolu_missed_100%_'q'")  # AC-26 shortfall
    activated.subagent_message(session, now, "toolu_zero_$$")
    activated.subagent_row(session, "toolu_zero_$$", now, total_tokens=0)  # AC-7a
    activated.subagent_row(session, "toolu_excess\\%s", now, tool_use_count=-1)  # AC-27, AC-9
    old = activated.capture + timedelta(minutes=3)  # before the window: nightly's alone
    activated.subagent_message(session, old, "toolu_old_negative")
    activated.subagent_row(session, "toolu_old_negative", old, tool_use_count=-1)

    report = live(project, target)
    listed = {r.expectation: r for r in report.results if not r.success and r.query}
    assert {SHORTFALL, ZERO, NEGATIVE} <= set(listed), failed(report)
    assert result(run_check(project, target.url, "nightly"), NEGATIVE).unexpected_count == 2
    for name, finding in listed.items():
        rows = read_only_rows(target.url, target.dialect, finding.query)
        assert len(rows) == finding.unexpected_count, (name, rows)
    assert listed[NEGATIVE].unexpected_count == 1


def test_a_writer_that_stops_is_reported_by_the_next_live_run(activated, target, project):
    assert live(project, target).success
    # The writer stops: its first unrecorded subagent (AC-26).
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    report = live(project, target)
    nightly = run_check(project, target.url, "nightly")
    assert not report.success
    stopped = result(report, SHORTFALL)
    assert stopped.severity == "error" and stopped.observed_value == 1
    assert "stopped or failing" in stopped.message
    assert failing(report) == failing(nightly) == {(SHORTFALL, "error", tuple(stopped.rules))}
    assert tuple(stopped.rules) == tuple(result(nightly, SHORTFALL).rules)
    assert report.windows["live_writer_health"]["start"] is not None


@pytest.mark.parametrize("of", ["message", "row"])
def test_a_rewritten_key_is_judged_under_its_old_key_as_under_its_new(
    activated, target, project, of
):
    """AC-26, AC-27: a message or row whose tool_call_id is rewritten leaves its old key to
    what else holds it (a row without its message, a message without its row). Live judges
    the old key as nightly does, though nothing of it changed: same failures, same counts."""
    live(project, target)
    activated.rekey("toolu_old_0", "toolu_renamed", datetime.now(UTC), of=of)
    report = live(project, target)
    nightly = run_check(project, target.url, "nightly")
    assert report.windows["live_writer_health"]["start"] is not None
    assert failing(report) == failing(nightly)
    assert {SHORTFALL, EXCESS} <= set(failed(nightly))
    for rule in (SHORTFALL, EXCESS):
        assert result(report, rule).observed_value == result(nightly, rule).observed_value == 1


def _stopped_writer(store) -> None:
    store.subagent_message(store.main_session, datetime.now(UTC), "toolu_missed")  # AC-26


def _negative_row(store) -> None:
    now = datetime.now(UTC)
    store.subagent_message(store.main_session, now, "toolu_negative")
    store.subagent_row(store.main_session, "toolu_negative", now, tool_use_count=-1)  # AC-9


def _standing(report, before, rule: str) -> None:
    """``rule`` still fails in ``report``, failing since ``before``, nothing resolved."""
    assert not report.success and failed(report) == {rule: "error"}
    assert report.changes["resolved"] == [] and report.changes["new"] == []
    assert result(report, rule).failing_since == before.run_time


def _resolved(report) -> set[str]:
    return {r["expectation"] for r in report.changes["resolved"]}


def test_a_stopped_writers_finding_stays_open_until_a_run_re_reads_it_gone(
    activated,
    target,
    project,
    monkeypatch,
    receiver,  # noqa: F811 - the fixture
):
    """AC-26: the next live run, nothing changed, re-reads the session of the unrecorded
    subagent (outside its window) and still fails: no "resolved", no recovery alert. Once the
    message is deleted (nothing in any window says so), the re-read finds it gone."""
    monkeypatch.setenv(OVERLAP_VARIABLE, "0")  # the fault lies before the next window
    configure(monkeypatch, "api", receiver.url)
    live(project, target)
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    first = live(project, target)
    assert failed(first) == {SHORTFALL: "error"} and len(receiver.received) == 1

    standing = live(project, target)
    _standing(standing, first, SHORTFALL)
    window = standing.windows["live_writer_health"]
    assert window["start"] > _rfc(datetime.now(UTC) - timedelta(minutes=1))
    assert window["open"] == {"findings": 1, "sessions": 1, "settled_by": None}
    assert window["reads"][window_module.OPEN].startswith("1 session(s)")
    line = next(line for line in window_lines(standing) if line.startswith("live_writer_health"))
    assert "the 1 session(s) of 1 open finding(s) of the last run, re-read" in line
    payload = json.loads(json.dumps(standing.to_json(), default=str))
    assert payload["windows"]["live_writer_health"]["open"]["findings"] == 1
    assert len(receiver.received) == 1, "a standing failure alerts no one again"

    with target.engine.begin() as conn:
        m = schema.task_session_messages
        conn.execute(sa.delete(m).where(m.c.metadata.contains("toolu_missed")))
    recovered = live(project, target)
    assert recovered.success and _resolved(recovered) == {SHORTFALL}
    assert len(receiver.received) == 2
    assert json.loads(receiver.received[-1]["body"])["kandev_dq"]["verdict"] == "PASSED"
    after = live(project, target).windows["live_writer_health"]["open"]
    assert after == {"findings": 0, "sessions": 0, "settled_by": None}


def test_a_row_rules_finding_stays_open_until_a_run_re_reads_it_gone(
    activated, target, project, monkeypatch
):
    """AC-9: a negative metric stays failing while its row stands, though it changed before
    the window; fixed in place with updated_at left alone, the re-read finds it gone."""
    monkeypatch.setenv(OVERLAP_VARIABLE, "0")
    live(project, target)
    _negative_row(activated)
    first = live(project, target)
    assert failed(first) == {NEGATIVE: "error"}

    standing = live(project, target)
    _standing(standing, first, NEGATIVE)
    assert standing.windows["live_rows"]["start"] is not None
    assert standing.windows["live_rows"]["open"] == {
        "findings": 1,
        "sessions": 1,
        "settled_by": None,
    }
    # Its query lists what it counted, the open session included.
    rows = read_only_rows(target.url, target.dialect, result(standing, NEGATIVE).query)
    assert len(rows) == 1

    with target.engine.begin() as conn:
        fixed = schema.subagents.update().values(tool_use_count=1)
        conn.execute(fixed.where(schema.subagents.c.tool_call_id == "toolu_negative"))
    recovered = live(project, target)
    assert recovered.success and _resolved(recovered) == {NEGATIVE}


def nightly(project, target):
    return run_check(project, target.url, "nightly")


def _verdicts(receiver) -> list[str]:  # noqa: F811 - the fixture's type
    return [json.loads(sent["body"])["kandev_dq"]["verdict"] for sent in receiver.received]


def test_a_full_run_finding_a_live_finding_still_there_keeps_it_open(
    activated,
    target,
    project,
    monkeypatch,
    receiver,  # noqa: F811 - the fixture
):
    """AC-26: live fails, nightly still fails (failing since the live run, no second alert),
    and the next live run, nothing changed, re-reads what nightly left open: still failing
    since the first live run, nothing resolved, no alert."""
    monkeypatch.setenv(OVERLAP_VARIABLE, "0")
    configure(monkeypatch, "api", receiver.url)
    live(project, target)
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    first = live(project, target)
    assert failed(first) == {SHORTFALL: "error"} and _verdicts(receiver) == ["FAILED"]

    full = nightly(project, target)
    assert failed(full) == {SHORTFALL: "error"}
    assert full.changes["new"] == [] and full.changes["resolved"] == []
    assert result(full, SHORTFALL).failing_since == first.run_time
    assert _verdicts(receiver) == ["FAILED"], "one finding on one store: alerted once"

    standing = live(project, target)
    _standing(standing, first, SHORTFALL)
    window = standing.windows["live_writer_health"]
    assert window["start"] is not None
    assert window["open"] == {"findings": 1, "sessions": 1, "settled_by": "nightly"}
    line = next(line for line in window_lines(standing) if line.startswith("live_writer_health"))
    assert "the 1 session(s) of 1 open finding(s) as the last nightly run left them" in line
    assert _verdicts(receiver) == ["FAILED"]


def test_a_full_run_hands_a_fault_live_could_not_see_to_the_next_live_run(
    activated, target, project, monkeypatch
):
    """AC-9: an old row rewritten negative with its updated_at left alone is in no window;
    nightly finds it, and from then on live's open findings are nightly's: the next live run
    re-reads its session and fails, failing since nightly's run."""
    monkeypatch.setenv(OVERLAP_VARIABLE, "0")
    live(project, target)
    with target.engine.begin() as conn:  # the writer's row, rewritten in place
        hidden = schema.subagents.update().values(tool_use_count=-1)
        conn.execute(hidden.where(schema.subagents.c.tool_call_id == "toolu_old_0"))
    assert live(project, target).success, "no window holds the rewrite"
    full = nightly(project, target)
    assert failed(full) == {NEGATIVE: "error"} and result(full, NEGATIVE).new

    handed = live(project, target)
    assert failed(handed) == {NEGATIVE: "error"}
    assert handed.changes["new"] == [] and result(handed, NEGATIVE).failing_since == full.run_time
    assert handed.windows["live_rows"]["open"]["settled_by"] == "nightly"
    assert handed.windows["live_rows"]["start"] is not None


def test_a_full_run_finding_a_live_finding_gone_resolves_it_once(
    activated,
    target,
    project,
    monkeypatch,
    receiver,  # noqa: F811 - the fixture
):
    """AC-9: live fails, nightly fails, the row is fixed with updated_at left alone, nightly
    passes (resolved, the recovery alert) and the next live run, which re-reads nothing
    nightly closed, passes with nothing resolved: the recovery is reported once, not twice."""
    monkeypatch.setenv(OVERLAP_VARIABLE, "0")
    configure(monkeypatch, "api", receiver.url)
    live(project, target)
    _negative_row(activated)
    first = live(project, target)
    assert failed(first) == {NEGATIVE: "error"}
    assert result(nightly(project, target), NEGATIVE).failing_since == first.run_time

    with target.engine.begin() as conn:
        fixed = schema.subagents.update().values(tool_use_count=1)
        conn.execute(fixed.where(schema.subagents.c.tool_call_id == "toolu_negative"))
    full = nightly(project, target)
    assert full.success and _resolved(full) == {NEGATIVE}
    assert full.changes["resolved"][0]["since"] == first.run_time
    assert _verdicts(receiver) == ["FAILED", "PASSED"]

    after = live(project, target)
    assert after.success and after.changes["resolved"] == [] and after.changes["new"] == []
    assert after.windows["live_rows"]["open"] == {
        "findings": 0,
        "sessions": 0,
        "settled_by": "nightly",
    }
    assert _verdicts(receiver) == ["FAILED", "PASSED"], "the recovery, once"
    assert "Resolved since the last run" not in _overview_text(project)


def test_a_full_run_alone_settles_a_live_finding_and_reports_its_recovery(
    activated, target, project, monkeypatch
):
    """Without an earlier nightly: the fault fixed where no window sees it, the nightly that
    finds it gone reports the recovery, and the next live run nothing more."""
    monkeypatch.setenv(OVERLAP_VARIABLE, "0")
    live(project, target)
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    first = live(project, target)
    assert failed(first) == {SHORTFALL: "error"}
    with target.engine.begin() as conn:
        m = schema.task_session_messages
        conn.execute(sa.delete(m).where(m.c.metadata.contains("toolu_missed")))
    full = nightly(project, target)
    assert full.success and _resolved(full) == {SHORTFALL}
    after = live(project, target)
    assert after.success and after.changes["resolved"] == []
    assert after.windows["live_writer_health"]["open"]["findings"] == 0


def test_an_open_findings_re_read_adds_no_scan_of_either_table(pg_target):
    """On PostgreSQL with the owner's three indexes, re-reading a standing shortfall and a
    standing negative metric (their count, sample and carried sessions, each a statement of
    its own) adds no sequential scan of the messages or the subagent rows to the window's read:
    every statement is planned for the session indexes, as the count is. A scan would grow with
    the store (bench/live-open-findings.md)."""
    store = StoreBuilder(pg_target.engine).create()
    capture = datetime.now(UTC) - timedelta(hours=2)
    store.keys(_rfc(capture), "", _rfc(capture))
    session, at = store.session(), capture + timedelta(minutes=1)
    store.subagent_message(session, at, "toolu_missed")
    store.subagent_message(session, at, "toolu_negative")
    store.subagent_row(session, "toolu_negative", at, tool_use_count=-1)
    with pg_target.engine.begin() as conn:
        for statement in window_module.owner_index_statements():
            conn.exec_driver_sql(statement)
    now = _rfc(datetime.now(UTC))
    tables = [schema.subagents.name, schema.task_session_messages.name]
    # A transaction's sequential scans of each table, counted as they run.
    seq = sa.text(
        "SELECT relname, seq_scan FROM pg_stat_xact_user_tables WHERE relname IN :names"
    ).bindparams(sa.bindparam("names", expanding=True))

    def scans(open_sessions: tuple[str, ...]) -> tuple[dict[str, int], dict, dict]:
        window = ChangeWindow(now, "since the last run", open_sessions)
        with pg_target.engine.begin() as conn:
            before = dict(conn.execute(seq, {"names": tables}).all())
            health, rows = health_facts(conn, window), row_facts(conn, window)
            after = dict(conn.execute(seq, {"names": tables}).all())
        return {t: after.get(t, 0) - before.get(t, 0) for t in tables}, health, rows

    window_alone, health, rows = scans(())
    assert health["shortfall"]["count"] == 0
    reread, health, rows = scans((session,))
    assert health["shortfall"]["count"] == 1 and health["shortfall"]["sessions"] == [session]
    assert rows["rules"]["negative_metric"]["sessions"] == [session]
    assert reread == window_alone, "the open findings' statements scanned a table"


def test_open_findings_past_the_bound_make_the_next_run_read_in_full(
    activated, target, project, monkeypatch
):
    """Findings over more sessions than a stored result carries are never dropped: the next
    live run reads in full, says why, and still fails."""
    monkeypatch.setenv(OVERLAP_VARIABLE, "0")
    monkeypatch.setattr(scan, "CARRIED_SESSIONS", 0)
    live(project, target)
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    first = live(project, target)
    assert failed(first) == {SHORTFALL: "error"}
    standing = live(project, target)
    window = standing.windows["live_writer_health"]
    assert window["start"] is None and "could not carry" in window["reason"]
    _standing(standing, first, SHORTFALL)


def _forge_watermark(project, suite: str, moment: datetime) -> None:
    """The newest stored result of ``suite`` says it read up to ``moment``."""
    with Records(records_url(project)) as records, records.engine.begin() as conn:
        r = results.c
        row_id, value = conn.execute(
            sa.select(r.id, r.value)
            .where(r.suite == suite)
            .order_by(r.stored_at.desc(), r.id.desc())
            .limit(1)
        ).one()
        document = json.loads(value)
        for found in document["results"]:
            found["result"]["details"]["live_window"]["watermark"] = _rfc(moment)
        conn.execute(sa.update(results).where(r.id == row_id).values(value=json.dumps(document)))


@pytest.mark.parametrize(
    ("fault", "rule", "suite"),
    [(_stopped_writer, SHORTFALL, "live_writer_health"), (_negative_row, NEGATIVE, "live_rows")],
    ids=["stopped-writer", "negative-metric"],
)
def test_a_forged_watermark_hides_no_open_finding(
    activated, target, project, monkeypatch, fault, rule, suite
):
    """A watermark from a clock set ahead reads in full; one moved past the fault (later
    than it, before the next run) still leaves its finding open: the session is re-read. A
    writer-health finding and a row rule's alike."""
    monkeypatch.setenv(OVERLAP_VARIABLE, "0")
    live(project, target)
    fault(activated)
    first = live(project, target)
    assert failed(first) == {rule: "error"}

    _forge_watermark(project, suite, datetime.now(UTC) + timedelta(days=1))
    in_full = live(project, target)
    assert in_full.windows[suite]["start"] is None
    _standing(in_full, first, rule)

    _forge_watermark(project, suite, datetime.now(UTC))
    forged = live(project, target)
    assert forged.windows[suite]["start"] is not None
    assert forged.windows[suite]["open"]["findings"] == 1
    _standing(forged, first, rule)


def test_a_run_whose_results_were_not_stored_never_moves_the_window_on(activated, target, project):
    first = live(project, target)
    second = live(project, target)
    with Records(records_url(project)) as records:
        for key in records.result_keys():
            if key[0] == "live_writer_health" and key[-2] == _gx_time(second.run_time):
                assert records.remove_result(key)  # as if the run had crashed before storing
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    third = live(project, target)
    assert (
        third.windows["live_writer_health"]["previous"]
        == (first.windows["live_writer_health"]["watermark"])
    )
    assert third.windows["live_rows"]["previous"] == second.windows["live_rows"]["watermark"]
    assert failed(third) == {SHORTFALL: "error"}


def _gx_time(run_time: str) -> str:
    """A run's time as GX writes it into result keys."""
    moment = datetime.fromisoformat(run_time.replace("Z", "+00:00"))
    return moment.strftime("%Y%m%dT%H%M%S.%fZ")


def test_without_the_indexes_it_reads_by_scans_says_so_and_judges_alike(activated, target, project):
    with target.engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX idx_messages_session_updated")
        conn.exec_driver_sql("DROP INDEX idx_messages_created_at")
    live(project, target)
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    report = live(project, target)
    reads = report.windows["live_writer_health"]["reads"]
    assert reads["messages created in the window"] == ("scan: the store has no index on created_at")
    assert reads["messages updated in the window"] == (
        "scan: the store has no index on updated_at or (task_session_id, updated_at)"
    )
    assert reads["subagent rows changed in the window"].startswith("scan:")
    assert reads[window_module.MISSING] == ", ".join(window_module.OWNER_INDEXES)
    assert failed(report) == {SHORTFALL: "error"}


def test_with_the_indexes_the_output_names_them(activated, target, project):
    live(project, target)
    report = live(project, target)
    reads = report.windows["live_writer_health"]["reads"]
    assert reads["messages created in the window"].startswith("index idx_messages_created_at")
    assert reads["messages updated in the window"].startswith("index idx_messages_session_updated")
    # Upstream's indexes serve the window by a probe per session and a scan: the output names
    # the owner's indexes that would make each one range, on the rows' suite too.
    assert reads[window_module.MISSING] == ", ".join(window_module.OWNER_INDEXES)
    assert report.windows["live_rows"]["reads"][window_module.MISSING] == (
        "idx_subagents_observed_at, idx_subagents_updated_at"
    )
    payload = json.loads(json.dumps(report.to_json(), default=str))
    assert payload["windows"]["live_rows"]["reads"]
    # The data docs say it under each live rule's finding, as the text report's last lines do.
    pages = (project / "uncommitted" / "data_docs" / "local_site" / "validations").rglob("*.html")
    health = sorted(p for p in pages if "live_writer_health" in p.parts)
    assert len(health) == 2, health
    assert "first live run of live_writer_health" in health[0].read_text()
    assert "index idx_messages_session_updated" in health[1].read_text()
    assert "idx_subagents_observed_at, idx_subagents_updated_at" in health[1].read_text()
    assert any(line.startswith("live_writer_health read from ") for line in window_lines(report))


def _window_plan(target, url: str, statement: str = "changed_sessions") -> str:
    """The plan of the windowed writer-health statement naming ``statement`` (the first one),
    as the store's planner gives it (PostgreSQL with sequential scans priced out: a tiny table
    is otherwise always scanned, and the question is whether the statement can use the index
    at all)."""
    store = open_store(url)
    statements = []
    sa.event.listen(
        store.engine,
        "before_cursor_execute",
        lambda conn, cursor, sql, params, context, many: statements.append((sql, params)),
    )
    start = _rfc(datetime.now(UTC) - timedelta(minutes=10))
    try:
        with store.snapshot() as conn:
            health_facts(conn, ChangeWindow(start, "a window"))
            sql, params = next(s for s in statements if statement in s[0])
            if target.dialect == "sqlite":
                rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params).all()
                return "\n".join(str(row[-1]) for row in rows)
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            return "\n".join(r[0] for r in conn.exec_driver_sql(f"EXPLAIN {sql}", params))
    finally:
        store.dispose()


def test_the_changed_sessions_drive_the_read_of_their_messages(activated, target):
    """AC-26 in a window: the ledger pairs the changed sessions' messages since capture_since,
    each session one range of (task_session_id, created_at). On PostgreSQL the sessions read
    first drive that read (a LATERAL read per session): as a filter on them it read the whole
    created_at range since capture_since and tested each message. (The verdict is the property
    test's.)"""
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_new")
    plan = _window_plan(target, target.url, "window_messages_docs")
    if target.dialect == "sqlite":
        assert "idx_messages_session_created (task_session_id=? AND created_at>?)" in plan, plan
    else:
        assert "task_session_id = window_messages_docs_sessions.id" in plan, plan


def test_the_window_reads_through_the_message_indexes_where_the_store_has_them(activated, target):
    """Messages created in the window: a range of idx_messages_created_at; updated in it: a
    range of idx_messages_session_updated per session; never a scan of the messages. (Which
    index reads the changed sessions' messages is the planner's choice on PostgreSQL.)"""
    scan = (
        "SCAN task_session_messages"
        if target.dialect == "sqlite"
        else "Seq Scan on task_session_messages"
    )
    plan = _window_plan(target, target.url)
    expected = ["idx_messages_created_at", "idx_messages_session_updated"]
    if target.dialect == "sqlite":
        expected.append("idx_messages_session_created")
    for index in expected:
        assert index in plan, plan
    assert scan not in plan, plan
    with target.engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX idx_messages_session_updated")
    fallen_back = _window_plan(target, target.url)
    assert "idx_messages_session_updated" not in fallen_back
    assert scan in fallen_back, fallen_back


UNIQUE = "expect_subagent_key_to_be_unique"


def test_duplicated_keys_of_changed_rows_are_counted_over_the_table_each_key_once(target, project):
    """AC-3 in a window: a key two changed rows share, and an old key a changed row repeats,
    are two keys holding four rows (each counted over the whole table, once however many of
    its rows changed); an old duplicate no live run has seen, nothing of it changed since
    (written with old timestamps), is nightly's alone."""
    store = unconstrained_store(target.engine)
    capture = datetime.now(UTC) - timedelta(hours=2)
    store.keys(_rfc(capture), "", _rfc(capture))
    session = store.session()
    execution = "5f0c1d2e-3b4a-4c5d-8e6f-7a8b9c0d1e2f"
    store.subagent_message(session, capture + timedelta(minutes=1), "toolu_old")
    store.subagent_row(
        session, "toolu_old", capture + timedelta(minutes=1), agent_execution_id=execution
    )
    assert failed(live(project, target), "live_rows") == {}  # read in full
    at = capture + timedelta(minutes=2)
    store.subagent_message(session, at, "toolu_old_twice")
    for _ in range(2):
        store.subagent_row(session, "toolu_old_twice", at, agent_execution_id=execution)

    now = datetime.now(UTC)
    store.subagent_message(session, now, "toolu_new_twice")
    for n, tool_call in enumerate(("toolu_new_twice", "toolu_new_twice", "toolu_old")):
        store.subagent_row(
            session, tool_call, now + timedelta(microseconds=n), agent_execution_id=execution
        )
    report = live(project, target)
    assert report.windows["live_rows"]["start"] is not None
    assert failed(report, "live_rows") == {UNIQUE: "error"}
    unique = result(report, UNIQUE)
    assert unique.observed_value == 2 and "hold 4 rows" in unique.message, unique.message
    nightly = run_check(project, target.url, "nightly")
    assert result(nightly, UNIQUE).observed_value == 3
    assert "hold 6 rows" in result(nightly, UNIQUE).message


@pytest.mark.parametrize("constrained", [False, True], ids=["no-unique", "unique-over-nullable"])
def test_a_duplicated_key_with_a_null_part_counts_its_rows_as_nightly_does(
    target, project, constrained
):
    """AC-3 on a damaged table without NOT NULL: two changed rows sharing a tool_call_id and a
    NULL execution id are one key holding two rows, NULLs compared equal as nightly compares
    them, whether or not a UNIQUE constraint stands over the key (it lets NULLs repeat)."""
    store = unconstrained_store(target.engine, nullable=True, unique=constrained)
    capture = datetime.now(UTC) - timedelta(hours=2)
    store.keys(_rfc(capture), "", _rfc(capture))
    session = store.session()
    live(project, target)
    now = datetime.now(UTC)
    store.subagent_message(session, now, "toolu_null_twice")
    for n in range(2):
        store.subagent_row(session, "toolu_null_twice", now + timedelta(microseconds=n))
    with target.engine.begin() as conn:
        conn.execute(sa.update(schema.subagents).values(agent_execution_id=None))
    report = live(project, target)
    assert report.windows["live_rows"]["start"] is not None
    for checked in (report, run_check(project, target.url, "nightly")):
        unique = result(checked, UNIQUE)
        assert unique.observed_value == 1 and "hold 2 rows" in unique.message, unique.message


def test_a_key_the_store_keeps_unique_is_not_looked_up_again_per_changed_row(
    activated, target, project
):
    """AC-3/AC-14: with the UNIQUE constraint over the NOT NULL key, no row can share a key,
    so a window's changed rows are not each looked up by their key; the verdict is nightly's."""
    live(project, target)
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_new")
    activated.subagent_row(activated.main_session, "toolu_new", datetime.now(UTC))
    sent: list[str] = []

    def record(conn, cursor, statement, *_):
        sent.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        report = live(project, target)
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)
    assert report.windows["live_rows"]["start"] is not None
    row_reads = [s for s in sent if "scanned" in s and "task_session_subagents" in s]
    assert row_reads and not any("same_key" in s for s in row_reads), row_reads
    for checked in (report, run_check(project, target.url, "nightly")):
        assert result(checked, UNIQUE).success and result(checked, UNIQUE).observed_value == 0


def test_a_huge_index_name_is_shown_cut_and_escaped(activated, target, project):
    """An index name is the store's: SQLite bounds none (PostgreSQL cuts it to 63 bytes), so
    the output cuts it, and the text report escapes it as every store value."""
    name = "idx_\x1b[31m" + "x" * 5000
    with target.engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE INDEX "{name}" ON task_session_messages (updated_at)')
    live(project, target)
    report = live(project, target)
    read = report.windows["live_writer_health"]["reads"]["messages updated in the window"]
    assert read.startswith("index idx_") and len(read) < 200, len(read)
    shown = [one_line(line) for line in window_lines(report)]
    assert any("idx_\\x1b[31m" in line for line in shown), shown
    assert not any("\x1b" in line for line in shown)


def test_the_owners_indexes_are_documented_as_the_window_reads_them():
    """docs/interpretations.md gives the owner the very statements the window reads by."""
    text = (Path(__file__).parents[1] / "docs" / "interpretations.md").read_text()
    for statement in window_module.owner_index_statements():
        assert f"{statement};" in text


def test_with_indexes_on_updated_at_and_observed_at_the_window_is_one_range_each(
    activated, target, project
):
    """Where the owner added them, messages updated in the window are one range of an index
    led by updated_at (no probe per session), the changed rows read through theirs, the
    verdict unchanged."""
    with target.engine.begin() as conn:
        for statement in window_module.owner_index_statements():
            conn.exec_driver_sql(statement)
    live(project, target)
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    report = live(project, target)
    reads = report.windows["live_writer_health"]["reads"]
    assert reads["messages updated in the window"] == (
        "index idx_messages_updated_at: a range on updated_at"
    )
    assert reads["subagent rows changed in the window"].startswith(
        "indexes idx_subagents_observed_at and idx_subagents_updated_at"
    )
    assert window_module.MISSING not in reads
    assert window_module.MISSING not in report.windows["live_rows"]["reads"]
    assert failed(report) == {SHORTFALL: "error"}
    plan = _window_plan(target, target.url)
    assert "idx_messages_updated_at" in plan, plan
    assert "task_sessions" not in plan, plan  # no session probed one by one


@pytest.mark.parametrize(
    ("variable", "value"),
    [(OVERLAP_VARIABLE, "five"), (OVERLAP_VARIABLE, "-1"), (MAX_GAP_VARIABLE, "0")],
)
def test_a_setting_out_of_range_is_a_one_line_error(
    activated, target, project, monkeypatch, variable, value
):
    monkeypatch.setenv(variable, value)
    with pytest.raises(KandevDqError) as raised:
        live(project, target)
    assert variable in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("subagents", [None, "pre_amendment"])
def test_live_on_a_store_not_activated_judges_as_nightly_does(target, project, subagents):
    """Without capture_since (AC-28a) or the table (AC-17), nothing is windowed, nothing fails
    to evaluate, and live's failures are nightly's."""
    store = StoreBuilder(target.engine).create(subagents=subagents)
    store.subagent_message(store.session(), datetime.now(UTC), "toolu_a")
    for _ in range(2):
        report = live(project, target)
        assert not any("could not evaluate" in r.message for r in report.results)
    nightly = run_check(project, target.url, "nightly")
    assert failing(report) <= failing(nightly)
    assert {SHORTFALL, "expect_activation_state_to_be_in_set"} <= set(failed(report))
    assert report.windows["live_writer_health"]["reads"] == {}


def test_a_watermark_later_than_the_run_reads_in_full():
    """A window can only start before the run that reads it: a last watermark in the future
    (a clock set back) reads everything instead of nothing."""
    from kandev_dq.project.settings import LiveSettings
    from kandev_dq.records.watermark import decide

    now = datetime.now(UTC)
    later = decide("live_rows", _rfc(now + timedelta(hours=1)), now, LiveSettings())
    assert later["start"] is None and "later than this run began" in later["reason"]
    earlier = decide("live_rows", _rfc(now - timedelta(hours=1)), now, LiveSettings())
    assert earlier["start"] == _rfc(now - timedelta(hours=1, minutes=5))


@pytest.mark.parametrize("target", ["sqlite"], indirect=True)
def test_the_subagent_table_is_scanned_once_by_the_writer_health_and_row_reads(activated, target):
    """The table has no index on observed_at or updated_at: its rows changed in a window are
    read by one scan per snapshot, shared by the writer-health ledger and the row rules, and
    then named by key; the ledger reads the changed sessions' rows through their index. (SQLite's
    plan names a full scan plainly; PostgreSQL prices one for tiny tables whatever the SQL.)"""
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_new")
    activated.subagent_row(activated.main_session, "toolu_new", datetime.now(UTC))
    store = open_store(target.url)
    statements = []
    sa.event.listen(
        store.engine,
        "before_cursor_execute",
        lambda conn, cursor, sql, params, context, many: statements.append((sql, params)),
    )
    window = ChangeWindow(_rfc(datetime.now(UTC) - timedelta(minutes=10)), "a window")
    try:
        with store.snapshot() as conn:
            health = health_facts(conn, window)
            rows = row_facts(conn, window)
            scans = [
                sql
                for sql, params in statements
                if sql.lstrip().upper().startswith(("SELECT", "WITH"))
                for step in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
                if step[-1] == "SCAN task_session_subagents"
            ]
    finally:
        store.dispose()
    assert len(scans) == 1, scans
    assert health["latest_observed_at"] is not None and rows["rows"] == 1
    for read in (health["window"]["reads"], rows["window"]["reads"]):
        assert "read once for the snapshot" in read["subagent rows changed in the window"]


@pytest.mark.parametrize("target", ["sqlite"], indirect=True)
def test_a_subagent_table_without_rowid_is_read_by_its_comparisons(activated, target):
    """SQLite names the changed rows by rowid; a table declared WITHOUT ROWID has none, so each
    read compares the timestamps itself, and judges alike."""
    with target.engine.begin() as conn:
        ddl = conn.exec_driver_sql(
            "SELECT type, sql FROM sqlite_master WHERE tbl_name = 'task_session_subagents' "
            "AND sql IS NOT NULL ORDER BY type DESC"
        ).all()
        rows = conn.exec_driver_sql("SELECT * FROM task_session_subagents").all()
        conn.exec_driver_sql("DROP TABLE task_session_subagents")
        for kind, sql in ddl:
            conn.exec_driver_sql(f"{sql} WITHOUT ROWID" if kind == "table" else sql)
        marks = ", ".join("?" * len(rows[0]))
        conn.exec_driver_sql(
            f"INSERT INTO task_session_subagents VALUES ({marks})", [tuple(r) for r in rows]
        )
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_new")
    activated.subagent_row(activated.main_session, "toolu_new", datetime.now(UTC), total_tokens=0)
    window = ChangeWindow(_rfc(datetime.now(UTC) - timedelta(minutes=10)), "a window")
    store = open_store(target.url)
    try:
        with store.snapshot() as conn:
            health = health_facts(conn, window)
            rows = row_facts(conn, window)
            nightly = row_facts(conn)
    finally:
        store.dispose()
    assert health["latest_observed_at"] is not None and health["shortfall"]["count"] == 0
    assert rows["rows"] == 1 and rows["rules"]["zero_metric"]["count"] == 1
    assert nightly["rules"]["zero_metric"]["count"] == 1
    for read in (health["window"]["reads"], rows["window"]["reads"]):
        assert "rowid" not in read["subagent rows changed in the window"]


def test_too_many_changed_rows_are_compared_not_named_and_judged_alike(
    activated, target, monkeypatch
):
    """Past MAX_NAMED_ROWS changed rows (a long gap on a busy store), the reads compare the
    timestamps instead of naming each row: the same facts either way."""
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_new")
    activated.subagent_row(activated.main_session, "toolu_new", datetime.now(UTC), total_tokens=0)
    activated.subagent_row(activated.main_session, "toolu_rowonly", datetime.now(UTC))
    window = ChangeWindow(_rfc(datetime.now(UTC) - timedelta(minutes=10)), "a window")

    def read() -> tuple[dict, dict]:
        store = open_store(target.url)
        try:
            with store.snapshot() as conn:
                return health_facts(conn, window), row_facts(conn, window)
        finally:
            store.dispose()

    named = read()
    monkeypatch.setattr(window_module, "MAX_NAMED_ROWS", 1)
    compared = read()
    for facts in compared:
        assert "read once" not in facts["window"]["reads"]["subagent rows changed in the window"]
    for facts in named:
        assert "read once" in facts["window"]["reads"]["subagent rows changed in the window"]
    # Every fact alike, listings included (they state the window by its start either way).
    without_reads = [
        [_plain({k: v for k, v in facts.items() if k != "window"}) for facts in pair]
        for pair in (named, compared)
    ]
    assert without_reads[0] == without_reads[1]
    health, rows = compared
    assert health["excess"]["count"] == 1 and health["latest_observed_at"] is not None
    assert rows["rows"] == 2 and rows["rules"]["zero_metric"]["count"] == 1


def _plain(value):
    """``value`` with each listing as the SQL a reviewer runs (comparable across reads)."""
    if isinstance(value, Listing):
        return value.sql()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def test_the_last_watermark_is_read_through_an_index_an_older_records_database_gets(tmp_path):
    """A live suite's last watermark is its newest stored results, newest first: read through
    the (suite, stored at) index, not by sorting every result of the suite (a run every 5
    minutes stores 2,000 a week). A records database made before the index gets it on open."""
    from kandev_dq.records.watermark import last_watermark

    path = str(tmp_path / "records.db")
    with Records(path) as older, older.engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX kandev_dq_results_suite_stored")
    with Records(path) as records:
        statements = []
        sa.event.listen(
            records.engine,
            "before_cursor_execute",
            lambda conn, cursor, sql, params, context, many: statements.append((sql, params)),
        )
        assert last_watermark(records, "live_rows", "store") is None
        # The results' read (the store's old names are read first, from their own table).
        [(sql, params)] = [s for s in statements if "kandev_dq_validation_results" in s[0]]
        with records.engine.connect() as conn:
            plan = " ".join(
                str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
            )
    assert "kandev_dq_results_suite_stored" in plan and "TEMP B-TREE" not in plan, plan


def test_text_window_lines_stay_short_and_quiet_drops_them(activated, target, project):
    """A live run every few minutes writes its window lines to a log: each says in at most 120
    characters what its read covered (the full detail stays in JSON), and --quiet drops them."""
    from typer.testing import CliRunner

    from kandev_dq.cli import app
    from kandev_dq.expectations.base import window_text

    live(project, target)  # the next runs read a window
    argv = ["check", "--checkpoint", "live", "--store", target.url, "--project", str(project)]
    loud = CliRunner().invoke(app, argv)
    assert loud.exit_code == 0, loud.output
    shown = [line for line in loud.stdout.splitlines() if line.startswith(LIVE_SUITES)]
    assert sorted(line.split()[0] for line in shown) == sorted(LIVE_SUITES), loud.stdout
    assert all(len(line) <= 120 for line in shown), shown
    health = next(line for line in shown if line.startswith("live_writer_health read from "))
    assert "3 read(s) by index, 1 by scan; 3 owner index(es) missing" in health, health
    detail = live(project, target).windows["live_writer_health"]
    assert len(f"live_writer_health {window_text(detail)}") > 120  # JSON keeps it

    quiet = CliRunner().invoke(app, [*argv, "--quiet"])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stdout.startswith("PASSED: checkpoint live"), quiet.stdout
    assert not [line for line in quiet.stdout.splitlines() if line.startswith(LIVE_SUITES)]


def test_the_window_and_the_notification_name_the_store_as_every_output_does(
    activated,
    target,
    project,
    monkeypatch,
    receiver,  # noqa: F811 - the fixture
):
    """One display form for a store: each live window (JSON ``windows[*].store``) and the
    notification payload say what the report, the text and the data docs say."""
    from kandev_dq.store.reference import store_ref

    configure(monkeypatch, "api", receiver.url)
    assert live(project, target).success
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    report = live(project, target)
    shown = store_ref(target.url).shown
    assert report.store == shown
    payload = json.loads(json.dumps(report.to_json(), default=str))
    assert {window["store"] for window in payload["windows"].values()} == {shown}
    (arrived,) = receiver.received
    assert json.loads(arrived["body"])["kandev_dq"]["store"] == shown
    # The window still finds its predecessor: the next run reads from its watermark.
    after = live(project, target).windows["live_writer_health"]
    assert after["start"] is not None, after
