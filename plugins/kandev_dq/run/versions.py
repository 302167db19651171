"""The versions a report names: kandev-dq's own, GX's, and the store server's."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from kandev_dq.sql.dialect import server_version

__all__ = ["kandev_dq_version", "server_version"]


def kandev_dq_version() -> str:
    try:
        return version("kandev-dq")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"
