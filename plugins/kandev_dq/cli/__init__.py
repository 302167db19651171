"""The ``kandev-dq`` command line.

Exit codes (:class:`kandev_dq.errors.ExitCode`): 0 every rule passed / every migration step
succeeded or was already done; 1 an error-severity rule failed (``--fail-on warning``: a
warning too) / a migration step failed; 2 the command could not run (bad input, unreachable
store, not a Kandev store, broken project). Errors are one line on stderr, never a traceback.

This module makes the application and its entry point; the commands live in modules by role
(:mod:`.checking`, :mod:`.store_commands`, :mod:`.scenarios`, :mod:`.records`,
:mod:`.serving`, :mod:`.doctor`), what they
print in :mod:`.output`, the options they share in :mod:`.options`.

May import every layer, ``lab`` included (the composition root); a module reaching GX only
inside the command that needs it, so ``--help`` and the other commands never load GX.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kandev_dq.cli import checking, doctor, records, scenarios, serving, store_commands
from kandev_dq.cli.output import ErrorDocument, could_not_run, err, say
from kandev_dq.errors import ExitCode, KandevDqError
from kandev_dq.text import one_line

app = typer.Typer(
    add_completion=True,  # --install-completion and --show-completion (bash, zsh, fish, PowerShell)
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Click's own help layout: flags show no ``<bool>`` after them, and help needs no rich.
    rich_markup_mode=None,
    help="Validate a Kandev store against the subagent-context contract (Great Expectations).",
)


def _print_version(wanted: bool) -> None:
    if wanted:
        from kandev_dq.run.versions import kandev_dq_version

        say(f"kandev-dq {kandev_dq_version()}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print kandev-dq's version and exit.",
        ),
    ] = False,
) -> None:
    """Options that apply before any command."""


# In the order `kandev-dq --help` lists them.
for _command in (
    store_commands.sample,
    store_commands.migrate,
    checking.check,
    checking.audit,
    checking.history,
    checking.explain,
    checking.docs,
    serving.serve,
    store_commands.demo,
    store_commands.init,
    doctor.doctor,
    checking.rules,
):
    app.command()(_command)
app.add_typer(scenarios.app, name="scenarios")
app.add_typer(records.ledger_app, name="ledger")
app.add_typer(records.records_app, name="records")


def _whole_short_help(typer_app: typer.Typer) -> None:
    """A command list shows each command's first paragraph whole, wrapped to the terminal:
    click would cut it with "..." at the width left beside the names (80 columns: ~60)."""

    def first_paragraph(*docs: object) -> str | None:  # typer's unset values are placeholders
        doc = next((d for d in docs if isinstance(d, str) and d.strip()), None)
        return " ".join(doc.strip().split("\n\n")[0].split()) if doc else None

    for info in typer_app.registered_commands:
        if not isinstance(info.short_help, str):
            info.short_help = first_paragraph(info.help, getattr(info.callback, "__doc__", None))
    for group in typer_app.registered_groups:
        if not isinstance(group.short_help, str):
            group.short_help = first_paragraph(group.help, group.typer_instance.info.help)
        _whole_short_help(group.typer_instance)


_whole_short_help(app)


def main() -> None:
    """Console entry point: one-line errors and documented exit codes, never a traceback.

    The invocation's error document (:class:`~kandev_dq.cli.output.ErrorDocument`) is made
    here and handed to the commands as click's context object: a refusal, wherever it is
    raised, is answered with the document the command line asked for."""
    document = ErrorDocument.asked_in(sys.argv[1:])
    try:
        code = app(standalone_mode=False, obj=document)
    except typer.TyperException as exc:  # a usage error: click's own words, then the document
        exc.show()  # type: ignore[attr-defined] - every TyperException raised here is click's
        document.write(one_line(exc.format_message()), exc.exit_code)
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("Aborted!", markup=False)
        sys.exit(1)
    except KandevDqError as exc:
        could_not_run(str(exc), int(exc.exit_code), document)
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        err.print("kandev-dq: interrupted", markup=False)
        sys.exit(int(ExitCode.COULD_NOT_RUN))
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        from kandev_dq.project.settings import DEBUG_VARIABLE, debugging

        if debugging():
            raise
        first = (str(exc).strip().splitlines() or [""])[0]
        could_not_run(
            f"{type(exc).__name__}: {first} (set {DEBUG_VARIABLE}=1 for details)",
            int(ExitCode.COULD_NOT_RUN),
            document,
        )
        sys.exit(int(ExitCode.COULD_NOT_RUN))
    sys.exit(code or 0)
