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


def test_a_refused_wal_store_leaves_no_side_file(tmp_path):
    """A WAL-mode SQLite file of another program, refused by the SQLite library alone before
    the SQL toolkit loads, keeps its folder as it was."""
    from kandev_dq.errors import StoreError
    from kandev_dq.store.target import refuse_non_kandev_sqlite_file

    path = tmp_path / "other.db"
    conn = sqlite_driver.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    assert sorted(os.listdir(tmp_path)) == ["other.db"]
    with pytest.raises(StoreError, match="not a Kandev store"):
        refuse_non_kandev_sqlite_file(path)
    assert sorted(os.listdir(tmp_path)) == ["other.db"]


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


def _read_as(uid: int, store: Path) -> str:
    """A read-only open of ``store`` as ``uid`` in a forked child: its row count, or its error."""
    import kandev_dq.store.observe  # noqa: F401 - imported before the child cannot read them
    import kandev_dq.store.snapshot  # noqa: F401

    readable, writable = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            try:
                opened = open_store(str(store))
                with opened.snapshot() as conn:
                    said = (
                        f"read {conn.exec_driver_sql('SELECT count(*) FROM kandev_meta').scalar()}"
                    )
                opened.dispose()
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                said = f"{type(exc).__name__}: {exc}"
            os.write(writable, said.encode())
        finally:
            os._exit(0)
    os.close(writable)
    os.waitpid(child, 0)
    with os.fdopen(readable, "rb") as said:
        return said.read().decode()


@pytest.mark.skipif(os.geteuid() != 0, reason="reads as another user (needs root)")
def test_a_wal_store_in_a_read_only_folder_is_read_where_sqlite_can(wal_store):
    """A user who may not write the folder: with the side files a writer holds, the store is
    read; with none, SQLite cannot create its wal-index and the refusal says why and what to
    do, not "attempt to write a readonly database"."""
    os.chmod(wal_store.parent, 0o555)
    try:
        said = _read_as(NOBODY, wal_store)
        assert said.startswith("StoreError: cannot read sqlite:///"), said
        assert "WAL mode" in said and "read-only to this user" in said and ".backup" in said
        assert sorted(os.listdir(wal_store.parent)) == ["kandev.db"]
        writer = sqlite_driver.connect(wal_store, timeout=5)
        try:
            writer.execute("SELECT count(*) FROM kandev_meta").fetchall()
            assert _read_as(NOBODY, wal_store) == "read 3"
        finally:
            writer.close()
    finally:
        os.chmod(wal_store.parent, 0o755)
