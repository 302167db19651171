"""The options several commands share, their choices, the shell completion of the names they
take, and the first reading of them.

A command reads its store, project and records database once, at its edge, through
:mod:`kandev_dq.run.inputs` (imported inside the functions: ``--help`` loads none of it).

Completion (typer's, ``--install-completion``) offers a project's checkpoints, kandev-dq's
rules and the lab's scenarios: names alone, never GX nor a store, so a TAB answers at once. A
project folder may be a stranger's checkout: a checkpoint file name holding a control character
(which would drive the terminal, or end the shell's completion line) is never offered.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kandev_dq.errors import KandevDqError
from kandev_dq.text import one_line

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
#: What ``--store-name`` says, in every command's help that takes it.
STORE_NAME_HELP = (
    "The store's name in the records database (key ledger, run history, live watermarks) "
    "instead of its identity (PostgreSQL: system identifier and database; SQLite: the file), "
    "which a pg_basebackup copy shares with its original: names copies apart."
)
StoreNameOption = Annotated[
    str | None,
    typer.Option(
        "--store-name",
        metavar="NAME",
        help=f"{STORE_NAME_HELP} Default: $KANDEV_DQ_STORE_NAME, then the identity.",
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
        "actions) and SQL of its own (GX's query expectations, row conditions). Off: only "
        "kandev-dq's classes and rules and GX's built-in column and table expectations load; "
        "anything else exits 2.",
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
    store_name: str | None = None,
) -> RunInputs:
    """The project folder, the store and the records database (each read once), vetted with
    the checkpoint name (and with ``strict``, the project's deviations) without GX
    (:func:`kandev_dq.run.inputs.run_inputs`)."""
    from kandev_dq.run import inputs

    return inputs.run_inputs(
        project,
        store,
        checkpoint,
        allow_project_code,
        records,
        strict=strict,
        store_name=store_name,
    )


# --- shell completion of the names options and arguments take ----------------------------


def complete_checkpoints(ctx: typer.Context, incomplete: str) -> list[str]:
    """The checkpoints of the project the command line names so far (``--project``, else the
    default project), as a check's refusal lists them; none outside a project."""
    from kandev_dq.run.inputs import checkpoint_names, project_folder

    try:
        folder = project_folder(ctx.params.get("project"))
    except KandevDqError:
        return []
    return _offered(checkpoint_names(folder), incomplete)


def complete_suites(ctx: typer.Context, incomplete: str) -> list[str]:
    """The suites of the checkpoint the command line names so far (``--checkpoint``, else
    ``nightly``) in the project it names; none outside a project."""
    from kandev_dq.project.deviations import ProjectFiles
    from kandev_dq.run.inputs import project_folder

    try:
        folder = project_folder(ctx.params.get("project"))
    except KandevDqError:
        return []
    suites = ProjectFiles(folder).checkpoint_suites(ctx.params.get("checkpoint") or "nightly")
    return _offered(dict.fromkeys(suites or ()), incomplete)


def complete_rules(incomplete: str) -> list[tuple[str, str]]:
    """kandev-dq's rules (the rule index), each with its AC ids as its help."""
    from kandev_dq.contract.rule_index import RULE_INDEX

    cited = {rule.expectation: ", ".join(rule.rules) for rule in RULE_INDEX}
    return [(name, cited[name]) for name in _offered(sorted(cited), incomplete)]


def complete_scenarios(incomplete: str) -> list[tuple[str, str]]:
    """The lab's scenarios, each with what the suite must say about it as its help."""
    from kandev_dq.lab.scenarios import SCENARIOS

    return [(name, SCENARIOS[name].expected) for name in _offered(SCENARIOS, incomplete)]


def _offered(names: Iterable[str], incomplete: str) -> list[str]:
    return [name for name in names if name.startswith(incomplete) and one_line(name) == name]
