"""``kandev-dq doctor``: whether a check could run here, one fact at a time.

What a check needs, asked the way the check asks it, and said one fact a line: the versions,
the project (found, and vetted as a check vets it before GX loads), the store (reachable, a
Kandev store, its dialect and server, its activation state, which of the indexes its owner may
add for ``live`` it has) and the records database (its place, not the store by the identity
the records-vs-store refusal reads, reachable). Each failing fact says what to do.

Read-only, like a check's reads: the store is opened read-only, a records database is opened
read-only where it exists, and one that does not yet exist is said to be made by the first
check, never created here. GX is never imported (its version is its package's metadata).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TypeVar

from kandev_dq.errors import ExitCode, KandevDqError
from kandev_dq.store.reference import StoreRef

T = TypeVar("T")


class Status(StrEnum):
    ok = "ok"
    #: Holds, and worth knowing (an index the owner may add): never fails the diagnosis.
    note = "note"
    fail = "fail"


@dataclass(frozen=True)
class Fact:
    """One line of the diagnosis: what it is about, whether it holds, and what it says (with,
    when it fails, what to do)."""

    about: str
    status: Status
    text: str

    def line(self) -> str:
        """The fact as text output shows it (the caller escapes it: it holds store values)."""
        return f"{self.status.value.upper():<4}  {self.about}: {self.text}"


@dataclass
class Diagnosis:
    facts: list[Fact] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        failed = any(fact.status is Status.fail for fact in self.facts)
        return ExitCode.COULD_NOT_RUN if failed else ExitCode.OK

    def summary(self) -> str:
        failed = sum(fact.status is Status.fail for fact in self.facts)
        if not failed:
            return f"doctor: all {len(self.facts)} facts hold: a check can run here"
        return f"doctor: {failed} of {len(self.facts)} facts fail: fix them, then run it again"

    def to_json(self) -> dict:
        return {
            "ok": self.exit_code is ExitCode.OK,
            "exit_code": int(self.exit_code),
            "facts": [asdict(fact) | {"status": fact.status.value} for fact in self.facts],
        }


def diagnose(store: str | None, project: Path | None, records: str | None) -> Diagnosis:
    """Each fact a check depends on, for the store, project and records database a check given
    the same options would use."""
    found = Diagnosis()
    found.facts += _versions()
    folder = _asked(found, "project", lambda: _project(project))
    if folder is not None:
        _asked(found, "project vetting", lambda: _vetted(folder))
    ref = _asked(found, "store", lambda: _store(store))
    chosen = _asked(found, "records database", lambda: _records(folder, records, ref))
    if chosen is not None:
        _asked(found, "records database", lambda: _records_state(chosen))
    return found


def _asked(found: Diagnosis, about: str, ask: Callable[[], tuple[T, list[Fact]]]) -> T | None:
    """What ``ask`` finds (a value and the facts that hold), its facts added to ``found``; its
    refusal added as a failing fact about ``about``, and None."""
    try:
        value, facts = ask()
    except KandevDqError as exc:
        found.facts.append(Fact(about, Status.fail, str(exc)))
        return None
    found.facts += facts
    return value


def _versions() -> Iterator[Fact]:
    from kandev_dq.run.versions import kandev_dq_version

    yield Fact("kandev-dq", Status.ok, kandev_dq_version())
    try:
        yield Fact("Great Expectations", Status.ok, version("great-expectations"))
    except PackageNotFoundError:
        yield Fact(
            "Great Expectations",
            Status.fail,
            "not installed: reinstall kandev-dq (`pip install kandev-dq`), which requires it",
        )


def _project(project: Path | None) -> tuple[Path, list[Fact]]:
    from kandev_dq.run.inputs import project_folder

    try:
        folder = project_folder(project)
    except KandevDqError as exc:
        raise KandevDqError(
            f"{exc}; pass --project DIR, or create one with `kandev-dq init DIR`"
        ) from None
    return folder, [Fact("project", Status.ok, str(folder))]


def _vetted(folder: Path) -> tuple[Path, list[Fact]]:
    """The vetting a check runs before GX loads (docs/reliability.md, 3a)."""
    from kandev_dq.run.inputs import project_as_data

    try:
        project_as_data(folder, allow_project_code=False, own_run_only=True)
    except KandevDqError as exc:
        raise KandevDqError(
            f"{exc}; a check refuses it: remove that entry (`kandev-dq init --force DIR` "
            "rewrites kandev-dq's files), or pass --allow-project-code if you trust its author"
        ) from None
    return folder, [
        Fact("project vetting", Status.ok, "holds only what kandev-dq writes, as a check vets it")
    ]


def _store(store: str | None) -> tuple[StoreRef, list[Fact]]:
    """The store, opened read-only: reachable and a Kandev store; then, as facts of their own,
    its activation state and the owner's indexes for ``live``."""
    from kandev_dq.project.settings import STORE_URL_VARIABLE
    from kandev_dq.run.inputs import refuse_unusable_store
    from kandev_dq.store.access import open_store

    try:
        ref = refuse_unusable_store(store)
        opened = open_store(ref, read_only=True)
    except KandevDqError as exc:
        said = str(exc)
        if STORE_URL_VARIABLE not in said:  # the refusal of no store at all says it already
            said += f"; pass --store URL|PATH, or set {STORE_URL_VARIABLE}, to a Kandev store"
        raise KandevDqError(said) from None
    try:
        with opened.engine.connect() as conn:
            server, facts = _store_facts(conn)
    finally:
        opened.dispose()
    reached = f"{ref.shown}: reachable, a Kandev store ({opened.dialect}, {server})"
    return ref, [Fact("store", Status.ok, reached), *facts]


def _store_facts(conn) -> tuple[str, list[Fact]]:
    """The store's server version, and its activation state and owner's indexes as facts."""
    from kandev_dq.contract.states import FULLY_ACTIVATED, state_of
    from kandev_dq.facts.window import OWNER_INDEXES, owner_index_statements
    from kandev_dq.sql.dialect import server_version
    from kandev_dq.sql.keys import read_keys
    from kandev_dq.store.observe import index_leading

    state = state_of(read_keys(conn))
    facts = [
        Fact(
            "activation",
            Status.ok if state == FULLY_ACTIVATED else Status.note,
            state
            if state == FULLY_ACTIVATED
            else f"{state}: `kandev-dq check` says what it means and what moves it on",
        )
    ]
    for (table, column), statement in zip(
        OWNER_INDEXES.values(), owner_index_statements(), strict=True
    ):
        held = index_leading(conn, table, (column,))
        facts.append(
            Fact(f"live index on {table}.{column}", Status.ok, f"{held}")
            if held is not None
            else Fact(
                f"live index on {table}.{column}",
                Status.note,
                f"none, so `live` reads these changes per session or by a scan, growing with the "
                f"store; for `live` every few minutes its owner may add it: {statement} "
                "(docs/interpretations.md)",
            )
        )
    return server_version(conn), facts


def _records(
    folder: Path | None, records: str | None, store: StoreRef | None
) -> tuple[StoreRef, list[Fact]]:
    """The records database a check would use, told apart from the store by what each is (the
    refusal a check makes)."""
    from kandev_dq.project.settings import records_option
    from kandev_dq.records import RECORDS_VARIABLE, records_ref, refuse_the_store
    from kandev_dq.store.reference import store_ref

    if folder is not None:
        ref = records_ref(folder, records)
    elif (given := records_option(records)) is not None:
        ref = store_ref(given)
    else:
        raise KandevDqError(
            f"not found without a project: fix the project, or pass --records or set "
            f"{RECORDS_VARIABLE}"
        )
    if store is None:
        compared = Fact(
            "records database",
            Status.note,
            f"{ref.shown}: not compared with the store, which could not be read",
        )
    else:
        refuse_the_store(ref, store)
        compared = Fact(
            "records database", Status.ok, f"{ref.shown}: not the store under validation"
        )
    return ref, [compared]


def _records_state(ref: StoreRef) -> tuple[StoreRef, list[Fact]]:
    """Whether the records database can be read, and its schema, opened read-only; one not
    yet made is the first check's to create."""
    import sqlalchemy as sa

    from kandev_dq.records import SCHEMA_VERSION, schema_versions
    from kandev_dq.store.access import open_store

    def holds(state: str) -> tuple[StoreRef, list[Fact]]:
        return ref, [Fact("records database", Status.ok, f"{ref.shown}: {state}")]

    if ref.file is not None and not ref.file.exists():
        return holds("will be created at first check")
    try:
        opened = open_store(ref, read_only=True, require_kandev=False)
    except KandevDqError as exc:
        raise KandevDqError(
            f"{exc}; name a records database kandev-dq can open with --records"
        ) from None
    try:
        with opened.engine.connect() as conn:
            if not sa.inspect(conn).has_table(schema_versions.name):
                return holds("reachable; its tables will be created at first check")
            newest = conn.execute(sa.select(sa.func.max(schema_versions.c.version))).scalar()
    finally:
        opened.dispose()
    if newest is not None and newest > SCHEMA_VERSION:
        raise KandevDqError(
            f"{ref.shown} has schema version {newest}, newer than this kandev-dq's "
            f"{SCHEMA_VERSION}: upgrade kandev-dq"
        )
    return holds(f"reachable, records schema {newest}")
