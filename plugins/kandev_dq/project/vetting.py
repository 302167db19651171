"""A project is data: without ``--allow-project-code`` it may hold only what kandev-dq itself
writes (docs/reliability.md, 3a).

Checkouts written by others are checked with their own project. GX reads more than code from
it: it imports the ``module_name`` a config names and builds the ``class_name`` (any callable:
``great_expectations.get_context`` as a site loads a second project) and puts
``plugins_directory`` on ``sys.path``; its actions post to the URLs a checkpoint gives; its
stores and sites write where their ``base_directory`` says; a suite may hold GX's own
SQL-running expectations; and every ``${VAR}``/``$VAR`` in a value is filled from the
environment or a config variables file (a ``secret|`` value from a cloud secret manager). Each
is a channel for a stranger's project to run code, read secrets out, run SQL or write outside
its folder. This module reads the yml, the checkpoints, the suites and the validation
definitions before GX does, imports nothing of GX, and refuses anything else in one line naming
the file and the entry (exit 2). Classes are vetted by an allowlist (:data:`STORE`,
:data:`DOCS_SITE`), never by a pattern of names.
"""

from __future__ import annotations

import json
import os
import re
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kandev_dq.contract.rule_index import LIVE_SCOPED, RULE_INDEX
from kandev_dq.contract.thresholds import CountThresholds, ThresholdError
from kandev_dq.errors import KandevDqError
from kandev_dq.project.settings import (
    RECORDS_VARIABLE,
    STORE_URL_VARIABLE,
    project_code_allowed_by_environment,
)
from kandev_dq.text import one_line

#: GX's names for a file context's parts, which kandev-dq's projects keep: the yml, and where
#: each store keeps its JSON unless the yml says otherwise (:mod:`kandev_dq.project.files`, which
#: writes them, takes them from here).
PROJECT_FILE = "great_expectations.yml"
CHECKPOINT_DIR = "checkpoints"
SUITE_DIR = "expectations"
DEFINITION_DIR = "validation_definitions"
#: The store variable: the data source's URL (the user's own setting of the store).
URL_VARIABLE = STORE_URL_VARIABLE
#: GX's own substitution (``great_expectations.core.config_substitutor``): ``${VAR}`` and
#: ``$VAR`` unless escaped with a backslash.
SUBSTITUTION = re.compile(r"(?<!\\)\$\{(.*?)\}|(?<!\\)\$([_a-zA-Z][_a-zA-Z0-9]*)")
#: A value GX fetches from a cloud secret manager.
SECRET_PREFIX = "secret|"

#: The yml's keys: GX's own schema (``DataContextConfigSchema``), which kandev-dq writes.
YML_KEYS = frozenset(
    {
        "analytics_enabled",
        "checkpoint_store_name",
        "config_variables_file_path",
        "config_version",
        "data_context_id",
        "data_docs_sites",
        "expectations_store_name",
        "fluent_datasources",
        "plugins_directory",
        "progress_bars",
        "stores",
        "validation_results_store_name",
    }
)
#: Where GX takes a class from when an entry names none (its ``config_defaults``).
GX_STORES = "great_expectations.data_context.store"
GX_SITE_BUILDER = "great_expectations.render.renderer.site_builder"
GX_RENDERERS = "great_expectations.render.renderer"
GX_VIEWS = "great_expectations.render.view"
#: kandev-dq's modules a project's yml names (kandev_dq.project.files writes them).
SUITES_STORE = "kandev_dq.gx.suites_store"
RESULTS_STORE = "kandev_dq.gx.results_store"
SITE = "kandev_dq.report.site"
#: The modules the previous release's ``init`` wrote for the two stores, which its projects
#: still name: a closed list, each accepted where its module of today is (its classes, its
#: keys) and loaded as that module (:func:`kandev_dq.gx.context.load_context`).
EARLIER_MODULES = {
    "kandev_dq.run.suites_store": SUITES_STORE,
    "kandev_dq.run.results_store": RESULTS_STORE,
}
FILESYSTEM_BACKEND = "TupleFilesystemStoreBackend"
RECORDS_BACKEND = "RecordsStoreBackend"


@dataclass(frozen=True)
class Entry:
    """One kind of entry GX builds a class from (``instantiate_class_from_config``): the
    module (and class) GX takes when the entry names none, and for each class kandev-dq writes
    there (``None``: an entry that names no class) the keys it may hold, each a plain value
    (``None``) or a nested entry."""

    kind: str
    default_module: str
    classes: Mapping[tuple[str, str] | None, Mapping[str, Entry | Sections | None]]
    default_class: str | None = None


@dataclass(frozen=True)
class Sections:
    """A mapping of GX's section names to entries of one kind (a site's section builders)."""

    names: frozenset[str]
    entry: Entry


def _only_class(kind: str, module: str, pair: tuple[str, str], keys=None) -> Entry:
    return Entry(kind, module, {pair: keys or {}})


def _with_earlier_names(classes: dict) -> dict:
    """``classes``, and each class of a store's module also under its earlier module's name."""
    earlier = {
        (old, kind): keys
        for old, new in EARLIER_MODULES.items()
        for (module, kind), keys in classes.items()
        if module == new
    }
    return {**classes, **earlier}


PAGE_VIEW = _only_class("page view", GX_VIEWS, (SITE, "KandevPageView"))
FILESYSTEM = _only_class(
    "store backend",
    GX_STORES,
    (GX_STORES, FILESYSTEM_BACKEND),
    {"base_directory": None, "suppress_store_backend_id": None},
)
#: A data docs site's backend: kandev-dq's, which writes each file under a new name and renames
#: it into place, or GX's own, which earlier projects name (the site builder swaps it).
SITE_FILES = Entry(
    "store backend",
    GX_STORES,
    {
        (SITE, "ReplacingFilesystemStoreBackend"): FILESYSTEM.classes[
            (GX_STORES, FILESYSTEM_BACKEND)
        ],
        **FILESYSTEM.classes,
    },
)
#: Its url is vetted with the other records settings (kandev_dq.records.records_url).
RECORDS = Entry(
    "store backend",
    GX_STORES,
    _with_earlier_names({(RESULTS_STORE, RECORDS_BACKEND): {"url": None}}),
)
#: The allowlist (docs/reliability.md, 3a): every class GX would build from a project's yml,
#: by the entry that names it. Nothing else runs: a project is data, and GX imports whatever
#: module an entry names (``great_expectations.get_context`` as a site reads a second project).
STORE = Entry(
    "store",
    GX_STORES,
    _with_earlier_names(
        {
            (SUITES_STORE, "ExpectationsStore"): {"store_backend": FILESYSTEM},
            (RESULTS_STORE, "ValidationResultsStore"): {"store_backend": RECORDS},
            (GX_STORES, "CheckpointStore"): {"store_backend": FILESYSTEM},
            (GX_STORES, "ValidationDefinitionStore"): {"store_backend": FILESYSTEM},
        }
    ),
)
DOCS_SITE = _only_class(
    "data docs site",
    GX_SITE_BUILDER,
    (SITE, "KandevSiteBuilder"),
    {
        "show_how_to_buttons": None,
        "store_backend": SITE_FILES,
        "site_index_builder": Entry(
            "site index builder",
            GX_SITE_BUILDER,
            {
                (GX_SITE_BUILDER, "DefaultSiteIndexBuilder"): {
                    "renderer": _only_class(
                        "index renderer", GX_RENDERERS, (SITE, "KandevSiteIndexPageRenderer")
                    ),
                    "view": _only_class("index view", GX_VIEWS, (SITE, "KandevIndexPageView")),
                }
            },
            default_class="DefaultSiteIndexBuilder",
        ),
        "site_section_builders": Sections(
            frozenset({"expectations", "validations", "profiling"}),
            Entry("site section builder", GX_SITE_BUILDER, {None: {"view": PAGE_VIEW}}),
        ),
    },
)
#: The yml's keys that hold a mapping of names to entries GX builds classes from.
ENTRIES = {"stores": STORE, "data_docs_sites": DOCS_SITE}
PROGRESS_BAR_KEYS = frozenset({"globally", "metric_calculations"})
DATASOURCE_KEYS = frozenset({"type", "id", "name", "assets", "connection_string"})
ASSET_KEYS = frozenset({"type", "id", "name", "batch_metadata", "batch_definitions", "table_name"})
BATCH_DEFINITION_KEYS = frozenset({"id", "name", "partitioner"})
CHECKPOINT_KEYS = frozenset({"actions", "id", "name", "result_format", "validation_definitions"})
#: GX's result formats: a checkpoint's holds the word alone (GX's other result format keys
#: add unexpected rows' index queries).
RESULT_FORMATS = frozenset({"BOOLEAN_ONLY", "BASIC", "SUMMARY", "COMPLETE"})
ACTION_KEYS = frozenset({"name", "site_names", "type"})
#: The one action a checkpoint may name: notifications come from the user's environment only.
DOCS_ACTION = "update_data_docs"
REFERENCE_KEYS = frozenset({"id", "name"})
DEFINITION_KEYS = frozenset({"id", "name", "data", "suite"})
DEFINITION_DATA_KEYS = frozenset({"asset", "batch_definition", "datasource"})
SUITE_KEYS = frozenset({"expectations", "id", "meta", "name", "notes"})
EXPECTATION_KEYS = frozenset({"id", "kwargs", "meta", "severity", "type"})
#: kandev-dq's windowed rules: their class declares ``window_minutes``.
WINDOWED = frozenset(
    {
        "expect_no_backfill_rows_under_sentinel",
        "expect_no_backfill_rows_inside_sentinel_window",
        "expect_backfill_reconciliation_not_vacuous",
        "expect_backfill_identity_to_match_message",
        "expect_backfill_turn_id_to_match_message",
        "expect_backfill_statuses_to_match_message",
        "expect_backfill_metrics_to_match_message",
        "expect_backfill_text_to_match_message",
        "expect_backfill_observed_at_to_be_message_created_at",
        "expect_backfill_settled_at_to_follow_tool_status",
        "expect_backfill_rows_from_winning_message",
        "expect_no_backfill_rows_without_qualifying_message",
        "expect_no_backfill_rows_relabelled_live",
    }
)
#: kandev-dq's rules whose class declares a field of its own, with those fields.
OWN_FIELDS: dict[str, frozenset[str]] = {
    "expect_activation_state_to_be_in_set": frozenset({"accepted_states"}),
}
#: Expectation type -> the arguments a suite may give it: the fields its kandev-dq class
#: declares beyond GX's own (``tests/test_hostile_project.py`` holds this to the classes).
DECLARED_KWARGS: dict[str, frozenset[str]] = {
    rule.expectation: OWN_FIELDS.get(rule.expectation, frozenset())
    | ({"window_minutes"} if rule.expectation in WINDOWED else frozenset())
    | ({"live_window"} if rule.expectation in LIVE_SCOPED else frozenset())
    for rule in RULE_INDEX
}

#: GX's built-in column and table expectations a suite may add without
#: ``--allow-project-code``, with the arguments each declares: data, compiled by GX into a
#: SELECT on the suite's table. Left out: any taking SQL text (``unexpected_rows_expectation``,
#: a query, ``row_condition``), naming another table, or that GX's SQL engine cannot run.
#: ``tests/test_hostile_project.py`` holds this table to GX's own classes.
_COLUMN = frozenset({"column"})
_MOSTLY = frozenset({"column", "mostly"})
_RANGE = frozenset({"min_value", "max_value", "strict_min", "strict_max"})
_SET = frozenset({"column", "value_set"})
GX_BUILT_INS: dict[str, frozenset[str]] = {
    "expect_column_to_exist": _COLUMN | {"column_index"},
    "expect_column_values_to_not_be_null": _MOSTLY,
    "expect_column_values_to_be_null": _MOSTLY,
    "expect_column_values_to_be_unique": _MOSTLY,
    "expect_column_values_to_be_in_set": _MOSTLY | _SET,
    "expect_column_values_to_not_be_in_set": _MOSTLY | _SET,
    "expect_column_values_to_be_between": _MOSTLY | _RANGE,
    "expect_column_value_lengths_to_be_between": _MOSTLY | _RANGE,
    "expect_column_value_lengths_to_equal": _MOSTLY | {"value"},
    "expect_column_values_to_match_regex": _MOSTLY | {"regex"},
    "expect_column_values_to_not_match_regex": _MOSTLY | {"regex"},
    "expect_column_values_to_match_like_pattern": _MOSTLY | {"like_pattern", "escape"},
    "expect_column_values_to_not_match_like_pattern": _MOSTLY | {"like_pattern", "escape"},
    "expect_column_distinct_values_to_be_in_set": _SET,
    "expect_column_distinct_values_to_contain_set": _SET,
    "expect_column_distinct_values_to_equal_set": _SET,
    "expect_column_min_to_be_between": _COLUMN | _RANGE,
    "expect_column_max_to_be_between": _COLUMN | _RANGE,
    "expect_column_mean_to_be_between": _COLUMN | _RANGE,
    "expect_column_sum_to_be_between": _COLUMN | _RANGE,
    "expect_column_unique_value_count_to_be_between": _COLUMN | _RANGE,
    "expect_column_proportion_of_unique_values_to_be_between": _COLUMN | _RANGE,
    "expect_column_proportion_of_non_null_values_to_be_between": _COLUMN | _RANGE,
    "expect_compound_columns_to_be_unique": frozenset({"column_list", "ignore_row_if", "mostly"}),
    "expect_table_columns_to_match_set": frozenset({"column_set", "exact_match"}),
    "expect_table_columns_to_match_ordered_list": frozenset({"column_list"}),
    "expect_table_column_count_to_equal": frozenset({"value"}),
    "expect_table_column_count_to_be_between": frozenset({"min_value", "max_value"}),
    "expect_table_row_count_to_be_between": _RANGE,
    "expect_table_row_count_to_equal": frozenset({"value"}),
}

OPT_IN = "pass --allow-project-code to use it"
#: A folder GX keeps one run's result pages in, named by its run time
#: (:data:`kandev_dq.gx.adapter.RUN_TIME_FORMAT`).
RUN_FOLDER = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]{6}Z")
#: GX's own folder in a project, where kandev-dq keeps the records database by default.
UNCOMMITTED = "uncommitted"


def refuse(file: Path, where: str, problem: str) -> None:
    """Stop the run: one line naming the file and the entry (its names escaped, cut short)."""
    place = one_line(where)[:200] if where else "(top)"
    raise KandevDqError(f"{one_line(file)}: {place}: {problem}; {OPT_IN}")


def project_config(root: Path) -> Any:
    """The project's yml as GX reads it (safe YAML, without GX): the one way kandev-dq reads
    it; a yml that cannot be read is a one-line error naming it."""
    return _read(Path(root) / PROJECT_FILE, _yaml)


def vet_project(root: Path, *, own_run_only: bool = False) -> None:
    """Refuse a project holding anything kandev-dq itself would not write (module docstring).

    ``own_run_only``: the caller writes the pages of its own run and never an earlier run's
    (a check; the whole-site build rewrites them): the folders of earlier runs' pages are
    listed, a link among them refused, but not walked into, so a check's cost does not grow
    with the runs the data docs keep."""
    yml = Path(root) / PROJECT_FILE
    config = _only(yml, "", project_config(root), YML_KEYS)
    _refuse_classes_elsewhere(yml, config, _vet_entries(yml, config))
    _refuse_plugins(yml, config)
    for checkpoint in _documents(yml, config, "checkpoint_store", CHECKPOINT_DIR, "checkpoints"):
        _vet_checkpoint(checkpoint, _read(checkpoint, json.loads))
    _vet_yml(yml, config, own_run_only)
    for suite in _documents(yml, config, "expectations_store", SUITE_DIR, "suites"):
        _vet_suite(suite, _read(suite, json.loads))
    for definition in _documents(
        yml, config, "validation_definition_store", DEFINITION_DIR, "validation definitions"
    ):
        _vet_definition(definition, _read(definition, json.loads))


# --- on GX's own path ----------------------------------------------------------------------------

#: Project folders whose code the user opted in to in this process (the CLI and the API).
_trusted: set[Path] = set()
#: The project kandev-dq vetted and GX is loading (:func:`loading_vetted`).
_loading: ContextVar[Path | None] = ContextVar("kandev_dq_loading", default=None)
#: The contexts kandev-dq loaded after vetting their projects.
_vetted_contexts: weakref.WeakSet = weakref.WeakSet()


def trust_project_code(root: Path) -> None:
    """The user opted in to the code the project at ``root`` names, for this process."""
    _trusted.add(Path(root).resolve())


@contextmanager
def loading_vetted(root: Path) -> Iterator[Callable[[Any], Any]]:
    """GX loads a project kandev-dq has just vetted (or the user trusts): its classes need not
    vet it again, then or later; what this yields marks the context GX returned."""
    token = _loading.set(Path(root).resolve())
    try:
        yield lambda context: _vetted_contexts.add(context) or context
    finally:
        _loading.reset(token)


def loaded_by_kandev_dq(root: str | Path | None) -> bool:
    """Whether kandev-dq itself is loading the project at ``root`` (:func:`loading_vetted`),
    not a scheduler through GX's own API."""
    return root is not None and _loading.get() == Path(root).resolve()


def vet_on_gx_path(root: str | Path | None, context: object = None) -> None:
    """GX builds one of kandev-dq's classes from a project's yml (its expectations or results
    store, the results backend, the site builder of ``context``): vet the project as
    ``kandev-dq check`` does, unless the user opted in or kandev-dq loaded it
    (:func:`loading_vetted`). Whichever class GX builds first vets the project, before any
    page or result is written; a module a project names before it is GX's business
    (docs/schedulers.md)."""
    if not root or (context is not None and context in _vetted_contexts):
        return
    root = Path(root).resolve()
    if project_code_allowed_by_environment() or root in _trusted or loaded_by_kandev_dq(root):
        return
    vet_project(root)


def _yaml(text: str) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(text)


def _read(path: Path, parse: Callable[[str], Any]) -> Any:
    from ruamel.yaml import YAMLError

    try:
        return parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, YAMLError) as exc:
        raise KandevDqError(f"cannot read {path}: {type(exc).__name__}") from None


def _documents(yml: Path, config: dict, store: str, default: str, what: str) -> list[Path]:
    """The JSON files of one of the project's filesystem stores; only a local folder inside the
    project can be read beforehand."""
    name = config.get(f"{store}_name", store)
    if not isinstance(name, str):
        refuse(yml, f"{store}_name", f"is a {type(name).__name__}, not a store's name")
    stores = _mapping(yml, "stores", config.get("stores"))
    entry = _mapping(yml, f"stores.{name}", stores.get(name))
    backend = _mapping(yml, f"stores.{name}.store_backend", entry.get("store_backend"))
    if backend.get("class_name", FILESYSTEM_BACKEND) != FILESYSTEM_BACKEND:
        refuse(
            yml,
            f"stores.{name}",
            f"keeps {what} in a {one_line(backend['class_name'])[:80]}, where they cannot be "
            "vetted",
        )
    folder = (yml.parent / str(backend.get("base_directory", default))).resolve()
    if not folder.is_relative_to(yml.parent.resolve()):
        refuse(yml, f"stores.{name}", f"keeps {what} outside the project folder ({folder})")
    return sorted(folder.rglob("*.json"))


def _vet_entries(yml: Path, config: dict) -> set[int]:
    """Every store and data docs site names only classes of the allowlist, holding only their
    keys, at any depth (:data:`STORE`, :data:`DOCS_SITE`); the ids of the entries vetted."""
    vetted: set[int] = set()
    for key, entry in ENTRIES.items():
        for name, node in _mapping(yml, key, config.get(key)).items():
            _vet_entry(yml, f"{key}.{name}", node, entry, vetted)
    return vetted


def _vet_entry(file: Path, where: str, node: object, entry: Entry, vetted: set[int]) -> None:
    if not isinstance(node, dict):
        refuse(file, where, f"is a {type(node).__name__}, not a mapping")
    vetted.add(id(node))
    module, kind = node.get("module_name"), node.get("class_name", entry.default_class)
    if not all(isinstance(name, str | None) for name in (module, kind)):
        refuse(file, where, "names a class by something other than text")
    # As GX builds it: an entry naming no module takes GX's default for its kind.
    pair = None if module is None and kind is None else (module or entry.default_module, kind)
    if pair not in entry.classes:
        # The classes to write today: an earlier module's name is accepted, not offered.
        today = [p for p in entry.classes if p and p[0] not in EARLIER_MODULES]
        allowed = ", ".join(".".join(p) for p in today) or "none"
        named = one_line(".".join(str(part) for part in pair))[:120] if pair else "no class"
        refuse(
            file,
            where,
            f"{named!r} is not a class kandev-dq writes for a {entry.kind} (allowed: {allowed})",
        )
    keys = entry.classes[pair]
    _only(file, where, node, frozenset(keys) | ({"class_name", "module_name"} if pair else set()))
    for key, nested in keys.items():
        value, at = node.get(key), f"{where}.{key}"
        if nested is None or value is None:  # a value; or absent, GX's own default
            continue
        if isinstance(nested, Sections):
            for name, section in _only(file, at, value, nested.names).items():
                _vet_entry(file, f"{at}.{name}", section, nested.entry, vetted)
        else:
            _vet_entry(file, at, value, nested, vetted)


def _refuse_classes_elsewhere(file: Path, node: object, vetted: set[int] = frozenset()) -> None:
    """No class named outside the entries the allowlist vetted (a suite's ``meta``, a
    checkpoint's action, a nested mapping of any value)."""
    for where, mapping in _mappings(node):
        named = {"class_name", "module_name"} & set(mapping)
        if named and id(mapping) not in vetted:
            refuse(
                file,
                f"{where}.{min(named)}" if where else min(named),
                "names a class where kandev-dq names none",
            )


def _refuse_plugins(yml: Path, config: dict) -> None:
    plugins = config.get("plugins_directory")  # GX appends it to sys.path
    own = Path(__file__).resolve().parents[2]  # the folder kandev_dq itself is imported from
    if plugins is not None and (yml.parent / str(plugins)).resolve() != own:
        raise KandevDqError(
            f"{yml}: plugins_directory {plugins!r} is project code, not kandev-dq's; "
            "pass --allow-project-code to run it"
        )


def _mappings(node: object, where: str = "") -> Iterator[tuple[str, dict]]:
    """Every mapping inside ``node``, with where it is (``stores.x.store_backend``)."""
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            yield from _mappings(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _mappings(value, f"{where}[{index}]")


def _strings(node: object, where: str = "") -> Iterator[tuple[str, str]]:
    """Every string value inside ``node`` (GX substitutes values, never keys)."""
    if isinstance(node, str):
        yield where, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _strings(value, f"{where}[{index}]")


def _refuse_substitution(file: Path, node: object, allowed: frozenset[tuple[str, str]]) -> None:
    """No value GX would fill from the environment, a config variables file or a secret
    manager, but the ``allowed`` (place, value) pairs."""
    for where, value in _strings(node):
        found = SUBSTITUTION.search(value)
        if found and (where, value) not in allowed:
            name = one_line(found.group(1) or found.group(2))[:80]
            refuse(file, where, f"substitutes the variable {name!r}")
        if value.startswith(SECRET_PREFIX):
            refuse(file, where, "reads a secret manager (secret|)")


def _only(file: Path, where: str, node: object, keys: frozenset[str]) -> dict:
    """``node`` as a mapping holding no key but ``keys``."""
    if not isinstance(node, dict):
        refuse(file, where, f"is a {type(node).__name__}, not a mapping")
    for key in node:
        if key not in keys:
            refuse(
                file, f"{where}.{key}" if where else str(key), "is not an entry kandev-dq writes"
            )
    return node


def _mapping(file: Path, where: str, node: object) -> dict:
    """``node`` as a mapping, an absent one empty."""
    if node is None:
        return {}
    if not isinstance(node, dict):
        refuse(file, where, f"is a {type(node).__name__}, not a mapping")
    return node


def _list(file: Path, where: str, node: object) -> list:
    if node is None:
        return []
    if not isinstance(node, list):
        refuse(file, where, f"is a {type(node).__name__}, not a list")
    return node


# --- great_expectations.yml ---------------------------------------------------------------------


def _vet_yml(yml: Path, config: dict, own_run_only: bool) -> None:
    results = config.get("validation_results_store_name", "validation_results_store")
    allowed = {(f"stores.{results}.store_backend.url", "${" + RECORDS_VARIABLE + "}")}
    sources = _mapping(yml, "fluent_datasources", config.get("fluent_datasources"))
    allowed |= {
        (f"fluent_datasources.{name}.connection_string", "${" + URL_VARIABLE + "}")
        for name in sources
    }
    _refuse_substitution(yml, config, frozenset(allowed))
    _only(
        yml,
        "progress_bars",
        _mapping(yml, "progress_bars", config.get("progress_bars")),
        PROGRESS_BAR_KEYS,
    )
    root = yml.parent.resolve()
    written = {UNCOMMITTED: root / UNCOMMITTED}  # GX's and the records' default folder
    for where, mapping in _mappings(config):
        if "root_directory" in mapping:
            refuse(yml, f"{where}.root_directory", "moves a store out of the project folder")
        if "base_directory" in mapping:
            place = f"{where}.base_directory"
            written[place] = _inside(yml, place, mapping["base_directory"], root)
    walked: list[Path] = []
    for where, folder in sorted(written.items(), key=lambda item: len(item[1].parts)):
        if any(folder.is_relative_to(outer) for outer in walked):
            continue  # inside a folder already walked (the data docs in uncommitted/)
        _refuse_links_out(yml, where, folder, root, own_run_only)
        walked.append(folder)
    _vet_datasources(yml, sources)
    _vet_config_variables(yml, config.get("config_variables_file_path"), root)


def _inside(file: Path, where: str, value: object, root: Path) -> Path:
    """``value`` as a path inside the project folder (absolute, ``..`` and symlinks resolved)."""
    if not isinstance(value, str):
        refuse(file, where, f"is a {type(value).__name__}, not a path")
    resolved = (root / value).resolve()
    if not resolved.is_relative_to(root):
        refuse(file, where, f"{one_line(value)[:200]!r} is outside the project folder")
    return resolved


def _refuse_links_out(yml: Path, where: str, folder: Path, root: Path, own_run_only: bool) -> None:
    """A folder kandev-dq or GX writes into holds no symbolic link out of the project: a
    checkout could link a page or the records database to a file of the user's. With
    ``own_run_only`` (:func:`vet_project`) an earlier run's folder of pages is not walked into:
    nothing is written in it (a prune removes its pages, which never follows a link)."""
    if folder.is_symlink() and not folder.resolve().is_relative_to(root):
        refuse(
            yml, where, f"{one_line(folder.relative_to(root))} is a link out of the project folder"
        )
    # The folder entries' own types (no stat of each): the data docs hold pages of every run
    # kept, and a run's cost must not grow with them.
    pending = [str(folder)]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:  # as os.walk: a folder that cannot be read holds nothing to write
            continue
        for entry in entries:
            if entry.is_symlink():
                path = Path(entry.path)
                if not path.resolve().is_relative_to(root):
                    shown = one_line(path.relative_to(root))[:200]
                    refuse(yml, where, f"{shown} is a link out of the project folder")
            elif entry.is_dir(follow_symlinks=False) and not (
                own_run_only and RUN_FOLDER.fullmatch(entry.name)
            ):
                pending.append(entry.path)


def _vet_datasources(yml: Path, sources: dict) -> None:
    """The data source kandev-dq writes: the store the user names, read as a table asset."""
    for name, source in sources.items():
        where = f"fluent_datasources.{name}"
        _only(yml, where, source, DATASOURCE_KEYS)
        if source.get("type") != "sql":
            refuse(yml, f"{where}.type", "is not sql, the data source kandev-dq writes")
        if source.get("connection_string") != "${" + URL_VARIABLE + "}":
            refuse(
                yml,
                f"{where}.connection_string",
                f"is not ${{{URL_VARIABLE}}}, the store the user names",
            )
        for asset_name, asset in _mapping(yml, f"{where}.assets", source.get("assets")).items():
            at = f"{where}.assets.{asset_name}"
            _only(yml, at, asset, ASSET_KEYS)
            if asset.get("type") != "table":
                refuse(yml, f"{at}.type", "is not a table asset (a query asset runs SQL)")
            batches = _mapping(yml, f"{at}.batch_definitions", asset.get("batch_definitions"))
            for batch_name, batch in batches.items():
                _only(yml, f"{at}.batch_definitions.{batch_name}", batch, BATCH_DEFINITION_KEYS)
                if batch.get("partitioner") is not None:  # partitioning queries the table
                    refuse(yml, f"{at}.batch_definitions.{batch_name}.partitioner", "is set")


def _vet_config_variables(yml: Path, path: object, root: Path) -> None:
    """GX reads config variables from this file (and fills ``${VAR}`` in it from the
    environment); kandev-dq's notifications read their settings there too. Without the opt-in
    it stays in the project and sets none of kandev-dq's settings: those come from the user."""
    if path is None or path == "":
        return
    where = "config_variables_file_path"
    file = _inside(yml, where, path, root)
    if not file.is_file():
        return
    variables = _read(file, _yaml)
    if variables is None:
        return
    _refuse_substitution(file, variables, frozenset())
    if not isinstance(variables, dict):
        refuse(file, "", f"is a {type(variables).__name__}, not a mapping")
    for name in variables:
        if str(name).startswith("KANDEV_"):
            refuse(
                file,
                one_line(name)[:80],
                "sets a kandev-dq setting, which only the user's environment may",
            )


# --- checkpoints, suites, validation definitions -----------------------------------------------


def _document(file: Path, document: object, keys: frozenset[str]) -> dict:
    """A JSON document holding no substitution, no class and no key but ``keys``."""
    _refuse_substitution(file, document, frozenset())
    _refuse_classes_elsewhere(file, document)
    return _only(file, "", document, keys)


def _items(file: Path, document: dict, name: str, keys: frozenset[str]) -> Iterator[tuple]:
    """Each entry of the document's list ``name`` (where it is, the entry), holding only
    ``keys``."""
    for index, item in enumerate(_list(file, name, document.get(name))):
        where = f"{name}[{index}]"
        yield where, _only(file, where, item, keys)


def _vet_checkpoint(file: Path, document: object) -> None:
    document = _document(file, document, CHECKPOINT_KEYS)
    result_format = document.get("result_format", "COMPLETE")
    if isinstance(result_format, dict):
        result_format = _only(file, "result_format", result_format, {"result_format"}).get(
            "result_format"
        )
    if result_format not in RESULT_FORMATS:
        refuse(file, "result_format", f"is not one of GX's {', '.join(sorted(RESULT_FORMATS))}")
    for where, action in _items(file, document, "actions", ACTION_KEYS):
        if action.get("type") != DOCS_ACTION:
            kind = one_line(action.get("type"))[:80]
            refuse(
                file,
                where,
                f"type {kind!r} is not {DOCS_ACTION}, the only action a project "
                "may name (notifications come from the user's environment)",
            )
    list(_items(file, document, "validation_definitions", REFERENCE_KEYS))  # names and ids


def _vet_suite(file: Path, document: object) -> None:
    document = _document(file, document, SUITE_KEYS)
    for where, expectation in _items(file, document, "expectations", EXPECTATION_KEYS):
        kind = expectation.get("type")
        declared = (DECLARED_KWARGS | GX_BUILT_INS).get(kind) if isinstance(kind, str) else None
        if declared is None:
            refuse(
                file,
                f"{where}.type",
                f"{one_line(kind)[:80]!r} is not one of kandev-dq's rules (`kandev-dq rules` "
                "lists them) nor of GX's built-in column and table expectations "
                "(docs/reliability.md, 3a)",
            )
        kwargs = _mapping(file, f"{where}.kwargs", expectation.get("kwargs"))
        _only(file, f"{where}.kwargs", kwargs, declared)
        _vet_thresholds(file, where, kind, expectation.get("meta"))


def _vet_thresholds(file: Path, where: str, kind: str, meta: object) -> None:
    """Count thresholds (``warn_if`` / ``error_if`` in an entry's meta) that read as dbt's, on
    one of kandev-dq's rules, which judge them (GX's built-ins would pass them by)."""
    try:
        thresholds = CountThresholds.of(meta if isinstance(meta, dict) else None)
    except ThresholdError as exc:
        raise KandevDqError(one_line(f"{file}: {where}.meta: {exc}")) from None
    if thresholds is not None and kind not in DECLARED_KWARGS:
        raise KandevDqError(
            one_line(
                f"{file}: {where}.meta: warn_if and error_if are judged by kandev-dq's rules "
                f"only; GX's {kind} would pass them by"
            )
        )


def _vet_definition(file: Path, document: object) -> None:
    document = _document(file, document, DEFINITION_KEYS)
    _only(file, "suite", document.get("suite"), REFERENCE_KEYS)
    data = _only(file, "data", document.get("data"), DEFINITION_DATA_KEYS)
    for part, reference in data.items():
        _only(file, f"data.{part}", reference, REFERENCE_KEYS)
