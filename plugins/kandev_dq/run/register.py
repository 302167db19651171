"""What each ``kandev-dq check`` run saw, for the data docs and ``history``: the run register.

The validation results carry neither the store a run read nor the raw key values. ``check``
reads both from the run's pinned snapshot before GX runs the checkpoint (the snapshot its rules
then judge) and records them, without credentials, in the records database
(:mod:`kandev_dq.run.records`) under the run's name and key; when the run ends it adds the
verdict, the failed rules by severity, the failed rules themselves and the duration. The data
docs overview (:mod:`kandev_dq.report.overview_model`) and ``history`` read them back, on any
machine that points at the same records database.
"""

from __future__ import annotations

from typing import Any

from kandev_dq.contract.states import state_of
from kandev_dq.facts.activation import describe_key
from kandev_dq.run.records import Records, now_text
from kandev_dq.store.target import redact


def run_key(run_id) -> str:
    """A run's name in the register: its run time as GX writes it in result paths."""
    return run_id.to_tuple()[1]


def record_run(
    records: Records,
    run_id,
    checkpoint: str,
    identity: str,
    store: str,
    dialect: str,
    keys: dict[str, str | None],
    amended: bool | None = None,
) -> None:
    """Record a run as it starts: its store (as outputs name it, redacted once more for
    safety), dialect, AC-24c state, whether AC-33 clauses 1-3 held, and the activation keys."""
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
        }
    )


def finish_run(records: Records, run_id, outcome: dict[str, Any]) -> None:
    """Add a finished run's verdict, counts, failed rules and duration to its record."""
    records.finish_run(run_id.run_name, run_key(run_id), outcome)


def load_register(records: Records | None, run_keys: list[str]) -> dict[str, dict[str, Any]]:
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
