"""A real PostgreSQL primary and its streaming hot standby, made from the server's own binaries.

``pg_basebackup -R`` copies a fresh primary (``initdb``) into a standby that streams from it,
each on a free port of 127.0.0.1, in a folder of their own removed afterwards. As root the
servers run as the ``postgres`` user (PostgreSQL refuses to run as root). Without the binaries
the tests skip with the reason; with ``CI=true`` that is a failure.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import sqlalchemy as sa

from tests.conftest import IN_CI

#: Where Debian and Ubuntu put a server's binaries; ``KANDEV_TEST_PG_BINDIR`` names another.
BINDIR_VARIABLE = "KANDEV_TEST_PG_BINDIR"


def _bindir() -> Path | None:
    named = os.environ.get(BINDIR_VARIABLE)
    found = [named] if named else sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    usable = [Path(d) for d in found if (Path(d) / "pg_basebackup").is_file()]
    return usable[-1] if usable else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Replica:
    """A primary and its standby: their URLs (database ``kandev``) and replay controls."""

    primary: str
    standby: str
    #: Runs ``pg_ctl ACTION`` on the primary (``stop``, ``start``): a server restarted under
    #: a long-running check.
    primary_ctl: Callable[[str], None]

    def _standby_sql(self, statement: str):
        engine = sa.create_engine(self.standby.replace("postgresql://", "postgresql+psycopg://"))
        try:
            with engine.connect() as conn:
                return conn.exec_driver_sql(statement).scalar()
        finally:
            engine.dispose()

    def schema(self) -> tuple[str, str]:
        """A fresh schema on the primary: its URL there and on the standby."""
        name = f"s_{uuid.uuid4().hex[:10]}"
        engine = sa.create_engine(self.primary.replace("postgresql://", "postgresql+psycopg://"))
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        engine.dispose()
        options = f"?options={quote(f'-csearch_path={name}')}"
        return self.primary + options, self.standby + options

    def pause(self) -> None:
        self._standby_sql("SELECT pg_wal_replay_pause()")
        while self._standby_sql("SELECT pg_get_wal_replay_pause_state()") != "paused":
            time.sleep(0.05)

    def resume(self) -> None:
        self._standby_sql("SELECT pg_wal_replay_resume()")

    def caught_up(self, timeout_s: float = 30.0) -> None:
        """Wait until the standby has replayed everything the primary has written."""
        engine = sa.create_engine(self.primary.replace("postgresql://", "postgresql+psycopg://"))
        try:
            with engine.connect() as conn:
                target = conn.exec_driver_sql("SELECT pg_current_wal_lsn()::text").scalar()
        finally:
            engine.dispose()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done = self._standby_sql(
                f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"  # noqa: S608 - an LSN
            )
            if done:
                return
            time.sleep(0.05)
        raise TimeoutError("the standby did not catch up")


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"a PostgreSQL standby is required when CI=true: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL standby ({reason})")


@contextmanager
def streaming_pair() -> Iterator[Replica]:
    """A primary with a database ``kandev`` and a hot standby streaming it."""
    bindir = _bindir()
    if bindir is None:
        _unavailable(f"no PostgreSQL server binaries (set {BINDIR_VARIABLE})")
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    folder = Path(tempfile.mkdtemp(prefix="kandev-dq-replica-"))
    folder.chmod(0o755)
    if as_postgres:
        shutil.chown(folder, "postgres")
    primary_port, standby_port = free_port(), free_port()
    primary, standby = folder / "primary", folder / "standby"

    def run(*args: str) -> None:
        done = subprocess.run(
            [*as_postgres, *args], capture_output=True, text=True, cwd=folder, timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr.strip()[-2000:]}")

    started: list[Path] = []
    try:
        run(str(bindir / "initdb"), "-D", str(primary), "-A", "trust", "-U", "postgres", "-N")
        with (primary / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {primary_port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{folder}'\nfsync = off\n"
            )
        run(str(bindir / "pg_ctl"), "-D", str(primary), "-l", str(folder / "primary.log"),
            "-w", "start")  # fmt: skip
        started.append(primary)
        run(str(bindir / "psql"), "-h", "127.0.0.1", "-p", str(primary_port), "-U", "postgres",
            "-qc", "CREATE DATABASE kandev")  # fmt: skip
        # A fast checkpoint: the default spread one paces an idle primary's for ~90 s.
        run(str(bindir / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary_port),
            "-U", "postgres", "-D", str(standby), "-R", "-X", "stream", "-c", "fast")  # fmt: skip
        with (standby / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {standby_port}\n")
        run(str(bindir / "pg_ctl"), "-D", str(standby), "-l", str(folder / "standby.log"),
            "-w", "start")  # fmt: skip
        started.append(standby)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        for data in reversed(started):
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(folder, ignore_errors=True)
        _unavailable(str(exc).splitlines()[0])
    try:
        yield Replica(
            f"postgresql://postgres@127.0.0.1:{primary_port}/kandev",
            f"postgresql://postgres@127.0.0.1:{standby_port}/kandev",
            lambda action: run(
                str(bindir / "pg_ctl"),
                "-D",
                str(primary),
                "-l",
                str(folder / "primary.log"),
                "-m",
                "fast",
                "-w",
                action,
            ),  # fmt: skip
        )
    finally:
        for data in reversed(started):
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
