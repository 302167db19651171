"""Store values in the files a person opens: CSV cells and data docs pages.

A value from the store can hold any character (docs/reliability.md, 3a). A spreadsheet must
not read a CSV cell as a formula, whatever blank it starts with, and ``cat`` of a data docs
page must replay no control character, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import html
import re
import shlex

from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.run.check import run_check
from kandev_dq.text import command_options, csv_cell, html_inert

#: A raw control character a terminal acts on (C0 but newline and tab, DEL, C1, bidi).
RAW_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def _as_a_browser_reads(page: str) -> str:
    """The text of ``page`` as HTML5 decodes it: a control character's reference is the
    character (Python's ``html.unescape`` drops those), NUL's is U+FFFD."""

    def control(match: re.Match) -> str:
        char = chr(int(match[1], 16))
        if char == "\x00":
            return "\ufffd"
        return char if RAW_CONTROL.fullmatch(char) and not "\x80" <= char <= "\x9f" else match[0]

    return html.unescape(re.sub(r"&#x([0-9a-f]+);", control, page))


def test_a_csv_cell_starting_with_tab_or_cr_cannot_run_as_a_formula():
    assert csv_cell("\t=HYPERLINK(1)") == "'\t=HYPERLINK(1)"
    assert csv_cell("\r=1+1") == "'\\x0d=1+1"
    assert csv_cell("a\tb") == "a\tb" and csv_cell("x\r") == "x\\x0d"


def test_html_inert_writes_every_control_as_a_reference_a_browser_reads_back():
    value = "a\x1b[2Jb\x00c\u202ed\re\x9bf\n\tg"
    page = html_inert(f"<p title='{value}'>{value}</p>")
    assert not RAW_CONTROL.search(page) and "\n\t" in page
    assert "&#x1b;" in page and "&#x202e;" in page and "&#xd;" in page
    assert _as_a_browser_reads("&#x1b;[2J&#x202e;&amp;") == "\x1b[2J\u202e&"


def test_data_docs_pages_hold_no_raw_control_character(target, project):
    """Keys, ids, statuses and metadata holding ESC, CR, U+202E (and NUL where the store can
    hold it): every data docs page writes them as references; a failed rule's query, copied
    from its page, is still the one that ran."""
    evil = "E\x1b[2JS\rC\u202eR" + ("\x00N" if target.dialect == "sqlite" else "")
    capture = "2026-07-30T01:39:37.271235Z"
    store = StoreBuilder(target.engine).create()
    store.keys(capture + evil, "", capture)
    session = store.session()
    stamp = "2026-08-01 00:00:01+00:00"
    store.subagent_message(session, stamp, f"toolu-{evil}", message_id=f"m-{evil}")
    store.subagent_row(session, f"orphan-{evil}", stamp, id=f"row-{evil}", tool_status=evil)
    store.message(session, stamp, metadata="{" + evil, message_id=f"nj-{evil}")
    if target.dialect == "sqlite":
        target.engine.dispose()
    report = run_check(project, target.url, "pre_release")
    failed = [r for r in report.results if not r.success]
    assert failed
    pages = list((project / "uncommitted" / "data_docs").rglob("*.html"))
    assert pages
    seen = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not RAW_CONTROL.search(text), page.name
        seen.append(_as_a_browser_reads(text))
    # A browser reads a NUL reference as U+FFFD: the value up to it is what reads back.
    assert any(f"row-{evil.split(chr(0))[0]}" in text for text in seen)
    queries = [r.query for r in failed if r.query and "\x1b" in r.query]
    if target.dialect == "postgresql":  # unreadable metadata's ids are inlined there
        assert queries
    for query in queries:
        assert any(query in text for text in seen)


def test_a_command_a_report_names_keeps_each_value_one_shell_word():
    """A path holding a quote or a space stays one word when the reader pastes the command."""
    values = ["/srv/o'brien/k.db", "a b", "$HOME;rm"]
    options = command_options(
        [("--store", values[0]), ("--name", None), *[("-x", v) for v in values[1:]]]
    )
    assert shlex.split(options) == ["--store", values[0], "-x", values[1], "-x", values[2]]
