"""One rule, explained: its AC ids, its sentence, and the query listing what it counts.

``kandev-dq explain EXPECTATION`` reads the rule's family of facts in one pinned read-only
snapshot (:func:`kandev_dq.store.snapshot.pinned`), exactly as a check does, and shows the
listing query that family declared, failed or not (:mod:`kandev_dq.sql.listing`). With
``run`` the query runs in that same snapshot: the total counted in SQL, the rows read with
every value cut in SQL (:func:`kandev_dq.sql.shown.shown`), capped unless all are asked for.
The rules are the code's own suites (:func:`kandev_dq.project.files.suite_plan`, read from the rule
index), at their defaults, each judged by its verdict (:mod:`kandev_dq.verdicts`): describing a
rule never imports GX.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.rule_index import WRITE_ONCE_LEDGER
from kandev_dq.contract.thresholds import DETAILS_KEY, CountThresholds, severity_when_fired
from kandev_dq.errors import KandevDqError, did_you_mean
from kandev_dq.project.deviations import project_entry
from kandev_dq.project.files import default_project
from kandev_dq.project.plan import SUITE_NAMES, suite_plan
from kandev_dq.records import Records, records_url
from kandev_dq.records.identity import accept_options, records_key
from kandev_dq.sql.messages import sample_of
from kandev_dq.store.access import open_store
from kandev_dq.store.reference import StoreRef, missing_sqlite_file, resolve_url
from kandev_dq.store.snapshot import PinnedRead, facts_for, pinned
from kandev_dq.text import one_line
from kandev_dq.verdicts import verdict_of
from kandev_dq.verdicts.base import Finding, Verdict, within_thresholds

#: Rows ``explain --run`` shows in its table (the total is always counted).
SHOWN_ROWS = 50
#: The observed value of a rule that counts rows a store cannot hold yet (a missing table or
#: column): its finding's message says what is missing.
NOT_APPLICABLE = "not applicable"
COUNTS_NO_ROWS = "this rule counts no rows (it judges keys, the schema or a state)"


@dataclass(frozen=True)
class Rule:
    """One expectation of a suite: the verdict judging it, given the arguments that suite gives
    it, and the severity it runs at (its AC ids and sentence are the rule index's)."""

    suite: str
    #: The verdict of the expectation, given the suite's arguments.
    expectation: Verdict
    severity: str
    #: False: the project's suites do not run it (it is shown as kandev-dq's suites run it).
    in_project: bool = True
    #: The count thresholds the project's suite entry gives it (None: any count fails).
    thresholds: CountThresholds | None = None

    @property
    def name(self) -> str:
        return self.expectation.expectation


def rules() -> dict[str, Rule]:
    """Every expectation of the code's suites by its type name (the first suite holding it)."""
    found: dict[str, Rule] = {}
    for suite in SUITE_NAMES:
        for planned in suite_plan(suite):
            if planned.type not in found:
                verdict = verdict_of(planned.type)(**planned.kwargs)
                found[planned.type] = Rule(suite, verdict, verdict.severity.value)
    return found


def rule_named(name: str, project: Path | None = None) -> Rule:
    """Rule ``name`` as ``project``'s suites run it, as ``check`` would: the severity and the
    arguments of the first of its suites holding it (without ``project``: kandev-dq's own)."""
    known = rules()
    if name not in known:
        raise KandevDqError(
            f"no expectation {name!r} (`kandev-dq rules` lists them, e.g. {next(iter(known))})"
            + did_you_mean(name, known)
        )
    if project is None:
        return known[name]
    held = project_entry(project, name)
    if held is None:
        return replace(known[name], in_project=False)
    try:
        verdict = verdict_of(name)(**held.arguments)
    except (TypeError, ValueError) as exc:
        raise KandevDqError(
            one_line(f"{name} in the project's suite {held.suite}: arguments it cannot take: {exc}")
        ) from None
    return Rule(held.suite, verdict, held.severity, thresholds=held.thresholds)


def finding_in(
    read: PinnedRead, engine: sa.Engine, rule: Rule, ledger: dict[str, Any] | None = None
) -> Finding:
    """``rule``'s verdict on the snapshot ``read`` pins on ``engine``, with its listing (a
    write-once rule's with ``ledger``, the records database's, :func:`recorded_ledger`)."""
    verdict = rule.expectation
    family, params = verdict.facts, verdict.params()
    facts = dict(facts_for(engine, family.key(params), lambda conn: family.compute(conn, **params)))
    if ledger is not None:
        facts[WRITE_ONCE_LEDGER] = ledger
    return within_thresholds(verdict.finding(facts), rule.thresholds)


@contextmanager
def snapshot_of(target: str | StoreRef | None) -> Iterator[tuple[Any, PinnedRead]]:
    """The store ``target`` opened read-only, and one pinned snapshot of it."""
    store = open_store(target, read_only=True)
    try:
        with pinned(store.engine) as read:
            yield store, read
    finally:
        store.dispose()


@dataclass
class Explanation:
    expectation: str
    suite: str
    severity: str
    rules: list[str]
    sentence: str
    #: False: the project's suites do not run the rule (shown as kandev-dq's suites run it).
    in_project: bool
    store: str
    dialect: str
    #: The listing query; None for a rule that counts no rows (keys, schema, a state).
    query: str | None
    success: bool
    unexpected_count: int | None
    message: str
    #: False when the rule was not judged here (a ledger rule without a record of the store).
    judged: bool = True
    #: Why ``query`` is None: the rule counts no rows, or this store lacks what it counts.
    no_query: str = ""
    #: With ``run``: how many rows the query returns, and the rows read (capped or all).
    total: int | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


def recorded_ledger(
    project: Path, records: str | None, store: StoreRef, conn: sa.Connection
) -> dict[str, Any] | None:
    """What the write-once rules judge, as the records database of ``project`` holds it for
    ``store`` (named as a check names it, its identity read through ``conn``), read without
    recording (no first sighting, no baseline taken), with what the rule's remedy names: None
    when no run has recorded the store there (AC-24)."""
    url = records_url(project, records)
    resolved = resolve_url(url)
    if missing_sqlite_file(resolved):
        return None
    with Records(url) as opened:
        identity = records_key(opened, store, conn)
        baseline = opened.baseline(identity)
        if baseline is None:
            return None
        return {
            "first_seen": opened.expected_values(identity),
            "baseline": baseline.parameter(),
        } | accept_options(store, opened)


def explain(
    target: str | StoreRef | None,
    name: str,
    *,
    run: bool = False,
    every_row: bool = False,
    project: Path | None = None,
    records: str | None = None,
) -> Explanation:
    """Explain rule ``name`` on ``target``; with ``run``, list its rows (all with ``every_row``,
    else the first :data:`SHOWN_ROWS`). Read-only, one snapshot. A write-once rule is judged
    against the key ledger of ``project``'s records database, as ``check`` judges it."""
    rule = rule_named(name, project)
    with snapshot_of(target) as (store, read):
        ledger = None
        judges_ledger = WRITE_ONCE_LEDGER in rule.expectation.judged_metrics
        if judges_ledger:
            ledger = recorded_ledger(
                project or default_project(), records, store.ref, read.connection
            )
        found = finding_in(read, store.engine, rule, ledger)
        if judges_ledger and ledger is None:
            found = Finding(
                success=True,
                observed_value=None,
                message=(
                    "no run recorded this store in the records database; "
                    "`kandev-dq check` takes its write-once baseline"
                ),
            )
        explained = Explanation(
            expectation=rule.name,
            suite=rule.suite,
            severity=severity_when_fired(
                (found.details.get(DETAILS_KEY) or {}).get("fired"), rule.severity
            ),
            rules=list(rule.expectation.rules),
            sentence=rule.expectation.rule_text,
            in_project=rule.in_project,
            store=store.shown,
            dialect=store.dialect,
            query=found.listing.sql() if found.listing is not None else None,
            success=found.success,
            unexpected_count=found.unexpected_count,
            message=found.message,
            judged=not (judges_ledger and ledger is None),
        )
        if found.listing is None:  # never "counts no rows" for a rule whose table is missing
            explained.no_query = (
                f"this rule counts rows, but not on this store: {found.message}"
                if found.observed_value == NOT_APPLICABLE
                else COUNTS_NO_ROWS
            )
        if run and found.listing is not None:
            listed = found.listing.select
            conn = read.connection
            explained.total = conn.execute(
                sa.select(sa.func.count()).select_from(listed.subquery("listed"))
            ).scalar_one()
            explained.columns = [column.key for column in listed.selected_columns]
            explained.rows = sample_of(conn, listed, None if every_row else SHOWN_ROWS)
    return explained
