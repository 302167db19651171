"""The floors: the same facts and the same backfill, in the leanest raw SQL, per dialect.

Each floor is what a careful engineer would write by hand for one family of facts: one
statement, no ORM, no samples, no schema introspection. It keeps the contract's semantics
(JSON read once per row with NULL / '' / 'null' as ``{}``, a string field only when it is a
JSON string, timestamps compared as exact instants with an index-friendly lower bound, keys
parsed in Python and bound as parameters), because a floor that computed different facts
would not be a floor. :func:`agree` checks that it computes the same numbers as kandev-dq.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.instants import (
    ACTIVATION_KEYS,
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    KEY_RANGE,
    Instant,
    Precision,
    fixed_text,
    now_instant,
    read_key,
)
from kandev_dq.sql.clock_range import FUTURE_TOLERANCE_NS

TERMINAL = "('complete', 'completed', 'success', 'error', 'failed', 'cancelled')"
VOCABULARY = (
    "('pending', 'in_progress', 'complete', 'completed', 'success', 'error', 'failed', 'cancelled')"  # noqa: E501
)
TEXT_FIELDS = ("subagent_type", "description", "agent_id", "child_session_id", "model")
NULLABLE_TEXT = (
    "turn_id",
    "parent_tool_call_id",
    *TEXT_FIELDS,
    "agent_status",
    "tool_status",
)
METRICS = ("total_tokens", "tool_use_count", "duration_ms")
INTEGER_MAX = 2_147_483_647
UNIQUE_KEY = "task_session_id, agent_execution_id, tool_call_id"
COLUMNS = (
    "id, task_session_id, task_id, turn_id, tool_call_id, agent_execution_id, "
    "parent_tool_call_id, subagent_type, description, agent_id, child_session_id, model, "
    "agent_status, tool_status, is_async, total_tokens, tool_use_count, duration_ms, source, "
    "observed_at, settled_at, updated_at"
)


@dataclass(frozen=True)
class Sql:
    """The few constructs that differ between the dialects, as SQL text."""

    name: str

    def doc(self, col: str = "metadata") -> str:
        if self.name == "sqlite":
            return f"CASE WHEN json_valid({col}) THEN {col} ELSE '{{}}' END"
        return f"(CASE WHEN {col} IS NULL OR btrim({col}) IN ('', 'null') THEN '{{}}' ELSE {col} END)::jsonb"  # noqa: E501

    def offset0(self) -> str:
        """Keeps PostgreSQL from inlining the per-row ``::jsonb`` into every field."""
        return " OFFSET 0" if self.name == "postgresql" else ""

    def text(self, path: str) -> str:
        if self.name == "sqlite":
            return f"CASE WHEN json_type(doc, '$.{path}') = 'text' THEN json_extract(doc, '$.{path}') END"  # noqa: E501
        p = "{" + path.replace(".", ",") + "}"
        return f"CASE WHEN jsonb_typeof(doc #> '{p}') = 'string' THEN doc #>> '{p}' END"

    def number(self, path: str) -> str:
        if self.name == "sqlite":
            return (
                f"CASE WHEN json_type(doc, '$.{path}') IN ('integer', 'real') "
                f"THEN json_extract(doc, '$.{path}') END"
            )
        p = "{" + path.replace(".", ",") + "}"
        return f"CASE WHEN jsonb_typeof(doc #> '{p}') = 'number' THEN (doc #>> '{p}')::numeric END"

    def flag(self, path: str) -> str:
        if self.name == "sqlite":
            return (
                f"CASE json_type(doc, '$.{path}') WHEN 'true' THEN 1 WHEN 'false' THEN 0 "
                f"WHEN 'integer' THEN json_extract(doc, '$.{path}') <> 0 "
                f"WHEN 'real' THEN json_extract(doc, '$.{path}') <> 0 END"
            )
        p = "{" + path.replace(".", ",") + "}"
        return (
            f"CASE jsonb_typeof(doc #> '{p}') WHEN 'boolean' THEN "
            f"CASE WHEN (doc #>> '{p}')::boolean THEN 1 ELSE 0 END "
            f"WHEN 'number' THEN CASE WHEN (doc #>> '{p}')::numeric <> 0 THEN 1 ELSE 0 END END"
        )

    def whole(self, expr: str) -> str:
        return f"CAST({expr} AS INTEGER)" if self.name == "sqlite" else f"trunc({expr})"

    def ts(self, col: str) -> str:
        """An exact, ordered reading of a stored timestamp."""
        if self.name == "sqlite":
            frac = (
                f"CASE WHEN substr({col}, 20, 1) = '.' "
                f"THEN rtrim(substr({col}, 21), '+-:0Z') ELSE '' END"
            )
            return (
                f"(substr({col}, 1, 10) || ' ' || substr({col}, 12, 8) || '.' || "
                f"substr(({frac}) || '000000000', 1, 9))"
            )
        return col  # naive UTC wall clock: ordered and compared exactly as it is

    def param(self, name: str) -> str:
        """A bound parameter in the driver's own style (SQLite parses it, respecting literals)."""
        return f":{name}" if self.name == "sqlite" else f"%({name})s"

    def at_or_after(self, col: str, param: str) -> str:
        p = self.param(param)
        if self.name == "sqlite":
            return f"({col} >= substr({p}, 1, 10) AND {self.ts(col)} >= {p})"
        return f"({col} >= (CAST({p} AS timestamptz) AT TIME ZONE 'UTC'))"

    def before(self, col: str, param: str) -> str:
        p = self.param(param)
        if self.name == "sqlite":
            return f"({col} < substr({p}, 1, 10) OR {self.ts(col)} < {p})"
        return f"({col} < (CAST({p} AS timestamptz) AT TIME ZONE 'UTC'))"

    def differs(self, left: str, right: str) -> str:
        return (
            f"({left} IS NOT {right})"
            if self.name == "sqlite"
            else (f"({left} IS DISTINCT FROM {right})")
        )

    def differs_at(self, left: str, right: str) -> str:
        """Two stored timestamps holding different instants; SQLite reads them only where the
        texts differ (the unary + keeps column affinities from equating a text and a number)."""
        if self.name != "sqlite":
            return self.differs(left, right)
        return (
            f"(CASE WHEN typeof({left}) = 'text' AND +{left} = +{right} COLLATE BINARY THEN 0 "
            f"ELSE {self.differs(self.ts(left), self.ts(right))} END)"
        )

    def by_id(self, col: str) -> str:
        return f'{col} COLLATE "C"' if self.name == "postgresql" else f"{col} COLLATE BINARY"

    def bind(self, instant: Instant) -> Any:
        bound = instant.bound()
        return bound if self.name == "postgresql" else fixed_text(bound)

    def uuid(self, col: str) -> str:
        if self.name == "sqlite":
            pattern = "-".join("[0-9a-f]" * n for n in (8, 4, 4, 4, 12))
            return f"lower({col}) GLOB '{pattern}'"
        return (
            f"{col} ~* '^[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}$'"
        )


# --- the source messages and the backfill mapping (CONTRACT §4) ---------------------------------


def _messages(q: Sql, where: str = "") -> str:
    """Every message (or those matching ``where``) with its metadata parsed once."""
    return (
        "SELECT id, task_session_id, task_id, turn_id, created_at, updated_at, "
        f"{q.doc()} AS doc FROM task_session_messages{where}{q.offset0()}"
    )


def _qualifying(q: Sql) -> str:
    """The AC-21 predicate, over a row of :func:`_messages`."""
    return (
        f"({q.text('normalized.kind')}) = 'subagent_task' "
        "AND coalesce(task_session_id, '') <> '' AND coalesce(task_id, '') <> '' "
        f"AND coalesce(({q.text('tool_call_id')}), '') <> ''"
    )


def _expected(q: Sql) -> str:
    """The rows the backfill writes: one winner per key, mapped (AC-21 … AC-23a)."""
    task = "normalized.subagent_task"
    fields = ",\n      ".join(
        [
            f"({q.text('tool_call_id')}) AS tool_call_id",
            f"({q.text('parent_tool_call_id')}) AS parent_tool_call_id",
            f"({q.text('status')}) AS tool_status",
            f"({q.text(task + '.status')}) AS agent_status",
            *(f"({q.text(f'{task}.{name}')}) AS {name}" for name in TEXT_FIELDS),
            f"({q.flag(task + '.is_async')}) AS is_async",
            *(f"({q.number(f'{task}.{name}')}) AS {name}" for name in METRICS),
        ]
    )
    ranked = (
        f"SELECT id, task_session_id, task_id, turn_id, created_at, updated_at,\n      {fields},\n"
        f"      row_number() OVER (PARTITION BY task_session_id, ({q.text('tool_call_id')}) "
        f"ORDER BY {q.ts('created_at')} DESC, {q.by_id('id')} DESC) AS rank\n"
        f"    FROM ({_messages(q)}) AS msg WHERE {_qualifying(q)}"
    )

    def metric(name: str, lowest: int) -> str:
        whole = q.whole(f"r.{name}")
        return (
            f"CASE WHEN nullif(r.agent_status, '') = 'async_launched' THEN NULL "
            f"WHEN {whole} >= {lowest} AND {whole} <= {INTEGER_MAX} THEN CAST({whole} AS INTEGER) "
            f"END AS {name}"
        )

    texts = ", ".join(f"nullif(r.{name}, '') AS {name}" for name in TEXT_FIELDS)
    return (
        "SELECT r.id, r.task_session_id, r.task_id, nullif(r.turn_id, '') AS turn_id, "
        "r.tool_call_id, 'unknown' AS agent_execution_id, "
        f"nullif(r.parent_tool_call_id, '') AS parent_tool_call_id, {texts}, "
        "nullif(r.agent_status, '') AS agent_status, nullif(r.tool_status, '') AS tool_status, "
        "coalesce(r.is_async, 0) AS is_async, "
        f"{metric('total_tokens', 1)}, {metric('tool_use_count', 0)}, {metric('duration_ms', 1)}, "
        "'backfill' AS source, r.created_at AS observed_at, "
        f"CASE WHEN nullif(r.tool_status, '') IN {TERMINAL} THEN r.updated_at END AS settled_at, "
        f"r.updated_at AS updated_at\n  FROM ({ranked}) AS r WHERE r.rank = 1"
    )


# --- the migration's floor: MAX + INSERT … SELECT + COMMIT ----------------------------------------


def backfill(conn: sa.Connection, dialect: str) -> tuple[int, Any]:
    """The bare backfill on an autocommit ``conn``: BEGIN, MAX, the insert, COMMIT.

    Returns the rows inserted and the MAX read.
    """
    q = Sql(dialect)
    conn.exec_driver_sql("BEGIN")
    high = conn.exec_driver_sql(
        f"SELECT max({q.ts('created_at')}) FROM ({_messages(q)}) AS msg WHERE {_qualifying(q)}"
    ).scalar()
    rows = conn.exec_driver_sql(
        f"INSERT INTO task_session_subagents ({COLUMNS}) {_expected(q)} "
        f"ON CONFLICT ({UNIQUE_KEY}) DO NOTHING"
    ).rowcount
    conn.exec_driver_sql("COMMIT")
    return rows, high


# --- the checks' floors: one statement per family -------------------------------------------------


def _keys(conn: sa.Connection) -> dict[str, str | None]:
    found = dict(
        conn.exec_driver_sql(
            "SELECT key, value FROM kandev_meta WHERE key IN "
            f"({', '.join(repr(k) for k in ACTIVATION_KEYS)})"
        ).all()
    )
    return {key: found.get(key) for key in ACTIVATION_KEYS}


def _instant(name: str, raw: str | None) -> Instant | None:
    try:
        value = read_key(name, raw)
    except ValueError:
        return None
    return value if isinstance(value, Instant) else None


def _after_latest(key: Instant) -> Instant:
    """The first microsecond after the latest instant a key may stand for (legacy: +1 s)."""
    span = timedelta(seconds=1) if key.precision is Precision.SECOND else timedelta(0)
    return Instant(key.micro + span, 0) if span else Instant(key.micro + timedelta(microseconds=1))


def schema(conn: sa.Connection, q: Sql) -> dict[str, Any]:
    if q.name == "sqlite":
        sql = (
            "SELECT count(*) FROM sqlite_master "
            "WHERE tbl_name = 'task_session_subagents' OR name = 'task_session_subagents__amended'"
        )
    else:
        sql = (
            "SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relname IN "
            "('task_session_subagents', 'task_session_subagents__amended') "
            "OR c.oid IN (SELECT indexrelid FROM pg_catalog.pg_index WHERE indrelid = "
            "to_regclass('task_session_subagents'))"
        )
    return {"catalog_rows": conn.exec_driver_sql(sql).scalar_one()}


def activation(conn: sa.Connection, q: Sql, keys: dict[str, str | None]) -> dict[str, Any]:
    capture = _instant(CAPTURE_SINCE, keys[CAPTURE_SINCE])
    through = _instant(BACKFILL_THROUGH, keys[BACKFILL_THROUGH])
    params = {
        "capture_next": q.bind(_after_latest(capture)) if capture else None,
        "through_next": q.bind(_after_latest(through)) if through else None,
        "covered_until": q.bind(Instant(through.micro + timedelta(microseconds=1)))
        if through
        else None,
    }
    sql = f"""
SELECT sum(CASE WHEN source = 'backfill' THEN 1 ELSE 0 END),
  sum(CASE WHEN source = 'backfill' AND {q.at_or_after("observed_at", "capture_next")} THEN 1 ELSE 0 END),
  sum(CASE WHEN source = 'backfill' AND {q.at_or_after("observed_at", "through_next")} THEN 1 ELSE 0 END),
  (SELECT count(*) FROM ({_messages(q)}) AS msg
    WHERE {_qualifying(q)} AND {q.before("created_at", "covered_until")}
      AND NOT EXISTS (SELECT 1 FROM task_session_subagents r
        WHERE r.task_session_id = msg.task_session_id AND r.tool_call_id = ({q.text("tool_call_id")})))
FROM task_session_subagents"""  # noqa: E501
    row = conn.exec_driver_sql(sql, params).one()
    return {
        "backfill_rows": int(row[0] or 0),
        "backfill_after_capture": int(row[1] or 0),
        "backfill_after_through": int(row[2] or 0),
        "uncovered_messages": int(row[3]),
    }


def disclosure(conn: sa.Connection, q: Sql, keys: dict[str, str | None]) -> dict[str, Any]:
    sides = []
    params = {}
    for label, name in (("capture", CAPTURE_SINCE), ("execution", EXECUTION_SINCE)):
        key = _instant(name, keys[name])
        if key is None:
            sides.append("'no key'")
        else:
            params[label] = q.bind(key)
            sides.append(
                f"CASE WHEN {q.at_or_after('observed_at', label)} "
                "THEN 'at_or_after' ELSE 'before' END"
            )
    sql = (
        f"SELECT source, {sides[0]}, {sides[1]}, "
        "CASE WHEN agent_execution_id = 'unknown' THEN 'unknown' ELSE 'real' END, count(*) "
        "FROM task_session_subagents GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
    )
    return {"population": [tuple(r) for r in conn.exec_driver_sql(sql, params).all()]}


def health(conn: sa.Connection, q: Sql, keys: dict[str, str | None]) -> dict[str, Any]:
    since = _instant(CAPTURE_SINCE, keys[CAPTURE_SINCE])
    if since is None:
        return {"not_run": True}
    window = _messages(q, f" WHERE {q.at_or_after('created_at', 'since')}")
    sql = f"""
WITH m AS (
  SELECT task_session_id, task_id, ({q.text("tool_call_id")}) AS tool_call_id
  FROM ({window}) AS msg WHERE ({q.text("normalized.kind")}) = 'subagent_task'
), qualifying AS (
  SELECT DISTINCT task_session_id, tool_call_id FROM m
  WHERE coalesce(task_session_id, '') <> '' AND coalesce(task_id, '') <> ''
    AND coalesce(tool_call_id, '') <> ''
), messaged AS (
  SELECT DISTINCT task_session_id, tool_call_id FROM m
), observed AS (
  SELECT task_session_id, tool_call_id, count(*) AS n, max({q.ts("observed_at")}) AS latest
  FROM task_session_subagents WHERE {q.at_or_after("observed_at", "since")}
  GROUP BY task_session_id, tool_call_id
)
SELECT
  (SELECT count(*) FROM qualifying x WHERE NOT EXISTS (SELECT 1 FROM observed o
     WHERE o.task_session_id = x.task_session_id AND o.tool_call_id = x.tool_call_id)),
  (SELECT count(*) FROM observed o WHERE NOT EXISTS (SELECT 1 FROM messaged w
     WHERE w.task_session_id = o.task_session_id AND w.tool_call_id = o.tool_call_id)),
  (SELECT count(*) FROM messaged), (SELECT count(*) FROM qualifying),
  (SELECT count(*) FROM observed), (SELECT sum(n) FROM observed), (SELECT max(latest) FROM observed)
"""
    row = conn.exec_driver_sql(sql, {"since": q.bind(since)}).one()
    keys_, rows = int(row[4]), int(row[5] or 0)
    return {
        "shortfall": int(row[0]),
        "excess": int(row[1]),
        "subagent_messages": int(row[2]),
        "qualifying_keys": int(row[3]),
        "collisions": rows - keys_,
        "latest_observed_at": row[6],
    }


def rows(conn: sa.Connection, q: Sql) -> dict[str, Any]:
    def blank(c: str) -> str:
        return f"({c} IS NULL OR {c} = '')"

    rules = {
        "identity": " OR ".join(blank(c) for c in ("task_session_id", "task_id", "tool_call_id")),
        "source": "source IS NULL OR source NOT IN ('live', 'backfill')",
        "empty_text": " OR ".join(f"{c} = ''" for c in NULLABLE_TEXT),
        "negative_metric": " OR ".join(f"{c} < 0" for c in METRICS),
        "zero_metric": "total_tokens = 0 OR duration_ms = 0",
        "async_launched_metrics": "agent_status = 'async_launched' AND ("
        + " OR ".join(f"{c} IS NOT NULL" for c in METRICS)
        + ")",
        "settled_terminal": f"(settled_at IS NULL AND tool_status IN {TERMINAL}) OR "
        f"(settled_at IS NOT NULL AND (tool_status IS NULL OR tool_status NOT IN {TERMINAL}))",
        "tool_status_vocabulary": f"tool_status IS NOT NULL AND tool_status NOT IN {VOCABULARY}",
        "timestamp_order": f"{q.ts('observed_at')} > {q.ts('updated_at')} OR "
        f"(settled_at IS NOT NULL AND {q.ts('observed_at')} > {q.ts('settled_at')})",
        "orphans": "parent_session IS NULL",
        "is_async": "is_async IS NULL OR is_async NOT IN (0, 1)",
        "completed_without_metrics": "agent_status = 'completed' AND "
        + " AND ".join(f"{c} IS NULL" for c in METRICS),
        "execution_missing": blank("agent_execution_id"),
        "execution_form": "agent_execution_id <> '' AND agent_execution_id <> 'unknown' "
        f"AND NOT ({q.uuid('agent_execution_id')})",
        "backfill_not_unknown": "source = 'backfill' AND "
        "(agent_execution_id IS NULL OR agent_execution_id <> 'unknown')",
        "completed_rows": "agent_status = 'completed'",
    }
    sums = ",\n  ".join(
        f"coalesce(sum(CASE WHEN {pred} THEN 1 ELSE 0 END), 0) AS {name}"
        for name, pred in rules.items()
    )
    duplicated = (
        f"(SELECT count(*) AS key_rows FROM task_session_subagents GROUP BY {UNIQUE_KEY} "
        "HAVING count(*) > 1) AS d"
    )
    sql = f"""
SELECT count(*) AS row_count,
  (SELECT coalesce(sum(key_rows), 0) FROM {duplicated}) AS duplicate_rows,
  (SELECT count(*) FROM {duplicated}) AS duplicate_keys,
  {sums}
FROM (SELECT r.*, s.id AS parent_session
      FROM task_session_subagents r LEFT JOIN task_sessions s ON s.id = r.task_session_id) AS c
"""
    return dict(conn.exec_driver_sql(sql).mappings().one())


def backfill_reconciliation(
    conn: sa.Connection, q: Sql, keys: dict[str, str | None], window_minutes: float
) -> dict[str, Any]:
    capture = _instant(CAPTURE_SINCE, keys[CAPTURE_SINCE])
    params: dict[str, Any] = {}
    if capture is not None:
        params["merged_since"] = q.bind(capture)
        params["changed_since"] = q.bind(Instant(capture.micro - timedelta(minutes=window_minutes)))
        drifted = (
            f"({q.at_or_after('b.updated_at', 'merged_since')} "
            f"OR {q.at_or_after('e.updated_at', 'changed_since')})"
        )
    else:
        drifted = "(1 = 0)"
    d = q.differs
    matched = "(b.source = 'backfill' AND e.id IS NOT NULL)"
    strict = f"({matched} AND NOT {drifted})"
    at = q.ts
    families = {
        "identity": f"{matched} AND ({d('b.task_id', 'e.task_id')} "
        f"OR {d('b.agent_execution_id', chr(39) + 'unknown' + chr(39))})",
        "turn_id": f"{matched} AND ((e.turn_id IS NOT NULL AND {d('b.turn_id', 'e.turn_id')}) "
        f"OR (e.turn_id IS NULL AND b.turn_id IS NOT NULL AND NOT {drifted}))",
        "statuses": f"{strict} AND ({d('b.tool_status', 'e.tool_status')} "
        f"OR {d('b.agent_status', 'e.agent_status')})",
        "metrics": f"{strict} AND (" + " OR ".join(d(f"b.{m}", f"e.{m}") for m in METRICS) + ")",
        "text": f"{strict} AND ("
        + " OR ".join(d(f"b.{c}", f"e.{c}") for c in ("parent_tool_call_id", *TEXT_FIELDS))
        + f" OR {d('b.is_async', 'e.is_async')})",
        "observed_at": f"{matched} AND {q.differs_at('b.observed_at', 'e.observed_at')}",
        "settled_at": f"{strict} AND ({q.differs_at('b.settled_at', 'e.settled_at')} "
        f"OR {q.differs_at('b.updated_at', 'e.updated_at')})",
        "winner": f"{matched} AND (b.id <> e.id "
        f"OR {q.differs_at('b.observed_at', 'e.observed_at')})",
        "orphan": "b.source = 'backfill' AND e.id IS NULL",
        "relabelled": "b.source = 'live' AND b.agent_execution_id = 'unknown' AND b.id = e.id "
        f"AND {at('b.observed_at')} = {at('e.observed_at')}",
        "drifted_rows": f"{matched} AND {drifted}",
        "matched_rows": matched,
        "backfill_rows": "b.source = 'backfill'",
    }
    sums = ",\n  ".join(
        f"coalesce(sum(CASE WHEN {cond} THEN 1 ELSE 0 END), 0) AS {name}"
        for name, cond in families.items()
    )
    materialized = " MATERIALIZED" if q.name == "postgresql" else ""
    # The backfill maps the messages created before capture_since; later ones are live.
    mapped = f" WHERE {q.before('observed_at', 'merged_since')}" if capture is not None else ""
    sql = f"""
WITH expected AS{materialized} ({_expected(q)})
SELECT (SELECT count(*) FROM expected{mapped}) AS expected_rows,
  {sums}
FROM task_session_subagents b LEFT JOIN expected e
  ON e.task_session_id = b.task_session_id AND e.tool_call_id = b.tool_call_id
WHERE b.source = 'backfill' OR (b.source = 'live' AND b.agent_execution_id = 'unknown')
"""
    return dict(conn.exec_driver_sql(sql, params).mappings().one())


def _recognised(col: str) -> str:
    """SQLite: ``col`` is one of the UTC text forms the exact construct reads (CONTRACT §1)."""
    d = "[0-9]"
    return (
        f"(typeof({col}) = 'text' "
        f"AND {col} GLOB '{d * 4}-[01]{d}-[0-3]{d}[ T][0-2]{d}:[0-5]{d}:[0-5]{d}*' "
        f"AND substr({col}, 1, 4) <> '0000' AND substr({col}, 6, 2) BETWEEN '01' AND '12' "
        f"AND substr({col}, 9, 2) <> '00' AND substr({col}, 12, 2) <= '23' "
        f"AND (substr({col}, 9, 2) <= '28' "
        f"OR date(substr({col}, 1, 10), '+0 days') = substr({col}, 1, 10)) "
        f"AND (substr({col}, 20) IN ('', 'Z', '+00:00', '-00:00') "
        f"OR (substr({col}, 20, 1) = '.' AND CASE ltrim(substr({col}, 21), '0123456789') "
        f"WHEN '' THEN length({col}) BETWEEN 21 AND 29 "
        f"WHEN 'Z' THEN length({col}) BETWEEN 22 AND 30 "
        f"WHEN '+00:00' THEN length({col}) BETWEEN 27 AND 35 "
        f"WHEN '-00:00' THEN length({col}) BETWEEN 27 AND 35 ELSE 0 END)))"
    )


def stored_text(conn: sa.Connection, q: Sql) -> dict[str, Any]:
    """Metadata that is not JSON; on SQLite also timestamps in no recognised text form."""
    if q.name == "postgresql":
        # Every document parsed once: an error would name the first unreadable one.
        parsed = conn.exec_driver_sql(
            f"SELECT count({q.doc()}) FROM task_session_messages"
        ).scalar_one()
        return {"parsed": parsed, "unreadable": 0, "timestamps": 0}

    def misread(col: str) -> str:
        return f"coalesce(sum(CASE WHEN {col} IS NOT NULL AND NOT {_recognised(col)} THEN 1 ELSE 0 END), 0)"  # noqa: E501

    sql = f"""
SELECT coalesce(sum(CASE WHEN NOT json_valid(metadata) AND metadata IS NOT NULL
           AND trim(metadata) <> '' THEN 1 ELSE 0 END), 0),
  {misread("created_at")} + {misread("updated_at")},
  (SELECT {misread("observed_at")} + {misread("settled_at")} + {misread("updated_at")}
   FROM task_session_subagents)
FROM task_session_messages
"""
    row = conn.exec_driver_sql(sql).one()
    return {"unreadable": int(row[0]), "timestamps": int(row[1]) + int(row[2])}


def single_pass(conn: sa.Connection, dialect: str) -> dict[str, int]:
    """The physical floor of any checker: read each table once.

    Nothing indexes a message's kind, so every checker must decode every message's metadata
    at least once; and it must read every subagent row. These two statements do only that:
    one scan of the messages, decoding each document once and counting the distinct
    ``(task_session_id, tool_call_id)`` keys of subagent messages, and one scan of the
    subagent rows counting theirs. No rule is evaluated: this denominator owes nothing to the
    code it measures.
    """
    q = Sql(dialect)
    key = "task_session_id || '|' || tool_call_id"
    messages = conn.exec_driver_sql(
        f"SELECT count(*), count(DISTINCT CASE WHEN kind = 'subagent_task' THEN {key} END) "
        f"FROM (SELECT task_session_id, {q.text('normalized.kind')} AS kind, "
        f"{q.text('tool_call_id')} AS tool_call_id FROM ({_messages(q)}) AS m) AS decoded"
    ).one()
    rows = conn.exec_driver_sql(
        f"SELECT count(*), count(DISTINCT {key}) FROM task_session_subagents"
    ).one()
    return {
        "messages": int(messages[0]),
        "subagent_message_keys": int(messages[1]),
        "rows": int(rows[0]),
        "row_keys": int(rows[1]),
    }


#: The member names a subagent message is read by (CONTRACT §4), with how often a well-formed
#: document writes each one: ``status`` at two levels, ``subagent_task`` as a name and a kind.
_READ_NAMES = {
    "tool_call_id": 1,
    "parent_tool_call_id": 1,
    "status": 2,
    "normalized": 1,
    "subagent_task": 2,
    **{name: 1 for name in (*TEXT_FIELDS, "is_async", *METRICS)},
}


def message_rules_pass(conn: sa.Connection, dialect: str) -> dict[str, int]:
    """The single pass plus part of what the contract asks of every message, and nothing else.

    One flat scan of the messages, each test in the cheapest form found: the document's
    validity (AC-23b); a text test for an escaped or repeated member name along the kind's
    path and, where ``"subagent_task"`` is written, along every field the mapping reads (AC-19;
    a document it lets through would still need a walk, none does here); on SQLite the fixed
    part of both timestamps' text form (AC-24e; the exact test checks more); and the instants
    before any clock or past it by a day (CONTRACT §1, on values of that form). No join, no
    sample, no other table, no subagent row. A checker evaluating the contract's rules does at
    least this much per message: on SQLite, where one statement runs on one core, a lower
    bound of the rules' cost beside the physical one (PostgreSQL's parallel plans beat it).
    """
    q = Sql(dialect)
    sqlite = dialect == "sqlite"
    percent = "%" if sqlite else "%%"  # psycopg's format style doubles a literal %

    def written(name: str, times: int) -> str:
        quoted = f'"{name}"'
        if sqlite:
            return f"metadata GLOB '*{(quoted + '*') * times}'"
        if times == 1:
            return f"strpos(metadata, '{quoted}') > 0"
        removed = f"octet_length(metadata) - octet_length(replace(metadata, '{quoted}', ''))"
        return f"{removed} >= {times * len(quoted)}"

    escaped = (
        "metadata GLOB '*\\u00[5-7][0-9A-Fa-f]*'"
        if sqlite
        else f"metadata LIKE '{percent}\\\\u{percent}'"
    )
    kind_path = f"({escaped} OR {written('normalized', 2)} OR {written('kind', 2)})"
    fields = " OR ".join(written(name, usual + 1) for name, usual in _READ_NAMES.items())
    field_names = f"({written('subagent_task', 1)} AND ({escaped} OR {fields}))"

    d = "[0-9]"
    form = f"'{d * 4}-[01]{d}-[0-3]{d}[ T][0-2]{d}:[0-5]{d}:[0-5]{d}*'"
    columns = ("created_at", "updated_at")
    if sqlite:
        unreadable = "NOT json_valid(metadata) AND metadata IS NOT NULL AND trim(metadata) <> ''"
        misread = " + ".join(
            f"sum(CASE WHEN {c} IS NOT NULL AND NOT ({c} GLOB {form}) THEN 1 ELSE 0 END)"
            for c in columns
        )
        # Dates of this form order as text: before the earliest day is before its midnight.
        beyond = [
            f"{c} GLOB {form} AND ({c} < substr(:earliest, 1, 10) OR {q.at_or_after(c, 'horizon')})"
            for c in columns
        ]
    else:  # the cast to jsonb already refuses an unreadable document; typed columns
        unreadable, misread = "false", "0"
        beyond = [
            f"{c} IN ('infinity', '-infinity') OR {q.before(c, 'earliest')} "
            f"OR {q.at_or_after(c, 'horizon')}"
            for c in columns
        ]
    out_of_range = " + ".join(f"sum(CASE WHEN {b} THEN 1 ELSE 0 END)" for b in beyond)
    key = "task_session_id || '|' || tool_call_id"
    sql = f"""
SELECT count(*), count(DISTINCT CASE WHEN kind = 'subagent_task' THEN {key} END),
  sum(CASE WHEN {unreadable} THEN 1 ELSE 0 END),
  sum(CASE WHEN {kind_path} THEN 1 ELSE 0 END), sum(CASE WHEN {field_names} THEN 1 ELSE 0 END),
  {misread}, {out_of_range}
FROM (SELECT task_session_id, metadata, created_at, updated_at,
        {q.text("normalized.kind")} AS kind, {q.text("tool_call_id")} AS tool_call_id
      FROM (SELECT task_session_id, metadata, created_at, updated_at, {q.doc()} AS doc
            FROM task_session_messages{q.offset0()}) AS m) AS decoded
"""
    earliest = Instant.from_datetime(KEY_RANGE[0])
    horizon = now_instant().shifted(FUTURE_TOLERANCE_NS)
    params = {"earliest": q.bind(earliest), "horizon": q.bind(horizon)}
    row = conn.exec_driver_sql(sql, params).one()
    names = ("messages", "subagent_message_keys", "unreadable", "kind_path_walks")
    names += ("field_walks", "timestamps", "out_of_range")
    return {name: int(value or 0) for name, value in zip(names, row, strict=True)}


def rules_agree(rules: dict[str, int], stored_text: dict[str, Any]) -> list[str]:
    """Where :func:`message_rules_pass` contradicts kandev-dq's stored-text facts (empty: it
    does not): the same unreadable documents, and no more misread message timestamps than
    kandev-dq's exact test finds (the pass tests only part of the form)."""
    unreadable = stored_text["metadata"]["count"]
    misread = sum(
        n
        for column, n in stored_text["timestamps"].get("by_column", {}).items()
        if column.startswith("task_session_messages.")
    )
    found = []
    if rules["unreadable"] != unreadable:
        found.append(f"rules pass unreadable: {rules['unreadable']} != kandev-dq {unreadable}")
    if rules["timestamps"] > misread:
        found.append(f"rules pass timestamps: {rules['timestamps']} > kandev-dq {misread}")
    return found


def facts(conn: sa.Connection, dialect: str, families: list[str]) -> dict[str, Any]:
    """The floor of ``families`` (kandev-dq's names) in one read transaction on ``conn``."""
    q = Sql(dialect)
    keys = _keys(conn)
    out: dict[str, Any] = {"keys": keys}
    for family in families:
        if family == "kandev.activation_facts":
            out[family] = activation(conn, q, keys)
        elif family == "kandev.disclosure_facts":
            out[family] = disclosure(conn, q, keys)
        elif family == "kandev.sentinel_backfill_facts":
            out[family] = {"sentinel": keys[BACKFILL_THROUGH] == ""}  # the keys say it all
        elif family == "kandev.health_facts":
            out[family] = health(conn, q, keys)
        elif family == "kandev.row_facts":
            out[family] = rows(conn, q)
        elif family == "kandev.schema_facts":
            out[family] = schema(conn, q)
        elif family == "kandev.stored_text_facts":
            out[family] = stored_text(conn, q)
        elif family == "kandev.backfill_facts":
            out[family] = backfill_reconciliation(conn, q, keys, 10.0)
        else:
            raise KeyError(f"no floor for the family {family!r}")
    return out


def agree(floor: dict[str, Any], measured: dict[str, Any]) -> list[str]:
    """Numbers the floor and kandev-dq both computed, where they differ (empty: they agree)."""
    pairs: list[tuple[str, Any, Any]] = []
    act, mact = floor.get("kandev.activation_facts"), measured.get("kandev.activation_facts")
    if act and mact:
        pairs += [
            ("activation.backfill_rows", act["backfill_rows"], mact.get("backfill_rows")),
            (
                "activation.uncovered",
                act["uncovered_messages"],
                (mact.get("uncovered_messages") or {}).get("count", 0),
            ),
            (
                "activation.after_capture",
                act["backfill_after_capture"],
                (mact.get("backfill_after_capture") or {}).get("count", 0),
            ),
        ]
    hl, mhl = floor.get("kandev.health_facts"), measured.get("kandev.health_facts")
    if hl and mhl and not hl.get("not_run"):
        pairs += [
            ("health.shortfall", hl["shortfall"], mhl["shortfall"]["count"]),
            ("health.excess", hl["excess"], mhl["excess"]["count"]),
            ("health.subagent_messages", hl["subagent_messages"], mhl["subagent_messages"]),
            ("health.qualifying_keys", hl["qualifying_keys"], mhl["qualifying_keys"]),
            ("health.collisions", hl["collisions"], mhl["collisions"]["count"]),
        ]
    rw, mrw = floor.get("kandev.row_facts"), measured.get("kandev.row_facts")
    if rw and mrw:
        pairs.append(("rows.rows", rw["row_count"], mrw["rows"]))
        for name, part in mrw["rules"].items():
            pairs.append((f"rows.{name}", rw[name], part["count"]))
    bf, mbf = floor.get("kandev.backfill_facts"), measured.get("kandev.backfill_facts")
    if bf and mbf:
        pairs += [
            ("backfill.expected_rows", bf["expected_rows"], mbf["expected_rows"]),
            ("backfill.backfill_rows", bf["backfill_rows"], mbf["backfill_rows"]),
            (
                "backfill.write_once_fields_only",
                bf["drifted_rows"],
                mbf["write_once_fields_only"],
            ),
        ]
        for name, part in mbf["families"].items():
            if name != "winner":  # the floor counts candidates; kandev-dq confirms losers
                pairs.append((f"backfill.{name}", bf[name], part["count"]))
    st, mst = floor.get("kandev.stored_text_facts"), measured.get("kandev.stored_text_facts")
    if st and mst:
        pairs.append(("stored_text.metadata", st["unreadable"], mst["metadata"]["count"]))
        pairs.append(("stored_text.timestamps", st["timestamps"], mst["timestamps"]["count"]))
    return [f"{name}: floor {a} != kandev-dq {b}" for name, a, b in pairs if a != b]
