"""Message metadata read as JSON, alike on both dialects (AC-23b, AC-19).

* :class:`metadata_text` — the ``metadata`` value as the text every reading starts from (SQLite
  keeps a BLOB or a number a writer bound there), and :class:`stored_not_as_text`.
* :class:`metadata_doc` — that text as a JSON document, with NULL / ``''`` / ``'null'`` /
  invalid text read as ``{}``, nesting past :data:`JSON_MAX_DEPTH` unreadable;
  :class:`metadata_too_deep` names PostgreSQL's too-deep documents.
* :class:`json_text`, :class:`json_filled_text`, :class:`json_number`, :class:`json_flag` —
  one field of a document, member names decoded and the last of repeated names winning
  (:mod:`kandev_dq.sql.dialect.json_names` decides which SQLite documents need the exact walk).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal

from kandev_dq.sql.dialect.ids import excluded_ids
from kandev_dq.sql.dialect.json_names import (
    SQLITE_NAMES,
    needs_exact,
    postgres_names,
    sqlite_member,
    sqlite_object,
)
from kandev_dq.sql.dialect.literals import pg_path, quoted, sqlite_path


class metadata_text(FunctionElement):  # noqa: N801
    """The ``metadata`` column as the text every reading of it starts from (AC-23b).

    SQLite keeps any value a writer binds, whatever the column's declared type: a BLOB (how a
    Go ``[]byte`` binds), or an integer or a real in a column without TEXT affinity. The text
    is ``CAST(metadata AS TEXT)``: the bytes a BLOB holds, read as the same bytes stored as
    text would be (``docs/interpretations.md``), and a number's text, which as JSON has no
    member (no kind, like ``{}``). Never the raw value: since 3.45 SQLite's JSON functions
    read a BLOB as JSONB, and ``GLOB`` finds no text in one. A text value is unchanged.
    PostgreSQL's column is ``text``: the column itself.
    """

    inherit_cache = True
    type = sa.Text()


@compiles(metadata_text, "sqlite")
def _metadata_text_sqlite(element, compiler, **kw):
    return f"CAST({compiler.process(element.clauses, **kw)} AS TEXT)"


@compiles(metadata_text, "postgresql")
def _metadata_text_postgresql(element, compiler, **kw):
    return compiler.process(element.clauses, **kw)


class stored_not_as_text(FunctionElement):  # noqa: N801
    """SQLite: ``metadata`` stored as a BLOB, an integer or a real rather than as text
    (AC-23b): named wherever it is read, whatever it holds. PostgreSQL's ``text`` column
    holds nothing else: false."""

    inherit_cache = True
    type = sa.Boolean()


@compiles(stored_not_as_text, "sqlite")
def _stored_not_as_text_sqlite(element, compiler, **kw):
    return f"(typeof({compiler.process(element.clauses, **kw)}) NOT IN ('text', 'null'))"


@compiles(stored_not_as_text, "postgresql")
def _stored_not_as_text_postgresql(element, compiler, **kw):
    return "false"


class metadata_doc(FunctionElement):  # noqa: N801
    """``metadata`` as a JSON document, with NULL / '' / 'null' / invalid text read as {} (AC-23b).

    SQLite's ``json_valid`` already reads text that is not JSON as ``{}``. PostgreSQL's
    ``::jsonb`` cast aborts the whole statement on such text instead, so the few messages
    whose metadata it cannot parse are located (only after a statement failed, see
    :func:`kandev_dq.sql.messages.locate_unreadable_metadata`) and passed here as ``excluded`` ids,
    with the table's ``id_column``: those rows read as ``{}`` too. The exclusion is compiled
    only when the list is non-empty, so the common statement is unchanged.

    Nesting deeper than :data:`JSON_MAX_DEPTH` reads as ``{}`` on both dialects (SQLite's own
    parser limit; PostgreSQL probes only documents with more brackets than the limit).

    PostgreSQL casts once per row (``::jsonb``); read it through a subquery column so the cast
    is not repeated per extracted field. ``as_text`` leaves the text uncast, every member as
    written, for :class:`repeated_member` (``jsonb`` keeps only the last of repeated names).

    ``undecided_large`` (PostgreSQL, before the unreadable ids are located): a text of more
    than :data:`PG_PARSED_BYTES` fails the statement with a short error of its own instead of
    being parsed. PostgreSQL's error for text it cannot parse names the whole token, which the
    client would receive and copy several times over (a 50 MB one cost 580 MB); such texts are
    decided apart, on the server (:func:`kandev_dq.sql.messages.locate_unreadable_metadata`).

    ``mentions`` (a reader that keeps only documents holding that string value, such as the
    kind ``subagent_task``), PostgreSQL only: a text that holds neither it nor an escape
    (``\\u``, the only other way to spell its letters) reads as ``{}`` without being parsed
    (most messages: each read of them costs a fraction). SQLite evaluates the document at
    every reference of a flattened subquery, where the test would be repeated and cost more
    than its cheap ``json_valid`` saves.
    """

    inherit_cache = True
    type = sa.Text()
    _traverse_internals = FunctionElement._traverse_internals + [
        ("as_text", InternalTraversal.dp_plain_obj),
        ("mentions", InternalTraversal.dp_plain_obj),
        ("undecided_large", InternalTraversal.dp_plain_obj),
    ]

    def __init__(
        self,
        column,
        *,
        id_column=None,
        excluded: Sequence[str] = (),
        as_text: bool = False,
        mentions: str | None = None,
        undecided_large: bool = False,
    ):
        self.as_text = as_text
        self.mentions = mentions
        self.undecided_large = undecided_large
        excluded = tuple(excluded)
        if excluded and id_column is None:
            raise ValueError("excluded ids need the id column they refer to")
        clauses = [column]
        if excluded:
            clauses.append(excluded_ids(id_column, excluded))
        super().__init__(*clauses)


#: Deepest nesting of objects and arrays a metadata document may have (AC-23b, AC-19): the
#: SQLite kandev-dq reads with (3.45 and later, :mod:`kandev_dq.store.sqlite_driver`) stops past
#: 1,000 levels (``json_valid`` is 0 and the message reads as ``{}``); PostgreSQL parses far
#: deeper and raises "stack depth limit exceeded" near 100,000. Deeper documents are unreadable
#: on both dialects, so both read them as ``{}``.
JSON_MAX_DEPTH = 1000
#: PostgreSQL: a metadata text of more bytes than this is parsed by a statement only once it
#: is known to be readable (see :class:`metadata_doc`'s ``undecided_large``).
PG_PARSED_BYTES = 1 << 20


def _guards_large(element, kw) -> bool:
    # Never in a listing (compiled with literal binds): it runs as pasted, where no failure is
    # located, and reads every text as the run finally read it.
    return element.undecided_large and not kw.get("literal_binds", False)


def _pg_undecided_large(col: str) -> str:
    # The cast depends on the row, so it is never folded at planning: it raises only where a
    # large text is met, the input error (22P02) whose statement is then located, naming the
    # token "~" alone. A CASE, as only it fixes the order of evaluation.
    return (
        f"(CASE WHEN octet_length({col}) > {PG_PARSED_BYTES} "
        f"THEN ('~' || left({col}, 0))::jsonb IS NULL ELSE FALSE END)"
    )


def _pg_too_deep(col: str) -> str:
    # Each level takes two characters, and counting '{' and '[' bounds the depth from above
    # (brackets inside strings count too): only a document past both tests, the first read from
    # the value's header, is counted, then parsed once more and walked. Counted in bytes with
    # replace: translate decodes every character (slower over large documents,
    # bench/measured-choices.md).
    return (
        f"(CASE WHEN octet_length({col}) > {2 * JSON_MAX_DEPTH} "
        f"AND octet_length({col}) - octet_length(replace(replace({col}, '{{', ''), '[', '')) "
        f"> {JSON_MAX_DEPTH} "
        f"THEN jsonb_path_exists({col}::jsonb, 'strict $.**{{{JSON_MAX_DEPTH} to last}} "
        f'? (@.type() == "object" || @.type() == "array")\') ELSE FALSE END)'
    )


def _doc_text(col: str, unreadable: list[str]) -> str:
    """The metadata text ``col``, or ``'{}'`` where one of the ``unreadable`` conditions holds
    (AC-23b), before any cast.

    Conditions are separate WHENs because only CASE fixes PostgreSQL's evaluation order: the
    depth probe parses the text, so it must never see an excluded (unparsable) row.
    """
    whens = " ".join(f"WHEN {condition} THEN '{{}}'" for condition in unreadable)
    return f"(CASE {whens} ELSE {col} END)"


def _doc_clauses(element, compiler, **kw) -> tuple[str, str | None]:
    """The metadata column and the test of its excluded ids (None without any), compiled."""
    clauses = list(element.clauses)
    col = compiler.process(clauses[0], **kw)
    excluded = compiler.process(clauses[1], **kw) if len(clauses) > 1 else None
    return col, excluded


@compiles(metadata_doc, "sqlite")
def _doc_sqlite(element, compiler, **kw):
    col, excluded = _doc_clauses(element, compiler, **kw)
    unreadable = [f"NOT json_valid({col})"]  # also 0 past JSON_MAX_DEPTH
    if excluded:
        unreadable.append(excluded)
    return _doc_text(col, unreadable)


@compiles(metadata_doc, "postgresql")
def _doc_postgresql(element, compiler, **kw):
    col, excluded = _doc_clauses(element, compiler, **kw)
    unreadable = []
    if element.mentions is not None:
        unreadable.append(
            f"NOT (strpos({col}, {quoted(element.mentions)}) > 0 "
            f"OR {postgres_names(compiler).holds_escape(col)})"
        )
    # A text holding '{' never trims to '' or 'null'; testing that first (most documents open
    # with it) spares a trimmed copy of each (bench/measured-choices.md).
    unreadable.append(
        f"{col} IS NULL OR (strpos({col}, '{{') = 0 AND btrim({col}) IN ('', 'null'))"
    )
    if excluded:
        unreadable.append(excluded)
    if _guards_large(element, kw):
        unreadable.append(_pg_undecided_large(col))
    unreadable.append(_pg_too_deep(col))
    text = _doc_text(col, unreadable)
    return text if element.as_text else f"{text}::jsonb"


class metadata_too_deep(metadata_doc):  # noqa: N801
    """PostgreSQL: metadata that parses, but nests deeper than :data:`JSON_MAX_DEPTH` (AC-23b).

    :class:`metadata_doc` reads it as ``{}``; the rule on unreadable metadata names it, as it
    names SQLite's (whose ``json_valid`` is already 0 for it). ``excluded`` rows are never
    parsed. SQLite needs no such construct and has none.
    """

    inherit_cache = True
    type = sa.Boolean()


@compiles(metadata_too_deep, "postgresql")
def _too_deep_postgresql(element, compiler, **kw):
    clauses = list(element.clauses)
    col = compiler.process(clauses[0], **kw)
    skip = f"WHEN {compiler.process(clauses[1], **kw)} THEN FALSE " if len(clauses) > 1 else ""
    if _guards_large(element, kw):
        skip += f"WHEN {_pg_undecided_large(col)} THEN FALSE "
    return f"(CASE WHEN {col} IS NULL THEN FALSE {skip}ELSE {_pg_too_deep(col)} END)"


class _JsonPath(FunctionElement):
    """A reading of ``path`` in the document ``doc`` (a :class:`metadata_doc`). ``stored``, the
    metadata text the document was built from, is what SQLite's test for escaped or repeated
    names reads: ``doc`` itself would be rebuilt for each of its patterns. An unreadable text
    is read as ``{}``, where both readings agree, so the test may pass it either way.

    ``exact`` instead is that test already made for the row (:class:`exact_walk_needed` over
    this path among others, read through :func:`once_per_row`): a reader of many fields then
    tests each document once, not once per field."""

    inherit_cache = True

    def __init__(self, doc, *path: str, stored=None, exact=None):
        self.path = tuple(path)
        self.tested = exact is not None
        test = exact if exact is not None else stored
        super().__init__(*((doc,) if test is None else (doc, test)))

    _traverse_internals = FunctionElement._traverse_internals + [
        ("path", InternalTraversal.dp_plain_obj),
        ("tested", InternalTraversal.dp_plain_obj),
    ]


class json_text(_JsonPath):  # noqa: N801
    """A JSON string at ``path`` as text; any other JSON type reads as NULL."""

    inherit_cache = True

    type = sa.Text()


class json_filled_text(_JsonPath):  # noqa: N801
    """A non-empty JSON string at ``path`` as text; ``""`` and any other JSON type read as NULL
    (CONTRACT §2's empty-as-NULL applied as the field is read). Tested by length, never
    through ``nullif``: SQLite's ``nullif`` copies its argument, and SQLite keeps that copy
    beside the extracted value (one more copy of a 50 MB description per row read). The
    length is in bytes: SQLite's ``length()`` stops at a NUL, so ``"\\u0000…"`` read as NULL."""

    inherit_cache = True

    type = sa.Text()


class json_number(_JsonPath):  # noqa: N801
    """A JSON number at ``path``; any other JSON type reads as NULL."""

    inherit_cache = True

    type = sa.Numeric()


class json_flag(_JsonPath):  # noqa: N801
    """A JSON boolean (or 0/1 number) at ``path`` as 1/0; anything else reads as NULL."""

    inherit_cache = True

    type = sa.Integer()


def _sqlite_read(element, compiler, fast: str, exact_read: str, **kw) -> str:
    """``fast`` (a path lookup over ``{doc}`` and ``{p}``) for the common document, else the
    same reading as ``exact_read`` over the last member reached with decoded names."""
    clauses = [compiler.process(clause, **kw) for clause in element.clauses]
    doc, test = clauses[0], clauses[-1]
    path = element.path
    exact = sqlite_member(sqlite_object(doc, path[:-1]), path[-1], exact_read, len(path))
    walk = test if element.tested else needs_exact(SQLITE_NAMES, test, doc, path)
    return f"(CASE WHEN {walk} THEN {exact} ELSE {fast.format(doc=doc, p=sqlite_path(path))} END)"


def _pg_read(element, compiler, read: str, **kw) -> str:
    """``read`` over ``{value}`` and ``{text}``, the jsonb document's value at the path and
    that value as text, on PostgreSQL, whose path operators already decode names and take the
    last of repeated ones. A path of one name is read with ``->``: unlike ``#>`` it builds no
    path array per row (bench/measured-choices.md)."""
    doc = compiler.process(list(element.clauses)[0], **kw)
    path = element.path
    if len(path) == 1:
        name = quoted(path[0])
        return read.format(value=f"{doc} -> {name}", text=f"{doc} ->> {name}")
    p = pg_path(path)
    return read.format(value=f"{doc} #> {p}", text=f"{doc} #>> {p}")


@compiles(json_text, "sqlite")
def _text_sqlite(element, compiler, **kw):
    return _sqlite_read(
        element,
        compiler,
        "(CASE WHEN json_type({doc}, {p}) = 'text' THEN json_extract({doc}, {p}) END)",
        "CASE WHEN type = 'text' THEN value END",
        **kw,
    )


@compiles(json_text, "postgresql")
def _text_postgresql(element, compiler, **kw):
    return _pg_read(
        element,
        compiler,
        "(CASE WHEN jsonb_typeof({value}) = 'string' THEN {text} END)",
        **kw,
    )


@compiles(json_filled_text, "sqlite")
def _filled_text_sqlite(element, compiler, **kw):
    return _sqlite_read(
        element,
        compiler,
        "(CASE WHEN json_type({doc}, {p}) = 'text' "
        "AND length(CAST(json_extract({doc}, {p}) AS BLOB)) > 0 "
        "THEN json_extract({doc}, {p}) END)",
        "CASE WHEN type = 'text' AND length(CAST(value AS BLOB)) > 0 THEN value END",
        **kw,
    )


@compiles(json_filled_text, "postgresql")
def _filled_text_postgresql(element, compiler, **kw):
    return _pg_read(
        element,
        compiler,
        "(CASE WHEN jsonb_typeof({value}) = 'string' THEN nullif({text}, '') END)",
        **kw,
    )


@compiles(json_number, "sqlite")
def _number_sqlite(element, compiler, **kw):
    return _sqlite_read(
        element,
        compiler,
        "(CASE WHEN json_type({doc}, {p}) IN ('integer', 'real') "
        "THEN json_extract({doc}, {p}) END)",
        "CASE WHEN type IN ('integer', 'real') THEN value END",
        **kw,
    )


@compiles(json_number, "postgresql")
def _number_postgresql(element, compiler, **kw):
    return _pg_read(
        element,
        compiler,
        "(CASE WHEN jsonb_typeof({value}) = 'number' THEN ({text})::numeric END)",
        **kw,
    )


@compiles(json_flag, "sqlite")
def _flag_sqlite(element, compiler, **kw):
    # json_each gives true/false as 1/0 with their own type names.
    return _sqlite_read(
        element,
        compiler,
        "(CASE json_type({doc}, {p}) WHEN 'true' THEN 1 WHEN 'false' THEN 0 "
        "WHEN 'integer' THEN (json_extract({doc}, {p}) <> 0) "
        "WHEN 'real' THEN (json_extract({doc}, {p}) <> 0) END)",
        "CASE type WHEN 'true' THEN 1 WHEN 'false' THEN 0 "
        "WHEN 'integer' THEN (value <> 0) WHEN 'real' THEN (value <> 0) END",
        **kw,
    )


@compiles(json_flag, "postgresql")
def _flag_postgresql(element, compiler, **kw):
    return _pg_read(
        element,
        compiler,
        "(CASE jsonb_typeof({value}) WHEN 'boolean' THEN "
        "CASE WHEN ({text})::boolean THEN 1 ELSE 0 END "
        "WHEN 'number' THEN CASE WHEN ({text})::numeric <> 0 THEN 1 ELSE 0 END END)",
        **kw,
    )
