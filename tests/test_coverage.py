"""Every data-observable AC has an expectation; every cited AC exists; the README's table is
generated from the project, not hand-kept."""

from kandev_dq.report.coverage import (
    README_END,
    README_START,
    citations,
    coverage_rows,
    markdown_table,
    uncovered,
    unknown_citations,
)
from tests.gxhelpers import REPO


def test_every_data_observable_criterion_has_an_expectation():
    assert uncovered(REPO) == []


def test_no_expectation_cites_an_unknown_criterion():
    assert unknown_citations(REPO) == []


def test_the_readme_table_is_the_generated_one():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split(README_START)[1].split(README_END)[0].strip()
    assert block == markdown_table(coverage_rows(REPO)), "run `kandev-dq rules --readme README.md`"


def test_the_rule_index_is_what_the_code_builds(gx_built_project):
    # `kandev-dq rules` and `init` read the index (no GX): its severities and AC ids must be the
    # expectation classes' own, as GX records them in the suites it builds.
    assert citations() == citations(gx_built_project), "update kandev_dq/contract/rule_index.py"
