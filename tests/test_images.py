"""The image of docker/Dockerfile, built and run: the CLI inside it, and a grid on a cluster made of two
containers of it (a head and a worker) that loses its worker mid-grid.

The image is built by `docker/build.sh cpu --debian-base` (a local Debian base: Ray's images cannot be
pulled here) with podman or docker, whichever is installed. Containers run on the host network over
loopback with distinct ports per Ray node and Ray's token authentication, as the two-process cluster of
tests/test_cluster.py; results reach the host through a folder mounted at the same path in both
containers. Every container carries a label of this run; the fixture removes them all, and checks that
none is left, whether the tests passed or not.

Without a container engine, or with one that cannot run a container (a docker CLI whose daemon is down or
unreachable: `docker info` fails), these tests skip with the reason, unless KAPPA_IMAGE_TESTS=required (.ci/run
sets it after installing podman): then they fail with it.
"""

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import pytest

from nodes import free_port, listening, trial_rows

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the host's `ray` and `kappa-rllib`, as on a user's laptop
ENGINE = os.environ.get("KAPPA_ENGINE") or shutil.which("podman") or shutil.which("docker")
GRID = "/opt/kappa-rllib/tune_configs/small/container_check.py"  # inside the image
T = 6_000  # the grid's env steps per trial
EXPECTED = [(0.68, 0.1), (0.68, 0.2), (0.84, 0.1), (0.84, 0.2)]

# one Ray cluster at a time under pytest -n (pyproject.toml), with tests/test_cluster.py
pytestmark = pytest.mark.xdist_group("clusters")

REQUIRED = os.environ.get("KAPPA_IMAGE_TESTS") == "required"


def engine_problem(engine_bin: str | None, timeout: float = 60) -> str | None:
    """Why `engine_bin` cannot run a container here, or None if it can: not installed, or installed with no engine
    behind it (a docker CLI whose daemon is down: Docker Desktop closed, a CLI for a remote host that is not
    reachable; a podman that cannot start its machine or read its storage), as its `info` (which asks the
    engine itself, not the client) says."""
    if engine_bin is None:
        return "no container engine (podman or docker); .ci/run installs podman"
    try:
        info = subprocess.run([engine_bin, "info"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{engine_bin} is installed but cannot run a container: `{engine_bin} info` failed ({e})"
    if info.returncode != 0:
        said = " ".join((info.stderr.strip() or info.stdout.strip()).splitlines()[-3:])[:300]
        return (f"{engine_bin} is installed but cannot run a container: `{engine_bin} info` exited "
                f"{info.returncode}: {said or 'no output'}")
    return None


@pytest.fixture(scope="module")
def engine_runs():
    """The engine can run a container, or each test that needs one skips with the reason (fails with it under
    KAPPA_IMAGE_TESTS=required)."""
    problem = engine_problem(ENGINE)
    if problem is not None and REQUIRED:
        pytest.fail(f"KAPPA_IMAGE_TESTS=required: {problem}", pytrace=False)
    if problem is not None:
        pytest.skip(f"{problem} (KAPPA_IMAGE_TESTS=required makes this a failure)")
    return ENGINE


def pinned(name: str) -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    if name == "version":
        return project["version"]
    (pin,) = [d for d in project["dependencies"] if d.startswith("ray[")]
    return pin.split("==")[1]


IMAGE = f"kappa-rllib:{pinned('version')}-ray{pinned('ray')}-cpu"


def engine(*args, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    assert ENGINE, "KAPPA_IMAGE_TESTS=required but neither podman nor docker is installed"
    run = subprocess.run([ENGINE, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert not check or run.returncode == 0, f"{ENGINE} {' '.join(map(str, args))}: {run.stderr[-2000:]}"
    return run


@pytest.fixture(scope="module")
def image(engine_runs, tmp_path_factory):
    """docker/build.sh, as a user runs it; the dependency layer is cached between runs."""
    log = tmp_path_factory.mktemp("build") / "build.log"
    start = time.monotonic()
    with open(log, "w") as out:
        build = subprocess.run(["bash", str(ROOT / "docker" / "build.sh"), "cpu", "--debian-base"],
                               stdout=out, stderr=subprocess.STDOUT, timeout=1500)
    assert build.returncode == 0, log.read_text()[-4000:]
    print(f"[images] {IMAGE} built in {time.monotonic() - start:.0f} s")
    return IMAGE


class Containers:
    """Containers started by these tests, each labelled with this run's id."""

    def __init__(self):
        self.label = f"kappa-rllib-test={uuid.uuid4().hex[:12]}"
        self.token = secrets.token_hex(32)

        self.root_dirs: list[str] = []  # each container's root file system, mounted while it exists

    def run(self, name: str, *args: str, mounts=(), image: str = IMAGE) -> str:
        """A container started in the background; its id."""
        volumes = [f"--volume={m}:{m}" for m in mounts]
        container = engine("run", "-d", f"--name={name}-{self.label[-12:]}", f"--label={self.label}",
                           "--network=host", "--shm-size=512m", "--env=RAY_AUTH_MODE=token",
                           f"--env=RAY_AUTH_TOKEN={self.token}", "--env=RAY_USAGE_STATS_ENABLED=0", *volumes,
                           image, *args, timeout=300).stdout.strip()
        root = engine("inspect", "--format={{.GraphDriver.Data.MergedDir}}", container, check=False).stdout.strip()
        if root:
            self.root_dirs.append(root)
        return container

    def output(self, container: str, timeout: float = 300) -> str:
        """What a container printed, once it has exited 0."""
        assert engine("wait", container, timeout=timeout).stdout.strip() == "0", engine("logs", container).stderr
        return engine("logs", container).stdout

    def ids(self) -> list[str]:
        return engine("ps", "-aq", f"--filter=label={self.label}").stdout.split()

    def remove_all(self) -> None:
        ids = self.ids()
        if ids:
            engine("rm", "-f", "-t", "0", *ids, timeout=120, check=False)


@pytest.fixture
def containers(engine_runs):
    """Removes every container of the test, then checks that none is left, nor mounted."""
    made = Containers()
    try:
        yield made
    finally:
        made.remove_all()
        assert made.ids() == [], f"containers left behind: {made.ids()}"
        mounts = Path("/proc/self/mounts").read_text()
        assert made.root_dirs and not [d for d in made.root_dirs if d in mounts], "root file systems left mounted"


def test_the_image_runs_the_cli_as_non_root_with_the_pinned_ray(image, containers):
    out = containers.output(containers.run(
        "cli", "sh", "-c", "id -u; ray --version; kappa-rllib --help; kappa-rllib train --algo kappa-pi-dqn "
        "--env CartPole-v1 --kappa 0.84 --c-fa 0.2 --dry-run"))
    uid, ray_version, *rest = out.splitlines()
    assert int(uid) != 0
    assert ray_version == f"ray, version {pinned('ray')}"
    text = "\n".join(rest)
    assert "{train,compare,evaluate,tune,report,repeat}" in text
    assert "[kappa-pi-dqn] env CartPole-v1, kappa 0.84, C_FA 0.2" in text


def ray_status(gcs: int, token: str) -> str:
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([str(BIN / "ray"), "status", f"--address=127.0.0.1:{gcs}"], capture_output=True,
                          text=True, env=env, timeout=60).stdout


def wait(ready, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(1)


def test_a_grid_on_a_head_and_a_worker_container_finishes_when_the_worker_is_lost(image, containers, tmp_path):
    """`ray job submit` from the host to a head container; the worker container is killed once one of
    its trials has reported; Tune retries that trial on the head, from its checkpoint, and every trial
    ends at T; the results are on the host, and `kappa-rllib report` reads them there."""
    results = tmp_path / "results"
    results.mkdir()
    results.chmod(0o777)  # the containers' user `ray` writes here
    gcs, dashboard, client = free_port(), free_port(), free_port()
    common = ["--block", "--num-cpus=1", "--object-store-memory=200000000", "--disable-usage-stats",
              "--node-ip-address=127.0.0.1"]
    containers.run("head", "ray", "start", "--head", f"--port={gcs}", "--dashboard-host=127.0.0.1",
                   f"--dashboard-port={dashboard}", f"--ray-client-server-port={client}",
                   f"--dashboard-agent-listen-port={free_port()}", *common, mounts=[results])
    wait(lambda: listening(gcs), "the head container's GCS", 120)
    worker = containers.run("worker", "ray", "start", f"--address=127.0.0.1:{gcs}",
                            f"--dashboard-agent-listen-port={free_port()}", *common, mounts=[results])
    active = lambda: ray_status(gcs, containers.token).split("Pending:")[0]
    wait(lambda: len(set(re.findall(r"node_([0-9a-f]{56})", active()))) == 2, "both containers' Ray nodes", 120)
    wait(lambda: listening(dashboard), "the head's Jobs API", 120)

    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": containers.token}
    env.pop("RAY_ADDRESS", None)
    nodes = subprocess.run([str(BIN / "ray"), "list", "nodes", f"--address=http://127.0.0.1:{dashboard}",
                            "--format=json"], capture_output=True, text=True, env=env, timeout=60)
    (worker_node,) = [n["node_id"] for n in json.loads(nodes.stdout) if not n["is_head_node"]]
    job = subprocess.Popen(
        [str(BIN / "ray"), "job", "submit", f"--address=http://127.0.0.1:{dashboard}", "--submission-id=grid",
         "--", "kappa-rllib", "tune", GRID, "--storage", str(results), "--checkpoint-every", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    grid_dir = results / "container_check" / "kappa_pi_dqn"

    def a_trial_on_the_worker_is_past_a_checkpoint() -> bool:  # and not near its end
        return any(rows[-1]["node_id"] == worker_node and 3 <= rows[-1]["training_iteration"] <= 9
                   for rows in trial_rows(grid_dir).values())
    try:
        wait(lambda: job.poll() is not None or a_trial_on_the_worker_is_past_a_checkpoint(),
             "a trial on the worker container past its first checkpoint", 300)
        assert job.poll() is None, job.stdout.read()[-3000:]
        engine("kill", worker)  # SIGKILL: the worker's raylet and its trial's actors die at once
        output, _ = job.communicate(timeout=420)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, output[-4000:]
    assert "Job 'grid' succeeded" in output
    assert "[tune] finished: 4/4 trials without error" in output, output[-3000:]

    grid = results / "container_check" / "kappa_pi_dqn"
    rows = trial_rows(grid)
    finals = [trial[-1] for trial in rows.values()]
    configs = [json.loads((grid / name / "params.json").read_text()) for name in rows]  # rows carry it once a stretch
    assert sorted((c["kappa"], c["c_fa"]) for c in configs) == EXPECTED
    assert all(f["done"] and f["kappa"]["env_steps"] == T for f in finals), finals
    lost = [trial for trial in rows.values() if trial[0]["node_id"] == worker_node != trial[-1]["node_id"]]
    assert lost, "no trial moved from the lost worker to the head"
    for trial in lost:  # retried on the head from its checkpoint (every 2 iterations), not from zero
        moved = next(r for r in trial if r["node_id"] != worker_node)
        assert moved["training_iteration"] > 2, [(r["training_iteration"], r["node_id"][:6]) for r in trial]

    report = subprocess.run([str(BIN / "kappa-rllib"), "report", str(results / "container_check"),
                             "--out", str(tmp_path / "report")], capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    table = (tmp_path / "report" / "table.md").read_text()
    for kappa, c_fa in EXPECTED:  # every cell of the grid, one seed each
        assert re.search(rf"\| CartPole-v1 \| kappa-pi \| {c_fa} \| {kappa} \| [\d.]+ \+- - \| 1 \|", table), table
    print(f"[images] the lost trial(s): {[[(r['training_iteration'], r['node_id'][:6]) for r in t] for t in lost]}")


@pytest.mark.slow
def test_the_gpu_image_builds_with_the_cuda_torch(containers, tmp_path):
    """On demand (several GB of CUDA wheels): the GPU flavour from the same Debian base holds PyPI's
    CUDA build of the pinned torch (it runs on the GPU nodes' drivers; no GPU is needed to build it)."""
    log = tmp_path / "build-gpu.log"
    with open(log, "w") as out:
        build = subprocess.run(["bash", str(ROOT / "docker" / "build.sh"), "gpu", "--debian-base"],
                               stdout=out, stderr=subprocess.STDOUT, timeout=3600)
    assert build.returncode == 0, log.read_text()[-4000:]
    gpu_image = IMAGE.removesuffix("-cpu") + "-gpu"
    torch_pin = [d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
                 if d.startswith("torch==")][0].split("==")[1]
    container = containers.run("gpu", "python", "-c", "import torch, ray; print(torch.__version__, "
                               "torch.version.cuda, ray.__version__)", image=gpu_image)
    version, cuda, ray_version = containers.output(container).split()
    assert version.split("+")[0] == torch_pin and cuda != "None" and ray_version == pinned("ray")


def test_a_docker_cli_without_an_engine_skips_with_its_reason_unless_required(tmp_path):
    """issue 57 (6): with a `docker` on PATH whose daemon is down (Docker Desktop closed, a CLI for a remote host)
    and no podman, this module's tests skip with the engine's own reason, instead of erroring in docker/build.sh;
    with KAPPA_IMAGE_TESTS=required they fail with it. Runs this file under pytest with such a docker alone on PATH."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                                 "Is the docker daemon running?' >&2\nexit 1\n")
    (fake / "docker").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("KAPPA_ENGINE", "KAPPA_IMAGE_TESTS", "PYTEST_ADDOPTS")}
    env["PATH"] = str(fake)
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-rsE", "-q", "-m", "not slow",
           "-k", "not docker_cli_without", str(Path(__file__))]
    out = {}
    for mode in ("", "required"):
        run = subprocess.run(cmd, cwd=ROOT, env={**env, **({"KAPPA_IMAGE_TESTS": mode} if mode else {})},
                             capture_output=True, text=True, timeout=300)
        out[mode] = run.returncode, run.stdout[-3000:]
    code, text = out[""]
    assert code == 0 and "2 skipped" in text and "error" not in text.lower().replace("kappa_image_tests", ""), text
    assert "is installed but cannot run a container" in text and "Cannot connect to the Docker daemon" in text, text
    code, text = out["required"]
    assert code != 0 and "2 errors" in text and "KAPPA_IMAGE_TESTS=required" in text, text
    assert "Cannot connect to the Docker daemon" in text and "no container engine" not in text, text
