"""Running the GX project against a test store, in an isolated copy of the project."""

from __future__ import annotations

import shutil
from pathlib import Path

from kandev_dq.check import CheckReport, RuleResult, run_check

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


def failed(report: CheckReport) -> dict[str, str]:
    """Failed rules by expectation type -> severity."""
    return {r.expectation: r.severity for r in report.results if not r.success}


def check(project: Path, target, checkpoint: str = "pre_release") -> CheckReport:
    return run_check(project, target.url, checkpoint)
