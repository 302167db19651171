"""The GX project: which expectations form which suite, which suites each checkpoint runs, and
loading a project safely.

The repository root is a GX file context (``great_expectations.yml`` at the root). Its suites,
validation definitions and checkpoints are generated from the rule index (:func:`suite_plan`)
and :data:`CHECKPOINTS` by :func:`build_project` (also what ``kandev-dq init`` runs), so the
JSON in ``expectations/`` and ``checkpoints/`` never drifts from the code. The store is chosen
at run time: the one data source reads its URL from ``${KANDEV_STORE_URL}``, a config variable
given through GX's runtime environment (never the process environment) and always
password-free; the connections themselves come from kandev-dq (:mod:`kandev_dq.run.gx_adapter`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import uuid
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

from kandev_dq.contract.rule_index import LIVE_SUITES
from kandev_dq.errors import KandevDqError

# What init writes, as data (read without GX; a project's deviations are measured against it).
from kandev_dq.run.plan import CHECKPOINTS, SUITE_NAMES, suite_plan

# The project's parts, named once where the vetting (which reads them before GX) defines them.
# URL_VARIABLE is the GX config variable the data source's URL comes from: users name a store
# with the same environment variable; GX's runtime environment, where kandev-dq puts the URL,
# ranks above it.
from kandev_dq.run.vetting import (
    CHECKPOINT_DIR,
    DEFINITION_DIR,
    PROJECT_FILE,
    SUITE_DIR,
    URL_VARIABLE,
    loading_vetted,
    trust_project_code,
    vet_project,
)

DATASOURCE = "kandev_store"
#: Each suite's data asset: the table it judges first (the keys, the messages, the subagent
#: rows). Every asset is of the one data source, so one run reads them all in one pinned snapshot.
SUITE_ASSETS: dict[str, str] = {
    "activation": "kandev_meta",
    "writer_health": "task_session_messages",
    "rows": "task_session_subagents",
    "schema": "task_session_subagents",
    "backfill": "task_session_messages",
    "live_activation": "kandev_meta",
    "live_writer_health": "task_session_messages",
    "live_rows": "task_session_subagents",
}
BATCH = "whole_table"


def suite_expectations(suite: str) -> list:
    """A suite's GX expectation objects, each at its class's own severity (imports GX)."""
    from great_expectations.expectations.registry import get_expectation_impl

    import kandev_dq.expectations  # noqa: F401 - registers the types with GX

    return [
        get_expectation_impl(planned.type).at_default_severity(**planned.kwargs)
        for planned in suite_plan(suite)
    ]


#: Suite name -> a function building its GX expectations (imported lazily: GX is slow to import).
SUITES: dict[str, Callable[[], list]] = {
    name: functools.partial(suite_expectations, name) for name in SUITE_NAMES
}


def reads_live(checkpoint: str) -> bool:
    """Whether ``checkpoint`` runs a live suite (which reads the live window's settings)."""
    return any(suite in LIVE_SUITES for suite in CHECKPOINTS.get(checkpoint, ()))


def default_project() -> Path:
    """The current directory when it is a project, else the source checkout kandev-dq runs from.

    An installed wheel carries no project (GX keeps results, docs and the key ledger beside
    the project, never inside site-packages): there is none until ``kandev-dq init DIR``.
    """
    here = Path.cwd()
    if (here / PROJECT_FILE).is_file():
        return here
    checkout = Path(__file__).resolve().parents[3]  # <checkout>/plugins/kandev_dq/run
    if (checkout / PROJECT_FILE).is_file() and (checkout / "pyproject.toml").is_file():
        return checkout
    raise KandevDqError(
        f"no GX project: {here} has no {PROJECT_FILE}; pass --project DIR, "
        "or create one with `kandev-dq init DIR`"
    )


class IncompleteSuiteError(KandevDqError):
    """A suite that loaded fewer expectations than it declares."""


def refuse_incomplete_suite(name: str, declared: list[str], loaded: list[str]) -> None:
    """Raise unless every declared expectation type loaded (``loaded`` may repeat types)."""
    missing = list(declared)
    for kind in loaded:
        if kind in missing:
            missing.remove(kind)
    if missing:
        raise IncompleteSuiteError(
            f"suite {name} loaded {len(declared) - len(missing)} of its {len(declared)} "
            f"expectations: {', '.join(sorted(set(missing)))} unknown to this kandev-dq version "
            "or invalid; the run would pass without them"
        )


def refuse_project_code(root: Path, *, own_run_only: bool = False) -> None:
    """Refuse a project holding anything kandev-dq itself would not write: code of its own
    (a ``module_name``, a ``plugins_directory``), actions but the docs update, SQL of its own,
    ``${VAR}`` substitution, stores or docs outside its folder (docs/reliability.md, 3a).

    A project is data: checkouts written by others are checked with it. This reads its files
    before GX does and imports nothing (:mod:`kandev_dq.run.vetting`). ``own_run_only``: the
    caller writes its own run's pages only (:func:`~kandev_dq.run.vetting.vet_project`).
    """
    vet_project(root, own_run_only=own_run_only)


def load_context(
    root: Path,
    store_url: str | None = None,
    *,
    allow_project_code: bool = False,
    own_run_only: bool = False,
):
    """A file context rooted at ``root``, with every kandev-dq expectation registered first.

    ``store_url`` (password-free) is what the data source's ``${KANDEV_STORE_URL}`` resolves
    to: GX's runtime environment ranks above the process environment and the project's config
    variables. (The records database is never a config variable: its URL may hold a password;
    kandev-dq attaches it to the results store, :func:`kandev_dq.run.results_store.attach_records`.)

    Refuses a folder without ``great_expectations.yml`` (GX would silently create an empty
    project there), a project that names Python of its own unless the user opted in with
    ``allow_project_code`` (:func:`refuse_project_code`; ``own_run_only`` for a check), and a
    suite that loads fewer expectations than its JSON holds (GX drops unknown expectation
    types and the checkpoint would then pass on bad data).
    """
    root = Path(root)
    if not (root / PROJECT_FILE).is_file():
        raise KandevDqError(f"{root} is not a kandev-dq project: no {PROJECT_FILE} there")
    if not allow_project_code:
        refuse_project_code(root, own_run_only=own_run_only)
    else:
        trust_project_code(root)  # GX's path vets it again (vet_on_gx_path)
    import kandev_dq.expectations  # noqa: F401 - registers the types before any suite loads
    import kandev_dq.run.live_window  # noqa: F401 - registers the live window metric
    import kandev_dq.run.write_once  # noqa: F401 - registers the write-once ledger metric

    quiet_gx()
    import great_expectations as gx

    with loading_vetted(root) as vetted:
        context = vetted(_file_context(gx, root, store_url))
    # Also for a project whose yml predates kandev-dq's own expectations store.
    for path in sorted((root / SUITE_DIR).glob("*.json")):
        declared = json.loads(path.read_text(encoding="utf-8")).get("expectations", [])
        try:
            loaded = context.suites.get(path.stem).expectations
            refuse_incomplete_suite(
                path.stem,
                [str(e.get("type")) for e in declared],
                [e.expectation_type for e in loaded],
            )
        except IncompleteSuiteError as exc:
            raise KandevDqError(f"{path}: {exc}") from None
        except gx.exceptions.GreatExpectationsError as exc:
            raise KandevDqError(f"{path}: {str(exc).splitlines()[0]}") from None
    return context


def _file_context(gx, root: Path, store_url: str | None):
    variables = {URL_VARIABLE: store_url} if store_url else None
    return gx.get_context(mode="file", context_root_dir=str(root), runtime_environment=variables)


def quiet_gx() -> None:
    """No GX progress bars or INFO chatter on non-interactive output."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)


_YML = """\
# kandev-dq: a Great Expectations file context. Suites, validation definitions and checkpoints
# are generated by `kandev-dq init`; the store is chosen at run time through ${KANDEV_STORE_URL}.
# Validation results live in the records database, with the key ledger and the run register:
# --records URL, else $KANDEV_DQ_RECORDS_URL, else a `url:` under the results store's
# store_backend, else uncommitted/records.db. Keep passwords out of this file: use the variable.
config_version: 4.0
analytics_enabled: false
progress_bars:
  globally: false
  metric_calculations: false
stores:
  expectations_store:
    module_name: kandev_dq.run.suites_store
    class_name: ExpectationsStore
    store_backend:
      class_name: TupleFilesystemStoreBackend
      base_directory: expectations/
  validation_results_store:
    module_name: kandev_dq.run.results_store
    class_name: ValidationResultsStore
    store_backend:
      module_name: kandev_dq.run.results_store
      class_name: RecordsStoreBackend
  checkpoint_store:
    class_name: CheckpointStore
    store_backend:
      class_name: TupleFilesystemStoreBackend
      base_directory: checkpoints/
      suppress_store_backend_id: true
  validation_definition_store:
    class_name: ValidationDefinitionStore
    store_backend:
      class_name: TupleFilesystemStoreBackend
      base_directory: validation_definitions/
expectations_store_name: expectations_store
validation_results_store_name: validation_results_store
checkpoint_store_name: checkpoint_store
data_docs_sites:
  # kandev-dq's site builder: every CSS/JS/font asset served from the site's static/ folder
  # (readable offline), plus the store overview page linked from the top of index.html.
  local_site:
    module_name: kandev_dq.report.site
    class_name: KandevSiteBuilder
    show_how_to_buttons: false
    store_backend:
      # each page written under a new name and renamed into place: a link is replaced, not
      # written through
      module_name: kandev_dq.report.site
      class_name: ReplacingFilesystemStoreBackend
      base_directory: uncommitted/data_docs/local_site/
    site_index_builder:
      class_name: DefaultSiteIndexBuilder
      renderer:
        module_name: kandev_dq.report.site
        class_name: KandevSiteIndexPageRenderer
      view:
        module_name: kandev_dq.report.site
        class_name: KandevIndexPageView
    site_section_builders:
      expectations:
        view:
          module_name: kandev_dq.report.site
          class_name: KandevPageView
      validations:
        view:
          module_name: kandev_dq.report.site
          class_name: KandevPageView
      profiling:
        view:
          module_name: kandev_dq.report.site
          class_name: KandevPageView
"""


def generated_files(root: Path) -> list[Path]:
    """Every file :func:`build_project` writes into ``root`` (GX's store folders aside)."""
    root = Path(root)
    return [
        root / PROJECT_FILE,
        *(
            root / folder / f"{name}.json"
            for name in SUITES
            for folder in (SUITE_DIR, DEFINITION_DIR)
        ),
        *(root / CHECKPOINT_DIR / f"{name}.json" for name in CHECKPOINTS),
    ]


#: What GX appends to the yml once the data source, its asset and batch definition are added.
_YML_DATASOURCE = """\
fluent_datasources:
  {datasource}:
    type: sql
    id: {datasource_id}
    assets:
{assets}    connection_string: ${{{variable}}}
plugins_directory:
config_variables_file_path:
data_context_id: {context_id}
"""
#: One table asset of the data source, with its whole-table batch definition.
_YML_ASSET = """\
      {asset}:
        type: table
        id: {id}
        batch_metadata: {{}}
        batch_definitions:
          {batch}:
            id: {batch_id}
            partitioner:
        table_name: {asset}
"""
#: GX's marker of a store folder: the expectations store's id is the project's data_context_id.
STORE_BACKEND_ID = ".ge_store_backend_id"


def init_project(folder: Path, *, force: bool = False) -> Path:
    """``kandev-dq init``: :func:`build_project` into ``folder``, refused before anything is
    written when it is a file, or a folder that is not empty and ``force`` is not given."""
    if folder.exists() and not folder.is_dir():
        raise KandevDqError(f"{folder} is a file: init takes a folder")
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise KandevDqError(
            f"{folder} is not empty: pass --force to write kandev-dq's project files into it "
            "(it changes nothing else there)"
        )
    return build_project(folder)


def build_project(root: Path) -> Path:
    """Write a complete project (yml, suites, validation definitions, checkpoints) into root.

    The files are the ones GX writes for :data:`SUITES` and :data:`CHECKPOINTS` (same JSON,
    same yml, ids freshly drawn and cross-referenced), written directly: importing GX and
    building a context for them takes seconds. ``tests/test_project_files.py`` builds the same
    project through GX and holds every byte but the ids equal.

    Only kandev-dq's own files are written, and only they are replaced: a user's suites and
    checkpoints of other names beside them stay untouched.
    """
    root = Path(root)
    for folder in (SUITE_DIR, DEFINITION_DIR, CHECKPOINT_DIR):
        (root / folder).mkdir(parents=True, exist_ok=True)
    context_id = _store_backend_id(root / SUITE_DIR)
    datasource_id = _new_id()
    assets = {
        table: {"id": _new_id(), "batch_id": _new_id()}
        for table in dict.fromkeys(SUITE_ASSETS.values())
    }
    (root / PROJECT_FILE).write_text(
        _YML
        + _YML_DATASOURCE.format(
            datasource=DATASOURCE,
            datasource_id=datasource_id,
            assets="".join(
                _YML_ASSET.format(asset=table, batch=BATCH, **ids) for table, ids in assets.items()
            ),
            variable=URL_VARIABLE,
            context_id=context_id,
        ),
        encoding="utf-8",
    )
    definitions = {}
    for name in SUITES:
        suite = {
            "expectations": [
                {
                    "id": _new_id(),
                    "kwargs": planned.kwargs,
                    "meta": {},
                    "severity": planned.severity,
                    "type": planned.type,
                }
                for planned in suite_plan(name)
            ],
            "id": _new_id(),
            "meta": {"great_expectations_version": version("great_expectations")},
            "name": name,
            "notes": None,
        }
        _write_json(root / SUITE_DIR / f"{name}.json", suite)
        definitions[name] = {"id": _new_id(), "name": name}
        asset = SUITE_ASSETS[name]
        data = {
            "asset": {"id": assets[asset]["id"], "name": asset},
            "batch_definition": {"id": assets[asset]["batch_id"], "name": BATCH},
            "datasource": {"id": datasource_id, "name": DATASOURCE},
        }
        definition = {**definitions[name], "data": data, "suite": {"id": suite["id"], "name": name}}
        _write_json(root / DEFINITION_DIR / f"{name}.json", definition)
    for name, suites in CHECKPOINTS.items():
        checkpoint = {
            "actions": [{"name": "update_data_docs", "site_names": [], "type": "update_data_docs"}],
            "id": _new_id(),
            "name": name,
            "result_format": {"result_format": "COMPLETE"},
            "validation_definitions": [definitions[suite] for suite in suites],
        }
        _write_json(root / CHECKPOINT_DIR / f"{name}.json", checkpoint)
    return root


def _new_id() -> str:
    return str(uuid.uuid4())


def _write_json(path: Path, document: dict) -> None:
    """As GX's stores serialise (sorted keys, two-space indent, no final newline)."""
    path.write_text(json.dumps(document, indent=2, sort_keys=True), encoding="utf-8")


def _store_backend_id(folder: Path) -> str:
    """The id GX keeps in a store folder: the one there already (a project rewritten with
    ``--force`` keeps its data_context_id), else a new one, written as GX writes it."""
    marker = folder / STORE_BACKEND_ID
    if marker.is_file():
        kept = marker.read_text(encoding="utf-8").partition("=")[2].strip()
        if kept:
            return kept
    folder.mkdir(parents=True, exist_ok=True)
    made = _new_id()
    marker.write_text(f"store_backend_id = {made}\n", encoding="utf-8")
    return made
