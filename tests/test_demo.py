"""`kandev-dq demo`, the README's first command: it runs again and again, refuses cleanly, and
its rows are never dated after the run that checks them."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import parse_stored
from kandev_dq.lab import sample
from kandev_dq.lab.storebuilder import StoreBuilder
from tests.gxhelpers import REPO
from tests.test_check_cli import kandev_dq

CAPTURE = "2026-07-30T01:39:37.271235Z"


def test_the_demo_runs_twice_in_a_row(tmp_path):
    for attempt in (1, 2):
        done = kandev_dq("demo", cwd=tmp_path)
        assert done.returncode == 0, f"run {attempt}: {done.stdout}\n{done.stderr}"
        assert "PASSED" in done.stdout
        docs = done.stdout.split("data docs: ")[1].strip()
        assert docs.startswith(str(tmp_path.resolve())), docs  # absolute, like every command


def test_a_refused_postgres_demo_leaves_no_folder(pg_target, tmp_path):
    StoreBuilder(pg_target.engine).create()  # not empty: the demo must refuse it
    done = kandev_dq("demo", "--dir", str(tmp_path / "demo"), "--postgres", pg_target.url)
    assert done.returncode == 2, done.stderr
    assert "already holds a Kandev store" in done.stderr
    assert not (tmp_path / "demo").exists()


def test_a_postgres_demo_refuses_a_database_holding_other_tables(pg_target, tmp_path):
    with pg_target.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE someone_elses (x integer)")
    done = kandev_dq("demo", "--dir", str(tmp_path / "demo"), "--postgres", pg_target.url)
    assert done.returncode == 2, done.stdout
    assert "is not empty (table someone_elses)" in done.stderr
    assert not (tmp_path / "demo").exists()
    with pg_target.engine.connect() as conn:
        assert sa.inspect(conn).get_table_names() == ["someone_elses"]  # nothing written


def test_the_demo_folder_is_ignored_by_git():
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "kandev-demo/project/great_expectations.yml"], cwd=REPO
    )
    assert ignored.returncode == 0


def test_live_traffic_until_an_instant_is_dated_no_later(target):
    sample.create_store(target.engine, subagents="amended")
    sample.generate(target.engine, scale=1, seed=0)
    since = datetime.now(UTC) - timedelta(seconds=2)
    StoreBuilder(target.engine).keys(since.isoformat().replace("+00:00", "Z"), "", CAPTURE)
    until = since + timedelta(seconds=1)
    sample.append_live_traffic(target.engine, count=40, seed=1, until=until)
    rows, messages = schema.subagents, schema.task_session_messages
    with target.engine.connect() as conn:
        written = [
            *conn.execute(sa.select(rows.c.observed_at, rows.c.settled_at, rows.c.updated_at)),
            *conn.execute(sa.select(messages.c.created_at, messages.c.updated_at)),
        ]
    stamps = [parse_stored(v) for row in written for v in row if v is not None]
    live = [stamp for stamp in stamps if stamp >= since]
    assert len(live) > 80  # the 40 messages and their rows
    assert max(live) <= until
