"""Data docs a reviewer can read offline, and the store overview they read first.

GX 1.24's page templates load Bootstrap, jQuery, Font Awesome, bootstrap-table and its
extensions from CDNs, and a logo and tracking image from S3: read offline (where a data-quality
report usually is read) the pages lose their styling, their pass/fail icons and the index
table. This module keeps GX's renderers and templates and serves every asset from the site:

* :class:`KandevPageView` and :class:`KandevIndexPageView` put ``docs_assets/templates`` in
  front of GX's template loader. Only the templates naming a CDN (and the navbar, sidebar head
  and footer around them) are replaced; every asset link is relative to the page.
* :class:`KandevSiteBuilder` (``module_name``/``class_name`` of the site in
  ``great_expectations.yml``) copies ``docs_assets/static`` into the site's ``static/`` on
  every build, in place of GX's own images and fonts (which no page uses any more), and writes
  ``overview.html``: the store's AC-24c state with its three keys, the AC-25 population
  table, the writer-health figures and the checkpoint runs. It is rendered with GX's content
  blocks and the same page template as every other page.
* :class:`KandevSiteIndexPageRenderer` puts a summary of the overview, with its link, at the
  top of ``index.html``.

The validation results carry neither the store a run read nor the raw key values.
``kandev-dq check`` records both from the run's own snapshot before GX runs the checkpoint
(:mod:`kandev_dq.run.register`); the overview reads that record, during the run's own build and
any later rebuild (``kandev-dq docs``) alike. Without a record it falls back on what the results
themselves say, read as every command reads them (:func:`kandev_dq.run.results.rule_result`).
"""

from __future__ import annotations

import copy
import html
import json
import logging
import mimetypes
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from great_expectations.core.util import nested_update
from great_expectations.data_context.types.resource_identifiers import (
    ExpectationSuiteIdentifier,
    ValidationResultIdentifier,
)
from great_expectations.render import (
    RenderedBulletListContent,
    RenderedDocumentContent,
    RenderedHeaderContent,
    RenderedSectionContent,
    RenderedStringTemplateContent,
    RenderedTableContent,
)
from great_expectations.render.renderer.site_builder import (
    DefaultSiteIndexBuilder,
    DefaultSiteSectionBuilder,
    SiteBuilder,
)
from great_expectations.render.view import DefaultJinjaIndexPageView, DefaultJinjaPageView
from jinja2 import BytecodeCache, ChoiceLoader, FileSystemLoader

from kandev_dq.contract.instants import ACTIVATION_KEYS, BACKFILL_THROUGH
from kandev_dq.contract.rule_index import RULE_SENTENCES
from kandev_dq.contract.severity import Severity
from kandev_dq.contract.states import explain_state
from kandev_dq.expectations.base import listing_block
from kandev_dq.report.history import TIMELINE_RUNS, Timeline, timeline
from kandev_dq.report.timeline_chart import start_engine, timeline_svg
from kandev_dq.run import gx_adapter
from kandev_dq.run.changes import Changes, changes_since, rule_key
from kandev_dq.run.checkpoint import DOCS_PAGES
from kandev_dq.run.register import load_register, run_key
from kandev_dq.run.results import RuleResult, failed_by_severity, rule_result, suite_verdict
from kandev_dq.run.results_store import RecordsStoreBackend, ValidationResultsStore
from kandev_dq.text import html_inert

logger = logging.getLogger(__name__)

ASSETS = Path(__file__).resolve().parent / "docs_assets"
TEMPLATES = ASSETS / "templates"
STATIC = ASSETS / "static"
OVERVIEW_PAGE = "overview.html"
OVERVIEW_RENDERER = "KandevOverviewPageRenderer"
#: Runs the overview lists, newest first: a build reads this many, however long the history
#: (a run every 5 minutes records 2,000 a week), so a run costs what the 10th did.
RUNS_SHOWN = 10
#: Validation results the index lists and a full build renders, newest first (GX's own
#: ``validation_results_limit``): the results of the overview's runs, three suites each.
#: ``history`` lists more, and the records keep every run until pruned.
INDEX_RESULTS_LIMIT = 3 * RUNS_SHOWN
ACTIVATION_SUITE = "activation"
HEALTH_SUITE = "writer_health"

STATE_STYLE = {
    "fully_activated": "badge-success",
    "capture_only": "badge-warning",
    "execution_only": "badge-warning",
    "not_activated": "badge-danger",
}
KEY_LABELS = {
    "subagent_context_capture_since": "capture_since",
    "subagent_context_backfill_through": "backfill_through",
    "subagent_context_execution_since": "execution_since",
}
AC25_NOTES = (
    "Activity before backfill_through has unknown fan-out.",
    "The absence of a row before capture_since proves nothing.",
    "Backfill and live rows are not compared like-for-like without disclosing this split.",
    "An 'unknown' execution id never means \"shared\"; a real execution id is real on either "
    "side of execution_since.",
    "The keys bound completeness, never validity.",
)


# --- views: GX's templates, with kandev-dq's copies of the CDN-bearing ones first --------------


def page_root(document: Any) -> str:
    """The relative way from a page back to the site root ('', '../', ...)."""
    if isinstance(document, dict):
        kind, suite = document.get("renderer_type"), document.get("expectation_suite_name")
    else:
        kind = getattr(document, "renderer_type", None)
        suite = getattr(document, "expectation_suite_name", None)
    kind, dots = kind or "", (suite or "").count(".")
    if "ValidationResults" in kind or "ProfilingResults" in kind:
        return "../" * (dots + 4)  # validations/<suite parts>/<run name>/<run time>/<batch>.html
    if "ExpectationSuite" in kind:
        return "../" * (dots + 1)  # expectations/<suite parts>.html
    return ""


class _CompiledTemplates(BytecodeCache):
    """Each template compiled once per process. GX builds a new view, with a new Jinja
    environment, for every page set it renders, and each compiled every template again
    (about 230 compilations a run). Jinja checks each template's source before reusing it."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket) -> None:
        if bucket.key in self._code:
            bucket.bytecode_from_string(self._code[bucket.key])

    def dump_bytecode(self, bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


_COMPILED_TEMPLATES = _CompiledTemplates()


class _LocalAssets:
    """Template lookup starting at ``docs_assets/templates``; every page knows its root."""

    def __init__(self, custom_styles_directory=None, custom_views_directory=None) -> None:
        super().__init__(  # type: ignore[call-arg]
            custom_styles_directory=custom_styles_directory,
            custom_views_directory=custom_views_directory,
        )
        self.env.loader = ChoiceLoader([FileSystemLoader(str(TEMPLATES)), self.env.loader])
        self.env.bytecode_cache = _COMPILED_TEMPLATES

    def render(self, document, template=None, **kwargs):
        kwargs.setdefault("kandev_root", page_root(document))
        # Every page passes here: a store value's control characters leave it as references.
        return html_inert(super().render(document, template, **kwargs))  # type: ignore[misc]


class KandevPageView(_LocalAssets, DefaultJinjaPageView):
    """GX's page view (suites, validation results, the overview) with local assets."""


class KandevIndexPageView(_LocalAssets, DefaultJinjaIndexPageView):
    """GX's index page view with local assets."""


# --- the overview's facts, from the stored validation results --------------------------------


@dataclass
class SuiteRun:
    """One stored validation result, as plain JSON."""

    suite: str
    run_key: str
    run_time: datetime
    page: str
    data: dict[str, Any]

    @property
    def results(self) -> list[dict[str, Any]]:
        return list(self.data.get("results") or [])

    @property
    def checkpoint_id(self) -> str | None:
        return (self.data.get("meta") or {}).get("checkpoint_id")

    @cached_property
    def rules(self) -> list[RuleResult]:
        """Each result as every command reads it."""
        return [rule_result(r) for r in self.results]

    def failures(self, severity: str) -> int:
        return sum(1 for r in self.rules if not r.success and r.severity == severity)

    @property
    def verdict(self) -> str:
        """The suite's verdict by the exit code's rule (:func:`suite_verdict`)."""
        return suite_verdict(failed_by_severity(self.data))


@dataclass
class Run:
    """The results of one checkpoint run (one run id), with what the register knows of it."""

    run_key: str
    run_time: datetime
    checkpoint: str | None
    suites: list[SuiteRun] = field(default_factory=list)
    record: dict[str, Any] | None = None

    @property
    def store(self) -> str | None:
        return (self.record or {}).get("store")

    def failures(self, severity: str) -> int:
        return sum(s.failures(severity) for s in self.suites)


@dataclass
class Overview:
    runs: list[Run]
    activation: SuiteRun | None = None
    health: SuiteRun | None = None
    #: The latest run's store over its last runs (:func:`kandev_dq.report.history.timeline`).
    timeline: Timeline | None = None
    #: The latest run's store in the records: its write-once baseline and accepted resets.
    baseline: Any = None
    accepts: list[Any] = field(default_factory=list)
    #: The latest run against the last run of its checkpoint on its store (new, since, resolved).
    changes: Changes | None = None

    @property
    def latest(self) -> Run | None:
        return self.runs[0] if self.runs else None


def collect_overview(context) -> Overview:
    """The overview of the latest run, read from the validation results store (JSON only)."""
    store = context.validation_results_store
    records = records_of(context)
    # The newest runs' results only, read through an index: a run's docs build costs the
    # same after 2,000 runs as after 10.
    window = (
        [store.tuple_to_key(k) for k in records.results_of_newest_runs(RUNS_SHOWN)]
        if records is not None
        else store.list_keys()  # an older project's results in files: GX's own listing
    )
    keys = [k for k in window if "profiling" not in (k.run_id.run_name or "")]
    keys.sort(key=lambda k: (k.run_id.run_time, k.expectation_suite_identifier.name), reverse=True)
    recorded: dict[str, dict[str, Any] | None] = {}

    def record(name: str) -> dict[str, Any] | None:
        # Read run by run, as runs are shown: a build's cost does not grow with the history.
        if name not in recorded:
            recorded[name] = load_register(records, [name]).get(name)
        return recorded[name]

    checkpoints = _checkpoint_names(context)
    loaded: dict[Any, SuiteRun | None] = {}

    def load(key) -> SuiteRun | None:
        if key not in loaded:
            data = stored_json(store, key)
            if data is None:
                logger.warning("validation result %s is unreadable: skipped", key.to_tuple())
                loaded[key] = None
            else:
                loaded[key] = SuiteRun(
                    suite=key.expectation_suite_identifier.name,
                    run_key=run_key(key.run_id),
                    run_time=key.run_id.run_time,
                    page=_result_page(key),
                    data=data,
                )
        return loaded[key]

    runs: dict[str, Run] = {}
    for key in keys:
        name = run_key(key.run_id)
        if name not in runs and len(runs) == RUNS_SHOWN:
            break
        suite_run = load(key)
        if suite_run is None:
            continue
        run = runs.get(name)
        if run is None:
            run = runs[name] = Run(
                name,
                key.run_id.run_time,
                checkpoints.get(suite_run.checkpoint_id or ""),
                record=record(name),
            )
        run.suites.append(suite_run)
    for run in runs.values():
        run.suites.sort(key=lambda s: s.suite)
    overview = Overview(list(runs.values()))
    latest = overview.latest
    wanted_store = latest.store if latest else None
    identity = ((latest.record or {}) if latest else {}).get("store_identity")

    def newest(suite: str) -> SuiteRun | None:
        if records is not None and identity:  # however old: a checkpoint may lack the suite
            found = records.newest_of_suite(suite, identity)
            return load(store.tuple_to_key(found)) if found is not None else None
        for key in keys:
            if key.expectation_suite_identifier.name != suite:
                continue
            if (record(run_key(key.run_id)) or {}).get("store") != wanted_store:
                continue
            return load(key)
        return None

    if latest is not None and latest.record and records is not None:
        # As `check` marks them: against the last finished run of the same name before it.
        previous = records.last_finished_run(latest.record["run_name"], before=latest.run_key)
        results = [rule_result(r, suite=s.suite) for s in latest.suites for r in s.results]
        overview.changes = changes_since(previous, results, latest.record["run_time"])
    overview.activation = newest(ACTIVATION_SUITE)
    overview.health = newest(HEALTH_SUITE)
    if records is not None and identity:
        overview.baseline = records.baseline(identity)
        overview.accepts = records.accepts(identity)
        overview.timeline = timeline(records, identity)
    return overview


def stored_json(store, key) -> dict[str, Any] | None:
    """One validation result as the JSON the results store holds (None: unreadable)."""
    try:
        raw = store.store_backend.get(store.key_to_tuple(key))
        return json.loads(raw) if isinstance(raw, (str, bytes)) else dict(raw)
    except Exception:  # noqa: BLE001 - one unreadable result must not hide the rest
        return None


def records_of(context):
    """The records database the context's results come from (None: an older project keeping
    its results in files, whose runs then show what their results say)."""
    backend = context.validation_results_store.store_backend
    return backend.records if isinstance(backend, RecordsStoreBackend) else None


def _checkpoint_names(context) -> dict[str, str]:
    try:
        return {str(c.id): c.name for c in context.checkpoints.all() if c.id}
    except Exception:  # noqa: BLE001 - the names are a convenience; ids still identify runs
        logger.warning("could not list checkpoints: runs are shown without their names")
        return {}


def _result_page(key) -> str:
    parts = ["validations", *key.expectation_suite_identifier.name.split(".")]
    parts += [*key.run_id.to_tuple(), key.batch_identifier]
    return urllib.parse.quote("/".join(parts) + ".html")


def _by_type(suite_run: SuiteRun | None, fragment: str) -> RuleResult | None:
    if suite_run is None:
        return None
    return next((r for r in suite_run.rules if fragment in r.expectation), None)


def _observed(rule: RuleResult | None) -> Any:
    return rule.observed_value if rule is not None else None


def _amended(overview: Overview) -> bool | None:
    """Whether the latest run saw AC-33 clauses 1-3 hold (None when it was not recorded)."""
    latest = overview.latest
    return latest.record.get("amended") if latest is not None and latest.record else None


def key_view(overview: Overview) -> tuple[str | None, dict[str, dict[str, Any]], str]:
    """The latest run's state and keys, and where they come from.

    The register (the run's own snapshot) knows the raw values. Without it, the activation
    result's observed values give the state, each key's kind and precision, and the raw
    values of capture_since and backfill_through when both are instants.
    """
    latest = overview.latest
    if latest is not None and latest.record and latest.record.get("keys"):
        return latest.record.get("state"), latest.record["keys"], "this run's snapshot"
    activation = overview.activation
    if activation is None:
        return None, {}, "no record"
    kinds = _observed(_by_type(activation, "keys_to_be_well_formed"))
    precision = _observed(_by_type(activation, "subsecond_precision"))
    order = _observed(_by_type(activation, "backfill_through_not_after_capture_since"))
    state = _observed(_by_type(activation, "activation_state_to_be_in_set"))
    kinds = kinds if isinstance(kinds, dict) else {}
    precision = precision if isinstance(precision, dict) else {}
    raw_values = {}
    if isinstance(order, dict):
        raw_values = {
            "subagent_context_backfill_through": order.get("backfill_through"),
            "subagent_context_capture_since": order.get("capture_since"),
        }
    keys: dict[str, dict[str, Any]] = {}
    for name in ACTIVATION_KEYS:
        kind = kinds.get(name)
        if kind is None:
            continue
        entry: dict[str, Any] = {"kind": kind}
        if kind == "sentinel":
            entry["raw"] = ""
        elif raw_values.get(name) is not None:
            entry["raw"] = raw_values[name]
        if name in precision:
            entry["precision"] = precision[name]
        keys[name] = entry
    source = f"the activation result of {_when(activation.run_time)}"
    return (state if isinstance(state, str) else None), keys, source


# --- rendering through GX's content blocks ----------------------------------------------------


def _esc(value: Any) -> str:
    """A plain table cell: GX inserts plain strings verbatim, so they are escaped here."""
    if value is None:
        return "—"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) > 300:
        text = text[:297] + "..."
    return html.escape(text)


def _string(
    template: str,
    params: dict[str, Any] | None = None,
    *,
    tag: str | None = None,
    classes: Any = (),
    attributes: dict[str, str] | None = None,
    param_classes: dict[str, list[str]] | None = None,
) -> RenderedStringTemplateContent:
    """A GX string template: ``template`` is trusted markup, every param value is escaped."""
    styling: dict[str, Any] = {"classes": list(classes)}
    if attributes:
        styling["attributes"] = attributes
    if param_classes:
        styling["params"] = {name: {"classes": c} for name, c in param_classes.items()}
    body: dict[str, Any] = {"template": template, "params": dict(params or {}), "styling": styling}
    if tag:
        body["tag"] = tag
    return RenderedStringTemplateContent(content_block_type="string_template", string_template=body)


def _block(
    template: str,
    params: dict[str, Any] | None = None,
    *,
    classes: Any = (),
    param_classes: dict[str, list[str]] | None = None,
) -> RenderedStringTemplateContent:
    """A string template as a content block of its own (a styled, full-width wrapper)."""
    content = _string(template, params, param_classes=param_classes)
    content.styling = {"classes": ["col-12", *classes]}
    return content


def _title(text: str, sub: str | None = None, sub_params: dict[str, Any] | None = None):
    header = _string("$t", {"t": text}, tag="h3", classes=["kandev-section-title"])
    subheader = _string(sub, sub_params, classes=["text-muted"]) if sub else None
    return RenderedHeaderContent(
        header=header, subheader=subheader, styling={"classes": ["col-12"]}
    )


def _value(text: str) -> RenderedStringTemplateContent:
    """A value in monospace; short ones (timestamps, counts) are never wrapped."""
    classes = ["kandev-value"] + (["text-nowrap"] if len(text) <= 32 else [])
    return _string("$v", {"v": text}, classes=classes)


def _table(header: list[str], rows: list[list[Any]], *, classes=()) -> RenderedTableContent:
    return RenderedTableContent(
        table=rows,
        header_row=header,
        styling={
            "classes": ["col-12", "table-responsive", "mt-2", *classes],
            "body": {"classes": ["table", "table-sm", "table-bordered"]},
        },
    )


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _status_icon(passed: bool, severity: str = "error") -> str:
    # The icons GX's pages get (gx_adapter.SUITE_STATUS): only an error reads as a failure.
    verdict = "passed" if passed else {"error": "failed", "warning": "warning"}.get(severity)
    _, icon = gx_adapter.SUITE_STATUS[verdict or "info"]
    return f'<i class="fas {icon}" aria-hidden="true"></i>'


def _verdict(run: Run) -> tuple[str, str]:
    errors, warnings = run.failures("error"), run.failures("warning")
    if errors:
        return f"FAILED: {errors} error(s), {warnings} warning(s)", "text-danger"
    if warnings:
        return f"passed with {warnings} warning(s)", "kandev-text-warning"
    return "passed", "text-success"


def _key_rows(keys: dict[str, dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for name in ACTIVATION_KEYS:
        label = f"{KEY_LABELS[name]} ({name})"
        described = keys.get(name)
        if described is None:
            rows.append([_esc(label), "not recorded", "—", "—"])
            continue
        kind = described.get("kind")
        raw = described.get("raw")
        if kind == "absent":
            value, reads, precision = _string("absent", classes=["text-muted"]), "absent", "—"
        elif kind == "sentinel":
            value = _string("''", classes=["kandev-sentinel"])
            reads = _string(
                "the sentinel: the backfill matched nothing; never parsed, never compared (AC-24f)",
                classes=["text-muted"],
            )
            precision = "—"
        elif kind == "malformed":
            value = _string("$v", {"v": raw or ""}, classes=["kandev-value"])
            reads = _string(
                "malformed: $e", {"e": described.get("error", "")}, classes=["text-danger"]
            )
            precision = "—"
        else:
            value = (
                _value(raw)
                if raw is not None
                else _string("value not recorded", classes=["text-muted"])
            )
            reads = _value(described.get("instant") or "an RFC3339 instant")
            precision = _precision_text(described.get("precision"), raw)
        rows.append([_esc(label), value, reads, precision])
    return rows


def _precision_text(precision: str | None, raw: str | None) -> Any:
    if precision is None:
        return "—"
    digits = ""
    if raw and "." in raw:
        fraction = raw.split(".", 1)[1].rstrip("Z").split("+")[0].split("-")[0]
        digits = f" ({len(fraction)} fraction digit{'s' if len(fraction) > 1 else ''})"
    if precision == "second":
        return _string(
            "second (no fraction): the instant lies in [key, key + 1 s); see the findings",
            classes=["kandev-text-warning"],
        )
    return _esc(f"{precision}{digits}")


def _population_section(overview: Overview) -> RenderedSectionContent:
    blocks: list[Any] = []
    disclosed = _by_type(overview.activation, "population_to_be_disclosed")
    population = _observed(disclosed)
    if overview.activation is not None and disclosed is not None:
        sub = "rows of task_session_subagents by source, by side of each key and by execution "
        sub += "identity, as the activation suite ran at $when"
        blocks.append(
            _title("Population (AC-25)", sub, {"when": _when(overview.activation.run_time)})
        )
    else:
        blocks.append(_title("Population (AC-25)"))
    if not isinstance(population, list) or disclosed is None:
        blocks.append(
            _block(
                "No disclosure yet: no activation result for this store.",
                classes=["text-muted"],
            )
        )
    elif not population:
        blocks.append(_block("task_session_subagents holds no rows.", classes=["text-muted"]))
    else:
        header = ["source", "capture_since", "execution_since", "execution identity", "rows"]
        fields = ["source", "capture_since", "execution_since", "execution_identity", "rows"]
        rows = [[_esc(cell.get(f)) for f in fields] for cell in population]
        total = sum(cell.get("rows") or 0 for cell in population if isinstance(cell, dict))
        rows.append([_string("<strong>total</strong>"), "", "", "", _esc(total)])
        blocks.append(_table(header, rows, classes=["kandev-population"]))
    blocks.append(
        RenderedBulletListContent(
            bullet_list=[_string("$n", {"n": note}) for note in AC25_NOTES],
            styling={"classes": ["col-12", "kandev-note", "mt-2"]},
        )
    )
    return RenderedSectionContent(content_blocks=blocks, section_name="Population (AC-25)")


HEALTH_FIGURES = (
    ("shortfall", "Shortfall: qualifying subagent keys since capture_since with no row (alarm)"),
    ("excess", "Excess: row keys since capture_since with no message (attributed, not an alarm)"),
    ("collision", "Cross-execution collisions: rows minus distinct keys since capture_since"),
)


def _health_section(overview: Overview) -> RenderedSectionContent:
    health = overview.health
    name = "Writer health (AC-26 to AC-29)"
    if health is None:
        blocks = [
            _title(name),
            _block(
                "No $suite validation result for this store yet: run a checkpoint that includes "
                "the $suite suite.",
                {"suite": HEALTH_SUITE},
                classes=["text-muted"],
            ),
        ]
        return RenderedSectionContent(content_blocks=blocks, section_name=name)
    sub = "the $suite suite as it ran at $when"
    blocks: list[Any] = [_title(name, sub, {"suite": HEALTH_SUITE, "when": _when(health.run_time)})]
    figures: list[list[Any]] = []
    since = None
    for result in health.results:  # a detail of the health rules' results, not of a reading
        since = since or (((result.get("result") or {}).get("details") or {}).get("since"))
    if since:
        figures.append(
            ["Compared since capture_since", _string("$v", {"v": since}, classes=["kandev-value"])]
        )
    for fragment, label in HEALTH_FIGURES:
        result = _by_type(health, fragment)
        if result is not None:
            figures.append([_esc(label), _figure(result)])
    last = _by_type(health, "written") or _by_type(health, "activity")
    if last is not None:
        observed = _observed(last)
        if observed is None:
            shown: Any = _string(
                "none: no subagent row observed since capture_since", classes=["text-danger"]
            )
        else:
            shown = _figure(last)
        figures.append(["Last observed row: MAX(observed_at) since capture_since (AC-29)", shown])
    if figures:
        blocks.append(_table(["figure", "value"], figures, classes=["kandev-health-figures"]))
    blocks.append(_rules_table(health.rules))
    return RenderedSectionContent(content_blocks=blocks, section_name=name)


def _figure(rule: RuleResult) -> Any:
    observed = rule.observed_value
    classes = ["kandev-value", "text-nowrap"] + ([] if rule.success else ["text-danger"])
    return _string(
        "$v",
        {"v": observed if isinstance(observed, str) else json.dumps(observed)},
        classes=classes,
    )


def _rules_table(rules: list[RuleResult]) -> RenderedTableContent:
    rows = []
    for rule in rules:
        rows.append(
            [
                _string(
                    _status_icon(rule.success, rule.severity) + " $s",
                    {"s": "pass" if rule.success else "fail"},
                    classes=["text-nowrap"],
                ),
                _string(
                    "$rule <span class='text-muted'>($ac)</span>",
                    {"rule": _rule_text(rule.expectation), "ac": ", ".join(rule.rules)},
                ),
                _esc(rule.severity),
                _value(_short(rule.observed_value)),
                _esc(rule.message),
            ]
        )
    return _table(["status", "rule (AC ids)", "severity", "observed", "finding"], rows)


def _rule_text(expectation_type: str) -> str:
    """A rule's sentence from the rule index; an unknown type is shown by its name."""
    return RULE_SENTENCES.get(expectation_type) or expectation_type


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 300 else text[:297] + "..."


def _runs_section(overview: Overview) -> RenderedSectionContent:
    name = "Checkpoint runs"
    blocks: list[Any] = [
        _title(
            name,
            "the last $n runs, newest first (<code>kandev-dq history</code> lists more); "
            "the store is named without credentials",
            {"n": str(RUNS_SHOWN)},
        ),
    ]
    rows = []
    for run in overview.runs:
        verdict, colour = _verdict(run)
        suites = []
        for suite_run in run.suites:
            verdict_of_suite = suite_run.verdict
            icon = _status_icon(
                verdict_of_suite == "passed",
                "error" if verdict_of_suite == "failed" else verdict_of_suite,
            )
            suites.append(
                _string(
                    icon + " $suite",
                    {"suite": suite_run.suite},
                    tag="a",
                    attributes={"href": suite_run.page},
                    classes=["d-block", "text-nowrap"],
                )
            )
        store = run.store or "not recorded (results from a run outside `kandev-dq check`)"
        dialect = (run.record or {}).get("dialect")
        rows.append(
            [
                _string("$t", {"t": _when(run.run_time)}, classes=["text-nowrap"]),
                _esc(run.checkpoint or "(no checkpoint)"),
                _string(
                    "$s",
                    {"s": store + (f" ({dialect})" if dialect else "")},
                    classes=["kandev-value"],
                ),
                suites,
                _string("$v", {"v": verdict}, classes=[colour]),
            ]
        )
    if rows:
        blocks.append(_table(["run time", "checkpoint", "store", "suites", "verdict"], rows))
    else:
        blocks.append(_block("No checkpoint has run yet.", classes=["text-muted"]))
    return RenderedSectionContent(content_blocks=blocks, section_name=name)


def _state_section(overview: Overview) -> RenderedSectionContent:
    latest = overview.latest
    state, keys, source = key_view(overview)
    blocks: list[Any] = [_title("Store overview")]
    if latest is None:
        blocks.append(
            _block(
                "No validation result yet: run a checkpoint (<code>kandev-dq check</code>).",
                classes=["lead"],
            )
        )
        return RenderedSectionContent(content_blocks=blocks, section_name="Overview")
    verdict, colour = _verdict(latest)
    store = latest.store or "not recorded"
    dialect = (latest.record or {}).get("dialect")
    facts = [
        [
            "Store",
            _string(
                "$s", {"s": store + (f" ({dialect})" if dialect else "")}, classes=["kandev-value"]
            ),
        ],
        [
            "Latest run",
            _esc(f"{latest.checkpoint or '(no checkpoint)'} at {_when(latest.run_time)}"),
        ],
        ["Verdict", _string("$v", {"v": verdict}, classes=[colour, "font-weight-bold"])],
        ["Write-once baseline (AC-24)", _esc(_baseline_text(overview))],
    ]
    blocks.append(_table([], facts, classes=["kandev-run-facts"]))
    if overview.accepts:
        blocks.append(
            _title("Accepted key resets", "recorded with `kandev-dq ledger accept` (AC-24)")
        )
        blocks.append(
            _table(
                ["accepted at", "by", "key", "from", "to", "reason"],
                [
                    [
                        _esc(a.accepted_at),
                        _esc(a.accepted_by),
                        _esc(a.key_name),
                        _esc(repr(a.replaced_value)),
                        _esc(repr(a.accepted_value)),
                        _esc(a.reason),
                    ]
                    for a in overview.accepts
                ],
                classes=["kandev-accepts"],
            )
        )
    blocks.append(
        _block(
            "<div class='mb-1 text-muted'>Activation state (AC-24c)</div>$state"
            "<span class='kandev-state-why'>$why</span>",
            {
                "state": state or "unknown",
                "why": explain_state(state, amended=_amended(overview))
                if state
                else "not recorded",
            },
            classes=["kandev-state-line", "mt-3"],
            param_classes={
                "state": [
                    "badge",
                    STATE_STYLE.get(state or "", "badge-secondary"),
                    "kandev-state-badge",
                ]
            },
        )
    )
    blocks.append(_title("Activation keys", "as read from $source", {"source": source}))
    blocks.append(
        _table(["key", "value", "reads as", "precision"], _key_rows(keys), classes=["kandev-keys"])
    )
    if keys.get(BACKFILL_THROUGH, {}).get("kind") == "sentinel":
        blocks.append(
            _block(
                "backfill_through holds the <span class='kandev-sentinel'>''</span> sentinel: "
                "the backfill matched nothing (the fresh-install state). It is not an instant.",
                classes=["kandev-note", "mt-2"],
            )
        )
    return RenderedSectionContent(content_blocks=blocks, section_name="Overview")


def _baseline_text(overview: Overview) -> str:
    baseline = overview.baseline
    if baseline is None:
        return "not recorded: write-once was not judged against earlier runs"
    return f"taken {baseline.taken_at} ({baseline.source}); rewrites before it cannot be seen"


def _findings_section(overview: Overview) -> RenderedSectionContent:
    """Every rule of the latest run that did not pass, errors first, with its suite's page."""
    name = "Findings"
    latest = overview.latest
    blocks: list[Any] = [
        _title(name, "the latest run's rules that did not pass: errors, then warnings, then info")
    ]
    flagged = [
        (Severity.rank_of(r.severity), suite_run, r)
        for suite_run in (latest.suites if latest else [])
        for r in suite_run.rules
        if not r.success
    ]
    flagged.sort(key=lambda item: (item[0], item[1].suite))
    if latest is None:  # a claim needs a run behind it (after `records prune`, say)
        blocks.append(_block("No run to report findings of yet.", classes=["text-muted"]))
        return RenderedSectionContent(content_blocks=blocks, section_name=name)
    if not flagged:
        blocks.append(_block("Every rule of the latest run passed.", classes=["text-success"]))
        return RenderedSectionContent(content_blocks=blocks, section_name=name)
    rows = []
    for _, suite_run, rule in flagged:
        rows.append(
            [
                _string(
                    _status_icon(False, rule.severity) + " $s",
                    {"s": rule.severity},
                    classes=["text-nowrap"],
                ),
                _string("$s", {"s": suite_run.suite}, tag="a", attributes={"href": suite_run.page}),
                _string(
                    "$rule <span class='text-muted'>($ac)</span>",
                    {"rule": _rule_text(rule.expectation), "ac": ", ".join(rule.rules)},
                ),
                [
                    _string(
                        "$mark$m",
                        {
                            "mark": _standing(overview, suite_run.suite, rule),
                            "m": _short(rule.message),
                        },
                    )
                ]
                + ([listing_block(rule.query, rule.unexpected_count)] if rule.query else []),
            ]
        )
    blocks.append(_table(["severity", "suite", "rule (AC ids)", "finding"], rows))
    blocks.extend(_resolved(overview))
    return RenderedSectionContent(content_blocks=blocks, section_name=name)


def _standing(overview: Overview, suite: str, rule: RuleResult) -> str:
    """A finding against the last run of its checkpoint on its store: new, or since when."""
    changes = overview.changes
    if changes is None:
        return ""
    key = rule_key(suite, rule.expectation)
    if key in changes.new:
        return "(new) "
    since = changes.since.get(key)
    return f"(failing since {since}) " if since else ""


def _resolved(overview: Overview) -> list[Any]:
    """What failed in the last run of the latest run's checkpoint on its store and passes now."""
    changes = overview.changes
    if changes is None or not changes.resolved:
        return []
    said = "; ".join(
        f"{r['suite']}: {_rule_text(r['expectation'])} ({r['severity']}, failing since "
        f"{r['since']})"
        for r in changes.resolved
    )
    return [
        _block(
            "Resolved since the last run ($previous): $said",
            params={"previous": str(changes.previous_run), "said": said},
            classes=["text-success"],
        )
    ]


def _timeline_section(overview: Overview) -> RenderedSectionContent:
    """The store's last runs as a chart (inline SVG, no script): when each suite started
    failing and at what severity, the writer-health figures, the state and the keys."""
    name = "Timeline"
    series = overview.timeline
    blocks: list[Any] = [
        _title(
            name,
            "this store's last $n run(s) (at most $most), oldest first; "
            "<code>kandev-dq history --format json</code> gives the same series, "
            "<code>kandev-dq history</code> lists more runs",
            {"n": str(len(series.points) if series else 0), "most": str(TIMELINE_RUNS)},
        )
    ]
    if series is None or not series.points:
        blocks.append(_block("No run of this store to chart yet.", classes=["text-muted"]))
        return RenderedSectionContent(content_blocks=blocks, section_name=name)
    # The SVG is kandev-dq's own markup (Vega escapes its text): the template, not a param.
    # GX's template step turns newlines into <br> and reads $names: neither may survive.
    svg = timeline_svg(series).replace("\n", " ").replace("$", "&#36;")
    blocks.append(_block(f"<div class='kandev-timeline'>{svg}</div>"))
    return RenderedSectionContent(content_blocks=blocks, section_name=name)


def overview_document(overview: Overview) -> RenderedDocumentContent:
    return RenderedDocumentContent(
        sections=[
            _state_section(overview),
            _findings_section(overview),
            _timeline_section(overview),
            _population_section(overview),
            _health_section(overview),
            _runs_section(overview),
        ],
        renderer_type=OVERVIEW_RENDERER,
        page_title="Store overview",
    )


def index_section(overview: Overview) -> RenderedSectionContent:
    """The index page's first block: the overview in one line, and the way to it."""
    latest = overview.latest
    link = (
        f"<a class='btn btn-primary mt-2' href='{OVERVIEW_PAGE}'>Read the store overview first</a>"
        f"<div class='text-muted small mt-2 kandev-window'>This index lists the last "
        f"{INDEX_RESULTS_LIMIT} validation results; <code>kandev-dq history</code> lists more "
        "runs.</div>"
    )
    if latest is None:
        block = _block(
            "<h4>Store overview</h4>No checkpoint has run yet.<br>" + link,
            classes=["alert", "alert-light", "border", "kandev-index-overview"],
        )
    else:
        state, _, _ = key_view(overview)
        verdict, colour = _verdict(latest)
        block = _block(
            "<h4>Store overview</h4>$state on <span class='kandev-value'>$store</span>: "
            "checkpoint $checkpoint at $when, <span class='$colour font-weight-bold'>$verdict"
            "</span><br>" + link,
            {
                "state": state or "unknown",
                "store": latest.store or "a store not recorded",
                "checkpoint": latest.checkpoint or "(no checkpoint)",
                "when": _when(latest.run_time),
                "verdict": verdict,
                "colour": colour,
            },
            classes=["alert", "alert-light", "border", "kandev-index-overview"],
            param_classes={"state": ["badge", STATE_STYLE.get(state or "", "badge-secondary")]},
        )
    return RenderedSectionContent(content_blocks=[block], section_name="Store overview")


class KandevSiteIndexPageRenderer(gx_adapter.KandevSiteIndexTableRenderer):
    """GX's index page with the store overview's summary and link on top, each result's
    status its suite's verdict by the exit code's rule."""

    def __init__(self, data_context=None) -> None:
        super().__init__()
        self.data_context = data_context
        self.overview: Overview | None = None

    def render(self, index_links_dict):  # type: ignore[override]
        if self.data_context is not None:
            _add_verdicts(self.data_context, index_links_dict.get("validations_links", []))
        document = super().render(index_links_dict)
        if document is None or self.data_context is None:
            return document
        try:
            overview = self.overview or collect_overview(self.data_context)
            document.sections.insert(0, index_section(overview))
        except Exception:  # noqa: BLE001 - the index must render even if the summary cannot
            logger.exception("the store overview summary could not be rendered")
        return document


def _add_verdicts(context, links: list[dict[str, Any]]) -> None:
    """Each listed result's suite verdict, read from its stored JSON as the overview reads it;
    a result that cannot be read keeps GX's own status."""
    store = context.validation_results_store
    for link in links:
        key = ValidationResultIdentifier(
            ExpectationSuiteIdentifier(link["expectation_suite_name"]),
            link["run_id"],
            link["batch_identifier"],
        )
        data = stored_json(store, key)
        if data is None:
            logger.warning("validation result %s is unreadable: GX's status kept", key.to_tuple())
            continue
        link["kandev_verdict"] = suite_verdict(failed_by_severity(data))


# --- the site builder --------------------------------------------------------------------------


def _section(renderer: type | None) -> dict[str, Any]:
    section: dict[str, Any] = {
        "view": {"module_name": __name__, "class_name": KandevPageView.__name__}
    }
    if renderer is not None:  # GX's page renderers, adapted (kandev_dq.run.gx_adapter)
        section["renderer"] = {"module_name": renderer.__module__, "class_name": renderer.__name__}
    return section


class KandevSiteSectionBuilder(DefaultSiteSectionBuilder):
    """GX's section builder of results pages, listing a bounded window of the records.

    GX lists every stored result to build the pages of a few: a run's build is given its own
    results, a whole build renders the newest ``validation_results_limit``. Those are the
    keys it is given here; the pages are GX's."""

    def build(self, resource_identifiers=None) -> None:
        store = self.source_store
        window = None
        if isinstance(store, ValidationResultsStore) and isinstance(
            store.store_backend, RecordsStoreBackend
        ):
            if resource_identifiers is not None:
                # As the store lists them: a run through GX's API has no run name, which GX's
                # run-name filter reads only in its stored form ("__none__").
                window = [
                    store.tuple_to_key(store.key_to_tuple(k))
                    for k in resource_identifiers
                    if isinstance(k, ValidationResultIdentifier)
                ]
            elif self.name == "validations" and self.validation_results_limit:
                newest = store.store_backend.records.newest_result_keys(
                    self.validation_results_limit
                )
                window = [store.tuple_to_key(k) for k in newest]
        if window is None:
            return super().build(resource_identifiers=resource_identifiers)
        with store.listing_only(window):
            return super().build(resource_identifiers=resource_identifiers)


class KandevSiteIndexBuilder(DefaultSiteIndexBuilder):
    """GX's index builder; in a run's build, the results it lists are the newest
    ``validation_results_limit`` of the records that have a page, not a walk of every page
    on disk matched against every stored result.

    A whole build (``kandev-dq docs``) is GX's own: it also removes the pages of results no
    longer in the records (``records prune``)."""

    #: Set by :class:`KandevSiteBuilder` for each build: whether every page is rebuilt.
    whole_build = True

    def _add_expectations_to_index_links(self, index_links_dict, skip_and_clean_missing: bool):
        """The project's suites that have a page (GX walks the whole site, every run's pages
        included, to find the few suite pages)."""
        config = self.site_section_builders_config.get("expectations")
        if self.whole_build or not isinstance(config, dict):
            return super()._add_expectations_to_index_links(
                index_links_dict, skip_and_clean_missing
            )
        pages = self.target_store.store_backends[ExpectationSuiteIdentifier]
        for suite in self.data_context.stores[config.get("source_store_name")].list_keys():
            if pages.has_key(suite.to_tuple()):
                self.add_resource_info_to_index_links_dict(
                    index_links_dict=index_links_dict,
                    expectation_suite_name=suite.name,
                    section_name="expectations",
                )

    def _build_validation_and_profiling_result_site_keys(self, skip_and_clean_missing: bool):
        store = self.data_context.validation_results_store
        records = records_of(self.data_context)
        if self.whole_build or records is None or not isinstance(store, ValidationResultsStore):
            return super()._build_validation_and_profiling_result_site_keys(skip_and_clean_missing)
        pages = self.target_store.store_backends[ValidationResultIdentifier]
        newest = records.newest_result_keys(self.validation_results_limit or INDEX_RESULTS_LIMIT)
        return [store.tuple_to_key(k) for k in newest if pages.has_key(k)]


KANDEV_SECTIONS = {
    "expectations": _section(gx_adapter.KandevExpectationSuitePageRenderer),
    "validations": _section(gx_adapter.KandevValidationResultsPageRenderer)
    | {"module_name": __name__, "class_name": KandevSiteSectionBuilder.__name__},
    "profiling": _section(None)
    | {"module_name": __name__, "class_name": KandevSiteSectionBuilder.__name__},
}


class KandevSiteBuilder(SiteBuilder):
    """GX's site builder, with local assets and the store overview.

    Section builders and the index builder not configured otherwise use the kandev-dq views
    and index renderer, so a site needs only ``module_name``/``class_name`` to work offline.
    """

    def __init__(
        self,
        data_context,
        store_backend,
        site_name=None,
        site_index_builder=None,
        show_how_to_buttons=True,
        site_section_builders=None,
        runtime_environment=None,
        **kwargs,
    ) -> None:
        index = nested_update(
            {
                "class_name": "DefaultSiteIndexBuilder",
                "renderer": {
                    "module_name": __name__,
                    "class_name": KandevSiteIndexPageRenderer.__name__,
                },
                "view": {"module_name": __name__, "class_name": KandevIndexPageView.__name__},
                "validation_results_limit": INDEX_RESULTS_LIMIT,
            },
            dict(site_index_builder or {}),
        )
        if index.get("class_name") == DefaultSiteIndexBuilder.__name__ and index.get(
            "module_name"
        ) in (None, DefaultSiteIndexBuilder.__module__):  # a project's yml names GX's: ours
            index |= {"module_name": __name__, "class_name": KandevSiteIndexBuilder.__name__}
        sections = nested_update(
            copy.deepcopy(KANDEV_SECTIONS),  # nested_update changes its first argument
            dict(site_section_builders or {}),
        )
        super().__init__(
            data_context,
            store_backend,
            site_name=site_name,
            site_index_builder=index,
            show_how_to_buttons=show_how_to_buttons,
            site_section_builders=sections,
            runtime_environment=runtime_environment,
            **kwargs,
        )
        styles = None
        plugins = data_context.plugins_directory
        if plugins and Path(plugins, "custom_data_docs", "styles").is_dir():
            styles = str(Path(plugins, "custom_data_docs", "styles"))
        self.overview_view = KandevPageView(custom_styles_directory=styles)

    def build(self, resource_identifiers=None, build_index: bool = True):
        """GX's build, with kandev-dq's assets and the overview (whose failure, like a GX
        page's, is logged and never fails the checkpoint run that builds the docs). In a
        checkpoint run, the results' pages and the run-wide ones are built apart
        (:data:`~kandev_dq.run.checkpoint.DOCS_PAGES`)."""
        pages = DOCS_PAGES.get()
        for name, section_builder in self.site_section_builders.items():
            if pages == "run-wide":
                break
            if name == "profiling" and not _profiling(resource_identifiers):
                # A run's own build: GX would compare every stored result with this run's,
                # a cost growing with the history, to find profiling runs kandev-dq never makes.
                continue
            section_builder.build(resource_identifiers=resource_identifiers)
        if pages == "results":
            start_engine()  # the store is read: the overview's chart comes next
            return self.get_resource_url(only_if_exists=False), []
        copy_assets(self.target_store)
        overview = None
        try:
            overview = collect_overview(self.data_context)
            self.write_overview(overview)
        except Exception:  # noqa: BLE001 - GX logs a page it cannot render, and goes on
            logger.exception("kandev-dq: the store overview page could not be rendered")
        if isinstance(self.site_index_builder, KandevSiteIndexBuilder):
            self.site_index_builder.whole_build = resource_identifiers is None and pages == "all"
        renderer = getattr(self.site_index_builder, "renderer_class", None)
        if isinstance(renderer, KandevSiteIndexPageRenderer):
            renderer.overview = overview
        _, index_links = self.site_index_builder.build(build_index=build_index)
        return self.get_resource_url(only_if_exists=False), index_links

    def write_overview(self, overview: Overview) -> None:
        page = self.overview_view.render(
            overview_document(overview),
            data_context_id=self.data_context_id,
            show_how_to_buttons=False,
        )
        self.target_store.store_backends["static_assets"].set(
            (OVERVIEW_PAGE,), page, content_type="text/html; charset=utf-8"
        )


def _profiling(resource_identifiers) -> bool:
    """Whether a build may hold profiling results: a whole build, or one naming a profiling run
    (GX's own filter: a run name including "profiling")."""
    if resource_identifiers is None:
        return True
    return any(
        "profiling" in (getattr(getattr(k, "run_id", None), "run_name", None) or "")
        for k in resource_identifiers
    )


def copy_assets(target_store) -> None:
    """Copy ``docs_assets/static`` into the site's ``static/`` (through its store backend)."""
    backend = target_store.store_backends["static_assets"]
    for path in sorted(STATIC.rglob("*")):
        if not path.is_file():
            continue
        key = ("static", *path.relative_to(STATIC).parts)
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        backend.set(key, path.read_bytes(), content_type=content_type)


def remove_result_pages(project: Path, keys: list[tuple[str, ...]]) -> int:
    """Remove the pages of pruned validation results from the project's local data docs sites
    (GX's own site store, which also removes the folders left empty): with automatic pruning
    the site stays as bounded as the records. The number of pages removed."""
    from great_expectations.data_context.store import HtmlSiteStore
    from ruamel.yaml import YAML

    config = YAML(typ="safe").load((Path(project) / "great_expectations.yml").read_text())
    removed = 0
    for site in ((config or {}).get("data_docs_sites") or {}).values():
        backend = (site or {}).get("store_backend") or {}
        if backend.get("class_name") != "TupleFilesystemStoreBackend":
            continue  # the vetting allows no other without --allow-project-code
        pages = HtmlSiteStore(
            store_backend=dict(backend), runtime_environment={"root_directory": str(project)}
        ).store_backends[ValidationResultIdentifier]
        try:
            removed += sum(bool(pages.remove_key(tuple(key))) for key in keys if len(key) >= 4)
        except OSError as exc:  # the run and its prune stand; `kandev-dq docs` cleans up later
            logger.warning("kandev-dq: warning: pruned results' pages not all removed: %s", exc)
    return removed


# --- building from the command line --------------------------------------------------------------


@dataclass
class DocsBuild:
    index: Path | None
    overview: Path | None
    url: str | None


def build_docs(
    project: Path, *, allow_project_code: bool = False, records: str | None = None
) -> DocsBuild:
    """(Re)build every data docs site of ``project`` from its records database; the first local
    site's index and overview."""
    from kandev_dq.run.project import load_context
    from kandev_dq.run.records import Records, records_url
    from kandev_dq.run.results_store import attach_records

    with Records(
        records_url(Path(project), records, allow_project_code=allow_project_code)
    ) as opened:
        context = load_context(Path(project), allow_project_code=allow_project_code)
        attach_records(context, opened)
        urls = context.build_data_docs()
    url = next(iter(urls.values()), None) if urls else None
    index = None
    if url and url.startswith("file://"):
        index = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
    overview = index.parent / OVERVIEW_PAGE if index is not None else None
    if overview is not None and not overview.is_file():
        overview = None
    return DocsBuild(index, overview, url)
