"""``kandev-dq serve``: one process checking stores on their intervals and serving the results
as Prometheus metrics, run as a user runs it (a separate process, settings from options or
the environment), scraped over HTTP and by a real Prometheus, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from kandev_dq import exporter
from kandev_dq.errors import KandevDqError
from kandev_dq.exporter import (
    DEFAULT_LISTEN,
    LISTEN_VARIABLE,
    ProjectContexts,
    duration,
    listen_address,
    serve_settings,
)
from kandev_dq.lab.scenarios.running import materialise
from kandev_dq.project.settings import RECORDS_VARIABLE
from kandev_dq.records.tables import runs as runs_table
from kandev_dq.report import metrics
from kandev_dq.run.check import run_check
from kandev_dq.store.reference import store_ref
from tests.prometheus import prometheus
from tests.replica import free_port, streaming_pair
from tests.test_check_cli import kandev_dq as cli
from tests.test_live_checkpoint import activated  # noqa: F401 - the fixture
from tests.test_metrics import SHORTFALL, samples

#: The environment a serve process starts from: none of the caller's kandev-dq settings.
RUNS = runs_table.name
BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("KANDEV_DQ_", "KANDEV_STORE"))}


class Served:
    """A running ``kandev-dq serve``: its process, port and log."""

    def __init__(self, process: subprocess.Popen, port: int, log: Path) -> None:
        self.process, self.port, self.log = process, port, log

    def get(self, path: str, accept: str | None = None) -> tuple[int, str, str]:
        """(status, content type, body) of ``GET path``."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}")
        if accept:
            request.add_header("Accept", accept)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, answer.headers["Content-Type"], answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.headers["Content-Type"], refused.read().decode()

    def found(self) -> dict:
        return samples(self.get("/metrics", accept="application/openmetrics-text")[2])

    def once(self, done: Callable[[dict], bool], timeout_s: float = 90) -> dict:
        """The metric samples once ``done`` holds of them; the test fails at the deadline."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.found()
            if done(found):
                return found
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, (
                f"after {timeout_s} s: {found}\n{self.log.read_text()}"
            )
            time.sleep(0.3)

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, float]:
        """Send ``signum``; (exit code, seconds until the process ended)."""
        sent = time.monotonic()
        self.process.send_signal(signum)
        code = self.process.wait(timeout=30)
        return code, time.monotonic() - sent


def loop_args(*stores: str, project: Path, records: object, every: str = "1s") -> list[str]:
    """``serve``'s arguments for ``stores`` checked with ``project`` and ``records``, live
    every ``every``."""
    named = [arg for store in stores for arg in ("--store", store)]
    return [*named, "--project", str(project), "--records", str(records), "--live-every", every]


@contextmanager
def serving(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``kandev-dq serve ARGS`` on a free port (unless ``args`` or ``env`` name one), until it
    says it listens; killed afterwards if the test left it running."""
    named = "--listen" in args or LISTEN_VARIABLE in (env or {})
    listen = [] if named else ["--listen", f"127.0.0.1:{free_port()}"]
    log = tmp_path / f"serve-{time.monotonic_ns()}.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from kandev_dq.cli import main; main()",
                "serve",
                *listen,
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=BASE_ENV | (env or {}),
        )
    try:
        deadline = time.monotonic() + 60
        while not (said := re.search(r"listening on [^ ]+:(\d+);", log.read_text())):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        port = int(said.group(1))
        yield Served(process, port, log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def up(found: dict) -> dict[str, float]:
    return {labels["store"]: v for labels, v in found.get(metrics.UP, [])}


def finished(found: dict) -> set[tuple[str, str]]:
    return {
        (labels["store"], labels["checkpoint"]) for labels, _ in found.get(metrics.LAST_RUN, [])
    }


def _live_ended(found: dict, store: str) -> float:
    return max(
        (
            v
            for s, v in found.get(metrics.LAST_RUN, [])
            if s == {"store": store, "checkpoint": "live"}
        ),
        default=0.0,
    )


def _checked_again(served: Served, store: str, timeout_s: float = 90) -> dict:
    """The samples once a live run on ``store`` has finished after the ones seen now."""
    seen = _live_ended(served.found(), store)
    return served.once(lambda f: _live_ended(f, store) > seen and up(f).get(store) == 1, timeout_s)


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("30s", 30), ("5m", 300), ("24h", 86400), ("1.5h", 5400)]
)
def test_a_duration_reads_as_seconds(text, seconds):
    assert duration(text, "--live-every") == seconds


@pytest.mark.parametrize("text", ["", "0", "5 minutes", "-5m", "5w", "1e3"])
def test_a_bad_duration_is_a_one_line_error_naming_the_setting(text):
    with pytest.raises(KandevDqError, match="^--live-every: .* is not a duration"):
        duration(text, "--live-every")


def test_the_default_listen_address_is_loopback():
    assert listen_address(DEFAULT_LISTEN) == ("127.0.0.1", 9108)
    assert listen_address("[::1]:9108") == ("::1", 9108)
    assert listen_address("0.0.0.0:9108") == ("0.0.0.0", 9108)  # named: every interface


@pytest.mark.parametrize(
    "text", [":9108", "9108", "example.org:9108", "127.0.0.1:0", "127.0.0.1:x"]
)
def test_every_interface_takes_an_address_written_out(text):
    with pytest.raises(KandevDqError, match="is not HOST:PORT"):
        listen_address(text)


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        ((), {}, "no store to serve"),
        (
            ("--store", "{store}", "--live-every", "soon"),
            {},
            "--live-every: 'soon' is not a duration",
        ),
        (("--store", "{store}", "--listen", ":9108"), {}, "is not HOST:PORT"),
        (("--store", "{store}", "--full-checkpoint", "weekly"), {}, "weekly"),
        (
            (
                "--store",
                "{store}",
            ),
            {"KANDEV_DQ_SERVE_FULL_EVERY": "daily"},
            "--full-every",
        ),
        # One name per store, in order: two stores under one name would share a key ledger.
        (
            ("--store", "{store}", "--store", "{store}.2", "--store-name", "a"),
            {},
            "--store-name is given 1 time(s) for 2 store(s)",
        ),
        (
            ("--store", "{store}", "--store", "{store}.2"),
            {"KANDEV_DQ_STORE_NAME": "a"},
            "$KANDEV_DQ_STORE_NAME names one store, and 2 are served",
        ),
        (
            ("--store", "{store}", "--store", "{store}.2", *("--store-name", "a") * 2),
            {},
            "a store name is given twice",
        ),
    ],
)
def test_bad_settings_are_refused_in_one_line_before_gx_loads(project, tmp_path, args, env, said):
    store = str(tmp_path / "kandev.db")
    done = cli(
        "serve",
        *(a.format(store=store) for a in args),
        "--project",
        str(project),
        env={"HOME": str(tmp_path)} | env,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("kandev-dq: error: ") and said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_each_store_served_takes_its_name_in_order(project, tmp_path, monkeypatch):
    """``--store-name`` names the stores in the order ``--store`` gives them; the environment's
    name is taken for one store alone."""
    stores = [str(tmp_path / "a.db"), str(tmp_path / "b.db")]
    named = serve_settings(stores, store_names=["kandev-a", "kandev-b"], project=project)
    assert [ref.name for ref in named.stores] == ["kandev-a", "kandev-b"]
    one = serve_settings(stores[:1], project=project, environ={"KANDEV_DQ_STORE_NAME": "only"})
    assert [ref.name for ref in one.stores] == ["only"]


def test_a_port_in_use_is_a_one_line_error(project, tmp_path):
    with serving(tmp_path, "--store", str(tmp_path / "a.db"), "--project", str(project)) as served:
        done = cli(
            "serve",
            "--store",
            str(tmp_path / "a.db"),
            "--project",
            str(project),
            "--listen",
            f"127.0.0.1:{served.port}",
        )
    assert done.returncode == 2 and "cannot listen on" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# --- the loop, as a user runs it ------------------------------------------------------------


def test_serve_checks_each_store_on_both_intervals_and_serves_the_results(
    target, another_target, project, tmp_path
):
    """Two stores (a stopped writer and a healthy one), settings from the environment alone
    (as a systemd unit or container runs it): both checkpoints run on each store, and each
    again on its interval; the endpoints answer; SIGHUP reloads; SIGTERM exits 0 in 10 s."""
    materialise("stopped_writer", target.url)
    materialise("healthy_baseline", another_target.url)
    port = free_port()
    env = {
        "KANDEV_DQ_SERVE_STORES": f"{target.url} {another_target.url}",
        "KANDEV_DQ_SERVE_LISTEN": f"127.0.0.1:{port}",
        "KANDEV_DQ_SERVE_LIVE_EVERY": "2s",
        "KANDEV_DQ_SERVE_FULL_EVERY": "1h",
        "KANDEV_DQ_PROJECT": str(project),
        "KANDEV_DQ_RECORDS_URL": str(tmp_path / "records.db"),
    }
    stopped, healthy = store_ref(target.url).shown, store_ref(another_target.url).shown
    with serving(tmp_path, env=env) as served:
        assert served.port == port
        every = {(s, c) for s in (stopped, healthy) for c in ("live", "nightly")}
        found = served.once(lambda f: finished(f) == every)
        assert up(found) == {stopped: 1, healthy: 1}
        shortfall = {
            (labels["store"], labels["checkpoint"]): v
            for labels, v in found[metrics.RULE_SUCCESS]
            if labels["expectation"] == SHORTFALL
        }
        # One series per rule and store: the newest run judging it (live ran after nightly).
        assert shortfall == {(stopped, "live"): 0, (healthy, "live"): 1}
        intervals = {(s["store"], s["checkpoint"]): v for s, v in found[metrics.RUN_INTERVAL]}
        assert intervals == {(s, c): 2 if c == "live" else 3600 for s, c in every}

        def live_ended(f: dict) -> dict[str, float]:
            return {s["store"]: v for s, v in f[metrics.LAST_RUN] if s["checkpoint"] == "live"}

        first = live_ended(found)
        again = served.once(lambda f: all(live_ended(f)[s] > first[s] for s in first))
        nightly = {
            s["store"]: v for s, v in found[metrics.LAST_RUN] if s["checkpoint"] == "nightly"
        }
        assert {
            s["store"]: v for s, v in again[metrics.LAST_RUN] if s["checkpoint"] == "nightly"
        } == nightly

        status, kind, body = served.get("/metrics")
        assert status == 200 and kind.startswith("text/plain") and "# EOF" not in body
        status, kind, body = served.get("/metrics", accept="application/openmetrics-text")
        assert status == 200 and kind.startswith("application/openmetrics-text")
        assert body.endswith("# EOF\n")
        assert served.get("/healthz")[:1] == (200,)
        assert served.get("/")[0] == 404 and served.get("/api/v1/query")[0] == 404

        served.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while "project reloaded" not in served.log.read_text():
            assert time.monotonic() < deadline, served.log.read_text()
            time.sleep(0.2)
        reloaded = live_ended(served.found())
        served.once(lambda f: all(live_ended(f)[s] > reloaded[s] for s in reloaded))

        code, took = served.stop(signal.SIGTERM)
    assert code == 0 and took < 10, served.log.read_text()
    assert "Traceback" not in served.log.read_text()


def test_sigint_stops_it_too_and_no_run_is_left_half_written(sqlite_target, project, tmp_path):
    materialise("healthy_baseline", sqlite_target.url)
    records = tmp_path / "records.db"
    with serving(
        tmp_path,
        *loop_args(sqlite_target.url, project=project, records=str(records)),
    ) as served:
        served.once(lambda f: len(finished(f)) == 2)
        code, took = served.stop(signal.SIGINT)
    assert code == 0 and took < 10
    # Every run the register holds finished (none was left open by the stop).
    with sa.create_engine(f"sqlite:///{records}").connect() as conn:
        runs = conn.execute(sa.text(f"SELECT count(*) FROM {RUNS}")).scalar_one()
        unfinished = conn.execute(
            sa.text(f"SELECT count(*) FROM {RUNS} WHERE NOT finished")
        ).scalar_one()
    assert runs >= 2 and unfinished <= 1  # at most the cycle the stop abandoned


def test_a_store_that_is_down_never_holds_the_others(target, project, tmp_path):
    """An unreachable server and a missing file read as down; the healthy store is checked
    on its interval all the same."""
    materialise("healthy_baseline", target.url)
    down = [str(tmp_path / "missing.db"), "postgresql://postgres:hunter2@127.0.0.1:9/kandev"]
    with serving(
        tmp_path,
        *loop_args(*down, target.url, project=project, records=tmp_path / "records.db"),
    ) as served:
        healthy = store_ref(target.url).shown
        found = served.once(lambda f: (healthy, "live") in finished(f) and len(up(f)) == 3)
        assert up(found) == {store_ref(down[0]).shown: 0, store_ref(down[1]).shown: 0, healthy: 1}
        assert "hunter2" not in served.get("/metrics")[2]
        _checked_again(served, healthy)
        assert served.stop()[0] == 0
    log = served.log.read_text()
    assert "hunter2" not in log and "Traceback" not in log


def test_a_store_past_its_time_limit_counts_as_down_and_the_next_is_checked(
    pg_target, sqlite_target, project, tmp_path
):
    """A table another session holds locked keeps the run waiting: after the time limit the
    store reads as down and the SQLite store goes on being checked; once the lock goes, the
    store is checked again."""
    materialise("healthy_baseline", pg_target.url)
    materialise("healthy_baseline", sqlite_target.url)
    slow, quick = store_ref(pg_target.url).shown, store_ref(sqlite_target.url).shown
    with (
        pg_target.engine.connect() as holder,
        serving(
            tmp_path,
            *loop_args(
                pg_target.url,
                sqlite_target.url,
                project=project,
                records=str(tmp_path / "records.db"),
            ),
            "--time-limit",
            "4s",
        ) as served,
    ):
        served.once(lambda f: finished(f) >= {(slow, "live"), (quick, "live")})
        holder.execute(sa.text("LOCK TABLE task_session_messages IN ACCESS EXCLUSIVE MODE"))
        served.once(lambda f: up(f).get(slow) == 0, timeout_s=60)
        _checked_again(served, quick)
        assert "ran past the time limit" in served.log.read_text()
        holder.rollback()  # the lock goes
        served.once(lambda f: up(f).get(slow) == 1, timeout_s=60)
        assert served.stop()[0] == 0


# --- faults ----------------------------------------------------------------------------------


def test_a_postgresql_store_restarted_goes_down_then_up_without_a_crash(project, tmp_path):
    """The server stops under the loop: the store reads as down, the process lives on, and
    once the server is back the next cycle reads it again."""
    with streaming_pair() as pair:
        materialise("healthy_baseline", pair.primary)
        shown = store_ref(pair.primary).shown
        with serving(
            tmp_path,
            *loop_args(
                pair.primary, project=project, records=str(tmp_path / "records.db"), every="1s"
            ),
        ) as served:
            served.once(lambda f: (shown, "live") in finished(f))
            pair.primary_ctl("stop")
            served.once(lambda f: up(f).get(shown) == 0)
            assert served.get("/healthz")[0] == 200
            pair.primary_ctl("start")
            _checked_again(served, shown)
            assert served.stop()[0] == 0
    assert "Traceback" not in served.log.read_text()


def test_a_sqlite_file_replaced_is_read_anew(sqlite_target, project, tmp_path):
    """The store's file is replaced by another (a restore, a rename over it): the next cycle
    reads the new file, here a writer that stopped."""
    materialise("healthy_baseline", sqlite_target.url)
    (tmp_path / "other").mkdir()
    other = tmp_path / "other" / "kandev.db"
    materialise("stopped_writer", str(other))
    shown = store_ref(sqlite_target.url).shown
    with serving(
        tmp_path,
        *loop_args(
            sqlite_target.url, project=project, records=str(tmp_path / "records.db"), every="1s"
        ),
    ) as served:
        found = served.once(lambda f: (shown, "live") in finished(f))
        assert value_of(found, SHORTFALL, shown) == 1
        sqlite_target.engine.dispose()
        os.replace(other, sqlite_target.url)
        served.once(lambda f: value_of(f, SHORTFALL, shown) == 0)
        assert up(served.found()) == {shown: 1}
        assert served.stop()[0] == 0


def value_of(found: dict, expectation: str, store: str) -> float | None:
    """The rule's success on ``store`` as the newest run judging it left it."""
    values = [
        v
        for s, v in found.get(metrics.RULE_SUCCESS, [])
        if s["expectation"] == expectation and s["store"] == store
    ]
    return values[0] if values else None


def test_a_records_database_unreachable_for_a_cycle_reads_as_down_then_recovers(
    target, project, tmp_path
):
    materialise("healthy_baseline", target.url)
    folder = tmp_path / "records"
    folder.mkdir()
    shown = store_ref(target.url).shown
    with serving(
        tmp_path,
        *loop_args(target.url, project=project, records=str(folder / "records.db")),
    ) as served:
        served.once(lambda f: (shown, "live") in finished(f))
        folder.rename(tmp_path / "records-away")
        served.once(lambda f: up(f).get(shown) == 0)
        (tmp_path / "records-away").rename(folder)
        _checked_again(served, shown)
        assert served.stop()[0] == 0
    log = served.log.read_text()
    assert "Traceback" not in log
    assert all(len(line) < 600 for line in log.splitlines())  # one cut line per refusal


def test_sigterm_during_a_cycle_exits_in_time_and_leaves_no_finished_half_run(
    pg_target, project, tmp_path
):
    """A cycle waiting on a locked table when SIGTERM comes: the process exits 0 within
    10 s; the run it left is marked unfinished in the register (never a verdict), and the
    records database is whole for the next start."""
    materialise("healthy_baseline", pg_target.url)
    records = tmp_path / "records.db"
    shown = store_ref(pg_target.url).shown
    args = loop_args(pg_target.url, project=project, records=records)
    with pg_target.engine.connect() as holder:
        with serving(tmp_path, *args) as served:
            served.once(lambda f: (shown, "live") in finished(f))
            holder.execute(sa.text("LOCK TABLE task_session_messages IN ACCESS EXCLUSIVE MODE"))
            time.sleep(3)  # the next cycle is waiting on the lock
            code, took = served.stop(signal.SIGTERM)
        holder.rollback()
    assert code == 0 and took < 10, served.log.read_text()
    with sa.create_engine(f"sqlite:///{records}").connect() as conn:
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
        verdicts = conn.execute(sa.text(f"SELECT finished, success FROM {RUNS} ORDER BY id")).all()
    assert all(success is None for finished_, success in verdicts if not finished_)
    with serving(tmp_path, *args) as again:
        _checked_again(again, shown)
        assert again.stop()[0] == 0


def test_prometheus_scrapes_serve_fires_only_the_expected_alerts_and_sees_the_recovery(
    activated,  # noqa: F811 - the fixture
    target,
    another_target,
    project,
    tmp_path,
):
    """AC-26: a stopped writer (a subagent message with no row) and a healthy store, served
    by one process and scraped by a real Prometheus evaluating the shipped rules: the
    shortfall alert fires for the stopped writer alone, and resolves once its row appears."""
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    materialise("healthy_baseline", another_target.url)
    stopped, healthy = store_ref(target.url).shown, store_ref(another_target.url).shown
    with serving(
        tmp_path,
        *loop_args(
            target.url,
            another_target.url,
            project=project,
            records=str(tmp_path / "records.db"),
            every="2s",
        ),
    ) as served:
        with prometheus(f"127.0.0.1:{served.port}", tmp_path / "prometheus") as server:
            ups = server.eventually(
                lambda: server.values("kandev_dq_up", "store"), lambda f: len(f) == 2, 60
            )
            assert ups == {stopped: 1, healthy: 1}
            shortfall = f'kandev_dq_rule_success{{expectation="{SHORTFALL}",checkpoint="live"}}'
            judged = server.eventually(
                lambda: server.values(shortfall, "store"), lambda f: len(f) == 2, 60
            )
            assert judged == {stopped: 0, healthy: 1}
            errors = server.values(
                f'kandev_dq_rule_success{{severity="error",store="{healthy}"}}', "expectation"
            )
            assert errors and set(errors.values()) == {1}

            def firing() -> set[tuple[str, str]]:
                return {
                    (a["labels"]["alertname"], a["labels"]["store"])
                    for a in server.alerts()
                    if a["state"] == "firing"
                }

            fired = server.eventually(firing, lambda f: len(f) >= 2, 60)
            assert fired == {
                ("KandevDqWriterShortfall", stopped),
                ("KandevDqErrorRuleFailing", stopped),
            }
            # The writer catches up: the row appears, and every alert resolves.
            activated.subagent_row(activated.main_session, "toolu_missed", datetime.now(UTC))
            server.eventually(firing, lambda f: not f, 90)
            assert server.values(shortfall, "store") == {stopped: 1, healthy: 1}
            # nightly's failure is no series any more: live judged the rule after it.
            assert server.values(
                f'kandev_dq_rule_success{{expectation="{SHORTFALL}"}}', "store"
            ) == {
                stopped: 1,
                healthy: 1,
            }
        assert served.stop()[0] == 0


def test_a_live_cycle_builds_the_data_docs_only_when_its_verdict_moves(
    activated,  # noqa: F811 - the fixture
    target,
    project,
    tmp_path,
):
    """A live run every few minutes rebuilds no page while its verdict holds; a new failure
    and a recovery each get their run's pages and the overview; a full run always does."""
    settings = serve_settings([target.url], project=project, records=str(tmp_path / "records.db"))
    contexts = ProjectContexts(settings)
    site = project / "uncommitted" / "data_docs" / "local_site"

    def live(**kw):
        report = run_check(
            project, target.url, "live", context_for=contexts, pages_on_change=True, **kw
        )
        overview = (site / "overview.html").stat().st_mtime_ns
        pages = list((site / "validations").glob("live_*/*/*/*.html"))
        folder = report.run_time.replace("-", "").replace(":", "")  # as GX names it
        return report, overview, {p for p in pages if p.parent.name == folder}

    first, seen, pages = live()
    assert pages  # a first run's verdict is news
    # The second finds the write-once baseline recorded by the first (an info rule recovers).
    second, seen, pages = live()
    assert second.changes["resolved"] and pages
    steady, overview, pages = live()
    assert steady.success and not pages and overview == seen
    activated.subagent_message(activated.main_session, datetime.now(UTC), "toolu_missed")
    failing, overview, pages = live()
    assert not failing.success and pages and overview > seen
    still, again, pages = live()
    assert not still.success and not pages and again == overview
    activated.subagent_row(activated.main_session, "toolu_missed", datetime.now(UTC))
    recovered, last, pages = live()
    assert recovered.success and pages and last > again


def test_the_readme_unit_and_container_run_serve_on_settings_it_reads():
    """The systemd unit and the container recipe start ``serve`` with no argument beyond it,
    and every variable they set is one serve reads."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    unit = readme.split("# /etc/systemd/system/kandev-dq-serve.service")[1].split("```")[0]
    container = readme.split("```dockerfile")[1].split("```")[0]
    assert "ExecStart=/usr/local/bin/kandev-dq serve\n" in unit
    assert 'CMD ["kandev-dq", "serve"]' in container
    named = set(re.findall(r"Environment=(\w+)=", unit)) | set(
        re.findall(r"(KANDEV_\w+)=", container)
    )
    read = {
        value
        for name, value in vars(exporter).items()
        if name.endswith("_VARIABLE") and isinstance(value, str)
    }
    assert named and named <= read | {RECORDS_VARIABLE}
