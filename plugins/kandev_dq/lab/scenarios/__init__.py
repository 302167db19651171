"""Named stores that prove the suite's verdicts: a fault corpus and its detection matrix.

Every scenario builds a store on an empty database from the same **healthy baseline** — a small
Kandev store that predates the feature (sessions with subagent messages of every shape, AC-21b
duplicates, legacy ``''``/``'null'``/NULL metadata, messages AC-2 skips), migrated by the real
runner (:func:`kandev_dq.migration.runner.run`), then written to by a healthy live writer — plus
**one** mutation: the defect a faulty writer, migration or consumer leaves behind (a *fault*),
or a state that looks wrong but is correct (a *healthy* scenario).

A scenario declares what it proves: the AC ids it violates (none for a healthy one) and the
severity it must be caught at. A healthy scenario may *disclose* warning or info findings, and
only those it declares. Some faults need two check runs (a key rewritten or deleted between
them: the key ledger catches it), so a scenario may carry a ``between_runs`` mutation; and a
scenario may need a check-time condition, expressed as a transform of the store URL (a
PostgreSQL session in a non-UTC time zone).

``kandev-dq scenarios list`` and ``kandev-dq scenarios build NAME --store URL`` reproduce any of
them; :func:`detection_matrix` runs every scenario on both dialects through the ``pre_release``
checkpoint and renders ``docs/detection-matrix.md``::

    kandev-dq scenarios matrix --postgres "$KANDEV_TEST_POSTGRES_URL" \\
        --out docs/detection-matrix.md

The package, by job: :mod:`.rows` (ids and row shapes), :mod:`.baseline` (the healthy
baseline and the pre-amendment build), :mod:`.mutations` (what a scenario changes),
:mod:`.registry`, the scenarios by family (:mod:`.healthy`, :mod:`.key_faults`,
:mod:`.schema_faults`, :mod:`.row_faults`, :mod:`.writer_faults`), :mod:`.running` (build and
judge one) and :mod:`.matrix`. Importing the package registers every scenario, in the order
the matrix lists them.
"""

from __future__ import annotations

# The families register their scenarios on import; this order is the matrix's row order.
# isort: off
from kandev_dq.lab.scenarios import healthy  # noqa: F401
from kandev_dq.lab.scenarios import key_faults  # noqa: F401
from kandev_dq.lab.scenarios import schema_faults  # noqa: F401
from kandev_dq.lab.scenarios import row_faults  # noqa: F401
from kandev_dq.lab.scenarios import writer_faults  # noqa: F401
from kandev_dq.lab.scenarios import json_faults  # noqa: F401

# isort: on
from kandev_dq.contract.severity import SEVERITIES
from kandev_dq.lab.scenarios.baseline import CAPTURE_SINCE, read_keys
from kandev_dq.lab.scenarios.matrix import (
    MATRIX_COMMAND,
    TIMING_HEADING,
    detection_matrix,
    matrix_header,
    matrix_row,
    matrix_rows,
)
from kandev_dq.lab.scenarios.registry import (
    NON_UTC_ZONE,
    SCENARIOS,
    Scenario,
    get,
    non_utc_session,
)
from kandev_dq.lab.scenarios.running import (
    Verdict,
    apply_between_runs,
    evaluate,
    materialise,
    problems,
    scratch_postgres,
    scratch_sqlite,
)

__all__ = [
    "CAPTURE_SINCE",
    "MATRIX_COMMAND",
    "NON_UTC_ZONE",
    "SCENARIOS",
    "SEVERITIES",
    "TIMING_HEADING",
    "Scenario",
    "Verdict",
    "apply_between_runs",
    "detection_matrix",
    "evaluate",
    "get",
    "materialise",
    "matrix_header",
    "matrix_row",
    "matrix_rows",
    "non_utc_session",
    "problems",
    "read_keys",
    "scratch_postgres",
    "scratch_sqlite",
]
