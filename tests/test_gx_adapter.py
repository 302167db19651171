"""The GX behaviour :mod:`kandev_dq.gx.adapter` relies on, pinned: after a GX upgrade that
changes any of it, these fail, and the adapter is the one module to follow."""

from __future__ import annotations

from typing import Literal

import pytest
from great_expectations.checkpoint.actions import ValidationAction
from great_expectations.core.expectation_validation_result import ExpectationValidationResult
from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

from kandev_dq.gx import adapter as gx_adapter
from kandev_dq.gx import checkpoint as runs
from kandev_dq.gx.context import load_context
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project.files import CHECKPOINTS, DATASOURCE, URL_VARIABLE
from kandev_dq.records.results import rule_result
from kandev_dq.store import snapshot
from kandev_dq.store.access import open_store

CAPTURE = "2026-07-30T01:39:37.271235Z"


class _Suites:
    """A progress display that only remembers what it was told."""

    def __init__(self) -> None:
        self.reported: list[str] = []

    def started(self, checkpoint, suites) -> None:
        pass

    def suite_done(self, suite, failed) -> None:
        self.reported.append(suite)

    def finished(self) -> None:
        pass


class ContextProbe(ValidationAction):
    type: Literal["kandev_test_context_probe"] = "kandev_test_context_probe"

    def run(self, checkpoint_result, action_context=None) -> dict:
        return {"context": self._resolve_context().context}


def test_gx_reads_through_kandev_dq_connections_and_the_pinned_snapshot(
    target, project, monkeypatch
):
    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    monkeypatch.setenv(URL_VARIABLE, "sqlite:///somewhere-else.db")
    store = open_store(target.url)
    opened: list[object] = []

    def connect():
        opened.append(connection := store.connect())
        return connection

    unpinned: list[object] = []
    read_snapshot = snapshot.read_snapshot

    def counted_read(engine):
        unpinned.append(engine)
        return read_snapshot(engine)

    try:
        context = load_context(project, store_url=store.display_url)
        # GX's runtime environment ranks above the process environment.
        assert context.config_provider.get_values()[URL_VARIABLE] == store.display_url
        progress = _Suites()
        with gx_adapter.reading_with(
            context, DATASOURCE, {**store.engine_options, "creator": connect}
        ) as gx_engine:
            source = context.data_sources.get(DATASOURCE)
            checkpoint = context.checkpoints.get("nightly")
            # The checkpoint's batches come from the very data source instance bound above...
            assert all(
                v.data.data_asset.datasource is source for v in checkpoint.validation_definitions
            )
            with gx_engine.connect():  # ...whose engine opens connections with kandev-dq's recipe
                assert opened
            with snapshot.pinned(store.engine, reader=gx_engine) as run:
                monkeypatch.setattr(snapshot, "read_snapshot", counted_read)
                result = runs.run_checkpoint(
                    context, "nightly", runs.new_run_id("nightly", "test"), progress
                )
                # ...and GX kept that execution engine for the whole run.
                assert source.get_execution_engine().engine is gx_engine
        assert unpinned == [] and run.cache, "every fact came from the pinned snapshot"
        assert progress.reported == list(CHECKPOINTS["nightly"])  # stored, in checkpoint order

        probe = ContextProbe(name="probe")
        assert gx_adapter.run_action(probe, context, result) == {"context": context}
    finally:
        store.dispose()


@pytest.mark.parametrize(
    "exception_info",
    [
        {"raised_exception": False, "exception_message": None, "exception_traceback": None},
        {"raised_exception": True, "exception_message": "boom", "exception_traceback": "..."},
        {"('table.row_count', ...)": {"raised_exception": True, "exception_message": "nested"}},
    ],
)
def test_a_result_reads_the_same_as_a_gx_object_and_as_stored_json(exception_info):
    """``rule_result`` reads both through ``.get``: GX's result classes are DictDots."""
    result = ExpectationValidationResult(
        success=True,
        expectation_config=ExpectationConfiguration(
            type="expect_activation_keys_to_be_paired",
            kwargs={},
            severity="warning",
            meta={"rules": ["AC-24d"]},
        ),
        result={"observed_value": "both present", "details": {"message": "fine"}},
        exception_info=exception_info,
    )
    read = rule_result(result)
    assert read == rule_result(result.to_json_dict())
    assert read.severity == "warning" and read.rules == ["AC-24d"]
    assert read.success == (read.message == "fine")


# --- notification actions ----------------------------------------------------------------------


def test_gx_api_action_cannot_encode_its_own_payload(capsys):
    """Why kandev-dq posts the API channel itself (``notifications.KandevAPINotificationAction``):
    GX 1.24's ``send_results`` hands requests a list of dicts as form data, which fails before
    anything is sent, and prints the error on stdout. When this stops failing, drop the subclass."""
    from great_expectations.checkpoint.actions import APINotificationAction

    action = APINotificationAction(name="api", url="http://127.0.0.1:9/")
    payload = [action.create_payload("batch", "suite", [])]
    with pytest.raises(ValueError):
        action.send_results(payload)
    assert "Exception when sending data to API" in capsys.readouterr().out


def _failed(severity, **details) -> dict:
    """A failed rule's result as GX stores it, at GX's ``severity``."""
    return {
        "success": False,
        "expectation_config": {"type": "expect_x", "severity": severity},
        "result": {"details": details},
    }


def test_action_fires_follows_gx_should_notify():
    """``action_fires`` answers as GX's actions decide, from the highest failed severity of the
    suites' results as kandev-dq reads them (an AC-24d failure is an error: GX's critical; an
    error rule whose count met its warn_if alone, a warning)."""
    from types import SimpleNamespace

    from great_expectations.checkpoint import SlackNotificationAction
    from great_expectations.checkpoint.actions import APINotificationAction
    from great_expectations.expectations.metadata_types import FailureSeverity

    def failed_run(*severities):
        suites = {n: SimpleNamespace(results=[_failed(s.value)]) for n, s in enumerate(severities)}
        return SimpleNamespace(success=False, run_results=suites)

    fires = {
        (FailureSeverity.CRITICAL, FailureSeverity.WARNING): {"critical", "failure", "all"},
        (FailureSeverity.WARNING, FailureSeverity.INFO): {"warning", "failure", "all"},
    }
    for severities, expected in fires.items():
        for on in ("critical", "warning", "info", "failure", "all", "success"):
            slack = SlackNotificationAction(name="s", slack_webhook="http://x/", notify_on=on)
            fired = gx_adapter.action_fires(slack, failed_run(*severities))
            assert fired is (on in expected), (severities, on)
    # The run's success is kandev-dq's verdict: a run whose only failure is a warning passed,
    # and GX's severity rule still reports it to a warning action.
    warned = failed_run(FailureSeverity.WARNING)
    warned.success = True
    slack = SlackNotificationAction(name="s", slack_webhook="http://x/", notify_on="warning")
    assert gx_adapter.action_fires(slack, warned)
    past_warn_if = {"warn_if": ">5", "error_if": ">50", "fired": "warn_if"}
    rows = SimpleNamespace(results=[_failed("critical", thresholds=past_warn_if)])
    warned_by_threshold = SimpleNamespace(success=True, run_results={"rows": rows})
    for on, expected in (("critical", False), ("warning", True)):
        slack = SlackNotificationAction(name="s", slack_webhook="http://x/", notify_on=on)
        assert gx_adapter.action_fires(slack, warned_by_threshold) is expected, on
    # An action without notify_on (GX's API action) always sends.
    api = APINotificationAction(name="a", url="http://x/")
    assert gx_adapter.action_fires(api, failed_run(FailureSeverity.INFO))


def test_the_pinned_snapshot_is_read_only_repeatable_and_never_jit_compiled(pg_target):
    """One consistent read that cannot write; no JIT: the planner prices the per-name JSON
    subplans high enough to compile whole scans, which cost more than the scans themselves;
    parallel scans priced so that the planner's guess of the JSON filters allows them; and
    sorts and hashes given room to stay in memory at a million messages."""
    StoreBuilder(pg_target.engine).create()
    store = open_store(pg_target.url)
    try:
        with snapshot.pinned(store.engine) as run:
            settings = {
                name: run.connection.exec_driver_sql(f"SHOW {name}").scalar_one()
                for name in (
                    "transaction_isolation",
                    "transaction_read_only",
                    "jit",
                    "parallel_setup_cost",
                    "parallel_tuple_cost",
                    "work_mem",
                )
            }
        assert settings == {
            "transaction_isolation": "repeatable read",
            "transaction_read_only": "on",
            "jit": "off",
            "parallel_setup_cost": "100",
            "parallel_tuple_cost": "0.01",
            "work_mem": "64MB",
        }
    finally:
        store.dispose()


# --- what an action returns when it has sent -----------------------------------------------------


def test_gx_actions_return_what_delivered_reads_when_they_sent(target, project, monkeypatch):
    """``delivered`` reads each action's return value, which GX declares nowhere: a send that
    went through reads as delivered, one the receiver refused does not."""
    import smtplib

    import requests
    from great_expectations.checkpoint import (
        EmailAction,
        MicrosoftTeamsNotificationAction,
        OpsgenieAlertAction,
        SlackNotificationAction,
    )

    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    store = open_store(target.url)
    try:
        context = load_context(project, store_url=store.display_url)
        with (
            gx_adapter.reading_with(context, DATASOURCE, store.engine_options) as gx_engine,
            snapshot.pinned(store.engine, reader=gx_engine),
        ):
            result = runs.run_checkpoint(context, "nightly", runs.new_run_id("nightly", "test"))
    finally:
        store.dispose()
    actions = [
        SlackNotificationAction(name="s", slack_webhook="http://127.0.0.1:9/", notify_on="all"),
        MicrosoftTeamsNotificationAction(
            name="t", teams_webhook="http://127.0.0.1:9/", notify_on="all"
        ),
        OpsgenieAlertAction(name="o", api_key="key", notify_on="all"),
        EmailAction(
            name="e",
            smtp_address="127.0.0.1",
            smtp_port="9",
            sender_login="bot",
            sender_password="pw",
            receiver_emails="oncall@example.org",
            use_tls=False,
            use_ssl=False,
            notify_on="all",
        ),
    ]

    def answering(status: int):
        def post(self, *args, **kwargs):
            response = requests.Response()
            response.status_code = status
            response.url = "http://127.0.0.1:9/"
            return response

        return post

    class Mailer:
        refuse = False

        def __init__(self, *args, **kwargs) -> None:
            pass

        def login(self, *args) -> None:
            pass

        def sendmail(self, *args) -> None:
            if Mailer.refuse:
                raise smtplib.SMTPRecipientsRefused({})

        def quit(self) -> None:
            pass

    monkeypatch.setattr(smtplib, "SMTP", Mailer)
    monkeypatch.setattr(requests.Session, "post", answering(200))
    sent = {a.type: gx_adapter.run_action(a, context, result) for a in actions}
    assert {t: gx_adapter.delivered(t, r) for t, r in sent.items()} == dict.fromkeys(sent, True)

    monkeypatch.setattr(requests.Session, "post", answering(500))
    Mailer.refuse = True
    refused = {a.type: gx_adapter.run_action(a, context, result) for a in actions}
    assert not any(gx_adapter.delivered(t, r) for t, r in refused.items()), refused


def test_the_results_store_reads_keys_as_gx_writes_and_parses_them():
    """GX writes a result's run time in :data:`gx_adapter.RUN_TIME_FORMAT`; the store reads the
    key back without GX's parse, and gets GX's own key (a named run and one without a name)."""
    from datetime import UTC, datetime

    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.store import ValidationResultsStore as GXResultsStore
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    gx_store = GXResultsStore(store_backend={"class_name": "InMemoryStoreBackend"})
    ours = gx_adapter.ValidationResultsStore(store_backend={"class_name": "InMemoryStoreBackend"})
    for name, when in (
        ("nightly@store-1a2b3c4d", datetime(2026, 7, 30, 1, 39, 37, 271235, tzinfo=UTC)),
        (None, datetime(2026, 7, 30, 1, 39, 37, tzinfo=UTC)),
    ):
        key = ValidationResultIdentifier(
            ExpectationSuiteIdentifier("a.suite"), RunIdentifier(name, when), "kandev_meta"
        )
        written = key.to_tuple()
        assert written[-2] == when.strftime(gx_adapter.RUN_TIME_FORMAT)
        read = ours.tuple_to_key(written)
        assert read == gx_store.tuple_to_key(written)
        assert read.run_id.run_time == gx_store.tuple_to_key(written).run_id.run_time
        assert read.to_tuple() == written


def test_gx_keeps_a_results_store_only_under_its_own_class_name():
    """GX's config replaces a results store whose ``class_name`` is not GX's own with an
    in-memory one (``DataContextConfig._init_stores``): the adapter's store keeps the name."""
    from great_expectations.data_context.types.base import DataContextConfig

    def configured(class_name: str) -> dict:
        config = {
            "class_name": class_name,
            "module_name": "kandev_dq.gx.results_store",
            "store_backend": {"class_name": "InMemoryStoreBackend"},
        }
        stores = DataContextConfig(
            stores={"validation_results_store": config},
            validation_results_store_name="validation_results_store",
        ).stores
        return stores["validation_results_store"]

    assert gx_adapter.ValidationResultsStore.__name__ == "ValidationResultsStore"
    assert configured("ValidationResultsStore")["module_name"] == "kandev_dq.gx.results_store"
    assert configured("KandevResultsStore") == {"class_name": "ValidationResultsStore"}


def test_the_store_url_provider_ranks_below_the_runtime_environment(project, tmp_path, monkeypatch):
    """GX asks its providers in registration order, the last winning: the one kandev-dq adds
    on GX's path reads ``$KANDEV_STORE_URL`` as ``--store`` does, and yields to a URL that
    kandev-dq gives in the runtime environment."""
    import great_expectations as gx

    store = tmp_path / "kandev.db"
    store.touch()
    monkeypatch.setenv(URL_VARIABLE, str(store))
    asked = "${" + URL_VARIABLE + "}"
    native = gx.get_context(mode="file", context_root_dir=project)
    assert native.config_provider.substitute_config(asked) == f"sqlite:///{store}"
    given = gx.get_context(
        mode="file", context_root_dir=project, runtime_environment={URL_VARIABLE: "sqlite://"}
    )
    assert given.config_provider.substitute_config(asked) == "sqlite://"


def test_a_suite_is_credited_only_with_the_store_its_own_rules_read():
    """The store a GX-native run is named for is the one kandev-dq's metrics read for the
    suite just validated: taken once, so a later suite without kandev-dq's rules (or another
    run on the thread) is never credited with an earlier suite's store."""
    import weakref

    import sqlalchemy as sa

    from kandev_dq.expectations import base

    engine = sa.create_engine("sqlite://")
    base._validating.engine = weakref.ref(engine)  # as a kandev-dq metric leaves it
    assert base.take_validated_engine() is engine
    assert base.take_validated_engine() is None
