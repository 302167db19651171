"""Showing text that came from a store or a project: one place escapes it for every output.

Key values, message ids and tool statuses are written by agents (CONTRACT §1: the store is
not trusted). Shown raw, a value could drive the terminal (clear it, retitle it, print a fake
verdict, hide what follows), be read as rich markup (crash a run, make a hyperlink) or run
script in a Markdown renderer. Every output path passes store-derived text through here.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable

#: Bidirectional embeddings, overrides and isolates: they reorder what a reader sees.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: What could end a table cell, open a code span or make a link (CommonMark backslash escapes);
#: emphasis is left alone: it cannot hide or run anything.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`\[\]|])")
_BACKTICK_RUNS = re.compile(r"`+")


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _is_unsafe(char: str) -> bool:
    """C0 (but newline and tab), DEL, C1 and bidi controls."""
    if char in "\n\t":
        return False
    return unicodedata.category(char) == "Cc" or char in _BIDI


def printable(text: object) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``).

    Newlines and tabs stay: multi-line reports keep their shape. What remains holds no
    control character, so escaping twice changes nothing.
    """
    return "".join(_escaped(c) if _is_unsafe(c) else c for c in str(text))


def one_line(text: object) -> str:
    """:func:`printable`, with newlines and tabs escaped too (a table cell, an error line)."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


_NOT_IN_FILE_NAMES = re.compile(r"[^A-Za-z0-9._-]+")


def file_name_slug(text: str) -> str:
    """``text`` as a run name part GX writes into result paths: runs of anything but letters,
    digits, ``.``, ``_`` and ``-`` as one ``-``."""
    return _NOT_IN_FILE_NAMES.sub("-", text).strip("-")


def command_options(options: Iterable[tuple[str, str | None]]) -> str:
    """The options of a command a report tells its reader to run, each value single-quoted for
    a POSIX shell (a quote inside closed and reopened), an option without a value left out."""
    return " ".join(
        f"{flag} '{value.replace(chr(39), chr(39) + chr(92) + chr(39) + chr(39))}'"
        for flag, value in options
        if value
    )


def markdown_code(text: object) -> str:
    """``text`` as a Markdown code span inside a table cell, inert in any renderer.

    The fence is one backtick longer than the longest run inside, so the value cannot close
    it; ``<``, ``>`` and ``&`` are HTML-escaped for renderers that do not honour code spans;
    ``|`` is escaped because GFM splits table cells before it reads code spans.
    """
    shown = html.escape(one_line(text), quote=False).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in _BACKTICK_RUNS.findall(shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def markdown_text(text: object) -> str:
    """``text`` as plain Markdown table-cell text: no markup, no link, no HTML takes effect."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", html.escape(one_line(text), quote=False))


#: What XML 1.0 cannot hold even as a character reference (C0 controls are already escaped).
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def xml_text(text: object) -> str:
    """:func:`one_line`, safe as XML character data or an attribute value once serialised."""
    return _NOT_XML.sub(lambda match: _escaped(match[0]), one_line(text))


#: What :func:`html_inert` writes as a reference: C0 but newline and tab, DEL, C1 and bidi.
_HTML_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(sorted(_BIDI)) + "]")


def html_inert(page: str) -> str:
    """A whole HTML page with every control character left in it written as a numeric
    character reference (``&#x1b;``): ``cat`` of the file replays nothing, while a browser
    (and a copy button) still reads the character, so a query copied from the page is the one
    that ran. Text and attribute values alike; the page's JSON already escapes them."""
    return _HTML_UNSAFE.sub(lambda match: f"&#x{ord(match[0]):x};", page)


#: What a spreadsheet reads as the start of a formula (CSV injection), TAB and CR included:
#: some spreadsheets drop them and read the formula behind.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A value for a CSV cell a spreadsheet opens: control characters escaped (newlines kept,
    CSV quotes them), text a spreadsheet would run as a formula prefixed with ``'``. Numbers
    and NULL stay as they are."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = printable(value)  # a CR is escaped here, so the start is read on the value too
    return f"'{text}" if str(value).startswith(_FORMULA_START) else text
