"""Schema observation of ``task_session_subagents`` (AC-33 clauses 1–4), on both dialects."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.store.access import open_store
from kandev_dq.store.observe import ForeignKeyShape, IndexShape, observe_subagents

SESSION_FK = ForeignKeyShape(("task_session_id",), "task_sessions", ("id",), "CASCADE")


def observe(target):
    with target.engine.connect() as conn:
        return observe_subagents(conn)


def variant(
    target,
    *,
    execution: str | None = "not null",
    unique: tuple[str, ...] | None = schema.AMENDED_UNIQUE,
    unique_as: str = "constraint",
    indexes: dict[str, tuple[str, ...]] = schema.SECONDARY_INDEXES,
    extra_ddl: str | None = None,
    session_fk: str | None = "CASCADE",
    turn_fk: bool = False,
) -> None:
    """Base tables plus a hand-built ``task_session_subagents`` differing in one respect."""
    meta = sa.MetaData()
    for base in schema.BASE_TABLES:
        base.to_metadata(meta)
    session = (
        [sa.ForeignKey("task_sessions.id", ondelete=session_fk)] if session_fk is not None else []
    )
    turn = [sa.ForeignKey("task_session_turns.id")] if turn_fk else []
    columns = [
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("task_session_id", sa.Text, *session, nullable=False),
        sa.Column("task_id", sa.Text, nullable=False),
        sa.Column("turn_id", sa.Text, *turn),
        sa.Column("tool_call_id", sa.Text, nullable=False),
    ]
    if execution is not None:
        columns.append(
            sa.Column(
                "agent_execution_id",
                sa.Text,
                nullable=execution == "nullable",
                server_default="unknown",
            )
        )
    table = sa.Table(schema.SUBAGENTS, meta, *columns)
    if unique is not None and unique_as == "constraint":
        table.append_constraint(sa.UniqueConstraint(*unique))
    elif unique is not None:
        sa.Index("uq_subagents_key", *(table.c[c] for c in unique), unique=True)
    for name, cols in indexes.items():
        sa.Index(name, *(table.c[c] for c in cols))
    with target.engine.begin() as conn:
        schema.create_base_tables(conn)
        table.create(conn)
        if extra_ddl is not None:
            conn.exec_driver_sql(extra_ddl)


def test_absent_table(target):
    target.create_base(subagents=None)
    shape = observe(target)
    assert not shape.table_exists
    assert not shape.clauses_1_to_3_hold and not shape.clause_4_holds
    assert shape.describe() == "absent"


def test_fresh_amended_table_holds_every_clause(target):
    target.create_base(subagents="amended")
    shape = observe(target)
    assert shape.table_exists and shape.has_execution_column
    assert shape.execution_column_nullable is False
    assert "unknown" in shape.execution_column_default
    assert shape.unique_keys == (schema.AMENDED_UNIQUE,)
    assert shape.has_amended_unique and not shape.two_column_unique_remains
    assert shape.secondary_indexes == schema.SECONDARY_INDEXES
    assert shape.foreign_keys == (SESSION_FK,)
    assert shape.session_fk_cascades and not shape.forbidden_foreign_keys
    assert shape.clauses_1_to_3_hold and shape.clause_4_holds and shape.end_state_holds
    assert shape.problems() == [] and shape.describe() == "amended"


def test_pre_amendment_table(target):
    target.create_base(subagents="pre_amendment")
    shape = observe(target)
    assert not shape.has_execution_column and shape.execution_column_nullable is None
    assert shape.unique_keys == (schema.PRE_AMENDMENT_UNIQUE,)
    assert shape.two_column_unique_remains and not shape.has_amended_unique
    assert not shape.clauses_1_to_3_hold
    assert shape.clause_4_holds  # the indexes predate the amendment
    assert shape.is_pre_amendment and shape.describe() == "pre-amendment"


def test_nullable_execution_column_fails_clause_1(target):
    variant(target, execution="nullable")
    shape = observe(target)
    assert shape.has_execution_column and shape.execution_column_nullable is True
    assert not shape.clause_1_holds and not shape.clauses_1_to_3_hold
    assert "agent_execution_id is nullable" in shape.problems()


def test_three_column_unique_in_another_order_fails_clause_2(target):
    variant(target, unique=("task_session_id", "tool_call_id", "agent_execution_id"))
    shape = observe(target)
    assert not shape.has_amended_unique and not shape.clauses_1_to_3_hold


@pytest.mark.parametrize("unique_as", ["constraint", "index"])
def test_a_unique_index_counts_like_a_constraint(target, unique_as):
    variant(target, unique_as=unique_as)
    shape = observe(target)
    assert shape.has_amended_unique and shape.clauses_1_to_3_hold
    if unique_as == "index":
        assert shape.unique_indexes == {"uq_subagents_key": schema.AMENDED_UNIQUE}
        assert shape.unique_constraints == ()


@pytest.mark.parametrize("unique_as", ["constraint", "index"])
def test_two_column_unique_left_beside_the_new_one_fails_clause_3(target, unique_as):
    if unique_as == "constraint" and target.dialect == "postgresql":
        extra = "ALTER TABLE task_session_subagents ADD UNIQUE (tool_call_id, task_session_id)"
    elif unique_as == "constraint":  # SQLite: an inline table constraint
        extra = None
    else:
        extra = (
            "CREATE UNIQUE INDEX uq_legacy_pair "
            "ON task_session_subagents (tool_call_id, task_session_id)"
        )
    if extra is None:
        target.create_base(subagents=None)
        with target.engine.begin() as conn:
            ddl = sa.schema.CreateTable(schema.subagents).compile(dialect=conn.dialect)
            conn.exec_driver_sql(
                str(ddl).replace(
                    "UNIQUE (task_session_id, agent_execution_id, tool_call_id)",
                    "UNIQUE (task_session_id, agent_execution_id, tool_call_id), "
                    "UNIQUE (tool_call_id, task_session_id)",
                )
            )
    else:
        variant(target, extra_ddl=extra)
    shape = observe(target)
    assert shape.has_amended_unique and shape.two_column_unique_remains
    assert not shape.clauses_1_to_3_hold


def test_missing_and_misshapen_indexes_fail_clause_4(target):
    indexes = dict(schema.SECONDARY_INDEXES)
    del indexes["idx_subagents_turn_id"]
    indexes["idx_subagents_task_id"] = ("task_id", "turn_id")
    variant(target, indexes=indexes)
    shape = observe(target)
    assert shape.clauses_1_to_3_hold and not shape.clause_4_holds
    assert shape.missing_indexes == {"idx_subagents_turn_id": ("turn_id",)}
    assert shape.misshapen_indexes == {
        "idx_subagents_task_id": IndexShape("idx_subagents_task_id", ("task_id", "turn_id"))
    }


def test_an_extra_index_is_reported_but_clause_4_holds(target):
    target.create_base(subagents="amended")
    with target.engine.begin() as conn:
        conn.exec_driver_sql("CREATE INDEX idx_extra ON task_session_subagents (model)")
    shape = observe(target)
    assert shape.clause_4_holds
    assert set(shape.unexpected_indexes) == {"idx_extra"}


def test_foreign_keys(target):
    variant(target, session_fk=None, turn_fk=True)
    shape = observe(target)
    assert not shape.session_fk_cascades
    assert [fk.columns for fk in shape.forbidden_foreign_keys] == [("turn_id",)]
    assert not shape.foreign_keys_hold


def test_session_fk_without_cascade(target):
    variant(target, session_fk="RESTRICT")
    shape = observe(target)
    assert not shape.session_fk_cascades


def test_observation_works_on_a_read_only_store_and_changes_nothing(target):
    target.create_base(subagents="pre_amendment")
    expected = observe(target)
    store = open_store(target.url, read_only=True)
    try:
        with store.snapshot() as conn:
            assert observe_subagents(conn) == expected
        assert observe_subagents(store.engine) == expected
    finally:
        store.dispose()
    assert observe(target) == expected
