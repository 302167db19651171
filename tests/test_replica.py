"""Checks on a PostgreSQL hot standby give the primary's verdict, and ``live`` there never
moves its watermark past the data the snapshot holds, however far replay lags (CONTRACT §6 on a
replica: the writer's shortfall, AC-26, is reported by the first live run that can see it).

Each test runs on a real primary and a standby streaming it (``tests/replica.py``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from kandev_dq.contract.instants import Instant, parse_key
from kandev_dq.lab.scenarios.running import materialise
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project.settings import MAX_GAP_VARIABLE, OVERLAP_VARIABLE
from kandev_dq.run.check import run_check, window_lines
from tests.gxhelpers import failed, result
from tests.replica import streaming_pair
from tests.test_check_cli import kandev_dq
from tests.test_reliability import ErrorSizes

SHORTFALL = "expect_no_writer_shortfall_since_capture_since"


@pytest.fixture(scope="module")
def replica():
    with streaming_pair() as pair:
        yield pair


def _verdict(report) -> dict[tuple[str, str], tuple[bool, object]]:
    return {(r.suite, r.expectation): (r.success, r.unexpected_count) for r in report.results}


@pytest.mark.parametrize("scenario", ["healthy_baseline", "stopped_writer", "negative_metric"])
def test_a_check_on_a_standby_gives_the_primary_verdict(replica, project, tmp_path, scenario):
    primary, standby = replica.schema()
    materialise(scenario, primary)
    replica.caught_up()
    on_primary = run_check(project, primary, "pre_release", records=str(tmp_path / "p.db"))
    on_standby = run_check(project, standby, "pre_release", records=str(tmp_path / "s.db"))
    assert _verdict(on_standby) == _verdict(on_primary)
    assert on_standby.success == on_primary.success
    assert on_primary.replica is None
    assert on_standby.replica is not None and on_standby.replica["lag_seconds"] is not None


def test_large_metadata_that_is_not_json_is_decided_on_a_standby(replica, project, tmp_path):
    """AC-23b on a hot standby: metadata over 1 MiB that is not JSON is decided on the server
    (an anonymous PL/pgSQL block answering through a transaction-local setting, which a
    standby runs: it writes nothing) and named as on the primary."""
    primary, standby = replica.schema()
    materialise("healthy_baseline", primary)
    engine = sa.create_engine(primary.replace("postgresql://", "postgresql+psycopg://"))
    store = StoreBuilder(engine)
    session = store.session()
    store.message(session, "2026-08-01 00:00:05+00:00", metadata="v" * (2 << 20))
    engine.dispose()
    replica.caught_up()
    on_primary = run_check(project, primary, "pre_release", records=str(tmp_path / "p.db"))
    with ErrorSizes() as errors:
        on_standby = run_check(project, standby, "pre_release", records=str(tmp_path / "s.db"))
    assert _verdict(on_standby) == _verdict(on_primary)
    assert result(on_standby, "expect_message_metadata_to_be_json").unexpected_count == 1
    assert errors.sizes and max(errors.sizes) < 1_000  # the text's token never reached us


def _rfc(moment: datetime) -> str:
    return Instant.from_datetime(moment).rfc3339nano()


def test_live_on_a_lagging_standby_reads_what_replay_brings_later(
    replica, project, tmp_path, monkeypatch
):
    """A message committed on the primary while replay is paused for longer than the overlap
    is read by the live run after replay resumes: the watermark of the run during the lag is
    the last replayed commit, not the validator's clock (which would start the next window
    after the message)."""
    monkeypatch.setenv(OVERLAP_VARIABLE, "0.005")  # 0.3 s
    primary, standby = replica.schema()
    engine = sa.create_engine(primary.replace("postgresql://", "postgresql+psycopg://"))
    store = StoreBuilder(engine).create()
    capture = datetime.now(UTC) - timedelta(hours=1)
    store.keys(_rfc(capture), "", _rfc(capture))
    session = store.session()
    store.subagent_message(session, capture + timedelta(minutes=1), "toolu_kept")
    store.subagent_row(session, "toolu_kept", capture + timedelta(minutes=1), total_tokens=3)
    replica.caught_up()
    records = str(tmp_path / "records.db")
    assert run_check(project, standby, "live", records=records).success

    replica.pause()
    try:
        replayed = datetime.now(UTC)
        store.subagent_message(session, datetime.now(UTC), "toolu_missed")  # AC-26
        time.sleep(1.0)  # the lag outgrows the overlap
        lagging = run_check(project, standby, "live", records=records)
        assert lagging.success  # the message is not on the standby yet
        assert lagging.replica["paused"] is True and lagging.replica["lag_seconds"] >= 1.0
        watermark = parse_key(lagging.windows["live_writer_health"]["watermark"]).micro
        assert watermark <= replayed
        assert lagging.windows["live_writer_health"]["replica"] == lagging.replica
        assert window_lines(lagging)[0].startswith("replica: read on a standby ")
    finally:
        replica.resume()
    replica.caught_up()
    after = run_check(project, standby, "live", records=records)
    assert failed(after) == {SHORTFALL: "error"}
    assert result(after, SHORTFALL).observed_value == 1
    nightly = run_check(project, standby, "nightly", records=records)
    assert failed(nightly) == {SHORTFALL: "error"}
    engine.dispose()


def test_a_standby_stalled_longer_than_the_longest_gap_is_read_in_full(
    replica, project, tmp_path, monkeypatch
):
    primary, standby = replica.schema()
    materialise("healthy_baseline", primary)
    replica.caught_up()
    records = str(tmp_path / "records.db")
    run_check(project, standby, "live", records=records)
    monkeypatch.setenv(MAX_GAP_VARIABLE, "0.0001")  # 0.36 s
    replica.pause()
    try:
        time.sleep(0.5)
        stalled = run_check(project, standby, "live", records=records)
    finally:
        replica.resume()
    for window in stalled.windows.values():
        assert window["start"] is None
        assert window["reason"].startswith("the store is a standby ")
        assert "more than 0.0001 h" in window["reason"]


def test_migrate_on_a_standby_is_refused_in_one_line(replica):
    primary, standby = replica.schema()
    materialise("pre_amendment_table", primary)  # a store the migration has work on
    replica.caught_up()
    done = kandev_dq("migrate", "--store", standby)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "the server or the user's session is read-only (a standby, or "
            "default_transaction_read_only)"
        )
    )
