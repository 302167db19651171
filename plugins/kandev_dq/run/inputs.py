"""A command's inputs, checked before GX is imported: a bad one is reported in under a second.

GX takes seconds to import and to load a project. The project folder, the checkpoint name, the
store (a SQLite file is read with the SQLite library alone) and the records database are all
readable without it, so ``check``, ``audit``, ``history``, ``docs`` and ``explain`` vet them
first and a typo costs no more than the time to read it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kandev_dq.errors import KandevDqError, did_you_mean
from kandev_dq.project.deviations import refuse_deviations
from kandev_dq.project.files import (
    CHECKPOINT_DIR,
    PROJECT_FILE,
    default_project,
    refuse_project_code,
)
from kandev_dq.project.selection import Selection, chosen_selection
from kandev_dq.project.settings import chosen_store
from kandev_dq.store.reference import StoreRef
from kandev_dq.store.target import (
    refuse_non_kandev_sqlite_file,
    refuse_unreachable_server,
    refuse_unusable_sqlite_file,
)


def project_folder(project: Path | None) -> Path:
    """The project a command uses (``--project``, else the default), as an absolute path."""
    folder = (project or default_project()).expanduser().resolve()
    if not folder.is_dir():
        raise KandevDqError(f"{folder} is not a kandev-dq project: the folder does not exist")
    if not (folder / PROJECT_FILE).is_file():
        raise KandevDqError(f"{folder} is not a kandev-dq project: no {PROJECT_FILE} there")
    return folder


def project_as_data(folder: Path, allow_project_code: bool, *, own_run_only: bool = False) -> Path:
    """``folder``, once its files hold only what kandev-dq itself writes, unless the user
    opted in: refused before the store, the records database or GX is opened (docs/reliability.md,
    3a). ``own_run_only``: for a check, which writes its own run's pages only."""
    if not allow_project_code:
        refuse_project_code(folder, own_run_only=own_run_only)
    return folder


@dataclass(frozen=True)
class RunInputs:
    """A run's inputs, each read once and vetted: what the run then works on."""

    folder: Path
    store: StoreRef
    records: StoreRef
    #: The part of the checkpoint a partial run runs (None: all of it).
    selection: Selection | None = None


def run_inputs(
    project: Path | None,
    store: str | StoreRef | None,
    checkpoint: str,
    allow_project_code: bool,
    records: str | StoreRef | None,
    *,
    own_run_only: bool = False,
    strict: bool = False,
    store_name: str | None = None,
    suites: list[str] | None = None,
    rules: list[str] | None = None,
) -> RunInputs:
    """A run's project folder, store and records database, once the folder (as data, unless
    the user opted in; ``own_run_only`` for a check, :func:`project_as_data`), the checkpoint
    name, the store and the records database have been vetted: bad input fails in well under
    a second. ``strict``: a project deviating from kandev-dq's rules is refused before the
    store or the records database is opened
    (:func:`kandev_dq.project.deviations.refuse_deviations`).
    ``store_name``: the user's name for the store in the records (:func:`chosen_store`).
    ``suites``/``rules``: the part of the checkpoint to run, its names checked against the
    project (:func:`~kandev_dq.project.selection.chosen_selection`)."""
    folder = project_as_data(project_folder(project), allow_project_code, own_run_only=own_run_only)
    checkpoint_name(folder, checkpoint)
    if strict:
        refuse_deviations(folder, checkpoint)
    selection = chosen_selection(folder, checkpoint, suites, rules)
    ref = kandev_store(store, store_name)
    chosen = records_database(folder, records, allow_project_code, store=ref)
    return RunInputs(folder, ref, chosen, selection)


def records_database(
    project: Path,
    records: str | StoreRef | None,
    allow_project_code: bool,
    *,
    store: StoreRef | None = None,
) -> StoreRef:
    """The records database of ``project`` (``--records``, else the default,
    :func:`kandev_dq.records.records_ref`), once opened (its tables created and versioned):
    refused before GX loads when it cannot be, or when it is the store a run validates
    (``store``), before anything is written."""
    from kandev_dq.records import Records, records_ref, refuse_the_store

    chosen = records_ref(project, records, allow_project_code=allow_project_code)
    if store is not None:
        refuse_the_store(chosen, store)
    Records(chosen).dispose()
    return chosen


def checkpoint_names(project: Path) -> list[str]:
    """The checkpoints a project keeps as files (``checkpoints/<name>.json``)."""
    return sorted(path.stem for path in (Path(project) / CHECKPOINT_DIR).glob("*.json"))


def checkpoint_name(project: Path, name: str) -> str:
    """``name`` if the project has that checkpoint; a project keeping none as files (its own
    checkpoint store, under ``--allow-project-code``) is left for GX to judge."""
    known = checkpoint_names(project)
    if known and name not in known:
        raise KandevDqError(
            f"no checkpoint {name!r} in {project} (known: {', '.join(known)})"
            + did_you_mean(name, known)
        )
    return name


def refuse_unusable_store(target: str | StoreRef | None, name: str | None = None) -> StoreRef:
    """The store's reference, unless, before the SQL toolkit loads, it is refused: a path that
    is a folder, no file, or a file that is not a Kandev store (no database, an empty one, one
    without the Kandev tables), or a plain PostgreSQL URL whose server does not take the
    connection (any other URL is left to :func:`kandev_store`)."""
    ref = chosen_store(target, name)
    if ref.is_path:
        refuse_unusable_sqlite_file(ref.file)
        refuse_non_kandev_sqlite_file(ref.file)
    else:
        refuse_unreachable_server(ref.given)
    return ref


def kandev_store(target: str | StoreRef | None, name: str | None = None) -> StoreRef:
    """Recognise a Kandev store read-only, or raise a one-line error; its reference for the
    command to work on. A SQLite path is recognised by the SQLite library alone, worded as the
    full open words it (``tests/test_cli_inputs.py``): the run's own open is its only one. Any
    other URL is opened once here, before GX loads, for its refusals."""
    ref = refuse_unusable_store(target, name)
    if ref.is_path:
        return ref
    from kandev_dq.store.access import open_store

    open_store(ref, read_only=True).dispose()
    return ref


def expectation_name(name: str) -> str:
    """``name`` if kandev-dq's suites hold that expectation (the rule index, read without GX)."""
    from kandev_dq.contract.rule_index import RULE_INDEX

    known = [rule.expectation for rule in RULE_INDEX]
    if name not in known:
        raise KandevDqError(
            f"no expectation {name!r} (`kandev-dq rules` lists them)" + did_you_mean(name, known)
        )
    return name
