"""One Ray version everywhere: pyproject pin and docker images (cluster/: tests/test_cluster_configs.py)."""

import re
import tomllib
from pathlib import Path

import ray

ROOT = Path(__file__).resolve().parents[1]


def pinned_ray_version() -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if d.startswith("ray[")]
    match = re.fullmatch(r"ray\[rllib\]==([\d.]+)", pin)
    assert match, f"ray must be pinned exactly, got {pin!r}"
    return match.group(1)


def test_installed_ray_matches_the_pin():
    assert ray.__version__ == pinned_ray_version()


def test_dockerfile_uses_the_pinned_ray_image():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert f"ARG RAY_VERSION={pinned_ray_version()}" in text
    assert "FROM rayproject/ray:${RAY_VERSION}-py311-cpu" in text


def test_maths_modules_and_cli_help_load_neither_ray_nor_torch():
    import subprocess
    import sys

    code = (
        "import sys, kappa_rllib.schedule, kappa_rllib.dp, kappa_rllib.variant, kappa_rllib.shaping, "
        "kappa_rllib.returns, kappa_rllib.cli\n"
        "try:\n    kappa_rllib.cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'torch', 'gymnasium'))\n"
        "print('HEAVY', heavy[:5])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "HEAVY []" in out, out[-500:]


def project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_both_images_pin_ray_run_as_ray_and_keep_rays_dependencies():
    for name, flavour in (("Dockerfile", "cpu"), ("Dockerfile.gpu", "gpu")):
        text = (ROOT / "docker" / name).read_text()
        assert f"ARG RAY_VERSION={pinned_ray_version()}" in text
        assert f"FROM rayproject/ray:${{RAY_VERSION}}-py311-{flavour}\n" in text
        assert text.index("\nARG RAY_VERSION\n") > text.index("FROM rayproject")  # declared again after FROM
        assert 'pip install --no-cache-dir -c /tmp/image-constraints.txt ".[cluster]"' in text
        assert text.rstrip().splitlines()[-2:] == ["USER ray", 'CMD ["kappa-rllib", "--help"]']
        assert "COPY --chown=ray:users tune_configs ./tune_configs" in text
        assert f"kappa-rllib:{project_version()}-ray{pinned_ray_version()}-{flavour}" in text


def test_image_tags_agree_everywhere():
    """docker/README's tags; cluster/'s images are checked in tests/test_cluster_configs.py."""
    tag = f"{project_version()}-ray{pinned_ray_version()}"
    readme = (ROOT / "docker" / "README.md").read_text()
    assert f"kappa-rllib:{tag}-cpu" in readme and f"kappa-rllib:{tag}-gpu" in readme
