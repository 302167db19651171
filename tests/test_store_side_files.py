"""A check leaves a WAL-mode SQLite store's folder as it found it: a read-only open creates
``-wal`` and ``-shm``, and the store's own writer (another user) must still open its store."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.run.check import run_check
from kandev_dq.store import sqlite_driver
from kandev_dq.store.access import open_store
from tests.test_check_cli import CAPTURE, kandev_dq

NOBODY = 65534
SIDE_FILES_IN_USE = ["kandev.db", "kandev.db-shm", "kandev.db-wal"]


def _write_as(uid: int, store: Path) -> int:
    """Kandev's writer as ``uid``: a forked child (no interpreter to exec) that inserts a row."""
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.setgid(uid)
            os.setuid(uid)
            conn = sqlite_driver.connect(store, timeout=5)
            conn.execute("INSERT INTO kandev_meta (key, value) VALUES ('writer_was_here', 'y')")
            conn.commit()
            conn.close()
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])


@pytest.fixture
def wal_store():
    """A WAL-mode store with no side files, in a folder any user can reach."""
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)
        path = Path(folder) / "kandev.db"
        engine = sqlite_driver.create_engine(f"sqlite:///{path}")
        StoreBuilder(engine).create().keys(CAPTURE, "", CAPTURE)
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        engine.dispose()  # the last connection checkpoints and deletes its side files
        assert sorted(os.listdir(folder)) == ["kandev.db"]
        yield path


def test_a_read_only_open_leaves_no_side_file(wal_store):
    store = open_store(str(wal_store))
    with store.snapshot() as conn:
        conn.exec_driver_sql("SELECT count(*) FROM kandev_meta").all()
    store.dispose()
    assert sorted(os.listdir(wal_store.parent)) == ["kandev.db"]


def test_side_files_another_connection_holds_are_left_to_it(wal_store):
    writer = sqlite_driver.create_engine(f"sqlite:///{wal_store}")
    with writer.connect() as held:
        held.exec_driver_sql("SELECT count(*) FROM kandev_meta").all()
        store = open_store(str(wal_store))
        with store.snapshot() as conn:
            conn.exec_driver_sql("SELECT count(*) FROM kandev_meta").all()
        store.dispose()
        assert sorted(os.listdir(wal_store.parent)) == SIDE_FILES_IN_USE
        held.exec_driver_sql("INSERT INTO kandev_meta (key, value) VALUES ('k', 'v')")
        held.commit()
    writer.dispose()


def test_a_check_keeps_the_folder_as_found(wal_store, project):
    report = run_check(project, str(wal_store), "pre_release")
    assert report.success
    assert sorted(os.listdir(wal_store.parent)) == ["kandev.db"]


@pytest.mark.skipif(os.geteuid() != 0, reason="a check as root, then a write as another user")
def test_the_store_owner_writes_after_a_check_run_as_root(wal_store, project):
    for path in (wal_store.parent, wal_store):
        os.chown(path, NOBODY, NOBODY)
    done = kandev_dq("check", "--store", str(wal_store), "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(wal_store.parent)) == ["kandev.db"]
    assert _write_as(NOBODY, wal_store) == 0
