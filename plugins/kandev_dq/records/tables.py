"""The records database's tables, created and versioned by kandev-dq itself (idempotently)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

#: 2: stores named by their identity, not by how their URL is spelled (:data:`store_names`).
#: 3: a partial run's suites and rules (``runs.selection``).
SCHEMA_VERSION = 3

metadata = sa.MetaData()
schema_versions = sa.Table(
    "kandev_dq_schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.Text, nullable=False),
)
key_ledger = sa.Table(
    "kandev_dq_key_ledger",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("store_identity", sa.Text, nullable=False),
    sa.Column("key_name", sa.Text, nullable=False),
    sa.Column("first_value", sa.Text, nullable=False),
    sa.Column("recorded_at", sa.Text, nullable=False),
    sa.Column("run_name", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=False),
    sa.UniqueConstraint("store_identity", "key_name", name="kandev_dq_key_ledger_first"),
)
baselines = sa.Table(
    "kandev_dq_baselines",
    metadata,
    sa.Column("store_identity", sa.Text, primary_key=True),
    sa.Column("taken_at", sa.Text, nullable=False),
    sa.Column("run_name", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=False),
)
ledger_accepts = sa.Table(
    "kandev_dq_ledger_accepts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("store_identity", sa.Text, nullable=False, index=True),
    sa.Column("key_name", sa.Text, nullable=False),
    sa.Column("accepted_value", sa.Text, nullable=True),  # NULL: the key's absence accepted
    sa.Column("replaced_value", sa.Text, nullable=True),
    sa.Column("accepted_at", sa.Text, nullable=False),
    sa.Column("accepted_by", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
)
runs = sa.Table(
    "kandev_dq_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_name", sa.Text, nullable=False),
    sa.Column("run_key", sa.Text, nullable=False),  # the run time as GX writes it in keys
    sa.Column("run_time", sa.Text, nullable=False, index=True),  # RFC 3339, UTC
    sa.Column("checkpoint", sa.Text, nullable=False),
    sa.Column("store_identity", sa.Text, nullable=False, index=True),
    sa.Column("store", sa.Text, nullable=False),
    sa.Column("dialect", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=True),
    sa.Column("amended", sa.Boolean, nullable=True),
    sa.Column("keys", sa.Text, nullable=False),  # JSON
    sa.Column("finished", sa.Boolean, nullable=False, default=False),
    sa.Column("success", sa.Boolean, nullable=True),
    sa.Column("counts", sa.Text, nullable=True),  # JSON: failed rules by severity, passed
    sa.Column("failed_rules", sa.Text, nullable=True),  # JSON
    sa.Column("duration_s", sa.Float, nullable=True),
    # JSON: the suites and rules a partial run ran (check --suite/--rule); NULL: the whole
    # checkpoint. Added in version 3: a records database made before gets it on open.
    sa.Column("selection", sa.Text, nullable=True),
    sa.UniqueConstraint("run_name", "run_key", name="kandev_dq_runs_name_key"),
    # Each read a run makes is bounded, however long the history (the register's by run key,
    # a store's newest runs): a run every 5 minutes is 2,000 records a week.
    sa.Index("kandev_dq_runs_run_key", "run_key"),
    sa.Index("kandev_dq_runs_store_time", "store_identity", "run_time", "id"),
)
results = sa.Table(
    "kandev_dq_validation_results",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("result_key", sa.Text, nullable=False, unique=True),  # GX's key tuple, as JSON
    sa.Column("suite", sa.Text, nullable=True),
    sa.Column("run_name", sa.Text, nullable=True),
    sa.Column("run_key", sa.Text, nullable=True, index=True),
    sa.Column("stored_at", sa.Text, nullable=False, index=True),
    sa.Column("value", sa.Text, nullable=False),
    # A run's results, and a suite's newest result, read through an index.
    sa.Index("kandev_dq_results_run", "run_name", "run_key"),
    sa.Index("kandev_dq_results_suite_run_key", "suite", "run_key"),
    # A live suite's last watermark: its newest stored results, newest first, without
    # sorting every result of the suite (kandev_dq.records.watermark).
    sa.Index("kandev_dq_results_suite_stored", "suite", "stored_at", "id"),
)
imports = sa.Table(
    "kandev_dq_imports",
    metadata,
    sa.Column("source", sa.Text, primary_key=True),  # what was imported, by content digest
    sa.Column("imported_at", sa.Text, nullable=False),
)


#: The names version 1 gave stores (their URL as spelled, without credentials), each with the
#: name its records were moved to once the store was seen named by its identity: a record
#: kept under an old name is adopted once, and its live results still match it.
store_names = sa.Table(
    "kandev_dq_store_names",
    metadata,
    sa.Column("spelled", sa.Text, primary_key=True),
    sa.Column("records_key", sa.Text, nullable=False, index=True),
    sa.Column("adopted_at", sa.Text, nullable=False),
)


def now_text(moment: dt.datetime | None = None) -> str:
    """RFC 3339 in UTC with microseconds and ``Z``: sorts as text on both dialects."""
    moment = moment or dt.datetime.now(dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
