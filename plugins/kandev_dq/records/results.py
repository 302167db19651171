"""Validation results: the rows GX reads and writes through
:class:`~kandev_dq.gx.results_store.RecordsStoreBackend`, one per GX key, and one reading of
a result (:func:`rule_result`): kandev-dq's severity word, verdict and message.

GX's own ``success`` ignores severity and its results nest an evaluation error per metric;
every command (``check``, progress, ``history``, the docs overview) reads a result through
:func:`rule_result`, so they agree on what failed and how badly. It reads a GX
``ExpectationValidationResult`` and the JSON GX stores for one alike: both answer ``.get``
(GX's result and configuration classes are ``DictDot``s).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from kandev_dq.contract.rule_index import severity_word
from kandev_dq.contract.severity import SEVERITIES, Severity
from kandev_dq.contract.thresholds import DETAILS_KEY, CountThresholds, severity_when_fired
from kandev_dq.errors import exception_message
from kandev_dq.records.tables import now_text, results, runs
from kandev_dq.sql.dialect import insert_if_absent

#: Results of one suite read at a time when looking for a store's newest.
SUITE_PAGE = 50


class Results:
    """The validation results' part of :class:`~kandev_dq.records.database.Records`."""

    engine: sa.Engine
    dialect: str

    def put_result(self, key: tuple[str, ...], value: str) -> None:
        suite, run_name, run_key = _result_parts(key)
        text = json.dumps(list(key))
        row = {"suite": suite, "run_name": run_name, "run_key": run_key, "value": value}
        with self.engine.begin() as conn:
            updated = conn.execute(
                results.update()
                .where(results.c.result_key == text)
                .values(**row, stored_at=now_text())
            ).rowcount
            if not updated:
                conn.execute(
                    insert_if_absent(self.dialect, results, ["result_key"]),
                    {**row, "result_key": text, "stored_at": now_text()},
                )

    def get_result(self, key: tuple[str, ...]) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(
                sa.select(results.c.value).where(results.c.result_key == json.dumps(list(key)))
            ).scalar()

    def results_of_runs(
        self, run_ids: list[tuple[str, str]]
    ) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """(suite, stored result JSON) of each suite each recorded run (run name, run key)
        validated, by run: one indexed read for them all."""
        found: dict[tuple[str, str], list[tuple[str, str]]] = {run: [] for run in run_ids}
        if not run_ids:
            return found
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(results.c.run_name, results.c.run_key, results.c.suite, results.c.value)
                .where(results.c.run_key.in_(sorted({key for _, key in run_ids})))
                .order_by(results.c.suite)
            )
            for row in rows:
                if (row.run_name, row.run_key) in found:
                    found[row.run_name, row.run_key].append((row.suite, row.value))
        return found

    def result_keys(self) -> list[tuple[str, ...]]:
        """Every stored key: GX's own listing. A run reads a bounded window instead
        (:meth:`newest_result_keys`, :meth:`results_of_newest_runs`, :meth:`newest_of_suite`)."""
        with self.engine.connect() as conn:
            return [tuple(json.loads(k)) for k in conn.scalars(sa.select(results.c.result_key))]

    def newest_result_keys(self, limit: int) -> list[tuple[str, ...]]:
        """The ``limit`` newest validation results' keys, newest first (by GX's run time)."""
        query = (
            sa.select(results.c.result_key)
            .where(results.c.run_key.is_not(None))
            .order_by(results.c.run_key.desc(), results.c.suite.desc())
            .limit(max(limit, 0))
        )
        with self.engine.connect() as conn:
            return [tuple(json.loads(k)) for k in conn.scalars(query)]

    def results_of_newest_runs(
        self, count: int, identity: str | None = None
    ) -> list[tuple[str, ...]]:
        """The keys of every result of the ``count`` newest run times, newest first; with an
        ``identity``, of the recorded runs of that store only."""
        mine = []
        if identity is not None:  # a page per store: another store's runs are not its own
            recorded = sa.select(runs.c.run_name, runs.c.run_key).where(
                runs.c.store_identity == identity
            )
            mine = [sa.tuple_(results.c.run_name, results.c.run_key).in_(recorded)]
        newest = (
            sa.select(results.c.run_key)
            .where(results.c.run_key.is_not(None), *mine)
            .distinct()
            .order_by(results.c.run_key.desc())
            .limit(max(count, 0))
        )
        with self.engine.connect() as conn:
            keys = list(conn.scalars(newest))
            if not keys:
                return []
            query = (
                sa.select(results.c.result_key)
                .where(results.c.run_key.in_(keys), *mine)
                .order_by(results.c.run_key.desc(), results.c.suite.desc())
            )
            return [tuple(json.loads(k)) for k in conn.scalars(query)]

    def newest_of_suite(self, suite: str, identity: str) -> tuple[str, ...] | None:
        """The key of the newest result of ``suite`` from a recorded run of the store
        ``identity`` (None: there is none). Read newest first, a page at a time, through the
        (suite, run key) index: a planner joining from the runs would read every run of the
        store."""
        for offset in itertools.count(0, SUITE_PAGE):
            query = (
                sa.select(results.c.result_key, results.c.run_name, results.c.run_key)
                .where(results.c.suite == suite, results.c.run_key.is_not(None))
                .order_by(results.c.run_key.desc())
                .limit(SUITE_PAGE)
                .offset(offset)
            )
            with self.engine.connect() as conn:
                page = conn.execute(query).all()
                if not page:
                    return None
                ours = set(
                    conn.execute(
                        sa.select(runs.c.run_name, runs.c.run_key).where(
                            runs.c.store_identity == identity,
                            sa.tuple_(runs.c.run_name, runs.c.run_key).in_(
                                [(row.run_name, row.run_key) for row in page]
                            ),
                        )
                    ).all()
                )
            for row in page:
                if (row.run_name, row.run_key) in ours:
                    return tuple(json.loads(row.result_key))
        return None

    def remove_result(self, key: tuple[str, ...]) -> bool:
        with self.engine.begin() as conn:
            gone = conn.execute(
                results.delete().where(results.c.result_key == json.dumps(list(key)))
            ).rowcount
        return bool(gone)


def _result_parts(key: tuple[str, ...]) -> tuple[str | None, str | None, str | None]:
    """(suite, run name, run key) of a GX validation result key
    ``(*suite parts, run name, run time, batch)``; None for GX's own backend-id key."""
    if len(key) < 4:
        return None, None, None
    return ".".join(key[:-3]), key[-3], key[-2]


@dataclass
class RuleResult:
    expectation: str
    rules: list[str]
    severity: str
    success: bool
    observed_value: Any
    unexpected_count: int | None
    message: str
    suite: str = ""  #: the GX suite that ran the rule ("" where the caller did not say)
    #: A failed rule's SELECT listing every item it counted (None where it counts no rows).
    query: str | None = None
    #: A failed rule: the run time it has been failing since on this store and checkpoint
    #: (this run's own when it is ``new``); None for a rule that passed.
    failing_since: str | None = None
    new: bool = False
    #: The count thresholds the rule's suite entry gives it (``warn_if >5, error_if >50``);
    #: None where any count fails it.
    thresholds: str | None = None


def counted(results: list[RuleResult]) -> dict[str, int]:
    """Failed rules by severity, and the rules that passed."""
    failed = {s: sum(not r.success and r.severity == s for r in results) for s in SEVERITIES}
    return failed | {"passed": sum(r.success for r in results)}


def failing_severities(fail_on: str) -> tuple[str, ...]:
    """The severities whose failed rules fail a run: errors, and warnings too with
    ``--fail-on warning``. The exit code and the JUnit failures both follow this."""
    if fail_on == Severity.WARNING:
        return (Severity.ERROR, Severity.WARNING)
    return (Severity.ERROR,)


def rule_result(result, suite: str = "") -> RuleResult:
    """One result, as a GX object or as stored JSON; ``suite`` names the suite that ran it."""
    config = result.get("expectation_config") or {}
    severity = config.get("severity")
    severity = getattr(severity, "value", severity) or Severity.ERROR.gx
    body = result.get("result") or {}
    details = body.get("details") or {}
    success = result.get("success")
    error = exception_message(result)
    if error:
        message = f"could not evaluate: {error}"
    else:
        message = details.get("message") or _builtin_message(body, success)
    word = severity_word(severity)
    limits = details.get(DETAILS_KEY) or {}
    if limits.get("fired") and not success:  # past warn_if alone: a warning at most
        word = severity_when_fired(limits["fired"], word)
    return RuleResult(
        expectation=config.get("type") or "",
        rules=list((config.get("meta") or {}).get("rules") or details.get("rules") or []),
        severity=word,
        success=bool(success) and not error,
        observed_value=body.get("observed_value"),
        unexpected_count=body.get("unexpected_count"),
        message=message,
        suite=suite,
        query=details.get("query"),
        thresholds=CountThresholds.of(limits).text() if limits else None,
    )


def _builtin_message(body: dict[str, Any], success: bool) -> str:
    count = body.get("unexpected_count")
    if count is None:
        return "passed" if success else f"observed {body.get('observed_value')!r}"
    return f"{count} unexpected of {body.get('element_count')} rows"


def suite_success(suite_validation_result, fail_on: str = "error") -> bool:
    """Whether a suite passed by kandev-dq's verdict: no failed rule of a severity that fails
    a run (:func:`failing_severities`); an info disclosure or a warning is not a failure."""
    failed = failed_by_severity(suite_validation_result)
    return not any(failed.get(severity) for severity in failing_severities(fail_on))


def failed_by_severity(suite_validation_result) -> dict[str, int]:
    """Failed rules of one GX suite result (a GX object or its stored JSON) by kandev-dq
    severity (error, warning, info)."""
    counts = {severity.value: 0 for severity in Severity}
    results = getattr(suite_validation_result, "results", None)
    if results is None:
        results = suite_validation_result.get("results") or []
    for result in results:
        rule = rule_result(result)
        if not rule.success:
            counts[rule.severity] = counts.get(rule.severity, 0) + 1
    return counts


def suite_verdict(counts: dict[str, int], fail_on: str = "error") -> str:
    """One suite's verdict from :func:`failed_by_severity`: ``failed`` when a failing severity
    failed (the exit code's rule), else ``warning`` or ``info`` for what did not pass without
    failing, else ``passed``. GX's own ``success`` fails a suite on any failed rule."""
    if any(counts.get(severity) for severity in failing_severities(fail_on)):
        return "failed"
    not_passed = (Severity.WARNING.value, Severity.INFO.value)
    return next((s for s in not_passed if counts.get(s)), "passed")
