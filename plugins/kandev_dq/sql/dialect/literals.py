"""Spellings the dialect constructs share: quoted literals and JSON paths as SQL text."""

from __future__ import annotations


def quoted(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def sqlite_path(path: tuple[str, ...]) -> str:
    """SQLite's JSON path of ``path`` (``'$.a.b'``)."""
    return "'$." + ".".join(path) + "'"


def pg_path(path: tuple[str, ...]) -> str:
    """PostgreSQL's text-array path of ``path`` (``'{a,b}'``)."""
    return "'{" + ",".join(path) + "}'"


def percent(compiler) -> str:
    """How a statement spells LIKE's ``%``: doubled for a ``format`` driver (psycopg)."""
    return "%%" if compiler.dialect.paramstyle in ("format", "pyformat") else "%"
