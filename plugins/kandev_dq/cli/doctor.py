"""``kandev-dq doctor``: whether a check could run here (:mod:`kandev_dq.run.doctor`)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from kandev_dq.cli.options import Format, ProjectOption, RecordsOption, StoreOption
from kandev_dq.cli.output import errors_as, say
from kandev_dq.text import one_line


def doctor(
    ctx: typer.Context,
    store: StoreOption = None,
    project: ProjectOption = None,
    records: RecordsOption = None,
    output_format: Annotated[Format, typer.Option("--format")] = Format.text,
) -> None:
    """Say, one fact a line, whether a check can run here: versions, the project and its
    vetting, the store (reachable, server, activation state, live's indexes), the records
    database. Read-only; exit 0 when every fact holds, 2 otherwise."""
    errors_as(ctx, output_format)
    from kandev_dq.run.doctor import diagnose

    found = diagnose(store, project, records)
    if output_format is Format.json:
        print(json.dumps(found.to_json()))
    else:
        for fact in found.facts:
            say(one_line(fact.line()))
        say(found.summary())
    raise typer.Exit(int(found.exit_code))
