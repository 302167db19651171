"""The shape of each facts family: what a facts function returns and its rules judge.

One ``TypedDict`` per family. A key a function always writes is required; a key written only
on some paths (the table exists, a key is an instant, the comparison ran) is ``NotRequired``,
and its rules read it with ``.get`` or behind the flag that guards it. A test checks every
function's real output against these declarations on both dialects.
"""

# No ``from __future__ import annotations``: on Python 3.11 a TypedDict would then not see
# ``NotRequired`` and would list every key as required.
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from kandev_dq.sql.listing import Listing
from kandev_dq.sql.scan import Part

#: A row of a sample or a disclosure table, column name -> shown value.
Row = dict[str, Any]


@dataclass(frozen=True)
class ChangeWindow:
    """What a ``live`` read covers: what changed at or after ``start`` (an RFC 3339 instant),
    or, with ``start`` None, everything since capture_since as ``nightly`` reads it, ``reason``
    saying why. The run layer decides it once per suite run from the records database
    (:mod:`kandev_dq.records.watermark`); the facts families only read it.

    ``open_sessions`` are the sessions of the suite's open findings (what its last run's
    failing rules counted): read with what changed, whatever the start, so a standing fault
    is judged again rather than passed for being older than the window (None: a NULL id)."""

    start: str | None
    reason: str
    open_sessions: tuple[str | None, ...] = ()


class WindowFacts(TypedDict):
    """How a ``live`` family read its window: from when (None: in full, and why), and per read
    whether an index served it or a scan did (and why)."""

    start: str | None
    full: bool
    reason: str
    reads: dict[str, str]


class DescribedKey(TypedDict):
    """An activation key as a reviewer sees it (AC-24e, AC-24f): ``kind`` is ``absent``,
    ``sentinel``, ``instant`` or ``malformed``; the other keys depend on it."""

    kind: str
    raw: NotRequired[str]
    instant: NotRequired[str]
    precision: NotRequired[str]
    error: NotRequired[str]


class ActivationFacts(TypedDict):
    """The activation keys and, over an existing table, the counted boundary offences (AC-24)."""

    keys: dict[str, str | None]
    described: dict[str, DescribedKey]
    state: str
    table_exists: bool
    amended: bool
    schema_findings: list[str]
    backfill_rows: NotRequired[int]
    #: only when capture_since is an instant (AC-24 point 4)
    backfill_after_capture: NotRequired[Part]
    #: only when backfill_through is an instant (AC-24 point 1)
    uncovered_messages: NotRequired[Part]
    backfill_after_through: NotRequired[Part]
    #: only on a ``live`` read: its window (the keys and the schema only are read)
    window: NotRequired[WindowFacts]


class SentinelBackfillFacts(TypedDict):
    """Backfill rows under the ``''`` sentinel, split by the window (AC-24f, AC-24d); the
    parts exist only under the sentinel over an existing table."""

    sentinel: bool
    table_exists: bool
    outside_window: NotRequired[Part]
    inside_window: NotRequired[Part]


class DisclosureFacts(TypedDict):
    """The AC-25 population: one row per (source, side of each key, execution identity)."""

    table_exists: bool
    population: list[Row]


class Collisions(Part):
    """Rows minus distinct keys since capture_since (AC-32), with both numbers."""

    rows: int
    keys: int


class HealthFacts(TypedDict):
    """Writer health since capture_since (AC-26 … AC-29). Without a usable capture_since only
    ``not_run`` says why (AC-28a); without the table, no row-side facts."""

    capture_since: str | None
    table_exists: bool
    not_run: str | None
    since: NotRequired[str]
    subagent_messages: NotRequired[int]
    qualifying_keys: NotRequired[int]
    shortfall: NotRequired[Part]
    latest_observed_at: NotRequired[str | None]
    excess: NotRequired[Part]
    collisions: NotRequired[Collisions]
    #: every qualifying key since capture_since, listed (what a silent writer left unwritten)
    qualifying_listing: NotRequired[Listing]
    #: only on a ``live`` read: its window and how each read was served
    window: NotRequired[WindowFacts]


class RulePart(Part):
    """One row rule's offences; the uniqueness rule also counts the duplicated keys."""

    keys: NotRequired[int]


class RowFacts(TypedDict):
    """Every row rule's offences from one scan (CONTRACT §2); the totals only over a table."""

    table_exists: bool
    amended: bool
    key: list[str]
    qualifying_messages: int | None
    rows: int
    rules: dict[str, RulePart]
    #: the qualifying messages, listed, when they were counted (no table, or an empty one)
    qualifying_listing: NotRequired[Listing]
    completed_rows: NotRequired[int]
    empty_by_column: NotRequired[dict[str, int]]
    #: only on a ``live`` read: its window (only the rows changed in it are judged)
    window: NotRequired[WindowFacts]


class ExecutionColumn(TypedDict):
    present: bool
    nullable: bool | None
    default: str | None


class ForeignKey(TypedDict):
    columns: list[str]
    references: str
    on_delete: str


class Index(TypedDict):
    columns: list[str]
    unique: bool
    partial: bool


class Indexes(TypedDict):
    """The secondary indexes against a fresh store's (AC-33 clause 4)."""

    expected: dict[str, list[str]]
    missing: dict[str, list[str]]
    misshapen: dict[str, Index]
    unexpected: dict[str, Index]


class SchemaFacts(TypedDict):
    """The live shape of task_session_subagents, clause by clause (AC-17, AC-33, AC-16); the
    clauses only when the table exists."""

    table: str
    table_exists: bool
    shape: str
    rebuild_table_left: bool
    rebuild_table: str
    execution_column: NotRequired[ExecutionColumn]
    clause_1: NotRequired[bool]
    unique_keys: NotRequired[list[list[str]]]
    clause_2: NotRequired[bool]
    two_column_unique_remains: NotRequired[bool]
    pure_pre_amendment: NotRequired[bool]
    clauses_1_to_3: NotRequired[bool]
    indexes: NotRequired[Indexes]
    clause_4: NotRequired[bool]
    foreign_keys: NotRequired[list[ForeignKey]]
    session_fk_cascades: NotRequired[bool]
    forbidden_foreign_keys: NotRequired[list[ForeignKey]]
    no_fk_columns: NotRequired[list[str]]


class Timestamps(Part):
    """Timestamps not in a recognised UTC form (AC-24e); read on SQLite only."""

    applicable: bool
    by_column: dict[str, int]


class StoredTextFacts(TypedDict):
    """Stored text as the reading takes it: unreadable metadata, repeated member names
    (AC-23b, AC-19), instants no clock can have written (§1 timestamps) and timestamp forms."""

    dialect: str
    metadata: Part
    repeated_names: Part
    out_of_range: Part
    timestamps: Timestamps


class BackfillFacts(TypedDict):
    """The backfill rows compared with the rows the mapping expects (AC-21 …). Not evaluable
    (``reason`` says why) when the table or a column is missing: then only the totals."""

    evaluable: bool
    reason: str
    table_exists: bool
    backfill_rows: int
    expected_rows: int | None
    families: dict[str, Part]
    #: The expected rows' keys while no backfill row exists (the not-vacuous rule's listing).
    expected_listing: NotRequired[Listing]
    execution_column: NotRequired[bool]
    capture_since: NotRequired[str | None]
    compared_in_full: NotRequired[int]
    write_once_fields_only: NotRequired[int]
