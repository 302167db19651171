"""The demo: the whole life of a store in one command, in a folder of its own.

A generated Kandev store that predates the feature (state ``not_activated``), the contract's
migration, a healthy live writer, then the ``pre_release`` checkpoint and its data docs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kandev_dq.contract.states import state_of
from kandev_dq.errors import KandevDqError
from kandev_dq.lab import sample
from kandev_dq.migration import runner as migrate
from kandev_dq.run.check import CheckReport, run_check
from kandev_dq.run.project import PROJECT_FILE, build_project
from kandev_dq.sql.keys import read_keys
from kandev_dq.store.access import open_store

MARKER = ".kandev-dq-demo"
LIVE_SUBAGENTS = 40


@dataclass
class DemoResult:
    store: str
    summary: sample.SampleSummary
    state_before: str
    migration: migrate.MigrationReport
    report: CheckReport
    project: Path


def run_demo(
    folder: Path,
    *,
    postgres_url: str | None = None,
    scale: int = 1,
    say: Callable[[str], None] = print,
) -> DemoResult:
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()) and not (folder / MARKER).exists():
        raise KandevDqError(f"{folder} exists and is not a kandev-dq demo folder: choose another")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).touch()
    project = folder / "project"
    if not (project / PROJECT_FILE).is_file():
        build_project(project)

    target = postgres_url or str(folder / "kandev.db")
    if not postgres_url:
        (folder / "kandev.db").unlink(missing_ok=True)
    store = open_store(target, read_only=False, must_exist=False, require_kandev=False)
    try:
        if store.has_table("task_session_messages"):
            raise KandevDqError(
                f"{store.display_url} already holds a Kandev store: use an empty one"
            )
        say(f"1/5 generating a Kandev store that predates the feature: {store.display_url}")
        sample.create_store(store.engine)
        summary = sample.generate(store.engine, scale=scale, seed=0)
        with store.snapshot() as conn:
            before = state_of(read_keys(conn))
        say(
            f"    {summary.messages} messages ({summary.subagent_messages} subagent) in "
            f"{summary.sessions} sessions; state {before}"
        )
        say("2/5 migrating: schema change, execution_since, one-time backfill with its keys")
        migration = migrate.run(store)
        if not migration.ok:
            raise KandevDqError("the demo migration failed:\n" + migration.render())
        say(f"    backfilled {migration.backfill_rows} subagent rows")
        say(f"3/5 a healthy writer records {LIVE_SUBAGENTS} live subagents after capture_since")
        sample.append_live_traffic(store.engine, count=LIVE_SUBAGENTS, seed=1)
        display = store.display_url
    finally:
        store.dispose()
    say("4/5 running the pre_release checkpoint (read-only) and building the data docs")
    report = run_check(project, target, "pre_release")
    say("5/5 done")
    return DemoResult(display, summary, before, migration, report, project)
