"""What a user named as the store, read without the SQL toolkit.

Importing SQLAlchemy takes a third of a second; a typo in ``--store`` (a missing file, a folder)
and the one-line error that reports any failure need none of it, so they are answered here and
:mod:`kandev_dq.store.access` builds on them once a store is really opened.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from kandev_dq.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

DEFAULT_STORE = Path("~/.kandev/data/kandev.db")
#: The environment variable a user may name the store with (never set by kandev-dq).
STORE_URL_VARIABLE = "KANDEV_STORE_URL"
#: ``scheme://`` up to the last ``@`` on its line, in text that is not a parsable URL (the
#: last resort of redact): a password may hold an unencoded ``@``, ``:``, ``/`` or space.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\n]*)@")
#: A user name alone, no password: safe to show.
_USER_ONLY = re.compile(r"[^:/@\s]*")


def chosen_store(target: str | None) -> str:
    """The store a command works on: ``target``, else ``$KANDEV_STORE_URL``, else Kandev's
    default SQLite file when it exists."""
    if target:
        return target
    if os.environ.get(STORE_URL_VARIABLE):
        return os.environ[STORE_URL_VARIABLE]
    default = DEFAULT_STORE.expanduser()
    if default.is_file():
        return str(default)
    raise StoreError(
        f"no store given, and none at the default {DEFAULT_STORE}: "
        f"pass --store or set {STORE_URL_VARIABLE}"
    )


def sqlite_path(target: str) -> Path | None:
    """The absolute SQLite file a plain path names; None for a URL."""
    if "://" in target:
        return None
    return Path(target).expanduser().resolve()


def refuse_unusable_sqlite_file(file: Path, *, must_exist: bool = True) -> None:
    """Raise the one-line reason a SQLite path cannot be a store: a folder, or (when the
    store must exist already) no file there."""
    if file.is_dir():
        raise StoreError(f"{file} is a folder, not a SQLite file: pass the store's .db file")
    if must_exist and not file.is_file():
        raise StoreError(f"no SQLite store at {file}: the file does not exist")


def redact(text: str) -> str:
    """A URL (or any text holding one) without its password.

    Text that does not parse as one URL, or parses with an ``@`` left in its host, has
    everything between ``//`` and the last ``@`` of the line hidden, unless that is a bare
    user name: a password with an unencoded ``@``, ``:``, ``/`` or space never shows.
    """
    if "@" not in text and "password" not in text:
        # A URL carries a password only before an ``@`` or as a ``password=`` parameter: text
        # with neither is returned as it is, without loading the SQL toolkit to parse it.
        return text
    from sqlalchemy.engine import make_url

    try:
        url = make_url(text)
    except Exception:  # noqa: BLE001 - not a parsable URL
        return _USERINFO.sub(_hide_userinfo, text)
    if (url.password or "password" in url.query) and "@" not in (url.host or ""):
        return without_password(url).render_as_string(hide_password=False)
    return _USERINFO.sub(_hide_userinfo, text)


def _hide_userinfo(match: re.Match) -> str:
    if _USER_ONLY.fullmatch(match["userinfo"]):
        return match[0]
    return f"{match['head']}***@"


def without_password(url: URL) -> URL:
    """The URL with its password removed, also a ``password=`` query parameter (libpq reads
    one there). ``URL.set(password=None)`` cannot do this: it ignores None."""
    return url._replace(password=None).difference_update_query(["password"])
