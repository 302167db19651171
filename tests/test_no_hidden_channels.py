"""No credential in the environment, during or after a check (rule: run inputs reach GX only
through its own parameters, and the store's password never reaches GX at all).

A GX action in the project (what project-loaded code could do) reads ``os.environ`` and GX's
config variables while the checkpoint runs; the store URL carries a password."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Literal

import pytest
from great_expectations.checkpoint.actions import ValidationAction
from sqlalchemy.engine import make_url

from kandev_dq.lab.storebuilder import StoreBuilder
from kandev_dq.project.files import DATASOURCE, URL_VARIABLE, build_project
from kandev_dq.run.check import run_check

CAPTURE = "2026-07-30T01:39:37.271235Z"
SEEN: list[dict[str, str]] = []
SPY_TYPE = "kandev_test_environment_spy"


class EnvironmentSpy(ValidationAction):
    """Records what any code the project loads could read while a checkpoint runs."""

    type: Literal["kandev_test_environment_spy"] = SPY_TYPE

    def run(self, checkpoint_result, action_context=None) -> dict:
        context = self._resolve_context().context
        source = context.data_sources.get(DATASOURCE)
        SEEN.append(
            {
                **{f"env:{k}": v for k, v in os.environ.items()},
                **{f"gx:{k}": str(v) for k, v in context.config_provider.get_values().items()},
                "datasource": repr(source.dict(config_provider=context.config_provider)),
                "gx engine url": source.get_execution_engine().engine.url.render_as_string(
                    hide_password=False
                ),
            }
        )
        return {}


def _spy_on(project: Path, checkpoint: str) -> None:
    path = project / "checkpoints" / f"{checkpoint}.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["actions"].append({"type": SPY_TYPE, "name": "spy"})
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")


@pytest.fixture
def role_with_password(pg_target):
    """A healthy store, and a login role with a password that may read it (the test server's
    trust auth accepts any password)."""
    StoreBuilder(pg_target.engine).create().keys(CAPTURE, "", CAPTURE)
    role, password = f"kdq_{uuid.uuid4().hex[:10]}", f"pw-{uuid.uuid4().hex}"
    schema_name = make_url(pg_target.url).query["options"].split("=", 1)[1]
    with pg_target.engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema_name}" TO {role}')
        conn.exec_driver_sql(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema_name}" TO {role}')
    url = make_url(pg_target.url).set(username=role, password=password)
    try:
        yield url.render_as_string(hide_password=False), password
    finally:
        with pg_target.engine.begin() as conn:
            conn.exec_driver_sql(f"DROP OWNED BY {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")


def test_no_environment_variable_holds_the_store_password(
    pg_target, role_with_password, project, monkeypatch
):
    url, password = role_with_password
    monkeypatch.delenv(URL_VARIABLE, raising=False)
    _spy_on(project, "nightly")
    SEEN.clear()

    report = run_check(project, url, "nightly", allow_project_code=True)  # the action is code

    assert report.results and report.success
    assert len(SEEN) == 1, "the project's action ran during the check"
    during = SEEN[0]
    assert during["gx:" + URL_VARIABLE].startswith("postgresql")  # GX had the store's URL...
    assert [name for name, value in during.items() if password in value] == []  # ...no password
    assert [name for name, value in os.environ.items() if password in value] == []
    assert URL_VARIABLE not in os.environ


def test_a_check_leaves_the_store_variable_as_it_found_it(sqlite_target, project, monkeypatch):
    StoreBuilder(sqlite_target.engine).create().keys(CAPTURE, "", CAPTURE)
    monkeypatch.setenv(URL_VARIABLE, "sqlite:///elsewhere.db")
    report = run_check(project, sqlite_target.url, "nightly")
    assert report.results and os.environ[URL_VARIABLE] == "sqlite:///elsewhere.db"


@pytest.mark.parametrize("outside", [None, "postgresql://someone:secret@elsewhere/db"])
def test_building_a_project_leaves_the_store_variable_as_it_found_it(
    tmp_path, monkeypatch, outside
):
    if outside is None:
        monkeypatch.delenv(URL_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(URL_VARIABLE, outside)
    root = build_project(tmp_path / "project")
    assert os.environ.get(URL_VARIABLE) == outside
    datasources = (root / "great_expectations.yml").read_text(encoding="utf-8")
    assert "connection_string: ${" + URL_VARIABLE + "}" in datasources  # the variable, kept
