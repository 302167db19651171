"""Reading a ``live`` window: which sessions changed at or after its start, through which index.

"What changed" (the ``live`` checkpoint) is a message created or updated, or a subagent row
observed or updated, at or after the window's start, each compared exactly (AC-24e). The
sessions holding such a change are read first; the writer-health ledger and the row rules then
read only those sessions (a ``(task_session_id, tool_call_id)`` key lies within one session),
or only the changed rows; and, whatever changed, the sessions of the suite's open findings
(:attr:`~kandev_dq.facts.shapes.ChangeWindow.open_sessions`), each by its session index.

Each read uses an index where the store has one, observed in its live schema
(:func:`kandev_dq.store.observe.index_leading`), never assumed: messages created in the window
are a range of ``idx_messages_created_at``; messages updated in it a range of
``idx_messages_session_updated`` per session (upstream creates both), or one range of an index
led by ``updated_at`` where the store's owner added one. Without one, the read is
a scan, and :attr:`WindowRead.facts` says so (naming the owner's index that would serve it,
:data:`OWNER_INDEXES`), as it says how every other read was served;
``task_session_subagents`` has no index on ``observed_at`` or ``updated_at`` upstream, so its
changed rows are read by a scan (or by both indexes, where added): ONE per snapshot
(:func:`changed_rows`), shared by the writer-health ledger and the row rules, which then name
those rows by rowid (SQLite) or id (PostgreSQL). A listing, a statement a reviewer runs,
states the window by its start instead.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import sqlalchemy as sa

from kandev_dq.contract.instants import parse_key
from kandev_dq.contract.tables import SUBAGENTS, subagents, task_session_messages, task_sessions
from kandev_dq.facts.shapes import ChangeWindow, WindowFacts
from kandev_dq.sql.dialect import (
    at_or_after,
    instant_param,
    looked_up,
    may_hold_string,
    one_of,
    store_traits,
)
from kandev_dq.sql.mapping import SUBAGENT_KIND
from kandev_dq.sql.messages import stored_metadata
from kandev_dq.store.observe import index_leading, schema_inspector

MESSAGES = task_session_messages.name
#: Each read of a window, as its output names it.
CREATED = "messages created in the window"
UPDATED = "messages updated in the window"
ROWS = "subagent rows changed in the window"
SESSIONS = "the changed sessions' messages and rows"
#: The indexes of :data:`OWNER_INDEXES` the store lacks, where a read of the window needs one.
MISSING = "indexes an owner may add for one range each (docs/interpretations.md)"


@dataclass(frozen=True)
class WindowRead:
    """A window as the facts read it: ``full`` (everything, as nightly reads it) or the
    changed sessions (``sessions``, one column ``task_session_id``) and the start bound;
    ``session_ids``, where they were read first (PostgreSQL), the same sessions as values."""

    full: bool
    facts: WindowFacts
    start: sa.BindParameter | None = None
    sessions: sa.CTE | None = None
    session_ids: tuple[str, ...] | None = None
    rows: ChangedRows | None = None
    #: The changed sessions as a listing states them: by the window's start alone.
    listed_sessions: sa.CTE | None = None
    #: Every index the window's reads by session or key need is there: its statements may be
    #: planned for them alone (:func:`~kandev_dq.sql.dialect.index_reads`).
    indexed: bool = False
    #: The open findings' sessions (:attr:`ChangeWindow.open_sessions`), read whatever changed.
    open_sessions: tuple[str | None, ...] = ()

    @property
    def small(self) -> bool:
        """A windowed read the store's indexes serve: planned for them."""
        return not self.full and self.indexed

    def row_changed(self, row: sa.Table, *, listing: bool = False) -> sa.ColumnElement[bool]:
        """A row of ``row`` (the subagent table or an alias) changed in the window: one of
        the rows read once for the snapshot (:func:`changed_rows`), or, in a ``listing``,
        the comparison itself, which states the window by its start."""
        if self.rows is not None and not listing:
            changed = self.rows.holds(row)
        else:
            changed = self.changed_when(row.c.observed_at, row.c.updated_at)
        return self._or_open(changed, row.c.task_session_id, listing)

    def in_sessions(self, column, *, listing: bool = False) -> sa.ColumnElement[bool]:
        """``column`` (a session id) is one of the changed sessions: the values read first,
        where they were; in a ``listing`` (a statement a reviewer runs) always the subquery,
        which states the window by its start rather than by thousands of ids."""
        assert self.sessions is not None and self.listed_sessions is not None
        if listing:
            listed = column.in_(sa.select(self.listed_sessions.c.task_session_id))
            return self._or_open(listed, column, listing)
        if self.session_ids is None:
            return self._or_open(column.in_(sa.select(self.sessions.c.task_session_id)), column)
        # The open sessions' ids are among the ids read first; a NULL one matches no id.
        within = one_of(column, self.session_ids, "changed_session_ids")
        return sa.or_(within, column.is_(None)) if None in self.open_sessions else within

    def in_open(self, column, *, listing: bool = False) -> sa.ColumnElement[bool]:
        """``column`` (a session id) is one of the open findings' sessions: one parameter, or
        in a ``listing`` (a statement a reviewer runs) the ids written out."""
        ids = _named_sessions(self.open_sessions)
        tests = [column.in_(ids) if listing else one_of(column, ids, "open_session_ids")]
        if None in self.open_sessions:
            tests.append(column.is_(None))
        return sa.or_(*tests)

    def _or_open(self, changed, session, listing: bool = False) -> sa.ColumnElement[bool]:
        if not self.open_sessions:
            return changed
        return sa.or_(changed, self.in_open(session, listing=listing))

    def changed_when(self, created_or_observed, updated) -> sa.ColumnElement[bool]:
        """A message or row changed in the window: created (observed) or updated at or after
        its start, exactly (AC-24e)."""
        assert self.start is not None
        return sa.or_(
            at_or_after(created_or_observed, self.start), at_or_after(updated, self.start)
        )


@dataclass(frozen=True)
class ChangedRows:
    """The subagent rows observed or updated at/after a start, read once per snapshot: their
    SQLite rowids (integers, whatever type the store gave their ids) or PostgreSQL ids, and,
    on PostgreSQL, their sessions."""

    by_rowid: bool
    keys: tuple
    sessions: tuple[str, ...] = ()

    def holds(self, row: sa.Table) -> sa.ColumnElement[bool]:
        column = sa.literal_column(f"{row.name}.rowid") if self.by_rowid else row.c.id
        return looked_up(column, self.keys, "changed_rows")


#: Indexes upstream does not create that a store's owner may add for a frequent ``live``:
#: each read of a window is then one range, whatever the number of sessions and rows
#: (name -> table, column; docs/interpretations.md). kandev-dq never creates them.
OWNER_INDEXES = {
    "idx_messages_updated_at": (MESSAGES, "updated_at"),
    "idx_subagents_observed_at": (SUBAGENTS, "observed_at"),
    "idx_subagents_updated_at": (SUBAGENTS, "updated_at"),
}


def owner_index_statements() -> list[str]:
    """The statements creating :data:`OWNER_INDEXES`, as docs/interpretations.md gives them."""
    return [
        f"CREATE INDEX {name} ON {table} ({column})"
        for name, (table, column) in OWNER_INDEXES.items()
    ]


#: The changed rows of each snapshot (its transaction) and start: the table has no index on
#: observed_at or updated_at, so the writer-health and row-rule families share ONE scan.
_read_once: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Past this many changed rows (a long gap on a busy store), naming each one costs more than
#: comparing the timestamps again: the reads compare them.
MAX_NAMED_ROWS = 50_000


def changed_rows(conn: sa.Connection, window: ChangeWindow) -> ChangedRows | None:
    """The subagent rows changed at/after ``window``'s start in ``conn``'s snapshot, read once
    per snapshot; None where no row may be named by a key (a SQLite table without rowid), where
    the indexes read them better (:func:`_rows_indexed`) or too many changed
    (:data:`MAX_NAMED_ROWS`)."""
    snapshot = conn.get_transaction()
    known = _read_once.get(snapshot, {}) if snapshot is not None else {}
    if window.start in known:
        return known[window.start]
    by_rowid = store_traits(conn).rows_by_rowid
    if by_rowid:
        options = schema_inspector(conn).get_table_options(SUBAGENTS)
        unnamed = options.get("sqlite_with_rowid") is False
    else:
        unnamed = _rows_indexed(conn)
    if unnamed:
        found = None
    else:
        r = subagents.c
        start = _start(window)
        changed = sa.or_(at_or_after(r.observed_at, start), at_or_after(r.updated_at, start))
        if by_rowid:
            keys = conn.execute(
                sa.select(sa.literal_column(f"{SUBAGENTS}.rowid"))
                .select_from(subagents)
                .where(changed)
                .limit(MAX_NAMED_ROWS + 1)  # past it, the rest need not be read
            ).scalars()
            found = ChangedRows(True, tuple(keys))
        else:
            rows = conn.execute(
                sa.select(r.id, r.task_session_id).where(changed).limit(MAX_NAMED_ROWS + 1)
            ).all()
            found = ChangedRows(
                False,
                tuple(row.id for row in rows),
                tuple(dict.fromkeys(row.task_session_id for row in rows)),
            )
        if len(found.keys) > MAX_NAMED_ROWS:
            found = None
    if snapshot is not None:
        _read_once.setdefault(snapshot, {})[window.start] = found
    return found


def _rows_indexed(conn: sa.Connection) -> bool:
    """The subagent table has an index on observed_at and one on updated_at (an owner's,
    :data:`OWNER_INDEXES`): on PostgreSQL each read of the changed rows is then their ranges,
    a bitmap read in the table's order, where thousands of ids were looked up one by one
    (bench/live.md). SQLite's rowids stay the faster read."""
    return None not in (
        index_leading(conn, SUBAGENTS, ("observed_at",)),
        index_leading(conn, SUBAGENTS, ("updated_at",)),
    )


def _missing(conn: sa.Connection, tables: tuple[str, ...]) -> dict[str, str]:
    """The read naming what :data:`OWNER_INDEXES` on ``tables`` the store lacks (no index led
    by the column, whatever its name): each read it serves now probes or scans, growing with
    the store. Nothing where none is lacking."""
    lacking = [
        name
        for name, (table, column) in OWNER_INDEXES.items()
        if table in tables and index_leading(conn, table, (column,)) is None
    ]
    return {MISSING: ", ".join(lacking)} if lacking else {}


def _in_full(window: ChangeWindow) -> WindowRead:
    facts: WindowFacts = {
        "start": None,
        "full": True,
        "reason": window.reason,
        "reads": {"messages and rows": "all since capture_since, as nightly reads them"},
    }
    return WindowRead(full=True, facts=facts)


def _start(window: ChangeWindow) -> sa.BindParameter:
    return instant_param("window_start", parse_key(window.start or ""))


def read_changed_rows(conn: sa.Connection, window: ChangeWindow | None) -> WindowRead | None:
    """How to read the subagent rows changed in ``window`` (the row rules judge only those;
    None without a window). Their keys are counted over the whole table, by the key's index."""
    if window is None:
        return None
    if window.start is None:
        return _in_full(window)
    by_key = index_leading(conn, SUBAGENTS, ("task_session_id",))
    rows = changed_rows(conn, window)
    reads = {
        ROWS: _rows_served(conn, rows),
        "each changed row's key and session": _served(by_key, "per row", "task_session_id"),
        **_missing(conn, (SUBAGENTS,)),
    }
    facts: WindowFacts = {
        "start": window.start,
        "full": False,
        "reason": window.reason,
        "reads": reads,
    }
    reads.update(_open_read(window, {"rows": by_key}))
    return WindowRead(
        full=False,
        facts=facts,
        start=_start(window),
        rows=rows,
        indexed=by_key is not None,
        open_sessions=window.open_sessions,
    )


def read_window(
    conn: sa.Connection, window: ChangeWindow | None, *, with_rows: bool
) -> WindowRead | None:
    """How to read ``window`` on this store (None without a window: nightly's read)."""
    if window is None:
        return None
    if window.start is None:
        return _in_full(window)
    start = _start(window)
    m = task_session_messages
    candidate = _candidate(m)
    created_index = index_leading(conn, MESSAGES, ("created_at",))
    created = sa.select(m.c.task_session_id).where(at_or_after(m.c.created_at, start), candidate)
    updated = sa.select(m.c.task_session_id).where(at_or_after(m.c.updated_at, start), candidate)
    updated_index = index_leading(conn, MESSAGES, ("updated_at",))
    if updated_index is not None:
        # An index a store's owner may add: the window's updates are one range, whatever the
        # number of sessions (docs/interpretations.md).
        updated_read = _served(updated_index, "a range on updated_at", "updated_at")
    else:
        updated_index = index_leading(conn, MESSAGES, ("task_session_id", "updated_at"))
        updated_read = _served(
            updated_index,
            "a range on updated_at per session",
            "updated_at or (task_session_id, updated_at)",
        )
        if updated_index is not None:
            # Upstream's index: each session probed for a message updated in the window, one
            # range per session, never a scan of the messages.
            updated = sa.select(task_sessions.c.id.label("task_session_id")).where(
                updated.where(m.c.task_session_id == task_sessions.c.id).exists()
            )
    sides = [created, updated]
    reads = {
        CREATED: _served(created_index, "a range on created_at", "created_at"),
        UPDATED: updated_read,
    }
    rows = changed_rows(conn, window) if with_rows else None
    listed_sides = list(sides)
    if with_rows:
        changed_row = sa.select(subagents.c.task_session_id)
        listed_sides.append(
            changed_row.where(
                sa.or_(
                    at_or_after(subagents.c.observed_at, start),
                    at_or_after(subagents.c.updated_at, start),
                )
            )
        )
        if rows is None or not rows.by_rowid:
            # PostgreSQL adds the rows' sessions read with them (below); without rowids, the
            # comparison itself.
            sides.append(listed_sides[-1])
        else:
            sides.append(changed_row.where(rows.holds(subagents)))
        reads[ROWS] = _rows_served(conn, rows)
    session_messages = index_leading(conn, MESSAGES, ("task_session_id", "created_at"))
    session_rows = index_leading(conn, SUBAGENTS, ("task_session_id",)) if with_rows else None
    reads[SESSIONS] = "; ".join(
        [
            "messages: "
            + _served(session_messages, "a range per session", "(task_session_id, created_at)"),
            *(
                ["rows: " + _served(session_rows, "per session", "task_session_id")]
                if with_rows
                else []
            ),
        ]
    )
    reads.update(_missing(conn, (MESSAGES, SUBAGENTS) if with_rows else (MESSAGES,)))
    by_session = {"messages": session_messages, **({"rows": session_rows} if with_rows else {})}
    reads.update(_open_read(window, by_session))
    facts: WindowFacts = {
        "start": window.start,
        "full": False,
        "reason": window.reason,
        "reads": reads,
    }
    # A CTE: read once, though the ledger filters both its sides by it.
    sessions = sa.union(*sides).cte("changed_sessions")
    listed = sa.union(*listed_sides).cte("changed_sessions")
    ids = None
    if store_traits(conn).binds_read_sets:
        # PostgreSQL plans the ledger for the rows it estimates, and a window's newest messages
        # lie past its statistics: a nested loop planned for one message re-read the session
        # set once per message (5,000 times). Read first in the same snapshot and bound as one
        # array, the set is a hashed filter or an index condition, never a join to repeat.
        # (SQLite computes an uncorrelated IN list once by design, and its ids may be stored
        # as any type, which values sent back could not match exactly: it keeps the subquery.)
        if rows is not None:
            sessions = sa.union(*sides[:2]).cte("changed_sessions")
        read = conn.execute(sa.select(sessions.c.task_session_id)).scalars()
        ids = tuple(
            dict.fromkeys(
                [
                    *read,
                    *(rows.sessions if rows is not None else ()),
                    *_named_sessions(window.open_sessions),
                ]
            )
        )
        reads[SESSIONS] += "; the changed sessions read first, bound as one array"
    return WindowRead(
        full=False,
        facts=facts,
        start=start,
        sessions=sessions,
        session_ids=ids,
        rows=rows,
        listed_sessions=listed,
        indexed=None not in (created_index, session_messages)
        and (not with_rows or session_rows is not None),
        open_sessions=window.open_sessions,
    )


#: The read of the open findings' sessions, as a window's output names it.
OPEN = "open findings' sessions, re-read whatever changed"


def _open_read(window: ChangeWindow, indexes: dict[str, str | None]) -> dict[str, str]:
    """How the open findings' sessions were read (each table by its session index), if any."""
    if not window.open_sessions:
        return {}
    served = "; ".join(
        f"{table}: {_served(index, 'a range per session', 'task_session_id')}"
        for table, index in indexes.items()
    )
    return {OPEN: f"{len(window.open_sessions)} session(s); {served}"}


def _named_sessions(sessions: tuple[str | None, ...]) -> tuple[str, ...]:
    """The open sessions that have an id (a NULL one is matched by ``IS NULL``)."""
    return tuple(session for session in sessions if session is not None)


def _candidate(m) -> sa.ColumnElement[bool]:
    """A message whose text may hold the kind ``subagent_task`` (tested without a parse)."""
    return may_hold_string(stored_metadata(m), SUBAGENT_KIND)


#: An index name as the output shows it, at most: the name is the store's, and SQLite bounds
#: none (every display escapes it; this keeps a line a line).
INDEX_NAME_CHARS = 120


def _named(index: str) -> str:
    return index if len(index) <= INDEX_NAME_CHARS else f"{index[:INDEX_NAME_CHARS]}…"


def _served(index: str | None, how: str, columns: str) -> str:
    if index is not None:
        return f"index {_named(index)}: {how}"
    return f"scan: the store has no index on {columns}"


def _rows_served(conn: sa.Connection, rows: ChangedRows | None) -> str:
    observed = index_leading(conn, SUBAGENTS, ("observed_at",))
    updated = index_leading(conn, SUBAGENTS, ("updated_at",))
    if observed is not None and updated is not None:
        served = f"indexes {_named(observed)} and {_named(updated)}, where the planner takes them"
    else:
        served = f"scan: {SUBAGENTS} has no index on observed_at and updated_at"
    if rows is None:
        return served
    named = "rowids" if rows.by_rowid else "ids"
    return f"{served}; read once for the snapshot, the rows then named by their {named}"
