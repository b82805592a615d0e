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


def test_dockerfile_defaults_to_the_pinned_ray_image():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert f"ARG RAY_VERSION={pinned_ray_version()}" in text
    assert "ARG BASE_IMAGE=rayproject/ray:${RAY_VERSION}-py311-${FLAVOUR}\nFROM ${BASE_IMAGE}\n" in text


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


def test_the_image_pins_ray_runs_as_ray_and_keeps_the_bases_dependencies():
    """What docker/Dockerfile promises (tests/test_images.py builds and runs it)."""
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert text.index("\nARG RAY_VERSION\n") > text.index("FROM ${BASE_IMAGE}")  # declared again after FROM
    assert 'pip install --no-cache-dir -c /tmp/image-constraints.txt ".[cluster]"' in text
    assert "sh /tmp/check-base.sh" in text
    assert text.rstrip().splitlines()[-2:] == ["USER ray", 'CMD ["kappa-rllib", "--help"]']
    assert "COPY --chown=ray:users tune_configs ./tune_configs" in text
    for flavour in ("cpu", "gpu"):
        assert f"kappa-rllib:{project_version()}-ray{pinned_ray_version()}-{flavour}" in text


def test_the_base_check_names_each_missing_piece(tmp_path):
    """docker/check-base.sh on this machine's Python: a base without user `ray` fails with one line."""
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    fake_id = bin_dir / "id"  # a base with no user `ray`
    fake_id.write_text("#!/bin/sh\nexit 1\n")
    fake_id.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    run = subprocess.run(["sh", str(ROOT / "docker" / "check-base.sh"), "my/base:1"], capture_output=True,
                         text=True, env=env)
    assert run.returncode == 1
    assert run.stderr.strip() == ("kappa-rllib image: the base image my/base:1 has no user `ray` "
                                  "(docker/README.md, 'Base images')")
    (bin_dir / "python").unlink()
    old = bin_dir / "python"
    old.write_text("#!/bin/sh\necho 3.9\n")
    old.chmod(0o755)
    run = subprocess.run(["sh", str(ROOT / "docker" / "check-base.sh"), "my/base:1"], capture_output=True,
                         text=True, env=env)
    assert "has Python 3.9; the project's pins need 3.11" in run.stderr


def test_image_tags_agree_everywhere():
    """docker/README's tags; cluster/'s images are checked in tests/test_cluster_configs.py."""
    tag = f"{project_version()}-ray{pinned_ray_version()}"
    readme = (ROOT / "docker" / "README.md").read_text()
    assert f"kappa-rllib:{tag}-cpu" in readme and f"kappa-rllib:{tag}-gpu" in readme
