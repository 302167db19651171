"""The data docs, read the way a reviewer reads them: offline, in a real (headless) Chromium.

A failing and a passing checkpoint run build their sites; Chromium loads the pages from disk
with every network request refused, and a small probe page (written next to the test, never
into the site) reads the pages' visible text and computed styles through same-origin iframes.
Screenshots are kept in the test's tmp dir (and copied to ``tests/artifacts/``, or to the
folder it names, when ``KANDEV_DQ_ARTIFACTS`` is set). Without Chromium the module skips,
except under ``CI=true``.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from datetime import timedelta
from pathlib import Path

import pytest

from kandev_dq.contract.severity import Severity
from kandev_dq.expectations.activation import ExpectNoBackfillRowsUnderSentinel
from kandev_dq.lab.storebuilder import T0, StoreBuilder
from kandev_dq.verdicts.base import VERDICTS
from tests.gxhelpers import check

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH, HEIGHT = 1400, 1600

CAPTURE = "2026-07-30T01:39:37.271235Z"  # == T0
THROUGH = "2026-07-30T01:30:00.5Z"
EXECUTION = "2026-07-30T01:39:37.000001Z"
MARKUP_ID = "toolu_<b>old</b>"  # must show as text, never as markup

BOOTSTRAP_WARNING = "rgb(255, 193, 7)"  # .badge-warning: capture_only
BOOTSTRAP_SUCCESS = "rgb(40, 167, 69)"  # .badge-success: fully_activated


# --- the browser ---------------------------------------------------------------------------------


class Chromium:
    """Headless Chromium, offline: every http(s) request goes to a dead proxy and DNS fails."""

    def __init__(self, executable: str, scratch: Path):
        self.executable = executable
        self.scratch = scratch

    def run(self, url: str, *extra: str) -> subprocess.CompletedProcess:
        profile = tempfile.mkdtemp(prefix="profile-", dir=self.scratch)
        command = [
            self.executable,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--window-size={WIDTH},{HEIGHT}",
            *extra,
            url,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
        shutil.rmtree(profile, ignore_errors=True)
        assert done.returncode == 0, f"chromium failed: {done.stderr[-2000:]}"
        return done

    def screenshot(self, page: Path, png: Path) -> Path:
        self.run(page.as_uri(), f"--screenshot={png}")
        assert png.is_file(), f"no screenshot of {page}"
        return png

    def probe(self, pages: dict[str, Path], work: Path) -> dict[str, dict]:
        """Each page's visible text and computed styles, read by a probe page through iframes."""
        frames = "\n".join(
            f'<iframe id="{name}" src="{path.as_uri()}" '
            f'style="width:{WIDTH}px;height:{HEIGHT}px;border:0"></iframe>'
            for name, path in pages.items()
        )
        report = self.report(PROBE.replace("<!--FRAMES-->", frames), work / "probe.html")
        assert set(report) == set(pages), report
        for name, page in report.items():
            assert "error" not in page, f"{name}: {page['error']}"
        return report

    def report(self, probe_page: str, path: Path) -> dict:
        """What a probe page (its frames filled in) wrote into its ``<pre id="probe">``."""
        path.write_text(probe_page, encoding="utf-8")
        dom = self.run(
            path.as_uri(),
            "--allow-file-access-from-files",
            "--virtual-time-budget=15000",
            "--dump-dom",
        ).stdout
        found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
        assert found, f"probe did not report: {dom[-1000:]}"
        return json.loads(html.unescape(found.group(1)))


PROBE = """<!DOCTYPE html>
<html><body>
<!--FRAMES-->
<pre id="probe">pending</pre>
<script>
function style(w, d, selector, property, pseudo) {
  const element = d.querySelector(selector);
  return element ? w.getComputedStyle(element, pseudo || null).getPropertyValue(property) : null;
}
async function read(frame) {
  const w = frame.contentWindow, d = frame.contentDocument, out = {};
  try {
    await d.fonts.ready;
    const badge = d.querySelector('.kandev-state-badge');
    const rect = badge ? badge.getBoundingClientRect() : null;
    out.text = d.body.innerText;
    out.tables = [...d.querySelectorAll('table')].map(
      table => [...table.rows].map(row => [...row.cells].map(cell => cell.innerText.trim())));
    out.body_font = style(w, d, 'body', 'font-family');
    out.cell_border = style(w, d, 'table.table td', 'border-top-width');
    out.assets_warning = style(w, d, '.kandev-assets-missing', 'display');
    out.badge_background = style(w, d, '.kandev-state-badge', 'background-color');
    out.badge_rect = rect ? [rect.left, rect.top, rect.width, rect.height] : null;
    out.icon_font = style(w, d, '.fa-check-circle, .fa-times', 'font-family', '::before');
    out.icon_font_loaded = [...d.fonts].some(
      f => f.family.includes('Font Awesome') && f.status === 'loaded');
    out.jquery = typeof w.jQuery === 'function';
    out.bootstrap_table = !!(w.jQuery && w.jQuery.fn && w.jQuery.fn.bootstrapTable);
    const chart = d.querySelector('.kandev-timeline svg');
    const box = chart ? chart.getBoundingClientRect() : null;
    out.timeline_rect = box ? [box.left, box.top + w.scrollY, box.width, box.height] : null;
    out.timeline_axis = chart ? [...chart.querySelectorAll('.role-axis-label text')]
      .map(label => label.textContent) : [];
    out.timeline_points = chart ? [...chart.querySelectorAll('[aria-roledescription="point"]')]
      .map(point => {
        const r = point.getBoundingClientRect();
        return [point.getAttribute('aria-label'), r.left + r.width / 2,
                r.top + w.scrollY + r.height / 2];
      }) : [];
    const copy = d.querySelector('.kandev-copy');
    if (copy) {  // a finding's query: open its block, press Copy, see what was taken
      copy.closest('details').open = true;
      copy.click();
      await new Promise(resolve => w.setTimeout(resolve, 500));
      out.copy_button = copy.textContent;
      const selection = w.getSelection();
      out.copy_selection = selection.rangeCount ? selection.getRangeAt(0).toString() : '';
      out.copy_code = d.getElementById(copy.getAttribute('data-target')).textContent;
    }
    out.index_rows = d.querySelectorAll(
      'table.ge-index-page-validation-results-table tbody tr[data-index]').length;
    out.index_status = [...d.querySelectorAll(  // each result's status icon, and its row
      'table.ge-index-page-validation-results-table tbody tr[data-index]')].map(row => [
        (row.cells[0].querySelector('i') || {}).className || '', row.innerText]);
  } catch (error) {
    out.error = String(error);
  }
  return out;
}
window.addEventListener('load', async () => {
  const report = {};
  for (const frame of document.querySelectorAll('iframe')) {
    report[frame.id] = await read(frame);
  }
  document.getElementById('probe').textContent = JSON.stringify(report);
});
</script>
</body></html>
"""


@pytest.fixture(scope="session")
def chromium(tmp_path_factory) -> Chromium:
    executable = os.environ.get("KANDEV_DQ_CHROMIUM") or next(
        (found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None
    )
    if not executable:
        reason = "Chromium is not installed (apt-get install chromium): the data docs are "
        reason += "checked in a real browser"
        if IN_CI:
            pytest.fail(f"{reason}, which CI=true requires", pytrace=False)
        pytest.skip(reason)
    return Chromium(executable, tmp_path_factory.mktemp("chromium"))


# --- screenshots ----------------------------------------------------------------------------------


def png_pixel(png: Path, x: int, y: int) -> tuple[int, int, int]:
    """The RGB colour at (x, y) of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    return png_rows(png, y, y)[0][x]


def png_rows(png: Path, first: int, last: int) -> list[list[tuple[int, int, int]]]:
    """Rows ``first`` to ``last`` (RGB) of an 8-bit, non-interlaced PNG (what Chromium writes).

    Decodes only the rows down to ``last``: no imaging library needed.
    """
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    assert 0 <= first <= last < height, (first, last, width, height)
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(b"".join(chunks))
    previous = bytearray(stride)
    kept = []
    for row in range(last + 1):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = previous[i]
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                corner = previous[i - bpp] if i >= bpp else 0
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + best) & 0xFF
        previous = line
        if row >= first:
            kept.append([tuple(line[i : i + 3]) for i in range(0, stride, bpp)])
    return kept


def assert_badge_pixels(png: Path, rect: list[float], expected_css: str) -> None:
    """The screenshot shows the state badge in its Bootstrap colour (CSS applied, painted)."""
    expected = tuple(int(v) for v in re.findall(r"\d+", expected_css)[:3])
    left, top, _, height = rect
    actual = png_pixel(png, int(left) + 6, int(top + height / 2))
    assert all(abs(a - e) <= 8 for a, e in zip(actual, expected, strict=True)), (actual, expected)


def keep(png: Path, name: str) -> None:
    """Copy a screenshot out of the tmp dir when ``KANDEV_DQ_ARTIFACTS`` asks for it: ``1`` /
    ``true`` means ``tests/artifacts/``, any other value names the folder."""
    wanted = os.environ.get("KANDEV_DQ_ARTIFACTS", "")
    if wanted.lower() in ("", "0", "false", "no"):
        return
    folder = ARTIFACTS if wanted.lower() in ("1", "true", "yes") else Path(wanted)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(png, folder / name)


# --- the site -------------------------------------------------------------------------------------

REMOTE_ASSET = re.compile(
    r"<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.I
)
REMOTE_CSS = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"']?)(?:https?:)?//", re.I)
REMOTE_HOSTS = (
    "unpkg.com",
    "cdnjs.cloudflare.com",
    "cdn.jsdelivr.net",
    "bootstrapcdn.com",
    "code.jquery.com",
    "amazonaws.com",
)
LOCAL_ASSET = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*\"([^\"#?:]+)\"", re.I)


def assert_self_contained(site: Path) -> None:
    """No page loads CSS, JS, fonts or images from the network; every local asset exists."""
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 4, pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not REMOTE_ASSET.findall(text), f"{page}: remote asset {REMOTE_ASSET.findall(text)}"
        assert not REMOTE_CSS.findall(text), f"{page}: remote CSS url"
        for host in REMOTE_HOSTS:
            assert host not in text, f"{page} names {host}"
        linked = LOCAL_ASSET.findall(text)
        assert any(link.endswith("bootstrap.min.css") for link in linked), page
        for link in linked:
            assert (page.parent / link).resolve().is_file(), f"{page}: missing {link}"
    for css in sorted((site / "static").rglob("*.css")):
        assert not REMOTE_CSS.findall(css.read_text(encoding="utf-8")), css


def site_pages(report) -> tuple[Path, Path, Path]:
    index = Path(report.docs_index)
    site = index.parent
    activation = next(site.glob("validations/activation/*/*/*.html"))
    return index, site / "overview.html", activation


def assert_styled(page: dict) -> None:
    """Computed styles prove Bootstrap, Font Awesome, jQuery and bootstrap-table all loaded."""
    assert "Segoe UI" in page["body_font"], page["body_font"]  # Bootstrap's font stack
    assert page["cell_border"] == "1px", page["cell_border"]  # .table td border
    assert page["assets_warning"] == "none"  # kandev.css loaded (hides the warning)
    assert page["jquery"] and page["bootstrap_table"]
    assert "Font Awesome" in page["icon_font"], page["icon_font"]  # a pass/fail icon's glyph
    assert page["icon_font_loaded"]


def words(page: dict) -> str:
    """A page's visible text, whitespace collapsed."""
    return " ".join(page["text"].split())


def rows(page: dict) -> list[list[str]]:
    """Every visible table row of a page, as its cells' text (nested tables included)."""
    return [[" ".join(cell.split()) for cell in row] for table in page["tables"] for row in table]


def row_of(page: dict, first: str) -> list[str]:
    found = [row for row in rows(page) if row and row[0].startswith(first)]
    assert found, f"no row starting {first!r} in {rows(page)}"
    return found[0]


# --- the tests ------------------------------------------------------------------------------------


def _failing_store(target) -> None:
    """capture_only, '' sentinel with backfill rows under it, and a writer shortfall."""
    store = StoreBuilder(target.engine).create()
    session = store.session()
    store.subagent_row(session, MARKUP_ID, T0 - timedelta(hours=2), source="backfill")
    store.subagent_row(session, "toolu_old2", T0 - timedelta(hours=3), source="backfill")
    store.subagent_message(session, T0 + timedelta(seconds=3), "toolu_missing")
    store.subagent_message(session, T0 + timedelta(seconds=4), "toolu_live")
    store.subagent_row(session, "toolu_live", T0 + timedelta(seconds=4))
    store.keys(CAPTURE, "", None)


def _passing_store(target) -> None:
    """Fully activated: one backfilled subagent before the keys, one live one after."""
    store = StoreBuilder(target.engine).create()
    session = store.session()
    turn = store.turn(session)
    at = "2026-07-30 01:30:00.5+00:00"
    store.subagent_message(session, at, "toolu_a", turn_id=turn, status="completed")
    store.subagent_row(session, "toolu_a", at, source="backfill", turn_id=turn)
    store.subagent_message(session, T0 + timedelta(seconds=5), "toolu_live", status="completed")
    store.subagent_row(session, "toolu_live", T0 + timedelta(seconds=5))
    store.keys(CAPTURE, THROUGH, EXECUTION)


def test_failing_run_docs_are_complete_and_styled_offline(target, project, tmp_path, chromium):
    _failing_store(target)
    report = check(project, target)
    assert not report.success and report.state == "capture_only"
    index, overview, activation = site_pages(report)
    assert_self_contained(index.parent)

    bare = tmp_path / "bare"  # the overview without its static/ folder: the control
    bare.mkdir()
    shutil.copy(overview, bare / "overview.html")
    seen = chromium.probe(
        {
            "overview": overview,
            "index": index,
            "activation": activation,
            "bare": bare / "overview.html",
        },
        tmp_path,
    )

    # The overview: state badge, the three keys (sentinel shown as such), AC-25, health, runs.
    page = seen["overview"]
    assert_styled(page)
    text = words(page)
    assert page["badge_background"] == BOOTSTRAP_WARNING
    assert "Activation state (AC-24c) capture_only Capture works" in text
    assert "no agent_execution_id on this store may be read as an execution identity" in text
    assert row_of(page, "capture_since (")[1:] == [
        CAPTURE,
        CAPTURE,
        "microsecond (6 fraction digits)",
    ]
    sentinel = row_of(page, "backfill_through (")
    assert sentinel[1] == "''" and sentinel[2].startswith("the sentinel: the backfill matched")
    assert row_of(page, "execution_since (")[1:] == ["absent", "absent", "—"]
    assert ["backfill", "before", "no key", "unknown", "2"] in rows(page)
    assert ["live", "at_or_after", "no key", "real", "1"] in rows(page)
    assert row_of(page, "Shortfall:")[1] == "1"
    assert row_of(page, "Excess:")[1] == "0"
    assert row_of(page, "Last observed row")[1] == "2026-07-30T01:39:41.271235Z"
    store = row_of(page, "Store")[1]
    assert store.startswith("sqlite:" if target.dialect == "sqlite" else "postgresql://")
    assert "@" not in store  # no user, no password
    assert row_of(page, "Latest run")[1].startswith("pre_release at ")
    assert row_of(page, "Verdict")[1].startswith("FAILED: ")
    finding = next(
        r
        for r in rows(page)
        if len(r) == 4
        and r[1] == "activation"
        and r[2].startswith(ExpectNoBackfillRowsUnderSentinel.rule_text)
    )
    assert finding[0] == "error" and "(AC-24f, AC-24)" in finding[2]

    # A custom expectation's block: rule sentence, AC ids, severity, finding, observed value,
    # and the offending rows (a markup-bearing id shown as text, never as markup).
    page = seen["activation"]
    assert_styled(page)
    sentence = f"{ExpectNoBackfillRowsUnderSentinel.rule_text} (AC-24f, AC-24; severity error)"
    finding = "2 backfill row(s) on a store whose backfill matched nothing"
    block = next(r for r in rows(page) if len(r) == 3 and r[1].startswith(sentence))
    assert finding in block[1] and block[2] == "2"  # the rule's cell, its observed value
    # Failed rules first (errors, then warnings, then info), then the rules that passed.
    judged = {r.expectation: r for r in report.results if r.suite == "activation"}
    sentences = sorted(((VERDICTS[name].rule_text, name) for name in judged), reverse=True)
    listed = [
        next(name for text, name in sentences if r[1].startswith(text))
        for r in rows(page)
        if len(r) == 3 and "; severity " in r[1]
    ]
    assert sorted(listed) == sorted(judged), listed
    order = [
        len(Severity) if judged[n].success else Severity.rank_of(judged[n].severity) for n in listed
    ]
    assert order == sorted(order) and order[0] < len(Severity) == order[-1], order
    offending = next(t for t in page["tables"] if t and t[0][-1] == "tool_call_id")
    # Each stored timestamp as the store holds it, its exact instant beside it (AC-24e).
    assert offending[0] == [
        "id",
        "observed_at",
        "observed_at_utc",
        "task_session_id",
        "tool_call_id",
    ]
    assert sorted(row[4] for row in offending[1:]) == sorted([MARKUP_ID, "toolu_old2"])

    # The index: the overview summary on top, the results table built by bootstrap-table.
    page = seen["index"]
    assert_styled(page)
    text = words(page)
    assert text.index("Read the store overview first") < text.index("Data Docs | local_site")
    assert "capture_only on " in text and page["index_rows"] >= 5

    # The control: the same page without static/ is unstyled and says why.
    page = seen["bare"]
    assert "Segoe UI" not in page["body_font"]
    assert "did not load" in page["text"]

    for name, path in (("overview", overview), ("activation", activation)):
        png = chromium.screenshot(path, tmp_path / f"failing-{target.dialect}-{name}.png")
        if name == "overview":
            assert_badge_pixels(png, seen["overview"]["badge_rect"], BOOTSTRAP_WARNING)
        keep(png, png.name)


def test_passing_run_docs_and_the_docs_command(sqlite_target, project, tmp_path, chromium):
    from typer.testing import CliRunner

    from kandev_dq.cli import app

    _passing_store(sqlite_target)
    first = check(project, sqlite_target)  # takes the write-once baseline (AC-24), disclosed
    report = check(project, sqlite_target)
    assert report.success and report.state == "fully_activated"
    index, overview, activation = site_pages(report)
    # The first run's one finding is the info-level baseline disclosure: a passing run.
    assert first.success and {r.severity for r in first.results if not r.success} == {"info"}
    first_activation = min(
        index.parent.glob("validations/activation/*/*/*.html"), key=lambda p: p.parent.name
    )

    # `kandev-dq docs` rebuilds the whole site from the stored results; the overview still
    # names the store and the raw keys (recorded from the run's snapshot, not re-read).
    shutil.rmtree(index.parent)
    built = CliRunner().invoke(app, ["docs", "--project", str(project)])
    assert built.exit_code == 0, built.output
    assert built.stdout.strip() == str(index)
    assert_self_contained(index.parent)

    seen = chromium.probe(
        {"overview": overview, "index": index, "first_activation": first_activation}, tmp_path
    )
    # A suite's status follows the exit code's rule: an info finding is info, never a failure.
    assert "Status: Succeeded with info findings" in words(seen["first_activation"])
    statuses = seen["index"]["index_status"]
    assert statuses and not any("fa-times" in icon for icon, _ in statuses), statuses
    info = [row for icon, row in statuses if "kandev-status-info" in icon]
    assert len(info) == 1 and "activation" in info[0], statuses
    page = seen["overview"]
    assert_styled(page)
    text = words(page)
    assert page["badge_background"] == BOOTSTRAP_SUCCESS
    assert "Activation state (AC-24c) fully_activated" in text
    assert "Every rule of the latest run passed." in text
    assert row_of(page, "Write-once baseline (AC-24)")[1].startswith(
        f"taken {first.baseline_taken_at} (run)"
    )
    assert row_of(page, "backfill_through (")[1:] == [
        THROUGH,
        "2026-07-30T01:30:00.5Z",
        "millisecond (1 fraction digit)",
    ]
    assert row_of(page, "execution_since (")[1] == EXECUTION
    assert row_of(page, "capture_since (")[1] == CAPTURE
    assert ["backfill", "before", "before", "unknown", "1"] in rows(page)
    assert ["live", "at_or_after", "at_or_after", "real", "1"] in rows(page)
    assert row_of(page, "Store")[1] == f"sqlite:///{Path(sqlite_target.url).resolve()} (sqlite)"
    assert row_of(page, "Verdict")[1] == "passed"
    assert row_of(page, "Shortfall:")[1] == "0"
    assert row_of(page, "Last observed row")[1] == "2026-07-30T01:39:42.271235Z"
    assert "fully_activated on " in words(seen["index"]) and seen["index"]["index_rows"] >= 5

    png = chromium.screenshot(overview, tmp_path / "passing-overview.png")
    assert_badge_pixels(png, page["badge_rect"], BOOTSTRAP_SUCCESS)
    keep(png, png.name)
    keep(chromium.screenshot(index, tmp_path / "passing-index.png"), "passing-index.png")


def test_without_a_run_record_the_overview_falls_back_on_the_results(sqlite_target, project):
    """Results from a run the register never saw (e.g. a checkpoint run through GX directly)
    still give the state and each key's kind; the store and raw values say "not recorded".
    Needs no browser: the site is also checked for remote assets here."""
    from kandev_dq.records import Records, records_url, runs
    from kandev_dq.report.site import build_docs

    _failing_store(sqlite_target)
    check(project, sqlite_target)
    with Records(records_url(project)) as records, records.engine.begin() as conn:
        conn.execute(runs.delete())
    built = build_docs(project)
    assert built.index is not None and built.overview is not None
    assert_self_contained(built.index.parent)
    page = built.overview.read_text(encoding="utf-8")
    text = " ".join(re.sub(r"<[^>]+>", " ", html.unescape(page)).split())
    assert "Activation state (AC-24c) capture_only" in text
    assert "as read from the activation result of" in text
    assert "Store not recorded" in text
    assert "capture_since (subagent_context_capture_since) value not recorded" in text
    assert "backfill_through (subagent_context_backfill_through) '' the sentinel" in text
    assert "execution_since (subagent_context_execution_since) absent absent" in text


def frames_probe(read_frame: str) -> str:
    """A probe page whose script reports, under each iframe's id, what ``read_frame`` (a script
    body given the frame's document ``d`` and window ``w``) returns."""
    return (
        """<!DOCTYPE html>
<html><body>
<!--FRAMES-->
<pre id="probe">pending</pre>
<script>
window.addEventListener('load', async () => {
  const report = {};
  for (const frame of document.querySelectorAll('iframe')) {
    await frame.contentDocument.fonts.ready;  // text measured in its own font
  }
  await new Promise(done => setTimeout(done, 1000));  // each frame's tables initialised
  for (const frame of document.querySelectorAll('iframe')) {
    const d = frame.contentDocument, w = frame.contentWindow;
    report[frame.id] = (() => {
"""
        + read_frame
        + """
    })();
  }
  document.getElementById('probe').textContent = JSON.stringify(report);
});
</script>
</body></html>
"""
    )


BREADCRUMB_PROBE = frames_probe("""
    const crumbs = d.querySelector('.ge-breadcrumbs');
    const home = crumbs.querySelector('a');
    const nav = d.querySelector('nav.navbar');
    const box = r => [r.left, r.top, r.width, r.height];
    return {
      crumbs: box(crumbs.getBoundingClientRect()),
      home: box(home.getBoundingClientRect()),
      nav: box(nav.getBoundingClientRect()),
      line: parseFloat(w.getComputedStyle(home).lineHeight),
      title: crumbs.getAttribute('title'),
    };""")


def test_the_breadcrumb_is_one_line_at_1024_and_1400_px(sqlite_target, project, tmp_path, chromium):
    _passing_store(sqlite_target)
    _, _, activation = site_pages(check(project, sqlite_target))
    widths = (1024, 1400)
    frames = "\n".join(
        f'<iframe id="w{w}" src="{activation.as_uri()}" style="width:{w}px;height:400px;border:0">'
        "</iframe>"
        for w in widths
    )
    seen = chromium.report(
        BREADCRUMB_PROBE.replace("<!--FRAMES-->", frames), tmp_path / "breadcrumb.html"
    )
    for width in widths:
        page = seen[f"w{width}"]
        _, top, _, height = page["crumbs"]
        assert height < 2 * page["line"], (width, page)  # one line, not three
        home_top, nav_top = page["home"][1], page["nav"][1]
        assert home_top >= nav_top and home_top >= top, (width, page)  # "Home" is not clipped
        assert top + height <= page["nav"][1] + page["nav"][3], (width, page)
        assert "kandev_meta" not in page["title"] and page["title"].startswith("Validations / ")
        png = tmp_path / f"breadcrumb-{width}.png"
        chromium.run(activation.as_uri(), f"--window-size={width},300", f"--screenshot={png}")
        assert png.is_file()
        keep(png, png.name)


LAYOUT_PROBE = frames_probe("""
    for (const open of d.querySelectorAll('details')) open.open = true;  // the SQL shown
    // Each id an offending-rows table shows: its column, its text and how many lines it takes.
    const ids = [...d.querySelectorAll('td table')].flatMap(table => {
      const names = [...table.querySelectorAll('thead th')].map(th => th.innerText.trim());
      return [...table.querySelectorAll('tbody tr')].flatMap(row => [...row.cells]
        .map((cell, i) => [names[i] || '', cell])
        .filter(([name]) => name === 'id' || name.endsWith('_id'))
        .map(([name, cell]) => {
          const text = d.createRange();
          text.selectNodeContents(cell);
          const line = parseFloat(w.getComputedStyle(cell).lineHeight);
          return [name, cell.innerText.trim(), text.getBoundingClientRect().height / line];
        }));
    });
    return {
      ids,
      queries: d.querySelectorAll('.kandev-query-text').length,
      wide: [...d.querySelectorAll('.table-responsive, .fixed-table-body')]
        .filter(box => box.scrollWidth > box.clientWidth + 1)
        .map(box => [box.scrollWidth, box.clientWidth]),
      page: [d.documentElement.scrollWidth, d.documentElement.clientWidth],
    };""")


def test_validation_tables_fit_at_1024_and_1400_px(sqlite_target, project, tmp_path, chromium):
    """A failing run's validation pages, their SQL open (the orphan rows' query is one long
    line): no results table scrolls sideways (its "Observed Value" column stays in sight); the
    SQL and the offending rows fit in their cell."""
    from kandev_dq.lab import scenarios

    sqlite_target.engine.dispose()
    scenarios.materialise("orphan_rows", sqlite_target.url)
    site = Path(check(project, sqlite_target).docs_index).parent
    pages = sorted(site.glob("validations/*/*/*/*.html"))
    frames = "\n".join(
        f'<iframe id="w{w}-{i}" src="{page.as_uri()}" style="width:{w}px;height:900px;border:0">'
        "</iframe>"
        for w in (1024, 1400)
        for i, page in enumerate(pages)
    )
    seen = chromium.report(LAYOUT_PROBE.replace("<!--FRAMES-->", frames), tmp_path / "layout.html")
    assert sum(page["queries"] for page in seen.values()) >= 2  # the SQL blocks were measured
    for frame, page in seen.items():
        assert page["wide"] == [], (frame, pages[int(frame.split("-")[1])].parent.parent, page)
        assert page["page"][0] <= page["page"][1], (frame, page)
    # An offending row's ids read whole, each on one line, never squeezed to a few characters
    # a line (the orphan rows' ids, task sessions and tool calls at 1,400 px).
    shown = [i for frame, page in seen.items() if frame.startswith("w1400-") for i in page["ids"]]
    assert {"id", "task_session_id", "tool_call_id"} <= {name for name, _, _ in shown}, shown
    assert all(lines < 1.5 for _, _, lines in shown), [i for i in shown if i[2] >= 1.5]


def test_suite_pages_name_the_tables_they_judge(sqlite_target, project):
    """The validation page's data asset and the suite page's notes; needs no browser."""
    _passing_store(sqlite_target)
    report = check(project, sqlite_target)
    site = Path(report.docs_index).parent
    rows_page = next(site.glob("validations/rows/*/*/*.html")).read_text(encoding="utf-8")
    assert "Data asset: task_session_subagents, task_session_messages, task_sessions" in rows_page
    health = next(site.glob("validations/writer_health/*/*/*.html")).read_text(encoding="utf-8")
    assert "Data asset: kandev_meta<" not in health
    suite_page = (site / "expectations" / "rows.html").read_text(encoding="utf-8")
    assert "across 0 columns" not in suite_page
    from kandev_dq.gx.context import SUITES

    rows_rules = len(SUITES["rows"]())
    assert f"{rows_rules} Expectations, judging task_session_subagents" in suite_page


def test_an_empty_observed_value_reads_none():
    from kandev_dq.expectations.base import _observed_content

    for empty in ([], {}, "", None):
        assert _observed_content(empty).string_template["params"] == {"value": "none"}
    assert _observed_content([1]).string_template["params"] == {"value": "[1]"}


def test_the_overview_charts_five_runs_two_failing(sqlite_target, project, tmp_path, chromium):
    """After five checks of one store, the last two failing (a row whose source is neither
    'live' nor 'backfill', AC-1), the overview's timeline is an inline SVG drawn with no
    script: five points in every series, the rows suite red at runs 4 and 5, and the
    screenshot paints it."""
    import sqlalchemy as sa

    _passing_store(sqlite_target)
    for _ in range(3):
        assert check(project, sqlite_target).success
    with sqlite_target.engine.begin() as conn:
        conn.execute(sa.text("UPDATE task_session_subagents SET source = 'replayed'"))
    for _ in range(2):
        report = check(project, sqlite_target)
        assert not report.success
    _, overview, _ = site_pages(report)

    seen = chromium.probe({"overview": overview}, tmp_path)["overview"]
    # The failed rule's query, copied offline: the button takes exactly the query's text (to
    # the clipboard, or selected for Ctrl+C where a background frame gets no clipboard).
    failed = [r for r in report.results if not r.success and r.query]
    assert seen["copy_code"] in {r.query for r in failed}
    assert seen["copy_button"] in ("Copied", "Selected: press Ctrl+C")
    assert seen["copy_selection"] in ("", seen["copy_code"])
    assert seen["timeline_rect"] and seen["timeline_rect"][2] > 300
    # The x axis shows each run's date and time (UTC), the latest run's among them.
    dates = [t for t in seen["timeline_axis"] if re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", t)]
    assert len(dates) >= 5 and report.run_time[:16].replace("T", " ") in dates, seen
    series: dict[str, list[tuple[int, str]]] = {}
    for label, _, _ in seen["timeline_points"]:
        fields = dict(part.split(": ", 1) for part in label.split("; "))
        name = fields.get("suite") or fields.get("figure") or fields.get("value")
        series.setdefault(name, []).append((int(fields["run"]), fields.get("status", "")))
    suites = {"activation", "writer_health", "rows", "schema", "backfill"}
    figures = {"shortfall", "excess", "rows_since_capture"}
    assert suites | figures | {"fully_activated"} <= set(series), sorted(series)
    assert all(sorted(r for r, _ in points) == [1, 2, 3, 4, 5] for points in series.values())
    assert [s for _, s in sorted(series["rows"])] == ["passed"] * 3 + ["error"] * 2
    # The first run discloses the write-once baseline it records (an info finding, AC-24).
    assert [s for _, s in sorted(series["activation"])] == ["info"] + ["passed"] * 4

    # The screenshot shows it: a window tall enough to reach the chart; the last run's column
    # is painted red (only the rows suite errs, and run 4 is a column apart). The column, not
    # the probe's exact point: the page above the chart may settle a little differently in a
    # second browser under load. Kept before it is judged, so a failure leaves the picture.
    label, x, _ = next(
        p for p in seen["timeline_points"] if "suite: rows" in p[0] and "run: 5;" in p[0]
    )
    _, top, _, height = seen["timeline_rect"]
    png = tmp_path / "timeline-overview.png"
    chromium.run(
        overview.as_uri(),
        f"--screenshot={png}",
        f"--window-size={WIDTH},{max(4000, int(top + height) + 600)}",
        "--virtual-time-budget=15000",  # fonts loaded, as the probe waited: the same layout
    )
    keep(png, png.name)
    assert _painted_in_column(png, x, top - 200, top + height + 200, ERROR_POINT), label


#: The error cross (#dc3545) as painted: Vega fills points at 70 % opacity over white.
ERROR_POINT = (231, 114, 125)


def _painted_in_column(
    png: Path, x: float, first: float, last: float, colour: tuple[int, int, int]
) -> bool:
    """Some pixel within 30 px of ``x``, between rows ``first`` and ``last``, has ``colour``."""
    rows = png_rows(png, max(int(first), 0), int(last))
    return any(
        all(abs(a - b) <= 20 for a, b in zip(pixel, colour, strict=True))
        for row in rows
        for pixel in row[max(int(x) - 30, 0) : int(x) + 30]
    )


def test_a_second_check_compiles_no_page_template(sqlite_target, project, monkeypatch):
    """GX builds a new Jinja environment for every page set; the compiled templates are kept
    for the process, so a second check renders its pages without compiling any again."""
    import jinja2

    _passing_store(sqlite_target)
    assert check(project, sqlite_target).docs_index
    compiled: list[str] = []
    compile_template = jinja2.Environment.compile

    def counted(self, source, name=None, filename=None, *args, **kwargs):
        compiled.append(name or "<string>")
        return compile_template(self, source, name, filename, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counted)
    assert check(project, sqlite_target).docs_index
    assert [name for name in compiled if name != "<string>"] == []


def test_the_chart_engine_starts_once_the_store_is_read(sqlite_target, project, monkeypatch):
    """The chart engine's start-up runs in the background while the results' pages are built,
    after every fact is read (started earlier, its memory lies on top of the read's peak)."""
    import threading

    import vl_convert

    from kandev_dq.expectations import base
    from kandev_dq.report import timeline_chart

    events: list[str] = []
    gx_facts = base.gx_facts

    def reading(*args, **kwargs):
        events.append("fact")
        return gx_facts(*args, **kwargs)

    def drawing(spec):
        events.append("first chart" if spec is timeline_chart._FIRST_CHART else "chart")
        return "<svg></svg>"

    monkeypatch.setattr(base, "gx_facts", reading)
    monkeypatch.setattr(vl_convert, "vegalite_to_svg", drawing)
    monkeypatch.setattr(timeline_chart, "_STARTED", threading.Lock())
    _passing_store(sqlite_target)
    assert check(project, sqlite_target).docs_index
    for thread in threading.enumerate():
        if thread.name == "chart-engine-start":
            thread.join(timeout=30)
    assert "fact" in events and "chart" in events
    assert "fact" not in events[events.index("first chart") :]


def test_the_timeline_chart_is_valid_vega_lite():
    """The chart's rows join its spec as plain datasets after Altair has checked the chart
    (through Altair each row was checked, a cost growing with the points): the whole spec,
    its rows included, is held to Vega-Lite's schema here (AC-26)."""
    import altair as alt
    import jsonschema

    from kandev_dq.report.history import Timeline, TimelinePoint
    from kandev_dq.report.timeline_chart import timeline_spec, timeline_svg

    points = [
        TimelinePoint(
            run=i,
            run_time=f"2026-12-0{i}T00:00:00Z",
            checkpoint="nightly",
            suites={"rows": "passed", "writer_health": "warning"},
            state="fully_activated",
            health={"shortfall": 0, "excess": i, "rows_since_capture": 10 * i},
            keys_present=["subagent_context_capture_since"],
        )
        for i in range(1, 4)
    ]
    spec = timeline_spec(Timeline(points=points, first_seen={}))
    alt.VConcatChart.validate(spec)  # raises on a spec Vega-Lite would reject
    drawn = timeline_svg(Timeline(points=points, first_seen={}))
    assert all(f">2026-12-0{i} 00:00<" in drawn for i in range(1, 4))  # dates on the x axis
    spec["vconcat"][0]["mark"] = {"type": "no such mark"}
    with pytest.raises(jsonschema.ValidationError):  # the check above can fail
        alt.VConcatChart.validate(spec)
