"""Data docs a reviewer can read offline, and the store overview they read first: the build.

A project's ``great_expectations.yml`` (written by ``kandev-dq init``) names this module for its
site builder, index renderer and views, so GX's ``update_data_docs`` action in a checkpoint run
and ``context.build_data_docs`` find them here; they are defined with the rest of the data docs'
GX contact in :mod:`kandev_dq.report.gx_site`. The CLI's ``docs`` command rebuilds every site
(:func:`build_docs`) and ``records prune`` removes the pages of pruned results
(:func:`remove_result_pages`).

The parts: the overview's facts (:mod:`kandev_dq.report.overview_model`), its page and the
index's summary (:mod:`kandev_dq.report.overview_page`), the timeline chart
(:mod:`kandev_dq.report.timeline_chart`) and GX's site machinery adapted
(:mod:`kandev_dq.report.gx_site`).
"""

from __future__ import annotations

import copy
import logging
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from great_expectations.data_context.types.resource_identifiers import ValidationResultIdentifier

from kandev_dq.report.gx_site import (
    KandevIndexPageView,
    KandevPageView,
    KandevSiteBuilder,
    KandevSiteIndexPageRenderer,
    ReplacingFilesystemStoreBackend,
)
from kandev_dq.report.overview_model import RUNS_SHOWN
from kandev_dq.report.overview_page import OVERVIEW_PAGE
from kandev_dq.store.reference import StoreRef

#: The classes a project's yml names in this module (``module_name: kandev_dq.report.site``).
__all__ = [
    "DocsBuild",
    "KandevIndexPageView",
    "KandevPageView",
    "KandevSiteBuilder",
    "KandevSiteIndexPageRenderer",
    "ReplacingFilesystemStoreBackend",
    "build_docs",
    "build_store_site",
    "remove_result_pages",
]

logger = logging.getLogger(__name__)
#: The site backends keeping pages as files in the project: GX's, which projects written before
#: kandev-dq's own name, and kandev-dq's, which replaces each file it writes.
FILESYSTEM_BACKENDS = ("TupleFilesystemStoreBackend", ReplacingFilesystemStoreBackend.__name__)


def remove_result_pages(project: Path, keys: list[tuple[str, ...]]) -> int:
    """Remove the pages of pruned validation results from the project's local data docs sites
    (GX's own site store, which also removes the folders left empty): with automatic pruning
    the site stays as bounded as the records. The number of pages removed."""
    from great_expectations.data_context.store import HtmlSiteStore
    from ruamel.yaml import YAML

    config = YAML(typ="safe").load((Path(project) / "great_expectations.yml").read_text())
    removed = 0
    for site in ((config or {}).get("data_docs_sites") or {}).values():
        backend = (site or {}).get("store_backend") or {}
        if backend.get("class_name") not in FILESYSTEM_BACKENDS:
            continue  # the vetting allows no other without --allow-project-code
        pages = HtmlSiteStore(
            store_backend=dict(backend), runtime_environment={"root_directory": str(project)}
        ).store_backends[ValidationResultIdentifier]
        try:
            removed += sum(bool(pages.remove_key(tuple(key))) for key in keys if len(key) >= 4)
        except OSError as exc:  # the run and its prune stand; `kandev-dq docs` cleans up later
            logger.warning("kandev-dq: warning: pruned results' pages not all removed: %s", exc)
    return removed


# --- building from the command line --------------------------------------------------------------


@dataclass
class DocsBuild:
    index: Path | None
    overview: Path | None
    url: str | None


def build_store_site(
    project: Path,
    out: Path,
    identity: str,
    *,
    allow_project_code: bool = False,
    records: str | StoreRef | None = None,
) -> Path | None:
    """Build into ``out`` the project's first local data docs site for the store ``identity``
    alone (one store per page): the suites' pages, the results of the store's newest
    :data:`RUNS_SHOWN` runs, the overview of its latest run and an index listing those only.
    Its index; None when the project keeps no site in files."""
    from kandev_dq.gx.context import load_context
    from kandev_dq.gx.results_store import attach_records
    from kandev_dq.records import Records, records_ref

    ref = records_ref(Path(project), records, allow_project_code=allow_project_code)
    with Records(ref) as opened:
        context = load_context(Path(project), allow_project_code=allow_project_code)
        attach_records(context, opened)
        local = [
            (name, site)
            for name, site in (context.variables.data_docs_sites or {}).items()
            if (site.get("store_backend") or {}).get("class_name") in FILESYSTEM_BACKENDS
        ]
        if not local:
            return None
        name, site = local[0]
        site = copy.deepcopy(dict(site))
        site["store_backend"] = dict(site["store_backend"]) | {"base_directory": str(out)}
        # In memory only, never saved: the project's own site is left as the run built it.
        context.variables.data_docs_sites = {name: site}
        results = context.validation_results_store
        own = opened.results_of_newest_runs(RUNS_SHOWN, identity)
        pages = [*context.expectations_store.list_keys(), *map(results.tuple_to_key, own)]
        context.build_data_docs(site_names=[name], resource_identifiers=pages)
    index = Path(out) / "index.html"
    return index if index.is_file() else None


def build_docs(
    project: Path, *, allow_project_code: bool = False, records: str | None = None
) -> DocsBuild:
    """(Re)build every data docs site of ``project`` from its records database; the first local
    site's index and overview."""
    from kandev_dq.gx.context import load_context
    from kandev_dq.gx.results_store import attach_records
    from kandev_dq.records import Records, records_url

    with Records(
        records_url(Path(project), records, allow_project_code=allow_project_code)
    ) as opened:
        context = load_context(Path(project), allow_project_code=allow_project_code)
        attach_records(context, opened)
        urls = context.build_data_docs()
    url = next(iter(urls.values()), None) if urls else None
    index = None
    if url and url.startswith("file://"):
        index = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
    overview = index.parent / OVERVIEW_PAGE if index is not None else None
    if overview is not None and not overview.is_file():
        overview = None
    return DocsBuild(index, overview, url)
