"""The ``kandev-dq`` command line.

Exit codes (:class:`kandev_dq.errors.ExitCode`): 0 every rule passed / every migration step
succeeded or was already done; 1 an error-severity rule failed (``--fail-on warning``: a
warning too) / a migration step failed; 2 the command could not run (bad input, unreachable
store, not a Kandev store, broken project). Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kandev_dq import api
from kandev_dq.api import loading_gx
from kandev_dq.errors import ExitCode, KandevDqError
from kandev_dq.text import one_line, printable

if TYPE_CHECKING:
    from kandev_dq.run.inputs import RunInputs

#: When the command line started (its own imports done): a duration it reports is the
#: command's, not one step of it.
_STARTED = time.perf_counter()

app = typer.Typer(
    add_completion=True,  # --install-completion and --show-completion (bash, zsh, fish, PowerShell)
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Click's own help layout: flags show no ``<bool>`` after them, and help needs no rich.
    rich_markup_mode=None,
    help="Validate a Kandev store against the subagent-context contract (Great Expectations).",
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

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


#: The document the running command writes on stdout for a run that could not start:
#: "json" (the error object) or "junit" (one testcase in error); None: the stderr line only.
_error_document: dict[str, str | None] = {"as": None}


def _errors_as(output: str) -> None:
    _error_document["as"] = output if output in ("json", "junit") else None


def _format_asked(args: list[str]) -> str:
    """The ``--format`` value on the command line, read before it is parsed: a usage error
    (``--fail-on bogus``) stops the parse before any command sets its error document."""
    for i, arg in enumerate(args):
        if arg == "--format" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--format="):
            return arg.partition("=")[2]
    return ""


def _could_not_run(message: str, exit_code: int) -> None:
    """The one-line error on stderr, no password in it; with ``--format json`` or ``junit``,
    also that document on stdout (a pipeline parsing stdout gets a document, never 0 bytes)."""
    from kandev_dq.store.target import redact

    message = one_line(redact(message))
    err.print(f"kandev-dq: error: {message}", markup=False)
    _error_doc(message, exit_code)


def _error_doc(message: str, exit_code: int) -> None:
    if _error_document["as"] == "json":
        print(json.dumps({"error": message, "exit_code": exit_code}))
    elif _error_document["as"] == "junit":
        from kandev_dq.report.junit import could_not_run_xml

        sys.stdout.write(could_not_run_xml(message))


def say(text: object) -> None:
    """One line (or a multi-line block) on stdout, control characters shown escaped."""
    out.print(printable(text), markup=False)


def _progress(quiet: bool):
    """Per-suite progress on stderr (a bar on a terminal, plain lines elsewhere), or none."""
    from kandev_dq.run.progress import for_console

    return None if quiet else for_console(err)


class Format(StrEnum):
    text = "text"
    json = "json"


class CheckFormat(StrEnum):
    text = "text"
    json = "json"
    junit = "junit"  # JUnit XML: what Jenkins, GitLab and most CI systems read


class FailOn(StrEnum):
    error = "error"
    warning = "warning"


class Shape(StrEnum):
    none = "none"
    pre_amendment = "pre_amendment"
    amended = "amended"


def _project(project: Path | None) -> Path:
    from kandev_dq.run.inputs import project_folder

    return project_folder(project)


def _vetted_project(project: Path | None, allow_project_code: bool) -> Path:
    """The project folder, refused unless it holds only what kandev-dq itself writes or the
    user passed ``--allow-project-code`` (docs/reliability.md, 3a)."""
    from kandev_dq.run import inputs

    return inputs.project_as_data(inputs.project_folder(project), allow_project_code)


def _checked_inputs(
    project: Path | None,
    store: str | None,
    checkpoint: str,
    allow_project_code: bool,
    records: str | None,
) -> RunInputs:
    """The project folder, the store and the records database (each read once), vetted with
    the checkpoint name without GX (:func:`kandev_dq.run.inputs.run_inputs`)."""
    from kandev_dq.run import inputs

    return inputs.run_inputs(project, store, checkpoint, allow_project_code, records)


def _used(project: Path) -> None:
    """Name on stderr the project a run used: its config decided what the run loaded."""
    err.print(f"kandev-dq: project {printable(project.resolve())}", markup=False)


@app.command()
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
    from kandev_dq.lab.sample import create_store, generate
    from kandev_dq.store.access import open_store
    from kandev_dq.store.reference import store_ref

    ref = store_ref(out_target)
    if ref.is_sqlite and Path(ref.url.database or "").exists():
        raise KandevDqError(f"{ref.url.database} already exists: choose a new --out path")
    store = open_store(ref, read_only=False, must_exist=False, require_kandev=False)
    try:
        if store.has_table("task_session_messages"):
            raise KandevDqError(f"{store.shown} already holds a Kandev store: not touching it")
        shape = None if subagents is Shape.none else subagents.value
        create_store(store.engine, subagents=shape)
        summary = generate(store.engine, scale=scale, seed=seed)
    finally:
        store.dispose()
    say(f"sample store: {store.shown}")
    say(
        f"  {summary.sessions} sessions, {summary.turns} turns, {summary.messages} messages "
        f"({summary.subagent_messages} subagent, {summary.ordinary_messages} ordinary)"
    )
    statuses = ", ".join(f"{k or '(none)'}={v}" for k, v in summary.by_agent_status.items())
    say(f"  subagent statuses: {statuses}")
    say(f"  created_at from {summary.first_created_at} to {summary.last_created_at}")


@app.command()
def migrate(
    store: StoreOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the state and the steps; write nothing.")
    ] = False,
    output: Annotated[Format, typer.Option("--format")] = Format.text,
) -> None:
    """Bring a store to the contract's end state: schema change, then the one-time backfill."""
    _errors_as(output)

    def announce(shown: str, dialect: str) -> None:
        if output is Format.text:  # first, so a reader knows which store is about to change
            say(f"{'dry run on' if dry_run else 'migrating'} {shown} ({dialect})")

    report = api.migrate(store, dry_run=dry_run, announce=announce)
    if output is Format.json:
        print(json.dumps(report.to_dict(), default=str))
    else:
        say(report.render())
    raise typer.Exit(int(report.exit_code))


@app.command()
def check(
    store: StoreOption = None,
    checkpoint: Annotated[
        str, typer.Option(help="nightly, pre_release, post_migration or live.")
    ] = "nightly",
    output: Annotated[CheckFormat, typer.Option("--format")] = CheckFormat.text,
    fail_on: Annotated[FailOn, typer.Option("--fail-on")] = FailOn.error,
    project: ProjectOption = None,
    quiet: QuietOption = False,
    allow_project_code: AllowCodeOption = False,
    records: RecordsOption = None,
    keep_days: Annotated[
        int | None,
        typer.Option(
            "--keep-days",
            min=0,
            help="When the run ends, prune the records database of results and runs older "
            "than N days (default: $KANDEV_DQ_RECORDS_KEEP_DAYS, else no pruning); the key "
            "ledger and each checkpoint's newest run on each store are always kept.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a checkpoint against a store (read-only) and report failed and warned rules."""
    _errors_as(output)
    report = api.check(  # vets its inputs before GX loads, as _checked_inputs does
        store,
        checkpoint,
        project,
        records=records,
        allow_project_code=allow_project_code,
        progress=_progress(quiet),
        keep_days=keep_days,
    )
    from kandev_dq.run.check import verdict_line
    from kandev_dq.run.inputs import project_folder

    if not quiet:
        _used(project_folder(project))
    if output is CheckFormat.json:
        print(json.dumps(report.to_json(), default=str))
    elif output is CheckFormat.junit:
        from kandev_dq.report.junit import junit_xml

        sys.stdout.write(junit_xml(report, fail_on.value))
    else:
        _print_report(report, verdict_line(report))
    raise typer.Exit(int(report.exit_code(fail_on.value)))


#: Columns a finding needs beside the rule name for the table layout of `check`'s report.
FINDING_MIN_WIDTH = 60


def _print_report(report, headline: str) -> None:
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
    if report.state != "fully_activated" and report.state_explanation:
        say(one_line(report.state_explanation))
    from kandev_dq.run.check import window_lines

    for line in window_lines(report):  # what a live run read, and through which index
        say(one_line(line))
    if report.docs_index:
        say(f"data docs: {report.docs_index}")
    if report.pruned is not None:
        say(report.pruned.said(report.records))


def _standing(result) -> str:
    """A failed rule against the last run of its checkpoint on its store: new, or since when."""
    if result.new:
        return "(new) "
    return f"(failing since {result.failing_since}) " if result.failing_since else ""


@app.command()
def audit(
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder to write (new, empty, or an earlier audit).")
    ],
    store: StoreOption = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on")] = FailOn.error,
    project: ProjectOption = None,
    quiet: QuietOption = False,
    allow_project_code: AllowCodeOption = False,
    records: RecordsOption = None,
) -> None:
    """Run pre_release and keep it: data docs copy, summary.json, SUMMARY.md in one folder."""
    vetted = _checked_inputs(project, store, "pre_release", allow_project_code, records)
    folder = vetted.folder
    with loading_gx():
        from kandev_dq.report.audit import run_audit
        from kandev_dq.run.check import verdict_line

    done = run_audit(
        folder,
        vetted.store,
        out_dir,
        _progress(quiet),
        allow_project_code=allow_project_code,
        records=vetted.records,
    )
    if not quiet:
        _used(folder)
    say(verdict_line(done.report))
    say(f"audit: {done.folder / 'SUMMARY.md'}")
    raise typer.Exit(int(done.report.exit_code(fail_on.value)))


@app.command()
def history(
    store: StoreOption = None,
    project: ProjectOption = None,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many runs.")] = 20,
    output: Annotated[Format, typer.Option("--format")] = Format.text,
    allow_project_code: AllowCodeOption = False,
    records: RecordsOption = None,
) -> None:
    """Past runs of a store, newest first, from the records database: when each rule started
    failing, when the write-once baseline was taken, and every accepted key reset."""
    _errors_as(output)
    folder = _vetted_project(project, allow_project_code)
    from kandev_dq.report.history import history as past_runs  # reads no GX
    from kandev_dq.report.history import render

    past = past_runs(folder, store, limit, allow_project_code=allow_project_code, records=records)
    _used(folder)
    if output is Format.json:
        print(json.dumps(past.to_json(), default=str))
        return
    for line in render(past):
        say(line)


class ExplainFormat(StrEnum):
    text = "text"
    csv = "csv"


@app.command()
def explain(
    expectation: Annotated[
        str,
        typer.Argument(
            metavar="EXPECTATION",
            help="An expectation, e.g. expect_no_orphan_"
            "subagent_rows (`kandev-dq rules` lists them).",
        ),
    ],
    store: StoreOption = None,
    run: Annotated[
        bool,
        typer.Option(
            "--run",
            help="Run the query (read-only, one snapshot) and show its rows.",
            show_default=False,
        ),
    ] = False,
    output: Annotated[
        ExplainFormat,
        typer.Option("--format", help="csv: run the query and write every row to stdout."),
    ] = ExplainFormat.text,
    project: ProjectOption = None,
    records: RecordsOption = None,
) -> None:
    """A rule's AC ids, its sentence and the SELECT listing every item it counts (no store
    given or found: the rule alone; the query needs a store's dialect and schema)."""
    from kandev_dq.run import inputs
    from kandev_dq.run.settings import store_option

    inputs.expectation_name(expectation)  # vetted without GX, as the store is
    if not run and output is ExplainFormat.text:
        try:
            store_option(store)
        except KandevDqError:
            _describe_rule(expectation)
            return
    ref = inputs.kandev_store(store)
    with loading_gx():
        from kandev_dq.run.explain import SHOWN_ROWS
        from kandev_dq.run.explain import explain as explained_rule

    every_row = output is ExplainFormat.csv
    found = explained_rule(
        ref,
        expectation,
        run=run or every_row,
        every_row=every_row,
        project=inputs.project_folder(project),
        records=records,
    )
    if every_row:
        _write_csv(found)
        return
    say(f"{found.expectation} [{', '.join(found.rules)}] {found.severity}, suite {found.suite}")
    say(found.sentence)
    say(one_line(f"on {found.store} ({found.dialect}): {_verdict_word(found)}: {found.message}"))
    if found.query is None:
        say(one_line(f"{found.no_query}: no query"))
        return
    say("query:")
    say(found.query)
    if found.total is None:
        return
    shown = found.rows[:SHOWN_ROWS]
    if out.is_terminal:
        table = Table(*found.columns, box=box.SIMPLE)
        for column in table.columns:
            column.overflow = "fold"
        for row in shown:
            table.add_row(*(Text(one_line(_cell(row.get(c)))) for c in found.columns))
        out.print(table)
    else:  # whole lines for pipes and files, tab-separated
        print("\t".join(found.columns))
        for row in shown:
            print("\t".join(one_line(_cell(row.get(c))) for c in found.columns))
    more = f", the first {len(shown)} shown" if found.total > len(shown) else ""
    say(f"{found.total} row(s){more}")


def _verdict_word(found) -> str:
    if not found.judged:
        return "not judged"
    return "passed" if found.success else "FAILED"


def _describe_rule(expectation: str) -> None:
    """A rule without a store: its AC ids, severity, suites and sentence (the rule index), what
    each AC it encodes says (the catalogue) and what it reads; GX is not loaded."""
    from kandev_dq.contract.catalogue import BY_ID
    from kandev_dq.contract.rule_index import RULE_INDEX, RULE_SENTENCES, SUITE_TABLES

    indexed = [r for r in RULE_INDEX if r.expectation == expectation]  # vetted: never empty
    first = indexed[0]
    suites = ", ".join(r.suite for r in indexed)
    say(f"{expectation} [{', '.join(first.rules)}] {first.severity}, suite {suites}")
    say(RULE_SENTENCES[expectation])
    for ac in first.rules:
        say(f"{ac}: {BY_ID[ac].summary}")
    tables = ", ".join(SUITE_TABLES.get(first.suite, ()))
    say(
        one_line(
            f"reads {tables}; its query is compiled for a store's dialect and schema: pass "
            "--store to see it, and --run to list its rows"
        )
    )


def _cell(value: object) -> str:
    return "NULL" if value is None else str(value)


def _write_csv(found) -> None:
    import csv

    from kandev_dq.text import csv_cell

    if found.query is None:
        raise KandevDqError(f"{found.expectation}: {found.no_query}: nothing to write as CSV")
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(found.columns)
    for row in found.rows:
        writer.writerow([csv_cell(row.get(c)) for c in found.columns])


@app.command()
def docs(
    project: ProjectOption = None,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the index page in a web browser.")
    ] = False,
    allow_project_code: AllowCodeOption = False,
    records: RecordsOption = None,
) -> None:
    """(Re)build the data docs from the records database and print the index path."""
    folder = _vetted_project(project, allow_project_code)
    from kandev_dq.run.inputs import records_database

    chosen = records_database(folder, records, allow_project_code)  # before GX loads
    with loading_gx():
        from kandev_dq.report.site import build_docs

    built = build_docs(folder, allow_project_code=allow_project_code, records=chosen)
    _used(folder)
    if built.index is None:
        raise KandevDqError("the project has no local data docs site: nothing to open")
    if built.overview is None:
        err.print(
            "kandev-dq: note: this project's site is GX's stock one (CDN assets, no store "
            "overview); regenerate the project with `kandev-dq init --force DIR` to read it "
            "offline",
            markup=False,
        )
    say(built.index)
    if open_browser:
        import webbrowser

        if not webbrowser.open(built.index.as_uri()):
            raise KandevDqError("no web browser found to open the data docs: open the path above")


@app.command()
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
    _print_report(report, verdict_line(report))
    raise typer.Exit(int(report.exit_code()))


@app.command()
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
    from kandev_dq.run.project import build_project

    if folder.exists() and not folder.is_dir():
        raise KandevDqError(f"{folder} is a file: init takes a folder")
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise KandevDqError(
            f"{folder} is not empty: pass --force to write kandev-dq's project files into it "
            "(it changes nothing else there)"
        )
    build_project(folder)
    say(f"kandev-dq project written to {folder}")


@app.command()
def rules(
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            help="Read this GX project's suites. Default: kandev-dq's own suites (no project "
            "needed).",
            show_default=False,
        ),
    ] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print a Markdown table.", show_default=False)
    ] = False,
    readme: Annotated[
        Path | None, typer.Option("--readme", help="Rewrite this README's coverage table.")
    ] = None,
) -> None:
    """The coverage table: AC -> expectation -> suite -> severity."""
    from kandev_dq.report.coverage import coverage_rows, markdown_table, with_table

    rows = coverage_rows(project)
    if readme is not None:
        readme.write_text(with_table(readme.read_text(encoding="utf-8"), markdown_table(rows)))
        return
    if markdown:
        print(markdown_table(rows))
        return
    if not out.is_terminal:  # whole lines for pipes and files: nothing cut, tab-separated
        for row in rows:
            cells = (row.ac, row.expectation, row.suite, row.severity, row.summary)
            print("\t".join(one_line(cell) for cell in cells))  # rich would expand the tabs
        return
    out.print(_rules_table(rows), crop=False)


def _rules_table(rows) -> Table:
    """One section per AC (its id and summary, wrapped), then the expectations citing it.

    The expectation name is what a reader searches the code and the docs for: its column is as
    wide as the longest name and never cut; the summary, suite and severity wrap around it.
    """
    table = Table(
        "expectation", "suite", "severity", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False
    )
    name, suite, severity = table.columns
    name.no_wrap = True
    name.min_width = name.max_width = max(len(row.expectation) for row in rows)
    suite.overflow = severity.overflow = "fold"
    for ac, group in itertools.groupby(rows, key=lambda row: row.ac):
        cited = list(group)
        heading = Text(f"{ac}  {cited[0].summary}", style="bold", no_wrap=False)
        table.add_row(heading, "", "")
        for row in cited:
            table.add_row(
                Text(row.expectation, style="" if row.suite else "dim"), row.suite, row.severity
            )
    return table


scenarios_app = typer.Typer(
    no_args_is_help=True,
    help="Named fault and healthy stores that prove the suite's verdicts "
    "(docs/detection-matrix.md).",
)
app.add_typer(scenarios_app, name="scenarios")
ScenarioName = Annotated[str, typer.Argument(help="A scenario (see `kandev-dq scenarios list`).")]
ScenarioStore = Annotated[
    str, typer.Option("--store", help="SQLite file path or PostgreSQL URL (an empty one).")
]


@scenarios_app.command("list")
def scenarios_list() -> None:
    """Every scenario: its name, what the suite must say about it, what it is."""
    from kandev_dq.lab.scenarios import SCENARIOS

    if out.is_terminal:
        table = Table("scenario", "expected", "what it is")
        for s in SCENARIOS.values():
            table.add_row(*(Text(one_line(cell)) for cell in (s.name, s.expected, s.summary)))
        out.print(table)
        return
    for s in SCENARIOS.values():
        say(f"{s.name}\t{s.expected}\t{s.summary}")


@scenarios_app.command("build")
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


@scenarios_app.command("between-runs")
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


@scenarios_app.command("matrix")
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
        postgres, project=project, say=lambda line: err.print(line, markup=False)
    )
    if out_file is None:
        sys.stdout.write(text)
    else:
        out_file.write_text(text, encoding="utf-8")
    for problem in found:
        err.print(f"kandev-dq: problem: {problem}", markup=False)
    raise typer.Exit(int(ExitCode.FAILED if found else ExitCode.OK))


ledger_app = typer.Typer(
    no_args_is_help=True,
    help="The key ledger (AC-24 write-once): each store's first key values, and accepted resets.",
)
app.add_typer(ledger_app, name="ledger")
records_app = typer.Typer(no_args_is_help=True, help="The records database: retention.")
app.add_typer(records_app, name="records")


@ledger_app.command("show")
def ledger_show(
    store: StoreOption = None,
    project: ProjectOption = None,
    records: RecordsOption = None,
    output: Annotated[Format, typer.Option("--format")] = Format.text,
) -> None:
    """A store's write-once baseline, first key values and accepted resets."""
    _errors_as(output)
    from dataclasses import asdict

    from kandev_dq.run.ledger_commands import ledger_view, render_ledger

    view = ledger_view(_project(project), store, records)
    if output is Format.json:
        print(json.dumps(asdict(view), default=str))
        return
    for line in render_ledger(view):
        say(line)


@ledger_app.command("accept")
def ledger_accept(
    key: Annotated[str, typer.Option("--key", help="The activation key whose value to accept.")],
    reason: Annotated[
        str, typer.Option("--reason", help="Why the change is legitimate (e.g. a restored backup).")
    ],
    store: StoreOption = None,
    project: ProjectOption = None,
    records: RecordsOption = None,
) -> None:
    """Accept a key's current value after a legitimate reset (recorded with time, user and
    reason; the next check compares with it). Reads the store, never writes it."""
    from kandev_dq.run.ledger_commands import accepted_for

    accept, ref = accepted_for(_project(project), store, key, reason, records)
    same = " (the value it already expected: nothing changes)" if accept.unchanged else ""
    say(
        one_line(
            f"accepted {accept.key_name} = {accept.accepted_value!r} (was "
            f"{accept.replaced_value!r}){same} for {ref.shown}, by "
            f"{accept.accepted_by} at {accept.accepted_at}: {accept.reason}"
        )
    )


@records_app.command("prune")
def records_prune(
    keep_days: Annotated[
        int, typer.Option("--keep-days", min=0, help="Keep results of the last N days.")
    ],
    project: ProjectOption = None,
    records: RecordsOption = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Count what would be dropped; drop nothing.", show_default=False
        ),
    ] = False,
) -> None:
    """Drop validation results and run records older than N days; never a key ledger entry,
    a baseline or an accepted reset, nor the newest finished run of each checkpoint on each
    store (the run the next one's alerts on change compare with).

    `check --keep-days N` or $KANDEV_DQ_RECORDS_KEEP_DAYS prunes the same way at the end of
    every check run."""
    from kandev_dq.run.records import Records, records_ref

    with Records(records_ref(_project(project), records)) as opened:
        say(opened.prune(keep_days, dry_run=dry_run).said(opened.shown))


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
    """Console entry point: one-line errors and documented exit codes, never a traceback."""
    _errors_as(_format_asked(sys.argv[1:]))
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:  # a usage error: click's own words, then the document
        exc.show()  # type: ignore[attr-defined] - every TyperException raised here is click's
        _error_doc(one_line(exc.format_message()), exc.exit_code)
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("Aborted!", markup=False)
        sys.exit(1)
    except KandevDqError as exc:
        _could_not_run(str(exc), int(exc.exit_code))
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        err.print("kandev-dq: interrupted", markup=False)
        sys.exit(int(ExitCode.COULD_NOT_RUN))
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        from kandev_dq.run.settings import DEBUG_VARIABLE, debugging

        if debugging():
            raise
        first = (str(exc).strip().splitlines() or [""])[0]
        _could_not_run(
            f"{type(exc).__name__}: {first} (set {DEBUG_VARIABLE}=1 for details)",
            int(ExitCode.COULD_NOT_RUN),
        )
        sys.exit(int(ExitCode.COULD_NOT_RUN))
    sys.exit(code or 0)
