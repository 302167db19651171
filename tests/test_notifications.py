"""Notifications of unattended runs, through GX's own action classes, against local receivers.

Every channel (Slack, Teams, email, API, PagerDuty, Opsgenie) is sent to a receiver on
127.0.0.1 and what arrived is read: kandev-dq's verdict, the store without credentials, the
failed rules with their AC ids (AC-24a, AC-24d: the partial activation pair of the failing
store). A send that fails is one warning line, never a changed exit code nor a traceback; no
webhook, key or password lands in any output or file.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import requests
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from sqlalchemy.engine import make_url

from kandev_dq.errors import KandevDqError
from kandev_dq.gx import adapter as gx_adapter
from kandev_dq.gx import checkpoint as runs
from kandev_dq.gx import notifications as channels
from kandev_dq.gx.context import load_context
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project import files as project_module
from kandev_dq.run.check import run_check
from tests.test_check_cli import kandev_dq

CAPTURE = "2026-07-30T01:39:37.271235Z"
PAIRED = "expect_activation_keys_to_be_paired"  # AC-24d, AC-24a: an error when it fails
PASSWORD = "s3cret-store-pw"
TOKEN = "T0KEN-in-the-webhook-path"
SMTP_PASSWORD = "smtp-pw-9f2c"
ROUTING_KEY = "pd-routing-key-0a1b2c3d4e5f"
GENIE_KEY = "genie-key-7d8e9f"
PAGERDUTY_EVENTS = "https://events.pagerduty.com/v2/enqueue"
OPSGENIE_ALERTS = "https://api.opsgenie.com/v2/alerts"
SECRETS = (PASSWORD, TOKEN, SMTP_PASSWORD, ROUTING_KEY, GENIE_KEY)


@pytest.fixture(autouse=True)
def no_channel_configured(monkeypatch):
    """Only what a test sets: no channel or notify-on setting leaks in from the environment."""
    for variable in list(os.environ):
        if variable.startswith(channels.PREFIX) or variable == "KANDEV_STORE_URL":
            monkeypatch.delenv(variable)


# --- local receivers ---------------------------------------------------------------------------


class HttpReceiver:
    """A web hook on 127.0.0.1 (ephemeral port) that records each POST and answers ``status``;
    it stops by itself after ``lifetime_s``."""

    def __init__(self, status: int = 200, lifetime_s: float = 120.0) -> None:
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length).decode("utf-8")
                received.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b'{"ok": true}' if status < 300 else b"refused")

            def log_message(self, *args) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.server.timeout = 0.2
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook/{TOKEN}"
        self.stop = threading.Event()
        deadline = time.monotonic() + lifetime_s

        def serve() -> None:
            while not self.stop.is_set() and time.monotonic() < deadline:
                self.server.handle_request()
            self.server.server_close()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()

    def json(self, index: int = 0) -> dict:
        return json.loads(self.received[index]["body"])

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


class SmtpReceiver:
    """An SMTP server on 127.0.0.1 (aiosmtpd) that records each message and accepts one login."""

    def __init__(self) -> None:
        self.messages: list = []
        self.logins: list[tuple[bytes, bytes]] = []
        receiver = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's
                receiver.messages.append(envelope)
                return "250 OK"

        def authenticate(server, session, envelope, mechanism, auth_data):
            self.logins.append((auth_data.login, auth_data.password))
            return AuthResult(success=auth_data.password == SMTP_PASSWORD.encode())

        self.port = free_port()
        self.controller = Controller(
            Handler(),
            hostname="127.0.0.1",
            port=self.port,
            authenticator=authenticate,
            auth_require_tls=False,  # the local receiver speaks no TLS: SMTP_SECURITY=none
        )
        self.controller.start()

    def close(self) -> None:
        self.controller.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def receiver():
    made = HttpReceiver()
    yield made
    made.close()


@pytest.fixture
def smtp():
    made = SmtpReceiver()
    yield made
    made.close()


@pytest.fixture
def hosted_services(monkeypatch, receiver):
    """PagerDuty's and Opsgenie's fixed https endpoints (GX and pypd build them in code), sent to
    the local receiver instead: every request through requests goes out as it would, only to
    127.0.0.1. Records the URL each request was meant for."""
    meant: list[str] = []
    request = requests.sessions.Session.request

    def to_receiver(self, method, url, *args, **kwargs):
        meant.append(url)
        if url.startswith((PAGERDUTY_EVENTS, OPSGENIE_ALERTS)):
            url = receiver.url
        return request(self, method, url, *args, **kwargs)

    monkeypatch.setattr(requests.sessions.Session, "request", to_receiver)
    return meant


def configure(monkeypatch, channel: str, url: str = "", smtp_port: int = 0) -> None:
    """Set the environment one channel needs, its secrets included."""
    settings = {
        "slack": {channels.SLACK_WEBHOOK: url},
        "teams": {channels.TEAMS_WEBHOOK: url},
        "api": {channels.API_URL: url},
        "email": {
            channels.SMTP_HOST: "127.0.0.1",
            channels.SMTP_PORT: str(smtp_port),
            channels.SMTP_SECURITY: "none",
            channels.SMTP_USER: "kandev-dq-bot",
            channels.SMTP_PASSWORD: SMTP_PASSWORD,
            channels.EMAIL_FROM: "dq@example.org",
            channels.EMAIL_TO: "oncall@example.org, lead@example.org",
        },
        "pagerduty": {channels.PAGERDUTY_ROUTING_KEY: ROUTING_KEY},
        "opsgenie": {channels.OPSGENIE_API_KEY: GENIE_KEY},
    }[channel]
    for variable, value in settings.items():
        monkeypatch.setenv(variable, value)


def failing(target) -> StoreBuilder:
    """A store whose activation pair is partial: AC-24d (and AC-24a) fail as errors."""
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, None, CAPTURE)
    return store


def healthy(target) -> StoreBuilder:
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    return store


def files_containing(folder: Path, needle: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


# --- each channel sends ------------------------------------------------------------------------


HTTP_CHANNELS = ["slack", "teams", "api", "pagerduty", "opsgenie"]


@pytest.mark.parametrize("channel", HTTP_CHANNELS)
def test_each_web_channel_sends_a_failed_run(
    channel, sqlite_target, project, monkeypatch, receiver, hosted_services
):
    failing(sqlite_target)
    configure(monkeypatch, channel, receiver.url)
    report = run_check(project, sqlite_target.url, "nightly")
    assert not report.success

    assert len(receiver.received) == 1, receiver.received
    arrived = receiver.received[0]
    body = arrived["body"]
    path = sqlite_target.url  # the store is named by its path: no credentials to hide here
    if channel == "pagerduty":
        # GX's fixed event: checkpoint and outcome, the routing key (AC-24d's run failed).
        assert hosted_services[-1].startswith(PAGERDUTY_EVENTS)
        event = receiver.json()
        assert event["routing_key"] == ROUTING_KEY and event["event_action"] == "trigger"
        assert event["payload"]["summary"] == "Great Expectations Checkpoint nightly has failed"
        assert event["payload"]["severity"] == "error"  # an error-severity rule failed
        assert event["dedup_key"] == "nightly"
        return
    assert "FAILED" in body and "nightly" in body
    assert PAIRED in body and "AC-24d" in body and "AC-24a" in body
    assert json.dumps(path)[1:-1] in body  # the store, as JSON spells it
    if channel == "slack":
        blocks = receiver.json()["blocks"]
        header = blocks[0]["text"]["text"]
        assert header.startswith("kandev-dq ")
        assert header.endswith(" - nightly - Failure :no_entry:")
        assert blocks[2]["text"]["text"].startswith("kandev-dq verdict: FAILED (")
    elif channel == "teams":
        card = receiver.json()["attachments"][0]["content"]
        header = card["body"][0]["columns"][1]["items"][0]["text"]
        assert header == "nightly - Failure \u274c"
        texts = [block.get("text", "") for block in card["body"]]
        assert any(text.startswith("kandev-dq verdict: FAILED") for text in texts)
    elif channel == "api":
        payload = receiver.json()
        assert payload["kandev_dq"]["verdict"] == "FAILED"
        assert payload["kandev_dq"]["store"].endswith(path)
        failed = {r["expectation"]: r for r in payload["kandev_dq"]["failed"]}
        assert failed[PAIRED]["rules"] == ["AC-24d", "AC-24a"]
        assert failed[PAIRED]["severity"] == "error"
        assert [v["test_suite_name"] for v in payload["validations"]] == [
            "activation",
            "writer_health",
            "rows",
        ]
        assert arrived["headers"]["Content-Type"] == "application/json"
    elif channel == "opsgenie":
        assert hosted_services[-1] == OPSGENIE_ALERTS
        alert = receiver.json()
        assert arrived["headers"]["Authorization"] == f"GenieKey {GENIE_KEY}"
        assert alert["message"] == "Great Expectations Checkpoint nightly failed!"
        assert alert["description"].startswith("kandev-dq verdict: FAILED")
        assert alert["priority"] == "P2" and alert["tags"] == ["kandev-dq"]


def test_email_sends_a_failed_run(sqlite_target, project, monkeypatch, smtp):
    failing(sqlite_target)
    configure(monkeypatch, "email", smtp_port=smtp.port)
    report = run_check(project, sqlite_target.url, "nightly")
    assert not report.success

    assert smtp.logins == [(b"kandev-dq-bot", SMTP_PASSWORD.encode())]
    assert len(smtp.messages) == 1
    envelope = smtp.messages[0]
    assert envelope.mail_from == "dq@example.org"
    assert envelope.rcpt_tos == ["oncall@example.org", "lead@example.org"]
    mail = message_from_bytes(envelope.content)
    assert mail["Subject"].startswith("kandev-dq nightly: FAILED - ")
    assert mail["Subject"].endswith(sqlite_target.url)  # the store, by its path
    html = mail.get_payload()[0].get_payload(decode=True).decode()
    assert "kandev-dq verdict: FAILED" in html and "store: " in html
    assert PAIRED in html and "AC-24d, AC-24a" in html
    assert "activation" in html and "writer_health" in html  # GX's own per-suite blocks
    assert SMTP_PASSWORD not in envelope.content.decode()


# --- which runs notify -------------------------------------------------------------------------


def test_which_runs_notify_follows_notify_on(sqlite_target, project, monkeypatch, receiver):
    """The healthy store passes with one warning (AC-29, AC-26: no subagent activity since the
    capture): reported only when warnings are asked for. (Every run reports here: the warning
    stands from run to run, and a channel notifying on change would hear of it once.)"""
    healthy(sqlite_target)
    configure(monkeypatch, "api", receiver.url)
    monkeypatch.setenv("KANDEV_DQ_NOTIFY_WHEN", "always")
    assert run_check(project, sqlite_target.url, "nightly").success
    assert receiver.received == []  # errors only, by default

    monkeypatch.setenv(channels.NOTIFY_ON, "warning")
    assert run_check(project, sqlite_target.url, "nightly").success
    assert len(receiver.received) == 1
    summary = receiver.json()["kandev_dq"]
    assert summary["verdict"] == "PASSED"
    assert {r["severity"] for r in summary["failed"]} == {"warning"}

    # A channel's own setting wins over the shared one.
    monkeypatch.setenv(f"{channels.PREFIX}API_NOTIFY_ON", "error")
    assert run_check(project, sqlite_target.url, "nightly").success
    assert len(receiver.received) == 1


def test_notify_on_maps_to_gx_notify_on_one_action_each(project, monkeypatch):
    context = load_context(project)
    assert channels.notification_actions(context) == []  # nothing configured: nothing sent
    configure(monkeypatch, "slack", "http://127.0.0.1:9/hook")
    configure(monkeypatch, "opsgenie")
    monkeypatch.setenv(channels.NOTIFY_ON, "warning")
    from great_expectations.checkpoint import OpsgenieAlertAction, SlackNotificationAction

    built = {c.name: c.actions for c in channels.notification_channels(context, "a store")}
    assert list(built) == ["slack", "opsgenie"]
    assert all(isinstance(a, SlackNotificationAction) for a in built["slack"])
    assert all(isinstance(a, OpsgenieAlertAction) for a in built["opsgenie"])
    assert [a.notify_on for a in built["slack"]] == ["critical", "warning"]
    assert [a.priority for a in built["opsgenie"]] == ["P2", "P4"]
    # The webhook is a reference GX resolves when it sends: the action does not hold it.
    assert "127.0.0.1:9" not in json.dumps([a.dict() for a in built["slack"]], default=str)


def test_half_configured_channels_are_off_with_one_warning(project, monkeypatch, caplog):
    context = load_context(project)
    monkeypatch.setenv(channels.SMTP_HOST, "127.0.0.1")  # no recipient
    monkeypatch.setenv(channels.API_URL, "ftp://example.org/x")
    monkeypatch.setenv(channels.OPSGENIE_API_KEY, GENIE_KEY)
    monkeypatch.setenv(channels.OPSGENIE_REGION, "eu.example.org@127.0.0.1")
    monkeypatch.setenv(channels.NOTIFY_ON, "sometimes")
    assert channels.notification_actions(context) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("email notifications are off: KANDEV_DQ_EMAIL_TO is not set" in w for w in warnings)
    assert any("api notifications are off" in w for w in warnings)
    assert any("opsgenie notifications are off" in w for w in warnings)
    assert any("'sometimes' is not one of error, warning, all" in w for w in warnings)
    assert not any(GENIE_KEY in w for w in warnings)


# --- a failed send -----------------------------------------------------------------------------


def test_a_failed_send_warns_and_keeps_the_exit_code(sqlite_target, project, monkeypatch):
    """Receivers that answer HTTP 500, a port nobody listens on, an SMTP server that is not
    there: each is one warning line, and the exit code is the check's (1: AC-24d failed)."""
    failing(sqlite_target)
    refusing = HttpReceiver(status=500)
    closed = f"http://127.0.0.1:{free_port()}/hook/{TOKEN}"
    try:
        configure(monkeypatch, "slack", refusing.url)
        configure(monkeypatch, "teams", refusing.url)
        configure(monkeypatch, "api", closed)
        configure(monkeypatch, "email", smtp_port=free_port())
        done = kandev_dq("check", "--store", sqlite_target.url, "--project", str(project), "-q")
    finally:
        refusing.close()
    assert done.returncode == 1, done.stderr
    assert len(refusing.received) == 2  # Slack's and Teams' posts reached it, and were refused
    warnings = [line for line in done.stderr.splitlines() if "notification was not sent" in line]
    assert sorted(w.split(" notification")[0] for w in warnings) == [
        "kandev-dq: warning: the api",
        "kandev-dq: warning: the email",
        "kandev-dq: warning: the slack",
        "kandev-dq: warning: the teams",
    ]
    assert "ConnectionError" in next(w for w in warnings if "the api" in w)
    assert all(line.startswith("kandev-dq: ") for line in done.stderr.splitlines()), done.stderr
    assert "Traceback" not in done.stderr
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr


def test_an_http_error_names_its_status_and_a_passing_run_stays_zero(
    sqlite_target, project, monkeypatch
):
    healthy(sqlite_target)
    refusing = HttpReceiver(status=503)
    try:
        configure(monkeypatch, "api", refusing.url)
        monkeypatch.setenv(channels.NOTIFY_ON, "all")
        done = kandev_dq("check", "--store", sqlite_target.url, "--project", str(project), "-q")
    finally:
        refusing.close()
    assert done.returncode == 0, done.stderr
    assert len(refusing.received) == 1
    assert "the api notification was not sent: HTTPError (HTTP 503)" in done.stderr
    assert "Traceback" not in done.stderr and TOKEN not in done.stderr


def test_a_receiver_that_never_answers_is_given_up(sqlite_target, project, monkeypatch, caplog):
    failing(sqlite_target)
    silent = socket.socket()  # accepts connections (backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(5)
    monkeypatch.setattr(channels, "SEND_TIMEOUT_S", 1.0)
    try:
        configure(monkeypatch, "slack", f"http://127.0.0.1:{silent.getsockname()[1]}/{TOKEN}")
        started = time.monotonic()
        report = run_check(project, sqlite_target.url, "nightly")
        assert not report.success
    finally:
        silent.close()
    assert time.monotonic() - started < 60
    assert any(
        "slack notification was not sent: no answer within 1 s" in r.getMessage()
        for r in caplog.records
    )


# --- secrets -----------------------------------------------------------------------------------


def test_no_secret_appears_in_any_output_or_file(target, project, monkeypatch, receiver, smtp):
    """Every channel configured with its secrets, the store URL with a password: stdout,
    stderr, the results, the data docs, the checkpoints and the ledger hold none of them."""
    failing(target)
    url = make_url(target.url) if target.dialect == "postgresql" else None
    store = (
        url.set(password=PASSWORD).render_as_string(hide_password=False)
        if url is not None
        else target.url
    )
    for channel in ("slack", "teams", "api"):
        configure(monkeypatch, channel, receiver.url)
    configure(monkeypatch, "email", smtp_port=smtp.port)
    done = kandev_dq("check", "--store", store, "--project", str(project), "--format", "json")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["success"] is False  # stdout is still one JSON object
    assert len(receiver.received) == 3 and len(smtp.messages) == 1
    for secret in SECRETS:
        assert secret not in done.stdout and secret not in done.stderr
        assert files_containing(project, secret) == []
    for arrived in receiver.received:
        assert PASSWORD not in arrived["body"]
    api = next(json.loads(a["body"]) for a in receiver.received if '"kandev_dq"' in a["body"])
    assert api["kandev_dq"]["store"].startswith(target.dialect)  # named, without credentials
    assert PASSWORD not in smtp.messages[0].content.decode()


def test_hosted_services_keys_stay_out_of_outputs(
    sqlite_target, project, monkeypatch, hosted_services, receiver, capsys, caplog
):
    failing(sqlite_target)
    configure(monkeypatch, "pagerduty")
    configure(monkeypatch, "opsgenie")
    run_check(project, sqlite_target.url, "nightly")
    holding_a_key = {k for k, v in os.environ.items() if ROUTING_KEY in v or GENIE_KEY in v}
    assert holding_a_key == {channels.PAGERDUTY_ROUTING_KEY, channels.OPSGENIE_API_KEY}
    assert len(receiver.received) == 2
    out, err = capsys.readouterr()
    shown = out + err + caplog.text
    assert ROUTING_KEY not in shown and GENIE_KEY not in shown
    assert files_containing(project, ROUTING_KEY) == files_containing(project, GENIE_KEY) == []


# --- trust: GX's action classes stay allowed in a project --------------------------------------


def test_a_project_naming_gx_action_classes_runs_them_only_when_allowed(project):
    """GX's and kandev-dq's own action classes hold URLs and ``${VAR}``s, and name renderer
    classes: a checkpoint naming them needs ``--allow-project-code`` (reliability, 3a)."""
    path = project / "checkpoints" / "nightly.json"
    config = json.loads(path.read_text())
    config["actions"] += [
        {
            "type": "slack",
            "name": "tell",
            "slack_webhook": "${KANDEV_DQ_SLACK_WEBHOOK}",
            "renderer": {
                "module_name": "great_expectations.render.renderer.slack_renderer",
                "class_name": "SlackRenderer",
            },
        },
        {
            "type": "email",
            "name": "mail",
            "smtp_address": "${KANDEV_DQ_SMTP_HOST}",
            "smtp_port": "25",
            "receiver_emails": "${KANDEV_DQ_EMAIL_TO}",
            "renderer": {
                "module_name": "kandev_dq.gx.notifications",
                "class_name": "KandevEmailRenderer",
            },
        },
        {"type": "microsoft", "name": "teams", "teams_webhook": "${KANDEV_DQ_TEAMS_WEBHOOK}"},
        {"type": "opsgenie", "name": "genie", "api_key": "${KANDEV_DQ_OPSGENIE_API_KEY}"},
        {"type": "pagerduty", "name": "page", "api_key": "x", "routing_key": "y"},
        {"type": "kandev_dq_api", "name": "api", "url": "http://127.0.0.1:9/"},
    ]
    path.write_text(json.dumps(config))
    with pytest.raises(KandevDqError, match=r"nightly\.json: actions\[1\]\.slack_webhook: "):
        project_module.refuse_project_code(project)
    context = load_context(project, allow_project_code=True)
    loaded = context.checkpoints.get("nightly").actions
    assert [action.type for action in loaded] == [action["type"] for action in config["actions"]]


# --- how a send is judged ----------------------------------------------------------------------


def test_failures_are_named_without_their_text():
    response = requests.Response()
    response.status_code = 500
    error = requests.HTTPError(f"500 for url: http://127.0.0.1/hook/{TOKEN}", response=response)
    assert runs._failure(error) == "HTTPError (HTTP 500)"
    assert runs._failure(requests.ConnectionError(f"to /{TOKEN}")) == "ConnectionError"
    assert gx_adapter.pagerduty_available()  # the test extra installs pypd
