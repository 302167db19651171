"""The schema rules (CONTRACT §1, §3: AC-17, AC-33 clauses 1–4, AC-33a, AC-16, no-FK columns),
end to end through the post_migration checkpoint, on SQLite and PostgreSQL."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.migration import runner as migrate
from kandev_dq.store.access import open_store
from tests.gxhelpers import check, failed, result

TABLE = "expect_subagents_table_to_exist"
CLAUSE_1 = "expect_execution_column_to_be_not_null"
CLAUSE_2 = "expect_three_column_unique_key"
CLAUSE_3 = "expect_no_two_column_unique_key"
CLAUSE_4 = "expect_secondary_indexes_as_fresh_store"
PARTIAL = "expect_no_partial_subagents_upgrade"
SESSION_FK = "expect_session_foreign_key_to_cascade"
NO_FK = "expect_no_foreign_key_on_turn_or_execution"
SCHEMA_RULES = (TABLE, CLAUSE_1, CLAUSE_2, CLAUSE_3, CLAUSE_4, PARTIAL, SESSION_FK, NO_FK)
REBUILT = f"{schema.SUBAGENTS}_rebuilt"


def migrate_store(target) -> migrate.MigrationReport:
    store = open_store(target.url, read_only=False)
    try:
        report = migrate.run(store)
    finally:
        store.dispose()
    assert report.ok, report.render()
    return report


def migrated(target, subagents: str | None = None) -> StoreBuilder:
    """A store with the given starting table, migrated (so the keys exist), with one row."""
    builder = StoreBuilder(target.engine).create(subagents=subagents)
    session = builder.session()
    builder.subagent_message(session, "2026-07-30 01:30:00.5+00:00", "toolu_a")
    migrate_store(target)
    return builder


def schema_failures(report) -> dict[str, str]:
    return {name: sev for name, sev in failed(report).items() if name in SCHEMA_RULES}


def assert_evaluated(report) -> None:
    """Every rule ran: none crashed on the shape it was given."""
    assert not [r.expectation for r in report.results if r.message.startswith("could not")]


def rebuild(target, edit) -> None:
    """Rebuild the table from the fresh DDL as ``edit`` changes it, keeping rows and indexes."""
    with target.engine.begin() as conn:
        ddl = str(sa.schema.CreateTable(schema.subagents).compile(dialect=conn.dialect))
        ddl = edit(ddl).replace(f"CREATE TABLE {schema.SUBAGENTS} ", f"CREATE TABLE {REBUILT} ")
        conn.exec_driver_sql(ddl)
        conn.exec_driver_sql(f"INSERT INTO {REBUILT} SELECT * FROM {schema.SUBAGENTS}")
        conn.exec_driver_sql(f"DROP TABLE {schema.SUBAGENTS}")
        conn.exec_driver_sql(f"ALTER TABLE {REBUILT} RENAME TO {schema.SUBAGENTS}")
        for index in schema.subagents.indexes:
            index.create(conn)


SESSION_FK_DDL = re.compile(r",\s*FOREIGN KEY\s*\(task_session_id\)[^\n]*")


@pytest.mark.parametrize("starting", [None, "amended", "pre_amendment"])
def test_a_migrated_store_passes(target, project, starting):
    migrated(target, starting)
    report = check(project, target, "post_migration")
    assert failed(report) == {}
    assert report.success
    assert {r.expectation for r in report.results} >= set(SCHEMA_RULES)


def test_pre_amendment_table_fails_clauses_1_to_3(target, project):
    StoreBuilder(target.engine).create(subagents="pre_amendment")
    report = check(project, target, "post_migration")
    assert_evaluated(report)
    assert schema_failures(report) == {CLAUSE_1: "error", CLAUSE_2: "error", CLAUSE_3: "error"}
    assert "is missing" in result(report, CLAUSE_1).message


def test_half_amended_table_is_a_partial_upgrade(target, project):
    StoreBuilder(target.engine).create(subagents="pre_amendment")
    with target.engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {schema.SUBAGENTS} ADD COLUMN agent_execution_id TEXT")
    report = check(project, target, "post_migration")
    assert_evaluated(report)
    assert schema_failures(report) == {
        CLAUSE_1: "error",
        CLAUSE_2: "error",
        CLAUSE_3: "error",
        PARTIAL: "error",
    }
    assert "nullable" in result(report, CLAUSE_1).message


def test_leftover_rebuild_table_is_a_partial_upgrade(target, project):
    migrated(target)
    with target.engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {schema.REBUILD_TABLE} (id TEXT PRIMARY KEY)")
    report = check(project, target, "post_migration")
    assert schema_failures(report) == {PARTIAL: "error"}
    assert schema.REBUILD_TABLE in result(report, PARTIAL).message


def test_absent_table_fails_every_schema_rule_without_crashing(target, project):
    StoreBuilder(target.engine).create(subagents=None)
    report = check(project, target, "post_migration")
    assert_evaluated(report)
    assert schema_failures(report) == {name: "error" for name in SCHEMA_RULES if name != PARTIAL}
    assert not result(report, "expect_backfill_reconciliation_not_vacuous").success


AMENDED_UNIQUE_DDL = "UNIQUE (task_session_id, agent_execution_id, tool_call_id)"


@pytest.mark.parametrize(
    ("unique", "clause"),
    [
        ("UNIQUE (task_session_id, tool_call_id, agent_execution_id)", CLAUSE_2),
        (AMENDED_UNIQUE_DDL + ", UNIQUE (tool_call_id, task_session_id)", CLAUSE_3),
    ],
)
def test_table_rebuilt_with_the_wrong_unique_fails_its_clause(target, project, unique, clause):
    migrated(target)
    rebuild(target, lambda ddl: ddl.replace(AMENDED_UNIQUE_DDL, unique))
    report = check(project, target, "post_migration")
    assert schema_failures(report) == {clause: "error", PARTIAL: "error"}


@pytest.mark.parametrize("fault", ["missing", "misshapen", "unique"])
def test_secondary_index_not_as_fresh_fails_clause_4(target, project, fault):
    migrated(target)
    with target.engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX idx_subagents_turn_id")
        if fault != "missing":
            unique = "UNIQUE " if fault == "unique" else ""
            columns = "turn_id, id" if fault == "unique" else "turn_id, task_id"
            conn.exec_driver_sql(
                f"CREATE {unique}INDEX idx_subagents_turn_id ON {schema.SUBAGENTS} ({columns})"
            )
    report = check(project, target, "post_migration")
    assert schema_failures(report) == {CLAUSE_4: "error"}
    assert "idx_subagents_turn_id" in result(report, CLAUSE_4).message


def test_an_extra_index_is_reported_and_passes(target, project):
    migrated(target)
    with target.engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE INDEX idx_extra ON {schema.SUBAGENTS} (model)")
    rule = result(check(project, target, "post_migration"), CLAUSE_4)
    assert rule.success and "idx_extra" in rule.message


@pytest.mark.parametrize("fault", ["no_fk", "no_cascade"])
def test_table_rebuilt_without_the_cascading_session_fk_fails(target, project, fault):
    migrated(target)
    if fault == "no_fk":
        rebuild(target, lambda ddl: SESSION_FK_DDL.sub("", ddl))
    else:
        rebuild(target, lambda ddl: ddl.replace(" ON DELETE CASCADE", ""))
    report = check(project, target, "post_migration")
    assert schema_failures(report) == {SESSION_FK: "error"}


def test_a_foreign_key_on_turn_id_fails(target, project):
    migrated(target)
    turn_fk = ", FOREIGN KEY(turn_id) REFERENCES task_session_turns (id)"
    rebuild(target, lambda ddl: ddl.rstrip().removesuffix(")").rstrip() + turn_fk + "\n)")
    report = check(project, target, "post_migration")
    assert schema_failures(report) == {NO_FK: "error"}
    assert "turn_id" in result(report, NO_FK).message
