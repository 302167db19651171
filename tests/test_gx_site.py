"""The GX behaviour :mod:`kandev_dq.report.gx_site` relies on, pinned: after a GX upgrade that
changes any of it, these fail, and the data docs' seam is the one module to follow.

The pages themselves (offline assets, the overview, the index's verdicts, the bounded windows)
are held by ``tests/test_data_docs.py`` and ``tests/test_records.py``; this file holds the parts
of GX's site machinery that the seam replaces or reaches into.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from great_expectations.render.renderer.site_builder import (
    DefaultSiteIndexBuilder,
    DefaultSiteSectionBuilder,
    SiteBuilder,
)
from great_expectations.render.view import DefaultJinjaIndexPageView, DefaultJinjaPageView

from kandev_dq.report import gx_site

#: The templates kandev-dq adapts from GX's own (docs_assets/templates/NOTICE.md): each must
#: still be a GX template, or the copy replaces nothing and GX's CDN links come back.
ADAPTED_TEMPLATES = (
    "page.j2",
    "index_page.j2",
    "page_minimal.j2",
    "js_script_imports.j2",
    "top_navbar.j2",
    "favicon.j2",
    "cloud-footer.j2",
    "ge_info.j2",
)


class _Calls(list):
    def recorder(self, name: str, returns=None):
        def record(*args, **kwargs):
            self.append((name, args, kwargs))
            return returns

        return record


def test_gx_builds_a_site_as_sections_then_its_assets_then_the_index():
    """``KandevSiteBuilder.build`` replaces GX's: it keeps GX's sections and index, and puts
    kandev-dq's assets, the overview and the run's page choice in place of GX's asset copy. A
    GX build doing anything more would be lost; this is all GX's does."""
    calls = _Calls()

    class Section:
        def __init__(self, name: str) -> None:
            self.build = calls.recorder(f"section {name}")

    builder = SiteBuilder.__new__(SiteBuilder)
    builder.site_section_builders = {"expectations": Section("e"), "validations": Section("v")}
    builder.target_store = type(
        "Target",
        (),
        {
            "copy_static_assets": staticmethod(calls.recorder("assets")),
            "get_url_for_resource": staticmethod(calls.recorder("url", "file:///index.html")),
        },
    )()
    builder.site_index_builder = type(
        "Index", (), {"build": staticmethod(calls.recorder("index", (None, {"links": 1})))}
    )()

    assert builder.build(resource_identifiers=["key"], build_index=False) == (
        "file:///index.html",
        {"links": 1},
    )
    assert calls == [
        ("section e", (), {"resource_identifiers": ["key"]}),
        ("section v", (), {"resource_identifiers": ["key"]}),
        ("assets", (), {}),
        ("index", (), {"build_index": False}),
        ("url", (), {"resource_identifier": None, "only_if_exists": False}),
    ]


def test_gx_index_builder_asks_the_methods_kandev_dq_overrides_for_its_keys():
    """``KandevSiteIndexBuilder`` bounds the index by overriding two protected methods: GX's
    index build must still take the suites and the result keys from them, with these
    arguments, and render what they gave."""
    calls = _Calls()
    rendered: list[OrderedDict] = []

    class Index(DefaultSiteIndexBuilder):
        _add_expectations_to_index_links = calls.recorder("suites")
        _build_validation_and_profiling_result_site_keys = calls.recorder("results", [])

    index = Index.__new__(Index)
    index.site_name = "local_site"
    index.show_how_to_buttons = False
    index.site_section_builders_config = {}
    index.data_context_id = None
    index.renderer_class = type("R", (), {"render": staticmethod(rendered.append)})()
    index.view_class = type("V", (), {"render": staticmethod(lambda *a, **k: "<html>")})()
    index.target_store = type(
        "T", (), {"write_index_page": staticmethod(calls.recorder("write", "file:///i"))}
    )()

    url, links = index.build(skip_and_clean_missing=False)
    assert url == "file:///i" and rendered == [links]
    assert [(name, args[1:]) for name, args, _ in calls] == [
        ("suites", (links, False)),
        ("results", (False,)),
        ("write", ()),
    ]
    assert set(gx_site.KandevSiteIndexBuilder.__dict__) >= {
        "_add_expectations_to_index_links",
        "_build_validation_and_profiling_result_site_keys",
    }


def test_gx_section_builder_lists_its_source_store_through_list_keys():
    """The results window (``ValidationResultsStore.listing_only``) bounds what GX's section
    builder renders only because GX lists its source store with ``list_keys`` first."""
    listed: list[bool] = []

    class Store:
        def list_keys(self):
            listed.append(True)
            return []

    section = DefaultSiteSectionBuilder.__new__(DefaultSiteSectionBuilder)
    section.source_store = Store()
    section.name = "validations"
    section.validation_results_limit = 30
    section.build(resource_identifiers=None)
    assert listed == [True]


def test_gx_views_render_through_the_environment_kandev_dq_extends():
    """``_LocalAssets`` puts kandev-dq's templates in front of the loader of the Jinja
    environment GX's view builds for itself (``env``): every adapted template must be one GX's
    own loader holds, and the one GX's view then renders must be kandev-dq's copy."""
    for view_class in (DefaultJinjaPageView, DefaultJinjaIndexPageView):
        env = view_class().env
        for name in ADAPTED_TEMPLATES:
            env.loader.get_source(env, name)  # raises TemplateNotFound if GX dropped it
    ours = gx_site.KandevPageView().env
    for name in ADAPTED_TEMPLATES:
        assert ours.get_template(name).filename == str(gx_site.TEMPLATES / name)


def test_the_index_table_shows_each_result_with_its_suite_verdict():
    """GX's index table: one row per validations link, in order, its status cell an ``<i>`` whose
    classes GX styles; the seam replaces those classes and the filter text per verdict."""
    links = [
        {"expectation_suite_name": "activation", "validation_success": False, **extra}
        for extra in ({"kandev_verdict": "info"}, {"kandev_verdict": "failed"}, {})
    ]
    table = gx_site.KandevSiteIndexPageRenderer._generate_validation_results_link_table(
        {"validations_links": links}
    )
    shown = [
        (
            row["validation_success"].string_template["styling"]["params"]["validation_success"][
                "classes"
            ],
            row["_validation_success_text"],
        )
        for row in table.table_data
    ]
    assert "fa-info-circle" in shown[0][0] and shown[0][1] == "Succeeded with info findings"
    assert "fa-times" in shown[1][0] and shown[1][1] == "Failed"
    assert shown[2] == (["fas", "fa-times", "text-danger", "ge-failed-icon"], "Failed")  # GX's own


def test_the_overview_model_has_no_gx_import_of_its_own():
    """The overview's facts are read through GX's public store calls on the objects it is
    given; only the seam and the page (GX's content blocks) import GX."""
    import ast

    from kandev_dq.report import overview_model

    tree = ast.parse(Path(overview_model.__file__).read_text(encoding="utf-8"))
    imported = {
        name
        for node in ast.walk(tree)
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    }
    assert "kandev_dq.gx.results_store" in imported  # the walk sees the module's imports
    assert not {name for name in imported if name.split(".")[0] == "great_expectations"}


def test_gx_writes_every_site_file_through_the_configured_backends_set(tmp_path):
    """``ReplacingFilesystemStoreBackend`` replaces GX's ``_set`` alone: GX's site store builds
    each of its four backends (pages of suites and of results, the index, static assets) from
    the site's ``store_backend`` class, and GX's ``_set(key, value, **kwargs)`` writes the
    file its key names under ``full_base_directory`` and returns its path, as the override
    does."""
    import inspect

    from great_expectations.data_context.store import HtmlSiteStore
    from great_expectations.data_context.store.tuple_store_backend import (
        TupleFilesystemStoreBackend,
    )

    params = list(inspect.signature(TupleFilesystemStoreBackend._set).parameters)
    assert params == ["self", "key", "value", "kwargs"]
    config = {"base_directory": "site", "root_directory": str(tmp_path)}
    site = HtmlSiteStore(
        store_backend=config
        | {"module_name": "kandev_dq.report.site", "class_name": "ReplacingFilesystemStoreBackend"}
    )
    assert {type(b) for b in site.store_backends.values()} == {
        gx_site.ReplacingFilesystemStoreBackend
    }
    gx_own = TupleFilesystemStoreBackend(**config | {"base_directory": "gx"})
    ours = gx_site.ReplacingFilesystemStoreBackend(**config)
    key = ("static", "styles", "page.css")
    written = [Path(b._set(key, "body {}")) for b in (gx_own, ours)]
    assert [p.relative_to(tmp_path).parts[1:] for p in written] == [key, key]
    assert [p.read_text() for p in written] == ["body {}", "body {}"]


def test_gx_validation_page_renders_each_section_from_the_grouped_list_in_its_order():
    """The validation page lists failed rules first only because GX's page renders each
    section from the lists ``_group_evrs_by_column_with_suite_meta`` returns (the seam sorts
    them), in their order, and its ``render`` asks that method for them."""
    import inspect

    from great_expectations.render import RenderedSectionContent
    from great_expectations.render.renderer import ValidationResultsPageRenderer

    given: list[list] = []

    class Sections:
        def render(self, validation_results, suite_parameters=None):
            given.append(validation_results)
            return RenderedSectionContent(section_name="rules", content_blocks=[])

    page = ValidationResultsPageRenderer.__new__(ValidationResultsPageRenderer)
    page._column_section_renderer = Sections()
    page.run_info_at_end = False
    grouped = ["a failed rule", "a passed rule"]
    results = type("Results", (), {"results": [], "suite_parameters": {}})()
    page._collect_rendered_document_content_sections(
        results, [], [], {"Table-Level Expectations": grouped}
    )
    assert given == [grouped] and given[0] is grouped
    source = inspect.getsource(ValidationResultsPageRenderer.render)
    assert "self._group_evrs_by_column_with_suite_meta(" in source
    assert "_group_evrs_by_column_with_suite_meta" in vars(
        gx_site.KandevValidationResultsPageRenderer
    )
