"""Member names in message metadata: escaped and repeated names, read alike on both dialects.

SQLite's path lookup (``json_extract``, ``json_type``) compares member names as written: it
misses an escaped name (``"\\u006bind"`` is ``"kind"``) and takes the first of repeated names.
JSON means the decoded name, and the reading decided for repeated names is the last one, as
PostgreSQL reads them (AC-19: one classification on both dialects). ``json_each`` decodes
names, so a document that may hold either takes an exact walk with it; a cheap text test sends
only those documents there, every other one keeps the single-parse fast path.

* :class:`may_hold_string` — a text may be a document holding a JSON string, tested unparsed.
* :class:`exact_walk_needed` — a document may hold an escaped or a repeated name of its paths.
* :class:`unpaired_names` — PostgreSQL: a name read in two objects missing from one of them.
* :class:`repeated_member` — an object holds a name it is read by more than once.

Each text test is written by one dialect's spelling (:data:`SQLITE_NAMES`,
:func:`postgres_names`) and composed by the shared pieces below, which never ask the dialect.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal

from kandev_dq.sql.dialect.literals import percent, pg_path, quoted, sqlite_path

#: How often a member name's quoted text appears in a well-formed subagent message: ``status``
#: is read at two levels, and ``"subagent_task"`` is both a member name and the kind's value.
#: Only a cost hint: a document with more occurrences just takes the exact walk.
_WELL_FORMED_OCCURRENCES = {"status": 2, "subagent_task": 2}
#: The names read in two objects, with those objects (the steps reaching each): a well-formed
#: document writes such a name once in each, and two occurrences may instead be one object's
#: repeated member. When both objects hold the name, two occurrences are one in each.
#: (``"subagent_task"`` twice is its name and the kind: a repeated member makes three.)
_READ_IN_TWO_OBJECTS = {"status": ((), ("normalized", "subagent_task"))}


#: What an escaped spelling of a read name (or of the kind) needs: each is lowercase ASCII
#: letters and ``_``, so an escape of one of its characters is ``\\u005f`` or ``\\u0061`` to
#: ``\\u007a``, in either case. Other escapes (``\\u003c`` for ``<``, as Go writes it, accented
#: letters) spell no name: a document holding only those keeps the fast path.
_NAME_ESCAPE = "\\u00[5-7][0-9A-Fa-f]"


class _SqliteNames:
    """SQLite's spelling of the text tests: GLOB patterns (counting with ``replace`` cost
    more there, bench/measured-choices.md)."""

    def escaped(self, text: str) -> str:
        """``text`` may spell a read name with an escape (:data:`_NAME_ESCAPE`)."""
        return f"{text} GLOB '*{_NAME_ESCAPE}*'"

    def occurs(self, text: str, name: str, times: int) -> str:
        """``name``'s quoted text appears at least ``times`` times in ``text``, never
        overlapping."""
        written = f'"{name}"'
        return f"{text} GLOB {quoted('*' + (written + '*') * times)}"

    def member_absent(self, doc: str, path: tuple[str, ...]) -> str:
        """No member at ``path``, read plainly. A JSON ``null`` is a member."""
        return f"json_type({doc}, {sqlite_path(path)}) IS NULL"


class _PostgresNames:
    """PostgreSQL's spelling of the text tests: ``replace`` counts occurrences in less time
    than LIKE's pattern takes. ``percent`` is how the statement spells LIKE's ``%`` (doubled
    for a ``format`` driver)."""

    def __init__(self, percent: str):
        self.percent = percent

    def holds_escape(self, text: str) -> str:
        """``text`` holds ``\\u``. LIKE, not ``strpos``: over every message, strpos of these
        two characters cost more than LIKE (bench/measured-choices.md)."""
        return f"{text} LIKE '{self.percent}\\\\u{self.percent}'"

    def escaped(self, text: str) -> str:
        # The regular expression only runs on the rare text holding an escape at all.
        return f"({self.holds_escape(text)} AND {text} ~ '\\{_NAME_ESCAPE}')"

    def occurs(self, text: str, name: str, times: int, exactly: bool = False) -> str:
        """``name``'s quoted text appears at least (or ``exactly``) ``times`` times in
        ``text``, never overlapping."""
        written = f'"{name}"'
        if times == 1 and not exactly:  # strpos: cheaper than LIKE (bench/measured-choices.md)
            return f"strpos({text}, {quoted(written)}) > 0"
        return (
            f"{_removed(text, written)} {'=' if exactly else '>='} {times * len(written.encode())}"
        )

    def member_absent(self, doc: str, path: tuple[str, ...]) -> str:
        """No member at ``path``, read plainly. A JSON ``null`` is a member."""
        return f"({doc} #> {pg_path(path)}) IS NULL"


def _removed(text: str, written: str) -> str:
    """PostgreSQL: how many bytes removing every occurrence of ``written`` takes from ``text``,
    which counts them: less time than LIKE's ``'%"name"%"name"%'``
    (bench/measured-choices.md)."""
    return f"octet_length({text}) - octet_length(replace({text}, {quoted(written)}, ''))"


#: SQLite's spelling (it takes no parameter).
SQLITE_NAMES = _SqliteNames()


def postgres_names(compiler) -> _PostgresNames:
    """PostgreSQL's spelling for the statement ``compiler`` writes."""
    return _PostgresNames(percent(compiler))


def needs_exact(names, text: str, doc: str, path: tuple[str, ...]) -> str:
    """True when a document's text may hold an escaped or a repeated name of ``path``, in the
    spelling ``names``.

    Any escaped spelling of a plain name needs :data:`_NAME_ESCAPE`; a repeated name shows its
    quoted text more often than a well-formed document does. A pattern with one more occurrence
    than allowed finds it (this runs over every message's document).
    ``doc`` is the document ``text`` reads as (see :data:`_READ_IN_TWO_OBJECTS`).
    """
    repeated = [_repeated_text(names, text, doc, name) for name in dict.fromkeys(path)]
    return "(" + " OR ".join([names.escaped(text), *repeated]) + ")"


def _repeated_text(names, text: str, doc: str, name: str, unpaired: bool = True) -> str:
    """``name`` may be repeated: written more often than a well-formed document writes it, or
    (``unpaired``, see :class:`unpaired_names`) as often, but missing from one of its objects."""
    usual = _WELL_FORMED_OCCURRENCES.get(name, 1)
    more = names.occurs(text, name, usual + 1)
    if name not in _READ_IN_TWO_OBJECTS or not unpaired:
        return more
    absent = " OR ".join(
        names.member_absent(doc, (*steps, name)) for steps in _READ_IN_TWO_OBJECTS[name]
    )
    return f"({more} OR ({names.occurs(text, name, usual)} AND ({absent})))"


def _may_repeat(
    names,
    text: str,
    doc: str,
    paths: tuple[tuple[str, ...], ...],
    mentioning: str | None = None,
    unpaired: bool = True,
) -> str:
    """:func:`needs_exact` over every name of ``paths``, each object's names tested only in a
    text that names the object: a member of ``normalized.subagent_task`` can repeat only where
    ``"subagent_task"`` is written (an escaped spelling is caught by the ``\\u`` test). Most
    messages are not subagent messages, and skip most patterns. With ``mentioning``, no name
    is tested in a text that does not write that JSON string (nor any escape)."""
    tested: set[str] = set()
    groups = []
    for steps, read in _named_members(paths).items():
        fresh = [name for name in read if name not in tested]
        tested.update(fresh)
        if not fresh:
            continue
        repeated = " OR ".join(_repeated_text(names, text, doc, name, unpaired) for name in fresh)
        if steps:
            repeated = f"{names.occurs(text, steps[-1], 1)} AND ({repeated})"
        groups.append(f"({repeated})")
    tests = " OR ".join(groups)
    if mentioning is not None:
        tests = f"{names.occurs(text, mentioning, 1)} AND ({tests})"
    return f"({names.escaped(text)} OR ({tests}))"


def sqlite_object(doc: str, steps: tuple[str, ...]) -> str:
    """The object reached by ``steps`` (last member of each name, names decoded), else NULL."""
    for depth, name in enumerate(steps):
        doc = sqlite_member(doc, name, "CASE WHEN type = 'object' THEN value END", depth)
    return doc


def sqlite_member(obj: str, name: str, read: str, depth: int) -> str:
    """``read`` (over ``json_each``'s ``type`` and ``value``) of ``obj``'s last member ``name``.

    The last member is the one with the greatest ``id``: SQLite takes a bare column from the
    row holding ``max()``. NULL when there is none (the aggregate still yields one row).
    """
    alias = f"kandev_member{depth}"
    return (
        f"(SELECT {read} FROM (SELECT {alias}.type AS type, {alias}.value AS value, "
        f"max({alias}.id) FROM json_each({obj}) AS {alias} "
        f"WHERE {alias}.key = {quoted(name)}))"
    )


class may_hold_string(FunctionElement):  # noqa: N801
    """The text ``stored`` may be a document holding the JSON string ``value`` (lowercase ASCII
    letters and ``_`` only): it writes that string, or an escape that can spell one of its
    characters (:data:`_NAME_ESCAPE`, the only other way to write them). A test without a
    parse, for a reader keeping only documents that hold the value: most messages are then
    never parsed."""

    inherit_cache = True
    type = sa.Boolean()

    def __init__(self, stored, value: str):
        self.value = value
        super().__init__(stored)

    _traverse_internals = FunctionElement._traverse_internals + [
        ("value", InternalTraversal.dp_plain_obj)
    ]


def _may_hold(names, element, compiler, **kw) -> str:
    stored = compiler.process(list(element.clauses)[0], **kw)
    return f"({names.occurs(stored, element.value, 1)} OR {names.escaped(stored)})"


@compiles(may_hold_string, "sqlite")
def _may_hold_string_sqlite(element, compiler, **kw):
    return _may_hold(SQLITE_NAMES, element, compiler, **kw)


@compiles(may_hold_string, "postgresql")
def _may_hold_string_postgresql(element, compiler, **kw):
    return _may_hold(postgres_names(compiler), element, compiler, **kw)


class _NamesAlong(FunctionElement):
    """A test of the member names along ``paths`` in a message's metadata: ``doc`` is its
    document, ``stored`` its text; with ``mentioning`` (a string value), only messages whose
    text writes that JSON string (or an escape) are tested, the names of ``paths`` being read
    only in messages holding it."""

    inherit_cache = True
    type = sa.Boolean()

    def __init__(
        self,
        doc,
        stored,
        *paths: tuple[str, ...],
        mentioning: str | None = None,
        unpaired: bool = True,
    ):
        self.paths = tuple(tuple(path) for path in paths)
        self.mentioning = mentioning
        self.unpaired = unpaired
        super().__init__(doc, stored)

    _traverse_internals = FunctionElement._traverse_internals + [
        ("paths", InternalTraversal.dp_plain_obj),
        ("mentioning", InternalTraversal.dp_plain_obj),
        ("unpaired", InternalTraversal.dp_plain_obj),
    ]


class exact_walk_needed(_NamesAlong):  # noqa: N801
    """True when the metadata may hold an escaped or a repeated name along one of ``paths``:
    the test of :class:`json_text` and its kin, made once for all of them, and the text test
    of :class:`repeated_member`. With ``unpaired=False`` it leaves out the names written as
    often as usual but missing from one of their objects: the caller counts those with
    :class:`unpaired_names`."""

    inherit_cache = True


@compiles(exact_walk_needed, "sqlite")
def _exact_walk_needed_sqlite(element, compiler, **kw):
    doc, stored = (compiler.process(clause, **kw) for clause in element.clauses)
    return _may_repeat(
        SQLITE_NAMES, stored, doc, element.paths, element.mentioning, element.unpaired
    )


@compiles(exact_walk_needed, "postgresql")
def _exact_walk_needed_postgresql(element, compiler, **kw):
    document, stored = (compiler.process(clause, **kw) for clause in element.clauses)
    # PostgreSQL reads the two objects of a name like ``status`` from the text as ``json``.
    doc = f"({document})::json"
    return _may_repeat(
        postgres_names(compiler), stored, doc, element.paths, element.mentioning, element.unpaired
    )


class unpaired_names(_NamesAlong):  # noqa: N801
    """PostgreSQL, per message: 1 when a name read in two objects (:data:`_READ_IN_TWO_OBJECTS`)
    along ``paths`` is written exactly as often as a well-formed document writes it, but one of
    its objects lacks it (so the occurrences may be one object's repeated member), else 0.

    The part of :class:`exact_walk_needed` that reads the document rather than its text, for a
    scan that also parses every document (``parse_every``: one that cannot be parsed fails the
    scan, AC-23b). Both take one parse of each document: reading the two paths as ``json``
    instead lexed each subagent message twice more (bench/measured-choices.md)."""

    inherit_cache = True
    type = sa.Integer()

    def __init__(self, doc, stored, *paths: tuple[str, ...], mentioning: str, parse_every: bool):
        self.parse_every = parse_every
        super().__init__(doc, stored, *paths, mentioning=mentioning)

    _traverse_internals = _NamesAlong._traverse_internals + [
        ("parse_every", InternalTraversal.dp_plain_obj),
    ]


@compiles(unpaired_names, "postgresql")
def _unpaired_names_postgresql(element, compiler, **kw):
    document, stored = (compiler.process(clause, **kw) for clause in element.clauses)
    spelling = postgres_names(compiler)
    names = [n for n in _READ_IN_TWO_OBJECTS if any(n in path for path in element.paths)]
    as_usual = " OR ".join(
        spelling.occurs(stored, n, _WELL_FORMED_OCCURRENCES[n], exactly=True) for n in names
    )
    # strict: a step into a value that is not an object is an error, which makes the test
    # unknown (not true), as ``#>`` reads NULL there; lax mode would look inside arrays.
    present = " && ".join(
        "exists($" + "".join(f'."{step}"' for step in (*steps, n)) + ")"
        for n in names
        for steps in _READ_IN_TWO_OBJECTS[n]
    )
    parsed = f"({document})::jsonb"
    paired = f"jsonb_path_match({parsed}, {quoted('strict ' + present)}, '{{}}', true)"
    mentioned = spelling.occurs(stored, element.mentioning, 1)
    # Every other document parsed all the same (its value unused): the scan then reads each
    # document's JSON once whichever branch it takes.
    rest = f"WHEN {parsed} IS NULL THEN 0 " if element.parse_every else ""
    return (
        f"(CASE WHEN {mentioned} AND ({as_usual}) THEN (CASE WHEN {paired} THEN 0 ELSE 1 END) "
        f"{rest}ELSE 0 END)"
    )


class repeated_member(_NamesAlong):  # noqa: N801
    """True when an object along one of ``paths`` holds that path's member name more than once.

    JSON leaves repeated names open (RFC 8259); kandev-dq reads the last one on both dialects
    (``docs/interpretations.md``) and names such messages (AC-23b, AC-19). Names are compared
    decoded. ``doc`` is a :class:`metadata_doc` built ``as_text``. One text test over every name
    of ``paths`` decides which documents are parsed and walked; it reads ``stored``, the
    metadata text the document comes from (an unreadable one is read as ``{}``, which repeats
    nothing), so that the test does not rebuild the document once per name.

    With ``mentioning`` (a string value), only messages whose text writes that JSON string (or
    any escape) are tested: the names of ``paths`` are read only in messages holding it.
    """

    inherit_cache = True


def _named_members(paths: tuple[tuple[str, ...], ...]) -> dict[tuple[str, ...], list[str]]:
    """Each object the paths walk through (as the steps reaching it), with the names read in it."""
    objects: dict[tuple[str, ...], list[str]] = {}
    for path in paths:
        for depth, name in enumerate(path):
            names = objects.setdefault(path[:depth], [])
            if name not in names:
                names.append(name)
    return objects


@compiles(repeated_member, "sqlite")
def _repeated_sqlite(element, compiler, **kw):
    doc, stored = (compiler.process(clause, **kw) for clause in element.clauses)
    counts = " OR ".join(
        f"(SELECT count(*) FROM json_each({sqlite_object(doc, steps)}) AS kandev_named "
        f"WHERE kandev_named.key = {quoted(name)}) > 1"
        for steps, names in _named_members(element.paths).items()
        for name in names
    )
    may_repeat = _may_repeat(SQLITE_NAMES, stored, doc, element.paths, element.mentioning)
    return f"(CASE WHEN {may_repeat} THEN ({counts}) ELSE 0 END)"


@compiles(repeated_member, "postgresql")
def _repeated_postgresql(element, compiler, **kw):
    # ``json`` keeps every member; its path operators take the last of repeated names, as
    # ``jsonb`` does, and json_each lists every member, names decoded. Only an object may be
    # listed (json_each raises else). Parsed only when the text test lets the document through.
    document, stored = (compiler.process(clause, **kw) for clause in element.clauses)
    doc = f"({document})::json"
    counts = " OR ".join(
        f"(CASE WHEN json_typeof({_pg_object(doc, steps)}) = 'object' THEN "
        f"(SELECT count(*) FROM json_each({_pg_object(doc, steps)}) AS kandev_named "
        f"WHERE kandev_named.key = {quoted(name)}) > 1 ELSE FALSE END)"
        for steps, names in _named_members(element.paths).items()
        for name in names
    )
    names = postgres_names(compiler)
    may_repeat = _may_repeat(names, stored, doc, element.paths, element.mentioning)
    return f"(CASE WHEN {may_repeat} THEN ({counts}) ELSE FALSE END)"


def _pg_object(doc: str, steps: tuple[str, ...]) -> str:
    return f"({doc} #> {pg_path(steps)})" if steps else doc
