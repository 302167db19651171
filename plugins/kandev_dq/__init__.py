"""kandev-dq: Great Expectations suites, checkpoints and a migration runner for Kandev's
subagent-context store contract.

The Python API (:mod:`kandev_dq.api`): :func:`check` and :func:`migrate`, returning the reports
the CLI prints. Importing the package loads neither GX nor the SQL toolkit.
"""

from kandev_dq.api import check, migrate

__all__ = ["check", "migrate"]
