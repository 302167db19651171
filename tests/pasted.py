"""A finding's query run as a reviewer runs it, on either dialect."""

from __future__ import annotations

import sqlite3

import psycopg
from sqlalchemy.engine import make_url


def read_only_rows(target: str, dialect: str, query: str) -> list[dict]:
    """The query's rows, run as a reviewer runs a finding's query: pasted whole as text, no
    parameter, into a connection that cannot write (SQLite ``mode=ro``, PostgreSQL
    ``SET TRANSACTION READ ONLY``). ``target`` is the SQLite file or the PostgreSQL URL."""
    if dialect == "sqlite":
        conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
        try:
            cursor = conn.execute(query)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            conn.close()
    url = make_url(target)
    conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo) as conn:
        conn.execute("SET TRANSACTION READ ONLY")
        cursor = conn.execute(query)
        names = [d.name for d in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        conn.rollback()
        return rows
