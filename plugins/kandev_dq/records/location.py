"""Which database holds a project's records, and the one it may never be.

``--records URL``, else ``$KANDEV_DQ_RECORDS_URL``, else the ``url`` of the validation results
store's backend in ``great_expectations.yml``, else ``uncommitted/records.db`` (the precedence
of :func:`kandev_dq.project.settings.chosen`). The records database is never the store under
validation (:func:`refuse_the_store`), a project's yml may name one outside its folder only
under ``--allow-project-code``, and one the project chose is never a file the checkout shipped
(docs/reliability.md, 3a).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from kandev_dq.errors import KandevDqError, StoreError
from kandev_dq.project.settings import RECORDS_VARIABLE, records_option
from kandev_dq.store.reference import StoreRef, shown_records, sqlite_path, store_ref

DEFAULT_RECORDS = Path("uncommitted") / "records.db"
#: The key ledger kept as a JSON file before the records database: imported on first use.
JSON_LEDGER = Path("uncommitted") / "key_ledger.json"
#: How long asking git whether it tracks the records file may take (a huge index, a slow disk).
GIT_TIMEOUT_S = 10


def configured_url(root: Path) -> str | None:
    """The ``url`` the project's yml gives the results store's backend, if any, read as the
    vetting reads the yml (:func:`kandev_dq.project.vetting.project_config`, without GX). A yml
    that cannot be read names none: loading the project says what is wrong with it."""
    from kandev_dq.project.vetting import project_config

    try:
        config = project_config(root)
    except KandevDqError:
        return None
    if not isinstance(config, dict):
        return None
    name = config.get("validation_results_store_name", "validation_results_store")
    store = (config.get("stores") or {}).get(name) or {}
    backend = store.get("store_backend") if isinstance(store, dict) else None
    url = backend.get("url") if isinstance(backend, dict) else None
    return str(url) if url else None


def records_ref(
    root: Path, given: str | StoreRef | None = None, *, allow_project_code: bool = False
) -> StoreRef:
    """The records database of a project, read once: ``given`` (``--records``), else
    ``$KANDEV_DQ_RECORDS_URL``, else the yml's setting, else ``uncommitted/records.db``.

    A project is data (docs/reliability.md, 3a): its yml may keep records only in a SQLite file
    inside its own folder. Anything else (a server the project's author chose would receive
    the store's samples) needs ``--allow-project-code``, or the user's own ``--records``. A
    records file the project chose that git tracks came with the checkout, and is refused
    (:func:`_refuse_shipped_records`).

    A SQLite file's folder is created only inside the project (``uncommitted/``): elsewhere a
    missing folder, or a file where a folder should be, is a one-line error naming the records
    database, with nothing created. Text that is no database URL is the one-line error opening
    it would give."""
    if isinstance(given, StoreRef):
        return _refuse_linked_files(_refuse_missing_folder(root, given))
    users = records_option(given)
    if users is not None:
        return _refuse_linked_files(_refuse_missing_folder(root, store_ref(users)))
    projects = store_ref(_projects_records(root, allow_project_code))
    _refuse_shipped_records(root, projects)
    return _refuse_linked_files(_refuse_missing_folder(root, projects))


def records_url(root: Path, given: str | None = None, *, allow_project_code: bool = False) -> str:
    """The records database of a project as the text it was given by (:func:`records_ref`)."""
    return records_ref(root, given, allow_project_code=allow_project_code).given


def _projects_records(root: Path, allow_project_code: bool) -> str:
    """The records database the project chooses: its yml's setting, else the default file."""
    configured = configured_url(root)
    if configured:
        if not allow_project_code and not _inside(root, configured):
            raise KandevDqError(
                f"{Path(root) / 'great_expectations.yml'}: the results store's url names a "
                f"records database outside the project folder ({shown_records(configured)}); "
                f"pass --records or set {RECORDS_VARIABLE} yourself, or pass "
                "--allow-project-code to use it"
            )
        if sqlite_path(configured) is not None:  # a SQLite path, relative to the project
            return str((Path(root) / configured).resolve())
        return configured
    return str((Path(root) / DEFAULT_RECORDS).resolve())


def _refuse_shipped_records(root: Path, records: StoreRef) -> None:
    """Refuse a records file the project chose that git tracks: it came with the checkout,
    and a forged key ledger baseline or live watermark in it would pass a rewritten key
    (AC-24) or skip new faults. The user may still name it (``--records``)."""
    if records.file is None or not _tracked_by_git(Path(root), records.file):
        return
    raise KandevDqError(
        f"records database {records.shown}: git tracks it in this checkout, so its key ledger "
        "and watermarks came with the checkout, not from runs on this machine; if you trust "
        f"it, name it with --records or {RECORDS_VARIABLE}, else remove it from git "
        "(`git rm --cached`) and let the next run start a new one"
    )


#: git run on a checkout someone else wrote: settings on the command line win over every
#: config file, and ``core.fsmonitor`` is the one a checkout's ``.git/config`` could use to
#: run a command while git reads the index (hooks do not run on ``ls-files``: set anyway).
_SAFE_GIT = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "--no-pager")


def _tracked_by_git(root: Path, file: Path) -> bool:
    """Whether git tracks ``file`` in the repository holding ``root``. git itself reads its
    index rather than kandev-dq parsing it: four index versions, split and sparse indexes and
    worktrees' ``gitdir`` links are git's to read, and a misread would let a shipped file
    through; git runs with no system config, no ``GIT_*`` variable of the caller's (one could
    point it at another repository) and the settings above. No git, or no repository: not
    tracked."""
    git = shutil.which("git")
    if git is None:
        return False
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env |= {"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        done = subprocess.run(
            [git, *_SAFE_GIT, "-C", str(root), "ls-files", "--error-unmatch", "--", str(file)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _refuse_missing_folder(root: Path, records: StoreRef) -> StoreRef:
    """``records``, unless it is a SQLite file whose folder cannot hold it: a file stands on
    its path, or the folder is missing outside the project (kandev-dq creates no folder
    it was not asked for)."""
    if records.file is None:
        return records
    folder = records.file.parent
    existing = next(part for part in (folder, *folder.parents) if part.exists())
    if not existing.is_dir():
        raise KandevDqError(f"records database {records.shown}: {existing} is a file, not a folder")
    if existing != folder and not folder.is_relative_to(Path(root).resolve()):
        raise KandevDqError(
            f"records database {records.shown}: the folder {folder} does not exist; "
            "create it first, or name a records database in a folder that exists"
        )
    return records


#: A SQLite records database's files: the database, and the side files SQLite writes beside it.
_SQLITE_FILES = ("", "-wal", "-journal", "-shm")


def _refuse_linked_files(records: StoreRef) -> StoreRef:
    """``records``, unless its SQLite file or a side file has another name (a hard link, which
    a checkout can ship, to a file anywhere on the disk): a write to it would change that other
    file too (docs/reliability.md, 3a)."""
    if records.file is None:
        return records
    for suffix in _SQLITE_FILES:
        path = records.file.with_name(records.file.name + suffix)
        try:
            links = path.stat().st_nlink
        except OSError:  # none there; one that cannot be read is the open's to report
            continue
        if links > 1:
            raise KandevDqError(
                f"records database {records.shown}: {path} has {links} names (hard links), so "
                "a write to it would change another file too; give the records database a file "
                "of its own (a copy) or name another with --records"
            )
    return records


def _inside(root: Path, url: str) -> bool:
    """Whether ``url`` is a SQLite file inside the project folder ``root``."""
    target = str(Path(root) / url) if sqlite_path(url) is not None else url
    try:
        ref = store_ref(target)
    except KandevDqError:
        return False
    return ref.file is not None and ref.file.is_relative_to(Path(root).resolve())


def same_database(records, store) -> bool:
    """Whether the records database and the store (references, URLs or their text) are one
    (:meth:`~kandev_dq.store.reference.StoreRef.same_database`)."""
    return store_ref(records).same_database(store_ref(store))


def refuse_the_store(records, store) -> None:
    """Exit 2 when the records database is the store under validation (each a reference, a
    URL or its text), or when that cannot be told (fail closed: an identity that cannot be
    read is never taken for another database): validation never writes to the store it
    validates (docs/reliability.md, 3a)."""
    records = store_ref(records)
    try:
        same = same_database(records, store)
    except StoreError as exc:
        raise StoreError(
            f"cannot tell whether the records database {records.shown} is the store under "
            f"validation, so nothing is written: {exc}"
        ) from None
    if same:
        raise KandevDqError(
            f"the records database {records.shown} is the store under validation: "
            f"name another one with --records or {RECORDS_VARIABLE}"
        )
