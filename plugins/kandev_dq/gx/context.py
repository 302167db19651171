"""Loading a kandev-dq project as a GX file context, safely, and a suite's GX expectations.

The project's files are read and vetted before GX loads them (:mod:`kandev_dq.project`); here
GX builds the context, with every kandev-dq expectation type and metric registered first, and
each suite is held to the expectations its JSON declares. The store is chosen at run time: the
one data source reads its URL from ``${KANDEV_STORE_URL}``, a config variable given through
GX's runtime environment (never the process environment) and always password-free.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from kandev_dq.errors import KandevDqError
from kandev_dq.project.files import (
    IncompleteSuiteError,
    refuse_incomplete_suite,
    refuse_project_code,
)
from kandev_dq.project.plan import SUITE_NAMES, suite_plan
from kandev_dq.project.vetting import (
    EARLIER_MODULES,
    PROJECT_FILE,
    SUITE_DIR,
    URL_VARIABLE,
    loading_vetted,
    trust_project_code,
)


def suite_expectations(suite: str) -> list:
    """A suite's GX expectation objects, each at its class's own severity (imports GX)."""
    from great_expectations.expectations.registry import get_expectation_impl

    import kandev_dq.expectations  # noqa: F401 - registers the types with GX

    return [
        get_expectation_impl(planned.type).at_default_severity(**planned.kwargs)
        for planned in suite_plan(suite)
    ]


#: Suite name -> a function building its GX expectations (imported lazily: GX is slow to import).
SUITES: dict[str, Callable[[], list]] = {
    name: functools.partial(suite_expectations, name) for name in SUITE_NAMES
}


def load_context(
    root: Path,
    store_url: str | None = None,
    *,
    allow_project_code: bool = False,
    own_run_only: bool = False,
):
    """A file context rooted at ``root``, with every kandev-dq expectation registered first.

    ``store_url`` (password-free) is what the data source's ``${KANDEV_STORE_URL}`` resolves
    to: GX's runtime environment ranks above the process environment and the project's config
    variables. (The records database is never a config variable: its URL may hold a password;
    kandev-dq attaches it to the results store, :func:`kandev_dq.gx.results_store.attach_records`.)

    Refuses a folder without ``great_expectations.yml`` (GX would silently create an empty
    project there), a project that names Python of its own unless the user opted in with
    ``allow_project_code`` (:func:`refuse_project_code`; ``own_run_only`` for a check), and a
    suite that loads fewer expectations than its JSON holds (GX drops unknown expectation
    types and the checkpoint would then pass on bad data).
    """
    root = Path(root)
    if not (root / PROJECT_FILE).is_file():
        raise KandevDqError(f"{root} is not a kandev-dq project: no {PROJECT_FILE} there")
    if not allow_project_code:
        refuse_project_code(root, own_run_only=own_run_only)
    else:
        trust_project_code(root)  # GX's path vets it again (vet_on_gx_path)
    import kandev_dq.expectations  # noqa: F401 - registers the types before any suite loads
    import kandev_dq.gx.live_window  # noqa: F401 - registers the live window metric
    import kandev_dq.gx.write_once  # noqa: F401 - registers the write-once ledger metric

    _load_earlier_modules_as_today()

    quiet_gx()
    import great_expectations as gx

    with loading_vetted(root) as vetted:
        context = vetted(_file_context(gx, root, store_url))
    # Also for a project whose yml predates kandev-dq's own expectations store.
    for path in sorted((root / SUITE_DIR).glob("*.json")):
        declared = json.loads(path.read_text(encoding="utf-8")).get("expectations", [])
        try:
            loaded = context.suites.get(path.stem).expectations
            refuse_incomplete_suite(
                path.stem,
                [str(e.get("type")) for e in declared],
                [e.expectation_type for e in loaded],
            )
        except IncompleteSuiteError as exc:
            raise KandevDqError(f"{path}: {exc}") from None
        except gx.exceptions.GreatExpectationsError as exc:
            raise KandevDqError(f"{path}: {str(exc).splitlines()[0]}") from None
    return context


def _load_earlier_modules_as_today() -> None:
    """A project the previous release wrote names its stores by their earlier modules (the
    vetting's closed list, :data:`~kandev_dq.project.vetting.EARLIER_MODULES`): GX, importing
    one, gets the module that holds its classes today. Nothing is left at the earlier paths."""
    from kandev_dq.gx import results_store, suites_store

    today = {module.__name__: module for module in (results_store, suites_store)}
    for earlier, module in EARLIER_MODULES.items():
        sys.modules.setdefault(earlier, today[module])


def _file_context(gx, root: Path, store_url: str | None):
    variables = {URL_VARIABLE: store_url} if store_url else None
    return gx.get_context(mode="file", context_root_dir=str(root), runtime_environment=variables)


def quiet_gx() -> None:
    """No GX progress bars or INFO chatter on non-interactive output."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)


def gx_version() -> str:
    """GX's version, as a run's report names it."""
    import great_expectations

    return great_expectations.__version__
