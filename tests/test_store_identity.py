"""One store, one record, however its URL is spelled (AC-24 write-once across runs).

The records database names a store by what the store says it is: the cluster's system
identifier and the database on PostgreSQL (and the schema, when it is not ``public``), the
file's device and inode on SQLite; or by the user's own name for it (``--store-name``,
``$KANDEV_DQ_STORE_NAME``, ``store_name=``). A key rewritten between runs under two spellings is
caught; a copy that keeps the identity (pg_basebackup) is the same store unless named apart; a
file copy is another store; an identity that cannot be read is an error, never a new store; the
records database may not live on the store's primary. Records an older kandev-dq kept under the
spelled URL are adopted (``tests/data/legacy_records.db``, made by
``tests/data/make_legacy_records.py`` with that release).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

import kandev_dq as kandev_dq_api
from kandev_dq.contract.instants import CAPTURE_SINCE
from kandev_dq.errors import KandevDqError
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project.settings import STORE_NAME_VARIABLE
from kandev_dq.records import SCHEMA_VERSION, Records, schema_versions, store_names
from kandev_dq.records.register import run_name, store_tag
from kandev_dq.report.history import history
from kandev_dq.run.check import run_check
from kandev_dq.store.reference import store_ref
from tests.data.make_legacy_records import CAPTURE, STORE_FILE, build_store
from tests.gxhelpers import result
from tests.replica import streaming_pair
from tests.test_check_cli import kandev_dq

WRITE_ONCE = "expect_activation_keys_to_be_write_once"
BASELINE = "expect_write_once_baseline_to_predate_this_run"
REWRITTEN = "2026-07-30T02:00:00Z"
SECRET = "s3cret-never-shown"
LEGACY = Path(__file__).parent / "data" / "legacy_records.db"


def _spellings(target, tmp_path, monkeypatch) -> list[str]:
    """The store ``target`` names, spelled every way ``--store`` takes it."""
    if target.dialect == "sqlite":
        file = Path(target.url).resolve()
        (tmp_path / "link.db").symlink_to(file)
        monkeypatch.chdir(file.parent)
        return [file.name, str(file), str(tmp_path / "link.db"), f"sqlite:///{file}"]
    url = make_url(target.url)
    schema = unquote(url.query["options"]).removeprefix("-csearch_path=")
    options = f"?options={quote(f'-csearch_path={schema}')}"
    port = url.port or 5432
    localhost = "localhost" if port == 5432 else f"localhost:{port}"
    return [
        f"postgresql://{url.username}@{localhost}/{url.database}{options}",
        # A password the server does not ask for (trust): never shown, nor part of the name.
        f"postgresql://{url.username}:{SECRET}@127.0.0.1:{port}/{url.database}{options}",
        f"host=127.0.0.1 port={port} dbname={url.database} user={url.username} "
        f"options='-csearch_path={schema}'",
    ]


def _healthy(target) -> StoreBuilder:
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    return store


def test_every_spelling_of_a_store_shares_one_ledger_register_and_watermark(
    target, project, tmp_path, monkeypatch
):
    """A capture_since rewritten between a run under one spelling and the next under another
    fails write-once (AC-24), against the first run's baseline, not one taken now; the live
    window goes on from the first run's watermark; history under any spelling lists them all."""
    store = _healthy(target)
    records = str(tmp_path / "records.db")
    first, *others = _spellings(target, tmp_path, monkeypatch)
    before = run_check(project, first, "live", records=records)
    assert result(before, WRITE_ONCE).success
    store.set_key(CAPTURE_SINCE, REWRITTEN)
    last = before
    for spelling in others:
        after = run_check(project, spelling, "live", records=records)
        assert after.store_identity == before.store_identity, spelling
        assert after.run_name == before.run_name
        assert after.to_json()["store_identity"] == before.store_identity
        failed = result(after, WRITE_ONCE)
        assert not failed.success and REWRITTEN in failed.message, spelling
        # The way out names the store with the user it connects as, and the records used.
        said = f"--store '{store_ref(spelling).connect_form}' --records 'sqlite:///{records}'"
        assert said in failed.message and SECRET not in json.dumps(after.to_json(), default=str)
        if target.dialect == "postgresql":
            assert "--store 'postgresql://postgres@" in failed.message
        assert result(after, BASELINE).success  # the record predates the run: not taken now
        assert after.baseline_run == before.run_name
        for suite, window in after.windows.items():  # the live record goes on
            assert window["previous"] == last.windows[suite]["watermark"], (spelling, suite)
        last = after
    identity = before.store_identity
    if target.dialect == "sqlite":
        found = Path(target.url).stat()
        assert identity == f"sqlite:{found.st_dev}:{found.st_ino}"
    else:
        assert identity.startswith("postgresql:") and identity.split("/")[1] in target.url
        assert identity.split("/")[2] in target.url  # the store's schema: not public
    past = history(project, others[-1], records=records)
    assert len(past.runs) == len(others) + 1


def test_a_file_copy_is_another_store_and_a_name_keeps_two_copies_apart(
    sqlite_target, project, tmp_path, monkeypatch
):
    """A SQLite file copied (cp) is another file: its record begins with its first run. Two
    names given to one store's copies keep two ledgers (--store-name, the environment)."""
    _healthy(sqlite_target)
    records = str(tmp_path / "records.db")
    original = run_check(project, sqlite_target.url, "live", records=records)
    copy = tmp_path / "copy.db"
    shutil.copy(sqlite_target.url, copy)
    copied = run_check(project, str(copy), "live", records=records)
    assert copied.store_identity != original.store_identity
    assert not result(copied, BASELINE).success  # a new record: rewrites before it unseen

    named = kandev_dq(
        *("check", "--store", sqlite_target.url, "--checkpoint", "live", "--format", "json"),
        *("--project", str(project), "--records", records, "--store-name", "kandev-a"),
    )
    assert named.returncode in (0, 1), named.stderr
    report = json.loads(named.stdout)
    assert report["store_identity"] == "kandev-a"
    assert report["run_name"] == run_name("live", "kandev-a")
    monkeypatch.setenv(STORE_NAME_VARIABLE, "kandev-b")
    by_environment = run_check(project, sqlite_target.url, "live", records=records)
    assert by_environment.store_identity == "kandev-b"
    assert not result(by_environment, BASELINE).success  # its own ledger
    by_api = kandev_dq_api.check(
        sqlite_target.url, "live", project, records=records, store_name="kandev-a"
    )
    assert by_api.store_identity == "kandev-a" and result(by_api, BASELINE).success
    with Records(records) as opened:
        assert {opened.baseline(n).run_name for n in ("kandev-a", "kandev-b")} == {
            run_name("live", "kandev-a"),
            run_name("live", "kandev-b"),
        }


def _relocated(records: Path, spelled: str, store: Path) -> None:
    """The legacy records, as the release that wrote them would have for the same store at
    ``store``: the path it was made at (in a scratch folder) replaced, in every text."""
    here = f"sqlite:{store}"
    pairs = [(spelled.removeprefix("sqlite:"), str(store)), (store_tag(spelled), store_tag(here))]
    engine = sa.create_engine(f"sqlite:///{records}")
    meta = sa.MetaData()
    meta.reflect(engine)
    with engine.begin() as conn:
        for table in meta.sorted_tables:
            for column in table.columns:
                if isinstance(column.type, sa.Text):
                    value = column
                    for old, new in pairs:
                        value = sa.func.replace(value, old, new)
                    conn.execute(table.update().values({column.name: value}))
    engine.dispose()


def test_records_of_the_previous_schema_are_adopted(tmp_path, project):
    """A records database written by the release naming stores by their spelled URL (schema 1)
    keeps working: the next check of the same store finds its baseline, first values, run and
    live watermark, so a rewritten capture_since is caught (AC-24), not "baseline recorded now".
    """
    records = tmp_path / "records.db"
    shutil.copy(LEGACY, records)
    engine = sa.create_engine(f"sqlite:///{records}")
    with engine.connect() as conn:
        [spelled] = conn.scalars(sa.text("SELECT store_identity FROM kandev_dq_baselines"))
        legacy_run, legacy_time = conn.execute(
            sa.text("SELECT run_name, run_time FROM kandev_dq_runs")
        ).one()
        versions = set(conn.scalars(sa.text("SELECT version FROM kandev_dq_schema_version")))
    engine.dispose()
    assert versions == {1} and spelled.startswith("sqlite:/")
    file = (tmp_path / STORE_FILE).resolve()
    store_engine = sa.create_engine(f"sqlite:///{file}")
    build_store(store_engine).set_key(CAPTURE_SINCE, REWRITTEN)
    store_engine.dispose()
    _relocated(records, spelled, file)

    report = run_check(project, str(file), "live", records=str(records))
    failed = result(report, WRITE_ONCE)
    assert not failed.success and f"{CAPTURE!r} -> {REWRITTEN!r}" in failed.message
    assert result(report, BASELINE).success
    moved = store_tag(f"sqlite:{file}")
    assert report.baseline_run == legacy_run.replace(store_tag(spelled), moved)
    assert report.changes["previous_run"] == legacy_time  # "new" is against the legacy run
    for suite, window in report.windows.items():  # the legacy run's watermark, not a first run
        assert window["previous"] is not None, (suite, window["reason"])
        assert window["previous"] < report.run_time
    past = history(project, str(file), records=str(records))
    assert [run.run_time for run in past.runs][1:] == [legacy_time]
    with Records(str(records)) as opened, opened.engine.connect() as conn:
        assert set(conn.scalars(sa.select(schema_versions.c.version))) == {1, SCHEMA_VERSION}
        assert conn.execute(sa.select(store_names.c.spelled, store_names.c.records_key)).all() == [
            (f"sqlite:{file}", report.store_identity)
        ]


# --- copies that keep the identity: a streaming standby (pg_basebackup) ---------------------------


@pytest.fixture(scope="module")
def replica():
    with streaming_pair() as pair:
        yield pair


def test_a_pg_basebackup_copy_is_the_same_store_unless_named_apart(replica, project, tmp_path):
    primary, standby = replica.schema()
    _healthy_at(primary)
    replica.caught_up()
    records = str(tmp_path / "records.db")
    on_primary = run_check(project, primary, "live", records=records)
    on_standby = run_check(project, standby, "live", records=records)
    assert on_standby.store_identity == on_primary.store_identity
    assert result(on_standby, BASELINE).success  # one record, begun on the primary
    apart = run_check(project, store_ref(standby).named("standby"), "live", records=records)
    assert apart.store_identity == "standby"
    assert not result(apart, BASELINE).success  # a record of its own


def _healthy_at(url: str) -> None:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    _healthy(type("Target", (), {"engine": engine})())
    engine.dispose()


def test_records_on_the_primary_of_a_standby_store_are_refused(replica, project):
    """The same system identifier and database is the same store, whichever server serves it:
    records written on the primary would reach the store through replication."""
    primary, standby = replica.schema()
    _healthy_at(primary)
    replica.caught_up()
    records, _ = replica.schema()
    with pytest.raises(KandevDqError, match="is the store under validation"):
        run_check(project, standby, "live", records=records)
    done = kandev_dq(
        *("check", "--store", standby, "--checkpoint", "live", "--records", records),
        *("--project", str(project)),
    )
    assert done.returncode == 2 and "is the store under validation" in done.stderr


def test_an_identity_that_cannot_be_read_is_an_error_never_a_new_store(replica, project, tmp_path):
    """A role that may not read the cluster's system identifier cannot tell which store it
    reads: exit 2 with the reason and the way out, nothing recorded."""
    primary, _ = replica.schema()
    _healthy_at(primary)
    schema = unquote(make_url(primary).query["options"]).removeprefix("-csearch_path=")
    admin = sa.create_engine(primary.replace("postgresql://", "postgresql+psycopg://"))
    with admin.begin() as conn:
        conn.exec_driver_sql("CREATE ROLE kdq_reader LOGIN")
        conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema}" TO kdq_reader')
        conn.exec_driver_sql(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO kdq_reader')
        conn.exec_driver_sql("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC")
    records = tmp_path / "records.db"
    try:
        done = kandev_dq(
            *("check", "--store", primary.replace("postgres@", "kdq_reader@")),
            *("--checkpoint", "live", "--project", str(project), "--records", str(records)),
            "--quiet",
        )
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql("GRANT EXECUTE ON FUNCTION pg_control_system() TO PUBLIC")
            conn.exec_driver_sql(f'REVOKE ALL ON ALL TABLES IN SCHEMA "{schema}" FROM kdq_reader')
            conn.exec_driver_sql(f'REVOKE ALL ON SCHEMA "{schema}" FROM kdq_reader')
            conn.exec_driver_sql("DROP ROLE kdq_reader")
        admin.dispose()
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "cannot tell which store" in line and "pg_control_system" in line
    assert "--store-name" in line
    with Records(str(records)) as opened:
        assert opened.run_records(limit=10) == []


# --- one reference per run ---------------------------------------------------------------------


def _references_read(during) -> tuple[list, list]:
    """What :func:`~kandev_dq.store.reference.store_ref` read into a new reference while
    ``during()`` ran (a reference handed to it returns as it is), and the URLs
    :func:`~kandev_dq.store.reference.resolve_url` resolved: on every thread, GX's included."""
    import sys
    import threading

    from kandev_dq.store import reference

    read, resolved = [], []
    codes = {reference.store_ref.__code__: read, reference.resolve_url.__code__: resolved}

    def profile(frame, event, _arg):
        found = codes.get(frame.f_code) if event == "call" else None
        if found is not None:
            given = next(iter(frame.f_locals.values()))
            if not isinstance(given, reference.StoreRef):
                found.append(given)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        during()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return read, resolved


def test_a_check_reads_its_store_into_one_reference(project, target, tmp_path):
    """The walk of ``--store`` from ``run_check`` enters store/reference.py once: the store is
    read into one reference at the edge, its URL resolved at most once, and everything below
    (the records database's refusal, the snapshot, the metrics GX runs) takes that reference.
    The records database is a reference of its own, read once too."""
    from kandev_dq.lab.scenarios.running import materialise

    materialise("healthy_baseline", target.url)
    records = str(tmp_path / "records.db")
    reports = []
    read, resolved = _references_read(
        lambda: reports.append(run_check(project, target.url, "nightly", records=records))
    )
    assert reports[0].success
    assert read == [target.url, records]
    assert [str(given) for given in resolved if given != records] in ([], [target.url])
