"""Timed runs: kandev-dq and its floors, in process and as whole processes.

Everything here measures one thing once; :mod:`bench.run` alternates floors and measured
runs and takes medians. :func:`query_plans` is the one untimed run: it keeps the plan of each
statement kandev-dq's facts execute.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench import floors
from bench.stores import Copy
from kandev_dq.facts.activation import activation_facts, disclosure_facts, sentinel_backfill_facts
from kandev_dq.facts.backfill import backfill_facts
from kandev_dq.facts.health import health_facts
from kandev_dq.facts.rows import row_facts
from kandev_dq.facts.schema_facts import schema_facts
from kandev_dq.facts.stored_text import stored_text_facts
from kandev_dq.migration import runner as migrate
from kandev_dq.store.access import open_store
from kandev_dq.store.snapshot import facts_for, pinned

#: The GX metric of each family of facts -> the function that computes it.
COMPUTE = {
    "kandev.activation_facts": activation_facts,
    "kandev.sentinel_backfill_facts": sentinel_backfill_facts,
    "kandev.disclosure_facts": disclosure_facts,
    "kandev.health_facts": health_facts,
    "kandev.row_facts": row_facts,
    "kandev.schema_facts": schema_facts,
    "kandev.backfill_facts": backfill_facts,
    "kandev.stored_text_facts": stored_text_facts,
}


@dataclass(frozen=True)
class Family:
    metric: str
    params: tuple[tuple[str, Any], ...]

    @property
    def key(self) -> str:  # as kandev_dq.verdicts.base.Family.key names it in the run cache
        return self.metric + repr(sorted(self.params))


def families(project: Path, checkpoint: str) -> list[Family]:
    """The families of facts a checkpoint reads, from the project's own files (GX registry).

    GX loads here as kandev-dq's commands load it (:func:`kandev_dq.api.loading_gx`: its
    objects frozen), so the facts timed later in this process are collected over the heap a
    check's are: loaded plainly, each full collection walked GX's 300,000 objects again, for
    0.15-0.3 s that fell into whichever timed section set it off."""
    from kandev_dq.api import loading_gx

    with loading_gx():
        from great_expectations.expectations.registry import get_expectation_impl

        import kandev_dq.expectations  # noqa: F401 - registers the expectations with GX

    found: dict[Family, None] = {}
    spec = json.loads((project / "checkpoints" / f"{checkpoint}.json").read_text())
    for vd in spec["validation_definitions"]:
        definition = json.loads(
            (project / "validation_definitions" / f"{vd['name']}.json").read_text()
        )
        suite = json.loads(
            (project / "expectations" / f"{definition['suite']['name']}.json").read_text()
        )
        for config in suite["expectations"]:
            impl = get_expectation_impl(config["type"])
            metric = getattr(impl, "facts", "")
            if not metric:
                continue
            if metric not in COMPUTE:
                raise SystemExit(f"the bench has no compute function for {metric}: add it")
            # The metric's value keys are the compute function's keyword parameters that the
            # expectation declares (a live window is decided by the run, not a suite's field).
            accepted = list(inspect.signature(COMPUTE[metric]).parameters)[1:]
            fields = getattr(impl, "model_fields", None) or getattr(impl, "__fields__", {})
            params = tuple(
                (k, config.get("kwargs", {}).get(k, fields[k].default))
                for k in accepted
                if k in fields
            )
            found[Family(metric, params)] = None
    return list(found)


# --- in process ------------------------------------------------------------------------------


def kandev_facts(store: Copy, fams: list[Family]) -> tuple[float, dict[str, Any]]:
    """kandev-dq's facts as ``check`` reads them: one pinned snapshot, each family once."""
    opened = open_store(store.target, read_only=True)
    out: dict[str, Any] = {}
    try:
        start = time.perf_counter()
        with pinned(opened.engine):
            for fam in fams:
                compute = COMPUTE[fam.metric]
                params = dict(fam.params)
                out[fam.metric] = facts_for(
                    opened.engine, fam.key, lambda conn, c=compute, p=params: c(conn, **p)
                )
        elapsed = time.perf_counter() - start
    finally:
        opened.dispose()
    return elapsed, out


#: Statements whose plan is worth keeping: reads (the snapshot's BEGIN, SAVEPOINT and the
#: like have none, and PostgreSQL's ANALYZE must not run anything else).
_READ = re.compile(r"\s*(SELECT|WITH)\b", re.IGNORECASE)


def query_plans(store: Copy, fams: list[Family], out: Path) -> Path:
    """Every read kandev-dq's facts execute, each with its plan, written to ``out`` (untimed).

    The families run as in :func:`kandev_facts`; their statements are explained once all have
    run, on the same connection inside the same snapshot. Identical statements (same SQL and
    parameters) are kept once.
    """
    explain = {"sqlite": _sqlite_plan, "postgresql": _postgres_plan}[store.dialect]
    opened = open_store(store.target, read_only=True)
    captured: list[tuple[str, str, Any]] = []
    family: str | None = None

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if family and not executemany and _READ.match(statement):
            captured.append((family, statement, parameters))

    # Before the snapshot's connection exists: a connection only sees the engine's events if
    # the engine had some when the connection was made.
    sa.event.listen(opened.engine, "before_cursor_execute", capture)
    sections: dict[tuple[str, str], str] = {}
    try:
        with pinned(opened.engine) as run:
            for fam in fams:
                family, compute, params = fam.metric, COMPUTE[fam.metric], dict(fam.params)
                facts_for(opened.engine, fam.key, lambda conn, c=compute, p=params: c(conn, **p))
            for metric, statement, parameters in captured:
                key = (statement, repr(parameters))
                if key in sections:
                    continue
                shown = " ".join(statement.split())[:120]
                header = f"-- {len(sections) + 1}. {metric}: {shown}"
                if parameters:
                    header += f"\n--    parameters: {repr(parameters)[:200]}"
                plan = _plan_or_reason(run.connection, explain, statement, parameters)
                sections[key] = f"{header}\n{plan}"
    finally:
        sa.event.remove(opened.engine, "before_cursor_execute", capture)
        opened.dispose()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n\n".join(sections.values()) + "\n")
    return out


def _plan_or_reason(conn: sa.Connection, explain, statement: str, parameters: Any) -> str:
    """The plan, or why there is none: a statement that failed in the run (and was retried)
    fails again, and on PostgreSQL must not abort the snapshot the other plans are read in."""
    conn.exec_driver_sql("SAVEPOINT kandev_dq_plan")
    try:
        plan = explain(conn, statement, parameters)
    except sa.exc.DBAPIError as exc:
        conn.exec_driver_sql("ROLLBACK TO SAVEPOINT kandev_dq_plan")
        plan = f"(no plan: {str(exc.orig).strip().splitlines()[0]})"
    conn.exec_driver_sql("RELEASE SAVEPOINT kandev_dq_plan")
    return "\n".join(_cut(line) for line in plan.splitlines())


#: A plan line's longest shown form: a window's bound ids (41,000 at 11M messages) are printed
#: whole in the lines that filter by them, megabytes a reader does not need.
PLAN_LINE_CHARS = 400


def _cut(line: str) -> str:
    return line if len(line) <= PLAN_LINE_CHARS else f"{line[:PLAN_LINE_CHARS]} …"


def _sqlite_plan(conn: sa.Connection, statement: str, parameters: Any) -> str:
    """``EXPLAIN QUERY PLAN``: rows (id, parent, -, detail) drawn as an indented tree."""
    rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
    depth: dict[int, int] = {}
    lines = []
    for node, parent, _, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        lines.append("  " * depth[node] + detail)
    return "\n".join(lines)


def _postgres_plan(conn: sa.Connection, statement: str, parameters: Any) -> str:
    """``EXPLAIN (ANALYZE, BUFFERS)``: runs the read once more, in the same snapshot."""
    rows = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", parameters)
    return "\n".join(row[0] for row in rows)


@contextmanager
def floor_snapshot(engine: sa.Engine) -> Iterator[sa.Connection]:
    """The floors' own read snapshot, written here rather than taken from kandev-dq, so that a
    denominator never follows the code it measures: PostgreSQL REPEATABLE READ, READ ONLY, with
    JIT off as anyone timing short analytical statements would have it, every other planner
    setting the server's; SQLite a plain BEGIN."""
    with engine.connect() as raw:
        conn = raw.execution_options(isolation_level="AUTOCOMMIT")
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            conn.exec_driver_sql("SET LOCAL jit = off")
        else:
            conn.exec_driver_sql("BEGIN")
        try:
            yield conn
        finally:
            conn.exec_driver_sql("ROLLBACK")


def floor_facts(store: Copy, fams: list[Family]) -> tuple[float, dict[str, Any]]:
    """The same families in the floor's raw SQL, in one read snapshot."""
    engine = store.engine()
    try:
        with engine.connect():
            pass  # connect outside the timed section, as kandev_facts does
        start = time.perf_counter()
        with floor_snapshot(engine) as conn:
            out = floors.facts(conn, store.dialect, [f.metric for f in fams])
        elapsed = time.perf_counter() - start
    finally:
        engine.dispose()
    return elapsed, out


def scan_floor(store: Copy, statement=None) -> tuple[float, dict[str, int]]:
    """One of the single-scan floors in a read snapshot of its own: by default
    :func:`floors.single_pass` (one read of each table), else ``statement`` (such as
    :func:`floors.message_rules_pass`)."""
    statement = statement or floors.single_pass
    engine = store.engine()
    try:
        with engine.connect():
            pass  # connect outside the timed section, as kandev_facts does
        start = time.perf_counter()
        with floor_snapshot(engine) as conn:
            out = statement(conn, store.dialect)
        elapsed = time.perf_counter() - start
    finally:
        engine.dispose()
    return elapsed, out


def kandev_migrate(store: Copy) -> tuple[float, migrate.MigrationReport]:
    start = time.perf_counter()
    opened = open_store(store.target, read_only=False)
    try:
        report = migrate.run(opened)
    finally:
        opened.dispose()
    return time.perf_counter() - start, report


def floor_migrate(store: Copy) -> tuple[float, int]:
    start = time.perf_counter()
    engine = store.engine()
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            rows, _ = floors.backfill(conn, store.dialect)
    finally:
        engine.dispose()
    return time.perf_counter() - start, rows


# --- whole processes -------------------------------------------------------------------------


@dataclass
class ProcessRun:
    seconds: float
    peak_rss_mb: float
    returncode: int
    stdout: str


#: Runs the measured command as its own child and reports its wall time and peak RSS. The
#: bench itself holds GX in memory; Linux would charge a child exec'd straight from it with the
#: bench's own RSS (the mm it replaced), so the command is forked from this small interpreter.
_LAUNCHER = """
import json, os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
with open(sys.argv[1], "w") as f:
    json.dump({"seconds": seconds, "maxrss_kb": usage.ru_maxrss,
               "returncode": os.waitstatus_to_exitcode(status)}, f)
"""


def run_process(
    argv: list[str],
    cwd: Path | None = None,
    allowed: tuple[int, ...] = (0, 1),
    home: Path | None = None,
) -> ProcessRun:
    """Run ``argv`` to completion: its wall time and its own peak RSS (``wait4``); with
    ``home``, as a user whose home is ``home`` and who names no store in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KANDEV_DQ_")}
    if home is not None:
        env = {k: v for k, v in env.items() if k != "KANDEV_STORE_URL"} | {"HOME": str(home)}
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as tmp,
    ):
        figures = Path(tmp) / "figures.json"
        launcher = [sys.executable, "-S", "-c", _LAUNCHER, str(figures)]
        subprocess.run([*launcher, *argv], stdout=out, stderr=err, cwd=cwd, env=env, check=True)
        measured = json.loads(figures.read_text())
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        if measured["returncode"] not in allowed:
            raise RuntimeError(
                f"{' '.join(argv[:3])} … exited {measured['returncode']}: "
                + err.read().decode(errors="replace")[-2000:]
            )
    return ProcessRun(
        measured["seconds"], measured["maxrss_kb"] / 1024, measured["returncode"], stdout
    )


def kandev_dq_command() -> list[str]:
    """The installed ``kandev-dq`` next to this interpreter, else the same entry point."""
    script = Path(sys.executable).parent / "kandev-dq"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from kandev_dq.cli import main; main()"]


def check_process(store: Copy, project: Path, checkpoint: str) -> ProcessRun:
    argv = [
        *kandev_dq_command(),
        "check",
        "--project",
        str(project),
        "--store",
        store.target,
        "--checkpoint",
        checkpoint,
        "--format",
        "json",
        "--quiet",
    ]
    run = run_process(argv)
    report = json.loads(run.stdout)
    if report.get("checkpoint") != checkpoint:
        raise RuntimeError(f"check did not report checkpoint {checkpoint}")
    return run


def gx_baseline(project: Path, collector_paused: bool = False) -> ProcessRun:
    """GX's import + ``get_context`` as a process: as GX loads by default, or (``collector_paused``)
    as kandev-dq's commands load it, with the cyclic collector paused while GX imports and what
    loaded frozen (the same three calls, written here, not imported from kandev-dq)."""
    load = "import great_expectations as gx; "
    if collector_paused:
        load = f"import gc; gc.disable(); {load}gc.freeze(); gc.enable(); "
    code = f"{load}gx.get_context(mode='file', context_root_dir={str(project)!r})"
    return run_process([sys.executable, "-c", code])


def fresh_project(template: Path, into: Path) -> Path:
    """A copy of the bench project with no run history (each timed run starts alike)."""
    if into.exists():
        shutil.rmtree(into)
    shutil.copytree(template, into)
    return into


#: What a user types first, and typos: each must answer (or refuse) in under a second, before
#: GX is imported. Label -> (arguments, exit code). ``{store}``, ``{project}`` and ``{work}``
#: are filled in by :func:`quick_commands`.
QUICK = {
    "`--help`": (["--help"], 0),
    "`--version`": (["--version"], 0),
    "`rules`": (["rules"], 0),
    "`scenarios list`": (["scenarios", "list"], 0),
    "`explain` without `--run`, no store": (["explain", "expect_no_orphan_subagent_rows"], 0),
    "`explain` without `--run`, a store given": (
        ["explain", "expect_no_orphan_subagent_rows", "--store", "{store}"],
        0,
    ),
    "`explain` without `--run`, a store given, a write-once rule": (
        [
            "explain",
            "expect_activation_keys_to_be_write_once",
            "--store",
            "{store}",
            "--project",
            "{project}",
        ],
        0,
    ),
    "`history`: no run recorded": (["history", "--store", "{store}", "--project", "{bare}"], 0),
    "`history`: a run recorded": (["history", "--store", "{store}", "--project", "{project}"], 0),
    "`records prune --dry-run`": (
        ["records", "prune", "--keep-days", "30", "--dry-run", "--project", "{project}"],
        0,
    ),
    "`check`: store file missing": (["check", "--store", "{work}/missing.db"], 2),
    "`check`: store is a folder": (["check", "--store", "{work}"], 2),
    "`check`: empty file": (["check", "--store", "{work}/empty.db"], 2),
    "`check`: text file": (["check", "--store", "{work}/text.db"], 2),
    "`check`: SQLite file of another program": (["check", "--store", "{work}/other.db"], 2),
    "`check --format json`: text file": (
        ["check", "--store", "{work}/text.db", "--format", "json"],
        2,
    ),
    "`check --format junit`: empty file": (
        ["check", "--store", "{work}/empty.db", "--format", "junit"],
        2,
    ),
    "`check`: unsupported URL": (["check", "--store", "mysql://u@db/kandev"], 2),
    "`check --records`: folder missing": (
        ["check", "--store", "{store}", "--records", "{work}/none/records.db"],
        2,
    ),
    "`check --records`: the store itself": (
        ["check", "--store", "{store}", "--records", "{store}"],
        2,
    ),
    "`check --records`: text file": (
        ["check", "--store", "{store}", "--records", "{work}/text.db"],
        2,
    ),
    "`check --records`: unsupported URL": (
        ["check", "--store", "{store}", "--records", "mysql://u@db/records"],
        2,
    ),
    "`check --records`: unreachable server": (
        ["check", "--store", "{store}", "--records", "postgresql://127.0.0.1:9/records"],
        2,
    ),
    "`explain`: store is a text file": (
        ["explain", "expect_no_orphan_subagent_rows", "--store", "{work}/text.db"],
        2,
    ),
    "`check`: unknown checkpoint": (["check", "--store", "{store}", "--checkpoint", "nightlly"], 2),
    "`check`: unreachable server": (["check", "--store", "postgresql://127.0.0.1:9/kandev"], 2),
    "`check`: no such project": (["check", "--store", "{store}", "--project", "{work}/none"], 2),
    "`check`: unknown format": (["check", "--store", "{store}", "--format", "yaml"], 2),
    "`audit`: store file missing": (["audit", "--out", "{work}/a", "--store", "{work}/m.db"], 2),
    "`audit`: store is a folder": (["audit", "--out", "{work}/a", "--store", "{work}"], 2),
    "`audit`: unreachable server": (
        ["audit", "--out", "{work}/a", "--store", "postgresql://127.0.0.1:9/kandev"],
        2,
    ),
    "`audit`: no such project": (
        ["audit", "--out", "{work}/a", "--store", "{store}", "--project", "{work}/none"],
        2,
    ),
    "`history`: no such project": (["history", "--project", "{work}/none"], 2),
    "`history`: unknown format": (["history", "--store", "{store}", "--format", "yaml"], 2),
    "`docs`: no such project": (["docs", "--project", "{work}/none"], 2),
    "`migrate`: store file missing": (["migrate", "--store", "{work}/missing.db"], 2),
    "`migrate`: store is a folder": (["migrate", "--store", "{work}", "--dry-run"], 2),
    "`migrate`: unreachable server": (["migrate", "--store", "postgresql://127.0.0.1:9/k"], 2),
    "`migrate`: unknown format": (["migrate", "--store", "{store}", "--format", "yaml"], 2),
    "`demo`: folder is not a demo's": (["demo", "--dir", "{work}"], 2),
    "`demo`: unreachable server": (
        ["demo", "--dir", "{work}/demo", "--postgres", "postgresql://127.0.0.1:9/demo"],
        2,
    ),
    "`init`: folder is a file": (["init", "{store}"], 2),
    "`init`: a whole project (no GX)": (["init", "--force", "{work}/initialised"], 0),
}


def quick_commands(project: Path, work: Path, repeat: int) -> dict[str, list[float]]:
    """Wall seconds of each :data:`QUICK` command, ``repeat`` times, as whole processes, run as
    a user with no store in the environment or at the default path (home is ``work``)."""
    import sqlite3

    from kandev_dq.lab.sample import create_store

    work.mkdir(parents=True, exist_ok=True)
    store = work / "quick.db"
    if not store.exists():
        opened = open_store(str(store), read_only=False, must_exist=False, require_kandev=False)
        create_store(opened.engine)
        opened.dispose()
    (work / "empty.db").write_bytes(b"")
    (work / "text.db").write_text("not a database\n", encoding="utf-8")
    if not (work / "other.db").exists():  # a SQLite file of another program
        other = sqlite3.connect(work / "other.db")
        other.execute("CREATE TABLE notes (body TEXT)")
        other.commit()
        other.close()
    bare = fresh_project(project, work / "bare-project")  # no run recorded in its records
    ran = fresh_project(project, work / "project")  # one run recorded, as history reads it
    run_process([*kandev_dq_command(), "check", "--store", str(store), "--project", str(ran)])
    fill = {"store": str(store), "project": str(ran), "bare": str(bare), "work": str(work)}
    seconds: dict[str, list[float]] = {label: [] for label in QUICK}
    for _ in range(repeat):
        for label, (args, code) in QUICK.items():
            argv = [*kandev_dq_command(), *(a.format(**fill) for a in args)]
            if "--project" not in args:
                argv += ["--project", str(ran)] if args[0] in ("check", "audit") else []
            run = run_process(argv, cwd=work, allowed=(code,), home=work)
            seconds[label].append(run.seconds)
    return seconds
