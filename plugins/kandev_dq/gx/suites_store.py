"""GX's expectations store for a kandev-dq project: the types registered, every suite whole.

A project's ``great_expectations.yml`` names this store (``kandev-dq init`` writes it)::

    expectations_store:
      module_name: kandev_dq.gx.suites_store
      class_name: ExpectationsStore

GX instantiates its stores when it loads a context, before any suite is read, so importing this
module is what makes kandev-dq's expectation types (and the write-once ledger metric) known to
GX: ``gx.get_context(mode="file", ...)`` in the project folder is enough, as schedulers run it.
It keeps GX's class name: GX's config treats stores by class name.

GX drops an expectation whose type it does not know from a suite it loads, with a log line, and
the checkpoint then passes on whatever is left, even nothing. Every suite this store loads must
load every expectation its JSON declares; one that does not stops the run with an error naming
the suite and the types (a checkpoint that returns success has run every expectation).

A partial run (``check --suite``/``--rule``) has this store load each suite with the chosen
rules only (:func:`choosing_rules`), in memory: GX's own freshness test reads the suite
through the store too, so GX runs the part unchanged, and nothing is written.

A project is data (docs/reliability.md, 3a), on GX's path too: when GX builds this store, the
project is vetted as ``kandev-dq check`` vets it (:func:`kandev_dq.project.vetting.vet_on_gx_path`,
as every kandev-dq class GX builds from a yml does) and one naming anything off the allowlist
stops the context from loading, unless the user opted in: ``--allow-project-code`` on the CLI,
``allow_project_code=True`` in the Python API, or ``KANDEV_DQ_ALLOW_PROJECT_CODE=1`` in the
environment of a scheduler running GX's API. (GX builds the stores in the yml's order: a store
named before this one is built before the vetting.) A context kandev-dq loads itself
(:func:`kandev_dq.project.files.load_context`) was vetted just before GX loads it, and is not
walked twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from great_expectations.data_context.store import expectations_store as gx_expectations_store

import kandev_dq.expectations  # noqa: F401 - registers kandev-dq's expectation types with GX
import kandev_dq.gx.live_window  # noqa: F401 - registers the live window metric
import kandev_dq.gx.write_once  # noqa: F401 - registers the write-once ledger metric
from kandev_dq.gx.adapter import store_url_from_environment
from kandev_dq.project.files import refuse_incomplete_suite
from kandev_dq.project.vetting import loaded_by_kandev_dq, vet_on_gx_path

#: The rules a partial run validates (``check --rule``); None: every rule of a suite.
_CHOSEN_RULES: ContextVar[frozenset[str] | None] = ContextVar(
    "kandev_dq_chosen_rules", default=None
)


@contextmanager
def choosing_rules(rules: tuple[str, ...]) -> Iterator[None]:
    """Have every suite this store loads in this block hold ``rules`` only (none given: every
    rule). In memory only: a suite is read, never written, in a check; GX's freshness test
    reads the suite through the same store, so the part it loads is the part it runs."""
    token = _CHOSEN_RULES.set(frozenset(rules) if rules else None)
    try:
        yield
    finally:
        _CHOSEN_RULES.reset(token)


class ExpectationsStore(gx_expectations_store.ExpectationsStore):
    """GX's expectations store, vetting its project and refusing a suite that does not load
    whole."""

    # GX passes a store what its signature names: GX's own, spelled out.
    def __init__(
        self,
        store_backend: dict | None = None,
        runtime_environment: dict | None = None,
        store_name: str = "no_store_name",
        data_context=None,
    ) -> None:
        root = (runtime_environment or {}).get("root_directory")
        vet_on_gx_path(root)
        # On GX's own path only: kandev-dq passes the store it reads itself (or none, for docs).
        if data_context is not None and not loaded_by_kandev_dq(root):
            store_url_from_environment(data_context)
        super().__init__(
            store_backend=store_backend,
            runtime_environment=runtime_environment,
            store_name=store_name,
            data_context=data_context,
        )

    def deserialize_suite_dict(self, suite_dict: dict):
        chosen = _CHOSEN_RULES.get()
        if chosen is not None:
            # Each held as GX reads it (a dict, or GX's configuration, which reads like one).
            expectations = [
                e for e in suite_dict.get("expectations") or [] if e.get("type") in chosen
            ]
            suite_dict = {**suite_dict, "expectations": expectations}
        declared = [str(e.get("type")) for e in suite_dict.get("expectations") or []]
        suite = super().deserialize_suite_dict(suite_dict)
        refuse_incomplete_suite(
            str(suite_dict.get("name")), declared, [e.expectation_type for e in suite.expectations]
        )
        return suite
