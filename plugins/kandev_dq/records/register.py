"""What each ``kandev-dq check`` run saw, for the data docs and ``history``: the run register.

The validation results carry neither the store a run read nor the raw key values. ``check``
reads both from the run's pinned snapshot before GX runs the checkpoint (the snapshot its rules
then judge) and records them, without credentials, in the records database
(:class:`Register`) under the run's name and key; when the run ends it adds the
verdict, the failed rules by severity, the failed rules themselves and the duration. The data
docs overview (:mod:`kandev_dq.report.overview_model`) and ``history`` read them back, on any
machine that points at the same records database.

**Run names.** Every run is tagged through GX's own run identifier (:mod:`kandev_dq.gx.checkpoint`).
GX writes the run name into the key of each validation result it stores and into the result's
``meta.run_id``, and the data docs list it as the run's name. kandev-dq's run name is
``<checkpoint>@<store tag>``: the checkpoint, then the store's key-ledger identity (no user, no
password, no ``password=`` query parameter) as a file-name-safe slug followed by a short hash of
that identity. ``kandev-dq history`` finds a store's runs by recomputing its tag.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.states import state_of
from kandev_dq.facts.activation import describe_key
from kandev_dq.records.results import RuleResult, counted
from kandev_dq.records.tables import now_text, runs
from kandev_dq.store.target import redact
from kandev_dq.text import file_name_slug

#: A store's runs read at a time, newest first (:meth:`Register.finished_runs_of_store`).
STORE_RUNS_PAGE = 20


# --- run names ---------------------------------------------------------------------------------


def store_tag(identity: str) -> str:
    """A file-name-safe, credential-free tag for a store identity (readable slug + hash)."""
    slug = file_name_slug(identity)
    if len(slug) > 60:
        slug = f"{slug[:20]}-{slug[-39:]}"
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:8]
    return f"{slug}-{digest}"


#: Between a checkpoint's name and its part's in a partial run's name.
PARTIAL = ".partial-"


def run_name(checkpoint: str, identity: str, part: str | None = None) -> str:
    """The GX run name of a kandev-dq run: ``<checkpoint>@<store tag>``; of a partial run,
    ``<checkpoint>.partial-<part>@<store tag>``
    (:attr:`kandev_dq.project.selection.Selection.name`)."""
    checkpoint = file_name_slug(checkpoint) or "checkpoint"
    if part:
        checkpoint += PARTIAL + part
    return f"{checkpoint}@{store_tag(identity)}"


def parse_run_name(name: str | None) -> tuple[str, str] | None:
    """(checkpoint, store tag) of a kandev-dq run name; None for any other run."""
    if not name or "@" not in name:
        return None
    checkpoint, _, tag = name.rpartition("@")
    return (checkpoint, tag) if checkpoint and tag else None


# --- the register ------------------------------------------------------------------------------


class Register:
    """The run register's part of :class:`~kandev_dq.records.database.Records`."""

    engine: sa.Engine
    dialect: str

    def register_run(self, record: dict[str, Any]) -> None:
        """Record a run before GX runs it (the docs built during the run read it)."""
        row = {**record, "keys": json.dumps(record.get("keys") or {}, default=str)}
        with self.engine.begin() as conn:
            conn.execute(runs.insert(), {**row, "finished": False})

    def finish_run(self, run_name: str, run_key: str, outcome: dict[str, Any]) -> None:
        values = {
            "finished": True,
            "success": outcome.get("success"),
            "counts": json.dumps(outcome.get("counts") or {}),
            "failed_rules": json.dumps(outcome.get("failed_rules") or []),
            "duration_s": outcome.get("duration_s"),
        }
        with self.engine.begin() as conn:
            conn.execute(
                runs.update()
                .where(runs.c.run_name == run_name, runs.c.run_key == run_key)
                .values(**values)
            )

    def last_finished_run(
        self, run_name: str, identity: str, before: str | None = None
    ) -> dict[str, Any] | None:
        """The newest finished run of ``run_name``'s checkpoint on the store ``identity``: named
        ``run_name``, or, recorded for the store, under the name its checkpoint had there before
        stores were named by their identity (:mod:`kandev_dq.records.names`); of those with
        a run key before ``before`` when it is given."""
        checkpoint = run_name.rpartition("@")[0] + "@"
        query = (
            sa.select(runs)
            .where(
                sa.or_(
                    runs.c.run_name == run_name,
                    sa.and_(
                        runs.c.store_identity == identity,
                        runs.c.run_name.startswith(checkpoint, autoescape=True),
                    ),
                ),
                runs.c.finished.is_(True),
            )
            .where(runs.c.run_key < before if before is not None else sa.true())
            # Each side through an index: (run_name, run_key), or (store_identity, run_time).
            .order_by(runs.c.run_key.desc(), runs.c.id.desc())
            .limit(1)
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return _run_dict(row) if row is not None else None

    def finished_runs_of_store(
        self, identity: str, before: str | None, limit: int
    ) -> Iterator[dict[str, Any]]:
        """The store's finished runs (any checkpoint) with a run key before ``before``, newest
        first, at most ``limit``: read a page at a time through the (store, run time) index,
        so a caller stopping at the first few reads no more."""
        query = (
            sa.select(runs)
            .where(runs.c.store_identity == identity, runs.c.finished.is_(True))
            .where(runs.c.run_key < before if before is not None else sa.true())
            .order_by(runs.c.run_time.desc(), runs.c.id.desc())
        )
        for offset in range(0, limit, STORE_RUNS_PAGE):
            with self.engine.connect() as conn:
                page = conn.execute(
                    query.limit(min(STORE_RUNS_PAGE, limit - offset)).offset(offset)
                ).all()
            yield from (_run_dict(row) for row in page)
            if len(page) < STORE_RUNS_PAGE:
                return

    def run_records(
        self,
        *,
        identity: str | None = None,
        run_keys: list[str] | None = None,
        limit: int | None = None,
        checkpoints: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Recorded runs, newest first (of one store, or with the given run keys; of the given
        checkpoints only, when named)."""
        query = sa.select(runs).order_by(runs.c.run_time.desc(), runs.c.id.desc())
        if identity is not None:
            query = query.where(runs.c.store_identity == identity)
        if checkpoints:
            query = query.where(runs.c.checkpoint.in_(checkpoints))
        if run_keys is not None:
            query = query.where(runs.c.run_key.in_(run_keys))
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_run_dict(row) for row in conn.execute(query)]


def _run_dict(row) -> dict[str, Any]:
    record = dict(row._mapping)
    record["keys"] = json.loads(record["keys"] or "{}")
    record["counts"] = json.loads(record["counts"]) if record["counts"] else None
    record["failed_rules"] = json.loads(record["failed_rules"]) if record["failed_rules"] else []
    record["selection"] = json.loads(record["selection"]) if record.get("selection") else None
    record.pop("id", None)
    return record


def run_key(run_id) -> str:
    """A run's name in the register: its run time as GX writes it in result paths."""
    return run_id.to_tuple()[1]


def record_run(
    records: Register,
    run_id,
    checkpoint: str,
    identity: str,
    store: str,
    dialect: str,
    keys: dict[str, str | None],
    amended: bool | None = None,
    selection: dict[str, list[str]] | None = None,
) -> None:
    """Record a run as it starts: its store (as outputs name it, redacted once more for
    safety), dialect, AC-24c state, whether AC-33 clauses 1-3 held, the activation keys, and
    for a partial run its suites and rules."""
    records.register_run(
        {
            "run_name": run_id.run_name,
            "run_key": run_key(run_id),
            "run_time": now_text(run_id.run_time),
            "checkpoint": checkpoint,
            "store_identity": identity,
            "store": redact(store),
            "dialect": dialect,
            "state": state_of(keys),
            "amended": amended,
            "keys": {name: _jsonable(describe_key(name, raw)) for name, raw in keys.items()},
            "selection": json.dumps(selection) if selection is not None else None,
        }
    )


def finish_run(records: Register, run_id, outcome: dict[str, Any]) -> None:
    """Add a finished run's verdict, counts, failed rules and duration to its record."""
    records.finish_run(run_id.run_name, run_key(run_id), outcome)


def run_outcome(results: list[RuleResult], success: bool, duration_s: float) -> dict[str, Any]:
    """What a finished run adds to its record (:func:`finish_run`): its verdict, its rules
    counted by severity with the suites they ran in, its failed rules (a message cut to 2,000
    characters), its duration. ``kandev-dq check`` and a run through GX's API alike."""
    return {
        "success": success,
        "counts": counted(results) | {"suites": sorted({r.suite for r in results if r.suite})},
        "failed_rules": [
            {
                "suite": r.suite,
                "expectation": r.expectation,
                "rules": r.rules,
                "severity": r.severity,
                "message": r.message[:2000],
                "since": r.failing_since,
            }
            for r in results
            if not r.success
        ],
        "duration_s": round(duration_s, 3),
    }


def load_register(records: Register | None, run_keys: list[str]) -> dict[str, dict[str, Any]]:
    """The register's records of the given runs, by run key (empty without records)."""
    if records is None or not run_keys:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for record in records.run_records(run_keys=run_keys):
        found.setdefault(record["run_key"], record)
    return found


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
