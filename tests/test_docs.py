"""The front door: a short README whose commands are CI's and whose links resolve, and a
documentation site (mkdocs.yml, docs/) that builds with no warning and shows a reader what they look
for first: the plots on the results pages, the paper's equations as maths, every export on the API
page, lists as lists. One strict build (module fixture) serves every site test."""

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


def test_the_readme_is_short_and_its_test_command_is_what_ci_runs():
    assert len(README.splitlines()) <= 200
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    commands = bash_blocks(README)
    assert commands[1] == ci  # the second command of "The two commands"
    assert commands[0].startswith("python3 -m venv .venv && .venv/bin/pip install -q -e . && ")


def test_every_local_link_of_the_readme_and_the_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
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
    api = page(site_dir, "api")
    for name in ("fisher_vector_product", "GraphedTDStep", "num_iterations", "KappaPIDQNConfig"):
        assert name in api, name
    assert (site_dir / "results" / "minatar" / "index.html").exists()
    assert (site_dir / "quickstart" / "index.html").exists()


RESULT_PAGES = ["results", "results/table2", "results/minatar", "results/adaptive", "algorithms", ""]


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
    appears on the built API page as a heading of its own, with its docstring's summary; the page's
    headings nest (module headings below the section titles, no level skipped)."""
    _, site_dir = site
    api = article(page(site_dir, "api"))
    api_text = text_of(api)
    for name, doc in export_docstrings().items():
        assert doc, f"{name} has no docstring"
        assert "```python" in doc, f"{name}'s docstring has no example"
        assert re.search(rf'<h[2-6][^>]*id="[\w.]*\b{name}"', api), f"{name}: no heading on the API page"
        summary = " ".join(doc.split("\n\n")[0].replace("`", "").split())
        assert summary in api_text, f"{name}: its docstring's summary is not on the API page: {summary}"
    headings = [(int(level), anchor) for level, anchor in re.findall(r'<h([1-6])[^>]*\bid="([^"]+)"', api)]
    levels = [level for level, _ in headings]
    skips = [(a, b) for a, b in zip(levels, levels[1:]) if b > a + 1]
    assert levels[0] == 1 and not skips, f"heading levels skip: {skips[:5]}"
    too_high = [anchor for level, anchor in headings if anchor.startswith("kappa_rllib") and level < 3]
    assert not too_high, f"generated headings at the level of the page's section titles: {too_high[:5]}"


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
    assert "javascripts/mathjax.js" in home and "mathjax@3" in home
    assert (site_dir / "javascripts" / "mathjax.js").is_file()


def test_the_heavy_result_data_stays_out_of_the_site(site):
    """docs/results/table2/trials/ (18 MB of slimmed trial JSON, for `kappa-rllib report`) is
    excluded from the build (mkdocs `exclude_docs`)."""
    _, site_dir = site
    assert (ROOT / "docs" / "results" / "table2" / "trials").is_dir()
    assert not (site_dir / "results" / "table2" / "trials").exists()
    assert not list(site_dir.rglob("result.json"))
    size = sum(p.stat().st_size for p in site_dir.rglob("*") if p.is_file())
    assert size < 10_000_000, f"the site is {size / 1e6:.1f} MB"


def test_the_experiments_page_names_every_grid_file():
    """docs/experiments.md is where a reader looks for the grids: every file under tune_configs/ is there."""
    page = (ROOT / "docs" / "experiments.md").read_text()
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tune_configs").rglob("*.py") if p.name != "__init__.py")
    assert files and [f for f in files if f"`{f}`" not in page] == []
