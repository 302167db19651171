"""Running the GX project against a test store, in an isolated copy of the project."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kandev_dq.expectations.activation import BASELINE_DISCLOSURE
from kandev_dq.run.check import CheckReport, RuleResult, run_check

REPO = Path(__file__).resolve().parent.parent


def result(report: CheckReport, expectation: str) -> RuleResult:
    matches = [r for r in report.results if r.expectation == expectation]
    assert len(matches) == 1, f"{expectation}: {len(matches)} results"
    return matches[0]


def suite_types(suite: str) -> set[str]:
    """The expectation types of one suite, as the code builds it."""
    from kandev_dq.gx.context import SUITES

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


def build_project_through_gx(root: Path) -> Path:
    """The project as GX itself writes it for the code's suites and checkpoints: a file context,
    a data source, one suite per :data:`SUITES` entry at each class's own severity, validation
    definitions and checkpoints. ``kandev-dq init`` writes the same files without GX; this is
    what they are compared with."""
    import tempfile

    import great_expectations as gx
    import sqlalchemy as sa
    from great_expectations.checkpoint import UpdateDataDocsAction

    from kandev_dq.contract import tables as schema
    from kandev_dq.gx import context as gx_context
    from kandev_dq.project import files as p

    gx_context.quiet_gx()
    root.mkdir(parents=True)
    (root / p.PROJECT_FILE).write_text(p._YML, encoding="utf-8")
    with tempfile.TemporaryDirectory() as scratch:
        # GX tests the connection while a data source is added: give it a blank Kandev store.
        probe = Path(scratch) / "probe.db"
        engine = sa.create_engine(f"sqlite:///{probe}")
        with engine.begin() as conn:
            schema.create_base_tables(conn)
            schema.create_subagents_table(conn, amended=True)
        engine.dispose()
        context = gx_context._file_context(gx, root, f"sqlite:///{probe}")
        source = context.data_sources.add_sql(
            p.DATASOURCE, connection_string="${" + p.URL_VARIABLE + "}"
        )
        batches = {
            table: source.add_table_asset(table, table_name=table).add_batch_definition_whole_table(
                p.BATCH
            )
            for table in dict.fromkeys(p.SUITE_ASSETS.values())
        }
        definitions = {}
        for name, build in gx_context.SUITES.items():
            suite = context.suites.add(gx.ExpectationSuite(name=name))
            for expectation in build():
                suite.add_expectation(expectation)
            suite.save()
            definitions[name] = context.validation_definitions.add(
                gx.ValidationDefinition(name=name, data=batches[p.SUITE_ASSETS[name]], suite=suite)
            )
        for name, suites in p.CHECKPOINTS.items():
            context.checkpoints.add(
                gx.Checkpoint(
                    name=name,
                    validation_definitions=[definitions[s] for s in suites],
                    actions=[UpdateDataDocsAction(name="update_data_docs")],
                    result_format={"result_format": "COMPLETE"},
                )
            )
    # kandev-dq's own file beside GX's: what GX's project_root_dir reads (not GX's to write).
    p.write_project_root_guard(root, str(context.variables.data_context_id))
    return root


def in_a_fresh_interpreter(script: str, cwd, stdin: str | None = None, env=None) -> str:
    """``script``'s stdout, run by a new Python (nothing of this test process loaded)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


#: Runs each job's checkpoint through GX's API alone; prints one JSON outcome per job.
NATIVE_RUN = r"""
import json, os, sys
assert "kandev_dq" not in sys.modules
import great_expectations as gx
def raised(info):  # GX's flat form, or its form per metric
    nested = [v for v in info.values() if isinstance(v, dict)]
    return bool(info.get("raised_exception")) or any(v.get("raised_exception") for v in nested)
outcomes = []
for job in json.load(sys.stdin):
    os.environ["KANDEV_STORE_URL"] = job["url"]
    try:
        context = gx.get_context(mode="file", context_root_dir=job["project"])
        assert "kandev_dq" in sys.modules, "the project's context did not load kandev-dq"
        named = {}
        if job.get("run_name"):  # as a scheduler names its run
            from great_expectations.core.run_identifier import RunIdentifier
            named["run_id"] = RunIdentifier(run_name=job["run_name"])
        result = context.checkpoints.get(job["checkpoint"]).run(**named)
    except Exception as exc:
        outcomes.append({"raised": type(exc).__name__, "message": str(exc)})
        continue
    outcomes.append({
        "success": result.success,
        "results": [
            {
                "suite": v.suite_name,
                "expectation": r.expectation_config.type,
                "severity": r.expectation_config.severity.value,
                "success": r.success,
                "error": raised(r.exception_info or {}),
            }
            for v in result.run_results.values() for r in v.results
        ],
    })
print(json.dumps(outcomes))
"""


def native_runs(jobs: list[dict], cwd: Path, settings: dict | None = None) -> list[dict]:
    """Each ``{"project", "url", "checkpoint"}`` (and, optionally, ``"run_name"``, the name a
    scheduler gives the run) run through GX's API in one new interpreter
    (the process environment holds no kandev-dq setting but the store's URL and ``settings``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KANDEV_")} | (settings or {})
    return json.loads(in_a_fresh_interpreter(NATIVE_RUN, cwd, json.dumps(jobs), env))
