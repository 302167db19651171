"""The records database, trusted only as far as it can be: told apart from the store under
validation by what it is, however it is spelled, and never one a checkout shipped or linked
elsewhere (docs/reliability.md, 3a and 8)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.records import DEFAULT_RECORDS, RECORDS_VARIABLE, Records
from tests.conftest import fresh_pg_database
from tests.test_check_cli import kandev_dq

CAPTURE = "2026-07-30T01:39:37.271235Z"


def _healthy(target) -> None:
    StoreBuilder(target.engine).create().keys(CAPTURE, "", CAPTURE)
    target.engine.dispose()


def _records_tables(engine: sa.Engine) -> list[str]:
    """The records tables a PostgreSQL database holds, in any schema."""
    query = "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'kandev_dq%'"
    with engine.connect() as conn:
        return list(conn.execute(sa.text(query)).scalars())


# --- A. the store under another spelling, on every form libpq reads ----------------------------


def _spellings(url, service_file: Path) -> dict[str, str]:
    """The store's database as libpq lets a user name it, none spelled as the store is: a
    session that must be read-write (which the read-only option refuses), options, a service,
    a host given by its address, several hosts (libpq's URL, its key=value form, SQLAlchemy's
    query)."""
    user, port, db = url.username, url.port, url.database
    service = f"kdq_{uuid.uuid4().hex[:8]}"
    service_file.write_text(
        f"[{service}]\nhost=localhost\nport={port}\ndbname={db}\nuser={user}\n"
        "target_session_attrs=read-write\n",
        encoding="utf-8",
    )
    return {
        "target_session_attrs": (
            f"postgresql://{user}@localhost:{port}/{db}?target_session_attrs=read-write"
        ),
        "conninfo": (
            f"host=localhost port={port} dbname={db} user={user} "
            "options='-c search_path=public' target_session_attrs=read-write"
        ),
        "options": f"postgresql://{user}@localhost:{port}/{db}?options=-c%20search_path%3Dpublic",
        "service": f"service={service}",
        "service_url": f"postgresql:///?service={service}",
        "hostaddr": f"host=kandev-store.invalid hostaddr=127.0.0.1 port={port} dbname={db} "
        f"user={user} target_session_attrs=read-write",
        "several_hosts_url": f"postgresql://{user}@localhost:{port},127.0.0.1:{port}/{db}"
        "?target_session_attrs=read-write",
        "several_hosts_conninfo": f"host=kandev-store.invalid,localhost port={port} dbname={db} "
        f"user={user} connect_timeout=2",
        "several_hosts_query": f"postgresql://{user}@/{db}"
        f"?host=localhost:{port}&host=127.0.0.1:{port}&target_session_attrs=read-write",
    }


def test_the_store_under_every_libpq_spelling_is_refused_as_records_and_gets_no_table(
    pg_target, project, tmp_path
):
    """Whatever form names the store's database as the records database (a session asked to
    be read-write, options, a service, a host address, several hosts), ``check`` is exit 2
    naming the refusal, and the store's database gets no records table in any schema."""
    _healthy(pg_target)
    service_file = tmp_path / "pg_service.conf"
    env = {"PGSERVICEFILE": str(service_file)}
    for form, records in _spellings(make_url(pg_target.url), service_file).items():
        done = kandev_dq(
            *("check", "--store", pg_target.url, "--project", str(project)),
            *("--records", records, "-q"),
            env=env,
        )
        assert done.returncode == 2, (form, done.stdout, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert "is the store under validation" in line, (form, line)
        assert _records_tables(pg_target.engine) == [], form


def test_a_records_database_whose_identity_cannot_be_read_is_refused(pg_target, project):
    """A records database on the store's server whose role may not read the server's start
    time (revoked from PUBLIC in that database): what it is cannot be told, so it is refused
    (exit 2, one line saying why), never taken for another database and written to."""
    _healthy(pg_target)
    role = f"kdq_blind_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(make_url(pg_target.url)._replace(query={}))
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
    admin.dispose()
    try:
        with fresh_pg_database("kdq_blind") as blind:
            owner = sa.create_engine(blind)
            with owner.begin() as conn:
                conn.exec_driver_sql(f'GRANT CREATE ON SCHEMA public TO "{role}"')
                conn.exec_driver_sql(
                    "REVOKE EXECUTE ON FUNCTION pg_postmaster_start_time() FROM PUBLIC"
                )
            records = f"postgresql://{role}@localhost:{blind.port}/{blind.database}"
            done = kandev_dq(
                *("check", "--store", pg_target.url, "--project", str(project)),
                *("--records", records, "-q"),
            )
            assert done.returncode == 2, (done.stdout, done.stderr)
            [line] = done.stderr.strip().splitlines()
            assert "cannot tell whether the records database" in line, line
            assert "pg_postmaster_start_time" in line, line
            assert _records_tables(owner) == []
            owner.dispose()
    finally:
        admin = sa.create_engine(make_url(pg_target.url)._replace(query={}))
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP ROLE "{role}"')
        admin.dispose()


def test_an_unreachable_records_server_beside_a_postgresql_store_is_one_line(pg_target, project):
    """The records database's server not answering, beside a reachable store on PostgreSQL:
    exit 2, one line naming the records database without its password, nothing written."""
    _healthy(pg_target)
    done = kandev_dq(
        *("check", "--store", pg_target.url, "--project", str(project)),
        *("--records", "postgresql://kandev:s3cret-pw@127.0.0.1:9/records", "-q"),
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert "records database postgresql://127.0.0.1:9/records" in line, line
    assert "cannot reach" in line and "s3cret-pw" not in done.stderr
    assert _records_tables(pg_target.engine) == []
    assert not (project / "uncommitted").exists()


def test_an_unreachable_store_says_so_before_the_records_database(pg_target, project):
    """A store that cannot be reached fails first with its own error, whichever the records
    database: the user reads what is wrong with the store."""
    done = kandev_dq(
        *("check", "--store", "postgresql://kandev@127.0.0.1:9/store", "--project", str(project)),
        *("--records", pg_target.url, "-q"),
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("kandev-dq: error: cannot reach postgresql://127.0.0.1:9/store"), line
    assert "records" not in line


@pytest.fixture(autouse=True)
def _no_inherited_records(monkeypatch):
    """Each case names its own records database: none comes from the environment."""
    monkeypatch.delenv("KANDEV_DQ_RECORDS_URL", raising=False)
    monkeypatch.delenv("PGSERVICEFILE", raising=False)
    monkeypatch.delenv("PGSERVICE", raising=False)


# --- B. a records database that came with the checkout ---------------------------------------


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=kandev", "-c", "user.email=kandev@example.invalid", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def _checkout_shipping_records(project: Path) -> Path:
    """The project as a git checkout that tracks its default records database (made by this
    kandev-dq, as a forged one would be)."""
    records = project / DEFAULT_RECORDS
    Records(str(records)).dispose()
    _git(project, "init", "-q", ".")
    _git(project, "add", "-f", ".")
    _git(project, "commit", "-q", "-m", "a checkout")
    return records


def test_a_records_database_the_checkout_ships_is_refused_unless_the_user_names_it(
    sqlite_target, project, tmp_path
):
    """``uncommitted/records.db`` tracked by git came with the checkout (a forged baseline
    would pass a rewritten key): the default is refused in one line saying why and how to
    proceed, nothing written to it; named with ``--records`` or the variable, it is used. The
    checkout's ``core.fsmonitor``, a command git runs when it reads the index, never runs."""
    _healthy(sqlite_target)
    records = _checkout_shipping_records(project)
    ran = tmp_path / "fsmonitor-ran"
    _git(project, "config", "core.fsmonitor", f"touch '{ran}'; false")
    before = records.read_bytes()
    store = ("--store", sqlite_target.url, "--project", str(project), "-q")
    done = kandev_dq("check", *store)
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert "git tracks it" in line and "--records" in line and RECORDS_VARIABLE in line, line
    assert records.read_bytes() == before
    assert not ran.exists()
    done = kandev_dq("check", *store, "--records", str(records), "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["records"] == f"sqlite:///{records}"
    done = kandev_dq("check", *store, env={RECORDS_VARIABLE: str(records)})
    assert done.returncode in (0, 1), done.stderr
    assert not ran.exists()


def test_a_records_database_git_does_not_track_is_used(sqlite_target, project):
    """The same file in a checkout that does not track it (ignored, as ``uncommitted/`` is):
    the default records database, used."""
    _healthy(sqlite_target)
    _git(project, "init", "-q", ".")
    (project / ".gitignore").write_text("uncommitted/\n", encoding="utf-8")
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "a checkout")
    Records(str(project / DEFAULT_RECORDS)).dispose()
    done = kandev_dq("check", "--store", sqlite_target.url, "--project", str(project), "-q")
    assert done.returncode in (0, 1), done.stderr


def test_a_pass_names_the_baseline_it_rests_on(target, project):
    """When the write-once rules pass against a baseline taken before this run, the text
    report says when it was taken and by which run (a records database that came from
    elsewhere shows a run this machine never made); a first run, which takes it, says the
    baseline is new instead."""
    _healthy(target)
    store = ("--store", target.url, "--project", str(project))
    first = kandev_dq("check", *store, "-q", "--format", "json")
    report = json.loads(first.stdout)
    assert report["baseline_run"] == report["run_name"], report
    again = kandev_dq("check", *store, "-q")
    assert again.returncode in (0, 1), again.stderr
    said = f"baseline taken {report['baseline_taken_at']} by run {report['run_name']}"
    assert said in again.stdout, again.stdout
    fresh = kandev_dq("check", *store, "-q", "--records", str(project / "other.db"))
    assert "baseline taken" not in fresh.stdout and "baseline recorded now" in fresh.stdout


# --- C. hard links out of the project ----------------------------------------------------------


def test_a_hard_linked_records_file_is_refused_and_the_other_file_unchanged(
    sqlite_target, project, tmp_path
):
    """``uncommitted/records.db`` (or its ``-wal``) hard-linked to a file outside the project:
    a write would change that file too, so the run is exit 2 in one line, the file as it was."""
    _healthy(sqlite_target)
    outside = tmp_path / "outside.db"
    Records(str(outside)).dispose()
    before = outside.read_bytes()
    records = project / DEFAULT_RECORDS
    records.parent.mkdir()
    store = ("--store", sqlite_target.url, "--project", str(project), "-q")
    for linked in (records, records.with_name(records.name + "-wal")):
        if linked != records:
            Records(str(records)).dispose()
        os.link(outside, linked)
        done = kandev_dq("check", *store)
        assert done.returncode == 2, (linked, done.stdout, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert f"{linked} has 2 names (hard links)" in line, line
        assert outside.read_bytes() == before
        linked.unlink()


@pytest.mark.parametrize("written", ["by init", "before the replacing backend"])
def test_a_hard_linked_data_docs_page_is_replaced_not_written_through(
    written, sqlite_target, project, tmp_path
):
    """Data docs pages, the index, the overview and the static assets hard-linked to files
    outside the project: after a check each outside file is byte-identical and the site holds
    the new page (written under a new name and renamed into place), in a project as ``init``
    writes it and in one written before, whose yml names GX's own backend."""
    if written != "by init":
        yml = project / "great_expectations.yml"
        named = (
            "module_name: kandev_dq.report.site\n      class_name: ReplacingFilesystemStoreBackend"
        )
        assert named in yml.read_text()
        yml.write_text(yml.read_text().replace(named, "class_name: TupleFilesystemStoreBackend"))
    _healthy(sqlite_target)
    store = ("--store", sqlite_target.url, "--project", str(project), "-q")
    assert kandev_dq("check", *store).returncode in (0, 1)
    site = project / "uncommitted" / "data_docs" / "local_site"
    pages = [
        site / "index.html",
        site / "overview.html",
        next((site / "static").rglob("*.css")),
        next((site / "expectations").rglob("*.html")),
    ]
    outside = {}
    for n, page in enumerate(pages):
        victim = tmp_path / f"victim-{n}"
        victim.write_bytes(b"the user's own file\n")
        page.unlink()
        os.link(victim, page)
        outside[page] = victim
    assert kandev_dq("check", *store).returncode in (0, 1)
    for page, victim in outside.items():
        assert victim.read_bytes() == b"the user's own file\n", page
        assert page.stat().st_nlink == 1 and page.read_bytes() != victim.read_bytes(), page
    assert not list(site.rglob(".*.tmp"))
