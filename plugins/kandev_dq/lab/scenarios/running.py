"""Building a scenario into an empty store and judging its pre_release verdict."""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.severity import SEVERITIES
from kandev_dq.errors import KandevDqError
from kandev_dq.lab.scenarios.registry import Scenario, get, with_pg_options
from kandev_dq.project.files import copy_project

CHECKPOINT = "pre_release"
#: What a scenario's first check discloses about its records, not about its store: each scenario
#: runs in a private project with a new records database, so its first check always takes the
#: write-once baseline (AC-24). The matrix shows what the suite says of the store; this
#: disclosure has its own tests (tests/test_records.py).
#: (By name: listing or building scenarios loads no GX; tests hold it to the class's type.)
RECORDS_DISCLOSURES = frozenset({"expect_write_once_baseline_to_predate_this_run"})


@dataclass(frozen=True)
class Fired:
    """One failed expectation: its type, severity and the AC ids it cites."""

    expectation: str
    severity: str
    rules: tuple[str, ...]


@dataclass
class Verdict:
    """What ``pre_release`` said about one scenario on one dialect."""

    scenario: str
    dialect: str
    passed: bool
    state: str
    fired: tuple[Fired, ...]
    build_seconds: float = 0.0
    check_seconds: float = 0.0
    messages: dict[str, str] = field(default_factory=dict)

    def failed(self, severity: str | None = None) -> set[str]:
        return {f.expectation for f in self.fired if severity in (None, f.severity)}

    @property
    def signature(self) -> frozenset[tuple[str, str]]:
        """What must agree across dialects: each failed expectation with its severity."""
        return frozenset((f.expectation, f.severity) for f in self.fired)

    def cell(self) -> str:
        word = "PASSED" if self.passed else "FAILED"
        parts = [f"**{word}**"]
        for severity in SEVERITIES:
            names = sorted(f.expectation for f in self.fired if f.severity == severity)
            if names:
                parts.append(f"{severity}: " + ", ".join(f"`{n}`" for n in names))
        return "<br>".join(parts)


def problems(scenario: Scenario, verdict: Verdict) -> list[str]:
    """Why a verdict does not prove what the scenario declares (empty: it does).

    A known gap is the reverse: its fault must still be missed (else the note is stale).
    """
    if scenario.known_gap:
        missed = unproven(scenario, verdict)
        return [] if missed else [f"{scenario.name}: the known gap is closed; drop known_gap"]
    return unproven(scenario, verdict)


def unproven(scenario: Scenario, verdict: Verdict) -> list[str]:
    out: list[str] = []
    if scenario.fault:
        wanted = set(scenario.violates)
        if not any(
            f.severity == scenario.severity and wanted & set(f.rules) for f in verdict.fired
        ):
            fired = ", ".join(
                f"{f.expectation} ({f.severity}; {', '.join(f.rules)})" for f in verdict.fired
            )
            out.append(
                f"{scenario.name} on {verdict.dialect}: no {scenario.severity} failure citing "
                f"{', '.join(scenario.violates)}; fired: {fired or 'nothing'}"
            )
        if scenario.severity == "error" and verdict.passed:
            out.append(f"{scenario.name} on {verdict.dialect}: the verdict is PASSED")
        return out
    errors = verdict.failed("error")
    if errors:
        said = "; ".join(f"{e}: {verdict.messages.get(e, '')}" for e in sorted(errors))
        out.append(f"{scenario.name} on {verdict.dialect}: error failure(s) {said}")
    undeclared = verdict.failed() - errors - set(scenario.discloses)
    if undeclared:
        out.append(
            f"{scenario.name} on {verdict.dialect}: undeclared finding(s) {sorted(undeclared)}"
        )
    missing = set(scenario.discloses) - verdict.failed()
    if missing:
        out.append(
            f"{scenario.name} on {verdict.dialect}: declared finding(s) absent {sorted(missing)}"
        )
    return out


def private_project(source: Path, destination: Path) -> Path:
    """A copy of a GX project for one scenario: its own key ledger and results, and no
    data-docs action (the verdicts are the point; building docs would dominate the run)."""
    copy_project(source, destination)
    for checkpoint in (destination / "checkpoints").glob("*.json"):
        config = json.loads(checkpoint.read_text(encoding="utf-8"))
        config["actions"] = []
        checkpoint.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return destination


def materialise(name: str, target: str) -> float:
    """Build scenario ``name`` into the empty store ``target``; return the seconds it took.

    Refuses a store that already holds any Kandev table.
    """
    from kandev_dq.store.access import open_store

    scenario = get(name)
    store = open_store(target, read_only=False, must_exist=False, require_kandev=False)
    try:
        present = sorted(set(sa.inspect(store.engine).get_table_names()) & _KANDEV_TABLES)
        if present:
            raise KandevDqError(
                f"{store.shown} already holds Kandev table(s) {', '.join(present)}: "
                "a scenario is built only into an empty store"
            )
        started = time.perf_counter()
        scenario.build(store.engine)
        return time.perf_counter() - started
    finally:
        store.dispose()


_KANDEV_TABLES = {t.name for t in schema.BASE_TABLES} | {schema.SUBAGENTS, schema.REBUILD_TABLE}


def apply_between_runs(name: str, target: str) -> None:
    """Apply scenario ``name``'s mutation between its two check runs to the store ``target``."""
    from kandev_dq.store.access import open_store

    scenario = get(name)
    if scenario.between_runs is None:
        raise KandevDqError(f"scenario {name!r} is checked once: it has no between-runs mutation")
    store = open_store(target, read_only=False)
    try:
        scenario.between_runs(store.engine)
    finally:
        store.dispose()


def evaluate(name: str, target: str, project: Path, workdir: Path) -> Verdict:
    """Build scenario ``name`` into ``target`` and run ``pre_release`` on it (twice, with its
    ``between_runs`` mutation in between, when it has one), in a private project copy."""
    from kandev_dq.run.check import run_check

    scenario = get(name)
    built = materialise(name, target)
    checked_url = scenario.check_url(target) if scenario.check_url else target
    Path(workdir).mkdir(parents=True, exist_ok=True)
    folder = private_project(project, Path(tempfile.mkdtemp(prefix=f"{name}-", dir=workdir)))
    started = time.perf_counter()
    if scenario.between_runs is not None:
        run_check(folder, checked_url, CHECKPOINT)
        apply_between_runs(name, target)
    report = run_check(folder, checked_url, CHECKPOINT)
    checked = time.perf_counter() - started
    fired = tuple(
        sorted(
            (
                Fired(r.expectation, r.severity, tuple(r.rules))
                for r in report.results
                if not r.success and r.expectation not in RECORDS_DISCLOSURES
            ),
            key=lambda f: (SEVERITIES.index(f.severity), f.expectation),
        )
    )
    return Verdict(
        scenario=name,
        dialect=report.dialect,
        passed=report.success,
        state=report.state,
        fired=fired,
        build_seconds=built,
        check_seconds=checked,
        messages={
            r.expectation: r.message
            for r in report.results
            if not r.success and r.expectation not in RECORDS_DISCLOSURES
        },
    )


@contextlib.contextmanager
def scratch_sqlite(folder: Path, name: str) -> Iterator[str]:
    """A new SQLite file for one scenario (removed afterwards)."""
    path = Path(folder) / f"{name}.db"
    path.unlink(missing_ok=True)
    try:
        yield str(path)
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


@contextlib.contextmanager
def scratch_postgres(server: str) -> Iterator[str]:
    """A new schema in the PostgreSQL database ``server`` names, dropped afterwards; yields a
    URL whose ``search_path`` is that schema."""
    from kandev_dq.store.reference import resolve_url

    url = resolve_url(server)
    name = f"kdq_scenario_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        try:
            yield with_pg_options(
                url.render_as_string(hide_password=False), f"-csearch_path={name}"
            )
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        admin.dispose()
