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

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kandev_dq.contract.rule_index import WRITE_ONCE_LEDGER
from kandev_dq.expectations.base import take_validated_engine
from kandev_dq.project.deviations import checkpoint_by_id
from kandev_dq.records import Records
from kandev_dq.records.identity import validated_store, validated_store_key
from kandev_dq.records.register import finish_run, record_run, run_key, run_name, run_outcome
from kandev_dq.records.results import RuleResult, rule_result
from kandev_dq.sql.keys import read_keys
from kandev_dq.store.access import gx_facts
from kandev_dq.store.observe import observe_subagents
from kandev_dq.verdicts import VERDICTS

#: The facts a run's record starts with, read once per run through GX's API.
RUN_RECORD = "kandev.run_record"
#: The run name the key ledger records a run through GX's API under until the run is named
#: (and keeps where it never is: a suite validated outside a checkpoint).
UNNAMED_RUN = "a run through GX's API"


@dataclass
class _Unnamed:
    """What the write-once metric recorded on this thread under :data:`UNNAMED_RUN`."""

    records: Records
    identity: str
    key_names: list[str]
    baseline: bool


#: The write-once metric's unnamed records on this thread, given the run's name when its
#: suite's result is stored (the metric runs in the suite, before that).
_unnamed = threading.local()


def recorded_unnamed(records: Records, identity: str, key_names: list[str], baseline: bool) -> None:
    """Note what the key ledger recorded under :data:`UNNAMED_RUN` on this thread (replacing
    what an earlier validation that stored no result left)."""
    _unnamed.found = _Unnamed(records, identity, key_names, baseline)


#: The rules reading the key ledger: a suite holding none recorded nothing in it.
_LEDGER_RULES = frozenset(
    name for name, verdict in VERDICTS.items() if WRITE_ONCE_LEDGER in verdict.judged_metrics
)


def _name_what_was_recorded(suite_result, run_name: str | None) -> None:
    """Give what the key ledger recorded under :data:`UNNAMED_RUN` while ``suite_result`` was
    validated ``run_name``, the run's name once it has one; forgotten either way, so a later
    run is never credited with it."""
    found, _unnamed.found = getattr(_unnamed, "found", None), None
    ledger_read = any(r.expectation_config.type in _LEDGER_RULES for r in suite_result.results)
    if found is not None and ledger_read and run_name:
        found.records.name_the_run(
            found.identity, found.key_names, found.baseline, UNNAMED_RUN, run_name
        )


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
    if run is None and run_id.run_name is None:
        run = _start(records, project, suite_result, run_id, engine)
    # The ledger's first sightings and baseline name the run that recorded them: this one,
    # named by kandev-dq above or by the user.
    _name_what_was_recorded(suite_result, run_id.run_name)
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
