"""A kappa x C_FA grid on a real multi-process Ray cluster: submitted with `ray job submit`, and through Ray Client.

The cluster is what `cluster/README.md` runs on many machines, on one: a head and a second node, each a
separate `ray start` process (1 CPU each) on this machine's address, with Ray's token authentication on.
Nothing runs in the pytest process: every step is a subprocess with the cluster's token in its
environment, as on a user's laptop. The fixture stops only the process groups it started.
"""

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nodes import free_port as _free_port, listening as _listening

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's `ray` and `kappa-rllib`
GRID = ROOT / "tune_configs" / "small" / "cluster_check.py"
EXPECTED = [(0.68, 0.1), (0.68, 0.2), (0.84, 0.1), (0.84, 0.2)]  # kappa x C_FA of GRID

# one Ray cluster of its own at a time under pytest -n (pyproject.toml)
pytestmark = pytest.mark.xdist_group("clusters")


class LocalCluster:
    """A head and one more node, each `ray start --block` in its own process group."""

    def __init__(self, temp_dir: Path):
        self.temp_dir = temp_dir
        self.gcs, self.dashboard_port, self.client_port = _free_port(), _free_port(), _free_port()
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                    "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                    "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
        self.env.pop("RAY_ADDRESS", None)
        self.processes: list[subprocess.Popen] = []
        self.killed: set[int] = set()  # pids of the nodes a test killed on purpose

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def _start(self, name: str, *args: str, cpus: int = 1) -> subprocess.Popen:
        log = open(self.temp_dir / f"{name}.log", "w")
        self.processes.append(subprocess.Popen(
            [str(BIN / "ray"), "start", "--block", f"--num-cpus={cpus}", "--object-store-memory=200000000",
             f"--dashboard-agent-listen-port={_free_port()}", "--disable-usage-stats", *args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        return self.processes[-1]

    def start(self, head_cpus: int = 1, workers: int = 1) -> None:
        self._start("head", "--head", "--node-ip-address=127.0.0.1", f"--port={self.gcs}",
                    "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
                    f"--ray-client-server-port={self.client_port}", f"--temp-dir={self.temp_dir}", cpus=head_cpus)
        self._wait(lambda: _listening(self.gcs), "the head's GCS")
        self._wait(lambda: _listening(self.dashboard_port) and _listening(self.client_port),
                   "the Jobs API and Ray Client ports")
        for _ in range(workers):
            self.add_worker("worker")

    def add_worker(self, name: str) -> tuple[subprocess.Popen, str]:
        """One more node (1 CPU), once the cluster lists it; its process and Ray node id."""
        before = self.node_ids()
        node = self._start(name, f"--address=127.0.0.1:{self.gcs}", "--node-ip-address=127.0.0.1")
        self._wait(lambda: self.node_ids() - before, f"node {name}")
        (node_id,) = self.node_ids() - before
        return node, node_id

    def kill(self, node: subprocess.Popen) -> None:
        """SIGKILL to a node's whole process group (its raylet, workers and actors), as a lost machine."""
        self.killed.add(node.pid)
        os.killpg(node.pid, signal.SIGKILL)
        node.wait(timeout=30)

    def _wait(self, ready, what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = any(p.poll() is not None for p in self.processes if p.pid not in self.killed)
            if dead or time.monotonic() > deadline:
                logs = "\n".join((self.temp_dir / f).read_text()[-2000:] for f in ("head.log", "worker.log")
                                 if (self.temp_dir / f).exists())
                raise RuntimeError(f"cluster: {what} not up ({'exited' if dead else 'timeout'})\n{logs}")
            time.sleep(1)

    def run(self, *args: str, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in args], env=env or self.env, capture_output=True, text=True,
                              timeout=timeout)

    def wait_idle(self, timeout: float = 90) -> None:
        """No CPU in use: the previous test's actors are gone, so the next grid can use both nodes."""
        def idle() -> bool:
            out = self.run("ray", "status", f"--address=127.0.0.1:{self.gcs}", timeout=60).stdout
            usage = re.search(r"([\d.]+)/([\d.]+) CPU", out)
            return usage is not None and float(usage.group(1)) == 0
        self._wait(idle, "an idle cluster", timeout)

    def node_ids(self) -> set[str]:
        """The alive nodes, as the GCS knows them (Ray's state API; `ray status` lags behind it)."""
        out = self.run("ray", "list", "nodes", f"--address={self.dashboard}", "--format=json", timeout=60).stdout
        try:
            return {n["node_id"] for n in json.loads(out) if n["state"] == "ALIVE"}
        except json.JSONDecodeError:
            return set()

    def stop(self) -> None:
        """SIGTERM to each process group this fixture started, SIGKILL to what is left after 15 s."""
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 0)):
            for p in self.processes:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(p.poll() is None for p in self.processes):
                time.sleep(0.5)
        for p in self.processes:
            p.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster():
    temp_dir = Path(tempfile.mkdtemp(prefix="krc", dir="/tmp"))  # short: Ray's socket paths live under it
    local = LocalCluster(temp_dir)
    try:
        local.start()
        yield local
    finally:
        local.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)


def finished_trials(grid_dir: Path) -> list[dict]:
    """The last result of every trial of a Tune grid folder."""
    trials = []
    for result in sorted(grid_dir.glob("*/result.json")):
        last = json.loads(result.read_text().strip().splitlines()[-1])
        config = json.loads((result.parent / "params.json").read_text())  # the rows carry it once a stretch
        trials.append({"kappa": config["kappa"], "c_fa": config["c_fa"], "done": last["done"],
                       "node_id": last["node_id"], "env_steps": last["kappa"]["env_steps"]})
    return trials


def check_grid(grid_dir: Path, node_ids: set[str]) -> None:
    trials = finished_trials(grid_dir)
    assert sorted((t["kappa"], t["c_fa"]) for t in trials) == EXPECTED
    assert all(t["done"] and t["env_steps"] == 1000 for t in trials), trials
    # one CPU per node and one per trial: two trials at a time, one on each node
    assert {t["node_id"] for t in trials} == node_ids, trials


def test_ray_job_submit_runs_the_grid_on_both_nodes(cluster, tmp_path):
    cluster.wait_idle()
    node_ids = cluster.node_ids()
    assert len(node_ids) == 2
    storage = tmp_path / "results"
    job = cluster.run("ray", "job", "submit", f"--address={cluster.dashboard}", "--submission-id=kappa-grid",
                      "--", "kappa-rllib", "tune", GRID, "--storage", storage)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert "Job 'kappa-grid' succeeded" in job.stdout + job.stderr
    assert "[tune] finished: 4/4 trials without error" in job.stdout
    check_grid(storage / "cluster_check" / "kappa_pi_dqn", node_ids)
    status = cluster.run("ray", "job", "status", f"--address={cluster.dashboard}", "kappa-grid", timeout=60)
    assert status.returncode == 0 and "Job 'kappa-grid' succeeded" in status.stdout + status.stderr


def test_the_jobs_api_refuses_a_client_without_the_token(cluster):
    env = {k: v for k, v in cluster.env.items() if not k.startswith("RAY_AUTH")}
    env["HOME"] = str(cluster.temp_dir)  # no ~/.ray/auth_token to fall back on
    listing = cluster.run("ray", "job", "list", f"--address={cluster.dashboard}", env=env, timeout=60)
    assert listing.returncode != 0
    assert "auth" in (listing.stdout + listing.stderr).lower()


def test_the_same_grid_through_ray_client(cluster, tmp_path):
    cluster.wait_idle()
    storage = tmp_path / "results"
    run = cluster.run("kappa-rllib", "tune", GRID, "--storage", storage,
                      "--address", f"ray://127.0.0.1:{cluster.client_port}")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    check_grid(storage / "cluster_check" / "kappa_pi_dqn", cluster.node_ids())



def submit_train(cluster, output: Path, name: str, *train_args: str) -> dict:
    """`ray job submit -- kappa-rllib train ...`: asserts the job succeeded and the run folder says
    finished; returns the run's last result."""
    cluster.wait_idle()
    job = cluster.run("ray", "job", "submit", f"--address={cluster.dashboard}", f"--submission-id={name}",
                      "--", "kappa-rllib", "train", *train_args, "--output", output)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    (run_dir,) = output.iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["finished"] is True and meta["total_env_steps"] == int(train_args[train_args.index("--total-steps") + 1])
    return json.loads((run_dir / "result.json").read_text().strip().splitlines()[-1])


def test_ray_job_submit_runs_a_train_with_a_remote_env_runner(cluster, tmp_path):
    """`ray job submit -- kappa-rllib train ...`: the entrypoint finds the cluster through RAY_ADDRESS
    (no --address) and its EnvRunner actor runs on the cluster; the run folder says finished."""
    last = submit_train(cluster, tmp_path, "kappa-train", "--algo", "kappa-vi-dqn", "--env", "CartPole-v1",
                        "--kappa", "0.9", "--c-fa", "0.3", "--total-steps", "2000", "--num-env-runners", "1")
    assert last["done"] and last["healthy_env_runners"] == 1 and last["node_id"] in cluster.node_ids()


def test_kappa_appo_runs_with_env_runners_on_both_nodes(cluster, tmp_path):
    """`ray job submit -- kappa-rllib train --algo kappa-pi-appo`: two EnvRunners (one CPU each), one
    on each node, sample asynchronously for the learner in the driver; the run finishes T."""
    last = submit_train(cluster, tmp_path, "kappa-appo", "--algo", "kappa-pi-appo", "--env", "CartPole-v1",
                        "--kappa", "0.9", "--c-fa", "0.5", "--total-steps", "6000", "--num-env-runners", "2")
    assert last["done"] and last["kappa"]["iteration"] == last["kappa"]["num_iterations"] == 8
    assert last["kappa"]["env_steps"] >= 6000 and last["healthy_env_runners"] == 2
    assert set(last["env_runner_node_ids"].split(",")) == cluster.node_ids()
