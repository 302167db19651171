"""A stranger's project is data, not a channel (docs/reliability.md, 3a): without
``--allow-project-code`` it sends nothing out, runs no SQL of its own and writes nothing outside
its folder, because it may hold only what kandev-dq itself writes."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from kandev_dq.contract.rule_index import RULE_INDEX
from kandev_dq.errors import KandevDqError
from kandev_dq.gx import adapter as gx_adapter
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project import vetting
from kandev_dq.project.files import PROJECT_FILE, refuse_project_code
from tests.gxhelpers import REPO, native_runs

CAPTURE = "2026-07-30T01:39:37.271235Z"
SQL = "SELECT key FROM {batch} WHERE key IN (SELECT name FROM sqlite_master)"


# --- editing a project as a hostile author would -------------------------------------------------


def _edit_yml(project: Path, change: Callable[[dict], None]) -> None:
    yaml = YAML()
    path = project / PROJECT_FILE
    config = yaml.load(path.read_text(encoding="utf-8"))
    change(config)
    with path.open("w", encoding="utf-8") as handle:
        yaml.dump(config, handle)


def _edit_json(path: Path, change: Callable[[dict], None]) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")


def _add_action(project: Path, action: dict, checkpoint: str = "nightly") -> None:
    _edit_json(
        project / "checkpoints" / f"{checkpoint}.json", lambda d: d["actions"].append(action)
    )


def _add_expectation(project: Path, expectation: dict, suite: str = "activation") -> None:
    _edit_json(
        project / "expectations" / f"{suite}.json", lambda d: d["expectations"].append(expectation)
    )


def _results_store(base_directory: str) -> Callable[[dict], None]:
    """GX's own results store on its own filesystem backend, writing where it is told."""

    def change(config: dict) -> None:
        config["stores"]["validation_results_store"] = {
            "class_name": "ValidationResultsStore",
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": base_directory,
            },
        }

    return change


def _site_directory(base_directory: str, site: str = "local_site") -> Callable[[dict], None]:
    def change(config: dict) -> None:
        sites = config["data_docs_sites"]
        if site not in sites:
            sites[site] = {
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend"},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            }
        sites[site]["store_backend"]["base_directory"] = base_directory

    return change


def _refused(project: Path) -> str:
    with pytest.raises(KandevDqError) as refused:
        refuse_project_code(project)
    message = str(refused.value)
    assert "\n" not in message and message.endswith("pass --allow-project-code to use it")
    return message


# --- each trick, refused naming its file and entry -----------------------------------------------


SLACK = {
    "name": "x",
    "type": "slack",
    "notify_on": "all",
    "slack_webhook": "http://127.0.0.1:9/slack?r=${KANDEV_DQ_RECORDS_URL}&h=${HOME}",
}


def test_an_action_with_a_variable_in_its_url_is_refused(project):
    _add_action(project, SLACK)
    assert _refused(project).startswith(
        f"{project / 'checkpoints' / 'nightly.json'}: actions[1].slack_webhook: substitutes the "
        "variable 'KANDEV_DQ_RECORDS_URL'"
    )


@pytest.mark.parametrize(
    "action",
    [
        {"name": "x", "type": "slack", "slack_webhook": "http://127.0.0.1:9/hook"},
        {"name": "x", "type": "microsoft", "teams_webhook": "http://127.0.0.1:9/hook"},
        {"name": "x", "type": "kandev_dq_api", "url": "http://127.0.0.1:9/"},
        {"name": "x", "type": "email", "smtp_address": "127.0.0.1", "smtp_port": "9"},
    ],
    ids=["slack", "teams", "api", "email"],
)
def test_any_action_but_the_docs_update_is_refused(project, action):
    _add_action(project, action, "pre_release")
    message = _refused(project)
    assert message.startswith(f"{project / 'checkpoints' / 'pre_release.json'}: actions[1]")
    assert "is not an entry kandev-dq writes" in message or "is not update_data_docs" in message


def test_a_bare_dollar_variable_and_a_secret_manager_are_refused(project):
    _add_action(project, {"name": "docs", "type": "update_data_docs", "site_names": ["$HOME"]})
    assert "actions[1].site_names[0]: substitutes the variable 'HOME'" in _refused(project)
    _edit_json(project / "checkpoints" / "nightly.json", lambda d: d["actions"].pop())
    _edit_yml(project, _site_directory("secret|arn:aws:secretsmanager:eu-west-3:1:secret:x"))
    assert "base_directory: reads a secret manager" in _refused(project)


def test_a_config_variables_file_outside_the_project_is_refused(project, tmp_path):
    home = tmp_path / "victim_home"
    home.mkdir()
    (home / "secrets.yml").write_text("aws_secret: s3cr3t\n")
    _edit_yml(project, lambda c: c.update(config_variables_file_path="../victim_home/secrets.yml"))
    message = _refused(project)
    assert message.startswith(f"{project / PROJECT_FILE}: config_variables_file_path: ")
    assert "'../victim_home/secrets.yml' is outside the project folder" in message
    inside = project / "settings" / "config_variables.yml"
    inside.parent.mkdir()
    inside.symlink_to(home / "secrets.yml")  # a link out is outside too
    _edit_yml(project, lambda c: c.update(config_variables_file_path=str(inside)))
    assert "is outside the project folder" in _refused(project)


def test_a_config_variables_file_may_not_set_kandev_dq_settings(project):
    variables = project / "uncommitted" / "config_variables.yml"
    _edit_yml(project, lambda c: c.update(config_variables_file_path=str(variables)))
    refuse_project_code(project)  # no such file yet: GX reads nothing
    variables.parent.mkdir()
    variables.write_text("my_team: data\n")
    refuse_project_code(project)  # inside, and none of kandev-dq's settings: data
    variables.write_text("KANDEV_DQ_SLACK_WEBHOOK: http://127.0.0.1:9/hook\n")
    assert _refused(project).startswith(
        f"{variables}: KANDEV_DQ_SLACK_WEBHOOK: sets a kandev-dq setting"
    )
    variables.write_text("token: ${HOME}\n")
    assert _refused(project).startswith(f"{variables}: token: substitutes the variable 'HOME'")


def test_a_variable_in_a_docs_folder_is_refused(project):
    _edit_yml(project, _site_directory("uncommitted/${SECRET_TOKEN}/site/"))
    assert _refused(project).startswith(
        f"{project / PROJECT_FILE}: data_docs_sites.local_site.store_backend.base_directory: "
        "substitutes the variable 'SECRET_TOKEN'"
    )


@pytest.mark.parametrize("where", ["absolute", "dotdot", "symlink"])
def test_docs_written_outside_the_project_are_refused(project, tmp_path, where):
    outside = tmp_path / "outside"
    outside.mkdir()
    if where == "absolute":
        folder = str(outside)
    elif where == "dotdot":
        folder = "uncommitted/../../outside/"
    else:
        (project / "results").symlink_to(outside)
        folder = "results/"
    _edit_yml(project, _site_directory(folder))
    assert _refused(project).startswith(
        f"{project / PROJECT_FILE}: data_docs_sites.local_site.store_backend.base_directory: "
        f"{folder!r} is outside the project folder"
    )


def test_gx_own_results_store_is_not_a_class_kandev_dq_writes(project):
    """Results go to the records database through kandev-dq's store; GX's filesystem results
    store, even inside the project, is not on the allowlist."""
    _edit_yml(project, _results_store("uncommitted/validations/"))
    assert _refused(project).startswith(
        f"{project / PROJECT_FILE}: stores.validation_results_store: "
        "'great_expectations.data_context.store.ValidationResultsStore' is not a class "
        "kandev-dq writes for a store (allowed: kandev_dq.gx.suites_store.ExpectationsStore, "
    )


def _stores_named(modules: dict[str, str]) -> Callable[[dict], None]:
    """The two stores' modules renamed: ``{today's: the one named instead}``."""

    def change(config: dict) -> None:
        stores = config["stores"]
        for entry in (
            stores["expectations_store"],
            stores["validation_results_store"],
            stores["validation_results_store"]["store_backend"],
        ):
            entry["module_name"] = modules.get(entry["module_name"], entry["module_name"])

    return change


def test_the_stores_earlier_modules_are_accepted_as_a_closed_list(project):
    """A project the previous release wrote names its stores by their earlier modules: those
    two pass the vetting; any other module of that package does not, nor a class of the other
    store's module."""
    _edit_yml(project, _stores_named(_earlier_names()))
    refuse_project_code(project)
    _edit_yml(project, _stores_named({"kandev_dq.run.results_store": "kandev_dq.run.check"}))
    assert "'kandev_dq.run.check.ValidationResultsStore' is not a class" in _refused(project)


def test_an_earlier_store_module_takes_only_its_own_classes(project):
    swapped = {"kandev_dq.gx.suites_store": "kandev_dq.run.results_store"}
    _edit_yml(project, _stores_named(swapped))
    assert "'kandev_dq.run.results_store.ExpectationsStore' is not a class" in _refused(project)


def _earlier_names() -> dict[str, str]:
    from kandev_dq.project.vetting import EARLIER_MODULES

    return {today: earlier for earlier, today in EARLIER_MODULES.items()}


@pytest.mark.parametrize(
    "link, entry",
    [
        (
            "uncommitted",  # the docs folder in it resolves outside first
            "data_docs_sites.local_site.store_backend.base_directory: "
            "'uncommitted/data_docs/local_site/' is outside the project folder",
        ),
        ("uncommitted/records.db", "uncommitted: uncommitted/records.db is a link out"),
        (
            "uncommitted/data_docs/local_site/index.html",
            "uncommitted: uncommitted/data_docs/local_site/index.html is a link out",
        ),
        (
            "expectations/activation.json",
            "stores.expectations_store.store_backend.base_directory: "
            "expectations/activation.json is a link out",
        ),
    ],
)
def test_a_link_out_of_a_folder_kandev_dq_writes_is_refused(project, tmp_path, link, entry):
    """GX and the records database write into these folders: a checkout linking a page or
    the records file to one of the user's files would have it overwritten."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "file").write_text("mine")
    path = project / link
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.symlink_to(victim if link == "uncommitted" else victim / "file")
    assert _refused(project).startswith(f"{project / PROJECT_FILE}: {entry}")


def test_a_check_lists_the_folders_of_earlier_runs_pages_and_does_not_walk_them(project, tmp_path):
    """A check writes its own run's pages only: a link in an earlier run's folder of pages is
    refused by the whole vetting (``kandev-dq docs`` rewrites those pages) but not looked for
    by a check's, whose cost must not grow with the runs kept; a run's folder that is itself a
    link out (a prune removes pages in it) is refused by both."""
    victim = tmp_path / "victim"
    victim.mkdir()
    run_name = project / "uncommitted/data_docs/local_site/validations/live_rows/live@a"
    earlier = run_name / "20261204T193100.123456Z"
    earlier.mkdir(parents=True)
    (earlier / "whole_table.html").symlink_to(victim / "file")
    shown = earlier.relative_to(project) / "whole_table.html"
    assert _refused(project).startswith(
        f"{project / PROJECT_FILE}: uncommitted: {shown} is a link out"
    )
    refuse_project_code(project, own_run_only=True)
    (earlier / "whole_table.html").unlink()
    earlier.rmdir()
    earlier.symlink_to(victim)
    for own_run_only in (False, True):
        with pytest.raises(KandevDqError, match=f"uncommitted: {earlier.relative_to(project)} is"):
            refuse_project_code(project, own_run_only=own_run_only)
    assert vetting.RUN_FOLDER.fullmatch(
        datetime.now(UTC).strftime(gx_adapter.RUN_TIME_FORMAT)  # as GX names a run's folder
    )


def test_a_context_kandev_dq_loads_is_vetted_once(project, monkeypatch):
    """GX's path vets a project when it builds the expectations store: a context kandev-dq
    loads itself was vetted just before, and is not walked again."""
    from kandev_dq.gx.context import load_context
    from kandev_dq.project import files as project_module

    vetted = []
    real = project_module.vet_project
    monkeypatch.setattr(
        project_module, "vet_project", lambda root, **kw: vetted.append(root) or real(root, **kw)
    )
    load_context(project)
    assert len(vetted) == 1


@pytest.mark.parametrize(
    "store, backend, entry",
    [
        (
            "checkpoint_store",
            {"class_name": "TupleS3StoreBackend", "bucket": "b"},
            "store_backend: 'great_expectations.data_context.store.TupleS3StoreBackend' is not "
            "a class kandev-dq writes for a store backend (allowed: "
            "great_expectations.data_context.store.TupleFilesystemStoreBackend)",
        ),
        (
            "validation_results_store",
            {"class_name": "DatabaseStoreBackend", "url": "postgresql://127.0.0.1:9/x"},
            "store_backend: 'great_expectations.data_context.store.DatabaseStoreBackend' is not "
            "a class kandev-dq writes for a store backend (allowed: "
            "kandev_dq.gx.results_store.RecordsStoreBackend)",
        ),
        (
            "checkpoint_store",
            {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": "u/",
                "root_directory": "/",
            },
            "store_backend.root_directory: is not an entry kandev-dq writes",
        ),
        (
            "expectations_store",
            {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": "u/",
                "filepath_prefix": "../../x",
            },
            "store_backend.filepath_prefix: is not an entry kandev-dq writes",
        ),
        (
            "validation_results_store",
            {
                "module_name": "kandev_dq.gx.results_store",
                "class_name": "RecordsStoreBackend",
                "fixed_length_key": True,
            },
            "store_backend.fixed_length_key: is not an entry kandev-dq writes",
        ),
    ],
    ids=["s3", "database", "root_directory", "filepath_prefix", "records_extra_key"],
)
def test_store_backends_off_the_allowlist_are_refused(project, store, backend, entry):
    _edit_yml(project, lambda c: c["stores"][store].update(store_backend=backend))
    message = _refused(project)
    assert message.startswith(f"{project / PROJECT_FILE}: stores.{store}.{entry}"), message


def test_a_suite_may_hold_only_kandev_dq_rules_with_their_declared_arguments(project):
    suite = project / "expectations" / "activation.json"
    last = len(json.loads(suite.read_text())["expectations"])
    _add_expectation(
        project,
        {"type": "unexpected_rows_expectation", "kwargs": {"unexpected_rows_query": SQL}},
    )
    assert _refused(project).startswith(
        f"{suite}: expectations[{last}].type: 'unexpected_rows_expectation' is not one of "
        "kandev-dq's rules"
    )
    _edit_json(suite, lambda d: d["expectations"].pop())
    _add_expectation(
        project,
        {"type": "expect_activation_keys_to_be_paired", "kwargs": {"row_condition": "1=1"}},
    )
    assert _refused(project).startswith(
        f"{suite}: expectations[{last}].kwargs.row_condition: is not an entry kandev-dq writes"
    )
    _edit_json(suite, lambda d: d["expectations"].pop())
    windowed = project / "expectations" / "backfill.json"
    _edit_json(windowed, lambda d: d["expectations"][0]["kwargs"].update(window_minutes=30))
    _edit_json(suite, lambda d: d["expectations"][0].update(severity="warning"))
    refuse_project_code(project)  # a declared argument and another severity: data


def test_sql_reaching_the_store_through_a_data_source_is_refused(project):
    def query_asset(config: dict) -> None:
        asset = config["fluent_datasources"]["kandev_store"]["assets"]["kandev_meta"]
        asset["type"] = "query"
        asset["query"] = SQL

    _edit_yml(project, query_asset)
    assert "assets.kandev_meta.query: is not an entry kandev-dq writes" in _refused(project)
    _edit_yml(
        project,
        lambda c: c["fluent_datasources"]["kandev_store"]["assets"]["kandev_meta"].pop("query"),
    )
    assert "assets.kandev_meta.type: is not a table asset" in _refused(project)
    _edit_yml(
        project,
        lambda c: c["fluent_datasources"]["kandev_store"].update(
            connection_string="postgresql://127.0.0.1:9/x",
            assets={},
        ),
    )
    assert "kandev_store.connection_string: is not ${KANDEV_STORE_URL}" in _refused(project)


def test_what_init_writes_and_this_checkout_pass(built_project):
    refuse_project_code(built_project)
    refuse_project_code(REPO)


def _allowlisted(entry: vetting.Entry) -> set[str]:
    found = set()
    for pair, keys in entry.classes.items():
        found |= {".".join(pair)} if pair else set()
        for nested in keys.values():
            nested = nested.entry if isinstance(nested, vetting.Sections) else nested
            found |= _allowlisted(nested) if nested else set()
    return found


def test_the_allowlist_is_what_init_writes_and_what_the_docs_list(built_project):
    """Every class on the allowlist is one ``kandev-dq init`` writes (by its class name), and
    docs/reliability.md §3a lists each."""
    allowed = set().union(*(_allowlisted(entry) for entry in vetting.ENTRIES.values()))
    config = YAML(typ="safe").load((built_project / PROJECT_FILE).read_text())
    written = {m["class_name"] for _, m in vetting._mappings(config) if "class_name" in m}
    assert {name.rpartition(".")[2] for name in allowed} == written
    section = (REPO / "docs" / "reliability.md").read_text().split("## 3a.")[1].split("\n## ")[0]
    assert sorted(name for name in allowed if f"`{name}`" not in section) == []


def test_the_declared_arguments_are_the_classes_own_fields():
    """The vetting reads no GX: its table of arguments is held here to what each class
    declares beyond GX's own fields, and its names of a project's parts and variables to the
    modules that write and read them."""
    from great_expectations.expectations.expectation import BatchExpectation
    from great_expectations.expectations.registry import get_expectation_impl

    import kandev_dq.expectations  # noqa: F401 - registers the types with GX
    from kandev_dq.records import RECORDS_VARIABLE

    gx_own = set(BatchExpectation.__fields__)
    assert {
        rule.expectation: frozenset(set(get_expectation_impl(rule.expectation).__fields__) - gx_own)
        for rule in RULE_INDEX
    } == vetting.DECLARED_KWARGS
    assert vetting.RECORDS_VARIABLE == RECORDS_VARIABLE


# --- every trick at once, through the CLI ------------------------------------------------------


class Listener:
    """A TCP listener on loopback: counts connections and keeps what each sent."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


def _hostile_checkout(project: Path, outside: Path, port: int) -> None:
    """Every trick in one checkout: actions posting variables to a listener, a config variables
    file outside the project, a variable in a docs folder, results and docs written to an
    absolute folder, and a suite holding GX's SQL expectation."""
    hook = f"http://127.0.0.1:{port}"
    for checkpoint in ("nightly", "pre_release"):
        _add_action(
            project,
            {
                "name": "slack",
                "type": "slack",
                "notify_on": "all",
                "slack_webhook": f"{hook}/slack?r=${{KANDEV_DQ_RECORDS_URL}}"
                "&w=${KANDEV_DQ_SLACK_WEBHOOK}&h=${HOME}",
            },
            checkpoint,
        )
        _add_action(
            project,
            {
                "name": "teams",
                "type": "microsoft",
                "notify_on": "all",
                "teams_webhook": f"{hook}/teams?k=${{aws_secret}}",
            },
            checkpoint,
        )
    _edit_yml(project, lambda c: c.update(config_variables_file_path="../outside/secrets.yml"))
    _edit_yml(project, _site_directory("uncommitted/${SECRET_TOKEN}/site/", "leak_site"))
    _edit_yml(project, _results_store(str(outside / "results")))
    _edit_yml(project, _site_directory(str(outside / "site")))
    _add_expectation(
        project,
        {
            "type": "unexpected_rows_expectation",
            "kwargs": {"unexpected_rows_query": SQL},
            "meta": {},
            "severity": "critical",
        },
    )


def _outside_the_project(root: Path, project: Path) -> dict[str, str]:
    """Every file and folder under ``root`` but the project, with its content's digest."""
    seen = {}
    for path in sorted(root.rglob("*")):
        if path == project or path.is_relative_to(project):
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        seen[str(path.relative_to(root))] = digest
    return seen


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from kandev_dq.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_a_hostile_checkout_sends_nothing_runs_no_sql_and_writes_nothing_outside(
    sqlite_target, project, tmp_path
):
    """Exit 2 from ``check``, ``audit``, ``history`` and ``docs``, no connection to the listener
    its URLs name, no file or folder changed outside the project (its store, the victim's home
    and the folders its stores name included). The refusal comes before the store, the records
    database or GX is opened, so one dialect proves it: SQLite, whose store is a file the
    snapshot covers. The same checkout run with ``--allow-project-code`` shows each channel is
    real: the listener receives the secrets and files appear outside."""
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    sqlite_target.engine.dispose()
    outside = tmp_path / "outside"
    home = outside / "victim_home"
    home.mkdir(parents=True)
    (outside / "secrets.yml").write_text("aws_secret: AWS-S3CR3T\n", encoding="utf-8")
    listener = Listener()
    try:
        _hostile_checkout(project, outside, listener.port)
        env = {k: v for k, v in os.environ.items() if k != "KANDEV_STORE_URL"}
        env |= {
            "HOME": str(home),
            "SECRET_TOKEN": "TOKEN-S3CR3T",
            "KANDEV_DQ_SLACK_WEBHOOK": "http://127.0.0.1:9/REAL-WEBHOOK",
            "KANDEV_DQ_RECORDS_URL": str(project / "uncommitted" / "records.db"),
        }
        before = _outside_the_project(tmp_path, project)
        store = ("--store", sqlite_target.url, "--project", str(project))
        for args in (
            ("check", *store),
            ("check", *store, "--checkpoint", "pre_release", "--format", "json"),
            ("audit", *store, "--out", str(tmp_path / "audit")),
            ("history", *store),
            ("docs", "--project", str(project)),
        ):
            done = _run(*args, env=env)
            assert done.returncode == 2, (args, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr, done.stderr
            assert f"{project / PROJECT_FILE}: stores.validation_results_store:" in done.stderr
            assert "--allow-project-code" in done.stderr + done.stdout
            for secret in ("AWS-S3CR3T", "TOKEN-S3CR3T", "REAL-WEBHOOK"):
                assert secret not in done.stdout + done.stderr
        assert listener.received == []
        assert _outside_the_project(tmp_path, project) == before
        assert not (project / "uncommitted").exists()  # nothing opened inside either

        allowed = _run("check", *store, "--allow-project-code", env=env)
        assert allowed.returncode in (0, 1), allowed.stderr
    finally:
        listener.close()
    sent = urllib.parse.unquote(b"".join(listener.received).decode("latin-1"))
    assert "REAL-WEBHOOK" in sent and str(home) in sent and "AWS-S3CR3T" in sent
    written = set(_outside_the_project(tmp_path, project)) - set(before)
    assert any(name.startswith("outside/results/") for name in written), written
    assert "outside/site/index.html" in written


@pytest.mark.parametrize(
    "file, change",
    [
        (PROJECT_FILE, lambda c: c.clear() or c.update(stores=[1])),
        (PROJECT_FILE, lambda c: c.update(checkpoint_store_name=["x"])),
        (PROJECT_FILE, lambda c: c.update(config_variables_file_path=7)),
        (PROJECT_FILE, lambda c: c["fluent_datasources"]["kandev_store"].update(assets=[1])),
        (PROJECT_FILE, lambda c: c["data_docs_sites"]["local_site"].update(store_backend="x")),
        (
            PROJECT_FILE,
            lambda c: c["data_docs_sites"]["local_site"]["store_backend"].update(class_name=[1]),
        ),
        ("checkpoints/nightly.json", lambda d: d.update(actions={"a": 1})),
        ("checkpoints/nightly.json", lambda d: d["actions"].append("\x1b[2J")),
        ("expectations/rows.json", lambda d: d["expectations"].append({"type": ["x"]})),
        ("expectations/rows.json", lambda d: d["expectations"][0].update(kwargs=[1])),
        ("validation_definitions/rows.json", lambda d: d.update(data="x")),
    ],
)
def test_a_project_of_odd_shapes_is_refused_in_one_line(project, file, change):
    if file == PROJECT_FILE:
        _edit_yml(project, change)
    else:
        _edit_json(project / file, change)
    message = _refused(project)
    assert message.startswith(str(project / file)) and "\x1b" not in message


def test_a_project_file_that_is_not_a_mapping_is_refused(project):
    (project / PROJECT_FILE).write_text("- a\n- b\n")
    assert _refused(project) == (
        f"{project / PROJECT_FILE}: (top): is a list, not a mapping; "
        "pass --allow-project-code to use it"
    )


# --- the allowlist: every class a project names is one kandev-dq writes --------------------------


def _second_project(folder: Path) -> Path:
    """A GX project whose plugins hold a module that leaves a file beside itself when imported:
    what a site naming ``great_expectations.get_context`` would load and run."""
    plugins = folder / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "planted_theme.py").write_text(
        "from pathlib import Path\n(Path(__file__).parent / 'RAN').write_text('ran')\n"
        "class Store:\n    def __init__(self, **kw):\n        pass\n",
        encoding="utf-8",
    )
    (folder / PROJECT_FILE).write_text(
        "config_version: 4.0\nplugins_directory: plugins/\nstores:\n"
        "  themed:\n    module_name: planted_theme\n    class_name: Store\n",
        encoding="utf-8",
    )
    return plugins / "RAN"


def _gx_callable_site(project: Path, theme: Path) -> Callable[[dict], None]:
    def change(config: dict) -> None:
        config["data_docs_sites"]["theme"] = {
            "module_name": "great_expectations",
            "class_name": "get_context",
            "mode": "file",
            "context_root_dir": str(theme),
        }

    return change


def test_a_gx_callable_as_a_site_is_refused_before_its_project_runs(sqlite_target, project):
    """``great_expectations.get_context`` as a data docs site would load a second project,
    which the vetting never reads, and run its plugins: refused as a class kandev-dq does not
    write, by ``check``, ``audit`` and ``docs`` and on GX's own path, before anything runs.
    With the opt-in the channel is real: the second project's code runs."""
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    sqlite_target.engine.dispose()
    ran = _second_project(project / "theme")
    _edit_yml(project, _gx_callable_site(project, project / "theme"))
    assert _refused(project).startswith(
        f"{project / PROJECT_FILE}: data_docs_sites.theme: 'great_expectations.get_context' is "
        "not a class kandev-dq writes for a data docs site (allowed: "
        "kandev_dq.report.site.KandevSiteBuilder)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KANDEV_")}
    store = ("--store", sqlite_target.url, "--project", str(project))
    for args in (
        ("check", *store),
        ("audit", *store, "--out", str(project.parent / "audit")),
        ("docs", "--project", str(project)),
    ):
        done = _run(*args, env=env)
        assert done.returncode == 2, (args, done.stderr)
        assert "data_docs_sites.theme: 'great_expectations.get_context'" in done.stderr
    job = {
        "project": str(project),
        "url": f"sqlite:///{sqlite_target.url}",
        "checkpoint": "nightly",
    }
    [native] = native_runs([job], project.parent)
    assert "data_docs_sites.theme: 'great_expectations.get_context'" in native["message"]
    assert not ran.exists()

    _run("check", *store, "--allow-project-code", env=env)
    assert ran.exists()  # the channel the allowlist closes


@pytest.mark.parametrize(
    "where, change, entry",
    [
        (
            "store backend",
            lambda c: c["stores"]["checkpoint_store"]["store_backend"].update(
                filepath_template={"module_name": "planted", "class_name": "Anything"}
            ),
            "stores.checkpoint_store.store_backend.filepath_template: is not an entry",
        ),
        (
            "index renderer",
            lambda c: c["data_docs_sites"]["local_site"]["site_index_builder"]["renderer"].update(
                module_name="great_expectations.render.renderer"
            ),
            "data_docs_sites.local_site.site_index_builder.renderer: "
            "'great_expectations.render.renderer.KandevSiteIndexPageRenderer' is not a class",
        ),
        (
            "section builder",
            lambda c: c["data_docs_sites"]["local_site"]["site_section_builders"][
                "validations"
            ].update(class_name="DefaultSiteSectionBuilder", source_store_name="x"),
            "data_docs_sites.local_site.site_section_builders.validations: "
            "'great_expectations.render.renderer.site_builder.DefaultSiteSectionBuilder' is not",
        ),
        (
            "site key",
            lambda c: c["data_docs_sites"]["local_site"].update(custom_views_directory="views/"),
            "data_docs_sites.local_site.custom_views_directory: is not an entry",
        ),
        (
            "datasource metadata",
            lambda c: c["fluent_datasources"]["kandev_store"]["assets"]["kandev_meta"][
                "batch_metadata"
            ].update(x={"module_name": "planted", "class_name": "Anything"}),
            "fluent_datasources.kandev_store.assets.kandev_meta.batch_metadata.x.class_name: "
            "names a class where kandev-dq names none",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else None,
)
def test_a_class_nested_anywhere_in_the_yml_is_on_the_allowlist(project, where, change, entry):
    _edit_yml(project, change)
    assert _refused(project).startswith(f"{project / PROJECT_FILE}: {entry}"), where


def test_an_unknown_key_or_a_class_in_an_action_or_a_suite_is_refused(project):
    _add_action(project, {"name": "docs", "type": "update_data_docs", "notify_on": "all"})
    assert _refused(project).startswith(
        f"{project / 'checkpoints' / 'nightly.json'}: actions[1].notify_on: is not an entry "
        "kandev-dq writes"
    )
    _edit_json(project / "checkpoints" / "nightly.json", lambda d: d["actions"].pop())
    _edit_json(
        project / "checkpoints" / "nightly.json",
        lambda d: d.update(
            result_format={"result_format": "COMPLETE", "return_unexpected_index_query": True}
        ),
    )
    assert "result_format.return_unexpected_index_query: is not an entry" in _refused(project)
    _edit_json(
        project / "checkpoints" / "nightly.json",
        lambda d: d.update(result_format={"result_format": "COMPLETE"}),
    )
    suite = project / "expectations" / "rows.json"
    _edit_json(suite, lambda d: d["meta"].update(renderer={"class_name": "Anything"}))
    assert _refused(project).startswith(
        f"{suite}: meta.renderer.class_name: names a class where kandev-dq names none"
    )


@pytest.mark.parametrize(
    "kept",
    ["ValidationResultsStore", "RecordsStoreBackend", "KandevSiteBuilder"],
)
def test_each_kandev_dq_class_gx_builds_vets_the_project_on_gx_path(project, kept):
    """Whichever kandev-dq class GX builds from a project's yml first, it vets the project
    before GX goes on: a checkpoint naming a class of its own never loads."""
    from kandev_dq.project.vetting import vet_on_gx_path

    _add_action(
        project,
        {
            "name": "x",
            "type": "update_data_docs",
            "renderer": {"module_name": "planted", "class_name": "A"},
        },
    )
    with pytest.raises(KandevDqError, match=r"actions\[1\]\.renderer\.class_name: names a class"):
        vet_on_gx_path(project)
    from kandev_dq.gx.results_store import RecordsStoreBackend, ValidationResultsStore
    from kandev_dq.report.site import KandevSiteBuilder

    built = {
        "ValidationResultsStore": lambda: ValidationResultsStore(
            store_backend={"class_name": "InMemoryStoreBackend"},
            runtime_environment={"root_directory": str(project)},
        ),
        "RecordsStoreBackend": lambda: RecordsStoreBackend(root_directory=str(project)),
        "KandevSiteBuilder": lambda: KandevSiteBuilder(
            data_context=type("Context", (), {"root_directory": str(project)})(),
            store_backend={"class_name": "InMemoryStoreBackend"},
        ),
    }
    with pytest.raises(KandevDqError, match=r"actions\[1\]\.renderer\.class_name: names a class"):
        built[kept]()


def test_gx_path_refuses_a_project_that_swaps_kandev_dq_expectations_store(sqlite_target, project):
    """On GX's own path a project that replaced kandev-dq's expectations store with GX's is
    still vetted, by the next kandev-dq class GX builds (the results store), before any run."""
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    sqlite_target.engine.dispose()
    _edit_yml(
        project,
        lambda c: c["stores"]["expectations_store"].pop("module_name"),
    )
    job = {
        "project": str(project),
        "url": f"sqlite:///{sqlite_target.url}",
        "checkpoint": "nightly",
    }
    [native] = native_runs([job], project.parent)
    assert native["message"].startswith(
        f"{project / PROJECT_FILE}: stores.expectations_store: "
        "'great_expectations.data_context.store.ExpectationsStore' is not a class kandev-dq "
        "writes for a store"
    ), native
