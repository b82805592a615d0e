"""One Ray version everywhere: pyproject pin, docker image, cluster manifest."""

import re
import tomllib
from pathlib import Path

import ray
import yaml

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


def test_cluster_manifest_uses_the_pinned_ray():
    manifest = yaml.safe_load((ROOT / "cluster" / "ray-cluster.yaml").read_text())
    assert manifest["spec"]["rayVersion"] == pinned_ray_version()


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
    tag = f"{project_version()}-ray{pinned_ray_version()}"
    manifest = yaml.safe_load((ROOT / "cluster" / "ray-cluster.yaml").read_text())
    images = [c["image"] for g in [manifest["spec"]["headGroupSpec"], *manifest["spec"]["workerGroupSpecs"]]
              for c in g["template"]["spec"]["containers"]]
    assert images and all(i == f"kappa-rllib:{tag}-cpu" for i in images), images
    readme = (ROOT / "docker" / "README.md").read_text()
    assert f"kappa-rllib:{tag}-cpu" in readme and f"kappa-rllib:{tag}-gpu" in readme
