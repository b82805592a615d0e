"""The front door: a short README whose commands are CI's and whose links resolve, and a
documentation site (mkdocs.yml, docs/) that builds with no warning."""

import os
import re
import subprocess
import sys
from pathlib import Path

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


def test_the_documentation_site_builds_strictly(tmp_path):
    """`mkdocs build --strict`: every nav page exists, no broken link between pages, and the API
    reference renders from the docstrings (mkdocstrings)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("fisher_vector_product", "GraphedTDStep", "num_iterations", "KappaPIDQNConfig"):
        assert name in api, name
    assert (tmp_path / "site" / "results" / "minatar" / "README" / "index.html").exists() or \
        (tmp_path / "site" / "results" / "minatar" / "index.html").exists()
