"""A bench store in miniature, for the bench's own tests."""

from __future__ import annotations

from bench.stores import Copy
from kandev_dq.lab import sample
from kandev_dq.migration import runner as migrate
from kandev_dq.store.access import open_store


def migrated_bench_store(target) -> Copy:
    """A small generated, migrated store, as the bench makes its large ones."""
    sample.create_store(target.engine, subagents="amended")
    sample.generate(target.engine, scale=1, seed=0)
    opened = open_store(target.url, read_only=False)
    try:
        assert migrate.run(opened).ok
    finally:
        opened.dispose()
    return Copy(target.dialect, target.url, target.engine.url)
