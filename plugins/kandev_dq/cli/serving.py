"""The ``serve`` command: keep GX and the project loaded, check each store on its interval,
and serve the results as Prometheus metrics (:mod:`kandev_dq.exporter`)."""

from __future__ import annotations

from typing import Annotated

import typer

from kandev_dq.cli.options import (
    AllowCodeOption,
    ProjectOption,
    RecordsOption,
    complete_checkpoints,
)


def _every(help_text: str) -> typer.Option:
    return typer.Option(metavar="DURATION", help=help_text, show_default=False)


def serve(
    store: Annotated[
        list[str] | None,
        typer.Option(
            "--store",
            metavar="URL|PATH",
            help="A store to check; repeat for several. Default: $KANDEV_DQ_SERVE_STORES "
            "(URLs or paths separated by spaces), then $KANDEV_STORE_URL.",
            show_default=False,
        ),
    ] = None,
    store_name: Annotated[
        list[str] | None,
        typer.Option(
            "--store-name",
            metavar="NAME",
            help="A store's name in the records database instead of its identity (names "
            "copies of one store apart): repeat once per --store, in the same order. "
            "Default: $KANDEV_DQ_STORE_NAME when one store is served, then the identity.",
            show_default=False,
        ),
    ] = None,
    listen: Annotated[
        str | None,
        typer.Option(
            metavar="HOST:PORT",
            help="Where /metrics and /healthz listen. Default: $KANDEV_DQ_SERVE_LISTEN, then "
            "127.0.0.1:9108; another interface only when named (0.0.0.0:9108).",
            show_default=False,
        ),
    ] = None,
    live_every: Annotated[
        str | None,
        _every(
            "Run `live` on each store this often (90, 30s, 5m, 24h). "
            "Default: $KANDEV_DQ_SERVE_LIVE_EVERY, then 5m."
        ),
    ] = None,
    full_every: Annotated[
        str | None,
        _every(
            "Run the full checkpoint on each store this often. "
            "Default: $KANDEV_DQ_SERVE_FULL_EVERY, then 24h."
        ),
    ] = None,
    full_checkpoint: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The full checkpoint. Default: $KANDEV_DQ_SERVE_FULL_CHECKPOINT, then nightly.",
            show_default=False,
            autocompletion=complete_checkpoints,
        ),
    ] = None,
    time_limit: Annotated[
        str | None,
        _every(
            "A cycle longer than this counts its store as down; the next store is "
            "checked. Default: $KANDEV_DQ_SERVE_TIME_LIMIT, then 10m."
        ),
    ] = None,
    project: ProjectOption = None,
    records: RecordsOption = None,
    allow_project_code: AllowCodeOption = False,
) -> None:
    """Check stores again and again in one process and serve Prometheus metrics
    (/metrics, /healthz). SIGTERM or SIGINT stops it (exit 0); SIGHUP reloads the project."""
    from kandev_dq import exporter

    settings = exporter.serve_settings(
        store,
        store_names=store_name,
        project=project,
        records=records,
        listen=listen,
        live_every=live_every,
        full_every=full_every,
        full_checkpoint=full_checkpoint,
        time_limit=time_limit,
        allow_project_code=allow_project_code,
    )
    exporter.serve(settings)
