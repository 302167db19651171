"""Reliability: read-only validation, credentials, injection and hostile stores.

Each guarantee here is listed, with the test that proves it, in docs/reliability.md. Every
dialect-sensitive case runs on SQLite and on PostgreSQL (the ``target`` fixture). Checks run in
process (``run_check`` or the CLI's ``main``) on a private copy of the project; where data docs
are not the point, the copy's checkpoints carry no actions, which keeps a run well under a
second.
"""

from __future__ import annotations

import json
import logging
import secrets
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from kandev_dq.cli import main
from kandev_dq.contract import tables as schema
from kandev_dq.contract.instants import BACKFILL_THROUGH, CAPTURE_SINCE, EXECUTION_SINCE
from kandev_dq.lab.sample import append_live_traffic, create_store, generate
from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.migration import runner as migrate
from kandev_dq.migration import schema_steps
from kandev_dq.migration.runner import Status
from kandev_dq.records import Records, records_url
from kandev_dq.records.identity import store_identity
from kandev_dq.run.check import run_check
from kandev_dq.sql.dialect import PG_PARSED_BYTES
from kandev_dq.sql.messages import tolerating_unreadable_metadata
from kandev_dq.store.access import open_store
from kandev_dq.store.reference import resolve_url, shown_store, store_ref
from kandev_dq.store.snapshot import facts_for
from kandev_dq.store.target import redact
from tests.gxhelpers import failed, result
from tests.subagent_rows import (
    add_message,
    add_session,
    add_subagent_row,
    at,
    subagent_metadata,
    subagent_rows,
)

CAPTURE = "2026-07-30T01:39:37.271235Z"
NOT_JSON = {"nj-brace": "{bad", "nj-colon": '{"a":}', "nj-open": "[1, 2", "nj-json5": "{a: 1}"}


# --- harness ---------------------------------------------------------------------------------


@pytest.fixture
def quick_project(project):
    """The project copy without its data-docs action: a run takes a fraction of a second."""
    for path in (project / "checkpoints").glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        data["actions"] = []
        path.write_text(json.dumps(data), encoding="utf-8")
    return project


@pytest.fixture(autouse=True)
def _keep_store_url(monkeypatch):
    """run_check exports the store URL for GX; restore the environment after each test."""
    monkeypatch.delenv("KANDEV_STORE_URL", raising=False)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """``kandev-dq ARGS`` in this process: (exit code, stdout, stderr)."""
    argv = sys.argv
    sys.argv = ["kandev-dq", *args]
    try:
        main()
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    finally:
        sys.argv = argv
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def unevaluated(report) -> list[str]:
    return [r.expectation for r in report.results if r.message.startswith("could not evaluate")]


def activated_store(target) -> StoreBuilder:
    store = StoreBuilder(target.engine).create()
    store.keys(CAPTURE, "", CAPTURE)
    return store


# --- 1. read-only by construction ------------------------------------------------------------


def _fingerprints(conn: sa.Connection, schema_name: str) -> dict[str, tuple[int, str]]:
    """Row count and an md5 over the ordered rows of every table of the schema."""
    names = conn.scalars(
        sa.text("SELECT tablename FROM pg_tables WHERE schemaname = :s ORDER BY 1"),
        {"s": schema_name},
    ).all()
    found = {}
    for name in names:
        quoted = f'"{schema_name}"."{name}"'
        found[name] = tuple(
            conn.execute(
                sa.text(
                    f"SELECT count(*), md5(coalesce(string_agg(t::text, E'\\n' "
                    f"ORDER BY t::text), '')) FROM {quoted} AS t"
                )
            ).one()
        )
    return found


def test_pre_release_through_a_select_only_role_writes_nothing(pg_target, project):
    """A role holding only SELECT runs the whole pre_release checkpoint (and a dry run of the
    migration): no rule fails to evaluate, and every table is byte-for-byte unchanged."""
    engine = pg_target.engine
    create_store(engine)
    generate(engine, scale=1, seed=7)
    store = open_store(pg_target.url, read_only=False)
    try:
        assert migrate.run(store).ok
    finally:
        store.dispose()
    append_live_traffic(engine, count=20, seed=7)
    schema_name = make_url(pg_target.url).query["options"].split("=", 1)[1]
    role = f"kdq_ro_{uuid.uuid4().hex[:10]}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
        conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema_name}" TO "{role}"')
        conn.exec_driver_sql(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema_name}" TO "{role}"')
    reader_url = make_url(pg_target.url).set(username=role).render_as_string(hide_password=False)
    try:
        with engine.connect() as conn:
            before = _fingerprints(conn, schema_name)
        # The role really cannot write: the test would prove nothing otherwise.
        probe = sa.create_engine(make_url(reader_url).set(drivername="postgresql+psycopg"))
        with pytest.raises(sa.exc.ProgrammingError, match="permission denied"), probe.begin() as c:
            c.exec_driver_sql("DELETE FROM kandev_meta")
        probe.dispose()

        report = run_check(project, reader_url, "pre_release")
        assert unevaluated(report) == []
        assert report.state == "fully_activated" and report.success, [
            (r.expectation, r.message) for r in report.results if not r.success
        ]
        reader = open_store(reader_url, read_only=True)
        try:
            plan = migrate.run(reader, dry_run=True)
        finally:
            reader.dispose()
        assert plan.ok and [s.status for s in plan.steps] == [Status.ALREADY_DONE] * 5
        with engine.connect() as conn:
            assert _fingerprints(conn, schema_name) == before
    finally:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :r"
                ),
                {"r": role},
            )
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE "{role}"')


# --- 3. credentials --------------------------------------------------------------------------


def _files_holding(folder: Path, secret: bytes) -> list[str]:
    return [
        str(path) for path in folder.rglob("*") if path.is_file() and secret in path.read_bytes()
    ]


SHORTFALL = "expect_no_writer_shortfall_since_capture_since"


def test_a_password_appears_nowhere(pg_target, project, tmp_path, capsys, caplog, monkeypatch):
    """A store URL with a password: check (text, json), audit, docs, history, a dry-run
    migration, explain (its query and rows, as text and CSV) and an unreachable server never
    show it, in output, logs (GX's at DEBUG included), the JSON report and its queries, the
    data docs (the findings' queries and the timeline chart), the ledger, the validation
    results or any file written under the project or the audit folder (queries.sql too)."""
    import kandev_dq.gx.context as context_module

    store = activated_store(pg_target)
    session = store.session()
    store.subagent_message(session, "2026-08-01 00:00:01+00:00", "toolu_1")  # a shortfall
    password = f"pw{secrets.token_hex(12)}"
    url = make_url(pg_target.url).set(password=password).render_as_string(hide_password=False)
    query_url = f"{pg_target.url}&password={password}2"  # libpq also reads ?password=
    unreachable = make_url(url).set(port=1).render_as_string(hide_password=False)

    quiet = context_module.quiet_gx

    def loud() -> None:  # stricter than production: GX logs at DEBUG
        quiet()
        logging.getLogger("great_expectations").setLevel(logging.DEBUG)

    monkeypatch.setattr(context_module, "quiet_gx", loud)
    caplog.set_level(logging.DEBUG)
    audit_dir = tmp_path / "audit"
    outputs = []
    runs = [
        (("check", "--store", url, "--project", str(project)), 1),
        (("check", "--store", query_url, "--project", str(project), "--format", "json"), 1),
        (("audit", "--store", url, "--project", str(project), "--out", str(audit_dir)), 1),
        (("docs", "--project", str(project)), 0),
        (("history", "--store", url, "--project", str(project)), 0),
        (("history", "--store", url, "--project", str(project), "--format", "json"), 0),
        (("migrate", "--store", url, "--dry-run"), 0),
        (("explain", SHORTFALL, "--store", url, "--run"), 0),
        (("explain", SHORTFALL, "--store", query_url, "--format", "csv"), 0),
        (("check", "--store", unreachable, "--project", str(project)), 2),
        (("migrate", "--store", unreachable), 2),
        (("check", "--store", url.replace("@127.0.0.1:5432", "@127.0.0.1:port")), 2),
    ]
    for args, expected in runs:
        code, out, err = cli(capsys, *args)
        assert code == expected, (args[0], code, out, err)
        outputs.append(out + err)
        if "json" in args and args[0] == "check":
            assert json.loads(out)["store"].startswith("postgresql://127.0.0.1:")
    assert "cannot reach" in outputs[9] and "not a database URL" in outputs[11]
    # The findings' queries and the timeline chart are among what was searched.
    assert "SELECT " in outputs[1] and "SELECT " in outputs[7] and "toolu_1" in outputs[8]
    assert "SELECT " in (audit_dir / "queries.sql").read_text(encoding="utf-8")
    overview = project / "uncommitted" / "data_docs" / "local_site" / "overview.html"
    assert "<div class='kandev-timeline'><svg" in overview.read_text(encoding="utf-8")
    for secret in (password, f"{password}2"):
        assert not [o for o in outputs if secret in o]
        assert secret not in caplog.text
        assert _files_holding(project, secret.encode()) == []
        assert _files_holding(audit_dir, secret.encode()) == []
    assert (project / "uncommitted" / "records.db").is_file()
    with Records(records_url(project)) as records:
        assert records.result_keys() and records.run_records()
    assert (audit_dir / "SUMMARY.md").is_file()


def test_every_secret_libpq_masks_is_one_kandev_dq_hides():
    """libpq marks its secret parameters (``dispchar`` ``*``): each is one kandev-dq hides, in
    a URL's query and in a ``key=value`` string, whatever its case."""
    import psycopg

    from kandev_dq.store.target import SECRET_PARAMETERS

    masked = {o.keyword.decode() for o in psycopg.pq.Conninfo.get_defaults() if o.dispchar == b"*"}
    assert {"password", "sslpassword"} <= masked <= set(SECRET_PARAMETERS)
    for name in SECRET_PARAMETERS:
        for text in (
            f"postgresql://u@db:5432/k?options=-cx&{name}=S3cr3t",
            f"postgresql://u@db:5432/k?{name.upper()}=S3cr3t",
            f"host=db {name}=S3cr3t dbname=k",
            f"host=db {name} = 'S3 cr\\'3t' dbname=k",
            f"cannot open postgresql://u@d@b/k?{name}=S3cr3t&x=1: refused",
        ):
            assert "S3" not in redact(text), text
            if "cannot" not in text:
                url = resolve_url(text)
                ref = store_ref(url)
                for shown in (shown_store(url), ref.spelled_name, ref.connect_form):
                    assert "S3" not in shown and name not in shown.lower(), shown


def test_a_libpq_connection_string_is_read_as_postgresql_never_a_path(
    pg_target, quick_project, capsys
):
    """``host=… password=… dbname=…`` is read by libpq as the store it names: checked and shown
    by its URL, never taken for a SQLite file; one libpq cannot read is refused unshown."""
    store = activated_store(pg_target)
    store.subagent_message(store.session(), "2026-08-01 00:00:01+00:00", "toolu_1")
    url = make_url(pg_target.url)
    secret = f"pw{secrets.token_hex(8)}"
    conninfo = (
        f"host={url.host} port={url.port} user={url.username} password={secret} "
        f"dbname={url.database} options='{url.query['options']}'"
    )
    shown = f"postgresql://{url.host}:{url.port}/{url.database}"
    code, out, err = cli(capsys, "check", "--store", conninfo, "--project", str(quick_project))
    assert code == 1 and shown in out and SHORTFALL in out, (out, err)
    assert secret not in out + err and "SQLite" not in out + err
    refused = [
        conninfo.replace(f"port={url.port}", "port=1"),
        f"{conninfo} bogus=1",
        f"host={url.host} password='{secret} dbname=x",
    ]
    for args in (("check", "--project", str(quick_project)), ("migrate", "--dry-run")):
        for text in refused:
            code, out, err = cli(capsys, *args, "--store", text)
            assert code == 2 and secret not in out + err, (args, text, out, err)
            assert "SQLite" not in err and len(err.strip().splitlines()) == 1, err
    assert "cannot reach postgresql://" in cli(capsys, "check", "--store", refused[0])[2]


@pytest.mark.parametrize("parameter", ["sslpassword", "oauth_client_secret"])
def test_a_secret_that_is_not_called_password_appears_nowhere(
    parameter, pg_target, project, tmp_path, capsys, caplog
):
    """A secret libpq reads from the URL's query under another name than ``password``: not in
    the output of check (text, JSON), history, migrate or explain, nor in the run name, the
    data docs' file names or contents, the records database or any log record."""
    store = activated_store(pg_target)
    store.subagent_message(store.session(), "2026-08-01 00:00:01+00:00", "toolu_1")
    secret = f"sec{secrets.token_hex(12)}"
    url = f"{pg_target.url}&{parameter}={secret}"
    caplog.set_level(logging.DEBUG)
    outputs = []
    for args, expected in (
        (("check", "--store", url, "--project", str(project)), 1),
        (("check", "--store", url, "--project", str(project), "--format", "json"), 1),
        (("history", "--store", url, "--project", str(project)), 0),
        (("history", "--store", url, "--project", str(project), "--format", "json"), 0),
        (("migrate", "--store", url, "--dry-run"), 0),
        (("explain", SHORTFALL, "--store", url, "--run"), 0),
        (("check", "--store", url.replace(":5432/", ":1/"), "--project", str(project)), 2),
    ):
        code, out, err = cli(capsys, *args)
        assert code == expected, (args, out, err)
        outputs.append(out + err)
    assert "postgresql://127.0.0.1:5432/" in outputs[0] and "cannot reach" in outputs[-1]
    assert not [o for o in outputs if secret in o or parameter in o]
    assert secret not in caplog.text
    with Records(records_url(project)) as records:
        names = [r["run_name"] for r in records.run_records()]
    assert names and not [n for n in names if secret in n or parameter in n]
    written = [p for p in project.rglob("*")]
    assert any(p.suffix == ".html" for p in written)
    assert not [p for p in written if secret in str(p) or parameter in str(p)]
    assert _files_holding(project, secret.encode()) == []


# --- 4. injection ----------------------------------------------------------------------------

MARK = "kdqmark"
HOSTILE = (
    "'; DROP TABLE kandev_meta; --",
    '" OR "1"="1" --',
    "x'); DELETE FROM task_session_subagents; --",
    "$$; SELECT pg_sleep(30); $$",
    "%(name)s ? :name {0} $1 %s",
    "back\\slash \\' \\\" \\u0041",
    "ünïcødé ẞ 🦊 ق 中文 \u202e",
    "') OR json_valid('{}') OR ('",
    "'$.tool_call_id' #>> '{a,b}' ::jsonb",
)


def _hostile(i: int, field: str) -> str:
    return f"{MARK}{i}{field}{HOSTILE[i % len(HOSTILE)]}"


class _EngineEvents:
    """Hears one event of every engine of this process while active (``_record``)."""

    event: str

    def __enter__(self):
        sa.event.listen(sa.engine.Engine, self.event, self._record)
        return self

    def __exit__(self, *exc):
        sa.event.remove(sa.engine.Engine, self.event, self._record)


class StatementLog(_EngineEvents):
    """Every SQL statement text any engine of this process executes while active."""

    event = "before_cursor_execute"

    def __init__(self):
        self.statements: list[str] = []

    def _record(self, conn, cursor, statement, parameters, context, executemany):
        self.statements.append(statement)


def test_names_and_values_from_the_store_travel_as_data(target, quick_project):
    """Quotes, ``;``, ``--``, placeholders, JSON paths and unicode in ids, metadata and
    keys: never part of a statement's text (only of its parameters); the backfill copies
    them verbatim and every rule evaluates them (both dialects)."""
    target.create_base(subagents="pre_amendment")
    messages = {}
    with target.engine.begin() as conn:
        for i in range(len(HOSTILE)):
            session, task, turn = _hostile(i, "s"), _hostile(i, "t"), _hostile(i, "u")
            add_session(conn, session, task, turns=(turn,))
            texts = {name: _hostile(i, name) for name in ("description", "model", "agent_id")}
            metadata = subagent_metadata(
                _hostile(i, "tc"),
                parent_tool_call_id=_hostile(i, "parent"),
                subagent_type=_hostile(i, "type"),
                child_session_id=_hostile(i, "child"),
                total_tokens=10 + i,
                tool_use_count=i,
                duration_ms=100 + i,
                **texts,
            )
            message_id = _hostile(i, "m")
            add_message(
                conn,
                message_id,
                metadata,
                session_id=session,
                task_id=task,
                turn_id=turn,
                created_at=at(i),
            )
            messages[message_id] = metadata
        conn.execute(
            schema.kandev_meta.insert().values(key=_hostile(0, "key"), value=_hostile(1, "value"))
        )
    with StatementLog() as log:
        store = open_store(target.url, read_only=False)
        try:
            report = migrate.run(store)
        finally:
            store.dispose()
        checked = run_check(quick_project, target.url, "pre_release")
    assert report.ok, report.render()
    assert log.statements and not [s for s in log.statements if MARK in s]
    rows = subagent_rows(target.engine)
    assert set(rows) == set(messages)
    for message_id, metadata in messages.items():
        row, task = rows[message_id], metadata["normalized"]["subagent_task"]
        assert row["tool_call_id"] == metadata["tool_call_id"]
        assert row["parent_tool_call_id"] == metadata["parent_tool_call_id"]
        for name in ("description", "model", "agent_id", "subagent_type", "child_session_id"):
            assert row[name] == task[name]
    with target.engine.connect() as conn:
        meta = dict(
            conn.execute(sa.select(schema.kandev_meta.c.key, schema.kandev_meta.c.value)).all()
        )
    assert meta[_hostile(0, "key")] == _hostile(1, "value")
    assert unevaluated(checked) == []
    assert checked.state == "fully_activated" and checked.success, [
        (r.expectation, r.message) for r in checked.results if not r.success
    ]


def test_a_hostile_key_value_is_a_finding(target, quick_project):
    """A key holding SQL is reported as malformed; nothing evaluates it as SQL."""
    hostile = f"2026-07-30T01:39:37Z'; DROP TABLE kandev_meta; -- {MARK}"
    StoreBuilder(target.engine).create().keys(hostile, "", CAPTURE)
    with StatementLog() as log:
        report = run_check(quick_project, target.url, "nightly")
    assert not [s for s in log.statements if MARK in s]
    assert unevaluated(report) == []
    well_formed = result(report, "expect_activation_keys_to_be_well_formed")
    assert not well_formed.success and "not an RFC3339 instant" in well_formed.message
    assert "kandev_meta" in sa.inspect(target.engine).get_table_names()


def test_a_hostile_constraint_name_is_quoted(pg_target):
    """PostgreSQL: the two-column UNIQUE's name comes from the catalogue (CONTRACT §1); a
    name holding SQL is dropped as a quoted identifier and nothing else happens."""
    pg_target.create_base(subagents="pre_amendment")
    evil = 'evil"; DROP TABLE kandev_meta; --'
    names = schema_steps.two_column_unique_names
    with pg_target.engine.begin() as conn:
        (auto,) = names(conn)
        quoted = conn.dialect.identifier_preparer.quote
        conn.exec_driver_sql(
            f"ALTER TABLE task_session_subagents RENAME CONSTRAINT {quoted(auto)} TO {quoted(evil)}"
        )
        assert names(conn) == [evil]
    store = open_store(pg_target.url, read_only=False)
    try:
        report = migrate.run(store)
    finally:
        store.dispose()
    assert report.ok, report.render()
    assert report.shape.end_state_holds
    assert "kandev_meta" in sa.inspect(pg_target.engine).get_table_names()


# --- 5a. metadata that is not JSON (AC-23b) ---------------------------------------------------


def _store_with_unreadable_metadata(target) -> StoreBuilder:
    """A healthy activated store (three live subagents) plus messages whose metadata is not
    JSON, and the legacy NULL / '' / 'null' rows AC-23b names."""
    store = activated_store(target)
    session = store.session()
    for i in range(3):
        stamp = f"2026-08-01 00:00:0{i}+00:00"
        store.subagent_message(
            session, stamp, f"toolu_{i}", total_tokens=5, tool_use_count=1, duration_ms=9
        )
        store.subagent_row(
            session,
            f"toolu_{i}",
            stamp,
            tool_status="completed",
            agent_status="completed",
            settled_at=stamp,
            total_tokens=5,
            tool_use_count=1,
            duration_ms=9,
        )
    for message_id, raw in {
        **NOT_JSON,
        "legacy-null": None,
        "legacy-empty": "",
        "legacy-null-text": "null",
    }.items():
        store.message(session, "2026-08-01 00:00:05+00:00", metadata=raw, message_id=message_id)
    return store


def test_metadata_that_is_not_json_is_named_and_read_as_empty(target, quick_project):
    """Both dialects: no rule fails to evaluate, the same rows are named by a warning, and
    every other rule reads them as ``{}`` (so the healthy store stays healthy)."""
    from kandev_dq.facts.stored_text import stored_text_facts

    _store_with_unreadable_metadata(target)
    with StatementLog() as log:
        report = run_check(quick_project, target.url, "pre_release")
    assert unevaluated(report) == []
    assert failed(report) == {"expect_message_metadata_to_be_json": "warning"}
    finding = result(report, "expect_message_metadata_to_be_json")
    assert finding.unexpected_count == len(NOT_JSON) and "AC-23b" in finding.rules
    assert result(report, "expect_no_writer_shortfall_since_capture_since").observed_value == 0
    if target.dialect == "postgresql":
        # Located once per run (one bisection), then excluded by every later statement.
        probes = [s for s in log.statements if s.startswith("SAVEPOINT kandev_dq_probe")]
        assert 1 < len(probes) <= 40
        assert any("unreadable_metadata_ids" in s for s in log.statements)
    store = open_store(target.url)
    try:  # outside a pinned run (a suite run directly through GX): the same rows
        facts = facts_for(store.engine, "stored_text", stored_text_facts)
    finally:
        store.dispose()
    assert [row["id"] for row in facts["metadata"]["sample"]] == sorted(NOT_JSON)


class ErrorSizes(_EngineEvents):
    """The length of every DBAPI error text any engine of this process receives while active."""

    event = "handle_error"

    def __init__(self):
        self.sizes: list[int] = []

    def _record(self, context):
        self.sizes.append(len(str(context.original_exception)))


#: Over the size PostgreSQL's statements parse only once it is known to be readable.
LARGE = PG_PARSED_BYTES + 10
LARGE_NOT_JSON = {"nj-large-word": "v" * LARGE, "nj-large-string": '{"a": "' + "x" * LARGE}


def _check_large_metadata(target, project) -> ErrorSizes:
    """A store with short and large metadata that is not JSON, a large document that is JSON
    and a large blank text, checked: AC-23b's verdict, the same whichever way it is reached."""
    store = _store_with_unreadable_metadata(target)
    session = store.session()
    stamp = "2026-08-01 00:00:06+00:00"
    large_description = "d" * LARGE
    counts = {"total_tokens": 5, "tool_use_count": 1, "duration_ms": 9}
    store.subagent_message(session, stamp, "toolu_large", description=large_description, **counts)
    store.subagent_row(
        session,
        "toolu_large",
        stamp,
        tool_status="completed",
        agent_status="completed",
        settled_at=stamp,
        description=large_description,
        **counts,
    )
    for message_id, raw in {**LARGE_NOT_JSON, "large-blank": " " * LARGE}.items():
        store.message(session, stamp, metadata=raw, message_id=message_id)
    with ErrorSizes() as errors:
        report = run_check(project, target.url, "pre_release")
    assert unevaluated(report) == []
    assert failed(report) == {"expect_message_metadata_to_be_json": "warning"}
    finding = result(report, "expect_message_metadata_to_be_json")
    assert finding.unexpected_count == len(NOT_JSON) + len(LARGE_NOT_JSON)
    assert result(report, "expect_no_writer_shortfall_since_capture_since").observed_value == 0
    return errors


def test_large_metadata_is_decided_without_its_error_reaching_the_client(target, quick_project):
    """AC-23b: text of more than 1 MiB that is not JSON is named like short text, a large
    document that is JSON is read (its subagent recorded, no shortfall), and a large blank
    text reads as {} unnamed, on both dialects. PostgreSQL decides the large texts on the
    server: no error naming their token (the whole text) reaches the client."""
    errors = _check_large_metadata(target, quick_project)
    if target.dialect == "postgresql":
        assert errors.sizes and max(errors.sizes) < 1_000


def test_a_listing_never_carries_the_guard_of_large_metadata():
    """The short failure on a large text belongs to the statements a run executes before it
    located the unreadable ones; a failed rule's listing, run as pasted, reads every text."""
    from sqlalchemy.dialects import postgresql

    from kandev_dq.contract.tables import task_session_messages as m
    from kandev_dq.sql.dialect import metadata_doc, metadata_too_deep

    for construct in (metadata_doc, metadata_too_deep):
        guarded = sa.select(construct(m.c.metadata, undecided_large=True))
        executed = str(guarded.compile(dialect=postgresql.dialect()))
        listed = guarded.compile(
            dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}
        )
        assert "'~'" in executed and "'~'" not in str(listed)


def test_large_metadata_without_plpgsql_is_probed_with_the_same_verdict(pg_target, quick_project):
    """A database without PL/pgSQL: the large texts are probed as the others are (their error
    then reaches the client whole), and the verdict is the same (AC-23b)."""
    with pg_target.engine.begin() as conn:
        conn.exec_driver_sql("DROP EXTENSION plpgsql")
    try:
        errors = _check_large_metadata(pg_target, quick_project)
        assert max(errors.sizes) > LARGE
    finally:
        with pg_target.engine.begin() as conn:
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS plpgsql")


def test_the_common_path_reads_every_message_once_more_at_most(target, quick_project):
    """Without unreadable metadata nothing is located and nothing excluded: on both dialects
    the metadata rule's test of every document is folded into the stored-text scan (SQLite's
    json_valid, PostgreSQL's parse), so no statement probes for unreadable documents."""
    store = activated_store(target)
    session = store.session()
    store.subagent_message(session, "2026-08-01 00:00:01+00:00", "toolu_1")
    with StatementLog() as log:
        report = run_check(quick_project, target.url, "pre_release")
    assert unevaluated(report) == []
    probes = [s for s in log.statements if s.startswith("SAVEPOINT kandev_dq_probe")]
    assert probes == []
    assert not [s for s in log.statements if "unreadable_metadata_ids" in s]


def _stored_text_read(target) -> tuple[dict, StatementLog]:
    """The stored-text facts of ``target``'s store, with the statements that read them."""
    from kandev_dq.facts.stored_text import stored_text_facts

    opened = open_store(target.url)
    try:
        with StatementLog() as log:
            facts = facts_for(opened.engine, "stored_text", stored_text_facts)
    finally:
        opened.dispose()
    return facts, log


def test_the_stored_text_rules_read_each_table_once(target):
    """AC-23b, AC-19, CONTRACT §1 timestamps: unreadable metadata, repeated member names and
    timestamp forms and range are counted in one scan of the messages and one of the subagent
    rows (samples are read only for a count that is not zero), on both dialects."""
    store = activated_store(target)
    session = store.session()
    store.subagent_message(session, "2026-08-01 00:00:01+00:00", "toolu_1")
    facts, log = _stored_text_read(target)
    assert facts["repeated_names"]["count"] == facts["out_of_range"]["count"] == 0

    def scans(table: str) -> list[str]:
        return [s for s in log.statements if f"FROM {table}" in s]

    # PostgreSQL parses every document in that same scan, to find what ::jsonb rejects.
    assert len(scans(schema.task_session_messages.name)) == 1
    assert len(scans(schema.SUBAGENTS)) == 1


def test_repeated_names_are_named_where_the_rules_read_them(target):
    """AC-23b, AC-19: the kind is read in every message, the fields only in a message whose
    kind may be ``subagent_task``; a name repeated where no rule reads it is not named."""
    tool_call = '{"status": "a", "status": "b", "normalized": {"kind": "read_file"}}'
    target.create_base(subagents=None)
    with target.engine.begin() as conn:
        add_session(conn)
        add_message(conn, "tool-status-twice", tool_call, created_at=at(1))
        add_message(conn, "kind-twice", tool_call.replace('"kind"', '"kind": "x", "kind"'))
        add_message(conn, "subagent-status-twice", tool_call.replace("read_file", "subagent_task"))
        # Walked (an escaped name) and found to repeat nothing.
        escaped = '{"st\\u0061tus": "a", "normalized": {"kind": "subagent_task"}}'
        add_message(conn, "escaped-once", escaped)
    facts, _ = _stored_text_read(target)
    named = [row["id"] for row in facts["repeated_names"]["sample"]]
    assert named == ["kind-twice", "subagent-status-twice"]


_STATUS_IN_EACH = (
    '{"tool_call_id": "t", "status": "completed", "normalized": {"kind": "subagent_task", '
    '"subagent_task": {"status": "completed"}}}'
)


@pytest.mark.parametrize(
    ("metadata", "repeated"),
    [
        (_STATUS_IN_EACH, False),
        (_STATUS_IN_EACH.replace('{"status": "completed"}', '{"model": "m"}'), False),
        (
            _STATUS_IN_EACH.replace(
                '{"status": "completed"}', '{"status": "a", "status": "b"}'
            ).replace('"status": "completed", "normalized"', '"normalized"'),
            True,
        ),
        (
            _STATUS_IN_EACH.replace('{"status": "completed"}', '{"model": "m"}').replace(
                '"status": "completed"', '"status": "a", "status": "b"'
            ),
            True,
        ),
        (
            _STATUS_IN_EACH.replace('{"status": "completed"}', '[{"status": "x"}]').replace(
                '"status": "completed"', '"status": "a"'
            ),
            False,
        ),
        (
            _STATUS_IN_EACH.replace('{"status": "completed"}', "[1]").replace(
                '"status": "completed"', '"status": "a", "status": "b"'
            ),
            True,
        ),
    ],
    ids=[
        "one-in-each",
        "one-in-root",
        "twice-in-task",
        "twice-in-root",
        "array-task",
        "twice-in-root-array-task",
    ],
)
def test_a_name_read_in_two_objects_is_named_when_one_object_repeats_it(target, metadata, repeated):
    """AC-23b, AC-19: ``status`` is read at the top and in ``normalized.subagent_task``, so a
    well-formed subagent message writes it twice. Written twice with one object lacking it, the
    two are one object's repeated member: named, though nothing else in the store sends the scan
    to the exact walk. Written once in each object, no message is walked at all."""
    target.create_base(subagents=None)
    with target.engine.begin() as conn:
        add_session(conn)
        add_message(conn, "only", metadata, created_at=at(1))
    facts, log = _stored_text_read(target)
    assert [row["id"] for row in facts["repeated_names"]["sample"]] == (
        ["only"] if repeated else []
    )
    scans = [s for s in log.statements if f"FROM {schema.task_session_messages.name}" in s]
    if metadata == _STATUS_IN_EACH:
        assert len(scans) == 1  # nothing walked


def test_a_kind_spelled_with_escapes_is_still_a_subagent_message(target):
    """AC-21, AC-19: the text test that spares most messages a parse lets every spelling of the
    kind through."""
    from kandev_dq.sql.mapping import subagent_messages

    raw = json.dumps(subagent_metadata("tc-escaped"))
    assert raw.count("subagent_task") == 2
    target.create_base(subagents=None)
    with target.engine.begin() as conn:
        add_session(conn)
        add_message(conn, "escaped", raw.replace("subagent_task", "subagent_\\u0074ask"))
        sm = subagent_messages()
        read = conn.execute(sa.select(sm.c.id, sm.c.tool_call_id)).all()
    assert [tuple(row) for row in read] == [("escaped", "tc-escaped")]


def test_the_backfill_skips_metadata_that_is_not_json(target):
    """The runner reads such rows as ``{}`` too (skipped as non-subagent messages), on both
    dialects, in the dry run and the real run, and reports them."""
    target.create_base(subagents=None)
    with target.engine.begin() as conn:
        add_session(conn)
        add_message(conn, "good", subagent_metadata("tc-good"), created_at=at(1))
        for i, (message_id, raw) in enumerate(NOT_JSON.items()):
            add_message(conn, message_id, raw, created_at=at(10 + i))
    store = open_store(target.url, read_only=False)
    try:
        plan = migrate.run(store, dry_run=True)
        report = migrate.run(store)
    finally:
        store.dispose()
    assert plan.ok and plan.qualifying_messages == 1 and plan.backfill_rows == 1
    assert report.ok, report.render()
    backfill = report.step(migrate.STEP_BACKFILL)
    assert backfill.status is Status.DONE
    assert backfill.detail["unreadable_metadata"] == {
        "count": len(NOT_JSON),
        "ids": sorted(NOT_JSON),
    }
    assert "not JSON" in backfill.reason
    assert set(subagent_rows(target.engine)) == {"good"}
    assert report.keys[BACKFILL_THROUGH] and report.keys[CAPTURE_SINCE]


def test_documents_only_postgresql_cannot_read(pg_target, quick_project):
    """JSON SQLite reads but ``::jsonb`` rejects (a ``\\u0000`` escape, a number beyond
    ``numeric``) is handled the same way on PostgreSQL: read as ``{}``, named, no abort."""
    store = activated_store(pg_target)
    session = store.session()
    documents = {"pg-nul": '{"a": "\\u0000"}', "pg-huge": '{"a": 1e999999}'}
    for message_id, raw in documents.items():
        store.message(session, "2026-08-01 00:00:05+00:00", metadata=raw, message_id=message_id)
    report = run_check(quick_project, pg_target.url, "nightly")
    assert unevaluated(report) == []
    finding = result(report, "expect_message_metadata_to_be_json")
    assert finding.unexpected_count == len(documents)


def test_unrelated_errors_are_not_mistaken_for_unreadable_metadata(target):
    """Only PostgreSQL's JSON input error triggers the fallback; anything else propagates."""
    target.create_base(subagents=None)
    store = open_store(target.url)
    try:
        with store.snapshot() as conn, pytest.raises(sa.exc.DBAPIError, match="no_such_table"):
            tolerating_unreadable_metadata(
                conn, lambda c: c.exec_driver_sql("SELECT * FROM no_such_table").all()
            )
    finally:
        store.dispose()


# --- 5b. timestamps in unknown text forms (SQLite) -------------------------------------------

UNREADABLE_STAMPS = {
    "ts-dmy": "30/07/2026",
    "ts-offset": "2026-07-30 01:39:37+02:00",
    "ts-space": " 2026-07-30 01:39:37Z",
    "ts-feb30": "2026-02-30 01:39:37Z",
    "ts-ten-digits": "2026-07-30T01:39:37.1234567890Z",
    "ts-lower-z": "2026-07-30T01:39:37z",
}
T_OK = "2026-08-01 00:00:09+00:00"


def test_timestamps_in_unknown_text_forms_are_named(sqlite_target, quick_project):
    """SQLite: a timestamp the exact-instant construct would misread is an error naming the
    row (not a silent misclassification); recognised forms of every kind pass."""
    from kandev_dq.facts.stored_text import stored_text_facts

    store = activated_store(sqlite_target)
    session = store.session()
    for i, form in enumerate(
        ("2026-08-01 00:00:01+00:00", "2026-08-01T00:00:02Z", "2026-08-01 00:00:03.5")
    ):
        store.subagent_message(session, form, f"toolu_{i}")
        store.subagent_row(session, f"toolu_{i}", form, tool_status="completed", settled_at=form)
    for message_id, stamp in UNREADABLE_STAMPS.items():
        store.message(session, stamp, metadata={}, message_id=message_id, updated_at=T_OK)
    store.message(session, T_OK, metadata={}, message_id="ts-epoch")
    # One misread text in both columns of a row counts once in each.
    store.message(session, "30/07/2026", metadata={}, message_id="ts-both", updated_at="30/07/2026")
    store.subagent_row(session, "toolu_late", "2026-08-01 00:00:04+02:00", id="row-offset")
    late = "2026-08-01 00:00:05+02:00"
    store.subagent_row(
        session,
        "toolu_both",
        T_OK,
        id="row-both",
        tool_status="completed",
        settled_at=late,
        updated_at=late,
    )
    with sqlite_target.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE task_session_messages SET updated_at = 1785375577 WHERE id = 'ts-epoch'"
        )
    report = run_check(quick_project, sqlite_target.url, "pre_release")
    assert unevaluated(report) == []
    finding = result(report, "expect_timestamps_in_recognised_utc_form")
    assert not finding.success and finding.severity == "error"
    assert finding.observed_value == {
        "task_session_messages.created_at": len(UNREADABLE_STAMPS) + 1,
        "task_session_messages.updated_at": 2,
        "task_session_subagents.observed_at": 1,
        "task_session_subagents.settled_at": 1,
        "task_session_subagents.updated_at": 2,
    }
    store_ = open_store(sqlite_target.url)
    try:
        facts = facts_for(store_.engine, "stored_text", stored_text_facts)
    finally:
        store_.dispose()
    named = {(r["table"], r["column"], r["id"]) for r in facts["timestamps"]["sample"]}
    messages = "task_session_messages"
    assert {(messages, "created_at", i) for i in UNREADABLE_STAMPS} <= named
    assert (messages, "updated_at", "ts-epoch") in named
    assert {(messages, "created_at", "ts-both"), (messages, "updated_at", "ts-both")} <= named
    assert ("task_session_subagents", "observed_at", "row-offset") in named


def test_timestamps_on_postgresql_are_typed(pg_target, quick_project):
    activated_store(pg_target)
    report = run_check(quick_project, pg_target.url, "nightly")
    finding = result(report, "expect_timestamps_in_recognised_utc_form")
    assert finding.success and finding.observed_value == "not applicable"


def test_the_backfill_refuses_timestamps_it_cannot_read(sqlite_target):
    """SQLite: a qualifying message whose created_at is unreadable fails the backfill step
    with the row named; no key, no row (AC-24a); once fixed, the next run completes."""
    sqlite_target.create_base(subagents=None)
    with sqlite_target.engine.begin() as conn:
        add_session(conn)
        add_message(conn, "good", subagent_metadata("tc-good"), created_at=at(1))
        add_message(conn, "bad-stamp", subagent_metadata("tc-bad"), created_at="30/07/2026")
    store = open_store(sqlite_target.url, read_only=False)
    try:
        failed = migrate.run(store)
        backfill = failed.step(migrate.STEP_BACKFILL)
        assert backfill.status is Status.FAILED
        assert "'bad-stamp'" in backfill.reason and "30/07/2026" in backfill.reason
        assert failed.keys[CAPTURE_SINCE] is None and failed.keys[BACKFILL_THROUGH] is None
        assert failed.keys[EXECUTION_SINCE] is not None
        assert subagent_rows(sqlite_target.engine) == {}
        with sqlite_target.engine.begin() as conn:
            conn.exec_driver_sql(
                "UPDATE task_session_messages SET created_at = '2026-07-30 00:00:00+00:00', "
                "updated_at = '2026-07-30 00:00:00+00:00' WHERE id = 'bad-stamp'"
            )
        healed = migrate.run(store)
    finally:
        store.dispose()
    assert healed.ok and healed.status(migrate.STEP_BACKFILL) is Status.DONE
    assert set(subagent_rows(sqlite_target.engine)) == {"good", "bad-stamp"}


# --- 5c. a ten-megabyte key ------------------------------------------------------------------


def test_a_ten_megabyte_key(target, quick_project):
    """A clear finding; the report, the ledger and the migration's report stay small; the
    write-once rule still notices a rewrite of the huge value."""
    huge = "2026-07-30T01:39:37Z" + "9" * 10_000_000
    store = StoreBuilder(target.engine).create()
    store.keys(huge, "", CAPTURE)
    first = run_check(quick_project, target.url, "nightly")
    assert unevaluated(first) == []
    well_formed = result(first, "expect_activation_keys_to_be_well_formed")
    assert not well_formed.success and "far longer than any RFC3339 instant" in well_formed.message
    assert len(json.dumps(first.to_json(), default=str)) < 100_000
    with Records(records_url(quick_project)) as records:
        first_seen = records.first_values(store_identity(resolve_url(target.url)))
        assert first_seen and all(len(value) < 10_000 for value in first_seen.values())
    again = run_check(quick_project, target.url, "nightly")
    assert result(again, "expect_activation_keys_to_be_write_once").success
    store.set_key(CAPTURE_SINCE, huge[:-1] + "8")
    rewritten = run_check(quick_project, target.url, "nightly")
    assert not result(rewritten, "expect_activation_keys_to_be_write_once").success
    opened = open_store(target.url, read_only=False)
    try:
        report = migrate.run(opened)
    finally:
        opened.dispose()
    assert len(report.render()) < 5_000 and len(json.dumps(report.to_dict())) < 5_000


# --- 5d. text that is not UTF-8 (SQLite) -----------------------------------------------------


def test_text_that_is_not_utf8(sqlite_target, quick_project):
    """Bytes that are not UTF-8 in keys, ids and metadata (SQLite stores any bytes as TEXT):
    every rule evaluates, the backfill copies them byte for byte."""
    sqlite_target.create_base(subagents=None)
    document = json.dumps(subagent_metadata("tc-XX", description="desc-XX")).encode()
    raw = document.replace(b"XX", b"\xff\xfe").hex()
    with sqlite_target.engine.begin() as conn:
        add_session(conn)
        conn.exec_driver_sql(
            "INSERT INTO task_session_messages (id, task_session_id, task_id, turn_id, content, "
            "metadata, created_at, updated_at) VALUES (CAST(x'6d2dff' AS TEXT), 's1', 't1', "
            f"'u1', '', CAST(x'{raw}' AS TEXT), '2026-07-30 01:00:00+00:00', "
            "'2026-07-30 01:00:00+00:00')"
        )
        conn.exec_driver_sql(
            "INSERT INTO kandev_meta (key, value) VALUES ('other_feature', CAST(x'41ff42' AS TEXT))"
        )
    store = open_store(sqlite_target.url, read_only=False)
    try:
        report = migrate.run(store)
    finally:
        store.dispose()
    assert report.ok and report.backfill_rows == 1, report.render()
    with sqlite_target.engine.connect() as conn:
        copied = conn.exec_driver_sql(
            "SELECT hex(id), hex(tool_call_id), hex(description) FROM task_session_subagents"
        ).one()
    assert copied == ("6D2DFF", b"tc-\xff\xfe".hex().upper(), b"desc-\xff\xfe".hex().upper())
    checked = run_check(quick_project, sqlite_target.url, "pre_release")
    assert unevaluated(checked) == []
    assert checked.success, [(r.expectation, r.message) for r in checked.results if not r.success]


# --- 5e-5h. missing tables, extra columns, an empty store, a locked file ----------------------


@pytest.mark.parametrize("missing", ["task_sessions", "task_session_messages", "kandev_meta"])
def test_a_missing_table_is_a_clear_exit_2(target, quick_project, capsys, missing):
    target.create_base(subagents=None)
    with target.engine.begin() as conn:
        cascade = " CASCADE" if target.dialect == "postgresql" else ""
        conn.exec_driver_sql(f"DROP TABLE {missing}{cascade}")
    code, out, err = cli(capsys, "check", "--store", target.url, "--project", str(quick_project))
    assert code == 2 and out == ""
    assert err.startswith("kandev-dq: error:") and len(err.strip().splitlines()) == 1
    assert f"missing table(s) {missing}" in err


def test_extra_unknown_columns_change_nothing(target, quick_project):
    _store_with_unreadable_metadata(target)  # any store with rows in every table will do
    with target.engine.begin() as conn:
        for table in (*(t.name for t in schema.BASE_TABLES), schema.SUBAGENTS):
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN zz_unknown TEXT DEFAULT 'x'")
    report = run_check(quick_project, target.url, "pre_release")
    assert unevaluated(report) == []
    assert set(failed(report)) == {"expect_message_metadata_to_be_json"}


def test_migrating_a_table_with_an_unknown_column(target):
    """SQLite's rebuild refuses to drop a column it does not know (the old table stays whole,
    AC-33a); PostgreSQL's ALTER path keeps it."""
    target.create_base(subagents="pre_amendment")
    with target.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE task_session_subagents ADD COLUMN zz_unknown TEXT")
        add_session(conn)
        add_subagent_row(conn, amended=False, id="old", tool_call_id="tc-old")
    store = open_store(target.url, read_only=False)
    try:
        report = migrate.run(store)
    finally:
        store.dispose()
    if target.dialect == "sqlite":
        amend = report.step(migrate.STEP_AMEND)
        assert amend.status is Status.FAILED and "refusing to drop them" in amend.reason
        assert report.shape.describe() == "pre-amendment"
        assert report.keys[EXECUTION_SINCE] is None
    else:
        assert report.ok and report.shape.end_state_holds
        assert "zz_unknown" in report.shape.columns
    assert set(subagent_rows(target.engine)) == {"old"}


def test_an_empty_store(target, quick_project, capsys):
    """Base tables, no rows, no keys: exit 1 with findings, every rule evaluated."""
    target.create_base(subagents=None)
    args = ("--store", target.url, "--project", str(quick_project), "--format", "json")
    code, out, _ = cli(capsys, "check", "--checkpoint", "pre_release", *args)
    report = json.loads(out)
    assert code == 1 and report["state"] == "not_activated"
    assert not [r for r in report["results"] if r["message"].startswith("could not evaluate")]
    failed = {r["expectation"] for r in report["results"] if not r["success"]}
    assert {
        "expect_subagents_table_to_exist",
        "expect_no_writer_shortfall_since_capture_since",
    } <= failed


_HOLDER = r"""
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(60)
"""


def test_a_locked_sqlite_store_is_a_clear_exit_2(sqlite_target, quick_project, capsys):
    """Another process holds ``BEGIN EXCLUSIVE``: the busy timeout, then one line, exit 2."""
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    sqlite_target.engine.dispose()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, sqlite_target.url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        code, out, err = cli(
            capsys, "check", "--store", sqlite_target.url, "--project", str(quick_project)
        )
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "locked by another process" in err
    assert 4.5 <= waited < 30


_CRASHING_WRITER = r"""
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 1")
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE task_session_messages SET content = hex(randomblob(2000))")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_hot_journal_is_a_clear_exit_2(sqlite_target, quick_project, capsys):
    """A writer killed mid-transaction leaves a hot journal only a read-write open can roll
    back: a read-only check says so in one line (exit 2); once rolled back, it runs."""
    store = activated_store(sqlite_target)
    session = store.session()
    for i in range(200):
        store.message(session, f"2026-08-01 00:00:{i % 60:02d}+00:00", metadata={})
    sqlite_target.engine.dispose()
    crashed = subprocess.run([sys.executable, "-c", _CRASHING_WRITER, sqlite_target.url])
    assert crashed.returncode == -signal.SIGKILL
    assert Path(f"{sqlite_target.url}-journal").stat().st_size > 0
    code, out, err = cli(
        capsys, "check", "--store", sqlite_target.url, "--project", str(quick_project)
    )
    assert code == 2 and "hot journal" in err and len(err.strip().splitlines()) == 1
    with sqlite_target.engine.connect() as conn:  # a read-write open rolls the journal back
        conn.exec_driver_sql("PRAGMA quick_check").all()
    sqlite_target.engine.dispose()
    code, out, err = cli(
        capsys, "check", "--store", sqlite_target.url, "--project", str(quick_project)
    )
    assert code == 0, out + err
