"""The demo: the whole life of a store in one command, in a folder of its own.

A generated Kandev store that predates the feature (state ``not_activated``), the contract's
migration, a healthy live writer, then the ``pre_release`` checkpoint and its data docs.

Every run starts over: a new store and a new project, so no earlier run's record (the AC-24
key ledger, validation results) judges this run's freshly written keys. A run that refuses
(a folder that is not a demo's, a PostgreSQL database that is not empty) leaves nothing behind.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kandev_dq.errors import KandevDqError
from kandev_dq.text import printable

if TYPE_CHECKING:  # the SQL toolkit and GX load for the run: a refused folder waits for neither
    from kandev_dq.lab import sample
    from kandev_dq.migration import runner as migrate
    from kandev_dq.run.check import CheckReport

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
    folder = demo_target(folder, postgres_url)
    from kandev_dq.contract.states import state_of
    from kandev_dq.lab import sample
    from kandev_dq.migration import runner as migrate
    from kandev_dq.project.files import build_project
    from kandev_dq.sql.keys import read_keys
    from kandev_dq.store.access import open_store

    target = postgres_url or str(folder / "kandev.db")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / MARKER).touch()
    project = build_project(folder / "project")
    store = open_store(target, read_only=False, must_exist=False, require_kandev=False)
    try:
        say(f"1/5 generating a Kandev store that predates the feature: {store.shown}")
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
        # Dated no later than now: the run that follows never sees rows from its future.
        sample.append_live_traffic(
            store.engine, count=LIVE_SUBAGENTS, seed=1, until=datetime.now(UTC)
        )
        display = store.shown
    finally:
        store.dispose()
    say("4/5 running the pre_release checkpoint (read-only) and building the data docs")
    from kandev_dq.run.check import run_check

    report = run_check(project, target, "pre_release")
    say("5/5 done")
    return DemoResult(display, summary, before, migration, report, project)


def demo_target(folder: Path, postgres_url: str | None = None) -> Path:
    """The demo's folder, resolved, once it may be replaced (it is missing, empty or an
    earlier demo's) and the PostgreSQL database, if one is named, is empty: refused before
    anything is touched, and before GX loads."""
    folder = Path(folder).resolve()
    if folder.exists() and not _is_demo_folder(folder):
        raise KandevDqError(f"{folder} exists and is not a kandev-dq demo folder: choose another")
    if postgres_url:
        _require_empty(postgres_url)
    return folder


def _is_demo_folder(folder: Path) -> bool:
    return folder.is_dir() and (not any(folder.iterdir()) or (folder / MARKER).is_file())


def _require_empty(url: str) -> None:
    """The demo writes a whole store: only into a database (its schema) that holds no table,
    so nothing of anyone else's sits beside the demo's tables."""
    import sqlalchemy as sa

    from kandev_dq.store.access import open_store

    store = open_store(url, read_only=True, require_kandev=False)
    try:
        if store.has_table("task_session_messages"):
            raise KandevDqError(f"{store.shown} already holds a Kandev store: use an empty one")
        with store.engine.connect() as conn:
            tables = sorted(sa.inspect(conn).get_table_names())
        if tables:
            shown = ", ".join(printable(name) for name in tables[:3])
            more = f" and {len(tables) - 3} more" if len(tables) > 3 else ""
            raise KandevDqError(
                f"{store.shown} is not empty (table {shown}{more}): the demo writes only into "
                "an empty database"
            )
    finally:
        store.dispose()
