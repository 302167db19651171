"""The SQLite library every store connection uses: a current SQLite, not Python's bundled one.

SQLite 3.45 and later keep one parse of a JSON document per statement, shared by every JSON
function reading it; older libraries (Python's ``sqlite3`` is often 3.40) copy the document
once per call site. The rules read a message's metadata at about a hundred call sites, so one
50 MB document cost gigabytes there and costs one copy here (the memory bound of
``docs/reliability.md``). ``sqlean.py`` ships SQLite 3.49+ for every major platform.

One library per process: two copies of SQLite in one process do not see each other's POSIX
locks, so nothing in kandev-dq opens a store through any other module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlean

if TYPE_CHECKING:  # a refused store is read with the library alone, before the SQL toolkit
    import sqlalchemy as sa

# A store is hostile (docs/reliability.md §3a): its views and triggers get no extension
# function (file, network or eval); sqlean.py bundles some, off unless enabled.
sqlean.extensions.disable_all()

#: The DB-API module: SQLAlchemy's ``module=`` and every direct connection.
dbapi = sqlean.dbapi2
Error = dbapi.Error
OperationalError = dbapi.OperationalError
connect = dbapi.connect


def create_engine(url: str | sa.URL, **kwargs: Any) -> sa.Engine:
    """``sqlalchemy.create_engine`` for a SQLite URL, through this library."""
    import sqlalchemy as sa

    return sa.create_engine(url, module=dbapi, **kwargs)


def tolerate_bad_utf8(dbapi_connection) -> None:
    """SQLite: read text that is not valid UTF-8 with U+FFFD in place of the bad bytes.

    SQLite stores whatever bytes it is given as TEXT (``CAST(x'ff' AS TEXT)``); Python's
    sqlite3 would raise on fetching them and abort the whole family of facts. The rules
    compare values inside SQL (on the raw bytes), so only what is shown is affected.
    """
    dbapi_connection.text_factory = _decode_text


def _decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
