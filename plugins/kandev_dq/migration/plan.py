"""The dry run: what a migration run would do, read in one snapshot; writes nothing."""

from __future__ import annotations

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
)
from kandev_dq.migration.backfill import metadata_notes, unmappable_timestamps
from kandev_dq.migration.report import (
    STEP_AMEND,
    STEP_BACKFILL,
    STEP_CREATE,
    STEP_EXECUTION_SINCE,
    STEP_META,
    MigrationReport,
    Status,
    StepResult,
)
from kandev_dq.sql import messages as queries
from kandev_dq.sql.keys import read_keys
from kandev_dq.sql.mapping import (
    backfill_select,
    qualifies,
    subagent_messages,
)
from kandev_dq.store.access import Store
from kandev_dq.store.observe import SubagentsShape, observe_subagents


def _qualifying_count_statement(dialect_name: str) -> sa.Select:
    sm = subagent_messages("msg")
    return sa.select(sa.func.count()).where(qualifies(sm))


def _would_insert_statement(dialect_name: str, shape: SubagentsShape) -> sa.Select:
    """Rows the backfill would insert: winners whose key has no 'unknown' row after AC-33."""
    candidates = backfill_select(dialect_name).subquery("candidate")
    if not shape.table_exists:
        return sa.select(sa.func.count()).select_from(candidates)
    live = sa.table(
        schema.SUBAGENTS,
        *(sa.column(c) for c in ("task_session_id", "tool_call_id", "agent_execution_id")),
    )
    same_key = sa.and_(
        live.c.task_session_id == candidates.c.task_session_id,
        live.c.tool_call_id == candidates.c.tool_call_id,
    )
    if shape.has_execution_column:
        # Rows with NULL/'' ids become 'unknown' when a half-amended table is completed.
        same_key = sa.and_(
            same_key,
            sa.func.coalesce(sa.func.nullif(live.c.agent_execution_id, ""), "unknown")
            == schema.UNKNOWN_EXECUTION,
        )
    exists = sa.exists(sa.select(sa.literal(1)).select_from(live).where(same_key))
    return sa.select(sa.func.count()).select_from(candidates).where(~exists)


# --- dry run ---------------------------------------------------------------------------------


def plan(store: Store, report: MigrationReport) -> None:
    """What a run would do, read in one snapshot; writes nothing."""
    with store.snapshot() as conn:
        has_meta = sa.inspect(conn).has_table(schema.kandev_meta.name)
        shape = observe_subagents(conn)
        keys = read_keys(conn)
        report.shape, report.keys = shape, keys
        unreadable = queries.Unreadable()  # AC-23b, as the backfill itself reads them
        report.qualifying_messages = queries.tolerating_unreadable_metadata(
            conn,
            lambda c: c.execute(_qualifying_count_statement(store.dialect)).scalar_one(),
            unreadable,
        )
        backfill_due = keys[CAPTURE_SINCE] is None or keys[BACKFILL_THROUGH] is None
        report.backfill_rows = (
            queries.tolerating_unreadable_metadata(
                conn,
                lambda c: c.execute(_would_insert_statement(store.dialect, shape)).scalar_one(),
                unreadable,
            )
            if backfill_due
            else 0
        )
        unmappable = (  # as the backfill itself refuses them
            queries.tolerating_unreadable_metadata(conn, unmappable_timestamps, unreadable)
            if backfill_due
            else None
        )
        # The messages the backfill would name (AC-23b): skipped as unreadable, or read from
        # metadata not stored as text.
        notes, noted = (
            metadata_notes(
                unreadable.ids
                if unreadable.ids is not None
                else queries.locate_unreadable_metadata(conn),
                queries.locate_not_text_metadata(conn),
            )
            if backfill_due
            else ([], {})
        )

    def add(name: str, status: Status, reason: str = "", detail: dict | None = None) -> None:
        report.steps.append(StepResult(name, status, reason, detail or {}))

    add(STEP_META, Status.ALREADY_DONE if has_meta else Status.WOULD_RUN)
    if shape.table_exists:
        add(STEP_CREATE, Status.ALREADY_DONE)
    else:
        add(STEP_CREATE, Status.WOULD_RUN, "create in the amended shape")
    if not shape.table_exists:
        add(STEP_AMEND, Status.SKIPPED, "the table would be created amended")
    elif shape.end_state_holds:
        add(STEP_AMEND, Status.ALREADY_DONE)
    else:
        how = "rebuild the table" if store.dialect == "sqlite" else "alter the table"
        add(STEP_AMEND, Status.WOULD_RUN, f"{how}: " + "; ".join(shape.problems()))
    if keys[EXECUTION_SINCE] is not None:
        add(STEP_EXECUTION_SINCE, Status.ALREADY_DONE)
    else:
        add(STEP_EXECUTION_SINCE, Status.WOULD_RUN, "if AC-33 clauses 1-3 are then observed")
    if backfill_due and unmappable:
        add(STEP_BACKFILL, Status.WOULD_FAIL, unmappable)
    elif backfill_due:
        missing = [k for k in (CAPTURE_SINCE, BACKFILL_THROUGH) if keys[k] is None]
        add(
            STEP_BACKFILL,
            Status.WOULD_RUN,
            "; ".join(
                [f"insert {report.backfill_rows} row(s); write {', '.join(missing)}", *notes]
            ),
            noted,
        )
    else:
        add(STEP_BACKFILL, Status.ALREADY_DONE)
