"""A project is data: without ``--allow-project-code`` it may hold only what kandev-dq itself
writes (docs/reliability.md, 3a).

Checkouts written by others are checked with their own project. GX reads more than code from
it: it imports the ``module_name`` a config names and puts ``plugins_directory`` on
``sys.path``; its actions post to the URLs a checkpoint gives; its stores and sites write where
their ``base_directory`` says; a suite may hold GX's own SQL-running expectations; and every
``${VAR}``/``$VAR`` in a value is filled from the environment or a config variables file (a
``secret|`` value from a cloud secret manager). Each is a channel for a stranger's project to
run code, read secrets out, run SQL or write outside its folder. This module reads the yml, the
checkpoints, the suites and the validation definitions before GX does, imports nothing of GX,
and refuses anything else in one line naming the file and the entry (exit 2).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kandev_dq.contract.rule_index import LIVE_SCOPED, RULE_INDEX
from kandev_dq.errors import KandevDqError
from kandev_dq.run.settings import RECORDS_VARIABLE, STORE_URL_VARIABLE
from kandev_dq.text import one_line

#: GX's names for a file context's parts, which kandev-dq's projects keep: the yml, and where
#: each store keeps its JSON unless the yml says otherwise (:mod:`kandev_dq.run.project`, which
#: writes them, takes them from here).
PROJECT_FILE = "great_expectations.yml"
CHECKPOINT_DIR = "checkpoints"
SUITE_DIR = "expectations"
DEFINITION_DIR = "validation_definitions"
#: The store variable: the data source's URL (the user's own setting of the store).
URL_VARIABLE = STORE_URL_VARIABLE
#: Modules a project's config may name by default: kandev-dq's own and GX's own.
TRUSTED_MODULE = re.compile(r"(great_expectations|kandev_dq)(\.[A-Za-z_][A-Za-z0-9_]*)*")
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
STORE_KEYS = frozenset({"class_name", "module_name", "store_backend"})
#: Store backends that keep everything in the project folder (or in memory), with the keys
#: each may hold: a filesystem backend's prefix or root would move its files elsewhere.
FILESYSTEM_BACKEND = "TupleFilesystemStoreBackend"
RECORDS_BACKEND = "RecordsStoreBackend"
BACKEND_KEYS: dict[str, frozenset[str]] = {
    FILESYSTEM_BACKEND: frozenset(
        {"class_name", "module_name", "base_directory", "suppress_store_backend_id"}
    ),
    # kandev-dq's data docs backend: GX's, replacing each file it writes (kandev_dq.report.site).
    "ReplacingFilesystemStoreBackend": frozenset(
        {"class_name", "module_name", "base_directory", "suppress_store_backend_id"}
    ),
    "InMemoryStoreBackend": frozenset({"class_name", "module_name"}),
    # Its url is vetted with the other records settings (kandev_dq.run.records.records_url).
    RECORDS_BACKEND: frozenset({"class_name", "module_name", "url"}),
}
DATASOURCE_KEYS = frozenset({"type", "id", "name", "assets", "connection_string"})
ASSET_KEYS = frozenset({"type", "id", "name", "batch_metadata", "batch_definitions", "table_name"})
BATCH_DEFINITION_KEYS = frozenset({"id", "name", "partitioner"})
CHECKPOINT_KEYS = frozenset({"actions", "id", "name", "result_format", "validation_definitions"})
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

OPT_IN = "pass --allow-project-code to use it"
#: A folder GX keeps one run's result pages in, named by its run time
#: (:data:`kandev_dq.run.gx_adapter.RUN_TIME_FORMAT`).
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
    config = project_config(root)
    _refuse_foreign_modules(yml, config)
    config = _only(yml, "", config, YML_KEYS)
    for checkpoint in _documents(yml, config, "checkpoint_store", CHECKPOINT_DIR, "checkpoints"):
        document = _read(checkpoint, json.loads)
        _refuse_foreign_modules(checkpoint, document)
        _vet_checkpoint(checkpoint, document)
    _refuse_plugins(yml, config)
    _vet_yml(yml, config, own_run_only)
    for suite in _documents(yml, config, "expectations_store", SUITE_DIR, "suites"):
        _vet_suite(suite, _read(suite, json.loads))
    for definition in _documents(
        yml, config, "validation_definition_store", DEFINITION_DIR, "validation definitions"
    ):
        _vet_definition(definition, _read(definition, json.loads))


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


def _refuse_foreign_modules(file: Path, node: object, where: str = "") -> None:
    for place, mapping in _mappings(node, where):
        module = mapping.get("module_name")
        if module is not None and not (
            isinstance(module, str) and TRUSTED_MODULE.fullmatch(module)
        ):
            raise KandevDqError(
                f"{file}: {one_line(place) or '(top)'}: module_name {module!r} is project "
                "code, not kandev-dq's or GX's; pass --allow-project-code to run it"
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
    for name, store in _mapping(yml, "stores", config.get("stores")).items():
        _only(yml, f"stores.{name}", store, STORE_KEYS)
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
    for where, mapping in _mappings(config):
        if "store_backend" in mapping:
            _vet_backend(yml, f"{where}.store_backend", mapping["store_backend"])
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


def _vet_backend(yml: Path, where: str, backend: object) -> None:
    kind = backend.get("class_name") if isinstance(backend, dict) else backend
    if not isinstance(kind, str) or kind not in BACKEND_KEYS:
        refuse(
            yml,
            where,
            f"{one_line(kind)[:80]!r} does not keep its files in the project "
            f"folder ({', '.join(sorted(BACKEND_KEYS))} do)",
        )
    _only(yml, where, backend, BACKEND_KEYS[kind])


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
    """A JSON document holding no substitution and no key but ``keys``."""
    _refuse_substitution(file, document, frozenset())
    return _only(file, "", document, keys)


def _items(file: Path, document: dict, name: str, keys: frozenset[str]) -> Iterator[tuple]:
    """Each entry of the document's list ``name`` (where it is, the entry), holding only
    ``keys``."""
    for index, item in enumerate(_list(file, name, document.get(name))):
        where = f"{name}[{index}]"
        yield where, _only(file, where, item, keys)


def _vet_checkpoint(file: Path, document: object) -> None:
    document = _document(file, document, CHECKPOINT_KEYS)
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
        if not isinstance(kind, str) or kind not in DECLARED_KWARGS:
            refuse(
                file,
                f"{where}.type",
                f"{one_line(kind)[:80]!r} is not one of kandev-dq's "
                "rules (`kandev-dq rules` lists them)",
            )
        kwargs = _mapping(file, f"{where}.kwargs", expectation.get("kwargs"))
        _only(file, f"{where}.kwargs", kwargs, DECLARED_KWARGS[kind])


def _vet_definition(file: Path, document: object) -> None:
    document = _document(file, document, DEFINITION_KEYS)
    _only(file, "suite", document.get("suite"), REFERENCE_KEYS)
    data = _only(file, "data", document.get("data"), DEFINITION_DATA_KEYS)
    for part, reference in data.items():
        _only(file, f"data.{part}", reference, REFERENCE_KEYS)
