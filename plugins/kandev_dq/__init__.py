"""kandev-dq: Great Expectations suites, checkpoints and a migration runner for Kandev's
subagent-context store contract.

The Python API (:mod:`kandev_dq.api`): :func:`check` and :func:`migrate`, returning the reports
the CLI prints, and :func:`metrics`, a check's Prometheus families. Importing the package loads
neither GX nor the SQL toolkit.
"""

from kandev_dq.api import check, metrics, migrate

__all__ = ["check", "metrics", "migrate"]
