"""The commands that check a store and describe what a check judges: ``check``, ``audit``,
``history``, ``explain``, ``docs`` and ``rules``.

Each reads its inputs before GX is imported and calls one function of ``run/`` or
``report/``; ``history``, ``rules`` and ``explain`` without ``--store`` never import GX.
"""

from __future__ import annotations

import itertools
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from kandev_dq import api
from kandev_dq.api import loading_gx
from kandev_dq.cli import output
from kandev_dq.cli.options import (
    AllowCodeOption,
    CheckFormat,
    FailOn,
    Format,
    ProjectOption,
    QuietOption,
    RecordsOption,
    StoreNameOption,
    StoreOption,
    StrictOption,
    checked_inputs,
    complete_checkpoints,
    complete_rules,
    complete_suites,
    vetted_project,
)
from kandev_dq.cli.output import errors_as, print_report, progress, say, used
from kandev_dq.errors import KandevDqError
from kandev_dq.text import one_line

if TYPE_CHECKING:
    from kandev_dq.store.reference import StoreRef


def check(
    ctx: typer.Context,
    store: StoreOption = None,
    checkpoint: Annotated[
        str,
        typer.Option(
            help="nightly, pre_release, post_migration or live.",
            autocompletion=complete_checkpoints,
        ),
    ] = "nightly",
    output_format: Annotated[CheckFormat, typer.Option("--format")] = CheckFormat.text,
    fail_on: Annotated[FailOn, typer.Option("--fail-on")] = FailOn.error,
    project: ProjectOption = None,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="No progress lines on stderr, and no live window lines in the text report.",
            show_default=False,
        ),
    ] = False,
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
    strict: StrictOption = False,
    store_name: StoreNameOption = None,
    suite: Annotated[
        list[str] | None,
        typer.Option(
            "--suite",
            help="Run only this suite of the checkpoint; repeat for several. A partial run: "
            "named and recorded as one; each rule compared with the last run that judged it.",
            autocompletion=complete_suites,
            show_default=False,
        ),
    ] = None,
    rule: Annotated[
        list[str] | None,
        typer.Option(
            "--rule",
            help="Run only this rule (an expectation) of the checkpoint's suites; repeat for "
            "several. A live suite runs whole.",
            autocompletion=complete_rules,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a checkpoint against a store (read-only) and report failed and warned rules."""
    document = errors_as(ctx, output_format)
    target: str | StoreRef | None = store
    if output_format is CheckFormat.openmetrics:
        from kandev_dq.project.settings import chosen_store

        # Read once here: a run that cannot happen still reports this store as down.
        target = chosen_store(store, store_name)
        document.store = target.shown
    report = api.check(  # vets its inputs before GX loads, as checked_inputs does
        target,
        checkpoint,
        project,
        records=records,
        allow_project_code=allow_project_code,
        progress=progress(quiet),
        keep_days=keep_days,
        strict=strict,
        store_name=store_name,
        suites=suite,
        rules=rule,
    )
    from kandev_dq.run.check import verdict_line
    from kandev_dq.run.inputs import project_folder

    if not quiet:
        used(project_folder(project))
    if output_format is CheckFormat.json:
        print(json.dumps(report.to_json(), default=str))
    elif output_format is CheckFormat.junit:
        from kandev_dq.report.junit import junit_xml

        sys.stdout.write(junit_xml(report, fail_on.value))
    elif output_format is CheckFormat.openmetrics:
        from kandev_dq.report.metrics import run_exposition

        sys.stdout.write(run_exposition(report))
    else:
        print_report(report, verdict_line(report), quiet=quiet)
    raise typer.Exit(int(report.exit_code(fail_on.value)))


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
    strict: StrictOption = False,
    store_name: StoreNameOption = None,
) -> None:
    """Run pre_release and keep it: data docs copy, summary.json, SUMMARY.md in one folder."""
    vetted = checked_inputs(
        project,
        store,
        "pre_release",
        allow_project_code,
        records,
        strict=strict,
        store_name=store_name,
    )
    folder = vetted.folder
    with loading_gx():
        from kandev_dq.report.audit import run_audit
        from kandev_dq.run.check import deviation_lines, verdict_line

    done = run_audit(
        folder,
        vetted.store,
        out_dir,
        progress(quiet),
        allow_project_code=allow_project_code,
        records=vetted.records,
    )
    if not quiet:
        used(folder)
    say(verdict_line(done.report))
    for line in deviation_lines(done.report):
        say(one_line(line))
    say(f"audit: {done.folder / 'SUMMARY.md'}")
    raise typer.Exit(int(done.report.exit_code(fail_on.value)))


def history(
    ctx: typer.Context,
    store: StoreOption = None,
    project: ProjectOption = None,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many runs.")] = 20,
    output_format: Annotated[Format, typer.Option("--format")] = Format.text,
    allow_project_code: AllowCodeOption = False,
    records: RecordsOption = None,
    store_name: StoreNameOption = None,
    checkpoint: Annotated[
        list[str] | None,
        typer.Option(
            help="Only the runs of this checkpoint; repeat for several.",
            autocompletion=complete_checkpoints,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Past runs of a store, newest first, from the records database: when each rule started
    failing, when the write-once baseline was taken, and every accepted key reset."""
    errors_as(ctx, output_format)
    folder = vetted_project(project, allow_project_code)
    from kandev_dq.project.settings import chosen_store
    from kandev_dq.report.history import history as past_runs  # reads no GX
    from kandev_dq.report.history import render
    from kandev_dq.run.inputs import checkpoint_name

    checkpoints = [checkpoint_name(folder, name) for name in checkpoint or ()]
    target = chosen_store(store, store_name)
    past = past_runs(
        folder,
        target,
        limit,
        allow_project_code=allow_project_code,
        records=records,
        checkpoints=checkpoints,
    )
    used(folder)
    if output_format is Format.json:
        print(json.dumps(past.to_json(), default=str))
        return
    for line in render(past):
        say(line)


class ExplainFormat(StrEnum):
    text = "text"
    csv = "csv"


def explain(
    expectation: Annotated[
        str,
        typer.Argument(
            metavar="EXPECTATION",
            help="An expectation, e.g. expect_no_orphan_"
            "subagent_rows (`kandev-dq rules` lists them).",
            autocompletion=complete_rules,
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
    output_format: Annotated[
        ExplainFormat,
        typer.Option("--format", help="csv: run the query and write every row to stdout."),
    ] = ExplainFormat.text,
    project: ProjectOption = None,
    records: RecordsOption = None,
    allow_project_code: AllowCodeOption = False,
    store_name: StoreNameOption = None,
) -> None:
    """A rule's AC ids, its sentence and the SELECT listing every item it counts (no store
    given or found: the rule alone; the query needs a store's dialect and schema). The rule's
    severity and arguments are the project's, as `check` runs it."""
    from kandev_dq.project.settings import store_option
    from kandev_dq.run import inputs

    inputs.expectation_name(expectation)  # vetted without GX, as the store is
    folder = vetted_project(project, allow_project_code)
    if not run and output_format is ExplainFormat.text:
        try:
            store_option(store)
        except KandevDqError:
            _describe_rule(expectation, folder)
            return
    ref = inputs.kandev_store(store, store_name)
    from kandev_dq.run.explain import SHOWN_ROWS  # judged by the verdicts: GX never loads
    from kandev_dq.run.explain import explain as explained_rule

    every_row = output_format is ExplainFormat.csv
    found = explained_rule(
        ref,
        expectation,
        run=run or every_row,
        every_row=every_row,
        project=folder,
        records=records,
    )
    if every_row:
        _write_csv(found)
        return
    say(f"{found.expectation} [{', '.join(found.rules)}] {found.severity}, suite {found.suite}")
    if not found.in_project:
        say(NOT_IN_PROJECT)
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
    if output.out.is_terminal:
        table = Table(*found.columns, box=box.SIMPLE)
        for column in table.columns:
            column.overflow = "fold"
        for row in shown:
            table.add_row(*(Text(one_line(_cell(row.get(c)))) for c in found.columns))
        output.out.print(table)
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


#: Said of a rule the project's suites do not run: it is described as kandev-dq runs it.
NOT_IN_PROJECT = "the project's suites do not run this rule: shown as kandev-dq's suites run it"


def _describe_rule(expectation: str, project: Path) -> None:
    """A rule without a store: its AC ids, suites and sentence (the rule index), its severity in
    ``project`` (as `check` runs it), what each AC it encodes says (the catalogue) and what it
    reads; GX is not loaded."""
    from kandev_dq.contract.catalogue import BY_ID
    from kandev_dq.contract.rule_index import RULE_INDEX, RULE_SENTENCES, SUITE_TABLES
    from kandev_dq.project.deviations import project_entry

    indexed = [r for r in RULE_INDEX if r.expectation == expectation]  # vetted: never empty
    first = indexed[0]
    suites = ", ".join(r.suite for r in indexed)
    held = project_entry(project, expectation)
    severity = first.severity if held is None else held.severity
    say(f"{expectation} [{', '.join(first.rules)}] {severity}, suite {suites}")
    if held is None:
        say(NOT_IN_PROJECT)
    elif held.thresholds is not None:
        say(f"its count is judged by the project's thresholds: {held.thresholds.text()}")
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


def docs(
    project: ProjectOption = None,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the index page in a web browser.")
    ] = False,
    allow_project_code: AllowCodeOption = False,
    records: RecordsOption = None,
) -> None:
    """(Re)build the data docs from the records database and print the index path."""
    folder = vetted_project(project, allow_project_code)
    from kandev_dq.run.inputs import records_database

    chosen = records_database(folder, records, allow_project_code)  # before GX loads
    with loading_gx():
        from kandev_dq.report.site import build_docs

    built = build_docs(folder, allow_project_code=allow_project_code, records=chosen)
    used(folder)
    if built.index is None:
        raise KandevDqError("the project has no local data docs site: nothing to open")
    if built.overview is None:
        output.err.print(
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
    if not output.out.is_terminal:  # whole lines for pipes and files: nothing cut, tab-separated
        for row in rows:
            cells = (row.ac, row.expectation, row.suite, row.severity, row.summary)
            print("\t".join(one_line(cell) for cell in cells))  # rich would expand the tabs
        return
    output.out.print(_rules_table(rows), crop=False)


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
