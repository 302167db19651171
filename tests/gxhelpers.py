"""Running the GX project against a test store, in an isolated copy of the project."""

from __future__ import annotations

import shutil
from pathlib import Path

from kandev_dq.expectations.activation import BASELINE_DISCLOSURE
from kandev_dq.run.check import CheckReport, RuleResult, run_check

REPO = Path(__file__).resolve().parent.parent
PROJECT_PARTS = ("great_expectations.yml", "expectations", "checkpoints", "validation_definitions")


def copy_project(source: Path, destination: Path) -> Path:
    """A private copy of a GX project (its own ledger, results and docs)."""
    destination.mkdir(parents=True, exist_ok=True)
    for part in PROJECT_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, destination / part)
        else:
            shutil.copy(source / part, destination / part)
    return destination


def result(report: CheckReport, expectation: str) -> RuleResult:
    matches = [r for r in report.results if r.expectation == expectation]
    assert len(matches) == 1, f"{expectation}: {len(matches)} results"
    return matches[0]


def suite_types(suite: str) -> set[str]:
    """The expectation types of one suite, as the code builds it."""
    from kandev_dq.run.project import SUITES

    return {e.expectation_type for e in SUITES[suite]()}


def failed(report: CheckReport, suite: str | None = None) -> dict[str, str]:
    """Failed rules by expectation type -> severity (optionally of one suite only): what the
    suite says of the store. A test project's first run always discloses its new write-once
    baseline, a fact of its records; tests/test_records.py proves that disclosure."""
    types = suite_types(suite) if suite else None
    return {
        r.expectation: r.severity
        for r in report.results
        if not r.success
        and r.expectation != BASELINE_DISCLOSURE
        and (types is None or r.expectation in types)
    }


def check(project: Path, target, checkpoint: str = "pre_release") -> CheckReport:
    return run_check(project, target.url, checkpoint)
