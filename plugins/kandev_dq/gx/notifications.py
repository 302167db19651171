"""What an unattended run tells people: GX's own notification actions, configured at run time.

Each channel is one of GX 1.24's action classes, built in memory for one run from settings read
through GX's config provider (the environment, then the project's config variables, which may
set them only under ``--allow-project-code``: docs/reliability.md, 3a); nothing
here is ever saved into ``checkpoints/*.json``. Where GX's field takes a ``${VAR}`` reference
(Slack and Teams webhooks, every SMTP field) the action holds only the reference and GX resolves
it when it sends, so the secret is not even held by the action. PagerDuty's and Opsgenie's keys
and the API URL are plain fields in GX, so the action holds them, for that run only.

| channel   | GX class                           | required settings                           |
|-----------|------------------------------------|---------------------------------------------|
| slack     | ``SlackNotificationAction``        | ``KANDEV_DQ_SLACK_WEBHOOK``                 |
| teams     | ``MicrosoftTeamsNotificationAction`` | ``KANDEV_DQ_TEAMS_WEBHOOK``               |
| email     | ``EmailAction``                    | ``KANDEV_DQ_SMTP_HOST``, ``KANDEV_DQ_EMAIL_TO`` |
| api       | ``APINotificationAction`` (below)  | ``KANDEV_DQ_API_URL``                       |
| pagerduty | ``PagerdutyAlertAction`` (``pypd``) | ``KANDEV_DQ_PAGERDUTY_ROUTING_KEY``        |
| opsgenie  | ``OpsgenieAlertAction``            | ``KANDEV_DQ_OPSGENIE_API_KEY``              |

Every message carries kandev-dq's verdict, the store (its identity: no user, no password), the
checkpoint and the failed rules with their AC ids, through kandev-dq subclasses of GX's own
renderers; PagerDuty's event is GX's fixed summary (checkpoint and outcome), which GX gives no
way to extend.
"""

from __future__ import annotations

import html
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import requests
from great_expectations.checkpoint.actions import APINotificationAction, NotifyOn
from great_expectations.render.renderer import (
    EmailRenderer,
    MicrosoftTeamsRenderer,
    OpsgenieRenderer,
    SlackRenderer,
)
from great_expectations.util import convert_to_json_serializable  # noqa: TID251 - GX's own

from kandev_dq.contract.severity import Severity
from kandev_dq.gx import adapter as gx_adapter

# The channels' settings, named with every other setting: read through GX's config provider
# (the environment, config_variables.yml), and handed to GX's actions as ${VAR} references.
from kandev_dq.project.settings import (
    API_URL,
    EMAIL_FROM,
    EMAIL_TO,
    NOTIFY_ON,
    NOTIFY_WHEN,
    OPSGENIE_API_KEY,
    OPSGENIE_REGION,
    PAGERDUTY_API_KEY,
    PAGERDUTY_ROUTING_KEY,
    PREFIX,
    SLACK_WEBHOOK,
    SMTP_HOST,
    SMTP_PASSWORD,
    SMTP_PORT,
    SMTP_SECURITY,
    SMTP_USER,
    TEAMS_WEBHOOK,
)
from kandev_dq.records.changes import NOTIFY_WHEN as NOTIFY_WHEN_WORDS
from kandev_dq.records.changes import ON_CHANGE
from kandev_dq.records.results import RuleResult, rule_result
from kandev_dq.text import markdown_text, one_line, xml_text

logger = logging.getLogger(__name__)

#: kandev-dq's notify-on word -> GX ``notify_on`` values, one action each. GX's "critical" and
#: "warning" fire only when that is the run's *highest* failed severity, so the pair notifies
#: exactly once whenever an error or a warning failed.
NOTIFY_MODES: dict[str, tuple[str, ...]] = {
    Severity.ERROR.value: (Severity.ERROR.gx,),
    Severity.WARNING.value: (Severity.ERROR.gx, Severity.WARNING.gx),
    "all": ("all",),
}
#: GX ``notify_on`` -> the severities of failed rules an action of that mode reports.
REPORTED_SEVERITIES: dict[str, tuple[Severity, ...]] = {
    Severity.ERROR.gx: (Severity.ERROR,),
    Severity.WARNING.gx: (Severity.WARNING,),
    "all": tuple(Severity),
}
#: How urgent a page is, by the GX ``notify_on`` that fired it (an error-severity rule failed,
#: a warning-severity one did, or the run is reported whatever it found).
PAGERDUTY_SEVERITY = {"critical": "error", "warning": "warning", "all": "info"}
OPSGENIE_PRIORITY = {"critical": "P2", "warning": "P4", "all": "P5"}
#: SMTP connection security -> (GX ``use_ssl``, GX ``use_tls``, default port).
SMTP_SECURITIES = {
    "starttls": (False, True, "587"),
    "ssl": (True, False, "465"),
    "none": (False, False, "25"),
}
SEND_TIMEOUT_S = 30.0
_NAME_LIMIT = 100  # GX puts the action's name in Slack's header, which Slack caps at 150
_REGION = re.compile(r"[a-z]{2}")


def _ref(variable: str) -> str:
    """A GX config-variable reference, resolved by GX when the action sends."""
    return "${" + variable + "}"


# --- what every message says -------------------------------------------------------------------


@dataclass
class RunSummary:
    """kandev-dq's reading of a checkpoint result, the part every channel adds to GX's message."""

    checkpoint: str
    store: str
    failed: list[RuleResult] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return "FAILED" if any(r.severity == Severity.ERROR for r in self.failed) else "PASSED"

    def counts(self) -> str:
        by = {s.value: sum(r.severity == s for r in self.failed) for s in Severity}
        return ", ".join(f"{n} {s}(s)" for s, n in by.items())

    def lines(self) -> list[str]:
        """Plain lines, not yet escaped: the caller escapes them for its format."""
        head = [
            f"kandev-dq verdict: {self.verdict} ({self.counts()} failed)",
            f"store: {self.store}",
            f"checkpoint: {self.checkpoint}",
        ]
        return head + [
            f"failed {r.severity}: {r.expectation} ({', '.join(r.rules) or 'no AC id'}; "
            f"suite {r.suite})"
            for r in self.failed
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "store": self.store,
            "checkpoint": self.checkpoint,
            "failed": [
                {
                    "expectation": r.expectation,
                    "rules": r.rules,
                    "severity": r.severity,
                    "suite": r.suite,
                }
                for r in self.failed
            ],
        }


def summarise(checkpoint: str, suite_results, store: str) -> RunSummary:
    """The summary of a run from its suites' GX results."""
    failed = [
        rule
        for v in suite_results
        for rule in (rule_result(r, suite=v.suite_name) for r in v.results)
        if not rule.success
    ]
    return RunSummary(checkpoint, store, failed)


def summarise_run(checkpoint_result, store: str) -> RunSummary:
    return summarise(
        checkpoint_result.checkpoint_config.name, checkpoint_result.run_results.values(), store
    )


# --- GX's renderers, with the summary added ----------------------------------------------------


class KandevSlackRenderer(SlackRenderer):
    """GX's Slack message with kandev-dq's summary after its run-time line (Slack ``mrkdwn``).

    GX renders each suite, then joins the blocks without the checkpoint result: the suites
    are kept as they pass, for the summary.
    """

    def __init__(self, store: str = "") -> None:
        self.store = store
        self.suites: list = []

    def render(self, validation_result, *args, **kwargs) -> list[dict]:
        self.suites.append(validation_result)
        return super().render(validation_result, *args, **kwargs)

    def concatenate_text_blocks(self, action_name, text_blocks, success, checkpoint_name, run_id):
        payload = super().concatenate_text_blocks(
            action_name, text_blocks, success, checkpoint_name, run_id
        )
        summary = summarise(checkpoint_name, self.suites, self.store)
        self.suites = []
        # Slack reads &, < and > as markup (links, mentions): escaped, no store path can
        # ping anyone or make a link.
        lines = [
            one_line(line).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            for line in summary.lines()
        ]
        block = {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}}
        payload["blocks"].insert(2, block)  # after GX's header and run time
        return payload


class KandevTeamsRenderer(MicrosoftTeamsRenderer):
    """GX's Teams card, then one text block per summary line (Markdown escaped)."""

    def __init__(self, store: str = "") -> None:
        self.store = store

    def render(self, checkpoint_result, data_docs_pages=None) -> dict:
        payload = super().render(checkpoint_result, data_docs_pages)
        body = payload["attachments"][0]["content"]["body"]
        for line in summarise_run(checkpoint_result, self.store).lines():
            body.append({"type": "TextBlock", "text": markdown_text(line), "wrap": True})
        return payload


class KandevEmailRenderer(EmailRenderer):
    """GX's email, its subject naming the verdict, then the summary as escaped HTML."""

    def __init__(self, store: str = "") -> None:
        self.store = store

    def render(self, checkpoint_result) -> tuple[str, str]:
        _, suites = super().render(checkpoint_result)
        summary = summarise_run(checkpoint_result, self.store)
        title = one_line(f"kandev-dq {summary.checkpoint}: {summary.verdict} - {summary.store}")
        lines = "".join(f"<p>{_html(line)}</p>" for line in summary.lines())
        return title, f"{lines}<br>{suites}"


class KandevOpsgenieRenderer(OpsgenieRenderer):
    """GX's Opsgenie description, the summary first (plain text, one line each)."""

    def __init__(self, store: str = "") -> None:
        self.store = store

    def render(self, checkpoint_result) -> str:
        described = super().render(checkpoint_result)
        lines = summarise_run(checkpoint_result, self.store).lines()
        return "\n".join(one_line(line) for line in lines) + "\n\n" + described


def _html(text: str) -> str:
    return html.escape(xml_text(text), quote=True)


# --- the API channel ---------------------------------------------------------------------------


class KandevAPINotificationAction(APINotificationAction):
    """GX's ``APINotificationAction`` with its payload posted as JSON, gated by ``notify_on``.

    GX 1.24's own passes its list of payloads as ``data=``, which requests cannot form-encode
    (every send fails before it leaves; ``tests/test_gx_adapter.py`` pins that), prints the
    error, URL included, on stdout, and has no ``notify_on``. The body is GX's per-suite payload
    under ``validations``, with kandev-dq's summary under ``kandev_dq``.
    """

    type: Literal["kandev_dq_api"] = "kandev_dq_api"
    notify_on: NotifyOn = "failure"
    store: str = ""

    def run(self, checkpoint_result, action_context=None) -> dict:
        if not gx_adapter.action_fires(self, checkpoint_result):
            return {"result": "none required"}
        validations = [
            self.create_payload(
                data_asset_name=identifier.batch_identifier,
                suite_name=result.suite_name,
                validation_results_serializable=convert_to_json_serializable(result.results),
            )
            for identifier, result in checkpoint_result.run_results.items()
        ]
        body = {
            "kandev_dq": summarise_run(checkpoint_result, self.store).to_json(),
            "run_name": checkpoint_result.run_id.run_name,
            "validations": validations,
        }
        response = self.send_results(body)
        return {"result": f"Posted results to API, status code - {response.status_code}"}

    def send_results(self, payload) -> requests.Response:
        response = requests.post(self.url, json=payload, timeout=SEND_TIMEOUT_S)
        response.raise_for_status()
        return response


# --- building the run's actions ----------------------------------------------------------------


@dataclass
class Channel:
    """One configured channel: its name in messages, and its GX actions for this run."""

    name: str
    actions: list = field(default_factory=list)
    #: The severities of failed rules it reports (kandev-dq's words).
    severities: tuple[str, ...] = (Severity.ERROR,)
    #: ``change`` (a new failure or a recovery) or ``always`` (every run it reports).
    when: str = ON_CHANGE


def notification_channels(context, store: str = "") -> list[Channel]:
    """The channels configured for this run (none unless a channel's settings are set).

    The actions' name, which GX puts in Slack's header, names the store as every output shows
    it (no user, no password).
    """
    values = context.config_provider.get_values()
    name = one_line(f"kandev-dq {store}".strip())  # GX shows it as is, in Slack's header
    name = name if len(name) <= _NAME_LIMIT else f"{name[:60]}...{name[-37:]}"
    channels = []
    for channel, build in _BUILDERS.items():
        modes = _modes(values, channel)
        try:
            actions = build(values, name, store, modes)
        except _Unusable as exc:
            logger.warning("kandev-dq: warning: %s notifications are off: %s", channel, exc)
            continue
        if actions:
            severities = tuple(dict.fromkeys(s for m in modes for s in REPORTED_SEVERITIES[m]))
            channels.append(Channel(channel, actions, severities, _when(values, channel)))
    return channels


def notification_actions(context, store: str = "") -> list:
    """Every GX action of every configured channel, in channel order."""
    return [a for c in notification_channels(context, store) for a in c.actions]


class _Unusable(Exception):
    """A channel is half configured, or needs a package that is not installed."""


def _modes(values: dict, channel: str) -> tuple[str, ...]:
    own = f"{PREFIX}{channel.upper()}_NOTIFY_ON"
    variable = own if values.get(own) else NOTIFY_ON
    mode = (values.get(variable) or Severity.ERROR.value).strip().lower()
    if mode not in NOTIFY_MODES:
        logger.warning(
            "kandev-dq: warning: %s=%r is not one of %s; notifying on errors",
            variable,
            one_line(mode),
            ", ".join(NOTIFY_MODES),
        )
        mode = Severity.ERROR.value
    return NOTIFY_MODES[mode]


def _when(values: dict, channel: str) -> str:
    own = f"{PREFIX}{channel.upper()}_NOTIFY_WHEN"
    variable = own if values.get(own) else NOTIFY_WHEN
    when = (values.get(variable) or ON_CHANGE).strip().lower()
    if when not in NOTIFY_WHEN_WORDS:
        logger.warning(
            "kandev-dq: warning: %s=%r is not one of %s; notifying on change",
            variable,
            one_line(when),
            ", ".join(NOTIFY_WHEN_WORDS),
        )
        when = ON_CHANGE
    return when


def _chat(values, name, modes, variable: str, action, field: str, renderer) -> list:
    """One chat webhook action per mode, when its variable is set (Slack, Teams)."""
    if not values.get(variable):
        return []
    return [
        action(name=name, notify_on=notify_on, renderer=renderer, **{field: _ref(variable)})
        for notify_on in modes
    ]


def _slack(values, name, store, modes) -> list:
    from great_expectations.checkpoint import SlackNotificationAction

    action = SlackNotificationAction
    renderer = KandevSlackRenderer(store)
    return _chat(values, name, modes, SLACK_WEBHOOK, action, "slack_webhook", renderer)


def _teams(values, name, store, modes) -> list:
    from great_expectations.checkpoint import MicrosoftTeamsNotificationAction

    action = MicrosoftTeamsNotificationAction
    renderer = KandevTeamsRenderer(store)
    return _chat(values, name, modes, TEAMS_WEBHOOK, action, "teams_webhook", renderer)


def _email(values, name, store, modes) -> list:
    wanted = [v for v in (SMTP_HOST, EMAIL_TO) if values.get(v)]
    if not wanted:
        return []
    if len(wanted) == 1:
        missing = EMAIL_TO if wanted == [SMTP_HOST] else SMTP_HOST
        raise _Unusable(f"{missing} is not set")
    if bool(values.get(SMTP_USER)) != bool(values.get(SMTP_PASSWORD)):
        raise _Unusable(f"set both {SMTP_USER} and {SMTP_PASSWORD}, or neither")
    security = (values.get(SMTP_SECURITY) or "starttls").strip().lower()
    if security not in SMTP_SECURITIES:
        raise _Unusable(f"{SMTP_SECURITY} is not one of {', '.join(SMTP_SECURITIES)}")
    use_ssl, use_tls, port = SMTP_SECURITIES[security]
    from great_expectations.checkpoint import EmailAction

    login = bool(values.get(SMTP_USER))
    if values.get(EMAIL_FROM):
        sender = _ref(EMAIL_FROM)
    else:
        sender = _ref(SMTP_USER) if login else "kandev-dq@localhost"
    return [
        EmailAction(
            name=name,
            smtp_address=_ref(SMTP_HOST),
            smtp_port=_ref(SMTP_PORT) if values.get(SMTP_PORT) else port,
            receiver_emails=_ref(EMAIL_TO),
            sender_login=_ref(SMTP_USER) if login else None,
            sender_password=_ref(SMTP_PASSWORD) if login else None,
            sender_alias=sender,
            use_ssl=use_ssl,
            use_tls=use_tls,
            notify_on=notify_on,
            renderer=KandevEmailRenderer(store),
        )
        for notify_on in modes
    ]


def _api(values, name, store, modes) -> list:
    url = values.get(API_URL)
    if not url:
        return []
    if not str(url).startswith(("http://", "https://")):
        raise _Unusable(f"{API_URL} is not an http(s) URL")
    return [
        KandevAPINotificationAction(name=name, url=str(url), notify_on=notify_on, store=store)
        for notify_on in modes
    ]


def _pagerduty(values, name, store, modes) -> list:
    routing_key = values.get(PAGERDUTY_ROUTING_KEY)
    if not routing_key:
        return []
    if not gx_adapter.pagerduty_available():
        raise _Unusable("the pypd package is not installed (pip install 'kandev-dq[pagerduty]')")
    from great_expectations.checkpoint import PagerdutyAlertAction

    return [
        PagerdutyAlertAction(
            name=name,
            api_key=str(values.get(PAGERDUTY_API_KEY) or ""),
            routing_key=str(routing_key),
            notify_on=notify_on,
            severity=PAGERDUTY_SEVERITY[notify_on],
        )
        for notify_on in modes
    ]


def _opsgenie(values, name, store, modes) -> list:
    api_key = values.get(OPSGENIE_API_KEY)
    if not api_key:
        return []
    region = (values.get(OPSGENIE_REGION) or "").strip().lower() or None
    if region is not None and not _REGION.fullmatch(region):
        raise _Unusable(f"{OPSGENIE_REGION} is not a two-letter region such as eu")
    from great_expectations.checkpoint import OpsgenieAlertAction

    return [
        OpsgenieAlertAction(
            name=name,
            api_key=str(api_key),
            region=region,
            priority=OPSGENIE_PRIORITY[notify_on],
            notify_on=notify_on,
            tags=["kandev-dq"],
            renderer=KandevOpsgenieRenderer(store),
        )
        for notify_on in modes
    ]


_BUILDERS = {
    "slack": _slack,
    "teams": _teams,
    "email": _email,
    "api": _api,
    "pagerduty": _pagerduty,
    "opsgenie": _opsgenie,
}
