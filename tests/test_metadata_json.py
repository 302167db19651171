"""Message metadata read as JSON defines it, identically on both dialects (AC-23b, AC-19).

Escaped member names are decoded, a repeated name reads as its last member, and a document
nested deeper than the limit reads as ``{}``, at every level of the paths the reading takes.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from kandev_dq.sql.dialect import (
    JSON_MAX_DEPTH,
    exact_walk_needed,
    json_filled_text,
    json_flag,
    json_number,
    json_text,
    metadata_doc,
    metadata_too_deep,
    once_per_row,
    repeated_member,
)
from kandev_dq.sql.messages import is_unreadable_json

_meta = sa.MetaData()
docs = sa.Table("metadata_probe", _meta, sa.Column("id", sa.Text), sa.Column("doc", sa.Text))

_TASK = ("normalized", "subagent_task")
_PLAIN = (
    '{"tool_call_id": "toolu_9", "status": "completed", "normalized": {"kind": "subagent_task", '
    '"subagent_task": {"status": "async_launched", "total_tokens": 12, "is_async": true}}}'
)
_READ = ("toolu_9", "completed", "subagent_task", "async_launched", 12, 1)
_TOP_STATUS_TWICE = _PLAIN.replace('"status": "completed"', '"status": "a", "status": "completed"')
_TOP_STATUS_TWICE = _TOP_STATUS_TWICE.replace('"status": "async_launched", ', "")
_NESTED_STATUS_TWICE = _PLAIN.replace('"status": "completed", ', "").replace(
    '"status": "async_launched"', '"status": "a", "status": "async_launched"'
)


_READS = (
    (json_text, ("tool_call_id",)),
    (json_text, ("status",)),
    (json_text, ("normalized", "kind")),
    (json_text, (*_TASK, "status")),
    (json_number, (*_TASK, "total_tokens")),
    (json_flag, (*_TASK, "is_async")),
)


def _read(engine, document: str, tested_once: bool = False) -> tuple:
    """The fields of ``_READS``, each testing its own names, or (``tested_once``) all of them
    taking one test of the document's names made once for the row."""
    _meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(docs.delete())
        conn.execute(docs.insert().values(id="m1", doc=document))
        doc = metadata_doc(docs.c.doc)
        source, test = docs, {"stored": docs.c.doc}
        if tested_once:
            walk = once_per_row(exact_walk_needed(doc, docs.c.doc, *(p for _, p in _READS)), "walk")
            source, test = docs.join(walk, sa.true()), {"exact": walk.c.value}
        columns = [read(doc, *path, **test) for read, path in _READS]
        row = conn.execute(sa.select(*columns).select_from(source)).one()
    return tuple(int(v) if v is not None and not isinstance(v, str) else v for v in row)


def _repeats(engine, document: str, *paths: tuple[str, ...], mentioning: str | None = None) -> bool:
    _meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(docs.delete())
        conn.execute(docs.insert().values(id="m1", doc=document))
        doc = metadata_doc(docs.c.doc, as_text=True)
        repeated = repeated_member(doc, docs.c.doc, *paths, mentioning=mentioning)
        return bool(conn.execute(sa.select(repeated)).scalar_one())


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ('{"model": "opus"}', "opus"),
        ('{"model": ""}', None),  # §2: empty text is written as NULL
        ('{"model": " "}', " "),
        ('{"model": 0}', None),
        ('{"model": null}', None),
        ("{}", None),
        ('{"model": "", "model": "opus"}', "opus"),  # the last of repeated names
        ('{"model": "opus", "model": ""}', None),
        (r'{"mod\u0065l": "opus"}', "opus"),
    ],
)
def test_filled_text_reads_empty_text_as_null(target, document, expected):
    _meta.create_all(target.engine)
    with target.engine.begin() as conn:
        conn.execute(docs.delete())
        conn.execute(docs.insert().values(id="m1", doc=document))
        doc = metadata_doc(docs.c.doc)
        read = conn.execute(sa.select(json_filled_text(doc, "model"))).scalar_one()
    assert read == expected


@pytest.mark.parametrize(
    ("plain", "escaped"),
    [
        ('"tool_call_id"', r'"tool_\u0063all_id"'),
        ('"status": "completed"', r'"\u0073tatus": "completed"'),
        ('"normalized"', r'"\u006eormalized"'),
        ('"kind"', r'"\u006bind"'),
        ('"subagent_task": {', r'"subagent_\u0074ask": {'),
        ('"total_tokens"', r'"total_\u0074okens"'),
        ('"is_async"', r'"is\u005fasync"'),
        ('"kind"', r'"\u006Bind"'),  # hex digits in either case
        ('"is_async"', r'"is\u005Fasync"'),
    ],
)
@pytest.mark.parametrize("tested_once", [False, True])
def test_escaped_member_names_read_as_their_plain_form(target, plain, escaped, tested_once):
    assert _PLAIN.count(plain) == 1
    assert _read(target.engine, _PLAIN.replace(plain, escaped), tested_once) == _READ


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            _PLAIN.replace(
                '"tool_call_id": "toolu_9"', '"tool_call_id": "a", "tool_call_id": "toolu_9"'
            ),
            _READ,
        ),
        (
            _PLAIN.replace(
                '"tool_call_id": "toolu_9"', '"tool_call_id": "toolu_9", "tool_call_id": 5'
            ),
            (None, *_READ[1:]),
        ),
        (
            _PLAIN.replace('"normalized": {', '"normalized": {"kind": "message"}, "normalized": {'),
            _READ,
        ),
        (
            _PLAIN[:-1] + ', "normalized": {"kind": "message"}}',
            (*_READ[:2], "message", None, None, None),
        ),
        (
            _PLAIN.replace('"kind": "subagent_task"', '"kind": "subagent_task", "\\u006bind": "x"'),
            (*_READ[:2], "x", *_READ[3:]),
        ),
        (
            _PLAIN.replace(
                '"subagent_task": {', '"subagent_task": {"total_tokens": 1}, "subagent_task": {'
            ),
            _READ,
        ),
        (
            _PLAIN.replace('"total_tokens": 12', '"total_tokens": 12, "total_tokens": 30'),
            (*_READ[:4], 30, 1),
        ),
        (
            _PLAIN.replace('"is_async": true', '"is_async": true, "is_async": false'),
            (*_READ[:5], 0),
        ),
        # Repeated under another spelling: the escape of "_" is one that can spell a name.
        (
            _PLAIN.replace('"is_async": true', r'"is_async": true, "is\u005fasync": false'),
            (*_READ[:5], 0),
        ),
        # A name read in two objects, repeated in one of them and absent from the other: as
        # often written as in a well-formed document, yet repeated.
        (_TOP_STATUS_TWICE, (*_READ[:3], None, *_READ[4:])),
        (_NESTED_STATUS_TWICE, (_READ[0], None, *_READ[2:])),
    ],
)
@pytest.mark.parametrize("tested_once", [False, True])
def test_repeated_member_names_read_as_the_last_one(target, document, expected, tested_once):
    assert _read(target.engine, document, tested_once) == expected


@pytest.mark.parametrize(
    ("document", "repeated"),
    [
        (_PLAIN, False),
        (_PLAIN.replace('"kind"', r'"\u006bind"'), False),
        (
            _PLAIN.replace('"tool_call_id": "toolu_9"', '"tool_call_id": "a", "tool_call_id": "b"'),
            True,
        ),
        (_PLAIN.replace('"normalized": {', '"normalized": 1, "normalized": {'), True),
        (
            _PLAIN.replace('"kind": "subagent_task"', r'"kind": "x", "\u006bind": "subagent_task"'),
            True,
        ),
        (_PLAIN.replace('"kind": "subagent_task"', '"kind": "x", "kind": "subagent_task"'), True),
        (_PLAIN.replace('"is_async": true', '"is_async": true, "is_async": true'), True),
        (_PLAIN.replace('"status": "async_launched"', '"status": "a", "status": "b"'), True),
        (_PLAIN.replace('"is_async": true', r'"is_async": true, "is\u005fasync": true'), True),
        (_TOP_STATUS_TWICE, True),
        (_NESTED_STATUS_TWICE, True),
        # Only the objects the reading walks: a name repeated elsewhere changes no verdict.
        (_PLAIN[:-1] + ', "other": {"kind": 1, "kind": 2}}', False),
        (
            _PLAIN.replace('"status": "completed"', '"status": "completed", "note": 1, "note": 2'),
            False,
        ),
    ],
)
def test_repeated_member_names_are_found_along_the_read_paths(target, document, repeated):
    paths = (
        ("tool_call_id",),
        ("status",),
        ("normalized", "kind"),
        (*_TASK, "status"),
        (*_TASK, "is_async"),
    )
    assert _repeats(target.engine, document, *paths) is repeated


@pytest.mark.parametrize(
    ("document", "repeated"),
    [
        # A tool call's status is never read: only a subagent message's fields are.
        ('{"status": "a", "status": "b", "normalized": {"kind": "read_file"}}', False),
        ('{"status": "a", "status": "b", "normalized": {"kind": "subagent_task"}}', True),
        (r'{"status": "a", "status": "b", "normalized": {"kind": "subagent_\u0074ask"}}', True),
    ],
)
def test_field_names_are_tested_only_where_the_kind_may_be_subagent_task(
    target, document, repeated
):
    """AC-23b, AC-19: a name repeated where no rule reads it changes no verdict."""
    assert _repeats(target.engine, document, ("status",), mentioning="subagent_task") is repeated


def _nested(depth: int) -> str:
    """A subagent message with a member nesting ``depth`` arrays: the document is one deeper."""
    return _PLAIN[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"


def test_metadata_within_the_depth_limit_is_read(target):
    assert _read(target.engine, _nested(JSON_MAX_DEPTH - 1)) == _READ


@pytest.mark.parametrize("depth", [JSON_MAX_DEPTH, 10_000])
def test_metadata_past_the_depth_limit_reads_as_empty(target, depth):
    assert _read(target.engine, _nested(depth)) == (None,) * 6


def test_too_deep_metadata_is_counted_on_postgresql(pg_target):
    engine = pg_target.engine
    _meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            docs.insert(),
            [
                {"id": "deep", "doc": _nested(JSON_MAX_DEPTH)},
                {"id": "ok", "doc": _nested(JSON_MAX_DEPTH - 1)},
                {"id": "bad", "doc": "{" * (JSON_MAX_DEPTH + 5)},
                {"id": "none", "doc": None},
            ],
        )
        deep = metadata_too_deep(docs.c.doc, id_column=docs.c.id, excluded=("bad",))
        assert list(conn.scalars(sa.select(docs.c.id).where(deep))) == ["deep"]


def test_metadata_deeper_than_postgresql_parses_is_unreadable(target):
    """100,000 levels: PostgreSQL's parser exhausts its stack (54001), located like any other
    unparsable text; SQLite reads it as {} directly."""
    document = _nested(100_000)
    if target.dialect == "sqlite":
        assert _read(target.engine, document) == (None,) * 6
        return
    with pytest.raises(sa.exc.DBAPIError) as failure:
        _read(target.engine, document)
    assert is_unreadable_json(failure.value)
