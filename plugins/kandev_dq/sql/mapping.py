"""The one message→row mapping (CONTRACT §1, §4), shared by the migration runner and the checks.

Which messages qualify and how each becomes a ``task_session_subagents`` row is defined here
and nowhere else: the metadata fields read as columns (AC-23b), the AC-21 source predicate,
the AC-21b winner per ``(task_session_id, tool_call_id)``, and the row the backfill inserts
(§2's NULL / zero / negative / empty rules). The runner inserts :func:`backfill_select`; the
backfill checks compare stored rows against the same statement.

**The optimisation fence.** Each message's document is read in an inner subquery
(:func:`message_documents`) so that every field extracted from it reuses one parse. PostgreSQL
would pull that subquery up into its parent and repeat the ``::jsonb`` cast once per field
read. A reader of the subagent messages only computes the document as a set-returning column
(:class:`~kandev_dq.sql.dialect.computed_once`), which keeps the subquery whole and lets
parallel workers run the query reading it (activation's coverage, 0.70 -> 0.63 s at 1.1M
messages). A reader of every message carries ``OFFSET 0`` instead (:func:`fenced`): there the
set-returning column costs more per row than it saves (the migration's preflight, 1.34 -> 1.63
s). Either way a time window is passed in as ``since``.
SQLite re-reads the JSON text in each call either way (its parse cache serves repeated reads
of one document), so flattening costs it nothing measurable: it gets no fence, and no statement
carries a LIMIT (the backfill is one unbatched INSERT, AC-22).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from kandev_dq.contract import tables as schema
from kandev_dq.sql.compared import byte_order, key_token, stored_key_token
from kandev_dq.sql.dialect import (
    at_or_after,
    before,
    computed_once,
    driving_ids,
    exact_walk_needed,
    json_filled_text,
    json_flag,
    json_number,
    json_text,
    may_hold_string,
    once_per_row,
    utc_instant,
)
from kandev_dq.sql.messages import message_doc, stored_metadata

SUBAGENT_KIND = "subagent_task"
#: Where the subagent's own fields sit in a message's metadata document.
_TASK = ("normalized", "subagent_task")
#: Text fields copied from the subagent document, in column order.
TASK_TEXT = ("subagent_type", "description", "agent_id", "child_session_id", "model")
_KIND = ("normalized", "kind")
#: Each metadata field the subagent reading takes as a column (AC-23b, §2): its column name,
#: its reader and its member path, in column order.
_FIELD_READS = (
    ("tool_call_id", json_text, ("tool_call_id",)),
    ("parent_tool_call_id", json_filled_text, ("parent_tool_call_id",)),
    ("tool_status", json_filled_text, ("status",)),
    ("agent_status", json_filled_text, (*_TASK, "status")),
    *((name, json_filled_text, (*_TASK, name)) for name in TASK_TEXT),
    ("is_async", json_flag, (*_TASK, "is_async")),
    *((name, json_number, (*_TASK, name)) for name in schema.METRIC_COLUMNS),
)
#: The member paths the subagent reading takes (:func:`subagent_messages`): a name repeated
#: along one of them changes what the rules and the backfill read (AC-21, AC-23b). The kind
#: is read in every message; the fields only in messages of kind ``subagent_task``.
KIND_PATH: tuple[str, ...] = _KIND
FIELD_PATHS: tuple[tuple[str, ...], ...] = tuple(path for _, _, path in _FIELD_READS)
#: A metric beyond what an INTEGER column holds on PostgreSQL is not stored (on both dialects,
#: so that they agree, AC-19); no real count comes near it.
INTEGER_MAX = 2_147_483_647


def fenced(select: sa.Select) -> sa.Select:
    """``select`` with ``OFFSET 0`` on PostgreSQL, which then never merges it into the query
    that reads it. A literal suffix: ``.offset(0)`` would add a LIMIT on both dialects."""
    return select.suffix_with("OFFSET 0", dialect="postgresql")


def read_once(select: sa.Select) -> sa.Select:
    """``select`` run as a step of its own, each column computed once per row: merged into the
    query that reads it, a column is computed again at each reference (SQLite decoded a key
    field read in three predicates three times; PostgreSQL, probing an index per message,
    once per row the probe met). :func:`fenced` on PostgreSQL, ``LIMIT -1 OFFSET 0`` on
    SQLite."""
    return fenced(select).suffix_with("LIMIT -1 OFFSET 0", dialect="sqlite")


def message_documents(
    name: str,
    *,
    since: sa.BindParameter | None = None,
    extra: tuple = (),
    candidates_only: bool = False,
    within: Callable[[sa.ColumnElement], sa.ColumnElement[bool]] | None = None,
    sessions: tuple[str, ...] | None = None,
) -> sa.Subquery:
    """Every message with its metadata read once as a document ``doc`` (AC-23b), fenced (see
    the module's note on the optimisation fence).

    With ``since`` (a bound instant) only messages created at/after it are read, through the
    created_at index, and only their documents parsed (exact boundary, AC-24e). ``extra``
    columns of ``task_session_messages`` ride along. ``candidates_only`` keeps only the
    messages whose text may hold the kind ``subagent_task``, tested inside the subquery: the
    others are never parsed, nor passed on (by PostgreSQL's parallel workers, among others).
    ``within`` (a test of the session id, such as membership in a set of sessions) reads only
    those sessions' messages: each session one range of the ``(task_session_id, created_at)``
    index. ``sessions`` (PostgreSQL: session ids read first) does so by joining a LATERAL read
    to them, so that each one drives its range: a filter on them let PostgreSQL read the whole
    ``created_at`` range since ``since`` and test each message against them.
    """
    m = schema.task_session_messages
    # Every reader keeps the subagent messages only: the others need not be parsed.
    doc = message_doc(m, mentions=SUBAGENT_KIND)
    # The text the document is read from: a BLOB's bytes as text on SQLite (AC-23b), so a
    # message bound as bytes is read, and counted, like the same message stored as text.
    stored = stored_metadata(m)
    read = sa.select(
        m.c.id,
        m.c.task_session_id,
        m.c.task_id,
        m.c.turn_id,
        m.c.created_at,
        m.c.updated_at,
        (computed_once(doc) if candidates_only else doc).label("doc"),
        stored.label("metadata"),  # the stored text, for SQLite's test of names (json_text)
        *extra,
    )
    if within is not None:
        read = read.where(within(m.c.task_session_id))
    if since is not None:
        read = read.where(at_or_after(m.c.created_at, since))
    read = read.where(may_hold_string(stored, SUBAGENT_KIND)) if candidates_only else fenced(read)
    if sessions is not None:
        driver = driving_ids(sessions, f"{name}_sessions")
        per_session = read.where(m.c.task_session_id == driver.c.id).lateral(f"{name}_read")
        read = sa.select(*per_session.c).select_from(driver.join(per_session, sa.true()))
    return read.subquery(name)


def row_handle(table, handle: str) -> sa.ColumnElement:
    """The column ``handle`` of ``table`` (a message table or alias) that names its rows:
    ``id``, or SQLite's rowid under the name
    :func:`~kandev_dq.store.observe.message_handle` found free."""
    if handle == "id":
        return table.c.id
    return sa.literal_column(f"{table.name}.{handle}")


def is_subagent(doc, stored) -> sa.ColumnElement[bool]:
    """A message of kind ``subagent_task`` (AC-21); ``stored`` is its metadata text."""
    return json_text(doc, *_KIND, stored=stored) == SUBAGENT_KIND


def non_empty(column) -> sa.ColumnElement[bool]:
    return sa.and_(column.is_not(None), column != "")


def identified(task_session_id, task_id, tool_call_id) -> sa.ColumnElement[bool]:
    """AC-21 / AC-21a: session id, task id and tool_call_id all non-empty."""
    return sa.and_(non_empty(task_session_id), non_empty(task_id), non_empty(tool_call_id))


def is_source(docs: sa.Subquery) -> sa.ColumnElement[bool]:
    """The AC-21 source predicate over :func:`message_documents`, its text tested first: most
    messages are then never parsed."""
    return sa.and_(
        may_hold_string(docs.c.metadata, SUBAGENT_KIND),
        is_subagent(docs.c.doc, docs.c.metadata),
        identified(
            docs.c.task_session_id,
            docs.c.task_id,
            json_text(docs.c.doc, "tool_call_id", stored=docs.c.metadata),
        ),
    )


#: The columns :func:`subagent_messages` reads besides the metadata fields, in order.
_MESSAGE_COLUMNS = ("id", "task_session_id", "task_id", "turn_id", "created_at", "updated_at")
#: Every column :func:`subagent_messages` reads, in order.
_FIELDS = (*_MESSAGE_COLUMNS, *(name for name, _, _ in _FIELD_READS))
#: The text fields whose size nothing bounds (a description may be megabytes; the statuses
#: and ids are compared and joined on, and read everywhere).
UNBOUNDED_TEXT = ("parent_tool_call_id", *TASK_TEXT)
#: What a reader with a ``handle`` takes from the message by it (see :func:`backfill_select`):
#: the unbounded texts, the ``updated_at`` SQLite keeps as text of any size, which neither
#: ranks a message nor keys a row, and the id and session, which the ranking reads and no
#: later step needs to carry.
READ_BY_ID = (*UNBOUNDED_TEXT, "updated_at", "id", "task_session_id")


def subagent_messages(
    name: str = "subagent_messages",
    *,
    since: sa.BindParameter | None = None,
    only: tuple[str, ...] | None = None,
    reads_most_fields: bool = False,
    within: Callable[[sa.ColumnElement], sa.ColumnElement[bool]] | None = None,
    sessions: tuple[str, ...] | None = None,
    handle: str | None = None,
) -> sa.Subquery:
    """Messages of kind ``subagent_task`` with their metadata fields as columns (AC-23b), every
    text field but the key with ``''`` read as NULL, as the backfill writes it (§2); ``only``
    keeps just the named columns (the rest are then never read).

    SQLite tests each field's member names for escapes and repeats as the field is read. A
    caller reading most fields sets ``reads_most_fields``: each message's names are then tested
    once, in a one-row table joined to it (:func:`~kandev_dq.sql.dialect.once_per_row`), which
    costs a little even when no field is read, and keeps the subquery from being flattened into
    the right side of a LEFT JOIN. ``within`` or ``sessions`` reads only some sessions'
    messages (see :func:`message_documents`). With ``handle`` (see :func:`row_handle`), a
    column ``handle`` names each message's row."""
    m = schema.task_session_messages
    docs = message_documents(
        f"{name}_docs",
        since=since,
        candidates_only=True,
        within=within,
        sessions=sessions,
        extra=() if handle is None else (row_handle(m, handle).label("handle"),),
    )
    doc, stored = docs.c.doc, docs.c.metadata
    names = [column for column, _, _ in _FIELD_READS if only is None or column in only]
    fields, walk = metadata_fields(doc, stored, names, f"{name}_walk", reads_most_fields)
    columns = [
        *(docs.c[column] for column in _MESSAGE_COLUMNS if only is None or column in only),
        *fields,
        *(() if handle is None else (docs.c.handle,)),
    ]
    source = docs if walk is None else docs.join(walk, sa.true())
    return sa.select(*columns).select_from(source).where(is_subagent(doc, stored)).subquery(name)


def metadata_fields(
    doc, stored, names, walk_name: str, tested_once: bool
) -> tuple[list[sa.Label], sa.TableValuedAlias | None]:
    """The metadata fields ``names`` read from ``doc`` (its text ``stored``) as labelled
    columns, as :func:`subagent_messages` reads them. With ``tested_once``, the one-row table
    (named ``walk_name``) that tests the document's names for them all, to join to the row
    (see :func:`subagent_messages`); else None, and each field tests its own names."""
    reads = [read for read in _FIELD_READS if read[0] in names]
    walk, test = None, {"stored": stored}
    if tested_once:
        paths = [path for _, _, path in reads]
        walk = once_per_row(exact_walk_needed(doc, stored, *paths), walk_name)
        test = {"exact": walk.c.value}
    return [read(doc, *path, **test).label(column) for column, read, path in reads], walk


def qualifies(sm: sa.Subquery) -> sa.ColumnElement[bool]:
    """The AC-21 source predicate over :func:`subagent_messages` (whose kind is already read)."""
    return identified(sm.c.task_session_id, sm.c.task_id, sm.c.tool_call_id)


#: The fields :func:`winners` returns as tokens for a reader comparing them (``key_tokens``):
#: the key, and the ids only compared for equality.
COMPARED_AS_TOKENS = ("tool_call_id", "task_id", "turn_id")


def _id_order(column, dialect_name: str):
    """Byte order for the id tie-break, whatever the database's collation (AC-19)."""
    return column.collate("C" if dialect_name == "postgresql" else "BINARY")


def winners(
    dialect_name: str,
    created_before: sa.BindParameter | None = None,
    *,
    handle: str | None = None,
    key_tokens: bool = False,
) -> sa.Subquery:
    """The qualifying messages ranked per (task_session_id, tool_call_id): ``rank`` 1 is the
    AC-21b winner, the newest created_at, then the greatest id.

    ``created_before`` (an instant parameter) ranks only the messages created before it: the
    ones a backfill that ran before that instant could have read (AC-21b, AC-22). With
    ``handle`` (SQLite; see :func:`row_handle`) each row carries its message's ``handle``
    instead of its id, session and :data:`READ_BY_ID` fields, for a reader that takes them
    from the message by it (see :func:`backfill_select`); the ids are then ranked by
    :func:`~kandev_dq.sql.compared.byte_order`, the same order with no id held whole.
    With ``key_tokens`` the :data:`COMPARED_AS_TOKENS` fields ranked by or returned (and,
    with ``handle``, the session ranked by) are their
    :class:`~kandev_dq.sql.compared.key_token`, for a reader comparing them: the same ranks,
    and no huge value passes whole through the sort.

    The messages are read once, ranked with their fields, except on SQLite without
    ``handle`` (the migration's insert): there the window sorts ids and keys only and each
    message's fields are read after it, by id, so that no value of unbounded size passes
    through the sort (one 50 MB description held there cost SQLite several copies of it).
    PostgreSQL sorts on the server, spilling to disk.
    """

    def ranked_by_recency(read: sa.Subquery, *columns) -> sa.Select:
        ids = (
            (_id_order(read.c.id_head, dialect_name), read.c.id_after)
            if handle
            else (_id_order(read.c.id, dialect_name),)
        )
        rank = sa.func.row_number().over(
            partition_by=(read.c.task_session_id, read.c.tool_call_id),
            order_by=(utc_instant(read.c.created_at).desc(), *(c.desc() for c in ids)),
        )
        existed = [before(read.c.created_at, created_before)] if created_before is not None else []
        return sa.select(*columns, rank.label("rank")).where(qualifies(read), *existed)

    if handle is not None:
        # Keyed by handle: the id only ranks and the session only partitions (AC-21b); neither
        # is carried past the sort.
        ranking = ("id", "task_session_id")
        only = tuple(name for name in _FIELDS if name not in READ_BY_ID or name in ranking)
        sm = subagent_messages("msg", only=only, reads_most_fields=True, handle=handle)
        session = sm.c.task_session_id
        peers = schema.task_session_messages.alias("id_peers")
        ids = byte_order(sm.c.id, session, peers)
        read = [
            *(
                key_token(c).label(c.name) if key_tokens and c.name in COMPARED_AS_TOKENS else c
                for c in sm.c
                if c.name not in ranking
            ),
            (stored_key_token(session) if key_tokens else session).label("task_session_id"),
            *(key.label(name) for key, name in zip(ids, _ID_KEYS, strict=True)),
        ]
        fields = read_once(sa.select(*read)).subquery("msg_fields")
        return ranked_by_recency(fields, *(c for c in fields.c if c.name not in _ID_KEYS)).subquery(
            "ranked"
        )
    if dialect_name != "sqlite":
        sm = subagent_messages("msg", reads_most_fields=True)
        # Fenced: the sort then carries the fields, not each message's document and text.
        # With key_tokens, the token is taken before the sort, which then never holds the key.
        read = [
            key_token(c).label(c.name) if key_tokens and c.name in COMPARED_AS_TOKENS else c
            for c in sm.c
        ]
        fields = (read_once if key_tokens else fenced)(sa.select(*read)).subquery("msg_fields")
        return ranked_by_recency(fields, fields).subquery("ranked")
    keyed = subagent_messages(
        "keyed", only=("id", "task_session_id", "task_id", "created_at", "tool_call_id")
    )
    ranked = ranked_by_recency(keyed, keyed.c.id).subquery("ranked_ids")
    sm = subagent_messages("msg", reads_most_fields=True)
    return (
        sa.select(sm, ranked.c.rank)
        .join_from(sm, ranked, ranked.c.id == sm.c.id)
        .subquery("ranked")
    )


#: The columns :func:`~kandev_dq.sql.compared.byte_order` gives a ranked id.
_ID_KEYS = ("id_head", "id_after")


class _whole(FunctionElement):  # noqa: N801 - reads as a SQL function
    """A JSON number truncated toward zero, identically on both dialects."""

    inherit_cache = True
    type = sa.Numeric()


@compiles(_whole, "sqlite")
def _whole_sqlite(element, compiler, **kw):
    return f"CAST({compiler.process(list(element.clauses)[0], **kw)} AS INTEGER)"


@compiles(_whole, "postgresql")
def _whole_postgresql(element, compiler, **kw):
    return f"trunc({compiler.process(list(element.clauses)[0], **kw)})"


def _metric(value, agent_status, *, keep_zero: bool):
    """AC-7/7a/8/9: NULL when async_launched, unreported, negative (or 0 unless kept)."""
    whole = _whole(value)
    lowest = 0 if keep_zero else 1
    return sa.case(
        (agent_status == "async_launched", sa.null()),
        (sa.and_(whole >= lowest, whole <= INTEGER_MAX), sa.cast(whole, sa.Integer)),
        else_=sa.null(),
    )


BACKFILL_COLUMNS = (
    "id",
    "task_session_id",
    "task_id",
    "turn_id",
    "tool_call_id",
    "agent_execution_id",
    "parent_tool_call_id",
    *TASK_TEXT,
    "agent_status",
    "tool_status",
    "is_async",
    *schema.METRIC_COLUMNS,
    "source",
    "observed_at",
    "settled_at",
    "updated_at",
)


def backfill_select(
    dialect_name: str,
    created_before: sa.BindParameter | None = None,
    *,
    handle: str | None = None,
    key_tokens: bool = False,
) -> sa.Select:
    """The rows the backfill inserts, in :data:`BACKFILL_COLUMNS` order (CONTRACT §4 table);
    with ``created_before``, the rows a backfill that ran before that instant inserted.

    With ``handle`` (SQLite, see :func:`winners`), each row names its message by ``handle``
    instead of carrying its ``id``, ``task_session_id`` and :data:`READ_BY_ID` columns (the
    :data:`UNBOUNDED_TEXT` ones, ``settled_at`` and ``updated_at``), for a reader that takes
    them from the message: SQLite materialises a subquery joined as these rows are in the
    backfill reconciliation, a copy of each value and one more as it is read back (a 50 MB
    description cost 100 MB that way, a 50 MB message id or session some 850 MB across the
    sorts and the materialised rows). With ``key_tokens`` the ``tool_call_id`` is its token
    (see :func:`winners`), for the reconciliation's join."""
    r = winners(dialect_name, created_before, handle=handle, key_tokens=key_tokens)
    agent_status, tool_status = r.c.agent_status, r.c.tool_status  # '' already read as NULL
    by_message = handle is None
    return sa.select(
        *((r.c.id, r.c.task_session_id) if by_message else (r.c.handle,)),
        r.c.task_id,
        sa.func.nullif(r.c.turn_id, "").label("turn_id"),
        r.c.tool_call_id,
        sa.literal(schema.UNKNOWN_EXECUTION, sa.Text).label("agent_execution_id"),
        *(r.c[name] for name in UNBOUNDED_TEXT if by_message),
        agent_status,
        tool_status,
        sa.func.coalesce(r.c.is_async, 0).label("is_async"),
        _metric(r.c.total_tokens, agent_status, keep_zero=False).label("total_tokens"),
        _metric(r.c.tool_use_count, agent_status, keep_zero=True).label("tool_use_count"),
        _metric(r.c.duration_ms, agent_status, keep_zero=False).label("duration_ms"),
        sa.literal("backfill", sa.Text).label("source"),
        r.c.created_at.label("observed_at"),
        *(
            (
                settled_at(tool_status, r.c.updated_at).label("settled_at"),
                r.c.updated_at.label("updated_at"),
            )
            if by_message
            else ()
        ),
    ).where(r.c.rank == 1)


def settled_at(tool_status, updated_at) -> sa.ColumnElement:
    """AC-23a: a row's ``settled_at`` is its message's ``updated_at`` once the tool call is
    terminal, else NULL."""
    return sa.case((tool_status.in_(schema.TERMINAL_TOOL_STATUSES), updated_at), else_=sa.null())
