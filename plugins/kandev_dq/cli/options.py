"""The options several commands share, their choices, and the first reading of them.

A command reads its store, project and records database once, at its edge, through
:mod:`kandev_dq.run.inputs` (imported inside the functions: ``--help`` loads none of it).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from kandev_dq.run.inputs import RunInputs

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="URL|PATH",
        help="Store URL (sqlite:///…, postgresql://…) or SQLite file path. "
        "Default: $KANDEV_STORE_URL, then ~/.kandev/data/kandev.db.",
        show_default=False,
    ),
]
ProjectOption = Annotated[
    Path | None,
    typer.Option(
        "--project",
        metavar="DIR",
        help="GX project folder. Default: the current folder if it holds "
        "great_expectations.yml, else the source checkout kandev-dq runs from "
        "(an installed kandev-dq has none: create one with `kandev-dq init DIR`).",
        show_default=False,
    ),
]
RecordsOption = Annotated[
    str | None,
    typer.Option(
        "--records",
        metavar="URL|PATH",
        help="Records database (key ledger, run register, validation results): a SQLite file "
        "or a PostgreSQL URL, never the store itself. Default: $KANDEV_DQ_RECORDS_URL, then "
        "the project's setting, then uncommitted/records.db.",
        show_default=False,
    ),
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress lines on stderr.", show_default=False)
]
AllowCodeOption = Annotated[
    bool,
    typer.Option(
        "--allow-project-code",
        help="Let the project's config name Python of its own (plugins, stores, sites, "
        "actions). Off: only kandev-dq's and GX's own classes load; anything else exits 2.",
        show_default=False,
    ),
]

StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Refuse (exit 2) a project whose checkpoint or suites differ from kandev-dq's "
        "rules (a rule removed, a severity or argument changed, a suite emptied): the "
        "verdict is then kandev-dq's own. Checked before the store is opened.",
        show_default=False,
    ),
]


class Format(StrEnum):
    text = "text"
    json = "json"


class CheckFormat(StrEnum):
    text = "text"
    json = "json"
    junit = "junit"  # JUnit XML: what Jenkins, GitLab and most CI systems read
    # Prometheus metric families: node_exporter's textfile collector, a Pushgateway
    openmetrics = "openmetrics"


class FailOn(StrEnum):
    error = "error"
    warning = "warning"


def project_of(project: Path | None) -> Path:
    from kandev_dq.run.inputs import project_folder

    return project_folder(project)


def vetted_project(project: Path | None, allow_project_code: bool) -> Path:
    """The project folder, refused unless it holds only what kandev-dq itself writes or the
    user passed ``--allow-project-code`` (docs/reliability.md, 3a)."""
    from kandev_dq.run import inputs

    return inputs.project_as_data(inputs.project_folder(project), allow_project_code)


def checked_inputs(
    project: Path | None,
    store: str | None,
    checkpoint: str,
    allow_project_code: bool,
    records: str | None,
    *,
    strict: bool = False,
) -> RunInputs:
    """The project folder, the store and the records database (each read once), vetted with
    the checkpoint name (and with ``strict``, the project's deviations) without GX
    (:func:`kandev_dq.run.inputs.run_inputs`)."""
    from kandev_dq.run import inputs

    return inputs.run_inputs(project, store, checkpoint, allow_project_code, records, strict=strict)
