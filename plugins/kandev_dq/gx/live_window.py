"""The window a ``live`` suite reads, as a GX metric (:data:`LIVE_WINDOW`): decided once per
suite run from the records database (:mod:`kandev_dq.records.watermark` says how).

The metric reaches the records database the way the write-once ledger does
(:mod:`kandev_dq.gx.write_once`), so ``kandev-dq check``, the Python API and GX's own API share
one history of live runs. It is registered with GX when this module is imported; the project's
expectations store (:mod:`kandev_dq.gx.suites_store`) imports it.
"""

from __future__ import annotations

from typing import Any

from kandev_dq.contract.rule_index import LIVE_KEY, LIVE_WINDOW
from kandev_dq.expectations.base import register_metric
from kandev_dq.gx import adapter as gx_adapter
from kandev_dq.gx.write_once import records_of
from kandev_dq.project.settings import live_settings
from kandev_dq.records.identity import validated_store, validated_store_key
from kandev_dq.records.location import refuse_the_store
from kandev_dq.records.watermark import decide, last_watermark
from kandev_dq.store.access import gx_facts
from kandev_dq.store.replication import server_clock
from kandev_dq.store.snapshot import pin_of


def live_window(execution_engine, params: dict[str, Any]) -> dict[str, Any]:
    """The window of the live suite ``params["live_window"]`` on the store being validated."""
    suite = params[LIVE_KEY]
    gx_engine = execution_engine.engine
    records = records_of(gx_adapter.validating_context(execution_engine))
    refuse_the_store(records.ref, validated_store(gx_engine))  # validation never writes to it
    pin = pin_of(gx_engine)
    clock = pin.clock if pin is not None and pin.clock is not None else None
    if clock is None:  # GX's own path: the store's clock, before any of the suite's facts
        clock = gx_facts(gx_engine, "server clock", server_clock)
    identity = validated_store_key(records, gx_engine)
    last = last_watermark(records, str(suite), identity)
    settings = live_settings()
    if last is None:
        decided = decide(str(suite), None, clock.at, settings, standby=clock.standby)
    else:
        decided = decide(str(suite), last.watermark, clock.at, settings, last.open, clock.standby)
    # The store as every output names it; its records key finds this window again.
    return decided | {"store": validated_store(gx_engine).shown, "records_key": identity}


register_metric(LIVE_WINDOW, live_window, (LIVE_KEY,))
