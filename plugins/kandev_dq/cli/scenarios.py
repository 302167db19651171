"""``kandev-dq scenarios``: the named fault and healthy stores of ``lab/scenarios``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from kandev_dq.cli import output
from kandev_dq.cli.options import complete_scenarios
from kandev_dq.cli.output import say
from kandev_dq.errors import ExitCode
from kandev_dq.text import one_line

#: When the command line started (the CLI loads its modules together, before any command
#: runs): a duration it reports is the command's, not one step of it.
_STARTED = time.perf_counter()

app = typer.Typer(
    no_args_is_help=True,
    help="Named fault and healthy stores that prove the suite's verdicts "
    "(docs/detection-matrix.md).",
)
ScenarioName = Annotated[
    str,
    typer.Argument(
        help="A scenario (see `kandev-dq scenarios list`).", autocompletion=complete_scenarios
    ),
]
ScenarioStore = Annotated[
    str, typer.Option("--store", help="SQLite file path or PostgreSQL URL (an empty one).")
]


@app.command("list")
def scenarios_list() -> None:
    """Every scenario: its name, what the suite must say about it, what it is."""
    from kandev_dq.lab.scenarios import SCENARIOS

    if output.out.is_terminal:
        table = Table("scenario", "expected", "what it is")
        for s in SCENARIOS.values():
            table.add_row(*(Text(one_line(cell)) for cell in (s.name, s.expected, s.summary)))
        output.out.print(table)
        return
    for s in SCENARIOS.values():
        say(f"{s.name}\t{s.expected}\t{s.summary}")


@app.command("build")
def scenarios_build(name: ScenarioName, store: ScenarioStore) -> None:
    """Build one scenario into an empty store; refuses a store that holds Kandev tables."""
    from kandev_dq.lab import scenarios

    scenario = scenarios.get(name)
    writing = scenarios.materialise(name, store)
    took = time.perf_counter() - _STARTED
    checked = scenario.check_url(store) if scenario.check_url else store
    for line in (
        f"built {name} into {_shown(store)} in {took:.2f} s ({writing:.2f} s of it writing "
        f"the store): {scenario.summary}",
        f"expected: {scenario.expected}",
        f"check it: kandev-dq check --checkpoint pre_release --store '{_shown(checked)}'",
    ):
        say(one_line(line))
    if scenario.between_runs is not None:
        say(
            one_line(
                f"then: kandev-dq scenarios between-runs {name} --store '{_shown(store)}', "
                "and check again (the second run is the one that fails)"
            )
        )


def _shown(store: str) -> str:
    """A store as every command names it (:attr:`kandev_dq.store.reference.StoreRef.shown`)."""
    from kandev_dq.store.reference import store_ref

    return store_ref(store).shown


@app.command("between-runs")
def scenarios_between_runs(
    name: ScenarioName,
    store: Annotated[
        str,
        typer.Option(
            "--store",
            help="The store `kandev-dq scenarios build` made for this scenario (SQLite file "
            "path or PostgreSQL URL), checked once since.",
        ),
    ],
) -> None:
    """Apply a two-run scenario's mutation to its store, between its two checks."""
    from kandev_dq.lab import scenarios

    scenarios.apply_between_runs(name, store)
    say(one_line(f"applied the between-runs mutation of {name} to {_shown(store)}"))


@app.command("matrix")
def scenarios_matrix(
    postgres: Annotated[
        str,
        typer.Option(
            "--postgres",
            help="A PostgreSQL database to create scratch schemas in (the matrix covers both "
            "dialects).",
        ),
    ],
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write the matrix here (default: stdout).")
    ] = None,
    project: Annotated[
        Path | None,
        typer.Option(
            "--project", help="GX project (default: built from the code).", show_default=False
        ),
    ] = None,
) -> None:
    """Run every scenario on both dialects and write the detection matrix."""
    from kandev_dq.lab.scenarios import detection_matrix

    text, found = detection_matrix(
        postgres, project=project, say=lambda line: output.err.print(line, markup=False)
    )
    if out_file is None:
        sys.stdout.write(text)
    else:
        out_file.write_text(text, encoding="utf-8")
    for problem in found:
        output.err.print(f"kandev-dq: problem: {problem}", markup=False)
    raise typer.Exit(int(ExitCode.FAILED if found else ExitCode.OK))
