"""The four activation states (AC-24c): what each means, and how a store leaves it.

A check that reports a state a reviewer did not expect must say what it means, why a store
gets there, and the one command that moves it on; a bare "state capture_only not accepted"
reads like an unexplained failure. Every output (the check's text and JSON, the data docs
overview, the audit's SUMMARY.md) takes its words from :func:`explain_state`.
"""

from __future__ import annotations

from kandev_dq.contract.instants import CAPTURE_SINCE, EXECUTION_SINCE

FULLY_ACTIVATED = "fully_activated"
CAPTURE_ONLY = "capture_only"
EXECUTION_ONLY = "execution_only"
NOT_ACTIVATED = "not_activated"
STATES = (FULLY_ACTIVATED, CAPTURE_ONLY, EXECUTION_ONLY, NOT_ACTIVATED)


def state_of(keys: dict[str, str | None]) -> str:
    """AC-24c: the state is read from key presence alone, never from rows."""
    capture, execution = keys[CAPTURE_SINCE] is not None, keys[EXECUTION_SINCE] is not None
    return {
        (True, True): FULLY_ACTIVATED,
        (True, False): CAPTURE_ONLY,
        (False, True): EXECUTION_ONLY,
        (False, False): NOT_ACTIVATED,
    }[(capture, execution)]


_MEANING = {
    FULLY_ACTIVATED: (
        "fully activated (AC-24c): capture and the execution dimension are both in force, and "
        "AC-25's disclosure rules apply as written"
    ),
    CAPTURE_ONLY: (
        "capture works, but Amendment 1 is not in force (AC-24b): execution_since is absent, "
        "so no agent_execution_id on this store may be read as an execution identity"
    ),
    EXECUTION_ONLY: (
        "the execution dimension is trustworthy, but the backfill has not succeeded (AC-24a): "
        "there is no coverage boundary, all history is unknown fan-out, and the writer-health "
        "comparison is not run (AC-28a)"
    ),
    NOT_ACTIVATED: (
        "the feature has not activated on this store (AC-24c): rows may exist from live "
        "capture, but no absence of a row is evidence of anything"
    ),
}

#: The AC-33b self-heal case: the amended schema holds, execution_since was never written.
SELF_HEAL = (
    "The schema already holds AC-33 clauses 1-3, so this is the AC-33b self-heal case: the "
    "build that activated the store does not write execution_since (upstream's current build "
    "never does), or its key write failed. `kandev-dq migrate` completes it by writing only "
    "that key (no rebuild, no backfill); `kandev-dq migrate --dry-run` shows exactly that."
)
_NEXT = {
    CAPTURE_ONLY: (
        "The table is not in its amended shape (AC-33a): `kandev-dq migrate` amends it and "
        "then writes execution_since."
    ),
    EXECUTION_ONLY: "The backfill retries on the next `kandev-dq migrate` (AC-24a).",
    NOT_ACTIVATED: "`kandev-dq migrate` activates it (AC-17, AC-21, AC-24).",
}


def explain_state(state: str, *, amended: bool | None = None) -> str:
    """What ``state`` means and how the store moves on; ``amended``: AC-33 clauses 1-3 hold
    in the live schema (None when unknown)."""
    meaning = _MEANING.get(state)
    if meaning is None:
        return f"{state}: not an activation state"
    text = meaning[0].upper() + meaning[1:] + "."
    if state == CAPTURE_ONLY and amended:
        return f"{text} {SELF_HEAL}"
    if state == CAPTURE_ONLY and amended is None:
        return text
    nxt = _NEXT.get(state)
    return f"{text} {nxt}" if nxt else text
