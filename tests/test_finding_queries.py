"""Every finding's query lists exactly what its rule counted, on SQLite and PostgreSQL.

For each scenario of the fault corpus (so a new scenario is covered automatically), every rule
of ``pre_release`` is judged on the scenario's store and each query a failed rule emits (the
text ``check --format json`` carries) is run as a reviewer would run it: pasted whole into a
read-only connection (SQLite ``mode=ro``, PostgreSQL ``SET TRANSACTION READ ONLY``), with no
parameter. It returns exactly ``unexpected_count`` rows (AC-19: one verdict, one listing, on
both dialects), and its rows are the ones the rule's own sample named: the sample is read by
the counting code with the rule's condition, so a listed row the condition does not hold for,
or a counted row missing from the listing, shows here.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy.engine import make_url

from kandev_dq.gx.context import SUITES
from kandev_dq.lab import scenarios
from kandev_dq.lab.scenarios import SCENARIOS
from kandev_dq.project.plan import CHECKPOINTS
from kandev_dq.run.explain import finding_in, rules, snapshot_of
from kandev_dq.sql.listing import INSTANT_SUFFIX, REASON
from kandev_dq.sql.messages import SAMPLE_LIMIT
from tests.conftest import IN_CI
from tests.pasted import read_only_rows

#: Columns naming a row or key of the store's records a rule counts.
RECORD_IDENTITY = (
    "id",
    "row_id",
    "message_id",
    "task_session_id",
    "agent_execution_id",
    "tool_call_id",
)
#: Columns naming an item a rule counts: what a listing and its rule's sample are matched on.
IDENTITY = (*RECORD_IDENTITY, "table", "column")
#: Failed rules that count no rows or keys of the store's records (activation keys and state,
#: the schema, a NULL maximum): no query. Every other rule reporting a
#: count carries the query listing what it counted.
COUNT_NO_ROWS = {
    "expect_activation_keys_to_be_well_formed",
    "expect_activation_keys_to_be_paired",
    "expect_activation_state_to_be_in_set",
    "expect_execution_since_only_on_amended_schema",
    "expect_execution_since_not_pending_self_heal",
    "expect_activation_keys_to_be_write_once",
    "expect_write_once_baseline_to_predate_this_run",
    "expect_backfill_through_not_after_capture_since",
    "expect_new_keys_to_carry_subsecond_precision",
    "expect_legacy_keys_to_be_disclosed",
    "expect_population_to_be_disclosed",
    "expect_subagents_table_to_exist",
    "expect_execution_column_to_be_not_null",
    "expect_three_column_unique_key",
    "expect_no_two_column_unique_key",
    "expect_secondary_indexes_as_fresh_store",
    "expect_no_partial_subagents_upgrade",
    "expect_session_foreign_key_to_cascade",
    "expect_no_foreign_key_on_turn_or_execution",
    "expect_subagent_activity_since_capture_since",
}
#: Rules counting keys that have no query only when they compared nothing: their observed value.
NO_ROWS_WHEN = {
    "expect_no_writer_shortfall_since_capture_since": "not run",  # AC-28a
    "expect_backfill_reconciliation_not_vacuous": "not evaluated",  # the table is unreadable
}


def _emitted(target: str) -> list[tuple[str, int, list[dict], str]]:
    """(rule, unexpected_count, sample, query) of every failed rule of pre_release emitting a
    query, the query as the JSON report carries it."""
    known = rules()
    suites = CHECKPOINTS["pre_release"]
    # The GX expectations a check runs: their result is what the JSON report carries.
    built = {e.expectation_type: e for suite in suites for e in SUITES[suite]()}
    emitted = []
    with snapshot_of(target) as (store, read):
        for rule in known.values():
            if rule.suite not in suites:
                continue
            found = finding_in(read, store.engine, rule)
            if found.success:
                continue
            query = built[rule.name].result_of(found)["result"]["details"].get("query")
            if query is None:
                if rule.name in NO_ROWS_WHEN:
                    assert found.observed_value == NO_ROWS_WHEN[rule.name], rule.name
                else:
                    assert rule.name in COUNT_NO_ROWS, f"{rule.name} failed without a query"
                # A sample naming rows or keys shows the rule counted them: a query lists all.
                named = {c for row in found.sample for c in row} & set(RECORD_IDENTITY)
                assert not named, f"{rule.name} counted {sorted(named)} without a query"
                continue
            emitted.append((rule.name, found.unexpected_count, found.sample, query))
    return emitted


def _keys(rows: list[dict], columns: list[str]) -> set[tuple]:
    return {tuple(str(row[c]) for c in columns) for row in rows}


def _check(target: str, dialect: str) -> list[str]:
    emitted = _emitted(target)
    for name, count, sample, query in emitted:
        assert query.rstrip().endswith(";") and "?" not in query.split("'")[0], name
        listed = read_only_rows(target, dialect, query)
        assert len(listed) == count, f"{name}: {len(listed)} rows listed, {count} counted"
        assert all(row[REASON] for row in listed), name
        if listed:  # every timestamp as stored beside its exact instant (README)
            columns = set(listed[0])
            timestamps = {c for c in columns if c.endswith("_at")}
            assert {f"{c}{INSTANT_SUFFIX}" for c in timestamps} <= columns, (name, columns)
            shown = {c.removesuffix(INSTANT_SUFFIX) for c in columns if c.endswith(INSTANT_SUFFIX)}
            assert shown <= columns, (name, columns)
        common = [c for c in IDENTITY if sample and c in sample[0] and listed and c in listed[0]]
        if not common:
            continue
        sampled, rows = _keys(sample, common), _keys(listed, common)
        if len(sample) < SAMPLE_LIMIT:  # the sample is every counted item
            assert rows == sampled, f"{name}: listed {rows - sampled}, counted {sampled - rows}"
        else:
            assert sampled <= rows, f"{name}: sampled rows missing from the listing"
    return sorted(name for name, *_ in emitted)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_each_emitted_query_lists_what_its_rule_counted(name, tmp_path, request):
    scenario = SCENARIOS[name]
    with scenarios.scratch_sqlite(tmp_path, name) as url:
        scenarios.materialise(name, url)
        checked = scenario.check_url(url) if scenario.check_url else url
        lite = _check(checked, "sqlite")

    server = request.getfixturevalue("pg_database").render_as_string(hide_password=False)
    with scenarios.scratch_postgres(server) as url:
        scenarios.materialise(name, url)
        checked = scenario.check_url(url) if scenario.check_url else url
        pg = _check(checked, "postgresql")
    # Timestamps in text forms SQLite alone can hold are the one dialect difference (AC-24e).
    assert set(lite) - {"expect_timestamps_in_recognised_utc_form"} == set(pg)


def test_the_json_report_the_data_docs_and_the_audit_carry_each_query(target, project, tmp_path):
    """AC-16 (orphan rows) on both dialects: the query of the failed rule is the same text in
    ``summary.json`` (``check --format json``), ``queries.sql`` and both data docs pages, where
    it sits escaped in a collapsed block with its copy button; pasted from ``queries.sql`` into
    a read-only connection, it lists exactly the counted rows."""
    from kandev_dq.report.audit import QUERIES_SQL, run_audit

    if target.dialect == "sqlite":
        target.engine.dispose()
    scenarios.materialise("orphan_rows", target.url)
    done = run_audit(project, target.url, tmp_path / "audit")
    failed = {r.expectation: r for r in done.report.results if not r.success}
    orphans = failed["expect_no_orphan_subagent_rows"]
    assert orphans.query and orphans.unexpected_count
    assert all(r.query is None for r in done.report.results if r.success)

    summary = json.loads((tmp_path / "audit" / "summary.json").read_text(encoding="utf-8"))
    queries = {r["expectation"]: r["query"] for r in summary["results"]}
    assert queries["expect_no_orphan_subagent_rows"] == orphans.query
    script = (tmp_path / "audit" / QUERIES_SQL).read_text(encoding="utf-8")
    block = script.split("-- expect_no_orphan_subagent_rows [AC-16]", 1)[1]
    pasted = block.split("\n", 2)[2].split(";\n", 1)[0] + ";"
    assert pasted == orphans.query
    listed = read_only_rows(target.url, target.dialect, pasted)
    assert len(listed) == orphans.unexpected_count

    site = tmp_path / "audit" / "data_docs"
    overview = (site / "overview.html").read_text(encoding="utf-8")
    assert "<details class='kandev-query'>" in overview and "kandev-copy" in overview
    assert "static/kandev/copy.js" in overview
    assert (site / "static" / "kandev" / "copy.js").is_file()
    # What the copy button copies: the code element's text, the page's escaping undone.
    assert orphans.query in _copied(overview)
    pages = [p for p in site.rglob("*.html") if "validations" in p.parts and "rows" in p.parts]
    assert any(orphans.query in _copied(p.read_text(encoding="utf-8")) for p in pages)


def _copied(page: str) -> list[str]:
    import html as markup
    import re

    blocks = re.findall(r"<code id='kandev-query-[0-9a-f]+'>(.*?)</code>", page, re.S)
    assert all("<" not in block for block in blocks)  # escaped: no markup inside
    return [markup.unescape(block) for block in blocks]


#: Ids a listing inlines as literals: a driver's placeholder syntax, a doubled ``%``, quotes,
#: backslashes and dollar quoting, each of which a client could read differently.
LITERAL_HAZARDS = ("bad-%(x)s %s %% ? :name $1", "trunc-100%", "o'q", "back\\slash", "$$")


def _store_listing_hazards(target) -> None:
    """An activated store whose failing rules list ids holding every hazard: subagent
    messages with no row (the shortfall and the writer rules), a row no message produced
    and metadata that is not JSON."""
    from kandev_dq.lab.storebuilder import StoreBuilder

    capture = "2026-07-30T01:39:37.271235Z"
    store = StoreBuilder(target.engine).create()
    store.keys(capture, "", capture)
    session = store.session()
    for i, hazard in enumerate(LITERAL_HAZARDS):
        stamp = f"2026-08-01 00:00:0{i}+00:00"
        store.subagent_message(
            session,
            stamp,
            f"tc-{hazard}",
            message_id=f"m-{hazard}",
            description=hazard,
            total_tokens=5,
            tool_use_count=1,
            duration_ms=9,
        )
        store.subagent_row(session, f"orphan-{hazard}", stamp, id=f"row-{hazard}")
        store.message(session, stamp, metadata=f"{{{hazard}", message_id=f"nj-{hazard}")


def _pasted(target, query: str) -> int | None:
    """Rows the store's own client returns for ``query`` fed as a script (as a reviewer
    pastes it); None when that client is not installed (outside CI)."""
    import csv
    import io
    import shutil
    import subprocess

    binary = "sqlite3" if target.dialect == "sqlite" else "psql"
    if shutil.which(binary) is None:
        assert not IN_CI, f"{binary} is required when CI=true"
        return None
    if target.dialect == "sqlite":
        argv = [binary, "-readonly", "-bail", "-csv", target.url]
    else:
        url = make_url(target.url).set(drivername="postgresql")
        conninfo = url.render_as_string(hide_password=False)
        argv = [binary, "-X", "-q", "-v", "ON_ERROR_STOP=1", "--csv", "-t", conninfo]
    done = subprocess.run(argv, input=query, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return sum(1 for _ in csv.reader(io.StringIO(done.stdout)))


def test_queries_holding_percent_quotes_and_backslashes_run_as_printed(target):
    """A listing inlines ids holding ``%``, placeholder syntax, quotes, backslashes and
    ``$$``: pasted as printed into the store's own client (``sqlite3``, ``psql``), and run
    with no parameter on the driver, each query returns exactly ``unexpected_count`` rows."""
    _store_listing_hazards(target)
    if target.dialect == "sqlite":
        target.engine.dispose()
    emitted = _emitted(target.url)
    names = {name for name, *_ in emitted}
    assert {
        "expect_message_metadata_to_be_json",
        "expect_no_writer_shortfall_since_capture_since",
    } <= names
    for name, count, _sample, query in emitted:
        assert len(read_only_rows(target.url, target.dialect, query)) == count, name
        pasted = _pasted(target, query)
        assert pasted in (None, count), f"{name}: {pasted} rows pasted, {count} counted"
    if target.dialect == "postgresql":  # the ids located as unreadable are inlined there
        (listed,) = [q for n, _c, _s, q in emitted if n == "expect_message_metadata_to_be_json"]
        assert all(f"nj-{h}".replace("'", "''") in listed for h in LITERAL_HAZARDS), listed
