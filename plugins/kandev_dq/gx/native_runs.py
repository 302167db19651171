"""A checkpoint run through GX's own API, named and recorded as ``kandev-dq check`` records its.

GX draws such a run's identifier itself (``checkpoint.run()`` names no run), so its results
were kept as run ``__none__`` of a store the run register never saw: ``history``, the
changes since the last run and the overview's timeline left it out. kandev-dq's results store
is the one place GX hands kandev-dq that identifier, with each suite's result, before storing
it. On the first suite's result the run is named ``<checkpoint>@<store tag>``, the name
``kandev-dq check`` gives a run of that checkpoint on that store, and recorded in the run
register with the store's activation state and keys, read in a read-only session of its own;
the checkpoint's last suite finishes the record with the verdict, the counts and the failed
rules (:func:`~kandev_dq.records.register.run_outcome`).

GX's ``RunIdentifier`` has no setter: its name is set in the one object GX keeps for the run,
which the checkpoint's later results, its ``CheckpointResult`` and its data docs action all
hold, so every key and page GX writes for the run carries the name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kandev_dq.expectations.base import take_validated_engine
from kandev_dq.project.deviations import checkpoint_by_id
from kandev_dq.records import Records
from kandev_dq.records.identity import validated_store, validated_store_key
from kandev_dq.records.register import finish_run, record_run, run_key, run_name, run_outcome
from kandev_dq.records.results import RuleResult, rule_result
from kandev_dq.sql.keys import read_keys
from kandev_dq.store.access import gx_facts
from kandev_dq.store.observe import observe_subagents

#: The facts a run's record starts with, read once per run through GX's API.
RUN_RECORD = "kandev.run_record"


@dataclass
class _Open:
    """A run through GX's API whose checkpoint has suites left to store."""

    suites_left: int
    results: list[RuleResult] = field(default_factory=list)
    success: bool = True


#: By run name and run key, from the first suite's result to the last.
_open: dict[tuple[str, str], _Open] = {}


def name_and_record(records: Records, project: Path, suite_result, run_id) -> None:
    """Before GX stores ``suite_result``: name the run and record it (its first suite), and
    finish its record (its last). A run ``kandev-dq check`` or the user named is left alone;
    so is one kandev-dq cannot place (a suite validated outside a checkpoint, or holding none
    of kandev-dq's rules, whose store no kandev-dq metric read)."""
    engine = take_validated_engine()  # this suite's store, taken whichever run it is
    run = _open.get((run_id.run_name, run_key(run_id))) if run_id.run_name else None
    if run is None:
        if run_id.run_name is not None:
            return
        run = _start(records, project, suite_result, run_id, engine)
        if run is None:
            return
    run.results += [rule_result(r, suite=suite_result.suite_name) for r in suite_result.results]
    run.success = run.success and bool(suite_result.success)
    run.suites_left -= 1
    if run.suites_left <= 0:
        del _open[(run_id.run_name, run_key(run_id))]
        duration = time.time() - run_id.run_time.timestamp()
        finish_run(records, run_id, run_outcome(run.results, run.success, duration))


def _start(records: Records, project: Path, suite_result, run_id, engine) -> _Open | None:
    checkpoint = checkpoint_by_id(project, (suite_result.meta or {}).get("checkpoint_id"))
    if engine is None or checkpoint is None:
        return None
    name, suites = checkpoint
    store = validated_store(engine)
    identity = validated_store_key(records, engine)

    def state(conn) -> tuple[dict[str, Any], bool]:
        return read_keys(conn), observe_subagents(conn).clauses_1_to_3_hold

    keys, amended = gx_facts(engine, RUN_RECORD, state)
    run_id._run_name = run_name(name, identity)
    record_run(records, run_id, name, identity, store.shown, store.kind, keys, amended)
    run = _open[(run_id.run_name, run_key(run_id))] = _Open(suites_left=len(suites))
    return run
