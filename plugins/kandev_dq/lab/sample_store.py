"""A sample store where the user names one (``kandev-dq sample``): a new SQLite file or a
database holding no Kandev store, its tables in one shape, then seed-determined history
(:mod:`kandev_dq.lab.sample`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kandev_dq.errors import KandevDqError
from kandev_dq.lab.sample import SampleSummary, create_store, generate


@dataclass
class WrittenSample:
    """Where the sample went (the store as every command names it) and what it holds."""

    store: str
    summary: SampleSummary

    def lines(self) -> list[str]:
        summary = self.summary
        statuses = ", ".join(f"{k or '(none)'}={v}" for k, v in summary.by_agent_status.items())
        return [
            f"sample store: {self.store}",
            f"  {summary.sessions} sessions, {summary.turns} turns, {summary.messages} messages "
            f"({summary.subagent_messages} subagent, {summary.ordinary_messages} ordinary)",
            f"  subagent statuses: {statuses}",
            f"  created_at from {summary.first_created_at} to {summary.last_created_at}",
        ]


def write_sample_store(
    target: str,
    *,
    scale: int = 1,
    seed: int = 0,
    subagents: Literal[None, "pre_amendment", "amended"] = None,
) -> WrittenSample:
    """Create the store ``target`` names and fill it; an existing SQLite file, or a database
    that already holds a Kandev store, is refused before anything is written."""
    from kandev_dq.store.access import open_store
    from kandev_dq.store.reference import store_ref

    ref = store_ref(target)
    if ref.is_sqlite and Path(ref.url.database or "").exists():
        raise KandevDqError(f"{ref.url.database} already exists: choose a new --out path")
    store = open_store(ref, read_only=False, must_exist=False, require_kandev=False)
    try:
        if store.has_table("task_session_messages"):
            raise KandevDqError(f"{store.shown} already holds a Kandev store: not touching it")
        create_store(store.engine, subagents=subagents)
        summary = generate(store.engine, scale=scale, seed=seed)
    finally:
        store.dispose()
    return WrittenSample(store.shown, summary)
