"""What shape ``task_session_subagents`` has in a live store, read with SQLAlchemy's inspector.

Pure observation: nothing here writes, and nothing depends on the dialect beyond what the
inspector already normalises, so the migration runner (AC-33b: ``execution_since`` follows the
*observed* end state) and the schema expectations read the schema the same way.

AC-33's end state, clause by clause:

1. ``agent_execution_id`` present and NOT NULL;
2. the three-column UNIQUE ``(task_session_id, agent_execution_id, tool_call_id)``, in that
   column order;
3. no two-column UNIQUE ``(task_session_id, tool_call_id)`` left (either column order);
4. the three secondary indexes, exactly as a fresh store has them.

A UNIQUE may be a table constraint (inline on SQLite, possibly auto-named on PostgreSQL) or a
unique index; both enforce the same thing, so both count. Partial unique indexes do not.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa

from kandev_dq.contract import tables as schema
from kandev_dq.sql.dialect import store_traits

EXECUTION_COLUMN = "agent_execution_id"
SESSION_PARENT = ("task_sessions", ("id",))
#: Columns that must never carry a foreign key (CONTRACT §1: "no FK").
NO_FK_COLUMNS = ("turn_id", EXECUTION_COLUMN)


@dataclass(frozen=True, order=True)
class IndexShape:
    """One index that does not back a constraint: name, ordered columns, uniqueness."""

    name: str
    columns: tuple[str, ...]
    unique: bool = False
    partial: bool = False


@dataclass(frozen=True, order=True)
class ForeignKeyShape:
    """One foreign key: local columns → referred table(columns), and its ON DELETE action."""

    columns: tuple[str, ...]
    referred_table: str
    referred_columns: tuple[str, ...]
    on_delete: str = ""


@dataclass(frozen=True)
class SubagentsShape:
    """The observed shape of ``task_session_subagents``; equal shapes compare equal.

    Names of constraints are deliberately not part of the shape (PostgreSQL auto-names them and
    AC-33 says nothing about names); index names are, because clause 4 is about named indexes.
    """

    table_exists: bool
    columns: tuple[str, ...] = ()  #: sorted column names
    has_execution_column: bool = False
    execution_column_nullable: bool | None = None
    execution_column_default: str | None = None
    unique_constraints: tuple[tuple[str, ...], ...] = ()  #: sorted; each in declared order
    required_columns: tuple[str, ...] = ()  #: sorted names of the NOT NULL columns
    indexes: tuple[IndexShape, ...] = ()  #: sorted; constraint-backing indexes excluded
    foreign_keys: tuple[ForeignKeyShape, ...] = ()  #: sorted

    # --- unique keys ---------------------------------------------------------------------

    @property
    def unique_indexes(self) -> dict[str, tuple[str, ...]]:
        """Full (non-partial) unique indexes, name → ordered columns."""
        return {i.name: i.columns for i in self.indexes if i.unique and not i.partial}

    @property
    def unique_keys(self) -> tuple[tuple[str, ...], ...]:
        """Every enforced uniqueness: constraints plus full unique indexes, ordered columns."""
        return tuple(sorted(set(self.unique_constraints) | set(self.unique_indexes.values())))

    def keeps_unique(self, key: tuple[str, ...]) -> bool:
        """The store itself keeps ``key`` unique: a UNIQUE constraint over exactly its columns,
        each NOT NULL (a NULL part lets rows repeat a key). Unique indexes are left out: on
        PostgreSQL an invalid one (a failed concurrent build) enforces nothing."""
        return frozenset(key) in {frozenset(cols) for cols in self.unique_constraints} and set(
            key
        ) <= set(self.required_columns)

    @property
    def has_amended_unique(self) -> bool:
        """Clause 2: ``UNIQUE(task_session_id, agent_execution_id, tool_call_id)`` in that order."""
        return schema.AMENDED_UNIQUE in self.unique_keys

    @property
    def two_column_unique_remains(self) -> bool:
        """A UNIQUE over exactly ``{task_session_id, tool_call_id}`` still exists (clause 3)."""
        wanted = frozenset(schema.PRE_AMENDMENT_UNIQUE)
        return any(frozenset(cols) == wanted and len(cols) == 2 for cols in self.unique_keys)

    # --- secondary indexes -----------------------------------------------------------------

    @property
    def secondary_indexes(self) -> dict[str, tuple[str, ...]]:
        """Plain (non-unique, non-partial) indexes, name → ordered columns."""
        return {i.name: i.columns for i in self.indexes if not i.unique and not i.partial}

    @property
    def missing_indexes(self) -> dict[str, tuple[str, ...]]:
        """Expected secondary indexes absent under their name (clause 4)."""
        have = {i.name for i in self.indexes}
        return {n: c for n, c in schema.SECONDARY_INDEXES.items() if n not in have}

    @property
    def misshapen_indexes(self) -> dict[str, IndexShape]:
        """Expected index names that exist with other columns, uniqueness or a predicate."""
        by_name = {i.name: i for i in self.indexes}
        return {
            name: by_name[name]
            for name, cols in schema.SECONDARY_INDEXES.items()
            if name in by_name and by_name[name] != IndexShape(name, cols)
        }

    @property
    def unexpected_indexes(self) -> dict[str, IndexShape]:
        """Indexes a fresh store does not have (reported; they do not fail clause 4)."""
        return {i.name: i for i in self.indexes if i.name not in schema.SECONDARY_INDEXES}

    # --- foreign keys ----------------------------------------------------------------------

    @property
    def session_fk_cascades(self) -> bool:
        """``task_session_id → task_sessions(id) ON DELETE CASCADE`` exists (AC-16)."""
        table, cols = SESSION_PARENT
        return any(
            fk.columns == ("task_session_id",)
            and fk.referred_table == table
            and fk.referred_columns == cols
            and fk.on_delete == "CASCADE"
            for fk in self.foreign_keys
        )

    @property
    def forbidden_foreign_keys(self) -> tuple[ForeignKeyShape, ...]:
        """Foreign keys on ``turn_id`` or ``agent_execution_id`` (CONTRACT §1: none allowed)."""
        return tuple(fk for fk in self.foreign_keys if any(c in NO_FK_COLUMNS for c in fk.columns))

    @property
    def foreign_keys_hold(self) -> bool:
        return self.session_fk_cascades and not self.forbidden_foreign_keys

    # --- AC-33 clauses ----------------------------------------------------------------------

    @property
    def clause_1_holds(self) -> bool:
        return self.has_execution_column and self.execution_column_nullable is False

    @property
    def clauses_1_to_3_hold(self) -> bool:
        """AC-33 clauses 1–3: the condition under which ``execution_since`` is written (AC-33b)."""
        return (
            self.table_exists
            and self.clause_1_holds
            and self.has_amended_unique
            and not self.two_column_unique_remains
        )

    @property
    def clause_4_holds(self) -> bool:
        """AC-33 clause 4: the three secondary indexes exist exactly as a fresh store has them."""
        return self.table_exists and not self.missing_indexes and not self.misshapen_indexes

    @property
    def end_state_holds(self) -> bool:
        """AC-33 clauses 1–4 (clauses 5 and 6 are about data and the key, not the schema)."""
        return self.clauses_1_to_3_hold and self.clause_4_holds

    @property
    def is_pre_amendment(self) -> bool:
        """The table exists and is (at least partly) in the pre-amendment shape."""
        return self.table_exists and not self.clauses_1_to_3_hold

    def problems(self) -> list[str]:
        """Why the end state does not hold, one phrase per failed clause (empty when it does)."""
        if not self.table_exists:
            return [f"{schema.SUBAGENTS} does not exist"]
        out: list[str] = []
        if not self.has_execution_column:
            out.append(f"{EXECUTION_COLUMN} is missing")
        elif self.execution_column_nullable:
            out.append(f"{EXECUTION_COLUMN} is nullable")
        if not self.has_amended_unique:
            out.append(f"no UNIQUE({', '.join(schema.AMENDED_UNIQUE)})")
        if self.two_column_unique_remains:
            out.append(f"UNIQUE({', '.join(schema.PRE_AMENDMENT_UNIQUE)}) remains")
        for name, cols in self.missing_indexes.items():
            out.append(f"index {name}({', '.join(cols)}) is missing")
        for name, found in self.misshapen_indexes.items():
            out.append(f"index {name} is {_describe_index(found)}")
        return out

    def describe(self) -> str:
        """One line for reports."""
        if not self.table_exists:
            return "absent"
        if self.end_state_holds:
            return "amended"
        if not self.has_execution_column and self.two_column_unique_remains:
            return "pre-amendment"
        return "partly amended: " + "; ".join(self.problems())

    def to_dict(self) -> dict:
        return {
            "table_exists": self.table_exists,
            "shape": self.describe(),
            "agent_execution_id": {
                "present": self.has_execution_column,
                "nullable": self.execution_column_nullable,
                "default": self.execution_column_default,
            },
            "unique_keys": [list(c) for c in self.unique_keys],
            "secondary_indexes": {n: list(c) for n, c in self.secondary_indexes.items()},
            "foreign_keys": [
                {
                    "columns": list(fk.columns),
                    "references": f"{fk.referred_table}({', '.join(fk.referred_columns)})",
                    "on_delete": fk.on_delete,
                }
                for fk in self.foreign_keys
            ],
            "clauses_1_to_3_hold": self.clauses_1_to_3_hold,
            "clause_4_holds": self.clause_4_holds,
        }


def _describe_index(index: IndexShape) -> str:
    kind = ("partial " if index.partial else "") + ("unique " if index.unique else "")
    return f"{kind}on ({', '.join(index.columns)})"


def _columns(names, expressions=None) -> tuple[str, ...]:
    """Ordered column names; an expression element reads as its SQL text (or ``<expression>``)."""
    out = []
    for pos, name in enumerate(names or ()):
        if name is None:
            expr = expressions[pos] if expressions and pos < len(expressions) else None
            out.append(str(expr) if expr is not None else "<expression>")
        else:
            out.append(name)
    return tuple(out)


def _is_partial(options: Mapping) -> bool:
    return any(key.endswith("_where") and value is not None for key, value in options.items())


#: ``conn.info`` key present while a read-only snapshot lasts (:func:`snapshot_observed`):
#: its one inspector, created at its first observation of the schema.
_SNAPSHOT_INSPECTOR = "kandev_dq_snapshot_inspector"


@contextmanager
def snapshot_observed(conn: sa.Connection) -> Iterator[None]:
    """While the block runs, ``conn`` is a read-only snapshot: every observation of its schema
    shares one inspector, whose cache answers each question once (a live run asked the
    catalogue for the same indexes nine times, some forty statements on PostgreSQL)."""
    conn.info[_SNAPSHOT_INSPECTOR] = None
    try:
        yield
    finally:
        conn.info.pop(_SNAPSHOT_INSPECTOR, None)


def schema_inspector(conn: sa.Connection | sa.Engine) -> sa.Inspector:
    """The snapshot's inspector inside one; elsewhere (a migration's DDL) a fresh one."""
    if isinstance(conn, sa.Connection) and _SNAPSHOT_INSPECTOR in conn.info:
        if conn.info[_SNAPSHOT_INSPECTOR] is None:
            conn.info[_SNAPSHOT_INSPECTOR] = sa.inspect(conn)
        return conn.info[_SNAPSHOT_INSPECTOR]
    return sa.inspect(conn)


def observe_subagents(conn: sa.Connection | sa.Engine) -> SubagentsShape:
    """Observe ``task_session_subagents`` in the live schema (default schema / search_path)."""
    with warnings.catch_warnings():
        # SQLite's inspector warns about (and skips) expression indexes; none are expected here.
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        return _observe(schema_inspector(conn))


def _observe(inspector: sa.Inspector) -> SubagentsShape:
    table = schema.SUBAGENTS
    if not inspector.has_table(table):
        return SubagentsShape(table_exists=False)
    columns = {c["name"]: c for c in inspector.get_columns(table)}
    execution = columns.get(EXECUTION_COLUMN)
    default = execution.get("default") if execution else None
    uniques = {_columns(u["column_names"]) for u in inspector.get_unique_constraints(table)}
    indexes = set()
    for index in inspector.get_indexes(table):
        if index.get("duplicates_constraint"):
            continue  # PostgreSQL: the index backing a UNIQUE constraint reported above
        indexes.add(
            IndexShape(
                name=index["name"],
                columns=_columns(index["column_names"], index.get("expressions")),
                unique=bool(index["unique"]),
                partial=_is_partial(index.get("dialect_options") or {}),
            )
        )
    foreign_keys = {
        ForeignKeyShape(
            columns=tuple(fk["constrained_columns"]),
            referred_table=fk["referred_table"],
            referred_columns=tuple(fk["referred_columns"]),
            on_delete=str((fk.get("options") or {}).get("ondelete") or "").upper(),
        )
        for fk in inspector.get_foreign_keys(table)
    }
    return SubagentsShape(
        table_exists=True,
        columns=tuple(sorted(columns)),
        has_execution_column=execution is not None,
        execution_column_nullable=bool(execution["nullable"]) if execution else None,
        execution_column_default=str(default) if default is not None else None,
        unique_constraints=tuple(sorted(uniques)),
        required_columns=tuple(sorted(name for name, c in columns.items() if not c["nullable"])),
        indexes=tuple(sorted(indexes)),
        foreign_keys=tuple(sorted(foreign_keys)),
    )


def index_leading(conn: sa.Connection, table: str, columns: tuple[str, ...]) -> str | None:
    """The name of an index of ``table`` whose leading columns are ``columns`` in that order
    (a plain, unique or constraint-backing one; never a partial one), or None: what a range
    read on those columns can use, observed in the live schema, never assumed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        inspector = schema_inspector(conn)
        if not inspector.has_table(table):
            return None
        found = sorted(
            index["name"]
            for index in inspector.get_indexes(table)
            if _columns(index["column_names"], index.get("expressions"))[: len(columns)]
            == tuple(columns)
            and not _is_partial(index.get("dialect_options") or {})
        )
        if not found and any(
            tuple(u["column_names"][: len(columns)]) == tuple(columns)
            for u in inspector.get_unique_constraints(table)
        ):
            found = ["a UNIQUE constraint"]
    return found[0] if found else None


#: The names SQLite gives a rowid table's row number, in the order one is taken: a column of
#: the same name hides it.
ROWID_NAMES = ("rowid", "_rowid_", "oid")


def message_handle(conn: sa.Connection) -> str | None:
    """The column a statement names a message row by when it need not carry the message's id
    (SQLite, which materialises and sorts a value whole at every step that carries it): the
    rowid (an integer, whatever the id holds) under the first of :data:`ROWID_NAMES` no
    column hides, else ``id`` (a table without rowid). None where the server holds the
    copies (PostgreSQL): the id is carried."""
    if not store_traits(conn).rows_by_rowid:
        return None
    table = schema.task_session_messages.name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        inspector = schema_inspector(conn)
        if inspector.get_table_options(table).get("sqlite_with_rowid") is False:
            return "id"
        taken = {c["name"].lower() for c in inspector.get_columns(table)}
    return next((name for name in ROWID_NAMES if name not in taken), "id")
