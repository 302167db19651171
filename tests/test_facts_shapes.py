"""Each facts function returns exactly the keys its shape declares, on both dialects.

The stores cover every path a function takes (a fully activated store, one whose backfill
matched nothing, one without the subagents table or any key): each output holds every
required key and no undeclared one, and every optional key appears on some store, so a shape
cannot drift from its function in either direction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_type_hints

import sqlalchemy as sa

from kandev_dq.facts import shapes
from kandev_dq.facts.activation import activation_facts, disclosure_facts, sentinel_backfill_facts
from kandev_dq.facts.backfill import backfill_facts
from kandev_dq.facts.health import health_facts
from kandev_dq.facts.rows import row_facts
from kandev_dq.facts.schema_facts import schema_facts
from kandev_dq.facts.stored_text import stored_text_facts
from kandev_dq.lab.storebuilder import StoreBuilder
from tests.test_row_rules import CAPTURE, EXECUTION, _healthy


def _windowed(compute: Callable[..., Any]) -> Callable[[Any], Any]:
    return lambda conn: compute(conn, window_minutes=10.0)


def _live(compute: Callable[..., Any]) -> Callable[[Any], Any]:
    """The family read over a live window (the ``live`` checkpoint's read)."""
    return lambda conn: compute(conn, window=shapes.ChangeWindow(CAPTURE, "a live window"))


FAMILIES = [
    (activation_facts, shapes.ActivationFacts),
    (_live(activation_facts), shapes.ActivationFacts),
    (_live(health_facts), shapes.HealthFacts),
    (_live(row_facts), shapes.RowFacts),
    (_windowed(sentinel_backfill_facts), shapes.SentinelBackfillFacts),
    (disclosure_facts, shapes.DisclosureFacts),
    (health_facts, shapes.HealthFacts),
    (row_facts, shapes.RowFacts),
    (schema_facts, shapes.SchemaFacts),
    (stored_text_facts, shapes.StoredTextFacts),
    (_windowed(backfill_facts), shapes.BackfillFacts),
]


def _fully_activated(target) -> None:
    _healthy(StoreBuilder(target.engine).create())


def _backfill_matched_nothing(target) -> None:
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", EXECUTION)
    store.subagent_row(store.session(), "toolu_backfilled", CAPTURE, source="backfill")


def _without_the_table(target) -> None:
    StoreBuilder(target.engine).create(subagents=None)


STORES = [_fully_activated, _backfill_matched_nothing, _without_the_table]


def test_each_facts_function_returns_exactly_its_declared_keys(target):
    # Resolving the hints also fails on a shape naming a type that does not exist.
    declared = {shape: set(get_type_hints(shape)) for _, shape in FAMILIES}
    seen: dict[type, set[str]] = {shape: set() for _, shape in FAMILIES}
    for build in STORES:
        with target.engine.begin() as conn:  # each store starts from an empty database
            tables = sa.MetaData()
            tables.reflect(conn)
            tables.drop_all(conn)
        build(target)
        with target.engine.connect() as conn:
            for compute, shape in FAMILIES:
                keys = set(compute(conn))
                assert shape.__required_keys__ <= keys, (shape.__name__, build.__name__)
                extra = keys - declared[shape]
                assert not extra, (shape.__name__, build.__name__, extra)
                seen[shape] |= keys
    for _, shape in FAMILIES:
        assert seen[shape] == declared[shape], shape.__name__
