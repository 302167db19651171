"""Facts behind the schema rules (CONTRACT §1, §3): ``task_session_subagents`` as the live
schema has it, read with :func:`kandev_dq.store.observe.observe_subagents` on both dialects.

The expected shape is the one a fresh store gets from
:func:`kandev_dq.contract.tables.create_subagents_table` (``schema.AMENDED_UNIQUE``,
``schema.SECONDARY_INDEXES``); the comparison itself lives in
:class:`kandev_dq.store.observe.SubagentsShape`, which the migration runner reads the same way.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.facts.shapes import ForeignKey, Index, SchemaFacts
from kandev_dq.store.observe import (
    EXECUTION_COLUMN,
    ForeignKeyShape,
    IndexShape,
    observe_subagents,
    schema_inspector,
)


def _fk(fk: ForeignKeyShape) -> ForeignKey:
    return {
        "columns": list(fk.columns),
        "references": f"{fk.referred_table}({', '.join(fk.referred_columns)})",
        "on_delete": fk.on_delete or "NO ACTION",
    }


def _index(index: IndexShape) -> Index:
    return {"columns": list(index.columns), "unique": index.unique, "partial": index.partial}


def schema_facts(conn: sa.Connection) -> SchemaFacts:
    """The observed shape, clause by clause (AC-17, AC-33 1–4, AC-33a, AC-16, no-FK columns)."""
    shape = observe_subagents(conn)
    leftover = schema_inspector(conn).has_table(schema.REBUILD_TABLE)
    facts: dict[str, Any] = {
        "table": schema.SUBAGENTS,
        "table_exists": shape.table_exists,
        "shape": shape.describe(),
        "rebuild_table_left": leftover,
        "rebuild_table": schema.REBUILD_TABLE,
    }
    if not shape.table_exists:
        return facts
    facts.update(
        {
            "execution_column": {
                "present": shape.has_execution_column,
                "nullable": shape.execution_column_nullable,
                "default": shape.execution_column_default,
            },
            "clause_1": shape.clause_1_holds,
            "unique_keys": [list(cols) for cols in shape.unique_keys],
            "clause_2": shape.has_amended_unique,
            "two_column_unique_remains": shape.two_column_unique_remains,
            "pure_pre_amendment": (
                not shape.has_execution_column
                and shape.two_column_unique_remains
                and not shape.has_amended_unique
            ),
            "clauses_1_to_3": shape.clauses_1_to_3_hold,
            "indexes": {
                "expected": {n: list(c) for n, c in schema.SECONDARY_INDEXES.items()},
                "missing": {n: list(c) for n, c in shape.missing_indexes.items()},
                "misshapen": {n: _index(i) for n, i in shape.misshapen_indexes.items()},
                "unexpected": {n: _index(i) for n, i in shape.unexpected_indexes.items()},
            },
            "clause_4": shape.clause_4_holds,
            "foreign_keys": [_fk(fk) for fk in shape.foreign_keys],
            "session_fk_cascades": shape.session_fk_cascades,
            "forbidden_foreign_keys": [_fk(fk) for fk in shape.forbidden_foreign_keys],
            "no_fk_columns": ["turn_id", EXECUTION_COLUMN],
        }
    )
    return facts
