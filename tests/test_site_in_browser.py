"""The documentation site as a reader's browser shows it, on a phone (390 px) and on a desktop (1400 px):
the built site (`mkdocs build --strict`, once for the module) served on a loopback port and opened in
headless Chromium, driven over the DevTools protocol (a websocket: the `websockets` package). On the
home, results, Table 2, algorithms, paper-settings and experiments pages:

- every displayed equation renders (MathJax's SVG wider than 20 px; Material's phone rule
  `div.arithmatex > * {width: min-content}` once made each one 1 px wide);
- code text is at least 13 px;
- the page asks no other host for anything (fonts, scripts): it works offline;
- no JavaScript error is thrown on load;
- the navigation's label of the page is the page's heading;
- at 1400 px nothing is wider than its box, unless it is in a box that scrolls sideways (a console
  block's program output, a results table of many columns).

Without a Chromium binary these tests skip, unless KAPPA_BROWSER_TESTS=required (.ci/run installs
Debian's `chromium` and sets it), where they fail.

`python tests/test_site_in_browser.py DIR` writes screenshots of the pages at both widths to DIR.
"""

import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BROWSER = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
REQUIRED = os.environ.get("KAPPA_BROWSER_TESTS") == "required"
# one test process builds the site and opens the browser once for every test of the module (pytest-xdist)
pytestmark = [pytest.mark.xdist_group("browser")]
if BROWSER is None and not REQUIRED:
    pytestmark.append(pytest.mark.skip(reason="no chromium binary (apt-get install chromium; CI sets KAPPA_BROWSER_TESTS=required)"))

# the pages checked at each width, by their paths in the site: every page of mkdocs.yml's nav
def nav_pages() -> list[str]:
    import re

    import yaml

    # the nav block alone: the rest of mkdocs.yml carries tags (!!python/name) a safe loader refuses
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    nav = nav.split("\n# ", 1)[0].split("\n\n", 1)[0]

    def files(entry):  # an entry: "a.md", {"Title": "a.md"} or {"Section": [entries]}
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, dict):
            return [f for value in entry.values() for f in files(value)]
        return [f for item in entry for f in files(item)]

    paths = [f for f in files(yaml.safe_load("nav:\n" + nav)["nav"]) if f.endswith(".md")]
    # mkdocs serves a/b.md at a/b/, and a/README.md or a/index.md at a/
    return [re.sub(r"(^|/)(README|index)\.md$", r"\1", f) if f.endswith(("README.md", "index.md"))
            else f.removesuffix(".md") + "/" for f in paths]


PAGES = nav_pages()
WIDTHS = {"phone": 390, "desktop": 1400}
MIN_CODE_PX = 13
MIN_EQUATION_PX = 20


# ------------------------------------------------------------------------------------ the driver
class DevTools:
    """A DevTools-protocol client on the browser's websocket; pages are targets attached with flat sessions."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.events: list[dict] = []

    def _receive(self, timeout: float) -> dict:
        return json.loads(self.ws.recv(timeout=timeout))

    def send(self, method: str, session: str | None = None, timeout: float = 30, **params) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(max(0.1, deadline - time.monotonic()))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            seen = len(self.events)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(method)
            self.events.append(self._receive(left))

    def session_events(self, session: str, method: str) -> list[dict]:
        return [e["params"] for e in self.events if e.get("sessionId") == session and e.get("method") == method]


@contextlib.contextmanager
def browser():
    """Headless Chromium with a fresh profile; yields a DevTools client connected to it."""
    # ignore_cleanup_errors: the browser's helper processes can still be writing the profile as it is removed
    with tempfile.TemporaryDirectory(prefix="kappa-chromium-", ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
             "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={profile}",
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            active = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 30
            while not (active.is_file() and len(active.read_text().split()) >= 2):
                assert process.poll() is None, f"{BROWSER} exited with {process.returncode}"
                assert time.monotonic() < deadline, f"{BROWSER} opened no DevTools port in 30 s"
                time.sleep(0.05)
            port, path = active.read_text().split()[:2]
            from websockets.sync.client import connect

            with connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=10) as ws:
                yield DevTools(ws)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def served(site_dir: Path):
    """The built site on a loopback port (http.server in a thread); yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site_dir)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


# What the page shows, measured in it once MathJax has typeset and the fonts have loaded.
MEASURE = r"""
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await document.fonts.ready;
  const content = document.querySelector("article.md-content__inner");
  const images = [...content.querySelectorAll("img")];
  // the figures fetched as the page loaded (lazy ones: those near the screen), then every shown one fetched now
  const pngs = () => performance.getEntriesByType("resource").map(e => new URL(e.name).pathname).filter(p => p.endsWith(".png"));
  const initialPngs = pngs();
  const loading = images.map(i => i.loading);
  const shownImages = images.filter(i => i.getClientRects().length > 0);
  for (const i of shownImages) i.loading = "eager";
  await Promise.all(shownImages.map(i => i.complete ? null : new Promise(r => { i.onload = r; i.onerror = r; })));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  // each figure shown (not display: none), the file the browser chose and its width on screen and in the file
  const figures = images.filter(i => i.getClientRects().length > 0).map(i => ({
    src: (i.currentSrc || i.src).split("/").pop(), path: new URL(i.currentSrc || i.src).pathname,
    shown: i.getBoundingClientRect().width, natural: i.naturalWidth}));
  const name = e => e.tagName.toLowerCase() + (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\s+/).join(".") : "");
  const scrolls = e => ["auto", "scroll"].includes(getComputedStyle(e).overflowX);
  const equations = [...content.querySelectorAll("div.arithmatex")].map(div => {
    const svg = div.querySelector("mjx-container svg");
    return {tex: div.textContent.trim().slice(0, 50), width: svg ? svg.getBoundingClientRect().width : 0};
  });
  const code = [...content.querySelectorAll("code")].map(c => ({
    text: c.textContent.trim().slice(0, 40), px: parseFloat(getComputedStyle(c).fontSize)}));
  const here = [...document.querySelectorAll("nav.md-nav--primary a.md-nav__link")].filter(a => a.href === location.href);
  const h1 = content.querySelector("h1");
  // the column: Material's content area (a table's scroll box reaches 0.8rem into its margins)
  const right = document.querySelector(".md-content").getBoundingClientRect().right;
  const wide = [];
  for (const e of content.querySelectorAll("*")) {
    if (e.closest("mjx-container") && e.tagName.toLowerCase() !== "mjx-container") continue;
    let a = e.parentElement, scrolled = false;
    while (a && a !== content) { if (scrolls(a)) { scrolled = true; break; } a = a.parentElement; }
    if (scrolled) continue;  // measured as a whole: the box that scrolls
    const over = scrolls(e) ? e.scrollWidth > e.clientWidth + 1 : e.getBoundingClientRect().right > right + 1;
    if (over) wide.push({element: name(e), text: e.textContent.trim().slice(0, 60),
                         scrollWidth: e.scrollWidth, clientWidth: e.clientWidth,
                         right: Math.round(e.getBoundingClientRect().right), column: Math.round(right)});
  }
  // boxes that scroll sideways here (more than they show), and whether they say so: the edge shadows (extra.css)
  const scrollers = [...content.querySelectorAll("*")].filter(e => scrolls(e) && e.scrollWidth > e.clientWidth + 1)
    .map(e => ({element: name(e), text: e.textContent.trim().slice(0, 60), scrollWidth: e.scrollWidth,
                clientWidth: e.clientWidth, cue: getComputedStyle(e).backgroundImage.includes("gradient"),
                python: !!e.closest(".language-python"), api: !!e.querySelector("tr.doc-section-item > td:nth-child(4)")}));
  // each code block's copy button against the block's text on screen: the characters it covers
  const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const copyButtons = [...content.querySelectorAll("pre")].filter(p => p.querySelector("button.md-code__button")).map(p => {
    const button = p.querySelector("button.md-code__button").getBoundingClientRect();
    const code = p.querySelector("code");
    let covered = "";
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        if (!node.data[i].trim()) continue;
        const range = document.createRange();
        range.setStart(node, i); range.setEnd(node, i + 1);
        if ([...range.getClientRects()].some(r => overlap(r, button))) covered += node.data[i];
      }
      if (covered.length > 40) break;
    }
    return {text: code.textContent.trim().slice(0, 50), covered};
  });
  // where the page's h2 headings start (document y) and how tall the page is
  const headings = Object.fromEntries([...content.querySelectorAll("h2[id]")].map(
    h => [h.id, Math.round(h.getBoundingClientRect().top + window.scrollY)]));
  return {
    headings, pageHeight: document.documentElement.scrollHeight,
    equations, code, figures, scrollers, copyButtons, initialPngs, loading, pngs: pngs(),
    hidden: images.filter(i => i.getClientRects().length === 0).map(i => new URL(i.src).pathname),
    nav: here.map(a => a.textContent.trim().replace(/\s+/g, " ")),
    toc: [...document.querySelectorAll("nav.md-nav--secondary a.md-nav__link")].map(a => a.textContent.trim()),
    h1: h1 ? h1.textContent.replace("¶", "").trim().replace(/\s+/g, " ") : null,
    wide,
    pageScroll: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  };
})()
"""


DETAIL = """(() => {
  const output = document.querySelector("article pre > code .go");
  const tables = [...document.querySelectorAll("article .md-typeset__scrollwrap")];
  const widest = tables.sort((a, b) => b.querySelectorAll("th").length - a.querySelectorAll("th").length)[0];
  const e = document.querySelector("article div.arithmatex") || (output && output.closest("pre")) || widest;
  if (e) e.scrollIntoView({block: "center"});
})()"""


def visit(devtools: DevTools, url: str, width: int, screenshot: Path | None = None) -> dict:
    """Open url in a new tab of the given width; what MEASURE finds, the requests the page made and the
    JavaScript errors it threw."""
    target = devtools.send("Target.createTarget", url="about:blank")["targetId"]
    session = devtools.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    try:
        for domain in ("Page", "Runtime", "Network"):
            devtools.send(f"{domain}.enable", session)
        devtools.send("Emulation.setDeviceMetricsOverride", session, width=width, height=900,
                      deviceScaleFactor=1, mobile=width < 600)
        devtools.send("Page.navigate", session, url=url)
        devtools.wait_for("Page.loadEventFired", session)
        result = devtools.send("Runtime.evaluate", session, expression=MEASURE, awaitPromise=True,
                               returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{url}: measuring failed: {result['exceptionDetails']}")
        found = result["result"]["value"]
        found["requests"] = [e["request"]["url"] for e in devtools.session_events(session, "Network.requestWillBeSent")]
        found["failed"] = [e for e in devtools.session_events(session, "Network.loadingFailed") if not e.get("canceled")]
        found["exceptions"] = [
            (e["exceptionDetails"].get("exception", {}).get("description") or e["exceptionDetails"]["text"]).splitlines()[0]
            for e in devtools.session_events(session, "Runtime.exceptionThrown")]
        if screenshot is not None:  # the page's top, then its first equation, program output or widest table
            for kind, script in (("top", "window.scrollTo(0, 0)"), ("detail", DETAIL)):
                devtools.send("Runtime.evaluate", session, expression=script)
                time.sleep(0.3)
                data = devtools.send("Page.captureScreenshot", session, format="png")["data"]
                screenshot.with_name(f"{screenshot.name}-{kind}.png").write_bytes(base64.b64decode(data))
        return found
    finally:
        devtools.send("Target.closeTarget", targetId=target)


# --------------------------------------------------------------------------------------- the tests
def build_site(out_dir: Path) -> Path:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out_dir)],
                           cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    if build.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{build.stderr[-3000:]}")
    return out_dir


@pytest.fixture(scope="module")
def shown(tmp_path_factory):
    """{(page, width name): what the browser found}, every page at both widths, one browser for all."""
    assert BROWSER, "KAPPA_BROWSER_TESTS=required but no chromium binary is installed (apt-get install chromium)"
    site_dir = build_site(tmp_path_factory.mktemp("browser") / "site")
    found = {}
    with served(site_dir) as base, browser() as devtools:
        for name, width in WIDTHS.items():
            for path in PAGES:
                found[path or "home", name] = visit(devtools, base + path, width)
    return found


def report(problems: list[str]) -> str:
    return f"{len(problems)} problems:\n" + "\n".join(problems[:30])


def test_every_displayed_equation_renders_at_every_width(shown):
    """Each `$$...$$` of the pages is an SVG wider than 20 px, on a phone as on a desktop."""
    problems, seen = [], 0
    for (page, width), found in shown.items():
        for equation in found["equations"]:
            seen += 1
            if equation["width"] <= MIN_EQUATION_PX:
                problems.append(f"{page} at {width}: {equation['width']:.0f} px wide: {equation['tex']}")
    assert seen >= 2 * 10, seen  # algorithms 8, home 2, at both widths
    assert not problems, report(problems)


def test_code_text_is_legible(shown):
    """Every `code` element (blocks, inline, in tables and admonitions) is at least 13 px."""
    problems = [f"{page} at {width}: {c['px']:.1f} px: {c['text']}"
                for (page, width), found in shown.items() for c in found["code"] if c["px"] < MIN_CODE_PX]
    assert sum(len(found["code"]) for found in shown.values()) > 100
    assert not problems, report(problems)


def test_the_pages_ask_no_other_host_for_anything(shown):
    """Every request a page makes (fonts, scripts, styles, images) goes to the site itself, and loads."""
    from urllib.parse import urlsplit

    problems = []
    for (page, width), found in shown.items():
        assert found["requests"], page
        for url in found["requests"]:
            host = urlsplit(url).hostname
            if url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"):
                continue
            problems.append(f"{page} at {width}: {url}")
        for failure in found["failed"]:
            problems.append(f"{page} at {width}: failed to load: {failure.get('errorText')}")
    assert not problems, report(problems)


def test_no_javascript_error_on_load(shown):
    """No uncaught exception (Runtime.exceptionThrown) while a page loads and typesets its maths."""
    problems = [f"{page} at {width}: {e}" for (page, width), found in shown.items() for e in found["exceptions"]]
    assert not problems, report(problems)


def test_the_figures_drawn_in_two_widths_read_on_a_phone_and_on_a_desktop(shown):
    """The figures `report` draws twice (kappa_rllib.report.plots.NARROW_WIDTH_IN: the lead figure against the
    paper, the lower-discount study, the IQM over the tasks, the curves), each one whose `_narrow.png` is in
    docs/, are each shown once at each width, the wide drawing on a desktop and the narrow one on a phone, and
    their smallest text (SMALLEST_FONT_PT at PLOT_DPI, scaled to the width shown) is >= 9 px high on both (a
    two-column drawing on a phone: ~5 px). A figure drawn in one width only is never shown on a phone, and is
    legible where it is shown (issue 67: MinAtar's and the small suite's 600 px drawings had ~4-6 px legends). The
    lead figure against the paper reads at a glance on a desktop: its smallest text >= 11 px, a seed's dot >= 6 px
    across (drawn 9 in wide with 9 pt type and shown at 0.51x, they were 9.6 and 5.2 px)."""
    from kappa_rllib.report import plots, vs_paper

    def two_widths(figure: dict) -> bool:
        wide = ROOT / "docs" / figure["path"].lstrip("/").removesuffix("_narrow.png").removesuffix(".png")
        return Path(f"{wide}_narrow.png").is_file()

    wanted_on = {("results/", "vs_paper"): 1, ("results/cells/", "lower_gamma_"): 3, ("results/table2/", "lower_gamma_"): 2,
                 ("results/minatar/", "lower_gamma_"): 1, ("results/", "iqm"): 1, ("results/table2/", "iqm"): 1,
                 ("results/cells/", "curves_"): 4, ("results/table2/", "curves_"): 8, ("results/minatar/", "curves_"): 1}
    problems = []
    for (page, width), found in shown.items():
        figures = [f for f in found["figures"] if two_widths(f)]
        for (on, kind), count in wanted_on.items():
            if on == page and sum(f["src"].startswith(kind) for f in figures) != count:
                problems.append(f"{page} at {width}: {count} {kind} figure(s) wanted, {figures} shown")
        for f in found["figures"]:  # a figure drawn in one width only: never on a phone, legible where shown
            if two_widths(f):
                continue
            if width == "phone":
                problems.append(f"{page} at phone: {f['src']} has no phone drawing")
            elif plots.SMALLEST_FONT_PT * plots.PLOT_DPI / 72 * f["shown"] / f["natural"] < 9:
                problems.append(f"{page} at {width}: {f['src']}'s smallest text under 9 px")
        for f in figures:
            narrow = f["src"].endswith("_narrow.png")
            if narrow != (width == "phone"):
                problems.append(f"{page} at {width}: {f['src']} shown")
            text_px = plots.SMALLEST_FONT_PT * plots.PLOT_DPI / 72 * f["shown"] / f["natural"]
            if text_px < 9:
                problems.append(f"{page} at {width}: {f['src']}'s smallest text {text_px:.1f} px high")
            if f["src"].startswith("vs_paper") and width == "desktop":  # the lead figure: read at a glance
                scale = plots.PLOT_DPI / 72 * f["shown"] / f["natural"]
                text_px, dot_px = vs_paper.SMALLEST_FONT_PT * scale, vs_paper.SEED_DOT_PT2 ** 0.5 * scale
                if text_px < 11 or dot_px < 6:
                    problems.append(f"{page} at {width}: the lead figure's smallest text {text_px:.1f} px high "
                                    f"(11 wanted), a seed's dot {dot_px:.1f} px across (6 wanted)")
    assert sum(len(found["figures"]) for found in shown.values()) > 20
    assert not problems, report(problems)


def test_the_navigation_names_each_page_by_its_heading(shown):
    """The sidebar's link to a page reads as the page's h1."""
    problems = []
    for (page, width), found in shown.items():
        if width != "desktop":
            continue
        if not found["nav"]:
            problems.append(f"{page}: no link to itself in the navigation")
        problems += [f"{page}: the navigation says {label!r}, the page's heading {found['h1']!r}"
                     for label in found["nav"] if label != found["h1"]]
    assert not problems, report(problems)


def test_no_heading_shows_raw_tex_in_the_table_of_contents(shown):
    """The contents on the right list each heading as text: MathJax never typesets them, so a heading's `$...$`
    would show there as `\\(N_\\kappa\\)` (it did on the results page)."""
    problems = [f"{page}: {entry}" for (page, width), found in shown.items() if width == "desktop"
                for entry in found["toc"] if any(mark in entry for mark in ("\\(", "\\[", "$"))]
    assert sum(len(found["toc"]) for found in shown.values()) > 30
    assert not problems, report(problems)


def test_nothing_is_wider_than_its_box_on_a_desktop(shown):
    """At 1400 px no table, code block or equation needs a sideways scroll, and nothing runs past the column."""
    problems = []
    for (page, width), found in shown.items():
        if width != "desktop":
            continue
        if found["pageScroll"] > 0:
            problems.append(f"{page}: the page scrolls sideways by {found['pageScroll']} px")
        problems += [f"{page}: {w['element']} is {w['scrollWidth']} px in a {w['clientWidth']} px box "
                     f"(right edge {w['right']}, column {w['column']}): {w['text']}" for w in found["wide"]]
    assert not problems, report(problems)


def test_what_scrolls_sideways_on_a_phone_shows_that_it_does_and_commands_wrap(shown):
    """On a phone (whose scroll bars show only while a finger moves them), every box wider than it shows (a
    displayed equation, a results table, a Python block) has the edge shadows that say there is more; a command
    block (bash, console, text) wraps its long lines instead and never scrolls; an API page's parameter table reads
    down the page, a block a parameter (extra.css), never sideways. Before: the algorithms page's losses and every
    quickstart command stopped mid-line ("arg ma", "--env Cart") with nothing to say so, and each parameter's
    description was cut at the screen's edge (its table scrolled, 4 columns in 390 px)."""
    problems, seen = [], 0
    for (page, width), found in shown.items():
        if width != "phone":
            continue
        for box in found["scrollers"]:
            seen += 1
            if box["api"]:
                problems.append(f"{page}: an API parameter table scrolls ({box['scrollWidth']} px in {box['clientWidth']}): "
                                f"{box['text']}")
            elif box["element"] == "code" and not box["python"]:
                problems.append(f"{page}: a command block scrolls ({box['scrollWidth']} px in {box['clientWidth']}): "
                                f"{box['text']}")
            elif not box["cue"]:
                problems.append(f"{page}: {box['element']} scrolls ({box['scrollWidth']} px in {box['clientWidth']}) "
                                f"with no cue: {box['text']}")
    assert seen >= 5, seen  # the algorithms page's wide losses, the results' wide tables
    assert not problems, report(problems)


def test_the_copy_button_covers_no_code(shown):
    """The copy button on a code block sits clear of every character of the block, at both widths (on a phone it
    sat over the end of each long command's first line)."""
    problems = [f"{page} at {width}: the copy button covers {b['covered']!r} of: {b['text']}"
                for (page, width), found in shown.items() for b in found["copyButtons"] if b["covered"]]
    assert sum(len(found["copyButtons"]) for found in shown.values()) > 40
    assert not problems, report(problems)


def test_figures_load_lazily_and_a_width_fetches_only_its_own_drawings(shown):
    """Every figure is `loading="lazy"` (docs/hooks/lazy_images.py): a page fetches the figures near the screen as it
    loads, the rest as they are scrolled to, and never the drawing hidden at its width (the desktop drawing on a
    phone, the phone's on a desktop). Before: the results page fetched all its PNGs, both widths, ~7 MB on a phone."""
    problems = []
    for (page, width), found in shown.items():
        problems += [f"{page}: an image loads {how!r}" for how in found["loading"] if how != "lazy"]
        fetched_hidden = sorted(set(found["hidden"]) & set(found["pngs"]))
        if fetched_hidden:
            problems.append(f"{page} at {width}: fetched hidden drawings {fetched_hidden}")
    results = shown["results/cells/", "phone"]
    assert len(results["figures"]) >= 7, results["figures"]
    assert len(set(results["initialPngs"])) < len(results["figures"]), results["initialPngs"]  # lazy at load
    assert not problems, report(problems)


def test_the_results_page_opens_with_the_figure_then_the_claims_and_stays_short(shown):
    """The page a reader lands on (Results) shows the lead figure, then the paper's claims within the first screens
    (issue 67: they began at y ~1,305 at 1400 px and ~2,030 at 390 px, on a page 17,500 / 24,500 px long), and the
    per-cell detail lives on its own page."""
    limits = {"desktop": (1300, 4000), "phone": (1000, 6500)}  # (the claims' heading at most, the page at most)
    problems = []
    for width, (claims_at, page_at) in limits.items():
        found = shown["results/", width]
        top = next((y for hid, y in found["headings"].items() if hid.startswith("the-papers-claims")), None)
        if top is None or top > claims_at:
            problems.append(f"results at {width}: the claims start at y = {top} (at most {claims_at})")
        if found["pageHeight"] > page_at:
            problems.append(f"results at {width}: the page is {found['pageHeight']} px long (at most {page_at})")
    assert not problems, report(problems)


def test_no_page_scrolls_sideways_on_a_phone(shown):
    problems = [f"{page}: the page scrolls sideways by {found['pageScroll']} px"
                for (page, width), found in shown.items() if width == "phone" and found["pageScroll"] > 0]
    assert not problems, report(problems)


if __name__ == "__main__":  # screenshots: python tests/test_site_in_browser.py DIR
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        site = build_site(Path(tmp) / "site")
        with served(site) as base, browser() as devtools:
            for width in WIDTHS.values():
                for path in PAGES:
                    label = (path.strip("/").replace("/", "-") or "home") + f"-{width}"
                    found = visit(devtools, base + path, width, screenshot=out / label)
                    summary = {k: v for k, v in found.items() if k not in ("code", "requests")}
                    summary["code_min_px"] = min((c["px"] for c in found["code"]), default=None)
                    summary["other_hosts"] = [u for u in found["requests"] if "127.0.0.1" not in u and not u.startswith("data:")]
                    print(label, json.dumps(summary)[:3000])
