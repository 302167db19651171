"""One reading of a GX validation result: kandev-dq's severity word, verdict and message.

GX's own ``success`` ignores severity and its results nest an evaluation error per metric;
every command (``check``, progress, ``history``, the docs overview) reads a result through
:func:`rule_result`, so they agree on what failed and how badly. It reads a GX
``ExpectationValidationResult`` and the JSON GX stores for one alike: both answer ``.get``
(GX's result and configuration classes are ``DictDot``s).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kandev_dq.contract.rule_index import severity_word
from kandev_dq.contract.severity import Severity
from kandev_dq.errors import exception_message


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
    return RuleResult(
        expectation=config.get("type") or "",
        rules=list((config.get("meta") or {}).get("rules") or details.get("rules") or []),
        severity=severity_word(severity),
        success=bool(success) and not error,
        observed_value=body.get("observed_value"),
        unexpected_count=body.get("unexpected_count"),
        message=message,
        suite=suite,
        query=details.get("query"),
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
