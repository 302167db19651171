"""The store overview page and the index's summary of it, as GX content blocks.

``overview.html`` shows the store's AC-24c state with its three keys (under a banner naming
the latest run's project deviations from kandev-dq's rules, when there are any), the latest
run's findings, the timeline chart, the AC-25 population table, the writer-health figures and the
checkpoint runs (:func:`overview_document`); :func:`index_section` puts the overview in one line
at the top of ``index.html``. Both are built from :class:`~kandev_dq.report.overview_model.Overview`
with GX's public content blocks and rendered by the same page template as every other page
(:mod:`kandev_dq.report.gx_site` renders and writes them). Every store value is a template
parameter, escaped; only kandev-dq's own markup is template text.
"""

from __future__ import annotations

import html
import json
from typing import Any

from great_expectations.render import (
    RenderedBulletListContent,
    RenderedDocumentContent,
    RenderedHeaderContent,
    RenderedSectionContent,
    RenderedStringTemplateContent,
    RenderedTableContent,
)

from kandev_dq.contract.instants import ACTIVATION_KEYS, BACKFILL_THROUGH
from kandev_dq.contract.rule_index import RULE_SENTENCES
from kandev_dq.contract.severity import Severity
from kandev_dq.contract.states import explain_state
from kandev_dq.expectations.base import listing_block
from kandev_dq.records.changes import rule_key
from kandev_dq.records.results import RuleResult
from kandev_dq.report.history import TIMELINE_RUNS
from kandev_dq.report.overview_model import (
    HEALTH_SUITE,
    INDEX_RESULTS_LIMIT,
    RUNS_SHOWN,
    Overview,
    Run,
    amended,
    by_type,
    key_view,
    observed_of,
    when_text,
)
from kandev_dq.report.timeline_chart import timeline_svg

#: How a suite's verdict (:func:`kandev_dq.records.results.suite_verdict`) reads in the data docs:
#: its word and its Font Awesome icon. Only ``failed`` reads as a failure (the exit code's rule).
SUITE_STATUS = {
    "passed": ("Succeeded", "fa-check-circle text-success"),
    "warning": ("Succeeded with warnings", "fa-exclamation-triangle text-warning"),
    "info": ("Succeeded with info findings", "fa-info-circle text-info"),
    "failed": ("Failed", "fa-times text-danger"),
}


OVERVIEW_PAGE = "overview.html"
OVERVIEW_RENDERER = "KandevOverviewPageRenderer"

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


def _status_icon(passed: bool, severity: str = "error") -> str:
    # The icons GX's pages get (SUITE_STATUS): only an error reads as a failure.
    verdict = "passed" if passed else {"error": "failed", "warning": "warning"}.get(severity)
    _, icon = SUITE_STATUS[verdict or "info"]
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
    disclosed = by_type(overview.activation, "population_to_be_disclosed")
    population = observed_of(disclosed)
    if overview.activation is not None and disclosed is not None:
        sub = "rows of task_session_subagents by source, by side of each key and by execution "
        sub += "identity, as the activation suite ran at $when"
        blocks.append(
            _title("Population (AC-25)", sub, {"when": when_text(overview.activation.run_time)})
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
    blocks: list[Any] = [
        _title(name, sub, {"suite": HEALTH_SUITE, "when": when_text(health.run_time)})
    ]
    figures: list[list[Any]] = []
    since = None
    for result in health.results:  # a detail of the health rules' results, not of a reading
        since = since or (((result.get("result") or {}).get("details") or {}).get("since"))
    if since:
        figures.append(
            ["Compared since capture_since", _string("$v", {"v": since}, classes=["kandev-value"])]
        )
    for fragment, label in HEALTH_FIGURES:
        result = by_type(health, fragment)
        if result is not None:
            figures.append([_esc(label), _figure(result)])
    last = by_type(health, "written") or by_type(health, "activity")
    if last is not None:
        observed = observed_of(last)
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
            "this store's last $n runs, newest first (<code>kandev-dq history</code> lists more); "
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
                _string("$t", {"t": when_text(run.run_time)}, classes=["text-nowrap"]),
                _esc(run.checked),
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
    blocks.extend(_deviations_banner(latest))
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
            _esc(f"{latest.checked} at {when_text(latest.run_time)}"),
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
                "why": explain_state(state, amended=amended(overview)) if state else "not recorded",
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


def _deviations_banner(run: Run) -> list[Any]:
    """A run whose project differed from kandev-dq's rules says so above its verdict, naming
    each deviation (names from a project file: template parameters, escaped)."""
    deviations = run.deviations
    if not deviations:
        return []
    return [
        _block(
            "<strong>This run's project deviates from kandev-dq's rules in $n place(s)</strong>: "
            "its verdict is the project's, not kandev-dq's (<code>--strict</code> refuses such "
            "a run).",
            {"n": str(len(deviations))},
            classes=["alert", "alert-warning", "kandev-deviations"],
        ),
        RenderedBulletListContent(
            bullet_list=[_string("$d", {"d": deviation.text()}) for deviation in deviations],
            styling={"classes": ["col-12", "kandev-deviation-list"]},
        ),
    ]


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
                "when": when_text(latest.run_time),
                "verdict": verdict,
                "colour": colour,
            },
            classes=["alert", "alert-light", "border", "kandev-index-overview"],
            param_classes={"state": ["badge", STATE_STYLE.get(state or "", "badge-secondary")]},
        )
    return RenderedSectionContent(content_blocks=[block], section_name="Store overview")
