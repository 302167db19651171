"""Stored-text rules: values that the SQL would otherwise read silently wrong, named row by row.

All judge one family of facts (:mod:`kandev_dq.facts.stored_text`), read once per run.
"""

from __future__ import annotations

from typing import ClassVar

from kandev_dq.facts.shapes import StoredTextFacts
from kandev_dq.facts.stored_text import stored_text_facts
from kandev_dq.sql.dialect import JSON_MAX_DEPTH
from kandev_dq.verdicts.base import Family, Finding, Verdict, counted

STORED_TEXT = Family("kandev.stored_text_facts", stored_text_facts)
#: How many offending values a message names (the sample holds more).
NAMED = 5


class ExpectMessageMetadataToBeJson(Verdict):
    """Every message's metadata is JSON, NULL, ``''`` or ``'null'`` (AC-23b).

    Text that is none of these (``{bad``, ``{"a":}``, a truncated document), or JSON nested
    deeper than :data:`kandev_dq.sql.dialect.JSON_MAX_DEPTH` levels, is read as ``{}``
    on both dialects, as AC-23b reads NULL: one bad row aborts nothing, and it counts as a
    message of no kind, so the backfill skips it and the shortfall never sees it. That is the
    reason for a finding: a subagent message among them is invisible to both, so the store
    would look healthier than it is. A **warning**, not an error: every other rule holds for
    the rows it can read, and the rows are named here (SQLite: ``json_valid``; PostgreSQL:
    the rows ``::jsonb`` rejects, located without a second scan when a statement has already
    met them).

    On SQLite, metadata stored as a BLOB, an integer or a real is named too, whatever it
    holds: a BLOB is read as the text of its bytes (so a subagent message bound as bytes is
    still backfilled and counted by writer health), a number is a scalar with no kind. The
    contract's column is TEXT; a writer binding anything else is named, never skipped.
    """

    facts: ClassVar[Family] = STORED_TEXT

    def listing(self, facts: StoredTextFacts):
        return facts["metadata"].get("listing")

    def judge(self, facts: StoredTextFacts) -> Finding:
        part = facts["metadata"]
        count = part["count"]
        if not count:
            return Finding(
                success=True,
                observed_value=0,
                message="every message's metadata is JSON, NULL, '' or 'null'",
                unexpected_count=0,
            )
        not_text = part.get("not_text", 0)  # SQLite: stored as a BLOB, integer or real
        said = []
        if count > not_text:  # the rest: text that is not JSON
            said.append(
                f"{count - not_text} message(s) hold metadata text that is not "
                f"JSON (or nests deeper than {JSON_MAX_DEPTH} levels): read as {{}} on both "
                "dialects (AC-23b), so the backfill skips them and writer health cannot see "
                "them; a subagent among them goes unrecorded and unchecked"
            )
        if not_text:
            said.append(
                f"{not_text} message(s) hold metadata stored as a BLOB, an integer or a real, "
                "not as text (SQLite, stored_type in the sample): a BLOB is read as the text of "
                "its bytes, a number has no kind (AC-23b), so a writer binding bytes is "
                "detected, not trusted"
            )
        return Finding(
            success=False,
            observed_value=count,
            message="; ".join(said) + ". Rewrite them as JSON text",
            unexpected_count=count,
            sample=part["sample"],
        )


class ExpectMessageMetadataMemberNamesToBeUnique(Verdict):
    """No message's metadata repeats a member name the reading takes (AC-23b, AC-19).

    JSON leaves a repeated member name open (RFC 8259): ``{"tool_call_id": "a",
    "tool_call_id": "b"}`` may mean either. Both dialects read the last one
    (``docs/interpretations.md``), so every rule classifies the message the same way on SQLite
    and PostgreSQL (AC-19); but a writer that repeats a name may have meant the first, so such
    messages are named. Checked along every member path the subagent reading takes: the kind
    in every message, the AC-21 predicate's and the row's fields in every message whose kind
    may be ``subagent_task`` (no other message's fields are read); names compared decoded. A
    **warning**: the verdicts hold under the decided reading.
    """

    facts: ClassVar[Family] = STORED_TEXT

    def judge(self, facts: StoredTextFacts) -> Finding:
        return counted(
            facts["repeated_names"],
            "message(s) repeating a member name the rules read in their metadata",
            "read with the last one winning on both dialects (AC-19), which a writer may not "
            "have meant; rewrite them with each name once",
        )


class ExpectTimestampsInRecognisedUtcForm(Verdict):
    """Every stored timestamp the rules compare is in a UTC text form of CONTRACT §1 (AC-24e).

    SQLite keeps whatever text a writer gave it; the exact-instant construct reads the
    forms of CONTRACT §1 (space or ``T``, 0-9 fraction digits, ``Z``/``+00:00``/none). Any
    other value (``30/07/2026``, ``2026-07-30 01:39:37+02:00``, an epoch number) would be
    compared with the keys and with other columns as if it were one of them: silently
    misclassified. This rule names those rows instead (``task_session_messages.created_at``
    and ``updated_at``; ``task_session_subagents.observed_at``, ``settled_at`` and
    ``updated_at``), pushed down as GLOB patterns plus a calendar check. An error: every
    comparison involving such a row is unreliable. PostgreSQL's typed ``TIMESTAMP`` columns
    cannot hold such values (not applicable there).
    """

    facts: ClassVar[Family] = STORED_TEXT

    def listing(self, facts: StoredTextFacts):
        return facts["timestamps"].get("listing")

    def judge(self, facts: StoredTextFacts) -> Finding:
        part = facts["timestamps"]
        if not part["applicable"]:
            return Finding(
                success=True,
                observed_value="not applicable",
                message=(
                    f"{facts['dialect']} TIMESTAMP columns hold typed values: no text to misread"
                ),
            )
        count = part["count"]
        if not count:
            return Finding(
                success=True,
                observed_value=0,
                message="every compared timestamp is in a recognised UTC form",
                unexpected_count=0,
            )
        where = ", ".join(f"{column}: {n}" for column, n in part["by_column"].items())
        return Finding(
            success=False,
            observed_value=part["by_column"],
            message=f"{count} timestamp value(s) in no recognised UTC text form ({where}): the "
            "exact-instant construct would misread them, so their comparisons with the keys "
            "and with other columns are unreliable (AC-24e); rewrite them in a CONTRACT §1 "
            "form (e.g. 2026-07-30 01:39:37.271235+00:00)",
            unexpected_count=count,
            sample=part["sample"],
        )


class ExpectTimestampsToBeWithinRange(Verdict):
    """Every compared timestamp is an instant a clock can have written (CONTRACT §1
    timestamps, AC-24e): not PostgreSQL's ``infinity`` or ``-infinity``, not before
    0001-01-02, not after this run's own clock plus a day (a row or message dated in year 9999).

    Such a value compares without error, so every rule would read it as real: a message dated
    ``infinity`` sits after every ``capture_since``, a row in year 9999 is "the writer's latest
    output" forever. This rule names those rows and messages instead, on both dialects; the
    other rules still evaluate (their samples show such a value as its text). An error: the
    comparisons involving them are meaningless.
    """

    facts: ClassVar[Family] = STORED_TEXT

    def listing(self, facts: StoredTextFacts):
        return facts["out_of_range"].get("listing")

    def judge(self, facts: StoredTextFacts) -> Finding:
        part = facts["out_of_range"]
        count = part["count"]
        if not count:
            return Finding(
                success=True,
                observed_value=0,
                message="every compared timestamp lies between 0001-01-02 and now + 1 day",
                unexpected_count=0,
            )
        named = "; ".join(
            f"{row['table']} {row['id']!r} {row['column']} {row['value']!r}"
            for row in part["sample"][:NAMED]
        )
        more = ", ..." if count > NAMED else ""
        return Finding(
            success=False,
            observed_value=part["by_column"],
            message=(
                f"{count} timestamp(s) no clock can have written ({named}{more}): infinite, "
                "before 0001-01-02 or after this run's clock plus a day, so every comparison "
                "with them is meaningless (CONTRACT §1, AC-24e); correct them at the source"
            ),
            unexpected_count=count,
            sample=part["sample"],
        )
