"""A command's inputs, checked before GX is imported: a bad one is reported in under a second.

GX takes seconds to import and to load a project. The project folder, the checkpoint name, the
store (a SQLite file is read with the SQLite library alone) and the records database are all
readable without it, so ``check``, ``audit``, ``history``, ``docs`` and ``explain`` vet them
first and a typo costs no more than the time to read it back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kandev_dq.errors import KandevDqError
from kandev_dq.run.project import (
    CHECKPOINT_DIR,
    PROJECT_FILE,
    default_project,
    refuse_project_code,
)
from kandev_dq.store.target import (
    chosen_store,
    refuse_non_kandev_sqlite_file,
    refuse_unreachable_server,
    refuse_unusable_sqlite_file,
    sqlite_path,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import URL


def project_folder(project: Path | None) -> Path:
    """The project a command uses (``--project``, else the default), as an absolute path."""
    folder = (project or default_project()).expanduser().resolve()
    if not folder.is_dir():
        raise KandevDqError(f"{folder} is not a kandev-dq project: the folder does not exist")
    if not (folder / PROJECT_FILE).is_file():
        raise KandevDqError(f"{folder} is not a kandev-dq project: no {PROJECT_FILE} there")
    return folder


def project_as_data(folder: Path, allow_project_code: bool) -> Path:
    """``folder``, once its files hold only what kandev-dq itself writes, unless the user
    opted in: refused before the store, the records database or GX is opened (docs/reliability.md,
    3a)."""
    if not allow_project_code:
        refuse_project_code(folder)
    return folder


def run_inputs(
    project: Path | None,
    store: str | None,
    checkpoint: str,
    allow_project_code: bool,
    records: str | None,
) -> Path:
    """A run's project folder, once it (as data, unless the user opted in), the checkpoint
    name, the store and the records database have been vetted: bad input fails in well under
    a second."""
    folder = project_as_data(project_folder(project), allow_project_code)
    checkpoint_name(folder, checkpoint)
    kandev_store(store)
    from kandev_dq.store.access import resolve_url

    records_database(folder, records, allow_project_code, store=resolve_url(chosen_store(store)))
    return folder


def records_database(
    project: Path, records: str | None, allow_project_code: bool, *, store: URL | None = None
) -> str:
    """The records database of ``project`` (``--records``, else the default,
    :func:`kandev_dq.run.records.records_url`), once opened (its tables created and versioned):
    refused before GX loads when it cannot be, or when it is the store a run validates
    (``store``), before anything is written."""
    from kandev_dq.run.records import Records, records_url, refuse_the_store

    chosen = records_url(project, records, allow_project_code=allow_project_code)
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
        raise KandevDqError(f"no checkpoint {name!r} in {project} (known: {', '.join(known)})")
    return name


def refuse_unusable_store(target: str | None) -> None:
    """Refuse, before the SQL toolkit loads, a store named by a path that is a folder, no
    file, or a file that is not a Kandev store (no database, an empty one, one without the
    Kandev tables), or by a plain PostgreSQL URL whose server does not take the connection
    (any other URL is left to :func:`kandev_store`)."""
    chosen = chosen_store(target)
    file = sqlite_path(chosen)
    if file is not None:
        refuse_unusable_sqlite_file(file)
        refuse_non_kandev_sqlite_file(file)
    else:
        refuse_unreachable_server(chosen)


def kandev_store(target: str | None) -> None:
    """Open ``target`` read-only and recognise a Kandev store, or raise a one-line error."""
    refuse_unusable_store(target)
    from kandev_dq.store.access import open_store

    open_store(target, read_only=True).dispose()


def expectation_name(name: str) -> str:
    """``name`` if kandev-dq's suites hold that expectation (the rule index, read without GX)."""
    from kandev_dq.contract.rule_index import RULE_INDEX

    known = [rule.expectation for rule in RULE_INDEX]
    if name not in known:
        raise KandevDqError(f"no expectation {name!r} (`kandev-dq rules` lists them)")
    return name
