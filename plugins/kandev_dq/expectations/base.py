"""What every kandev-dq expectation shares: facts metrics, results, and data-docs rendering.

A *family of facts* (activation, health, rows, schema, backfill, stored text) is computed by
one GX metric in one snapshot and shared by every expectation that judges it (GX computes a
metric once per validation for identical kwargs). Each expectation is a thin GX class: its
fields (GX declares an expectation's parameters as fields), and a verdict of the same name
(:mod:`kandev_dq.verdicts`, no GX) holding its family of facts, its ``judge`` and its listing;
its AC ids, severity and sentence come from the rule index through that verdict.
"""

from __future__ import annotations

import hashlib
import html
import json
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from great_expectations.compatibility import pydantic
from great_expectations.execution_engine import SqlAlchemyExecutionEngine
from great_expectations.expectations.expectation import BatchExpectation
from great_expectations.expectations.metadata_types import FailureSeverity
from great_expectations.expectations.metrics.metric_provider import metric_value
from great_expectations.expectations.metrics.table_metric_provider import TableMetricProvider
from great_expectations.render import (
    LegacyDiagnosticRendererType,
    LegacyRendererType,
    RenderedStringTemplateContent,
    RenderedTableContent,
)
from great_expectations.render.renderer.renderer import renderer
from great_expectations.util import camel_to_snake
from great_expectations.validator.metric_configuration import MetricConfiguration

from kandev_dq.contract.rule_index import (
    LIVE_KEY,
    LIVE_WINDOW,
    OPEN_SESSIONS,
    OPEN_SESSIONS_CUT,
    severity_word,
)
from kandev_dq.contract.thresholds import CountThresholds, ThresholdError
from kandev_dq.errors import exception_message
from kandev_dq.facts.shapes import ChangeWindow
from kandev_dq.sql.listing import Listing
from kandev_dq.sql.scan import CARRIED_CHARS, CARRIED_SESSIONS, Part
from kandev_dq.store.access import gx_facts
from kandev_dq.store.replication import Standby
from kandev_dq.verdicts import verdict_of
from kandev_dq.verdicts.base import Family, Finding, Verdict, within_thresholds

#: Each registered family of facts: metric name -> (compute, the value keys it takes).
FACTS_FAMILIES: dict[str, tuple[Callable[..., Mapping[str, Any]], tuple[str, ...]]] = {}


#: The engine the last kandev-dq metric computed on this thread read the store through: on
#: GX's own path, the store of the suite GX just validated (:mod:`kandev_dq.gx.native_runs`).
_validating = threading.local()


def take_validated_engine() -> Any:
    """The SQLAlchemy engine of the store the kandev-dq metrics on this thread read since the
    last call (None: none did, or that engine is gone), forgotten once taken: a suite without
    kandev-dq's rules is never credited with the store an earlier suite read."""
    found = getattr(_validating, "engine", None)
    _validating.engine = None
    return found() if found is not None else None


def register_metric(
    name: str,
    compute: Callable[..., Any],
    value_keys: tuple[str, ...] = (),
    needs: Callable[[dict[str, Any]], dict[str, dict[str, Any]]] | None = None,
) -> str:
    """Register GX table metric ``name``: ``compute(execution_engine, params)``, ``params`` being
    the value keys the expectation gives it; return the metric name.

    ``needs(params)`` names the metrics this one depends on for those params (metric name ->
    its value kwargs, on the same batch): GX computes each first, once per validation, and
    ``compute(execution_engine, params, metrics)`` then receives their values."""

    def _sqlalchemy(
        cls,
        execution_engine,
        metric_domain_kwargs,
        metric_value_kwargs,
        metrics,
        runtime_configuration,
    ):
        params = {key: metric_value_kwargs[key] for key in value_keys}
        _validating.engine = weakref.ref(execution_engine.engine)
        if needs is None:
            return compute(execution_engine, params)
        return compute(execution_engine, params, metrics)

    def _get_evaluation_dependencies(
        cls, metric, configuration=None, execution_engine=None, runtime_configuration=None
    ):
        dependencies = super(provider, cls)._get_evaluation_dependencies(
            metric=metric,
            configuration=configuration,
            execution_engine=execution_engine,
            runtime_configuration=runtime_configuration,
        )
        params = {key: metric.metric_value_kwargs.get(key) for key in value_keys}
        for needed, value_kwargs in (needs(params) if needs else {}).items():
            dependencies[needed] = MetricConfiguration(
                metric_name=needed,
                metric_domain_kwargs=metric.metric_domain_kwargs,
                metric_value_kwargs=value_kwargs,
            )
        return dependencies

    provider = type(
        f"Metric_{name.replace('.', '_')}",
        (TableMetricProvider,),
        {
            "metric_name": name,
            "value_keys": value_keys,
            "_sqlalchemy": metric_value(engine=SqlAlchemyExecutionEngine)(_sqlalchemy),
            "_get_evaluation_dependencies": classmethod(_get_evaluation_dependencies),
            "__module__": __name__,
        },
    )
    return name


#: What the window metric adds to a windowed family's ``window`` fact besides its start
#: (``store``: as every output names it; ``records_key``: its name in the records database;
#: ``open``: how many open findings, over how many sessions, were re-read, and which full
#: run's verdicts they are where one settled them after the suite's last live run).
WINDOW_RECORD = (
    "suite",
    "store",
    "records_key",
    "watermark",
    "previous",
    "overlap_minutes",
    "max_gap_hours",
    "replica",
    "open",
)


def register_facts(family: Family) -> str:
    """Register the GX metric computing ``family`` (once); return the metric name.

    A ``windowed`` family also takes :data:`LIVE_KEY`: given a live suite's name, it depends on
    the :data:`LIVE_WINDOW` metric and ``compute`` receives that window (``window=``)."""
    name, compute, value_keys = family.name, family.compute, family.value_keys
    if name in FACTS_FAMILIES:
        return name
    FACTS_FAMILIES[name] = (compute, value_keys)

    def facts(execution_engine, params: dict[str, Any], metrics=None) -> Mapping[str, Any]:
        params = dict(params)
        decided = (metrics or {}).get(LIVE_WINDOW) if params.pop(LIVE_KEY, None) else None
        if decided is not None:
            params["window"] = ChangeWindow(
                decided["start"], decided["reason"], tuple(decided.get("open_sessions") or ())
            )
        found = gx_facts(
            execution_engine.engine, family.key(params), lambda conn: compute(conn, **params)
        )
        if decided is None:
            return found
        # The window as decided (and this run's watermark, which the next run starts from),
        # with how the family read it (nothing to read: no reads, e.g. without capture_since).
        read = found.get("window") or {
            "start": decided["start"],
            "full": decided["start"] is None,
            "reason": decided["reason"],
            "reads": {},
        }
        record = {key: decided.get(key) for key in WINDOW_RECORD}
        return {**found, "window": {**read, **record}}

    if not family.windowed:
        return register_metric(name, facts, value_keys)

    def needs(params: dict[str, Any]) -> dict[str, dict[str, Any]]:
        suite = params.get(LIVE_KEY)
        return {LIVE_WINDOW: {LIVE_KEY: suite}} if suite else {}

    return register_metric(name, facts, (*value_keys, LIVE_KEY), needs)


#: JSON a result's sample may take: with every value already cut in SQL to ~260 characters,
#: this keeps a suite's result file (some twenty rules) well under 1 MB.
SAMPLE_BUDGET_CHARS = 20_000


def bounded_sample(sample: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """The sample's first rows whose JSON fits :data:`SAMPLE_BUDGET_CHARS`; whether any was cut."""
    kept: list[dict[str, Any]] = []
    used = 0
    for row in sample:
        used += len(json.dumps(row, default=str))
        if used > SAMPLE_BUDGET_CHARS:
            return kept, True
        kept.append(row)
    return kept, False


class KandevExpectation(BatchExpectation):
    """Base of every kandev-dq expectation. A subclass named ``Expect...`` takes from its
    verdict (:func:`kandev_dq.verdicts.verdict_of`, by the type name GX derives from the class
    name) the family of facts it depends on (registered here as a GX metric), its AC ids
    (``rules``), sentence (``rule_text``) and severity, and delegates ``judge`` and ``listing``
    to it, built from the expectation's own fields."""

    verdict: ClassVar[type[Verdict]]
    rules: ClassVar[tuple[str, ...]] = ()
    rule_text: ClassVar[str] = ""
    facts: ClassVar[str] = ""
    #: GX drops a severity equal to the field default from a suite's JSON, so a subclass
    #: cannot override the field; suites are built with :meth:`at_default_severity`.
    default_severity: ClassVar[FailureSeverity] = FailureSeverity.CRITICAL
    #: Further metrics the rule judges, each handed to ``judge`` under its name beside the facts.
    judged_metrics: ClassVar[tuple[str, ...]] = ()
    metric_dependencies: ClassVar[tuple[str, ...]] = ()
    success_keys: ClassVar[tuple[str, ...]] = ()
    domain_keys: ClassVar[tuple[str, ...]] = ("batch_id",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("Expect"):
            return
        verdict = verdict_of(camel_to_snake(cls.__name__))
        cls.verdict = verdict
        # What it checks and why, once: ``help()`` and GX's tooling read the class docstring.
        cls.__doc__ = cls.__doc__ or verdict.__doc__
        cls.facts = register_facts(verdict.facts)
        cls.judged_metrics = verdict.judged_metrics
        cls.metric_dependencies = (cls.facts, *cls.judged_metrics)
        cls.rules = verdict.rules
        cls.rule_text = verdict.rule_text
        cls.default_severity = FailureSeverity(verdict.severity.gx)

    @classmethod
    def at_default_severity(cls, **kwargs: Any) -> KandevExpectation:
        """An instance carrying this rule's own severity (error, warning or info)."""
        return cls(severity=cls.default_severity, **kwargs)

    def judged_by(self) -> Verdict:
        """This expectation's verdict, given the arguments it declares from this instance."""
        return self.verdict(**{name: getattr(self, name) for name in self.verdict.arguments})

    def judge(self, facts: Mapping[str, Any]) -> Finding:
        return self.judged_by().judge(facts)

    def listing(self, facts: Mapping[str, Any]) -> Listing | None:
        return self.judged_by().listing(facts)

    def finding(self, facts: Mapping[str, Any]) -> Finding:
        """The verdict on ``facts``, carrying the rule's listing query whether or not it failed."""
        return self.judged_by().finding(facts)

    def _validate(
        self, metrics: dict, runtime_configuration: dict | None = None, execution_engine=None
    ):
        facts = {**metrics[self.facts], **{name: metrics[name] for name in self.judged_metrics}}
        # A suite entry's count thresholds (dbt's warn_if / error_if) in its meta.
        found = within_thresholds(self.finding(facts), CountThresholds.of(self.meta))
        if "window" in facts:
            # What a live read covered, in every result: the output and the data docs say it,
            # and the next live run starts from its watermark.
            found.details = {**found.details, LIVE_KEY: facts["window"]}
        if not found.success:
            # What it counted stays open: the next live run re-reads it, after a live run or a
            # full one alike (records/watermark.py).
            found.details.update(carried(self.judged_by().counted_part(facts)))
        return self.result_of(found)

    def result_of(self, finding: Finding) -> dict[str, Any]:
        """A finding in GX's result shape (details carry the one-line message and AC ids).

        GX stores ``partial_unexpected_list`` whole, in every result file and every later
        ``history`` and ``docs``: the sample is kept to :data:`SAMPLE_BUDGET_CHARS` of JSON."""
        sample, cut = bounded_sample(finding.sample)
        details = {"message": finding.message, "rules": list(self.rules), **finding.details}
        if cut:
            details["sample_cut"] = (
                f"{len(sample)} of {len(finding.sample)} sampled rows kept (result size bound)"
            )
        if not finding.success and finding.listing is not None:
            # Reproducible: the SELECT listing every item counted, values inlined.
            details["query"] = finding.listing.sql()
        return {
            "success": finding.success,
            "result": {
                "observed_value": finding.observed_value,
                "unexpected_count": finding.unexpected_count,
                "partial_unexpected_list": sample,
                "details": details,
            },
        }

    # --- data docs (the legacy renderer hooks are the ones GX 1.x site builders call) ---------

    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    def _prescriptive_renderer(
        cls, configuration=None, result=None, runtime_configuration=None, **kw
    ):
        config = configuration or (result.expectation_config if result else None)
        severity = getattr(config, "severity", None) if config is not None else None
        severity = getattr(severity, "value", severity) or "critical"
        severity = severity_word(severity)
        try:
            thresholds = CountThresholds.of(getattr(config, "meta", None))
        except ThresholdError:
            thresholds = None  # the result says why it could not be judged
        limits = f"; {thresholds.text()}" if thresholds else ""
        return [
            RenderedStringTemplateContent(
                content_block_type="string_template",
                string_template={
                    "template": "$rule ($rules; severity $severity$limits)",
                    "params": {
                        "rule": cls.rule_text,
                        "rules": ", ".join(cls.rules),
                        "severity": severity,
                        "limits": limits,
                    },
                },
            )
        ]

    @classmethod
    @renderer(renderer_type=LegacyDiagnosticRendererType.OBSERVED_VALUE)
    def _diagnostic_observed_value_renderer(
        cls, configuration=None, result=None, runtime_configuration=None, **kw
    ):
        if result is None or not result.result:
            return "--"
        return _observed_content(result.result.get("observed_value"))

    @classmethod
    @renderer(renderer_type=LegacyDiagnosticRendererType.UNEXPECTED_STATEMENT)
    def _diagnostic_unexpected_statement_renderer(
        cls, configuration=None, result=None, runtime_configuration=None, **kw
    ):
        if result is None:
            return []
        error = exception_message(result)
        details = (result.result or {}).get("details") or {}
        text = f"Could not evaluate: {error}" if error else details.get("message")
        if not text:
            return []
        said = [
            RenderedStringTemplateContent(
                content_block_type="string_template",
                string_template={
                    "template": "$message",
                    "params": {"message": text[:500]},
                    # On a line of its own, under the rule sentence.
                    "styling": {
                        "classes": [
                            "d-block",
                            "text-danger" if not result.success else "text-muted",
                        ]
                    },
                },
            )
        ]
        window = details.get(LIVE_KEY)
        if isinstance(window, dict):
            said.append(_window_block(window))
        return said

    @classmethod
    @renderer(renderer_type=LegacyDiagnosticRendererType.UNEXPECTED_TABLE)
    def _diagnostic_unexpected_table_renderer(
        cls, configuration=None, result=None, runtime_configuration=None, **kw
    ):
        rows = (result.result or {}).get("partial_unexpected_list") if result else None
        query = ((result.result or {}).get("details") or {}).get("query") if result else None
        listed = [listing_block(query, result.result.get("unexpected_count"))] if query else []
        if not rows:
            return listed or None
        columns = list(dict.fromkeys(key for row in rows for key in row))
        return [
            *listed,
            RenderedTableContent(
                content_block_type="table",
                # GX inserts plain strings into the page verbatim: row values are escaped here.
                header_row=[html.escape(str(column)) for column in columns],
                table=[[_cell(column, row.get(column)) for column in columns] for row in rows],
                styling={"body": {"classes": ["table", "table-bordered", "table-sm", "mt-3"]}},
            ),
        ]


def carried(counted: Part | None) -> dict[str, Any]:
    """What a failing rule's details carry of its counted part to the next live run."""
    if counted is None or "sessions" not in counted:
        return {}
    sessions = counted["sessions"]
    if sessions is None:
        return {
            OPEN_SESSIONS_CUT: (
                f"the suite's failing rules counted items in more than {CARRIED_SESSIONS:,} "
                f"sessions (or {CARRIED_CHARS:,} characters of their ids): the next live run "
                "reads in full"
            )
        }
    return {OPEN_SESSIONS: sessions}


def window_text(window: dict[str, Any]) -> str:
    """What a live read covered and how each read was served, in one line."""
    start = window.get("start")
    reads = window.get("reads") or {}
    served = "; ".join(f"{name}: {how}" for name, how in reads.items())
    replica = window.get("replica")
    lag = f" The store is {Standby.from_json(replica).text()}." if replica else ""
    read = f"from {start}{_reopened(window.get('open'))}" if start else "in full"
    return f"read {read}: {window.get('reason')}. {served}{lag}"


def _reopened(open_findings: Any) -> str:
    """The open findings a windowed read re-read, as the window's line says them."""
    if not isinstance(open_findings, dict) or not open_findings.get("findings"):
        return ""
    settled_by = open_findings.get("settled_by")
    left = f"as the last {settled_by} run left them" if settled_by else "of the last run"
    return (
        f", and the {open_findings.get('sessions')} session(s) of "
        f"{open_findings.get('findings')} open finding(s) {left}, re-read"
    )


def _window_block(window: dict[str, Any]) -> RenderedStringTemplateContent:
    """A live rule's window under its finding (a template param: GX escapes it)."""
    return RenderedStringTemplateContent(
        content_block_type="string_template",
        string_template={
            "template": "$window",
            "params": {"window": window_text(window)[:1000]},
            "styling": {"classes": ["d-block", "text-muted", "small"]},
        },
    )


def listing_block(query: str, count: int | None) -> RenderedStringTemplateContent:
    """A failed rule's listing query as data docs show it: collapsed, with a copy button that
    needs no network (``static/kandev/copy.js``); without script it stays selectable text.
    The query is a template param, so GX escapes it; its newlines stay (a ``pre`` block)."""
    ident = "kandev-query-" + hashlib.sha256(query.encode()).hexdigest()[:12]
    return RenderedStringTemplateContent(
        content_block_type="string_template",
        string_template={
            "template": (
                "<details class='kandev-query'><summary>The SQL listing the $count counted "
                "item(s): run it read-only in sqlite3 or psql</summary>"
                f"<button type='button' class='btn btn-sm btn-outline-secondary kandev-copy' "
                f"data-target='{ident}'>Copy</button>"
                f"<pre class='kandev-query-text'><code id='{ident}'>$query</code></pre></details>"
            ),
            "params": {"count": "?" if count is None else str(count), "query": query},
            "styling": {"classes": ["d-block", "mt-2"]},
        },
    )


def _cell(column: str, value: Any) -> str:
    """A sampled value as its table cell shows it, escaped; an id kept on one line (its table
    scrolls sideways in its cell rather than squeezing an id to a few characters a line)."""
    shown = html.escape(_short(value))
    is_id = column == "id" or column.endswith("_id")
    return f'<span class="kandev-id">{shown}</span>' if is_id else shown


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 300 else text[:297] + "..."


def _observed_content(value: Any) -> RenderedStringTemplateContent:
    """An observed value as a reviewer reads it: a mapping one ``key: value`` per line, a list
    of rows by its length (the rows are the rule's table), anything else as short text. Values
    are template params, which GX escapes (a plain string would reach the page verbatim)."""
    if isinstance(value, dict) and value:
        names = list(value)[:12]
        template = "<br>".join(f"$k{i}: $v{i}" for i in range(len(names)))
        params = {f"k{i}": str(name) for i, name in enumerate(names)}
        params.update({f"v{i}": _short(value[name]) for i, name in enumerate(names)})
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        template, params = "$count row(s), tabled with the rule", {"count": str(len(value))}
    else:  # an empty list or mapping is nothing observed, as None is: "none", never "[]"
        empty = value is None or (isinstance(value, list | dict | str) and not value)
        template, params = "$value", {"value": "none" if empty else _short(value)}
    return RenderedStringTemplateContent(
        content_block_type="string_template",
        string_template={"template": template, "params": params},
    )


class LiveScopedExpectation(KandevExpectation):
    """A rule a ``live`` suite also runs: given ``live_window`` (the live suite's name), its
    facts are read over what changed since that suite's last stored run on this store
    (:mod:`kandev_dq.records.watermark`), with the same judge, AC ids and severity."""

    live_window: str | None = pydantic.Field(
        default=None,
        min_length=1,
        max_length=200,
        description=(
            "The live suite whose last stored run on this store starts the window read; "
            "unset, everything since capture_since is read."
        ),
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if LIVE_KEY not in cls.success_keys:
            cls.success_keys = (*cls.success_keys, LIVE_KEY)


class WindowedExpectation(KandevExpectation):
    """A rule that tolerates writes shortly before ``capture_since``: a message committed
    between the backfill's snapshot and the ``capture_since`` sample (AC-24 point 4, AC-24f).
    The window is validated when the expectation is built, as GX core declares its fields."""

    window_minutes: float = pydantic.Field(
        default=10.0,
        gt=0,
        le=24 * 60,
        description="Minutes before capture_since in which an upgrade's writes are tolerated.",
    )
    success_keys: ClassVar[tuple[str, ...]] = ("window_minutes",)
