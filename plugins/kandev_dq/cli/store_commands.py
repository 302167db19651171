"""The commands that write: a store (``sample``, ``migrate``), a project (``init``), or both
in a folder of their own (``demo``). Each calls one function of ``lab/``, the API's migration
or ``run/``."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from kandev_dq import api
from kandev_dq.api import loading_gx
from kandev_dq.cli.options import Format, StoreOption
from kandev_dq.cli.output import errors_as, print_report, say


class Shape(StrEnum):
    none = "none"
    pre_amendment = "pre_amendment"
    amended = "amended"


def sample(
    out_target: Annotated[
        str, typer.Option("--out", help="SQLite file path or PostgreSQL URL to create.")
    ] = "kandev-sample.db",
    scale: Annotated[int, typer.Option(min=1, help="Scale units (1 = 253 subagent messages).")] = 1,
    seed: Annotated[int, typer.Option(help="Random seed; same seed, same store.")] = 0,
    subagents: Annotated[
        Shape, typer.Option(help="Create task_session_subagents in this shape.")
    ] = Shape.none,
) -> None:
    """Generate a Kandev-shaped sample store (a store predating the feature by default)."""
    from kandev_dq.lab.sample_store import write_sample_store

    shape = None if subagents is Shape.none else subagents.value
    written = write_sample_store(out_target, scale=scale, seed=seed, subagents=shape)
    for line in written.lines():
        say(line)


def migrate(
    ctx: typer.Context,
    store: StoreOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the state and the steps; write nothing.")
    ] = False,
    output_format: Annotated[Format, typer.Option("--format")] = Format.text,
) -> None:
    """Bring a store to the contract's end state: schema change, then the one-time backfill."""
    errors_as(ctx, output_format)

    def announce(shown: str, dialect: str) -> None:
        if output_format is Format.text:  # first, so a reader knows which store is about to change
            say(f"{'dry run on' if dry_run else 'migrating'} {shown} ({dialect})")

    report = api.migrate(store, dry_run=dry_run, announce=announce)
    if output_format is Format.json:
        print(json.dumps(report.to_dict(), default=str))
    else:
        say(report.render())
    raise typer.Exit(int(report.exit_code))


def demo(
    folder: Annotated[
        Path, typer.Option("--dir", help="Folder for the demo store and project.")
    ] = Path("kandev-demo"),
    postgres: Annotated[
        str | None, typer.Option("--postgres", help="Use this empty PostgreSQL database instead.")
    ] = None,
    scale: Annotated[int, typer.Option(min=1, help="Sample scale units.")] = 1,
) -> None:
    """Generate a sample store, migrate it, run pre_release and build the data docs."""
    from kandev_dq.lab.demo import demo_target, run_demo

    demo_target(folder, postgres)  # a refusal answers before GX loads
    with loading_gx():
        from kandev_dq.run.check import verdict_line

    result = run_demo(folder, postgres_url=postgres, scale=scale, say=say)
    report = result.report
    say(f"store state: {result.state_before} -> {report.state}")
    print_report(report, verdict_line(report))
    raise typer.Exit(int(report.exit_code()))


def init(
    folder: Annotated[Path, typer.Argument(help="Folder to write the GX project into.")],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a folder that is not empty. Only kandev-dq's own files are "
            "written (and replaced); nothing else there is changed or deleted.",
            show_default=False,
        ),
    ] = False,
) -> None:
    """Write a working GX project (yml, suites, validation definitions, checkpoints)."""
    from kandev_dq.project.files import init_project

    init_project(folder, force=force)
    say(f"kandev-dq project written to {folder}")
