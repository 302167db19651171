"""The key ledger the write-once rules judge (AC-24), as a GX metric.

One snapshot cannot show that a key was rewritten or deleted; the records database can. This
metric records the store's first sightings of its keys in the records database of the project
the validation runs in (its results store's backend, :mod:`kandev_dq.gx.results_store`) and
hands the rules the first values and the store's write-once baseline. ``kandev-dq check``, the
Python API and a checkpoint run through GX's own API (a scheduler) all reach it the same way, so
they share one baseline: a key rewritten between two runs is caught whichever path runs second.
The metric is registered with GX when this module is imported; the project's expectations store
(:mod:`kandev_dq.gx.suites_store`) imports it, so loading a project's context is enough.
"""

from __future__ import annotations

from typing import Any

from kandev_dq.contract.rule_index import WRITE_ONCE_LEDGER
from kandev_dq.errors import KandevDqError
from kandev_dq.expectations.base import register_metric
from kandev_dq.gx import adapter as gx_adapter
from kandev_dq.gx.native_runs import UNNAMED_RUN, recorded_unnamed
from kandev_dq.gx.results_store import RecordsStoreBackend
from kandev_dq.records import Records, refuse_the_store
from kandev_dq.records.identity import accept_options, validated_store, validated_store_key
from kandev_dq.sql.keys import read_keys
from kandev_dq.store.access import gx_facts
from kandev_dq.store.snapshot import pin_of


def take_ledger(
    records: Records, identity: str, keys: dict[str, str | None], run_name: str | None
) -> dict[str, Any]:
    """Record this run's first sightings (insert-if-absent: concurrent runs agree) and return
    what the rules judge: each key's expected value and the store's baseline. A run not yet
    named (GX's own API: GX hands a metric no run identifier) records under
    :data:`~kandev_dq.gx.native_runs.UNNAMED_RUN`, and its results store gives what it recorded
    the run's name once it has one (:func:`~kandev_dq.gx.native_runs.name_and_record`)."""
    recorded_as = run_name or UNNAMED_RUN
    baseline = records.take_baseline(identity, recorded_as)
    sighted = records.record_first_sightings(identity, keys, recorded_as)
    if run_name is None:
        recorded_unnamed(records, identity, sighted, baseline.recorded_now)
    return {
        "first_seen": records.expected_values(identity),
        "baseline": baseline.parameter(),
    }


def records_of(context) -> Records:
    """The records database of the project ``context`` loaded; a project whose results store
    is not kandev-dq's keeps no ledger, and the rule says so instead of passing."""
    backend = getattr(getattr(context, "validation_results_store", None), "store_backend", None)
    if not isinstance(backend, RecordsStoreBackend):
        raise KandevDqError(
            "this project keeps no records database (its validation results store is not "
            "kandev-dq's RecordsStoreBackend): write-once cannot be judged; "
            "rewrite the project with `kandev-dq init --force`"
        )
    return backend.records


def write_once_ledger(execution_engine, params: dict[str, Any]) -> dict[str, Any]:
    """``{"first_seen": {key: value}, "baseline": {...}}`` for the store being validated, with
    what the rule's remedy needs to name it again (:func:`accept_options`)."""
    gx_engine = execution_engine.engine
    records = records_of(gx_adapter.validating_context(execution_engine))
    # Validation never writes to the store it validates: checked on every path, on the
    # reference the run read once (GX's own path: the engine's URL).
    store = validated_store(gx_engine)
    refuse_the_store(records.ref, store)
    keys = gx_facts(gx_engine, "kandev.write_once_keys", read_keys)
    pin = pin_of(gx_engine)
    run_name = pin.run_name if pin is not None and pin.run_name else None
    ledger = take_ledger(records, validated_store_key(records, gx_engine), keys, run_name)
    return ledger | accept_options(store, records)


register_metric(WRITE_ONCE_LEDGER, write_once_ledger)
