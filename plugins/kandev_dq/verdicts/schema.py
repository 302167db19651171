"""Schema rules (CONTRACT §1, §3): the live shape of ``task_session_subagents``, one class per
AC-33 clause plus the table itself, the partial-upgrade check and the foreign keys.

Every rule reads the same observation (:mod:`kandev_dq.facts.schema_facts`). When the table is
absent, the table rule fails and every other rule fails too, saying that it cannot hold.
"""

from __future__ import annotations

from typing import ClassVar

from kandev_dq.contract import tables as schema
from kandev_dq.facts.schema_facts import schema_facts
from kandev_dq.facts.shapes import SchemaFacts
from kandev_dq.verdicts.base import Family, Finding, Verdict

SCHEMA = Family("kandev.schema_facts", schema_facts)


class _SchemaVerdict(Verdict):
    facts: ClassVar[Family] = SCHEMA

    def judge(self, facts: SchemaFacts) -> Finding:
        if not facts["table_exists"]:
            return Finding(
                success=False,
                observed_value="table absent",
                message=f"{facts['table']} does not exist: this cannot hold",
                unexpected_count=1,
            )
        return self.judge_table(facts)

    def judge_table(self, facts: SchemaFacts) -> Finding:
        raise NotImplementedError


class ExpectSubagentsTableToExist(Verdict):
    """``task_session_subagents`` exists (AC-17): a store that predates the feature gets it,
    with its indexes and constraints, from the migration."""

    facts: ClassVar[Family] = SCHEMA

    def judge(self, facts: SchemaFacts) -> Finding:
        if facts["table_exists"]:
            return Finding(
                success=True,
                observed_value=facts["shape"],
                message=f"{facts['table']} exists ({facts['shape']})",
            )
        return Finding(
            success=False,
            observed_value="absent",
            message=f"{facts['table']} does not exist; run `kandev-dq migrate` (AC-17)",
            unexpected_count=1,
        )


class ExpectExecutionColumnToBeNotNull(_SchemaVerdict):
    """AC-33 clause 1: ``agent_execution_id`` is present and NOT NULL, so no row can lack an
    execution identity (AC-30)."""

    def judge_table(self, facts: SchemaFacts) -> Finding:
        column = facts["execution_column"]
        if facts["clause_1"]:
            return Finding(
                success=True,
                observed_value=column,
                message="agent_execution_id is present and NOT NULL",
            )
        why = "is missing" if not column["present"] else "is nullable"
        return Finding(
            success=False,
            observed_value=column,
            message=f"agent_execution_id {why} (AC-33 clause 1)",
            unexpected_count=1,
        )


class ExpectThreeColumnUniqueKey(_SchemaVerdict):
    """AC-33 clause 2: ``UNIQUE(task_session_id, agent_execution_id, tool_call_id)`` in that
    column order, as a table constraint or a full unique index (AC-3, AC-14)."""

    def judge_table(self, facts: SchemaFacts) -> Finding:
        keys = facts["unique_keys"]
        if facts["clause_2"]:
            return Finding(
                success=True,
                observed_value=keys,
                message="the three-column UNIQUE exists in the contract's order",
            )
        wanted = ", ".join(schema.AMENDED_UNIQUE)
        return Finding(
            success=False,
            observed_value=keys,
            message=f"no UNIQUE({wanted}) in that column order (AC-33 clause 2)",
            unexpected_count=1,
        )


class ExpectNoTwoColumnUniqueKey(_SchemaVerdict):
    """AC-33 clause 3: no UNIQUE over exactly ``{task_session_id, tool_call_id}`` is left; it
    would reject a tool_call_id reused by a later execution (AC-32)."""

    def judge_table(self, facts: SchemaFacts) -> Finding:
        keys = facts["unique_keys"]
        if not facts["two_column_unique_remains"]:
            return Finding(
                success=True, observed_value=keys, message="no two-column UNIQUE is left"
            )
        cols = ", ".join(schema.PRE_AMENDMENT_UNIQUE)
        return Finding(
            success=False,
            observed_value=keys,
            message=f"UNIQUE({cols}) remains (AC-33 clause 3)",
            unexpected_count=1,
        )


class ExpectSecondaryIndexesAsFreshStore(_SchemaVerdict):
    """AC-33 clause 4 (and AC-17): the three secondary indexes exist under their names, on
    the same columns, plain (not unique, not partial), exactly as a fresh store has them.
    Extra indexes are reported and do not fail the rule."""

    def judge_table(self, facts: SchemaFacts) -> Finding:
        indexes = facts["indexes"]
        extra = sorted(indexes["unexpected"])
        note = f"; extra index(es), not required: {', '.join(extra)}" if extra else ""
        problems = [
            f"{name}({', '.join(cols)}) is missing" for name, cols in indexes["missing"].items()
        ]
        for name, found in indexes["misshapen"].items():
            kind = ("partial " if found["partial"] else "") + ("unique " if found["unique"] else "")
            problems.append(f"{name} is {kind}on ({', '.join(found['columns'])})")
        if not problems:
            return Finding(
                success=True,
                observed_value=indexes,
                message="the three secondary indexes are as fresh" + note,
            )
        return Finding(
            success=False,
            observed_value=indexes,
            message="; ".join(problems) + " (AC-33 clause 4)" + note,
            unexpected_count=len(problems),
        )


class ExpectNoPartialSubagentsUpgrade(Verdict):
    """AC-33a: an upgrade that failed leaves the old table whole: the table is either wholly
    pre-amendment or satisfies clauses 1–3, never something in between, and no rebuild
    table is left behind."""

    facts: ClassVar[Family] = SCHEMA

    def judge(self, facts: SchemaFacts) -> Finding:
        problems = []
        if facts["rebuild_table_left"]:
            problems.append(f"the rebuild table {facts['rebuild_table']} is left behind")
        if facts["table_exists"] and not (facts["clauses_1_to_3"] or facts["pure_pre_amendment"]):
            problems.append(f"{facts['table']} is {facts['shape']}")
        if problems:
            return Finding(
                success=False,
                observed_value=facts["shape"],
                message="; ".join(problems) + " (AC-33a)",
                unexpected_count=len(problems),
            )
        return Finding(
            success=True, observed_value=facts["shape"], message="no partial upgrade is visible"
        )


class ExpectSessionForeignKeyToCascade(_SchemaVerdict):
    """AC-16: ``task_session_id`` references ``task_sessions(id) ON DELETE CASCADE``, so the
    rows of a deleted session go with it."""

    def judge_table(self, facts: SchemaFacts) -> Finding:
        fks = facts["foreign_keys"]
        if facts["session_fk_cascades"]:
            return Finding(
                success=True,
                observed_value=fks,
                message="the session foreign key cascades on delete",
            )
        session = [fk for fk in fks if fk["columns"] == ["task_session_id"]]
        why = (
            f"it is ON DELETE {session[0]['on_delete']}"
            if session
            else "there is no foreign key on task_session_id"
        )
        return Finding(
            success=False,
            observed_value=fks,
            message=f"no cascading session foreign key: {why} (AC-16)",
            unexpected_count=1,
        )


class ExpectNoForeignKeyOnTurnOrExecution(_SchemaVerdict):
    """Neither ``turn_id`` nor ``agent_execution_id`` carries a foreign key (CONTRACT §1): a
    turn_id may be filled forward before its turn row is visible (AC-2a), and the shared
    sentinel ``'unknown'`` references nothing (AC-31)."""

    def judge_table(self, facts: SchemaFacts) -> Finding:
        forbidden = facts["forbidden_foreign_keys"]
        if not forbidden:
            return Finding(
                success=True,
                observed_value=facts["foreign_keys"],
                message="no foreign key on turn_id or execution id",
            )
        said = "; ".join(f"({', '.join(fk['columns'])}) -> {fk['references']}" for fk in forbidden)
        return Finding(
            success=False,
            observed_value=forbidden,
            message=f"forbidden foreign key(s): {said}",
            unexpected_count=len(forbidden),
        )
