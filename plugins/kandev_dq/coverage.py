"""The coverage table: every AC of the catalogue, the expectations citing it, their suites.

Read from the project's suite JSON (what actually runs) and each expectation's declared AC
ids, so the table in the README is generated, never hand-kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kandev_dq.catalogue import BY_ID, CRITERIA
from kandev_dq.project import SUITE_DIR

SEVERITY_NAMES = {"critical": "error", "warning": "warning", "info": "info"}


@dataclass(frozen=True)
class Citation:
    expectation: str
    suite: str
    severity: str
    rules: tuple[str, ...]


@dataclass(frozen=True)
class CoverageRow:
    ac: str
    summary: str
    expectation: str
    suite: str
    severity: str


def citations(project: Path) -> list[Citation]:
    """Every expectation of every suite in the project, with the AC ids it encodes."""
    from great_expectations.expectations.registry import get_expectation_impl

    import kandev_dq.expectations  # noqa: F401 - registers the custom types

    found = []
    for path in sorted((Path(project) / SUITE_DIR).glob("*.json")):
        for entry in json.loads(path.read_text(encoding="utf-8")).get("expectations", []):
            declared = (entry.get("meta") or {}).get("rules")
            if declared is None:
                declared = getattr(get_expectation_impl(entry["type"]), "rules", ())
            found.append(
                Citation(
                    entry["type"],
                    path.stem,
                    SEVERITY_NAMES.get(entry.get("severity", "critical"), "error"),
                    tuple(declared),
                )
            )
    return found


def coverage_rows(project: Path) -> list[CoverageRow]:
    by_ac: dict[str, list[Citation]] = {}
    for citation in citations(project):
        for ac in citation.rules:
            by_ac.setdefault(ac, []).append(citation)
    rows = []
    for criterion in CRITERIA:
        cited = by_ac.get(criterion.ac, [])
        if not cited:
            note = (
                "(covered by the migration runner's tests)"
                if not criterion.data_observable
                else "(none)"
            )
            rows.append(CoverageRow(criterion.ac, criterion.summary, note, "", ""))
        for c in cited:
            rows.append(
                CoverageRow(criterion.ac, criterion.summary, c.expectation, c.suite, c.severity)
            )
    return rows


def uncovered(project: Path) -> list[str]:
    """Data-observable ACs that no expectation cites."""
    cited = {ac for c in citations(project) for ac in c.rules}
    return [c.ac for c in CRITERIA if c.data_observable and c.ac not in cited]


def unknown_citations(project: Path) -> list[tuple[str, str]]:
    """(expectation, AC) pairs citing an AC the catalogue does not hold."""
    return [(c.expectation, ac) for c in citations(project) for ac in c.rules if ac not in BY_ID]


def markdown_table(rows: list[CoverageRow]) -> str:
    lines = ["| AC | summary | expectation | suite | severity |", "|---|---|---|---|---|"]
    for r in rows:
        expectation = f"`{r.expectation}`" if r.suite else r.expectation
        lines.append(f"| {r.ac} | {r.summary} | {expectation} | {r.suite} | {r.severity} |")
    return "\n".join(lines)
