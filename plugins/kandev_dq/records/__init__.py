"""The run records: the key ledger, the run register and the validation results, in a database.

Scheduled checks often run on machines that start empty (a CI job, a CronJob, a container). The
memory write-once needs (AC-24) and the run history therefore live in a records database that
outlives the machine: by default a SQLite file in the project's ``uncommitted/``, for teams any
PostgreSQL database.

* :mod:`.location`: which database (``--records``, ``$KANDEV_DQ_RECORDS_URL``, the project's
  yml, ``uncommitted/records.db``), read once into a store reference, and never the store under
  validation (:func:`refuse_the_store`). One that cannot be opened is a one-line exit 2 naming
  it without credentials: a run never passes with write-once silently skipped.
* :mod:`.tables`: its tables, created by kandev-dq itself, idempotently, with a schema version.
* :mod:`.identity`: a store's name in the records (its identity, or the user's name for it).
* :mod:`.ledger`: the append-only key ledger, baselines and accepts (AC-24); :mod:`.accept`:
  ``ledger show`` and ``ledger accept``, the one way out of a permanent AC-24 failure.
* :mod:`.register`: the run register (what each run saw) and the runs' names.
* :mod:`.names`: the names stores had before they were named by their identity, and the
  adoption of their records.
* :mod:`.results`: validation results, rows GX reads and writes through
  :class:`~kandev_dq.gx.results_store.RecordsStoreBackend`, and one reading of a result.
* :mod:`.changes`: what changed since the last run of a checkpoint on a store.
* :mod:`.watermark`: the window a live suite reads, from its last stored run.
* :mod:`.database`: :class:`Records`, one open database serving the ledger, the register and the
  results, and retention (``records prune`` drops old results and run records, never ledger
  rows, baselines or accepts).

May import ``project`` (its settings and the vetting's reading of the yml) and the layers below
it; never GX (tested without it).

This module is the facade: callers import from it.
"""

from __future__ import annotations

from kandev_dq.records.database import Pruned, Records
from kandev_dq.records.ledger import (
    FROM_JSON,
    FROM_RUN,
    Accept,
    Baseline,
    LedgerEntry,
    LedgerView,
)
from kandev_dq.records.location import (
    DEFAULT_RECORDS,
    JSON_LEDGER,
    RECORDS_VARIABLE,
    configured_url,
    records_ref,
    records_url,
    refuse_the_store,
    same_database,
)
from kandev_dq.records.results import SUITE_PAGE
from kandev_dq.records.tables import (
    SCHEMA_VERSION,
    baselines,
    imports,
    key_ledger,
    ledger_accepts,
    metadata,
    now_text,
    results,
    runs,
    schema_versions,
    store_names,
)
from kandev_dq.store.reference import shown_records

__all__ = [
    "DEFAULT_RECORDS",
    "FROM_JSON",
    "FROM_RUN",
    "JSON_LEDGER",
    "RECORDS_VARIABLE",
    "SCHEMA_VERSION",
    "SUITE_PAGE",
    "Accept",
    "Baseline",
    "LedgerEntry",
    "LedgerView",
    "Pruned",
    "Records",
    "baselines",
    "configured_url",
    "imports",
    "key_ledger",
    "ledger_accepts",
    "metadata",
    "now_text",
    "records_ref",
    "records_url",
    "refuse_the_store",
    "results",
    "runs",
    "same_database",
    "schema_versions",
    "shown_records",
    "store_names",
]
