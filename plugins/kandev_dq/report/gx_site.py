"""The data docs' contact with GX's site machinery: its site builder, views and renderers.

GX 1.24's page templates load Bootstrap, jQuery, Font Awesome, bootstrap-table and its
extensions from CDNs, and a logo and tracking image from S3: read offline (where a data-quality
report usually is read) the pages lose their styling, their pass/fail icons and the index
table. This module keeps GX's renderers and templates and serves every asset from the site:

* :class:`KandevPageView` and :class:`KandevIndexPageView` put ``docs_assets/templates`` in
  front of the loader of the Jinja environment GX's views build, and give it a bytecode cache
  shared by every view. Only the templates naming a CDN (and the navbar, sidebar head and
  footer around them) are replaced; every asset link is relative to the page.
* :class:`KandevSiteBuilder` (named in ``great_expectations.yml`` through
  :mod:`kandev_dq.report.site`) replaces GX's ``SiteBuilder.build``: it copies
  ``docs_assets/static`` into the site's ``static/`` on every build, in place of GX's own
  images and fonts (which no page uses any more), writes ``overview.html``
  (:mod:`kandev_dq.report.overview_page`) with the same page template as every other page, and
  in a checkpoint run renders only the pages the run asks for
  (:func:`kandev_dq.gx.adapter.building_pages`).
* :class:`KandevSiteSectionBuilder` and :class:`KandevSiteIndexBuilder` give GX's page and
  index builders a bounded window of the records in place of every stored result, through
  protected methods GX's index builder calls.
* :class:`KandevValidationResultsPageRenderer` and :class:`KandevExpectationSuitePageRenderer`
  name the tables a suite judges (a suite's asset names one table it reads) and a result's
  status by its suite's verdict, overriding the protected classmethods GX's page renderers
  build the header, title and notes with (``tests/test_data_docs.py`` holds the pages).
* :class:`KandevSiteIndexPageRenderer` puts a summary of the overview, with its link, at the
  top of ``index.html``, and shows each listed result's status as its suite's verdict through
  the protected classmethod GX builds the results table with.

This is the report layer's one module touching GX internals (private attributes, protected or
replaced methods); ``tests/test_gx_site.py`` pins the GX behaviour it relies on. The run layer's
is :mod:`kandev_dq.gx.adapter`.
"""

from __future__ import annotations

import copy
import html
import logging
import mimetypes
import os
import uuid
from pathlib import Path
from typing import Any

from great_expectations.core.util import nested_update
from great_expectations.data_context.store.tuple_store_backend import TupleFilesystemStoreBackend
from great_expectations.data_context.types.resource_identifiers import (
    ExpectationSuiteIdentifier,
    ValidationResultIdentifier,
)
from great_expectations.render.renderer import (
    ExpectationSuitePageRenderer,
    ValidationResultsPageRenderer,
)
from great_expectations.render.renderer.site_builder import (
    DefaultSiteIndexBuilder,
    DefaultSiteSectionBuilder,
    SiteBuilder,
)
from great_expectations.render.renderer.site_index_page_renderer import SiteIndexPageRenderer
from great_expectations.render.view import DefaultJinjaIndexPageView, DefaultJinjaPageView
from jinja2 import BytecodeCache, ChoiceLoader, FileSystemLoader

from kandev_dq.contract.rule_index import SUITE_TABLES
from kandev_dq.contract.severity import Severity
from kandev_dq.gx import adapter as gx_adapter
from kandev_dq.gx.adapter import ValidationResultsStore
from kandev_dq.gx.results_store import RecordsStoreBackend, records_of
from kandev_dq.project.vetting import vet_on_gx_path
from kandev_dq.records.register import load_register, run_key
from kandev_dq.records.results import failed_by_severity, rule_result, suite_verdict
from kandev_dq.report.overview_model import (
    INDEX_RESULTS_LIMIT,
    Overview,
    collect_overview,
    stored_json,
)
from kandev_dq.report.overview_page import (
    OVERVIEW_PAGE,
    SUITE_STATUS,
    index_section,
    overview_document,
)
from kandev_dq.report.timeline_chart import start_engine
from kandev_dq.text import html_inert

logger = logging.getLogger(__name__)

#: The module a project's yml names for the site's classes (it re-exports them from here).
SITE_MODULE = "kandev_dq.report.site"
ASSETS = Path(__file__).resolve().parent / "docs_assets"
TEMPLATES = ASSETS / "templates"
STATIC = ASSETS / "static"


# --- views: GX's templates, with kandev-dq's copies of the CDN-bearing ones first --------------


def page_root(document: Any) -> str:
    """The relative way from a page back to the site root ('', '../', ...)."""
    if isinstance(document, dict):
        kind, suite = document.get("renderer_type"), document.get("expectation_suite_name")
    else:
        kind = getattr(document, "renderer_type", None)
        suite = getattr(document, "expectation_suite_name", None)
    kind, dots = kind or "", (suite or "").count(".")
    if "ValidationResults" in kind or "ProfilingResults" in kind:
        return "../" * (dots + 4)  # validations/<suite parts>/<run name>/<run time>/<batch>.html
    if "ExpectationSuite" in kind:
        return "../" * (dots + 1)  # expectations/<suite parts>.html
    return ""


class _CompiledTemplates(BytecodeCache):
    """Each template compiled once per process. GX builds a new view, with a new Jinja
    environment, for every page set it renders, and each compiled every template again
    (about 230 compilations a run). Jinja checks each template's source before reusing it."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket) -> None:
        if bucket.key in self._code:
            bucket.bytecode_from_string(self._code[bucket.key])

    def dump_bytecode(self, bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


_COMPILED_TEMPLATES = _CompiledTemplates()


class _LocalAssets:
    """Template lookup starting at ``docs_assets/templates``; every page knows its root."""

    def __init__(self, custom_styles_directory=None, custom_views_directory=None) -> None:
        super().__init__(  # type: ignore[call-arg]
            custom_styles_directory=custom_styles_directory,
            custom_views_directory=custom_views_directory,
        )
        self.env.loader = ChoiceLoader([FileSystemLoader(str(TEMPLATES)), self.env.loader])
        self.env.bytecode_cache = _COMPILED_TEMPLATES

    def render(self, document, template=None, **kwargs):
        kwargs.setdefault("kandev_root", page_root(document))
        # Every page passes here: a store value's control characters leave it as references.
        return html_inert(super().render(document, template, **kwargs))  # type: ignore[misc]


class KandevPageView(_LocalAssets, DefaultJinjaPageView):
    """GX's page view (suites, validation results, the overview) with local assets."""


class KandevIndexPageView(_LocalAssets, DefaultJinjaIndexPageView):
    """GX's index page view with local assets."""


# --- the result and suite pages ---------------------------------------------------------------


class KandevValidationResultsPageRenderer(ValidationResultsPageRenderer):
    """GX's validation page, its "Data asset" naming the tables the suite judges (every suite
    runs against the one batch ``kandev_meta``, which GX would show for all of them)."""

    @classmethod
    def _render_validation_header(cls, validation_results):
        header = super()._render_validation_header(validation_results)
        params = header.subheader.string_template["params"]
        tables = SUITE_TABLES.get(validation_results.suite_name)
        if tables:
            params["data_asset_name"] = ", ".join(tables)
        # GX's "Status" fails a suite on any failed rule, an info disclosure too.
        word, icon = SUITE_STATUS[suite_verdict(failed_by_severity(validation_results))]
        params["success"] = word
        params["html_success_icon"] = f'<i class="fas {icon}" aria-hidden="true"></i>'
        return header

    def _determine_page_title(self, run_name, run_time, data_asset_name, expectation_suite_name):
        # The breadcrumb: suite, run and time; the batch name would only repeat "kandev_meta".
        return super()._determine_page_title(run_name, run_time, "", expectation_suite_name)

    def _group_evrs_by_column_with_suite_meta(self, validation_results, expectation_suite_name):
        """GX's sections, each listing its failed rules first (errors, warnings, then info), in
        the suite's order otherwise: a reviewer opens the page for them."""
        columns = super()._group_evrs_by_column_with_suite_meta(
            validation_results, expectation_suite_name
        )
        passed = len(Severity) + 1  # after every severity, an unknown word's included
        for results in columns.values():
            results.sort(
                key=lambda evr: (
                    passed if evr.success else Severity.rank_of(rule_result(evr).severity)
                )
            )
        return columns


class KandevExpectationSuitePageRenderer(ExpectationSuitePageRenderer):
    """GX's suite page, without "across 0 columns" for a suite whose rules take no column."""

    @classmethod
    def _render_expectation_suite_notes(cls, expectations):
        notes = super()._render_expectation_suite_notes(expectations)
        if any("column" in e.kwargs for e in expectations.expectation_configurations):
            return notes
        count = len(expectations.expectations)
        tables = SUITE_TABLES.get(expectations.name)
        judged = f", judging {', '.join(tables)}" if tables else ""
        notes.text[0] = f"This Expectation suite currently contains {count} Expectations{judged}."
        return notes


# --- the index page -------------------------------------------------------------------------


class KandevSiteIndexPageRenderer(SiteIndexPageRenderer):
    """GX's index page with the store overview's summary and link on top, each result's
    status its suite's verdict by the exit code's rule.

    :meth:`render` gives each link its suite's verdict as ``kandev_verdict``, which the status
    cells then show: GX's own cell and filter text read only ``validation_success``, which
    fails on any failed rule. The index lists every store's results: a Store column, with a
    filter by store as GX's table filters its other columns, names the store each run read (as
    the run register recorded it).
    """

    def __init__(self, data_context=None) -> None:
        super().__init__()
        self.data_context = data_context
        self.overview: Overview | None = None

    def render(self, index_links_dict):  # type: ignore[override]
        if self.data_context is not None:
            _add_verdicts(self.data_context, index_links_dict.get("validations_links", []))
        document = super().render(index_links_dict)
        if document is None or self.data_context is None:
            return document
        try:
            overview = self.overview or collect_overview(self.data_context)
            document.sections.insert(0, index_section(overview))
        except Exception:  # noqa: BLE001 - the index must render even if the summary cannot
            logger.exception("the store overview summary could not be rendered")
        return document

    @classmethod
    def _generate_validation_results_link_table(cls, index_links_dict):
        table = super()._generate_validation_results_link_table(index_links_dict)
        links = index_links_dict.get("validations_links", [])
        for row, link in zip(table.table_data, links, strict=True):
            verdict = link.get("kandev_verdict")
            if verdict is None:
                continue
            word, icon = SUITE_STATUS[verdict]
            cell = row["validation_success"]
            cell.string_template["styling"]["params"]["validation_success"]["classes"] = [
                "fas",
                *icon.split(),
                "ge-failed-icon" if verdict == "failed" else "ge-success-icon",
                f"kandev-status-{verdict}",
            ]
            cell.string_template["styling"]["params"]["validation_success"]["attributes"] = {
                "title": word
            }
            row["_validation_success_text"] = word
        table.table_columns.insert(
            2, {"field": "store", "title": "Store", "sortable": "true", "filterControl": "select"}
        )
        for row, link in zip(table.table_data, links, strict=True):
            # A plain cell is inserted as HTML: escaped here, as the overview's cells are.
            row["store"] = html.escape(link.get("kandev_store") or NOT_RECORDED, quote=True)
        return table


#: The Store cell of a result whose run the register does not hold.
NOT_RECORDED = "(not recorded)"


def _add_verdicts(context, links: list[dict[str, Any]]) -> None:
    """Each listed result's suite verdict, read from its stored JSON as the overview reads it
    (a result that cannot be read keeps GX's own status), and the store its run read."""
    store = context.validation_results_store
    recorded = load_register(records_of(context), [run_key(link["run_id"]) for link in links])
    for link in links:
        link["kandev_store"] = (recorded.get(run_key(link["run_id"])) or {}).get("store")
        key = ValidationResultIdentifier(
            ExpectationSuiteIdentifier(link["expectation_suite_name"]),
            link["run_id"],
            link["batch_identifier"],
        )
        data = stored_json(store, key)
        if data is None:
            logger.warning("validation result %s is unreadable: GX's status kept", key.to_tuple())
            continue
        link["kandev_verdict"] = suite_verdict(failed_by_severity(data))


# --- the site builder --------------------------------------------------------------------------


def _section(renderer: type | None) -> dict[str, Any]:
    section: dict[str, Any] = {
        "view": {"module_name": __name__, "class_name": KandevPageView.__name__}
    }
    if renderer is not None:  # GX's page renderers, adapted (above)
        section["renderer"] = {"module_name": renderer.__module__, "class_name": renderer.__name__}
    return section


class KandevSiteSectionBuilder(DefaultSiteSectionBuilder):
    """GX's section builder of results pages, listing a bounded window of the records.

    GX lists every stored result to build the pages of a few: a run's build is given its own
    results, a whole build renders the newest ``validation_results_limit``. Those are the
    keys it is given here; the pages are GX's."""

    def build(self, resource_identifiers=None) -> None:
        store = self.source_store
        window = None
        if isinstance(store, ValidationResultsStore) and isinstance(
            store.store_backend, RecordsStoreBackend
        ):
            if resource_identifiers is not None:
                # As the store lists them: a run through GX's API has no run name, which GX's
                # run-name filter reads only in its stored form ("__none__").
                window = [
                    store.tuple_to_key(store.key_to_tuple(k))
                    for k in resource_identifiers
                    if isinstance(k, ValidationResultIdentifier)
                ]
            elif self.name == "validations" and self.validation_results_limit:
                newest = store.store_backend.records.newest_result_keys(
                    self.validation_results_limit
                )
                window = [store.tuple_to_key(k) for k in newest]
        if window is None:
            return super().build(resource_identifiers=resource_identifiers)
        with store.listing_only(window):
            return super().build(resource_identifiers=resource_identifiers)


class KandevSiteIndexBuilder(DefaultSiteIndexBuilder):
    """GX's index builder; in a run's build, the results it lists are the newest
    ``validation_results_limit`` of the records that have a page, not a walk of every page
    on disk matched against every stored result.

    A whole build (``kandev-dq docs``) is GX's own: it also removes the pages of results no
    longer in the records (``records prune``)."""

    #: Set by :class:`KandevSiteBuilder` for each build: whether every page is rebuilt.
    whole_build = True

    def _add_expectations_to_index_links(self, index_links_dict, skip_and_clean_missing: bool):
        """The project's suites that have a page (GX walks the whole site, every run's pages
        included, to find the few suite pages)."""
        config = self.site_section_builders_config.get("expectations")
        if self.whole_build or not isinstance(config, dict):
            return super()._add_expectations_to_index_links(
                index_links_dict, skip_and_clean_missing
            )
        pages = self.target_store.store_backends[ExpectationSuiteIdentifier]
        for suite in self.data_context.stores[config.get("source_store_name")].list_keys():
            if pages.has_key(suite.to_tuple()):
                self.add_resource_info_to_index_links_dict(
                    index_links_dict=index_links_dict,
                    expectation_suite_name=suite.name,
                    section_name="expectations",
                )

    def _build_validation_and_profiling_result_site_keys(self, skip_and_clean_missing: bool):
        store = self.data_context.validation_results_store
        records = records_of(self.data_context)
        if self.whole_build or records is None or not isinstance(store, ValidationResultsStore):
            return super()._build_validation_and_profiling_result_site_keys(skip_and_clean_missing)
        pages = self.target_store.store_backends[ValidationResultIdentifier]
        newest = records.newest_result_keys(self.validation_results_limit or INDEX_RESULTS_LIMIT)
        return [store.tuple_to_key(k) for k in newest if pages.has_key(k)]


KANDEV_SECTIONS = {
    "expectations": _section(KandevExpectationSuitePageRenderer),
    "validations": _section(KandevValidationResultsPageRenderer)
    | {"module_name": __name__, "class_name": KandevSiteSectionBuilder.__name__},
    "profiling": _section(None)
    | {"module_name": __name__, "class_name": KandevSiteSectionBuilder.__name__},
}


class KandevSiteBuilder(SiteBuilder):
    """GX's site builder, with local assets and the store overview.

    Section builders and the index builder not configured otherwise use the kandev-dq views
    and index renderer, so a site needs only ``module_name``/``class_name`` to work offline.
    """

    def __init__(
        self,
        data_context,
        store_backend,
        site_name=None,
        site_index_builder=None,
        show_how_to_buttons=True,
        site_section_builders=None,
        runtime_environment=None,
        **kwargs,
    ) -> None:
        vet_on_gx_path(data_context.root_directory, data_context)
        index = nested_update(
            {
                "class_name": "DefaultSiteIndexBuilder",
                "renderer": {
                    "module_name": __name__,
                    "class_name": KandevSiteIndexPageRenderer.__name__,
                },
                "view": {"module_name": __name__, "class_name": KandevIndexPageView.__name__},
                "validation_results_limit": INDEX_RESULTS_LIMIT,
            },
            dict(site_index_builder or {}),
        )
        if index.get("class_name") == DefaultSiteIndexBuilder.__name__ and index.get(
            "module_name"
        ) in (None, DefaultSiteIndexBuilder.__module__):  # a project's yml names GX's: ours
            index |= {"module_name": __name__, "class_name": KandevSiteIndexBuilder.__name__}
        sections = nested_update(
            copy.deepcopy(KANDEV_SECTIONS),  # nested_update changes its first argument
            dict(site_section_builders or {}),
        )
        super().__init__(
            data_context,
            _replacing(dict(store_backend)),  # a project written before it names GX's
            site_name=site_name,
            site_index_builder=index,
            show_how_to_buttons=show_how_to_buttons,
            site_section_builders=sections,
            runtime_environment=runtime_environment,
            **kwargs,
        )
        styles = None
        plugins = data_context.plugins_directory
        if plugins and Path(plugins, "custom_data_docs", "styles").is_dir():
            styles = str(Path(plugins, "custom_data_docs", "styles"))
        self.overview_view = KandevPageView(custom_styles_directory=styles)

    def build(self, resource_identifiers=None, build_index: bool = True):
        """GX's build, with kandev-dq's assets and the overview (whose failure, like a GX
        page's, is logged and never fails the checkpoint run that builds the docs). In a
        checkpoint run, the results' pages and the run-wide ones are built apart
        (:func:`~kandev_dq.gx.adapter.building_pages`)."""
        pages = gx_adapter.pages_to_build()
        if pages == "none":
            return self.get_resource_url(only_if_exists=False), []
        for name, section_builder in self.site_section_builders.items():
            if pages == "run-wide":
                break
            if name == "profiling" and not _profiling(resource_identifiers):
                # A run's own build: GX would compare every stored result with this run's,
                # a cost growing with the history, to find profiling runs kandev-dq never makes.
                continue
            section_builder.build(resource_identifiers=resource_identifiers)
        if pages == "results":
            start_engine()  # the store is read: the overview's chart comes next
            return self.get_resource_url(only_if_exists=False), []
        copy_assets(self.target_store)
        overview = None
        try:
            overview = collect_overview(self.data_context)
            self.write_overview(overview)
        except Exception:  # noqa: BLE001 - GX logs a page it cannot render, and goes on
            logger.exception("kandev-dq: the store overview page could not be rendered")
        if isinstance(self.site_index_builder, KandevSiteIndexBuilder):
            self.site_index_builder.whole_build = resource_identifiers is None and pages == "all"
        renderer = getattr(self.site_index_builder, "renderer_class", None)
        if isinstance(renderer, KandevSiteIndexPageRenderer):
            renderer.overview = overview
        _, index_links = self.site_index_builder.build(build_index=build_index)
        return self.get_resource_url(only_if_exists=False), index_links

    def write_overview(self, overview: Overview) -> None:
        page = self.overview_view.render(
            overview_document(overview),
            data_context_id=self.data_context_id,
            show_how_to_buttons=False,
        )
        self.target_store.store_backends["static_assets"].set(
            (OVERVIEW_PAGE,), page, content_type="text/html; charset=utf-8"
        )


class ReplacingFilesystemStoreBackend(TupleFilesystemStoreBackend):
    """GX's filesystem backend for a data docs site, writing each file (a page, the index,
    the overview, a static asset) whole under a new name in its folder and renaming it into
    place (``os.replace``): a file a checkout hard-linked to one elsewhere is replaced, never
    written through (docs/reliability.md, 3a), and a reader never sees half a page. Overrides
    GX's protected ``_set``, pinned in ``tests/test_gx_site.py``."""

    def _set(self, key, value, **kwargs):
        if not isinstance(key, tuple):
            key = key.to_tuple()
        path = Path(self.full_base_directory, self._convert_key_to_filepath(key))
        path.parent.mkdir(parents=True, exist_ok=True)
        written = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        # O_EXCL: never an existing file (nor a link) under the new name; mode 0o666 less the
        # umask, as GX's own open() gives a page.
        fd = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(value.encode("utf-8") if isinstance(value, str) else value)
            os.replace(written, path)
        except BaseException:
            written.unlink(missing_ok=True)
            raise
        return str(path)


def _replacing(store_backend: dict) -> dict:
    """``store_backend`` with GX's filesystem backend, which projects written before
    :class:`ReplacingFilesystemStoreBackend` name, swapped for it (same keys, same files)."""
    module = str(store_backend.get("module_name", "great_expectations.data_context.store"))
    if store_backend.get("class_name") == TupleFilesystemStoreBackend.__name__ and (
        module.startswith("great_expectations.")
    ):
        return store_backend | {
            "module_name": SITE_MODULE,
            "class_name": ReplacingFilesystemStoreBackend.__name__,
        }
    return store_backend


def _profiling(resource_identifiers) -> bool:
    """Whether a build may hold profiling results: a whole build, or one naming a profiling run
    (GX's own filter: a run name including "profiling")."""
    if resource_identifiers is None:
        return True
    return any(
        "profiling" in (getattr(getattr(k, "run_id", None), "run_name", None) or "")
        for k in resource_identifiers
    )


def copy_assets(target_store) -> None:
    """Copy ``docs_assets/static`` into the site's ``static/`` (through its store backend)."""
    backend = target_store.store_backends["static_assets"]
    for path in sorted(STATIC.rglob("*")):
        if not path.is_file():
            continue
        key = ("static", *path.relative_to(STATIC).parts)
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        backend.set(key, path.read_bytes(), content_type=content_type)
