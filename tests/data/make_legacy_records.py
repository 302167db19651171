"""Build ``legacy_records.db``: a records database as kandev-dq wrote it before stores were
named by their identity (schema version 1, every record keyed by the store's URL as spelled).

Run with the release that writes version 1 (its ``plugins`` first on ``PYTHONPATH``):

    python tests/data/make_legacy_records.py tests/data/legacy_records.db

It builds the store :func:`build_store` describes in a scratch folder and records one ``live``
run of it: a key ledger and its baseline (AC-24), a run in the register, and each live suite's
watermark. ``tests/test_store_identity.py`` builds the same store and checks it with these
records.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

from kandev_dq.contract.instants import parse_key
from kandev_dq.lab.storebuilder import StoreBuilder

#: The store's activation keys, and its subagents' times after them.
CAPTURE = "2026-07-30T01:39:37.271235Z"
#: The file the store is written to in its folder.
STORE_FILE = "kandev.db"


def build_store(engine: sa.Engine) -> StoreBuilder:
    """A store activated at :data:`CAPTURE`, its writer healthy: two subagents after it."""
    store = StoreBuilder(engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    session = store.session()
    start = parse_key(CAPTURE).micro
    for n in range(2):
        at = start + timedelta(minutes=n + 1)
        store.subagent_message(session, at, f"toolu_old_{n}")
        store.subagent_row(session, f"toolu_old_{n}", at, total_tokens=10, duration_ms=5)
    return store


def main(out: Path) -> None:
    # That release's module paths: the project's files were kandev_dq.run.project's then.
    from kandev_dq.run.check import run_check
    from kandev_dq.run.project import build_project

    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        store = folder / STORE_FILE
        engine = sa.create_engine(f"sqlite:///{store}")
        build_store(engine)
        engine.dispose()
        project = build_project(folder / "project")
        report = run_check(project, str(store), "live", records=str(out.resolve()))
        print(f"{out}: {report.run_name}, store {report.store}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
