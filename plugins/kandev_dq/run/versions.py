"""kandev-dq's own version, as a report and ``--version`` name it (read without the SQL
toolkit: ``--version`` answers before anything heavy loads). The store server's version is
:func:`kandev_dq.sql.dialect.server_version`."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def kandev_dq_version() -> str:
    try:
        return version("kandev-dq")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"
