"""``kandev-dq ledger`` and ``kandev-dq records``: the records database's key ledger and its
retention (:mod:`kandev_dq.records.accept`, :mod:`kandev_dq.records`)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from kandev_dq.cli.options import (
    Format,
    ProjectOption,
    RecordsOption,
    StoreNameOption,
    StoreOption,
    project_of,
)
from kandev_dq.cli.output import errors_as, say
from kandev_dq.text import one_line

ledger_app = typer.Typer(
    no_args_is_help=True,
    help="The key ledger (AC-24 write-once): each store's first key values, and accepted resets.",
)
records_app = typer.Typer(no_args_is_help=True, help="The records database: retention.")


@ledger_app.command("show")
def ledger_show(
    ctx: typer.Context,
    store: StoreOption = None,
    project: ProjectOption = None,
    records: RecordsOption = None,
    output_format: Annotated[Format, typer.Option("--format")] = Format.text,
    store_name: StoreNameOption = None,
) -> None:
    """A store's write-once baseline, first key values and accepted resets."""
    errors_as(ctx, output_format)
    from dataclasses import asdict

    from kandev_dq.project.settings import chosen_store
    from kandev_dq.records.accept import ledger_view, render_ledger

    view = ledger_view(project_of(project), chosen_store(store, store_name), records)
    if output_format is Format.json:
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
    store_name: StoreNameOption = None,
) -> None:
    """Accept a key's current value after a legitimate reset (recorded with time, user and
    reason; the next check compares with it). Reads the store, never writes it."""
    from kandev_dq.records.accept import accepted_for

    accept, ref = accepted_for(
        project_of(project), store, key, reason, records, store_name=store_name
    )
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
    from kandev_dq.records import Records, records_ref

    with Records(records_ref(project_of(project), records)) as opened:
        say(opened.prune(keep_days, dry_run=dry_run).said(opened.shown))
