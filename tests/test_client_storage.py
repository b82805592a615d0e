"""`--storage` is where the storage is: through Ray Client (`--address ray://`) a path on the cluster, which
the client may not see at all; and `file:///PATH`, a local folder like PATH.

The Ray Client cluster is a head alone in a mount namespace of its own (`unshare --mount`) with a tmpfs
over a folder that also exists, empty, on this side: every Ray process of the cluster (the Ray Client
server, Tune's driver of each grid, the trials) sees the storage, the client (`kappa-rllib tune`, as on a
user's laptop) does not. The test reads the storage as the head sees it, through /proc/<head pid>/root.
Before the storage checks ran on the cluster (kappa_rllib.tuning.storage.on_storage), the client looked at
its own empty folder: a second run over a stored one was not refused, and `--resume` started every grid
afresh beside the stored one, so each trial ran twice.
"""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from nodes import free_port as _free_port, trial_rows
from test_cluster import GRID, LocalCluster

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
T = 1000  # GRID's trials' total_env_steps
EXPECTED = [(0.68, 0.1), (0.68, 0.2), (0.84, 0.1), (0.84, 0.2)]  # kappa x C_FA of GRID

# one Ray cluster of its own at a time under pytest -n (pyproject.toml)
pytestmark = pytest.mark.xdist_group("clusters")


def _unshare_reason() -> str | None:
    """Why a head cannot have a mount namespace of its own here, or None."""
    if shutil.which("unshare") is None:
        return "no `unshare` (util-linux) on this machine"
    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                f"mount -t tmpfs kappa-probe {shlex.quote(folder)}"],
                               capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`unshare --mount` + a tmpfs mount is not allowed here ({probe.stderr.strip()[:200]})"
    return None


class HiddenStorageCluster(LocalCluster):
    """A head alone (2 CPUs) in its own mount namespace, `mount` a tmpfs there: a folder only the cluster sees."""

    def __init__(self, temp_dir: Path):
        super().__init__(temp_dir)
        self.mount = temp_dir / "volume"
        self.mount.mkdir()
        # the reconnect grace of a client that went away (Ray's default 30 s): a killed driver's Tune runs on
        # the head stop soon after it
        self.env["RAY_CLIENT_RECONNECT_GRACE_PERIOD"] = "1"
        self.env.pop("MLFLOW_TRACKING_URI", None)  # --track mlflow: the store beside the grids
        # Tune copies its staging folder (the rows) onto the storage at each experiment snapshot, every 10 s or
        # more ("auto"); the whole grid takes ~30 s, so a snapshot could miss every trial mid-run (CI: the driver
        # ended before a row not `done` reached the head). Every second here, on the head's Tune run.
        self.env["TUNE_GLOBAL_CHECKPOINT_S"] = "1"

    def _start(self, name: str, *args: str, cpus: int = 1) -> subprocess.Popen:
        log = open(self.temp_dir / f"{name}.log", "w")
        ray = [str(BIN / "ray"), "start", "--block", f"--num-cpus={cpus}", "--object-store-memory=200000000",
               f"--dashboard-agent-listen-port={_free_port()}", "--disable-usage-stats", *args]
        script = (f"mount -t tmpfs -o size=512m kappa-storage {shlex.quote(str(self.mount))} && "
                  f"exec {shlex.join(ray)}")
        self.processes.append(subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        return self.processes[-1]

    @property
    def address(self) -> str:
        return f"ray://127.0.0.1:{self.client_port}"

    def seen_by_head(self, path: Path) -> Path:
        """`path` as the head's processes see it (their mount namespace)."""
        return Path(f"/proc/{self.processes[0].pid}/root") / path.relative_to("/")


@pytest.fixture(scope="module")
def hidden_cluster():
    reason = _unshare_reason()
    if reason:
        pytest.skip(reason)
    temp_dir = Path(tempfile.mkdtemp(prefix="krh", dir="/tmp"))  # short: Ray's socket paths live under it
    local = HiddenStorageCluster(temp_dir)
    try:
        local.start(head_cpus=2, workers=0)
        yield local
    finally:
        local.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)


def tune(cluster, storage: Path, *extra: str, timeout: float = 420) -> subprocess.CompletedProcess:
    return cluster.run("kappa-rllib", "tune", GRID, "--storage", storage, "--address", cluster.address,
                       *extra, timeout=timeout)


def check_each_trial_ended_once(grid_dir: Path) -> dict:
    """Every trial of GRID once (four folders), ended exactly once, at T; returns their rows."""
    rows = trial_rows(grid_dir)
    configs = sorted((json.loads((grid_dir / name / "params.json").read_text())["kappa"],
                      json.loads((grid_dir / name / "params.json").read_text())["c_fa"]) for name in rows)
    assert configs == EXPECTED, sorted(rows)
    for name, trial in rows.items():
        assert sum(1 for r in trial if r.get("done")) == 1, (name, [r["training_iteration"] for r in trial])
        assert trial[-1]["done"] and trial[-1]["kappa"]["env_steps"] == T, name
    return rows


@pytest.mark.learning
def test_ray_client_storage_that_only_the_cluster_sees(hidden_cluster, tmp_path):
    """Through Ray Client, on a storage only the head sees: a driver SIGKILLed mid-run (its first rows written),
    then `--resume`: the grid runs to its end, every trial ending once, at T; the same command again is refused
    in one line; `--resume` again runs nothing. `--track mlflow` keeps its store beside the grids, on the head.
    Nothing is ever written on the client's side of the path."""
    cluster = hidden_cluster
    storage = cluster.mount / "results"
    on_head = cluster.seen_by_head(storage / "cluster_check" / "kappa_pi_dqn")

    with (tmp_path / "killed.out").open("w") as printed:
        driver = subprocess.Popen(
            [str(BIN / "kappa-rllib"), "tune", str(GRID), "--storage", str(storage), "--address", cluster.address,
             "--checkpoint-every", "1", "--track", "mlflow"],
            env=cluster.env, stdout=printed, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(rows and not rows[-1].get("done") for rows in trial_rows(on_head).values()):
            assert driver.poll() is None and time.monotonic() < deadline, (
                f"no trial reported before the kill (driver: {driver.poll()}; rows on the head: "
                f"{ {name: len(rows) for name, rows in trial_rows(on_head).items()} })\n"
                + (tmp_path / "killed.out").read_text()[-3000:])
            time.sleep(0.2)
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:  # the driver and its group gone already (the assertion above says why)
            pass
        driver.wait()
    before = trial_rows(on_head)
    assert sum(1 for rows in before.values() if rows[-1].get("done")) < 4, "the kill must land mid-grid"
    # at once: the killed client's Tune run goes on on the head for the reconnect grace, and the resume waits for
    # it to end (kappa_rllib.tuning.busy; before, a resume could start beside it and a trial end twice)
    resumed = tune(cluster, storage, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "[tune] finished: 4/4 trials without error" in resumed.stdout
    finished = check_each_trial_ended_once(on_head)  # (before: a fresh run beside the stored one, each twice)
    assert (on_head.parent / "mlflow.db").is_file()  # the file's MLflow store, made on the head
    assert not storage.exists()  # the client's side: nothing made here

    again = tune(cluster, storage)
    assert again.returncode == 2, again.stdout[-3000:] + again.stderr[-3000:]
    # (the connection's own retry notice, "[ray] ...: the cluster's Ray Client server failed to start; retrying",
    # comes on a busy machine: not the refusal's line)
    lines = [line for line in again.stderr.strip().splitlines() if not line.startswith("[ray] ")]
    assert len(lines) == 1 and "already holds a run of grid 'kappa_pi_dqn'" in lines[0], again.stderr[-3000:]

    # --report: the result files read on the head and copied here (./<file>_report/results), the report beside them
    nothing_left = subprocess.run(
        [str(BIN / "kappa-rllib"), "tune", str(GRID), "--storage", str(storage), "--address", cluster.address,
         "--resume", "--report"], env=cluster.env, cwd=tmp_path, capture_output=True, text=True, timeout=420)
    assert nothing_left.returncode == 0, nothing_left.stdout[-3000:] + nothing_left.stderr[-3000:]
    assert check_each_trial_ended_once(on_head) == finished  # nothing ran again
    assert not storage.exists()
    copied = tmp_path / "cluster_check_report" / "results" / "kappa_pi_dqn"
    assert sorted(p.name for p in copied.iterdir()) == sorted(finished)
    for name, rows in finished.items():
        assert (copied / name / "result.json").read_bytes() == (on_head / name / "result.json").read_bytes()
    table = (tmp_path / "cluster_check_report" / "table.md").read_text()
    assert "kappa" in table.lower() and "CartPole" in table, table[:2000]


def test_a_storage_the_cluster_cannot_write_is_one_line(hidden_cluster, tmp_path):
    """Through Ray Client, a --storage that cannot be made on the cluster: one line, exit 2, before any grid."""
    cluster = hidden_cluster
    blocker = cluster.seen_by_head(cluster.mount / "a_file")
    blocker.write_text("not a folder")
    out = tune(cluster, cluster.mount / "a_file" / "results")
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-3000:]
    # (the connection's retry notice, "[ray] ...: the cluster's Ray Client server failed to start; retrying",
    # comes on a busy machine: not the refusal's line)
    lines = [line for line in out.stderr.strip().splitlines() if not line.startswith("[ray] ")]
    assert len(lines) == 1 and "--storage" in lines[0] and "cannot create the folder" in lines[0], out.stderr


# ------------------------------------------------------------------------------------------ file://
CLI = [sys.executable, "-m", "kappa_rllib.cli"]


@pytest.mark.learning
def test_a_file_uri_storage_is_a_local_folder_killed_then_resumed(tmp_path):
    """`--storage file:///PATH`: the driver (and its embedded Ray) SIGKILLed mid-run, then `--resume`: the resume
    repairs the folder as it does PATH's (its state backups are there), and every trial ends once, at T.
    (Before, file:// was a bucket: no backups, no repair, and tracking stores in the working folder.)"""
    grid = tmp_path / "file_uri.py"
    grid.write_text(textwrap.dedent("""\
        from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

        def experiments(smoke=False):
            return paper_grids("dqn", "CartPole-v1", kappas=[0.84], c_fa=[0.2], num_seeds=1, variants=("pi",),
                               baseline=False, **{**SMOKE_SETTINGS["dqn"], "total_env_steps": 2000})
        """))
    ray_tmp = Path(tempfile.mkdtemp(prefix="krf", dir="/tmp"))
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp), "RAY_ADDRESS": "", "MLFLOW_TRACKING_URI": ""}
    args = [*CLI, "tune", str(grid), "--storage", f"file://{tmp_path}/results", "--num-cpus", "1",
            "--checkpoint-every", "1", "--track", "mlflow"]
    grid_dir = tmp_path / "results" / "file_uri" / "kappa_pi_dqn"
    driver = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not any(len(rows) >= 2 and not rows[-1].get("done") for rows in trial_rows(grid_dir).values()):
            assert driver.poll() is None and time.monotonic() < deadline, "no trial reported before the kill"
            time.sleep(0.2)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
        kill_ray_of(ray_tmp)
    try:
        assert (tmp_path / "results" / "file_uri" / "mlflow.db").is_file()  # the file's store, not the cwd's
        assert not (tmp_path / "mlflow.db").exists()
        out = subprocess.run([*args, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=420)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        rows = trial_rows(grid_dir)
        assert len(rows) == 1
        for name, trial in rows.items():
            assert sum(1 for r in trial if r.get("done")) == 1, name
            assert trial[-1]["kappa"]["env_steps"] == 2000, name
        assert f"results in {tmp_path}/results/file_uri" in out.stdout
        assert (grid_dir / ".kappa_rllib_experiment_state.json").is_file()  # the state backups of a local folder
    finally:
        kill_ray_of(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def kill_ray_of(ray_tmp: Path) -> None:
    """SIGKILL, by pid, each process whose command line names `ray_tmp` (the killed driver's own Ray)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if str(ray_tmp).encode() in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
    time.sleep(1)


def test_file_uris_are_folders_and_bucket_uris_stay_uris(tmp_path):
    """`file:///PATH` (and `file://localhost/PATH`) is the folder PATH wherever the driver takes a path; any
    other scheme is a bucket, read and written through pyarrow (`local://` here: pyarrow's local filesystem
    behind a URI, the code path of s3:// and gs://)."""
    from kappa_rllib.tuning import storage as stores

    assert not stores.is_uri(f"file://{tmp_path}") and not stores.is_uri(f"FILE://localhost{tmp_path}")
    assert stores.join(f"file://{tmp_path}", "g") == str(tmp_path.resolve() / "g")
    assert stores.join(f"file://localhost{tmp_path}/", "g") == str(tmp_path.resolve() / "g")
    assert stores.is_uri("s3://bucket/prefix") and stores.join("s3://bucket/prefix/", "g") == "s3://bucket/prefix/g"
    stores.write_text(f"file://{tmp_path}/folder", "a.json", "{}")
    assert (tmp_path / "folder" / "a.json").read_text() == "{}"
    assert stores.holds_files(f"file://{tmp_path}/folder")

    bucket = f"local://{tmp_path}/bucket"
    assert stores.is_uri(bucket) and not stores.holds_files(bucket)
    stores.write_text(f"{bucket}/grid/trial_1", "params.json", "{}")
    stores.write_text(f"{bucket}/grid/trial_1", "result.json", '{"done": true}\n')
    stores.write_text(f"{bucket}/grid/trial_1/checkpoint_000000", "state.pkl", "x")
    assert stores.holds_files(bucket)
    mirror = stores.mirror_results(bucket, tmp_path / "mirror")
    assert sorted(str(p.relative_to(mirror)) for p in mirror.rglob("*") if p.is_file()) == [
        "grid/trial_1/params.json", "grid/trial_1/result.json"]  # no checkpoints copied


def test_a_copy_from_the_cluster_is_made_afresh_a_few_files_a_transfer(tmp_path, monkeypatch):
    """`tune --report` through Ray Client copies the result files (never the checkpoints) into a folder made afresh:
    what an earlier copy left there (a grid moved aside since) is not counted again; they come over a few at a
    time (MIRROR_BATCH_BYTES), not as one object of every trial's rows. (Here without Ray Client: on_storage calls
    the function in this process, as the head's task does.)"""
    from kappa_rllib.tuning import storage as stores

    grid = tmp_path / "cluster" / "g"
    for trial in ("t1", "t2", "t3"):
        (grid / trial / "checkpoint_000001").mkdir(parents=True)
        (grid / trial / "params.json").write_text("{}")
        (grid / trial / "result.json").write_text(f'{{"trial": "{trial}"}}\n' * 50)
        (grid / trial / "checkpoint_000001" / "state.pkl").write_text("x")
    local = tmp_path / "report" / "results"
    (local / "moved_aside" / "t0").mkdir(parents=True)
    (local / "moved_aside" / "t0" / "result.json").write_text("{}\n")
    calls = []
    real = stores.result_files
    monkeypatch.setattr(stores, "MIRROR_BATCH_BYTES", 600)
    monkeypatch.setattr(stores, "result_files", lambda *a: calls.append(a) or real(*a))
    stores.mirror_from_cluster(str(grid), local)
    assert sorted(str(p.relative_to(local)) for p in local.rglob("*") if p.is_file()) == [
        f"{t}/{name}" for t in ("t1", "t2", "t3") for name in ("params.json", "result.json")]
    assert (local / "t2" / "result.json").read_bytes() == (grid / "t2" / "result.json").read_bytes()
    assert len(calls) == 1 + 3  # the listing, then each trial's two files (~650 bytes) a transfer
    with pytest.raises(ValueError, match="no trial results found"):
        stores.mirror_from_cluster(str(tmp_path / "empty"), local)


def test_storage_checks_run_here_without_ray_client(tmp_path):
    """`on_storage` calls its function in this process when no Ray Client is connected, and an error it raises
    comes back as it was."""
    from kappa_rllib.tuning import storage as stores

    assert stores.on_storage(stores.holds_files, str(tmp_path)) is False
    with pytest.raises(ValueError, match="--storage"):
        stores.on_storage(stores.check_uri, "--storage", "nope://x")


@pytest.mark.learning
def test_a_bucket_grid_is_repaired_through_a_working_copy_its_checkpoints_moved_never_uploaded(tmp_path, s3_endpoint,
                                                                                               monkeypatch):
    """--resume's repair of a grid on an S3 bucket (moto's server on loopback; kappa_rllib.tuning.bucket): a trial
    folder Tune's saved state does not know (a killed driver's, made twice) is moved to `.kappa_orphans/` in the
    bucket with its checkpoint's bytes as they were (copied in the bucket, never from the working copy, where a
    checkpoint's files are empty files of their sizes), a half-made copy is deleted, every other file is left as it
    was but Tune's newest state, which names each checkpoint in the bucket as before; and Tune resumes from it."""
    import pyarrow.fs
    from ray.tune.experiment.trial import Trial

    from conftest import S3_ENV, s3_filesystem
    from kappa_rllib.tuning import bucket
    from test_seams import CLI as TUNE_CLI, seam_file

    env = {**os.environ, **S3_ENV, "AWS_ENDPOINT_URL": s3_endpoint, "RAY_ADDRESS": "", "WANDB_MODE": "offline"}
    uri = f"s3://kappa-seams/{tmp_path.name}"
    args = [*TUNE_CLI, "tune", str(seam_file(tmp_path)), "--storage", uri, "--grids", "dqn", "--num-cpus", "2",
            "--checkpoint-every", "1"]
    first = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    fs = s3_filesystem(s3_endpoint)
    root = f"kappa-seams/{tmp_path.name}/seams/dqn"

    def files() -> dict[str, bytes]:
        found = fs.get_file_info(pyarrow.fs.FileSelector(root, recursive=True))
        return {i.path[len(root) + 1:]: fs.open_input_stream(i.path).readall()
                for i in found if i.type == pyarrow.fs.FileType.File}

    before = files()
    [trial] = {rel.split("/")[0] for rel in before if rel.startswith("KappaPIDQN_")}
    prefix = trial.split("_")[2]  # <trainable>_<env>_<the search's prefix>_<index>_...
    twice = trial.replace(f"_{prefix}_", "_zzzzz_")
    copied = {rel.replace(trial, twice, 1): data for rel, data in before.items() if rel.startswith(trial + "/")}
    assert any("/checkpoint_" in rel and not rel.endswith(".json") for rel in copied)  # a checkpoint's files
    for rel, data in {**copied, f"{trial}/.result.json.x.kappa-tmp": b"{half"}.items():
        with fs.open_output_stream(f"{root}/{rel}") as f:
            f.write(data)

    for key, value in {**S3_ENV, "AWS_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(key, value)
    said = bucket.repair(f"{uri}/seams/dqn")
    assert len(said) == 1 and said[0].startswith(f"{twice}: a trial folder Tune's saved state does not know"), said

    after = files()
    assert {rel: data for rel, data in after.items() if rel.startswith(".kappa_orphans/")} == {
        f".kappa_orphans/{rel}": data for rel, data in copied.items()}  # the bytes as they were
    assert fs.get_file_info(f"{root}/{twice}").type == pyarrow.fs.FileType.NotFound  # no empty folder left
    [state] = sorted(rel for rel in before if rel.startswith("experiment_state-"))[-1:]
    unchanged = {rel: data for rel, data in after.items() if not rel.startswith(".kappa_orphans/") and rel != state}
    assert unchanged == {rel: data for rel, data in before.items() if rel != state}

    def checkpoints(data: bytes) -> list:
        rows = json.loads(data)["trial_data"]
        named = []
        for row in rows:
            trial_ = Trial.from_json_state(row[0], stub=True)
            trial_.restore_run_metadata(row[1])
            manager = trial_.run_metadata.checkpoint_manager
            named += [(r.checkpoint.path, r.checkpoint.filesystem.type_name) for r in manager._checkpoint_results]
        return named

    assert checkpoints(after[state]) == checkpoints(before[state]) and checkpoints(before[state])
    assert all(path.startswith(root + "/" + trial + "/checkpoint_") and kind == "s3"
               for path, kind in checkpoints(after[state]))
    resumed = subprocess.run([*args, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0 and "finished: 1/1" in resumed.stdout + resumed.stderr, resumed.stderr[-3000:]
