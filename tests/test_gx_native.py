"""A checkpoint run through GX's own API gives ``kandev-dq check``'s verdict (AC-24 to AC-33).

Schedulers (Airflow's GX operator, Dagster, Prefect, cron) run a checkpoint by name from a GX
file context: ``gx.get_context(mode="file", context_root_dir=...)`` then
``context.checkpoints.get(name).run()``. These tests do exactly that in a fresh interpreter
that never imports ``kandev_dq`` itself (the project's yml makes GX import it), on every
scenario of the fault corpus, healthy and faulty, on SQLite and PostgreSQL, and hold the
verdict, the failing rules and their severities to the CLI's on the same store. The key ledger
is shared between the two paths, and a suite that does not load whole never passes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from pathlib import Path

import pytest

from kandev_dq.lab import scenarios
from kandev_dq.lab.scenarios.running import apply_between_runs, materialise, private_project
from kandev_dq.project.files import CHECKPOINTS
from kandev_dq.report.history import history
from kandev_dq.run.check import run_check
from kandev_dq.store.reference import store_ref
from tests.gxhelpers import native_runs


def nightly(project: Path, sqlite_file: str) -> dict:
    """The job running ``nightly`` of ``project`` on a SQLite store."""
    return {"project": str(project), "url": gx_url("sqlite", sqlite_file), "checkpoint": "nightly"}


def failing(results: list[dict]) -> set[tuple[str, str, str]]:
    return {(r["suite"], r["expectation"], r["severity"]) for r in results if not r["success"]}


def cli_failing(report) -> set[tuple[str, str, str]]:
    gx_word = {"error": "critical"}
    return {
        (r.suite, r.expectation, gx_word.get(r.severity, r.severity))
        for r in report.results
        if not r.success
    }


def gx_url(dialect: str, target: str) -> str:
    """The store as a GX data source's connection string names it (a SQLAlchemy URL)."""
    return f"sqlite:///{target}" if dialect == "sqlite" else target


class Stores:
    """Scratch stores of one dialect: SQLite files in a folder, PostgreSQL schemas."""

    def __init__(self, dialect: str, folder: Path, pg_url=None):
        self.dialect, self.folder, self.pg_url = dialect, folder, pg_url
        self.count = 0

    def new(self) -> str:
        self.count += 1
        if self.dialect == "sqlite":
            return str(self.folder / f"store{self.count}.db")
        import sqlalchemy as sa

        schema = f"gxn_{uuid.uuid4().hex[:12]}"
        base = self.pg_url.render_as_string(hide_password=False)
        with sa.create_engine(base).begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        return f"{base}?options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request, tmp_path) -> Stores:
    if request.param == "postgresql":
        return Stores("postgresql", tmp_path, request.getfixturevalue("pg_database"))
    return Stores("sqlite", tmp_path)


#: Scenarios checked once (those with a between-runs mutation are the ledger tests' below).
ONCE = sorted(name for name, s in scenarios.SCENARIOS.items() if s.between_runs is None)
CHUNKS = 3


def checkpoints_for(index: int) -> tuple[str, ...]:
    """``pre_release`` (every suite) on every scenario; the other checkpoints, which run
    subsets of the same suites, on every fourth one too (healthy and faulty among them)."""
    return tuple(CHECKPOINTS) if index % 4 == 0 else ("pre_release",)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_every_checkpoint_through_gx_gives_the_cli_verdict_on_the_corpus(
    chunk, stores, built_project, tmp_path
):
    """Healthy and faulty scenarios alike: the same success, the same failing rules at the
    same severities, every expectation run (none dropped, none unevaluated)."""
    jobs, expected = [], []
    for index in range(chunk, len(ONCE), CHUNKS):
        name = ONCE[index]
        target = stores.new()
        materialise(name, target)
        scenario = scenarios.get(name)
        checked = scenario.check_url(target) if scenario.check_url else target
        for checkpoint in checkpoints_for(index):
            cli = private_project(built_project, tmp_path / f"cli-{name}-{checkpoint}")
            native = private_project(built_project, tmp_path / f"gx-{name}-{checkpoint}")
            report = run_check(cli, checked, checkpoint)
            expected.append((name, checkpoint, report))
            jobs.append(
                {
                    "project": str(native),
                    "url": gx_url(stores.dialect, checked),
                    "checkpoint": checkpoint,
                }
            )
    outcomes = native_runs(jobs, tmp_path)
    for (name, checkpoint, report), outcome in zip(expected, outcomes, strict=True):
        where = f"{name} / {checkpoint} on {stores.dialect}"
        assert "raised" not in outcome, f"{where}: {outcome}"
        assert len(outcome["results"]) == len(report.results), where
        assert not any(r["error"] for r in outcome["results"]), where
        assert outcome["success"] == report.success, where
        assert failing(outcome["results"]) == cli_failing(report), where


@pytest.mark.parametrize("rewrite", ["key_rewritten_between_runs", "key_deleted_between_runs"])
def test_the_key_ledger_is_shared_whichever_path_runs_second(
    rewrite, stores, built_project, tmp_path
):
    """AC-24: a key rewritten (or deleted) between a CLI run and a GX-native run is caught
    at error by the second run, in either order: both read and update one records database."""
    write_once = ("activation", "expect_activation_keys_to_be_write_once", "critical")
    cli_first, gx_first = stores.new(), stores.new()
    for target in (cli_first, gx_first):
        materialise(rewrite, target)
    one = private_project(built_project, tmp_path / "cli-first")
    two = private_project(built_project, tmp_path / "gx-first")

    assert run_check(one, cli_first, "nightly").success
    [first] = native_runs(
        [{"project": str(two), "url": gx_url(stores.dialect, gx_first), "checkpoint": "nightly"}],
        tmp_path,
    )
    assert first["success"] and write_once not in failing(first["results"])

    apply_between_runs(rewrite, cli_first)
    apply_between_runs(rewrite, gx_first)
    [second] = native_runs(
        [{"project": str(one), "url": gx_url(stores.dialect, cli_first), "checkpoint": "nightly"}],
        tmp_path,
    )
    assert not second["success"] and write_once in failing(second["results"])
    report = run_check(two, gx_first, "nightly")
    assert not report.success and write_once in cli_failing(report)


def test_a_gx_native_run_is_named_and_recorded_as_check_records_its_runs(
    stores, built_project, tmp_path
):
    """A checkpoint run through GX's API is named ``<checkpoint>@<store tag>`` as ``kandev-dq
    check`` names a run of it on that store (GX would name it ``__none__``), recorded in the
    run register with the store's state and finished with its verdict, so ``history`` lists
    it and the next ``check`` compares itself with it. The data docs show it by that name."""
    store = stores.new()
    materialise("duplicate_rows_for_one_key", store)
    project = private_project(built_project, tmp_path / "project")
    _with_docs_action(project / "checkpoints" / "nightly.json")
    job = {"project": str(project), "url": gx_url(stores.dialect, store), "checkpoint": "nightly"}
    [native] = native_runs([job], tmp_path)
    assert native["success"] is False
    site = project / "uncommitted" / "data_docs" / "local_site"
    pages = [page.read_text() for page in (site / "validations").rglob("*.html")]
    index, overview = ((site / page).read_text() for page in ("index.html", "overview.html"))

    [run] = history(project, store).runs
    assert run.checkpoint == "nightly" and run.success is False
    assert run.state == "fully_activated"
    assert run.suites == ["activation", "rows", "writer_health"]
    assert run.failures["error"] >= 1
    assert {(f.suite, f.expectation, f.severity) for f in run.failed} == {
        (suite, expectation, "error" if severity == "critical" else severity)
        for suite, expectation, severity in failing(native["results"])
    }
    with sqlite3.connect(project / "uncommitted" / "records.db") as db:
        keys = [row[0] for row in db.execute("SELECT result_key FROM kandev_dq_validation_results")]
    assert len(keys) == len(CHECKPOINTS["nightly"])
    assert all(run.run_name in key and "__none__" not in key for key in keys)
    assert len(pages) == len(keys) and all(run.run_name in page for page in pages)
    shown = store_ref(store).shown  # the register's store, where the pages said none
    assert shown in overview and shown in index and "a store not recorded" not in index

    # The key ledger's first sightings and the write-once baseline name the run that took
    # them, not "a run through GX's API" (the metric runs before the run has its name).
    assert ledger_run_names(project) == {run.run_name}

    report = run_check(project, store, "nightly")
    assert report.run_name == run.run_name  # one name for the checkpoint on this store
    assert report.changes["previous_run"] == run.run_time
    assert [r.run_name for r in history(project, store).runs] == [run.run_name] * 2


def ledger_run_names(project: Path) -> set[str]:
    """The run names the project's key ledger and baselines were recorded under."""
    with sqlite3.connect(project / "uncommitted" / "records.db") as db:
        return {
            row[0]
            for table in ("kandev_dq_key_ledger", "kandev_dq_baselines")
            for row in db.execute(f"SELECT run_name FROM {table}")
        }


def test_a_run_a_scheduler_names_is_the_run_its_ledger_records_name(
    sqlite_target, built_project, tmp_path
):
    """A scheduler naming its run (``run_id=RunIdentifier(run_name=...)``): the key ledger's
    first sightings and baseline carry that name; a second run, recording nothing new, renames
    nothing."""
    materialise("healthy_baseline", sqlite_target.url)
    project = private_project(built_project, tmp_path / "project")
    job = {"project": str(project), "url": sqlite_target.url, "checkpoint": "nightly"}
    [first, second] = native_runs([job | {"run_name": "cron-0600"}, job], tmp_path)
    assert first["success"] and second["success"]
    assert ledger_run_names(project) == {"cron-0600"}


def _add_expectation(project: Path, suite: str, expectation: dict) -> None:
    path = project / "expectations" / f"{suite}.json"
    config = json.loads(path.read_text())
    config["expectations"].append(expectation)
    path.write_text(json.dumps(config, indent=2))


UNKNOWN = {"type": "expect_writer_to_be_fine", "kwargs": {}, "meta": {}, "severity": "critical"}
INVALID = {
    "type": "expect_no_backfill_rows_inside_sentinel_window",
    "kwargs": {"window_minutes": -5},
    "meta": {},
    "severity": "warning",
}


def test_a_suite_that_does_not_load_whole_fails_the_gx_native_run(
    built_project, sqlite_target, tmp_path
):
    """GX drops an expectation whose type it does not know and would pass on what is left.
    On GX's path a project naming an unknown type is refused as it loads (a project is data,
    docs/reliability.md 3a); with the opt-in to a project's own code, kandev-dq's expectations
    store refuses the suite that does not load whole, naming it and the type. A checkpoint
    without that suite still runs."""
    materialise("healthy_baseline", sqlite_target.url)
    project = private_project(built_project, tmp_path / "project")
    _add_expectation(project, "writer_health", UNKNOWN)
    job = {"project": str(project), "url": gx_url("sqlite", sqlite_target.url)}
    jobs = [job | {"checkpoint": "nightly"}, job | {"checkpoint": "post_migration"}]
    [vetted, _] = native_runs(jobs, tmp_path)
    assert vetted["raised"] == "KandevDqError" and UNKNOWN["type"] in vetted["message"]
    opted = {"KANDEV_DQ_ALLOW_PROJECT_CODE": "1"}
    [incomplete, other] = native_runs(jobs, tmp_path, opted)
    assert incomplete["raised"] == "IncompleteSuiteError"
    assert (
        "suite writer_health loaded 7 of its 8 expectations: expect_writer_to_be_fine"
        in incomplete["message"]
    )
    assert other["success"] is True


def test_gx_refuses_an_argument_the_expectation_rejects(built_project, sqlite_target, tmp_path):
    """An argument a kandev-dq field rejects stops the run too: GX validates the fields."""
    materialise("healthy_baseline", sqlite_target.url)
    project = private_project(built_project, tmp_path / "project")
    _add_expectation(project, "writer_health", INVALID)
    job = {"project": str(project), "url": gx_url("sqlite", sqlite_target.url)}
    [refused] = native_runs([job | {"checkpoint": "nightly"}], tmp_path)
    assert refused["raised"] == "ValidationError" and "window_minutes" in refused["message"]


def test_a_project_without_the_records_store_fails_write_once_loudly(
    built_project, sqlite_target, tmp_path
):
    """A project whose results store is GX's own is not one kandev-dq writes, refused unless
    its user opts in; trusted, it has no key ledger: write-once cannot be judged, and the
    GX-native run fails rather than pass with it skipped (AC-24)."""
    materialise("healthy_baseline", sqlite_target.url)
    project = private_project(built_project, tmp_path / "project")
    yml = project / "great_expectations.yml"
    text = yml.read_text()
    ours = (
        "    module_name: kandev_dq.gx.results_store\n    class_name: ValidationResultsStore\n"
        "    store_backend:\n      module_name: kandev_dq.gx.results_store\n"
        "      class_name: RecordsStoreBackend\n"
    )
    assert ours in text
    yml.write_text(
        text.replace(
            ours,
            "    class_name: ValidationResultsStore\n    store_backend:\n"
            "      class_name: TupleFilesystemStoreBackend\n"
            "      base_directory: uncommitted/validations/\n",
        )
    )
    [refused] = native_runs([nightly(project, sqlite_target.url)], tmp_path)
    assert "stores.validation_results_store: " in refused["message"]
    assert "is not a class kandev-dq writes for a store" in refused["message"]
    trusted = {"KANDEV_DQ_ALLOW_PROJECT_CODE": "1"}
    [outcome] = native_runs([nightly(project, sqlite_target.url)], tmp_path, trusted)
    assert outcome["success"] is False
    unevaluated = {r["expectation"] for r in outcome["results"] if r["error"]}
    assert unevaluated == {
        "expect_activation_keys_to_be_write_once",
        "expect_write_once_baseline_to_predate_this_run",
    }


def _results_and_ledger_rows(project: Path) -> tuple[int, int]:
    """How many validation results and key ledger rows the project's records database holds."""
    records = sqlite3.connect(project / "uncommitted" / "records.db")
    try:
        stored = records.execute("SELECT count(*) FROM kandev_dq_validation_results").fetchone()[0]
        ledger = records.execute("SELECT count(*) FROM kandev_dq_key_ledger").fetchone()[0]
    finally:
        records.close()
    return stored, ledger


def test_a_project_of_the_earlier_layout_still_checks(built_project, sqlite_target, tmp_path):
    """A project the previous release wrote names its stores by their earlier modules
    (``kandev_dq.run.*``): ``check`` loads them as today's modules, judges write-once through
    the records database, and stores its results there; nothing is left at the earlier paths."""
    from kandev_dq import run
    from kandev_dq.project.vetting import EARLIER_MODULES

    materialise("healthy_baseline", sqlite_target.url)
    project = private_project(built_project, tmp_path / "project")
    yml = project / "great_expectations.yml"
    text = yml.read_text()
    for earlier, today in EARLIER_MODULES.items():
        assert f"module_name: {today}\n" in text
        text = text.replace(f"module_name: {today}\n", f"module_name: {earlier}\n")
    yml.write_text(text)
    report = run_check(project, sqlite_target.url, "nightly")
    assert report.success, [r.message for r in report.results if not r.success]
    assert _results_and_ledger_rows(project) == (len(CHECKPOINTS["nightly"]), 3)
    folder = Path(run.__file__).parent
    assert [m for m in EARLIER_MODULES if (folder / f"{m.rsplit('.', 1)[1]}.py").exists()] == []


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_a_gx_native_run_reads_read_only_keeps_records_and_builds_the_docs(
    built_project, sqlite_target, tmp_path
):
    """On GX's path too: the store is read through kandev-dq's read-only connection and left
    byte-identical, the results land in the records database (where ``history`` and the
    data docs read them), and the checkpoint's docs action builds the site with its overview."""
    materialise("healthy_baseline", sqlite_target.url)
    sqlite_target.engine.dispose()
    before = _digest(sqlite_target.url)
    project = private_project(built_project, tmp_path / "project")
    _with_docs_action(project / "checkpoints" / "nightly.json")
    [outcome] = native_runs([nightly(project, sqlite_target.url)], tmp_path)
    assert outcome["success"] is True
    assert _digest(sqlite_target.url) == before
    assert _results_and_ledger_rows(project) == (len(CHECKPOINTS["nightly"]), 3)
    site = project / "uncommitted" / "data_docs" / "local_site"
    assert (site / "index.html").is_file() and (site / "overview.html").is_file()
    pages = list((site / "validations").rglob("*.html"))
    assert len(pages) == len(CHECKPOINTS["nightly"])


def _with_docs_action(checkpoint: Path) -> None:
    """The checkpoint's data docs action, which a private project's copy leaves out."""
    config = json.loads(checkpoint.read_text())
    config["actions"] = [{"name": "update_data_docs", "site_names": [], "type": "update_data_docs"}]
    checkpoint.write_text(json.dumps(config, indent=2))


def test_a_project_naming_code_of_its_own_does_not_load_on_gx_path_unless_opted_in(
    built_project, sqlite_target, tmp_path
):
    """A project is data on GX's path too (docs/reliability.md, 3a): a checkpoint naming a
    module of its own stops the context from loading, before GX imports it; the environment's
    opt-in lets GX go on (and fail to find that module, which is the project's business)."""
    materialise("healthy_baseline", sqlite_target.url)
    project = private_project(built_project, tmp_path / "project")
    checkpoint = project / "checkpoints" / "nightly.json"
    config = json.loads(checkpoint.read_text())
    config["actions"] = [
        {"name": "x", "type": "update_data_docs", "site_names": [],
         "renderer": {"module_name": "planted_module", "class_name": "Anything"}},
    ]  # fmt: skip
    checkpoint.write_text(json.dumps(config, indent=2))
    job = {"project": str(project), "url": gx_url("sqlite", sqlite_target.url)}
    jobs = [job | {"checkpoint": "nightly"}]
    [refused] = native_runs(jobs, tmp_path)
    assert "actions[0].renderer.class_name: names a class" in refused["message"]
    assert "--allow-project-code" in refused["message"]
    [allowed] = native_runs(jobs, tmp_path, {"KANDEV_DQ_ALLOW_PROJECT_CODE": "1"})
    assert "--allow-project-code" not in allowed.get("message", "")


def test_gx_path_reads_the_store_through_a_read_only_connection(target):
    """With no pinned snapshot (a checkpoint run through GX's API), a family of facts is read
    through kandev-dq's read-only connection to the data source's URL, not GX's read-write
    engine: a statement that writes fails, and the store keeps nothing of it."""
    import sqlalchemy as sa

    from kandev_dq.store.access import gx_facts

    materialise("healthy_baseline", target.url)
    gx_engine = sa.create_engine(gx_url(target.dialect, target.url))  # as GX makes its engine

    def planting(conn):
        conn.exec_driver_sql("CREATE TABLE planted (a integer)")
        return {}

    try:
        with pytest.raises(sa.exc.DBAPIError, match="read-only|readonly"):
            gx_facts(gx_engine, "planting", planting)
    finally:
        gx_engine.dispose()
    assert "planted" not in sa.inspect(target.engine).get_table_names()


def _activated_now(url: str, dialect: str):
    """A store activated an hour ago with a healthy subagent (the live window is real time)."""
    import datetime as dt

    import sqlalchemy as sa

    from kandev_dq.contract.instants import Instant
    from kandev_dq.lab.storebuilder import StoreBuilder

    engine = sa.create_engine(f"sqlite:///{url}" if dialect == "sqlite" else url)
    store = StoreBuilder(engine).create()
    capture = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    key = Instant.from_datetime(capture).rfc3339nano()
    store.keys(key, "", key)
    session = store.session()
    store.subagent_message(session, capture + dt.timedelta(minutes=1), "toolu_a")
    store.subagent_row(session, "toolu_a", capture + dt.timedelta(minutes=1))
    return store, session, engine


def test_the_live_checkpoint_through_gx_gives_the_cli_verdict_and_moves_its_window(
    stores, built_project, tmp_path
):
    """AC-26: the live checkpoint run by name through GX's API finds its last watermark in
    the records database as ``kandev-dq check`` does, and reports a stopped writer alike."""
    import datetime as dt

    from kandev_dq.records import Records, records_url

    twins = [stores.new(), stores.new()]
    built = [_activated_now(url, stores.dialect) for url in twins]
    cli = private_project(built_project, tmp_path / "cli-live")
    native = private_project(built_project, tmp_path / "gx-live")
    job = {"project": str(native), "url": gx_url(stores.dialect, twins[1]), "checkpoint": "live"}
    for round_ in range(2):
        report = run_check(cli, twins[0], "live")
        [outcome] = native_runs([job], tmp_path)
        assert "raised" not in outcome, outcome
        assert outcome["success"] == report.success, round_
        assert failing(outcome["results"]) == cli_failing(report), round_
        for store, session, _ in built:  # the writer stops
            store.subagent_message(session, dt.datetime.now(dt.UTC), f"toolu_missed_{round_}")
    assert not report.success
    assert ("live_writer_health", "expect_no_writer_shortfall_since_capture_since", "critical") in (
        failing(outcome["results"])
    )
    with Records(records_url(native)) as records:
        newest = max(
            (key for key in records.result_keys() if key[0] == "live_writer_health"),
            key=lambda key: key[-2],
        )
        stored = json.loads(records.get_result(newest))
    windows = [r["result"]["details"]["live_window"] for r in stored["results"]]
    assert all(w["start"] is not None and w["previous"] for w in windows)
    for _, _, engine in built:
        engine.dispose()


def test_project_root_dir_stops_at_once_naming_context_root_dir_and_writes_nothing(project):
    """GX's usual ``project_root_dir`` reads ``gx/`` under it: the project's guard there stops
    the load with the call that works, before GX writes a file."""
    import great_expectations as gx

    from kandev_dq.errors import KandevDqError

    def files() -> dict[Path, bytes | None]:
        return {p: p.read_bytes() if p.is_file() else None for p in project.rglob("*")}

    before = files()
    with pytest.raises(KandevDqError) as refused:
        gx.get_context(mode="file", project_root_dir=project)
    assert f"gx.get_context(mode='file', context_root_dir={str(project)!r})" in str(refused.value)
    assert files() == before  # no folder made, no file written or changed
    context = gx.get_context(mode="file", context_root_dir=project)
    assert context.checkpoints.get("nightly").name == "nightly"


def test_gx_path_takes_the_store_in_every_form_check_takes(target, built_project, tmp_path):
    """``$KANDEV_STORE_URL`` on GX's path, as ``--store`` takes it: a SQLite file's plain path,
    a ``postgresql://`` URL and a libpq string give the verdict of the SQLAlchemy URL; a path
    with no file, or a ``sqlite://`` URL of one, is refused in ``check``'s words, and no file
    is made there."""
    from urllib.parse import unquote

    from sqlalchemy.engine import make_url

    materialise("healthy_baseline", target.url)
    target.engine.dispose()
    project = private_project(built_project, tmp_path / "project")
    if target.dialect == "sqlite":
        spellings = [target.url, str(Path(target.url).relative_to(tmp_path))]
    else:
        url = make_url(target.url)
        schema = unquote(url.query["options"]).removeprefix("-csearch_path=")
        spellings = [
            target.url.replace("postgresql+psycopg://", "postgresql://"),
            f"host={url.host} port={url.port or 5432} dbname={url.database} "
            f"user={url.username} options='-csearch_path={schema}'",
        ]
    missing = tmp_path / "missing.db"
    jobs = [
        {"project": str(project), "url": spelled, "checkpoint": "nightly"}
        for spelled in [*spellings, str(missing), f"sqlite:///{missing}"]
    ]
    *found, refused, refused_url = native_runs(jobs, tmp_path)
    assert [outcome.get("success") for outcome in found] == [True, True], found
    assert (
        refused
        == refused_url
        == {
            "raised": "StoreError",
            "message": f"no SQLite store at {missing}: the file does not exist",
        }
    )
    assert not missing.exists()
