"""Activation-key verdicts (CONTRACT §5, the seed): write-once, atomic pair, four states,
sentinel and microsecond boundary, plus the AC-25 disclosure a consumer needs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar, NotRequired, TypedDict

from kandev_dq.contract.instants import (
    BACKFILL_THROUGH,
    CAPTURE_SINCE,
    EXECUTION_SINCE,
    Instant,
    Precision,
    parse_key,
)
from kandev_dq.contract.rule_index import WRITE_ONCE_LEDGER
from kandev_dq.contract.states import SELF_HEAL, STATES, explain_state
from kandev_dq.facts.activation import (
    activation_facts,
    disclosure_facts,
    sentinel_backfill_facts,
)
from kandev_dq.facts.shapes import ActivationFacts, DisclosureFacts, SentinelBackfillFacts
from kandev_dq.text import command_options
from kandev_dq.verdicts.base import (
    REQUIRED,
    Family,
    Finding,
    LiveScopedVerdict,
    Verdict,
    WindowedVerdict,
    counted,
)

_ONE_SECOND = timedelta(seconds=1)
#: The rule disclosing a write-once record that begins with this run: a fact of the records
#: database, not of the store (its type, as GX derives it from the class name).
BASELINE_DISCLOSURE = "expect_write_once_baseline_to_predate_this_run"


def accept_command(ledger: dict[str, Any], key: str) -> str:
    """How a permanent AC-24 failure is cleared after a legitimate reset (a restored backup):
    the command accepting ``key``'s new value on the store, in the records database, the run
    used (``ledger``'s ``store``, ``records`` and the user's ``name`` for the store), its
    reason left to fill in."""
    options = command_options(
        (
            ("--store", ledger.get("store") or "STORE"),
            ("--store-name", ledger.get("name")),
            ("--records", ledger.get("records")),
        )
    )
    return f"kandev-dq ledger accept {options} --key {key} --reason TEXT"


ACTIVATION = Family("kandev.activation_facts", activation_facts, windowed=True)
SENTINEL_BACKFILL = Family(
    "kandev.sentinel_backfill_facts", sentinel_backfill_facts, ("window_minutes",)
)
DISCLOSURE = Family("kandev.disclosure_facts", disclosure_facts)

#: What the ledger rules read: the activation keys (of :class:`ActivationFacts`) and, beside
#: them under the write-once ledger metric's name, what the records database holds for this
#: store (``{"first_seen", "baseline"}``, and ``store``, ``records``, ``name`` as a remedy
#: names them).
LedgerFacts = TypedDict(
    "LedgerFacts",
    {"keys": dict[str, str | None], WRITE_ONCE_LEDGER: NotRequired[dict[str, Any]]},
)


class _ActivationVerdict(LiveScopedVerdict):
    facts: ClassVar[Family] = ACTIVATION


class _LedgerVerdict(_ActivationVerdict):
    """A rule judging the keys against the records database's key ledger (AC-24).

    One snapshot cannot show a rewrite, so each run compares the keys with the first value ever
    seen of each key of this store, kept in the records database of the project the run belongs
    to. The metric :data:`WRITE_ONCE_LEDGER` (kandev-dq's run layer) records this run's first
    sightings and hands back ``{"first_seen", "baseline"}``, the same way for ``kandev-dq check``
    and for a checkpoint run through GX's own API, so both share one baseline.
    """

    judged_metrics: ClassVar[tuple[str, ...]] = (WRITE_ONCE_LEDGER,)

    @staticmethod
    def ledger(facts: LedgerFacts) -> dict[str, Any]:
        return facts.get(WRITE_ONCE_LEDGER) or {}


class ExpectActivationKeysToBeWriteOnce(_LedgerVerdict):
    """No activation key ever changes or disappears once seen (AC-24, seed point 5).

    The keys are compared as the ledger records them (:func:`~kandev_dq.sql.keys.read_keys`: a
    huge value as its head, length and digest). A legacy second-precision key is not to be
    "upgraded" either: any change is an error naming the old and new values.
    """

    def judge(self, facts: LedgerFacts) -> Finding:
        ledger = self.ledger(facts)
        first_seen = ledger.get("first_seen")
        if first_seen is None:
            return Finding(
                success=False,
                observed_value="no ledger",
                message=(
                    "no key ledger for this run: rewrites cannot be seen; run it in a project "
                    "`kandev-dq init` made, whose results store is the records database"
                ),
            )
        now = facts["keys"]  # read as the ledger records them
        changed = [
            {"key": key, "first_seen": old, "now": now.get(key)}
            for key, old in sorted(first_seen.items())
            if now.get(key) != old
        ]
        if not changed:
            return Finding(
                success=True,
                observed_value=0,
                message="every key seen before still holds its first value",
            )
        said = "; ".join(f"{c['key']}: {c['first_seen']!r} -> {c['now']!r}" for c in changed)
        return Finding(
            success=False,
            observed_value=len(changed),
            message=(
                f"key rewritten or deleted: {said}; if this was a legitimate reset (a restored "
                "backup), record it with "
                + ", ".join(f"`{accept_command(ledger, c['key'])}`" for c in changed)
            ),
            unexpected_count=len(changed),
            sample=changed,
        )


class ExpectWriteOnceBaselineToPredateThisRun(_LedgerVerdict):
    """Discloses a write-once record that begins with this run (AC-24).

    Write-once is judged against the records of earlier runs; on the first run against a store
    (a new machine, a new records database) there are none, so the write-once rule passes
    vacuously. This info rule says so instead of letting that pass read as a proof.
    """

    def judge(self, facts: LedgerFacts) -> Finding:
        baseline = self.ledger(facts).get("baseline")
        if not baseline:
            return Finding(
                success=False,
                observed_value="no baseline",
                message=(
                    "no write-once baseline for this run: rewrites cannot be seen; run it in a "
                    "project `kandev-dq init` made, whose results store is the records database"
                ),
            )
        taken = baseline.get("taken_at")
        if baseline.get("recorded_now"):
            return Finding(
                success=False,
                observed_value=taken,
                message=(
                    "write-once baseline recorded now; rewrites before this run cannot be seen"
                ),
            )
        return Finding(
            success=True,
            observed_value=taken,
            message=f"write-once baseline taken at {taken}",
        )


class ExpectBackfillThroughNotAfterCaptureSince(_ActivationVerdict):
    """``backfill_through <= capture_since`` when both are instants (AC-24 points 1 and 4).

    backfill_through is a MAX over messages the backfill covered, capture_since is sampled
    after that INSERT: a high-water mark past the capture boundary over-claims coverage.
    """

    def judge(self, facts: ActivationFacts) -> Finding:
        through = facts["described"][BACKFILL_THROUGH]
        capture = facts["described"][CAPTURE_SINCE]
        if through["kind"] != "instant" or capture["kind"] != "instant":
            return Finding(
                success=True,
                observed_value="not comparable",
                message="not both instants: nothing to order",
            )
        later = parse_key(through["raw"]) > parse_key(capture["raw"])
        observed = {"backfill_through": through["raw"], "capture_since": capture["raw"]}
        if later:
            return Finding(
                success=False,
                observed_value=observed,
                message="backfill_through is later than capture_since",
                unexpected_count=1,
            )
        return Finding(
            success=True, observed_value=observed, message="backfill_through precedes capture_since"
        )


class ExpectActivationKeysToBePaired(_ActivationVerdict):
    """capture_since and backfill_through are both present or both absent (AC-24d).

    The backfill and both of its keys commit in one transaction. A partial pair left by the
    pre-amendment three-statement writer is repaired by the next migrate run (AC-24d rev. 4).
    """

    def judge(self, facts: ActivationFacts) -> Finding:
        present = {k: facts["keys"][k] is not None for k in (CAPTURE_SINCE, BACKFILL_THROUGH)}
        if len(set(present.values())) == 1:
            word = "both present" if present[CAPTURE_SINCE] else "both absent"
            return Finding(
                success=True, observed_value=word, message=f"the backfill key pair is {word}"
            )
        missing = next(k for k, here in present.items() if not here)
        return Finding(
            success=False,
            observed_value=f"only {next(k for k, here in present.items() if here)}",
            message=(
                f"partial key pair: {missing} is missing; the next `kandev-dq migrate` run "
                "repairs it"
            ),
            unexpected_count=1,
        )


class ExpectActivationStateToBeInSet(_ActivationVerdict):
    """The store's AC-24c state is one of ``accepted_states``.

    The state is read from key presence alone (capture_since, execution_since), never from
    rows: ``fully_activated``, ``capture_only``, ``execution_only``, ``not_activated``.
    """

    arguments: ClassVar[dict[str, Any]] = {
        **_ActivationVerdict.arguments,
        "accepted_states": REQUIRED,
    }
    accepted_states: list[str]

    def judge(self, facts: ActivationFacts) -> Finding:
        unknown = set(self.accepted_states) - set(STATES)
        if unknown:
            return Finding(
                success=False,
                observed_value=facts["state"],
                message=f"unknown state(s) accepted: {sorted(unknown)}",
            )
        state = facts["state"]
        accepted = ", ".join(self.accepted_states)
        if state in self.accepted_states:
            return Finding(
                success=True,
                observed_value=state,
                message=f"state {state} is accepted ({accepted})",
            )
        # The state alone reads like an unexplained failure: say what it means, why a store
        # reaches it and what moves it on (AC-24c; upstream's build never writes AC-33b's key).
        explained = explain_state(state, amended=facts.get("amended"))
        return Finding(
            success=False,
            observed_value=state,
            message=f"state {state} is not accepted ({accepted}). {explained}",
            unexpected_count=1,
        )


class ExpectExecutionSinceOnlyOnAmendedSchema(_ActivationVerdict):
    """execution_since is present only when AC-33 clauses 1-3 hold in the live schema (AC-33b).

    The key says "the amended shape was observed"; present on a pre-amendment table, it
    lets consumers trust execution ids that the schema cannot hold (AC-24b, AC-33a).
    """

    def judge(self, facts: ActivationFacts) -> Finding:
        present = facts["keys"][EXECUTION_SINCE] is not None
        if present and not facts["amended"]:
            why = "; ".join(facts["schema_findings"]) or "the table is missing"
            return Finding(
                success=False,
                observed_value="key present, schema not amended",
                message=f"execution_since present but {why}",
                unexpected_count=1,
            )
        return Finding(
            success=True,
            observed_value="consistent",
            message="execution_since agrees with the live schema",
        )


class ExpectExecutionSinceNotPendingSelfHeal(_ActivationVerdict):
    """The amended schema holds and execution_since is written (AC-33b self-heal case).

    Amended but key absent means a build that does not write the key (upstream's current
    build never does) or a committed rebuild whose key write failed; the next migrate run
    writes it with no rebuild. A warning, since nothing is lost meanwhile.
    """

    def judge(self, facts: ActivationFacts) -> Finding:
        if facts["amended"] and facts["keys"][EXECUTION_SINCE] is None:
            return Finding(
                success=False,
                observed_value="self-heal pending",
                message=f"self-heal pending. {SELF_HEAL}",
                unexpected_count=1,
            )
        return Finding(success=True, observed_value="consistent", message="no self-heal pending")


class ExpectActivationKeysToBeWellFormed(_ActivationVerdict):
    """Every present key is an RFC3339 instant; only backfill_through may be ``''`` (AC-24f).

    A key in a column's storage form (``2026-07-30 01:39:37+00:00``) or any other text is a
    key no consumer can compare exactly (AC-24e). The sentinel is never parsed.
    """

    def judge(self, facts: ActivationFacts) -> Finding:
        bad = [
            {"key": name, "value": d["raw"], "error": d["error"]}
            for name, d in facts["described"].items()
            if d["kind"] == "malformed"
        ]
        observed = {name: d["kind"] for name, d in facts["described"].items()}
        if bad:
            said = "; ".join(f"{b['key']}: {b['error']}" for b in bad)
            return Finding(
                success=False,
                observed_value=observed,
                message=f"malformed key: {said}",
                unexpected_count=len(bad),
                sample=bad,
            )
        return Finding(
            success=True, observed_value=observed, message="every present key is well formed"
        )


def _second_precision_keys(facts: ActivationFacts) -> tuple[list[str], list[str]]:
    """Second-precision keys split into (written by the amended build, legacy).

    Amendment 1 writes execution_since before the backfill runs (AC-33c), so a backfill key
    whose second reaches execution_since (key + 1 s > execution_since: truncation moved it at
    most one second back) was written by a build that must write RFC3339Nano (AC-24 point 3).
    One wholly before it (or with no execution_since) is the pre-amendment build's (point 5):
    an upgrade and a restart lie between the two builds' writes.
    """
    described = facts["described"]
    execution = described[EXECUTION_SINCE]
    execution_at = parse_key(execution["raw"]) if execution["kind"] == "instant" else None
    amended, legacy = [], []
    for name, d in described.items():
        if d["kind"] != "instant" or d["precision"] != Precision.SECOND:
            continue
        key = parse_key(d["raw"])
        written_after = execution_at is not None and Instant(key.micro + _ONE_SECOND) > execution_at
        (amended if name == EXECUTION_SINCE or written_after else legacy).append(name)
    return amended, legacy


class ExpectNewKeysToCarrySubsecondPrecision(_ActivationVerdict):
    """Keys written by the amended build carry sub-second precision (AC-24 point 3).

    execution_since, and any backfill key at or after it, was written by a build that
    claims Amendment 1 and must write RFC3339Nano: a second-precision value there makes up
    to a second of rows unclassifiable. (A key written exactly within execution_since's own
    second and truncated before it reads as legacy: the disclosed residual.)
    """

    def judge(self, facts: ActivationFacts) -> Finding:
        amended, _ = _second_precision_keys(facts)
        if amended:
            return Finding(
                success=False,
                observed_value=amended,
                message=(
                    f"second-precision key(s) {', '.join(amended)} written by the amended build, "
                    "which must write RFC3339Nano"
                ),
                unexpected_count=len(amended),
            )
        return Finding(
            success=True,
            observed_value=[],
            message="every key written by the amended build is sub-second",
        )


class ExpectLegacyKeysToBeDisclosed(_ActivationVerdict):
    """A legacy second-precision key (pre-amendment build) is reported as the disclosed
    limitation of seed point 5 — up to one second of boundary ambiguity — never repaired."""

    def judge(self, facts: ActivationFacts) -> Finding:
        _, legacy = _second_precision_keys(facts)
        if legacy:
            return Finding(
                success=False,
                observed_value=legacy,
                message=(
                    f"legacy second-precision key(s) {', '.join(legacy)}: up to 1 s of boundary "
                    "ambiguity, a disclosed limitation (seed point 5); never rewrite them"
                ),
                unexpected_count=len(legacy),
            )
        return Finding(success=True, observed_value=[], message="no legacy second-precision key")


class ExpectBackfillThroughToCoverQualifyingMessages(_ActivationVerdict):
    """Every qualifying message created at or before backfill_through has a subagent row
    with its (task_session_id, tool_call_id): otherwise the key over-claims coverage
    (AC-24 point 1, AC-24d's MAX-before-INSERT rule), compared exactly (AC-24e)."""

    def judge(self, facts: ActivationFacts) -> Finding:
        return counted(
            facts.get("uncovered_messages"),
            "qualifying message(s) at or before backfill_through without a subagent row",
            "backfill_through over-claims coverage",
        )


class ExpectNoBackfillRowsAfterCaptureSince(_ActivationVerdict):
    """No backfill row is observed at or after capture_since (AC-24 point 4, AC-24e).

    capture_since is sampled after the backfill INSERT; a backfill row past it means the
    key was sampled too early (e.g. at transaction start) and over-claims live capture.
    """

    def judge(self, facts: ActivationFacts) -> Finding:
        return counted(
            facts.get("backfill_after_capture"),
            "backfill row(s) observed at or after capture_since",
            "capture_since was sampled too early",
        )


class ExpectNoBackfillRowsAfterBackfillThrough(_ActivationVerdict):
    """Backfill rows observed after backfill_through are an under-claim: the key names an
    earlier mark than the backfill reached. Harmless under AC-25, disclosed at info."""

    def judge(self, facts: ActivationFacts) -> Finding:
        return counted(
            facts.get("backfill_after_through"),
            "backfill row(s) observed after backfill_through",
            "the key under-claims (disclosed, not an error)",
        )


class _SentinelVerdict(WindowedVerdict):
    """A rule judging, under the ``''`` sentinel only, one side of the window (``part``)."""

    facts: ClassVar[Family] = SENTINEL_BACKFILL
    part: ClassVar[str] = ""
    noun: ClassVar[str] = ""
    fix: ClassVar[str] = ""

    def judge(self, facts: SentinelBackfillFacts) -> Finding:
        if not facts["sentinel"]:
            return Finding(
                success=True,
                observed_value="not the sentinel",
                message="backfill_through is not ''",
            )
        return counted(facts.get(self.part), self.noun, self.fix)


class ExpectNoBackfillRowsUnderSentinel(_SentinelVerdict):
    """``backfill_through = ''`` means the backfill matched nothing (AC-24f), so no backfill
    row may exist — the "derived from what this attempt inserted" defect publishes exactly
    that (AC-24 point 1). Rows just before capture_since are judged by the next rule."""

    part: ClassVar[str] = "outside_window"
    noun: ClassVar[str] = "backfill row(s) on a store whose backfill matched nothing"
    fix: ClassVar[str] = "backfill_through was derived from what one attempt inserted"


class ExpectNoBackfillRowsInsideSentinelWindow(_SentinelVerdict):
    """Under the ``''`` sentinel, backfill rows observed within ``window_minutes`` before
    capture_since can come from a message committed between the MAX and the INSERT under
    PostgreSQL READ COMMITTED (AC-24d rev. 3): a warning, not an error."""

    part: ClassVar[str] = "inside_window"
    noun: ClassVar[str] = "backfill row(s) just before capture_since under the '' sentinel"
    fix: ClassVar[str] = "a message committed between the MAX and the INSERT"


class ExpectPopulationToBeDisclosed(Verdict):
    """The AC-25 disclosure: rows by source, by side of each key, and by execution identity.

    Always passes; its observed value is the table a consumer needs to compare backfill and
    live rows honestly. A real UUID before execution_since counts as real (AC-25 rev. 4).
    """

    facts: ClassVar[Family] = DISCLOSURE

    def judge(self, facts: DisclosureFacts) -> Finding:
        population = facts["population"]
        total = sum(row["rows"] for row in population)
        message = f"{total} rows in {len(population)} population cell(s)"
        return Finding(
            success=True,
            observed_value=population,
            message=message,
            unexpected_count=None,
            sample=population,
        )
