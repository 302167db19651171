"""The versions a report names: kandev-dq's own, GX's, and the store server's."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def kandev_dq_version() -> str:
    try:
        return version("kandev-dq")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def server_version(connection) -> str:
    """The store server's version: PostgreSQL's ``server_version``, or the SQLite library's."""
    if connection.dialect.name == "sqlite":
        return "SQLite " + connection.exec_driver_sql("SELECT sqlite_version()").scalar()
    return "PostgreSQL " + connection.exec_driver_sql("SHOW server_version").scalar()
