"""The scheduler recipes of docs/schedulers.md run as printed (AC-26: a stopped writer fails them).

Each recipe is read from the document and executed with its orchestrator replaced by a
stand-in as small as the recipe needs (Airflow, Dagster, Prefect and GX's Airflow provider are
not installed here): the stand-ins only record what the recipe declares; the kandev-dq calls,
GX's API and the store are real. The GX provider's operator is stood in for by what its
``execute`` does with a file context: build the context, get the checkpoint, run it and return
``describe_dict()``.
"""

from __future__ import annotations

import re
import sys
import types

import pytest

from kandev_dq.lab.scenarios.running import materialise, private_project
from tests.gxhelpers import REPO

RECIPES = REPO / "docs" / "schedulers.md"
PROJECT_IN_RECIPES = "/srv/kandev-dq"


def recipes() -> dict[str, str]:
    """Each recipe's Python block, by its section title."""
    text = RECIPES.read_text(encoding="utf-8")
    found = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        blocks = re.findall(r"```python\n(.*?)```", body, flags=re.S)
        assert len(blocks) == 1, title
        found[title.strip()] = blocks[0]
    return found


class _Task:
    def __init__(self, **declared):
        self.declared = declared

    def __rshift__(self, other):
        return other


class _DAG:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _GXValidateCheckpointOperator(_Task):
    def execute(self):
        context = self.declared["configure_file_data_context"]()
        checkpoint = self.declared["configure_checkpoint"](context)
        return checkpoint.run(batch_parameters={}).describe_dict()


class _TaskInstance:
    def __init__(self, pushed):
        self.pushed = pushed

    def xcom_pull(self, task_ids):
        return self.pushed[task_ids]


def _decorator(**_declared):
    return lambda function: function


def _modules() -> dict[str, types.ModuleType]:
    def module(name: str, **attributes) -> types.ModuleType:
        made = types.ModuleType(name)
        made.__dict__.update(attributes)
        return made

    severity = types.SimpleNamespace(WARN="WARN", ERROR="ERROR")
    return {
        "airflow": module("airflow", DAG=_DAG),
        "airflow.operators": module("airflow.operators"),
        "airflow.operators.python": module("airflow.operators.python", PythonOperator=_Task),
        "great_expectations_provider": module("great_expectations_provider"),
        "great_expectations_provider.operators": module("great_expectations_provider.operators"),
        "great_expectations_provider.operators.validate_checkpoint": module(
            "great_expectations_provider.operators.validate_checkpoint",
            GXValidateCheckpointOperator=_GXValidateCheckpointOperator,
        ),
        "dagster": module(
            "dagster",
            asset_check=_decorator,
            AssetCheckResult=lambda **result: result,
            AssetCheckSeverity=severity,
        ),
        "prefect": module("prefect", task=_decorator, flow=_decorator),
    }


@pytest.fixture
def scheduled(built_project, sqlite_target, tmp_path, monkeypatch):
    """A project and a store as a scheduler's worker sees them: the store in the worker's
    environment, the stand-in orchestrators importable."""
    project = private_project(built_project, tmp_path / "project")
    for name, module in _modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("KANDEV_STORE_URL", f"sqlite:///{sqlite_target.url}")
    monkeypatch.delenv("KANDEV_DQ_RECORDS_URL", raising=False)

    def load(title: str) -> dict:
        code = recipes()[title].replace(PROJECT_IN_RECIPES, str(project))
        scope: dict = {"__name__": f"recipe {title}"}
        exec(compile(code, f"{RECIPES.name}: {title}", "exec"), scope)  # noqa: S102
        return scope

    return types.SimpleNamespace(load=load, store=sqlite_target.url, project=project)


def test_every_recipe_is_tested():
    assert set(recipes()) == {
        "Airflow: GX's provider operator, by checkpoint name",
        "Airflow: a PythonOperator on the Python API",
        "Dagster: an asset check",
        "Prefect: a task",
        "A plain script",
    }


def _verdicts(scheduled) -> dict[str, bool]:
    """Whether each recipe passed the store (a task that raises, or exits non-zero, failed)."""
    outcome: dict[str, bool] = {}

    def runs(name, call):
        try:
            result = call()
        except (RuntimeError, SystemExit) as stopped:
            outcome[name] = isinstance(stopped, SystemExit) and stopped.code == 0
        else:
            outcome[name] = result

    airflow_gx = scheduled.load("Airflow: GX's provider operator, by checkpoint name")
    described = airflow_gx["nightly"].execute()
    instance = _TaskInstance({"kandev_dq_nightly": described})
    runs("airflow gx", lambda: airflow_gx["fail_unless_passed"](instance) is None)

    airflow_api = scheduled.load("Airflow: a PythonOperator on the Python API")
    runs("airflow api", lambda: "passed" in airflow_api["kandev_dq_pre_release"]())

    dagster = scheduled.load("Dagster: an asset check")
    runs("dagster", lambda: dagster["kandev_dq_nightly"]()["passed"])

    prefect = scheduled.load("Prefect: a task")
    runs("prefect", lambda: "passed" in prefect["nightly_flow"]())

    runs("script", lambda: scheduled.load("A plain script"))
    return outcome


def test_the_recipes_pass_a_healthy_store(scheduled):
    materialise("healthy_baseline", scheduled.store)
    assert _verdicts(scheduled) == dict.fromkeys(
        ("airflow gx", "airflow api", "dagster", "prefect", "script"), True
    )


def test_the_recipes_fail_a_store_whose_writer_stopped(scheduled):
    """AC-26: every recipe reports the stopped writer, through GX's API and kandev-dq's."""
    materialise("stopped_writer", scheduled.store)
    assert _verdicts(scheduled) == dict.fromkeys(
        ("airflow gx", "airflow api", "dagster", "prefect", "script"), False
    )


def test_the_recipes_name_the_project_they_are_given():
    """The tests above swap the recipes' project folder for theirs: it must be there to swap."""
    for title, code in recipes().items():
        assert PROJECT_IN_RECIPES in code, title
