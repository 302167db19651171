"""Faults in the schema and execution_since (AC-33, AC-16, AC-17)."""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import EXECUTION_SINCE
from kandev_dq.lab.scenarios.baseline import (
    SL,
    TC_LIVE_COMPLETED,
    baseline,
    legacy_store,
    run_migration,
)
from kandev_dq.lab.scenarios.mutations import (
    add_two_column_unique,
    delete_session_unenforced,
    drop_session_foreign_key,
    drop_three_column_unique,
    set_key,
    stored_row,
)
from kandev_dq.lab.scenarios.registry import registered
from kandev_dq.lab.scenarios.rows import insert_rows, uid, writing


@registered(
    "execution_since_with_two_column_key",
    "execution_since written while the two-column UNIQUE remains",
    violates=("AC-33b", "AC-33"),
    severity="error",
)
def _two_column_remains(engine: sa.Engine) -> None:
    baseline(engine)
    add_two_column_unique(engine)


@registered(
    "execution_since_absent_on_amended_table",
    "The amended schema holds but execution_since is absent: self-heal pending",
    violates=("AC-33b",),
    severity="warning",
)
def _execution_since_absent(engine: sa.Engine) -> None:
    baseline(engine)
    set_key(engine, EXECUTION_SINCE, None)


@registered(
    "pre_amendment_table",
    "The AC-33 upgrade failed: the pre-amendment table and legacy keys, no execution_since",
    violates=("AC-33",),
    severity="error",
)
def _pre_amendment(engine: sa.Engine) -> None:
    legacy_store(engine)
    run_migration(engine, fail="amend")


@registered(
    "missing_secondary_index",
    "idx_subagents_turn_id is missing",
    violates=("AC-33", "AC-17"),
    severity="error",
)
def _missing_index(engine: sa.Engine) -> None:
    baseline(engine)
    with writing(engine) as conn:
        conn.exec_driver_sql("DROP INDEX idx_subagents_turn_id")


@registered(
    "duplicate_rows_for_one_key",
    "The three-column UNIQUE dropped and one live subagent written twice",
    violates=("AC-3", "AC-14"),
    severity="error",
)
def _duplicates(engine: sa.Engine) -> None:
    baseline(engine)
    drop_three_column_unique(engine)
    twin = stored_row(engine, TC_LIVE_COMPLETED)
    twin["id"] = uid("row-duplicate")
    with writing(engine) as conn:
        insert_rows(conn, schema.subagents, [twin])


@registered(
    "orphan_rows",
    "The session foreign key dropped, then a session deleted: its subagent rows remain",
    violates=("AC-16",),
    severity="error",
)
def _orphans(engine: sa.Engine) -> None:
    baseline(engine)
    drop_session_foreign_key(engine)
    with writing(engine) as conn:  # its turns and messages still cascade
        conn.execute(schema.task_sessions.delete().where(schema.task_sessions.c.id == SL))


@registered(
    "orphan_rows_foreign_key_not_enforced",
    "A session deleted while the subagents' foreign key was not enforced: its rows remain",
    violates=("AC-16",),
    severity="error",
)
def _orphans_unenforced(engine: sa.Engine) -> None:
    baseline(engine)
    delete_session_unenforced(engine, SL)
