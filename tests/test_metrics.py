"""A finished run as Prometheus metric families (``report/metrics.py``): what
``check --format openmetrics`` prints, what ``kandev_dq.metrics`` returns and what a long-running
process keeps, linted by promtool and scraped by a real Prometheus evaluating the shipped alert
rules, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from prometheus_client import start_http_server
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from ruamel.yaml import YAML

import kandev_dq
from kandev_dq.contract.rule_index import RULE_INDEX
from kandev_dq.contract.states import STATES
from kandev_dq.lab.scenarios.running import materialise
from kandev_dq.project.settings import DEFAULT_OVERLAP_MINUTES, OVERLAP_VARIABLE
from kandev_dq.records.results import RuleResult
from kandev_dq.report import metrics
from kandev_dq.report.metrics import CheckMetrics, openmetrics_text, run_exposition
from kandev_dq.run.check import CheckReport, run_check
from kandev_dq.store.reference import store_ref
from kandev_dq.text import one_line
from tests.gxhelpers import in_a_fresh_interpreter
from tests.prometheus import ALERTS, ALERTS_TEST, prometheus, promtool
from tests.replica import free_port, streaming_pair
from tests.test_check_cli import kandev_dq as cli

SHORTFALL = "expect_no_writer_shortfall_since_capture_since"
ORPHANS = "expect_no_orphan_subagent_rows"
EXCESS = "expect_no_writer_excess_since_capture_since"


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Each family of an OpenMetrics document (parsed by the library: a malformed document
    raises) as its samples' labels and values."""
    return {
        family.name: [(dict(s.labels), s.value) for s in family.samples]
        for family in text_string_to_metric_families(text)
    }


def value(found, family: str, **labels: str) -> float:
    [hit] = [v for got, v in found[family] if all(got.get(k) == w for k, w in labels.items())]
    return hit


def _rule(expectation: str, suite: str, success: bool, unexpected: int | None = None):
    entry = next(r for r in RULE_INDEX if r.expectation == expectation)
    return RuleResult(
        expectation=expectation,
        rules=list(entry.rules),
        severity=str(entry.severity),
        success=success,
        observed_value=unexpected,
        unexpected_count=unexpected,
        message="",
        suite=suite,
    )


def _report(store: str, checkpoint: str, at: datetime, results, **fields) -> CheckReport:
    return CheckReport(
        store=store,
        dialect="sqlite",
        checkpoint=checkpoint,
        success=True,
        state=fields.pop("state", "fully_activated"),
        keys={},
        results=list(results),
        finished_at=at.isoformat().replace("+00:00", "Z"),
        duration_s=fields.pop("duration_s", 1.5),
        **fields,
    )


T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


# --- the families, from runs recorded one after another --------------------------------------


def test_the_latest_run_of_each_checkpoint_on_each_store_is_kept():
    held = CheckMetrics()
    held.finished(_report("a", "nightly", T0, [_rule(ORPHANS, "rows", False, 3)]))
    for minutes, passed, unexpected in ((5, False, 2), (10, True, 0)):
        shortfall = _rule(SHORTFALL, "live_writer_health", passed, unexpected)
        at = T0 + timedelta(minutes=minutes)
        held.finished(_report("a", "live", at, [shortfall], state="capture_only", duration_s=0.25))
    held.finished(_report("b", "nightly", T0, [_rule(SHORTFALL, "writer_health", True, 0)]))
    found = samples(openmetrics_text(held.registry()))

    assert found[metrics.UP] == [({"store": "a"}, 1.0), ({"store": "b"}, 1.0)]
    assert (
        value(found, metrics.RULE_SUCCESS, store="a", checkpoint="live", expectation=SHORTFALL) == 1
    )
    assert value(found, metrics.RULE_SUCCESS, store="a", checkpoint="nightly") == 0
    assert value(found, metrics.RULE_UNEXPECTED, store="a", checkpoint="nightly") == 3
    labels, _ = next(s for s in found[metrics.RULE_SUCCESS] if s[0]["checkpoint"] == "nightly")
    assert labels == {
        "store": "a",
        "checkpoint": "nightly",
        "suite": "rows",
        "expectation": ORPHANS,
        "ac": "AC-16",
        "severity": "error",
    }
    stamps = {(s["store"], s["checkpoint"]): v for s, v in found[metrics.LAST_RUN]}
    assert stamps == {
        ("a", "nightly"): T0.timestamp(),
        ("a", "live"): (T0 + timedelta(minutes=10)).timestamp(),
        ("b", "nightly"): T0.timestamp(),
    }
    assert value(found, metrics.RUN_DURATION, store="a", checkpoint="live") == 0.25
    # The store's state is its newest run's, one of the four set.
    states = {s["state"]: v for s, v in found[metrics.ACTIVATION_STATE] if s["store"] == "a"}
    assert states == {state: float(state == "capture_only") for state in STATES}
    assert metrics.REPLICA_LAG not in found and metrics.RUN_INTERVAL not in found


def test_a_finding_is_open_until_the_newest_run_judging_its_rule_passes_it():
    """Live passing the shortfall closes nightly's shortfall finding; the orphan rule, which
    live does not judge, stays open from nightly (one finding per rule, whichever suite)."""
    held = CheckMetrics()
    nightly = [
        _rule(SHORTFALL, "writer_health", False, 4),
        _rule(ORPHANS, "rows", False, 1),
        _rule(EXCESS, "writer_health", False, 1),
    ]
    held.finished(_report("a", "nightly", T0, nightly))
    live = [
        _rule(SHORTFALL, "live_writer_health", False, 1),
        _rule(EXCESS, "live_writer_health", False, 1),
    ]
    held.finished(_report("a", "live", T0 + timedelta(minutes=5), live))

    def open_findings() -> dict[str, float]:
        found = samples(openmetrics_text(held.registry()))
        return {s["severity"]: v for s, v in found[metrics.OPEN_FINDINGS]}

    assert open_findings() == {"error": 2, "warning": 1, "info": 0}
    live = [
        _rule(SHORTFALL, "live_writer_health", True, 0),
        _rule(EXCESS, "live_writer_health", True, 0),
    ]
    held.finished(_report("a", "live", T0 + timedelta(minutes=10), live))
    assert open_findings() == {"error": 1, "warning": 0, "info": 0}
    # Each rule is one series, from the run that judged it last: nightly's failed shortfall
    # is gone once live passed it, so no alert reading it fires on after the recovery.
    found = samples(openmetrics_text(held.registry()))
    judged = {(s["expectation"], s["checkpoint"]): v for s, v in found[metrics.RULE_SUCCESS]}
    assert judged == {(SHORTFALL, "live"): 1, (EXCESS, "live"): 1, (ORPHANS, "nightly"): 0}


def test_a_store_that_cannot_be_read_goes_down_and_keeps_its_last_results():
    held = CheckMetrics()
    held.finished(_report("a", "live", T0, [_rule(SHORTFALL, "live_writer_health", False, 2)]))
    held.could_not_run("a")
    held.could_not_run("never read")
    held.every("a", "live", 300)
    found = samples(openmetrics_text(held.registry()))
    assert {s["store"]: v for s, v in found[metrics.UP]} == {"a": 0, "never read": 0}
    assert value(found, metrics.RULE_SUCCESS, store="a") == 0
    assert value(found, metrics.LAST_RUN, store="a") == T0.timestamp()
    assert found[metrics.RUN_INTERVAL] == [({"store": "a", "checkpoint": "live"}, 300.0)]
    held.finished(_report("a", "live", T0 + timedelta(minutes=5), []))
    assert value(samples(openmetrics_text(held.registry())), metrics.UP, store="a") == 1


def test_a_rule_listed_twice_in_a_suite_is_one_series_failing_when_either_fails():
    twice = [_rule(ORPHANS, "rows", True, 0), _rule(ORPHANS, "rows", False, 5)]
    found = samples(run_exposition(_report("a", "nightly", T0, twice)))
    assert found[metrics.RULE_SUCCESS] == [(found[metrics.RULE_SUCCESS][0][0], 0.0)]
    assert [v for _, v in found[metrics.RULE_UNEXPECTED]] == [5.0]


def test_hostile_names_are_escaped_labels_and_the_document_stays_valid(tmp_path):
    """A store name (a SQLite path may hold anything) with quotes, a newline, braces and a
    terminal escape: one label value, escaped as every output escapes it, no control byte."""
    store = 'a"b\nc}{d\x1b[31m\\e'
    text = run_exposition(_report(store, "nightly", T0, [_rule(ORPHANS, "rows", False, 1)]))
    assert "\x1b" not in text
    found = samples(text)
    assert {s["store"] for s, _ in found[metrics.UP]} == {one_line(store)}
    done = promtool("check", "metrics", stdin=text)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_two_collectors_of_the_same_families_are_refused_by_one_registry():
    """Each collector describes its families: a registry holding two would expose duplicates."""
    registry = CollectorRegistry()
    registry.register(CheckMetrics())
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(CheckMetrics())


def test_the_families_load_without_gx_or_the_sql_toolkit(tmp_path):
    loaded = in_a_fresh_interpreter(
        "import sys; import kandev_dq.report.metrics;"
        "print(sorted(m for m in ('great_expectations', 'sqlalchemy') if m in sys.modules))",
        cwd=tmp_path,
    )
    assert loaded.strip() == "[]"


# --- the alert rules ---------------------------------------------------------------------------


def test_the_alert_rules_are_valid_and_pass_their_unit_tests():
    checked = promtool("check", "rules", str(ALERTS))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", str(ALERTS_TEST))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_unit_tests_fail_on_a_broken_rule(tmp_path):
    """The promtool tests can fail: an unreachable store that no longer alerts fails them."""
    (tmp_path / "alerts.yml").write_text(
        ALERTS.read_text().replace("kandev_dq_up == 0", "kandev_dq_up == 2"), encoding="utf-8"
    )
    (tmp_path / "alerts_test.yml").write_text(ALERTS_TEST.read_text(), encoding="utf-8")
    tested = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert tested.returncode != 0 and "KandevDqStoreUnreachable" in tested.stdout + tested.stderr


def test_the_alert_rules_read_only_kandev_dq_families_and_rules():
    exprs = [
        rule["expr"]
        for group in YAML(typ="safe").load(ALERTS.read_text())["groups"]
        for rule in group["rules"]
    ]
    named = {name for expr in exprs for name in re.findall(r"kandev_dq_\w+", expr)}
    assert named <= set(metrics.FAMILIES)
    expectations = {e for expr in exprs for e in re.findall(r'expectation="(\w+)"', expr)}
    assert expectations == {SHORTFALL} <= {rule.expectation for rule in RULE_INDEX}
    # The fallback overlap of the replica alert is the setting's default.
    [lag] = [expr for expr in exprs if metrics.REPLICA_LAG in expr]
    assert f"+ {DEFAULT_OVERLAP_MINUTES * 60:g}" in lag


# --- check --format openmetrics, as a user runs it ------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "exit_code"), [("stopped_writer", 1), ("healthy_baseline", 0)]
)
def test_check_prints_the_families_of_its_run(target, project, tmp_path, scenario, exit_code):
    materialise(scenario, target.url)
    store = target.url
    if target.dialect == "postgresql":  # a password never reaches a label
        store = store.replace("postgresql://postgres@", "postgresql://postgres:hunter2@")
    before = time.time()
    done = cli(
        "check",
        "--store",
        store,
        "--project",
        str(project),
        "--checkpoint",
        "live",
        "--format",
        "openmetrics",
        "--quiet",
    )
    after = time.time()
    assert done.returncode == exit_code, done.stderr
    assert "hunter2" not in done.stdout and done.stdout.endswith("# EOF\n")
    linted = promtool("check", "metrics", stdin=done.stdout)
    assert linted.returncode == 0 and not linted.stdout.strip(), linted.stdout + linted.stderr

    found = samples(done.stdout)
    [(up_labels, up)] = found[metrics.UP]
    shown = up_labels["store"]
    assert up == 1 and target.dialect in shown and "hunter2" not in shown
    rules = {s["expectation"]: (s, v) for s, v in found[metrics.RULE_SUCCESS]}
    live_rules = {r.expectation for r in RULE_INDEX if r.suite.startswith("live_")}
    assert set(rules) == live_rules
    assert {s["checkpoint"] for s, _ in rules.values()} == {"live"}
    assert {s["store"] for s, _ in rules.values()} == {shown}
    assert rules[SHORTFALL][1] == (0 if scenario == "stopped_writer" else 1)
    assert rules[SHORTFALL][0]["suite"] == "live_writer_health"
    assert rules[SHORTFALL][0]["ac"] == ",".join(
        next(r.rules for r in RULE_INDEX if r.expectation == SHORTFALL)
    )
    errors = {e for e, (s, _) in rules.items() if s["severity"] == "error"}
    failing = {e for e in errors if rules[e][1] == 0}
    assert failing == ({SHORTFALL} if scenario == "stopped_writer" else set())
    # The keys the stopped writer left without a row (a first live run reads them all).
    unexpected = value(found, metrics.RULE_UNEXPECTED, expectation=SHORTFALL)
    assert (unexpected > 0) == (scenario == "stopped_writer")
    [(_, ended)] = found[metrics.LAST_RUN]
    assert before < ended < after
    [(_, duration)] = found[metrics.RUN_DURATION]
    assert 0 < duration < after - before
    states = {s["state"]: v for s, v in found[metrics.ACTIVATION_STATE]}
    assert states == {state: float(state == "fully_activated") for state in STATES}
    open_findings = {s["severity"]: v for s, v in found[metrics.OPEN_FINDINGS]}
    assert open_findings["error"] == len(failing)
    assert found[metrics.LIVE_OVERLAP] == [({"store": shown}, DEFAULT_OVERLAP_MINUTES * 60)]
    assert metrics.REPLICA_LAG not in found  # a primary, or SQLite


@pytest.mark.parametrize(
    "store",
    ["{tmp}/missing.db", "postgresql://postgres:hunter2@127.0.0.1:9/kandev"],
    ids=["missing SQLite file", "unreachable server"],
)
def test_a_check_that_cannot_run_prints_its_store_down(store, project, tmp_path):
    done = cli(
        "check",
        "--store",
        store.format(tmp=tmp_path),
        "--project",
        str(project),
        "--format",
        "openmetrics",
    )
    assert done.returncode == 2
    assert done.stderr.startswith("kandev-dq: error: ") and "hunter2" not in done.stdout
    found = samples(done.stdout)
    assert list(found) == [metrics.UP]
    [(labels, up)] = found[metrics.UP]
    assert up == 0 and labels["store"] == store_ref(store.format(tmp=tmp_path)).shown
    linted = promtool("check", "metrics", stdin=done.stdout)
    assert linted.returncode == 0 and not linted.stdout.strip(), linted.stdout + linted.stderr


def test_a_check_naming_no_store_prints_an_empty_document(project, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kandev/data/kandev.db
    done = cli("check", "--project", str(project), "--format", "openmetrics")
    assert done.returncode == 2 and "no store given" in done.stderr
    assert done.stdout == "# EOF\n"


# --- a real Prometheus scraping two stores --------------------------------------------------------


def test_prometheus_scrapes_a_stopped_writer_and_a_healthy_store(
    target, another_target, project, tmp_path
):
    """The registry of two stores' live runs, served over HTTP as a long-running process
    will: Prometheus reads the stopped writer's shortfall rule as 0 and fires the shortfall
    alert for it alone, and reads every error rule of the healthy store as 1."""
    materialise("stopped_writer", target.url)
    materialise("healthy_baseline", another_target.url)
    records = str(tmp_path / "records.db")
    stopped = kandev_dq.check(target.url, "live", project, records=records)
    healthy = kandev_dq.check(another_target.url, "live", project, records=records)
    assert not stopped.success and healthy.success
    port = free_port()
    server, thread = start_http_server(
        port, addr="127.0.0.1", registry=kandev_dq.metrics(stopped, healthy)
    )
    try:
        with prometheus(f"127.0.0.1:{port}", tmp_path / "prometheus") as server_api:
            shortfall = f'kandev_dq_rule_success{{expectation="{SHORTFALL}"}}'
            by_store = server_api.eventually(
                lambda: server_api.values(shortfall, "store"), lambda found: len(found) == 2
            )
            assert by_store == {stopped.store: 0, healthy.store: 1}
            errors = {
                r["metric"]["expectation"]: float(r["value"][1])
                for r in server_api.query('kandev_dq_rule_success{severity="error"}')
                if r["metric"]["store"] == healthy.store
            }
            assert set(errors) == {r.expectation for r in healthy.results if r.severity == "error"}
            assert set(errors.values()) == {1}
            assert server_api.values("kandev_dq_up", "store") == {
                stopped.store: 1,
                healthy.store: 1,
            }

            def firing() -> set[tuple[str, str]]:
                return {
                    (a["labels"]["alertname"], a["labels"]["store"])
                    for a in server_api.alerts()
                    if a["state"] == "firing"
                }

            fired = server_api.eventually(firing, lambda found: len(found) >= 2)
            assert fired == {
                ("KandevDqWriterShortfall", stopped.store),
                ("KandevDqErrorRuleFailing", stopped.store),
            }
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# --- a standby's replay lag -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def replica():
    with streaming_pair() as pair:
        yield pair


def test_a_standby_run_gives_its_replay_lag_and_the_overlap(
    replica, project, tmp_path, monkeypatch
):
    monkeypatch.setenv(OVERLAP_VARIABLE, "0.01")  # 0.6 s
    materialise("healthy_baseline", replica.primary)
    engine = sa.create_engine(replica.primary.replace("postgresql://", "postgresql+psycopg://"))
    replica.caught_up()
    replica.pause()
    try:
        with engine.begin() as conn:  # a commit the standby has not replayed
            conn.exec_driver_sql("CREATE TABLE lagging (id integer)")
        time.sleep(1.0)
        report = run_check(project, replica.standby, "live", records=str(tmp_path / "r.db"))
    finally:
        replica.resume()
        engine.dispose()
    found = samples(run_exposition(report))
    [(labels, lag)] = found[metrics.REPLICA_LAG]
    assert labels == {"store": report.store}
    assert lag == report.replica["lag_seconds"] and lag >= 1.0
    assert found[metrics.LIVE_OVERLAP] == [({"store": report.store}, pytest.approx(0.6))]
    # What the shipped alert compares: the lag is above this run's overlap.
    assert lag > value(found, metrics.LIVE_OVERLAP)
    on_primary = samples(
        run_exposition(run_check(project, replica.primary, "live", records=str(tmp_path / "p.db")))
    )
    assert metrics.REPLICA_LAG not in on_primary
