"""The overview's timeline: a store's last runs drawn as a chart, inline SVG in the page.

Why Altair and ``vl-convert-python``: Altair (already installed with GX) declares the chart
as a Vega-Lite spec, and vl-convert renders that spec to SVG inside this process (its own
embedded Vega, no browser, no network). The SVG goes into ``overview.html`` as markup, so the
chart needs no JavaScript and no CDN: it reads offline, in a screenshot, in an audit folder
and with scripts blocked. GX's own chart path (Vega-Embed in the page) loads its scripts from
a CDN and draws nothing without them; a hand-drawn SVG would be a second chart library to
keep. Store values never reach the chart: its text is suite, state, key and figure names of
kandev-dq's own, run numbers and the times kandev-dq recorded its runs; the SVG is escaped by
Vega.

The series come from one function, :func:`kandev_dq.report.history.timeline`, which
``history --format json`` prints as they are.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

from kandev_dq.contract.severity import SEVERITIES
from kandev_dq.report.history import Timeline

#: A verdict's colour: as the rest of the docs colour them (Bootstrap's success, danger,
#: the darker warning the CSS uses, info).
STATUS_COLOURS = {
    "passed": "#28a745",
    "error": "#dc3545",
    "warning": "#946200",
    "info": "#17a2b8",
}
WIDTH = 640


def timeline_spec(series: Timeline) -> dict[str, Any]:
    """The Vega-Lite spec of the timeline: per suite the verdict of each run, the
    writer-health figures, the activation state, and the keys present (the first point of a
    key is the run it was first seen in)."""
    import altair as alt

    runs = [p.run for p in series.points]
    # One column per run (two runs in one minute stay apart), each labelled with its date and
    # time: the run numbers stay in the tooltips.
    dates = {str(p.run): p.run_time[:16].replace("T", " ") for p in series.points}
    x = alt.X(
        "run:O",
        title="run time (UTC), oldest first",
        scale=alt.Scale(domain=runs),
        axis=alt.Axis(labelAngle=-45, labelExpr=f"{json.dumps(dates)}[datum.value]"),
    )

    def tooltip(*fields: str) -> list:
        return [alt.Tooltip("run:O"), alt.Tooltip("run_time:N", title="time (UTC)"), *fields]

    # The rows go into the spec as plain JSON datasets, after Altair has built and checked
    # the chart: through Altair each row is an object checked against the schema, a cost
    # growing with the runs charted.
    datasets = {
        "suites": [
            {"run": p.run, "run_time": p.run_time, "suite": suite, "status": status}
            for p in series.points
            for suite, status in p.suites.items()
        ],
        "health": [
            {"run": p.run, "run_time": p.run_time, "figure": figure, "value": value}
            for p in series.points
            for figure, value in p.health.items()
            if value is not None
        ],
        "activation": [
            {"run": p.run, "run_time": p.run_time, "series": "state", "value": p.state}
            for p in series.points
            if p.state is not None
        ]
        + [
            {"run": p.run, "run_time": p.run_time, "series": "key present", "value": key}
            for p in series.points
            for key in p.keys_present or []
        ],
    }
    suites = (
        alt.Chart(
            alt.Data(name="suites"),
            title="Suites: passed, or the worst severity that failed",
        )
        .mark_point(filled=True, size=90)
        .encode(
            x=x,
            y=alt.Y("suite:N", title=None),
            color=alt.Color(
                "status:N",
                scale=alt.Scale(domain=list(STATUS_COLOURS), range=list(STATUS_COLOURS.values())),
                title="verdict",
            ),
            shape=alt.Shape(
                "status:N",
                scale=alt.Scale(
                    domain=["passed", *SEVERITIES],
                    range=["circle", "cross", "triangle-up", "diamond"],
                ),
                title="verdict",
            ),
            tooltip=tooltip("suite:N", "status:N"),
        )
    )

    health = (
        alt.Chart(
            alt.Data(name="health"),
            title="Writer health since capture_since (AC-26, AC-27)",
        )
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("value:Q", title="keys / rows"),
            color=alt.Color("figure:N", title="figure"),
            tooltip=tooltip("figure:N", "value:Q"),
        )
    )

    activation = (
        alt.Chart(
            alt.Data(name="activation"),
            title="Activation state (AC-24c) and the keys present",
        )
        .mark_point(filled=True, size=70, shape="square")
        .encode(
            x=x,
            y=alt.Y("value:N", title=None),
            color=alt.Color("series:N", title="row"),
            tooltip=tooltip("series:N", "value:N"),
        )
    )
    # Each chart keeps its own colours and legend: a verdict, a figure and a key are unrelated.
    spec = (
        alt.vconcat(
            suites.properties(width=WIDTH, height=110),
            health.properties(width=WIDTH, height=140),
            activation.properties(width=WIDTH, height=110),
        )
        .resolve_scale(color="independent", shape="independent")
        .resolve_legend(color="independent", shape="independent")
        .to_dict()
    )
    return spec | {"datasets": datasets}


def timeline_svg(series: Timeline) -> str:
    """The timeline as one ``<svg>`` element, rendered offline (see the module docstring)."""
    import vl_convert

    svg = vl_convert.vegalite_to_svg(timeline_spec(series))
    return svg[svg.index("<svg") :]  # no XML declaration inside an HTML page


#: The smallest chart: drawing it starts vl-convert's embedded engine.
_FIRST_CHART = {
    "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
    "data": {"values": [{"run": 1}]},
    "mark": "point",
    "encoding": {"x": {"field": "run", "type": "quantitative"}},
}
_STARTED = threading.Lock()


def start_engine() -> None:
    """Start vl-convert's engine in the background, once per process: its first chart costs a
    third of a second of start-up in native code that leaves Python running. Called once the
    store has been read (the results' pages are being built): started earlier, its memory
    would lie on top of the read's peak. The overview's chart then finds it ready; should this
    fail, that chart reports the error."""
    if not _STARTED.acquire(blocking=False):
        return

    def draw_first_chart() -> None:
        import vl_convert

        # Only a head start: the real chart reports whatever fails here.
        with contextlib.suppress(Exception):
            vl_convert.vegalite_to_svg(_FIRST_CHART)

    threading.Thread(target=draw_first_chart, name="chart-engine-start", daemon=True).start()
