"""``kandev-dq audit``: a ``pre_release`` run kept as a folder that stands on its own.

The folder holds the project's data docs site for this store alone, its pages as the run left
them (``data_docs/index.html``: the suites, the store's newest runs, its overview),
``summary.json`` (exactly what ``check --format json`` prints) and ``SUMMARY.md`` for a
reviewer: store (no password), dialect, activation state and keys, verdict, the project's
deviations from kandev-dq's rules, the failed and warned rules with their AC ids, the
kandev-dq version and when it ran; and ``queries.sql``: one commented block per failed rule,
the SELECT listing what it counted. A folder is written only if it is new, empty, or an
earlier audit (it carries a marker file); rewriting an earlier audit replaces only what an
audit writes.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from kandev_dq.contract.severity import Severity
from kandev_dq.errors import KandevDqError
from kandev_dq.gx.checkpoint import Progress
from kandev_dq.run.check import CheckReport, run_check, verdict_line
from kandev_dq.store.reference import StoreRef
from kandev_dq.text import markdown_code, markdown_text, one_line

CHECKPOINT = "pre_release"
MARKER = ".kandev-dq-audit"
SITE = "data_docs"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "SUMMARY.md"
QUERIES_SQL = "queries.sql"
WRITTEN = (SITE, SUMMARY_JSON, SUMMARY_MD, QUERIES_SQL)


@dataclass
class AuditResult:
    folder: Path
    report: CheckReport
    ran_at: str
    site: Path | None


def version(distribution: str = "kandev-dq") -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def check_folder(out: Path) -> None:
    """Refuse anything but a new folder, an empty one, or an earlier audit."""
    if out.exists() and not out.is_dir():
        raise KandevDqError(f"{out} is a file: --out takes a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise KandevDqError(
            f"{out} is not empty and is not a kandev-dq audit folder: choose another --out"
        )


def run_audit(
    project: Path,
    target: str | StoreRef | None,
    out: Path,
    progress: Progress | None = None,
    *,
    allow_project_code: bool = False,
    records: str | StoreRef | None = None,
) -> AuditResult:
    """Run ``pre_release`` on ``target`` and write the audit folder ``out``."""
    project, out = Path(project), Path(out)
    site = project / "uncommitted" / "data_docs" / "local_site"
    if out.resolve().is_relative_to(site.resolve()):
        raise KandevDqError(f"{out} is inside the project's data docs: choose another --out")
    check_folder(out)
    ran_at = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    report = run_check(
        project,
        target,
        CHECKPOINT,
        progress,
        allow_project_code=allow_project_code,
        records=records,
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by kandev-dq audit\n", encoding="utf-8")
    for name in WRITTEN:
        old = out / name
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink(missing_ok=True)
    copied = None
    if (site / "index.html").is_file():  # the store's own pages, never another store's
        from kandev_dq.report.site import build_store_site

        copied = build_store_site(
            project,
            out / SITE,
            report.store_identity,
            allow_project_code=allow_project_code,
            records=records,
        )
    (out / SUMMARY_JSON).write_text(
        json.dumps(report.to_json(), default=str, indent=2) + "\n", encoding="utf-8"
    )
    (out / SUMMARY_MD).write_text(summary_markdown(report, ran_at, copied is not None), "utf-8")
    (out / QUERIES_SQL).write_text(queries_sql(report, ran_at), encoding="utf-8")
    return AuditResult(out, report, ran_at, copied)


def summary_markdown(report: CheckReport, ran_at: str, has_site: bool = True) -> str:
    verdict = "PASSED" if report.success else "FAILED"
    lines = [
        f"# kandev-dq audit: {verdict}",
        "",
        f"- Store: {markdown_code(report.store)} ({markdown_text(report.dialect)})",
        f"- Checkpoint: {markdown_code(report.checkpoint)}",
        f"- Activation state (AC-24c): {markdown_code(report.state)}: "
        f"{markdown_text(report.state_explanation)}",
        f"- Verdict: {markdown_text(verdict_line(report))}",
        f"- Ran at: {ran_at} (UTC)",
        f"- kandev-dq {version()}, Great Expectations {version('great-expectations')}",
        "",
        "## Activation keys",
        "",
        "| key | value |",
        "|---|---|",
    ]
    # Key values are agent-written text; a malformed one is a finding (AC-24e), so any text
    # can reach this page: shown inert.
    for key, value in report.keys.items():
        shown = (
            "(absent)"
            if value is None
            else "`''` (sentinel)"
            if value == ""
            else markdown_code(value)
        )
        lines.append(f"| {markdown_text(key)} | {shown} |")
    if report.project_deviations:  # the verdict is the project's: each difference is named
        lines += [
            "",
            f"## Project deviations from kandev-dq's rules: {len(report.project_deviations)}",
            "",
        ]
        lines += [f"- {markdown_text(d.text())}" for d in report.project_deviations]
    for severity, title in (("error", "Failed rules (error)"), ("warning", "Warned rules")):
        flagged = report.failures(severity)
        lines += ["", f"## {title}: {len(flagged)}", ""]
        if flagged:
            lines += ["| rule | AC | finding |", "|---|---|---|"]
            lines += [
                f"| {markdown_code(r.expectation)} | {markdown_text(', '.join(r.rules))} "
                f"| {markdown_text(r.message)} |"
                for r in flagged
            ]
        else:
            lines.append("None.")
    lines += [
        "",
        "## Files",
        "",
        f"- `{SUMMARY_JSON}`: the full report, as `kandev-dq check --format json` prints it.",
        f"- `{QUERIES_SQL}`: for each failed rule, the SELECT listing every item it counted "
        f"({report.dialect}; run it read-only).",
    ]
    if has_site:
        lines.append(
            f"- [`{SITE}/index.html`]({SITE}/index.html): the data docs, readable offline."
        )
    else:
        lines.append("- No data docs: the project has no local data docs site.")
    return "\n".join(lines) + "\n"


def queries_sql(report: CheckReport, ran_at: str) -> str:
    """Every failed rule's listing query, each after ``--`` comment lines naming the rule, its
    AC ids, severity and finding. Comment text is one line each (store values quoted in a
    finding cannot end the comment); the queries run as they are in sqlite3 or psql."""
    listed = sorted(
        (r for r in report.results if not r.success and r.query),
        key=lambda r: (Severity.rank_of(r.severity), r.suite, r.expectation),
    )
    lines = [
        f"-- kandev-dq audit, {CHECKPOINT} on {one_line(report.store)} ({report.dialect}), "
        f"{ran_at}",
        "-- Each query lists every item its rule counted: as many rows as unexpected_count.",
        "-- Read-only: run in sqlite3 (-readonly) or in psql inside BEGIN READ ONLY.",
    ]
    if not listed:
        lines += ["", "-- No failed rule counts rows: no query."]
    for rule in listed:
        lines += [
            "",
            f"-- {rule.expectation} [{', '.join(rule.rules)}] {rule.severity}, "
            f"suite {rule.suite}: {rule.unexpected_count} counted",
            f"-- {one_line(rule.message)}",
            rule.query or "",
        ]
    return "\n".join(lines) + "\n"
