"""The front door: a short README whose commands are CI's and whose links resolve, and a
documentation site (mkdocs.yml, docs/) that builds with no warning and shows a reader what they look
for first: the plots on the results pages, the paper's equations as maths, every export on the API
pages, lists as lists. One strict build (module fixture) serves every site test."""

import ast
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def shell_line(block: str) -> str:
    """A command wrapped over lines with backslashes, as the shell reads it: one line."""
    return re.sub(r"\s*\\\n\s*", " ", block)


def test_the_readme_is_short_and_its_test_command_is_what_ci_runs():
    assert len(README.splitlines()) <= 200
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    commands = bash_blocks(README)
    assert shell_line(commands[1]) == ci  # the second command of "The two commands"
    assert shell_line(commands[0]).startswith("python3 -m venv .venv && .venv/bin/pip install -q -e . -c constraints.txt && ")
    # a code host shows ~90 characters of a code line: the README's code lines wrap before that
    code = commands + re.findall(r"```python\n(.*?)```", README, flags=re.S)
    long = [line for block in code for line in block.splitlines() if len(line) > 90]
    assert not long, long


def test_every_local_link_of_the_readme_and_the_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        text = page.read_text()  # markdown links and images, and HTML's src and srcset (the README's <picture>)
        for target in [*re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text), *re.findall(r'\b(?:src|srcset)="([^"]+)"', text)]:
            if re.match(r"[a-z]+://", target):
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"
            checked += 1
    assert checked >= 10


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """`mkdocs build --strict` into a temporary folder, once for the module: (the build's result, the site)."""
    out_dir = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out_dir)],
                           cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    if build.returncode != 0:  # every site test would fail on a missing file: say why once
        pytest.fail(f"mkdocs build --strict failed:\n{build.stderr[-3000:]}")
    return build, out_dir


def page(site_dir: Path, name: str) -> str:
    return (site_dir / name / "index.html" if name else site_dir / "index.html").read_text()


def article(page_html: str) -> str:
    """The page's own content, without the theme's navigation."""
    return page_html[page_html.index("<article"):page_html.rindex("</article>")]


def text_of(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def test_the_documentation_site_builds_strictly(site):
    """`mkdocs build --strict`: every nav page exists, no broken link between pages, and the API
    reference renders from the docstrings (mkdocstrings)."""
    build, site_dir = site
    assert build.returncode == 0, build.stderr[-3000:]
    api = " ".join(page(site_dir, name) for name in API_PAGES)
    for name in ("KappaDQNTorchLearner", "repair_state", "num_iterations", "KappaPIDQNConfig"):
        assert name in api, name
    assert (site_dir / "results" / "minatar" / "index.html").exists()
    assert (site_dir / "quickstart" / "index.html").exists()


# The API reference (docs/api/): an index, then one generated page per area
API_PAGES = ["api", "api/algorithms", "api/schedule", "api/running", "api/grids"]
RESULT_PAGES = ["results", "results/cells", "results/table2", "results/kvi_ablation", "results/minatar", "results/adaptive", "algorithms", ""]


def test_the_results_pages_show_their_plots_and_every_plot_is_in_the_site(site):
    """Each results page (and the algorithms page and home) embeds learning curves as <img>, each
    image file is in the built site where the page points, and every PNG under docs/results/ is
    shown on some page."""
    _, site_dir = site
    shown = set()
    for name in RESULT_PAGES:
        page_dir = site_dir / name
        sources = re.findall(r'<img[^>]*\bsrc="([^"]+)"', article(page(site_dir, name)))
        assert sources, f"no <img> on {name or 'home'}"
        for src in sources:
            image = (page_dir / src).resolve()
            assert image.is_file(), f"{name or 'home'} shows {src}, not in the site"
            shown.add(image.relative_to(site_dir.resolve()).as_posix())
    pngs = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs" / "results").rglob("*.png")}
    assert pngs and not pngs - shown, f"plots in docs/results/ that no page shows: {sorted(pngs - shown)}"


LIST_RUN_TOGETHER = re.compile(r"\n\s*(?:[-*+]|\d+\.) \S")


def test_no_paragraph_holds_a_list_run_together(site):
    """Python-Markdown needs a blank line before a list; without it the items render as one
    paragraph with literal " - " in it. No <p> of any page (docstrings included) may hold one."""
    _, site_dir = site
    found = []
    for html_file in sorted(site_dir.rglob("*.html")):
        for paragraph in re.findall(r"<p>(.*?)</p>", html_file.read_text(), flags=re.S):
            if LIST_RUN_TOGETHER.search(paragraph):
                found.append(f"{html_file.relative_to(site_dir)}: {text_of(paragraph)[:80]}")
    assert not found, "lists rendered as paragraphs:\n" + "\n".join(found)


def export_docstrings() -> dict[str, str]:
    """Each name of kappa_rllib.__all__ and its docstring, read from the source (no Ray, no torch)."""
    import kappa_rllib

    docs = {}
    for name in kappa_rllib.__all__:
        if name in kappa_rllib._LAZY:  # a class of an algorithm package: in one of its modules
            files = sorted((ROOT / Path(*kappa_rllib._LAZY[name].split("."))).rglob("*.py"))
        else:  # a function of the package itself
            files = [ROOT / "kappa_rllib" / "__init__.py"]
        for path in files:
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
                    docs.setdefault(name, ast.get_docstring(node) or "")
    assert set(docs) == set(kappa_rllib.__all__), set(kappa_rllib.__all__) - set(docs)
    return docs


def test_the_api_page_shows_every_export_with_its_docstring_and_an_example(site):
    """Every name `kappa_rllib` exports has a docstring with an example (a fenced code block) and
    appears on the built "Algorithms and configs" page as a heading of its own, with its docstring's
    summary; every API page's headings nest (module headings below the section titles, no level
    skipped)."""
    _, site_dir = site
    api = article(page(site_dir, "api/algorithms"))
    api_text = text_of(api)
    for name, doc in export_docstrings().items():
        assert doc, f"{name} has no docstring"
        assert "```python" in doc, f"{name}'s docstring has no example"
        assert re.search(rf'<h[2-6][^>]*id="[\w.]*\b{name}"', api), f"{name}: no heading on the API page"
        summary = " ".join(doc.split("\n\n")[0].replace("`", "").split())
        assert summary in api_text, f"{name}: its docstring's summary is not on the API page: {summary}"
    for name in API_PAGES:
        content = article(page(site_dir, name))
        headings = [(int(level), anchor) for level, anchor in re.findall(r'<h([1-6])[^>]*\bid="([^"]+)"', content)]
        levels = [level for level, _ in headings]
        skips = [(a, b) for a, b in zip(levels, levels[1:]) if b > a + 1]
        assert levels[0] == 1 and not skips, f"{name}: heading levels skip: {skips[:5]}"
        too_high = [anchor for level, anchor in headings if anchor.startswith("kappa_rllib") and level < 3]
        assert not too_high, f"{name}: generated headings at the level of its section titles: {too_high[:5]}"


def test_the_api_reference_documents_the_modules_the_guides_use_and_no_internal_helpers(site):
    """The API pages (every page under api/ in the site) document the modules the guides send a
    reader to (run folders, checkpoints, presets), each as a module heading with its members; they
    show no internal helper (config_mixins' `check_int`, `set_given`, `SettingProblems`) and no
    private name; each generated page shows typed signatures (`name: type`, `-> type`)."""
    _, site_dir = site
    pages = {f.parent.relative_to(site_dir).as_posix(): article(f.read_text())
             for f in sorted((site_dir / "api").rglob("index.html"))}
    anchors = {a for content in pages.values() for a in re.findall(r'<h[2-6][^>]*\bid="(kappa_rllib[\w.]*)"', content)}
    for module in ("kappa_rllib.runs", "kappa_rllib.checkpoints", "kappa_rllib.presets"):
        assert module in anchors, f"{module}: no module heading on the API pages"
        assert any(a.startswith(module + ".") for a in anchors), f"{module}: none of its members documented"
    for helper in ("check_int", "set_given"):
        shown = [name for name, content in pages.items() if re.search(rf"\b{helper}\b", text_of(content))]
        assert not shown, f"internal helper {helper} shown on {shown}"
    internals = sorted(a for a in anchors if a.split(".")[-1] in ("check_int", "set_given", "SettingProblems"))
    assert not internals, f"internal helpers documented: {internals}"  # (SettingProblems may name a type)
    private = sorted(a for a in anchors if re.search(r"\._[a-z]", a))
    assert not private, f"private names documented: {private[:5]}"
    assert set(pages) == set(API_PAGES), sorted(pages)
    for name in API_PAGES[1:]:
        signatures = [html.unescape(re.sub(r"<[^>]+>", "", s)) for s in re.findall(r'<div class="[^"]*doc-signature[^"]*">(.*?)</div>', pages[name], flags=re.S)]
        typed = [s for s in signatures if " -> " in s and re.search(r"\w: \w", s)]
        assert len(typed) >= 3, f"{name}: {len(typed)} typed signatures of {len(signatures)}"


def _parameter_defaults(content: str) -> dict[str, list[str]]:
    """{parameter name: the Default cells of every parameter table row naming it} on an API page."""
    found: dict[str, list[str]] = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", content, flags=re.S):
        cells = [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split())
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
        if len(cells) == 4:  # name, type, description, default
            found.setdefault(cells[0], []).append(cells[3])
    return found


def test_the_api_reference_shows_each_training_settings_real_default(site):
    """issue 67 (9): every `.training(...)` parameter read "Default None" (RLlib's "not given"); the page now shows
    the config's own default (docs/hooks/real_defaults.py), the kappa settings one per family. The numbers are read
    from the config classes here, so a changed default changes what the test expects."""
    from kappa_rllib import KappaPIDQNConfig, TRPOConfig, defaults

    _, site_dir = site
    shown = _parameter_defaults(article(page(site_dir, "api/algorithms")))
    dqn, trpo = KappaPIDQNConfig(), TRPOConfig()
    expected = {"env_steps_per_update": repr(dqn.env_steps_per_update), "learner_thread": repr(dqn.learner_thread),
                "max_kl": repr(trpo.max_kl), "lambda_": repr(trpo.lambda_), "kappa": repr(defaults.DQN["kappa"]),
                "c_fa": repr({f: getattr(defaults, f)["c_fa"] for f in ("DQN", "TRPO", "PPO", "APPO")}),
                "naive_schedule": "False"}
    for name, default in expected.items():
        assert shown.get(name) and all(d == default for d in shown[name]), (name, shown.get(name), default)
    import inspect

    from kappa_rllib import KappaPIAPPOConfig, KappaPIPPOConfig, KappaPITRPOConfig
    from kappa_rllib.algorithms.config_mixins import KappaConfigMixin

    own = {name for cls in (KappaPIDQNConfig, TRPOConfig, KappaPITRPOConfig, KappaPIPPOConfig, KappaPIAPPOConfig,
                            KappaConfigMixin) for klass in cls.__mro__ if "training" in vars(klass)
           and klass.__module__.startswith("kappa_rllib") for name in inspect.signature(klass.training).parameters}
    nones = sorted(name for name in own if any(d in ("None", "NotProvided") for d in shown.get(name, [])))
    assert len(own & set(shown)) > 25 and not nones, nones


def test_the_papers_equations_are_rendered_as_maths(site):
    """pymdownx.arithmatex leaves the TeX in <span|div class="arithmatex"> for MathJax (configured by
    docs/javascripts/mathjax.js and loaded on every page); the ASCII forms are gone."""
    _, site_dir = site
    algorithms = article(page(site_dir, "algorithms"))
    assert re.search(r'<div class="arithmatex">', algorithms), "no displayed equation on the algorithms page"
    assert len(re.findall(r'<span class="arithmatex">', algorithms)) >= 10
    for name in ("", "algorithms", "paper-settings", "quickstart"):
        content = article(page(site_dir, name))
        assert 'class="arithmatex"' in content, name
        for ascii_maths in ("xi_kappa^N_kappa", "xi_kappa = gamma", "r + gamma (1 - kappa) V(s')"):
            assert ascii_maths not in content, f"{name or 'home'}: ASCII maths {ascii_maths!r}"
    assert r"\xi_\kappa^{N_\kappa} = C_{\text{FA}}" in algorithms  # Eq. 8, as TeX for MathJax
    home = page(site_dir, "")
    assert "javascripts/mathjax.js" in home
    assert (site_dir / "javascripts" / "mathjax.js").is_file()


def test_the_heavy_result_data_stays_out_of_the_site(site):
    """docs/results/table2/trials/ (~80 MB of slimmed trial JSON, for `kappa-rllib report`) is
    excluded from the build (mkdocs `exclude_docs`). The site itself is ~16.3 MB: MathJax 2.3 MB, the theme's
    scripts and search ~2.5 MB, the learning curves (two-panel figures of up to 0.6 MB, one per Table 2 task)
    most of the rest, the phone's drawings (`*_narrow.png`) 2.9 MB of it; the kappa-VI ablation's one-panel
    figure ~0.5 MB."""
    _, site_dir = site
    assert (ROOT / "docs" / "results" / "table2" / "trials").is_dir()
    assert not (site_dir / "results" / "table2" / "trials").exists()
    assert not list(site_dir.rglob("result.json"))
    size = sum(p.stat().st_size for p in site_dir.rglob("*") if p.is_file())
    assert size < 17_000_000, f"the site is {size / 1e6:.1f} MB"


def test_the_experiments_page_names_every_grid_file():
    """docs/experiments.md is where a reader looks for the grids: every file under tune_configs/ is there."""
    page = (ROOT / "docs" / "experiments.md").read_text()
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tune_configs").rglob("*.py") if p.name != "__init__.py")
    assert files and [f for f in files if f"`{f}`" not in page] == []



# ----------------------------------------------------------------------------------- as a reader sees it
# At a 1400 px window mkdocs-material's text column is ~690 px wide (61rem grid of 20 px less two 12.1rem
# sidebars and the content's margins); a code line holds 80 characters of its monospace font there.
COLUMN_PX = 690
MAX_CODE_CHARS = 80
MIN_FONT_PX = 9


def site_pages(site_dir: Path):
    """(name, html) of every page of the site that has content, the generated API pages (api/*/) left
    out (their code is the docstrings' examples and the signatures, rendered by mkdocstrings)."""
    for html_file in sorted(site_dir.rglob("index.html")):
        name = html_file.parent.relative_to(site_dir).as_posix()
        text = html_file.read_text()
        if "<article" in text and not name.startswith("api/"):
            yield ("" if name == "." else name), text


def test_no_code_line_is_wider_than_the_column(site):
    """Every line of a code block fits the text column (long commands wrapped with ` \\` continuation
    lines); only program output (```console blocks) may scroll sideways."""
    _, site_dir = site
    wide = []
    for name, text in site_pages(site_dir):
        for cls, block in re.findall(r'<div class="([^"]*)"><pre[^>]*>(.*?)</pre>', article(text), flags=re.S):
            for raw in block.split("\n"):
                line = html.unescape(re.sub(r"<[^>]+>", "", raw))
                if re.match(r'(?:<span></span>)?(?:<code>)?<span class="go">', raw):
                    continue  # a line of program output (```console): printed as it is, may scroll
                if len(line) > MAX_CODE_CHARS:
                    wide.append(f"{name or 'home'} ({len(line)}): {line[:60]}")
    assert not wide, f"{len(wide)} code lines wider than {MAX_CODE_CHARS} characters:\n" + "\n".join(wide[:20])


def png_size_and_dpi(path: Path) -> tuple[int, int, float]:
    """(width px, height px, dots per inch from the pHYs chunk; 72 if none) of a PNG."""
    import struct

    data = path.read_bytes()
    width, height = struct.unpack(">II", data[16:24])
    at = data.find(b"pHYs")
    dpi = 72.0
    if at > 0:
        x, _, unit = struct.unpack(">IIB", data[at + 4:at + 13])
        dpi = x * 0.0254 if unit == 1 else 72.0
    return width, height, dpi


def test_every_figure_is_legible_at_the_width_shown_and_opens_full_size(site):
    """A figure's smallest text (legends, ticks: kappa_rllib.report.plots.SMALLEST_FONT_PT at PLOT_DPI;
    a figure drawn before at 100 dpi had 7 pt legends) renders at >= 9 px at the width the page shows
    it: its pixel width, or less where the column or a width attribute scales it down. Every figure is
    a link to itself full size (glightbox)."""
    from kappa_rllib.report import plots

    _, site_dir = site
    small, unlinked, seen = [], [], 0
    for name, text in site_pages(site_dir):
        content = article(text)
        for tag in re.findall(r"<img[^>]*>", content):
            src = re.search(r'\bsrc="([^"]+)"', tag).group(1)
            if not src.endswith(".png"):
                continue
            seen += 1
            path = (site_dir / name / src).resolve()
            width, _, dpi = png_size_and_dpi(path)
            font_pt = plots.SMALLEST_FONT_PT if round(dpi) == plots.PLOT_DPI else 7
            shown = min(width, COLUMN_PX)
            percent = re.search(r'\bwidth="(\d+)%"', tag)
            if percent:
                shown = min(width, COLUMN_PX * int(percent.group(1)) / 100)
            font_px = font_pt * dpi / 72 * shown / width
            if font_px < MIN_FONT_PX:
                small.append(f"{name or 'home'}: {src} at {shown:.0f} of {width} px: {font_px:.1f} px text")
        for src in re.findall(r'<img[^>]*\bsrc="([^"]+\.png)"', content):
            if not re.search(rf'<a[^>]*class="glightbox"[^>]*href="{re.escape(src)}"', content):
                unlinked.append(f"{name or 'home'}: {src}")
    assert seen >= 15
    assert not small, "figures whose text is too small where they are shown:\n" + "\n".join(small)
    assert not unlinked, "figures that do not open full size:\n" + "\n".join(unlinked)


def test_long_pages_are_organised_under_headings_not_bold_labels(site):
    """A page of more than 2,000 words has sections (>= 3 headings below its title, so its contents on
    the right list them) and no paragraph that is only a bold label ("**What agrees.**") standing in
    for a heading."""
    _, site_dir = site
    found = []
    for name, text in site_pages(site_dir):
        content = article(text)
        words = len(text_of(content).split())
        if words <= 2000:
            continue
        headings = len(re.findall(r"<h[23][ >]", content))
        if headings < 3:
            found.append(f"{name}: {words} words, {headings} section headings")
        for label in re.findall(r"<p><strong>([^<]{1,80})</strong>[.:]?\s*</p>", content):
            found.append(f"{name}: a bold label instead of a heading: {label!r}")
    assert not found, "\n".join(found[:20])


def test_the_maths_is_served_with_the_site():
    """MathJax is vendored (docs/javascripts/mathjax/) and loaded from the site itself: no CDN, so the
    maths renders offline."""
    config = (ROOT / "mkdocs.yml").read_text()
    scripts = re.search(r"extra_javascript:\n((?:\s+- .*\n)+)", config).group(1).split()
    scripts = [s for s in scripts if s != "-"]
    assert "javascripts/mathjax/tex-svg-full.js" in scripts
    assert not [s for s in scripts if "://" in s], scripts
    assert (ROOT / "docs" / "javascripts" / "mathjax" / "tex-svg-full.js").stat().st_size > 500_000


USER_PAGES = [p for p in sorted((ROOT / "docs").rglob("*.md"))
              if "trials" not in p.parts and p.name != "layout.md"]
COMMIT_HASH = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}(?![\w-])")
HISTORY = re.compile(r"\b(the issue'?s?|before this release|this tree against|at [0-9a-f]{7}\b)", re.I)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
TABLE_RULE = re.compile(r"^\|[ :-]*-[-| :]*\|\s*$", re.M)  # the |---|---| line under a table's header


def test_user_pages_hold_no_commit_hashes_or_dated_history():
    """The site says what is, in the present tense: no commit hash, no issue talk, and a date only
    where a measurement or an experiment says when it ran: once per table, so a section holds no more
    dates than tables (one for a section that measures in prose), and no line lists two runs."""
    found = []
    for path in USER_PAGES:
        text = path.read_text()
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for m in COMMIT_HASH.finditer(prose):
            found.append(f"{path.relative_to(ROOT)}: commit hash {m.group(0)}")
        for m in HISTORY.finditer(prose):
            found.append(f"{path.relative_to(ROOT)}: {m.group(0)!r}")
        for section in re.split(r"\n(?=#{1,3} )", prose):
            dates = len(DATE.findall(section))
            tables = len(TABLE_RULE.findall(section))
            if dates > max(1, tables):
                found.append(f"{path.relative_to(ROOT)}: {dates} dates for {tables} table(s) under "
                             f"{section.splitlines()[0][:60]!r}")
        for line in prose.splitlines():
            if len(DATE.findall(line)) > 1:
                found.append(f"{path.relative_to(ROOT)}: a line listing dated runs: {line[:80]}")
    assert not found, "\n".join(found[:20])


def test_the_results_page_opens_with_the_figure_and_the_claims_then_every_cell_from_a_report(site):
    """docs/results.md opens with `report`'s figure against the paper, then one table of the paper's claims (one
    short row each, the Atari/DQN claim included, each with its probability of improvement), then what ran and what
    did not (HumanoidStandup and Atari named); every published cell is on its own page (docs/results/cells.md), under
    a heading per experiment, each beside the paper's: every number in a `here` column is in a report file of that
    experiment. The page a reader lands on stays short (issue 67: the claims began 2.4 phone screens down)."""
    text = (ROOT / "docs" / "results.md").read_text()
    body = text.split("\n", 1)[1].lstrip()
    assert body.startswith("![") and "(results/table2/vs_paper.png)" in body.split("\n", 1)[0]
    claims = text[text.index("## The paper's claims, here"):text.index("## What ran, and what did not")]
    claim_rows = [r for r in claims.splitlines() if r.startswith("| ") and not r.startswith("| the paper")]
    assert len(claim_rows) == 6 and any("lower discount" in r for r in claim_rows)
    assert any("DQN" in r.split("|")[1] for r in claim_rows)
    assert all(re.search(r"\d\.\d\d \[\d\.\d\d, \d\.\d\d\]", r) and len(r) < 260 for r in claim_rows), claim_rows
    ran = text[text.index("## What ran, and what did not"):]
    assert "HumanoidStandup" in ran.split("##")[1] and "Atari" in ran.split("##")[1]
    assert len(text.splitlines()) < 90 and "## The cells" not in text
    reports = {
        "Table 2": ["results/table2/table.md", "results/table2/improvement.md"],
        "Claim 2": ["results/table2/improvement.md"],
        "Against": ["results/table2/table.md", "results/table2/improvement.md"],
        "κ-VI-TRPO": ["results/table2/table.md", "results/table2/improvement.md"],
        "Swimmer": ["results/table2/table.md", "results/table2/improvement.md"],
        "HumanoidStandup": ["results/table2/table.md", "results/table2/improvement.md"],
        "Lowering": ["results/table2/lower_gamma.md", "results/minatar/1m/lower_gamma.md"],
        "Ant": ["results/table2/ant_level/table.md"],
        "MinAtar at 250k": ["results/minatar/table.md"],
        "MinAtar Breakout at 1M": ["results/minatar/1m/table.md"],
        "The small suite": ["results/small_suite_mujoco_table.md"],
        "Adaptive": ["results/adaptive/adaptive.md"],
    }
    cells_page = (ROOT / "docs" / "results" / "cells.md").read_text()
    every = cells_page[cells_page.index("## The cells"):]
    sections = re.findall(r"\n### (.+?)\n(.*?)(?=\n##)", every + "\n##", flags=re.S)
    assert len(sections) >= 10
    checked = 0
    for heading, section in sections:
        files = next(v for k, v in reports.items() if heading.startswith(k))
        published = " ".join((ROOT / "docs" / f).read_text() for f in files if (ROOT / "docs" / f).exists())
        rows = [r.split("|")[1:-1] for r in section.splitlines() if r.startswith("| ")][1:]  # (no header)
        assert rows, heading
        for cells in rows:
            for number in re.findall(r"-?\d+\.\d+", cells[2]):
                assert number in published, f"{heading}: {number} is in no report file of it ({files})"
                checked += 1
    assert checked >= 40
    _, site_dir = site
    assert 'href="table2/' in article(page(site_dir, "results")) and 'href="cells/' in article(page(site_dir, "results"))


def test_cluster_and_image_guides_are_pages_of_the_site(site):
    """cluster/README.md and docker/README.md are included (one source of truth) as pages in the nav."""
    _, site_dir = site
    cluster = text_of(article(page(site_dir, "cluster")))
    docker = text_of(article(page(site_dir, "docker")))
    assert "ray job submit" in cluster and "kubectl apply" in cluster
    assert "docker/build.sh" in docker
    nav = page(site_dir, "")
    assert 'href="cluster/"' in nav and 'href="docker/"' in nav and 'href="engineering/"' in nav


def test_report_pages_have_titles_that_name_their_experiment(site):
    """Each generated report page (table.md, iqm.md, ... of docs/results/) has its own title."""
    _, site_dir = site
    titles = {}
    for html_file in (site_dir / "results").rglob("index.html"):
        title = re.search(r"<title>(.*?)</title>", html_file.read_text()).group(1)
        titles.setdefault(title, []).append(html_file.parent.relative_to(site_dir).as_posix())
    shared = {t: p for t, p in titles.items() if len(p) > 1}
    assert not shared, f"report pages sharing a title: {shared}"


# A time of day ("04:46", "12:05:33"; a port or a URL is not one, and a ratio of two-digit terms, which
# would read as one, is written "1 to 10" or in code), and the words of a lab notebook
TIME_OF_DAY = re.compile(r"(?<![\w:/.])(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?![\w:/])")
NOTEBOOK_WORDS = re.compile(r"\b(today|tonight|yesterday|this (?:morning|afternoon|evening)|of the day"
                            r"|in (?:two|three|four|five|several|\d+) sessions|(?:inside|in|within) (?:a|one|this|each) session"
                            r"|beside (?:a|the) CI run|beside (?:this project's )?test(?:s| suite| runs?)|the machine's install then"
                            r"|an earlier day's|renamed on \d{4}-\d\d-\d\d|before the fix)\b", re.I)


def prose_of(page_html: str) -> str:
    """The text a page reads as, without its code (blocks and inline) and its maths."""
    content = re.sub(r"<pre\b.*?</pre>", " ", article(page_html), flags=re.S)
    content = re.sub(r"<code\b.*?</code>", " ", content, flags=re.S)
    content = re.sub(r'<(span|div) class="arithmatex">.*?</\1>', " ", content, flags=re.S)
    return text_of(content)


def test_built_pages_speak_in_the_present_tense_with_no_time_of_day(site):
    """The site says what is. A table of measurements names its date, machine and command once; the hour
    a run started ("2026-12-02 04:46", "py-spy at N = 1,000, 03:24"), the runs "of the day" and
    "today's" anything belong to git history, not to a reader's page. Every built page (the API pages'
    docstrings included), its code and maths left out."""
    _, site_dir = site
    found = []
    for html_file in sorted(site_dir.rglob("index.html")):
        text = html_file.read_text()
        if "<article" not in text:
            continue
        name = html_file.parent.relative_to(site_dir).as_posix()
        prose = prose_of(text)
        for rx, what in ((TIME_OF_DAY, "a time of day"), (NOTEBOOK_WORDS, "lab-notebook words")):
            for m in rx.finditer(prose):
                found.append(f"{name}: {what} {m.group(0)!r}: ...{prose[max(0, m.start() - 60):m.end() + 30]}...")
    assert not found, f"{len(found)} found:\n" + "\n".join(found[:30])
