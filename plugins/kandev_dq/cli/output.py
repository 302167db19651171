"""What the command line prints: stdout and stderr, the error document, progress, a check's
report.

Every value from a store goes through :func:`kandev_dq.text.printable` or
:func:`kandev_dq.text.one_line` before a console prints it, never as rich markup. Commands
print through this module's consoles (``output.out``, ``output.err``), read at call time, so
a test may swap one.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kandev_dq.text import one_line, printable

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

#: The ``--format`` values whose run writes a document on stdout even when it cannot start.
DOCUMENT_FORMATS = ("json", "junit", "openmetrics")


def say(text: object) -> None:
    """One line (or a multi-line block) on stdout, control characters shown escaped."""
    out.print(printable(text), markup=False)


def used(project: Path) -> None:
    """Name on stderr the project a run used: its config decided what the run loaded."""
    err.print(f"kandev-dq: project {printable(project.resolve())}", markup=False)


def progress(quiet: bool):
    """Per-suite progress on stderr (a bar on a terminal, plain lines elsewhere), or none."""
    from kandev_dq.run.progress import for_console

    return None if quiet else for_console(err)


# --- a run that could not start -------------------------------------------------------------


@dataclass
class ErrorDocument:
    """The document one invocation writes on stdout for a run that could not start: "json"
    (the error object), "junit" (one testcase in error) or "openmetrics" (``store`` down,
    once the command has named it); None: the stderr line only.

    ``main`` makes one per invocation from the ``--format`` on the command line (a usage
    error stops the parse before any command reads its options) and hands it to the commands
    as click's context object; a command with a ``--format`` sets it from the parsed value
    (:func:`errors_as`)."""

    kind: str | None = None
    #: The store's shown name, once the command has read it (an openmetrics document says it
    #: could not be read).
    store: str | None = None

    @classmethod
    def asked_in(cls, args: list[str]) -> ErrorDocument:
        """The document the ``--format`` value on the command line asks for, read before the
        command line is parsed."""
        return cls(_document_kind(_format_asked(args)))

    def write(self, message: str, exit_code: int) -> None:
        if self.kind == "json":
            print(json.dumps({"error": message, "exit_code": exit_code}))
        elif self.kind == "junit":
            from kandev_dq.report.junit import could_not_run_xml

            sys.stdout.write(could_not_run_xml(message))
        elif self.kind == "openmetrics":
            from kandev_dq.report.metrics import could_not_run_exposition

            sys.stdout.write(could_not_run_exposition(self.store))


def errors_as(ctx: typer.Context, output: str) -> ErrorDocument:
    """The running command's ``--format``, parsed: the document its refusals write."""
    document = ctx.ensure_object(ErrorDocument)
    document.kind = _document_kind(output)
    return document


def _document_kind(output: str) -> str | None:
    return output if output in DOCUMENT_FORMATS else None


def _format_asked(args: list[str]) -> str:
    for i, arg in enumerate(args):
        if arg == "--format" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--format="):
            return arg.partition("=")[2]
    return ""


def could_not_run(message: str, exit_code: int, document: ErrorDocument) -> None:
    """The one-line error on stderr, no password in it; with ``--format json`` or ``junit``,
    also that document on stdout (a pipeline parsing stdout gets a document, never 0 bytes)."""
    from kandev_dq.store.target import redact

    message = one_line(redact(message))
    err.print(f"kandev-dq: error: {message}", markup=False)
    document.write(message, exit_code)


# --- a check's report -----------------------------------------------------------------------

#: Columns a finding needs beside the rule name for the table layout of `check`'s report.
FINDING_MIN_WIDTH = 60


def print_report(report, headline: str, *, quiet: bool = False) -> None:
    """A check's report as text: the failed and warned rules, the verdict and what the run
    read (``check``, ``demo``); ``quiet`` leaves out what a live run read (its window lines)."""
    flagged = [r for r in report.results if not r.success and r.severity != "info"]
    # A rule name is what a reader copies into `explain`: never split. A terminal too narrow
    # for it beside a readable finding gets one block per rule, the finding wrapped below.
    longest = max((len(r.expectation) for r in flagged), default=0)
    if flagged and out.is_terminal and out.width >= longest + FINDING_MIN_WIDTH:
        table = Table("severity", "rule", "AC", "finding")
        for column in table.columns:
            column.overflow = "fold"
        table.columns[1].no_wrap = True
        table.columns[1].min_width = longest
        for r in flagged:  # Text cells: a finding quoting a store value is never rich markup
            cells = (r.severity, r.expectation, ", ".join(r.rules), f"{_standing(r)}{r.message}")
            table.add_row(*(Text(one_line(cell)) for cell in cells))
        out.print(table)
    elif flagged and out.is_terminal:
        for r in flagged:
            out.print(Text(one_line(f"{r.severity:<8} {r.expectation} [{', '.join(r.rules)}]")))
            out.print(Padding(Text(one_line(r.message)), (0, 0, 0, 9)), soft_wrap=False)
    else:  # plain lines for logs, cron mail and pipes
        for r in flagged:
            said = f"{r.severity:<8} {r.expectation} [{', '.join(r.rules)}] {_standing(r)}"
            say(one_line(f"{said}{r.message}"))
    from kandev_dq.expectations.activation import BASELINE_DISCLOSURE

    say(headline)
    # Below the verdict, one whole line each (a terminal wraps it; copied, it stays one command).
    for r in flagged:
        say(one_line(f"explain: {report.explain_command(r.expectation)}"))
    from kandev_dq.run.check import deviation_lines

    for line in deviation_lines(report):  # the verdict is the project's: say where it differs
        say(one_line(line))
    for resolved in (report.changes or {}).get("resolved") or []:
        say(
            one_line(
                f"resolved since the last run ({report.changes['previous_run']}): "
                f"{resolved['expectation']} ({resolved['severity']}), failing since "
                f"{resolved['since']}"
            )
        )
    for r in report.results:  # the first sighting is said, never a silent vacuous pass (AC-24)
        if r.expectation == BASELINE_DISCLOSURE and not r.success:
            say(one_line(f"note: {r.message} (records: {report.records})"))
    baseline = report.write_once_baseline()  # its time and run come from the records: escaped
    if baseline is not None:
        say(one_line(baseline))
    if report.state != "fully_activated" and report.state_explanation:
        say(one_line(report.state_explanation))
    if not quiet:  # what a live run read, and through which index
        for line in short_window_lines(report):
            say(line)
    if report.docs_index:
        say(f"data docs: {report.docs_index}")
    if report.pruned is not None:
        say(report.pruned.said(report.records))


#: A live window's line in text output, at most: a run every few minutes fills a log with
#: them, so each says what its read covered; the full detail stays in JSON and the data docs.
WINDOW_LINE_CHARS = 120


def short_window_lines(report) -> list[str]:
    """What a live run read, one escaped line of at most :data:`WINDOW_LINE_CHARS` per window
    (and the standby's lag, where the store is one)."""
    from kandev_dq.run.check import window_lines

    replica = [line for line in window_lines(report) if line.startswith("replica: ")]
    summaries = [_window_summary(suite, window) for suite, window in report.windows.items()]
    return [_cut(one_line(line), WINDOW_LINE_CHARS) for line in replica + summaries]


def _window_summary(suite: str, window: dict) -> str:
    """A window in brief: from when (or in full, and why), how many reads an index served and
    how many scanned, the open findings' sessions it re-read, how many of the owner's indexes
    (docs/interpretations.md) the store lacks; the JSON's ``windows`` names each."""
    from kandev_dq.facts.window import MISSING

    if not window.get("start"):
        return f"{suite} read in full: {window.get('reason')}"
    reads = {name: how for name, how in (window.get("reads") or {}).items() if name != MISSING}
    scanned = sum("scan:" in str(how) for how in reads.values())
    line = f"{suite} read from {window['start']}: {len(reads) - scanned} read(s) by index, "
    line += f"{scanned} by scan"
    opened = window.get("open") or {}
    if opened.get("findings"):
        line += f", {opened.get('sessions')} open session(s) re-read"
    lacking = (window.get("reads") or {}).get(MISSING)
    if lacking:
        line += f"; {len(str(lacking).split(', '))} owner index(es) missing"
    return line


def _cut(line: str, most: int) -> str:
    return line if len(line) <= most else f"{line[: most - 1]}…"


def _standing(result) -> str:
    """A failed rule against the last run of its checkpoint on its store: new, or since when."""
    if result.new:
        return "(new) "
    return f"(failing since {result.failing_since}) " if result.failing_since else ""
