"""Reliability: every bad input is one line and exit code 2 (or a ValueError) before Ray starts,
with nothing already in the output folder touched; Ctrl-C checkpoints and `--resume` finishes
the run exactly; a checkpoint cut short or damaged is refused before anything is unpickled."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kappa_rllib import KappaPIDQNConfig, KappaPITRPOConfig, TRPOConfig, checkpoints
from kappa_rllib.cli import main

CLI = [sys.executable, "-m", "kappa_rllib.cli"]
DQN = ["train", "--algo", "kappa-pi-dqn", "--env", "CartPole-v1"]


@pytest.fixture
def files(tmp_path):
    """Bad files to point options at, and an output folder that already holds a run's file."""
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "malformed.yaml").write_text("training: [1\n")
    (tmp_path / "list.yaml").write_text("- training\n- lr\n")
    (tmp_path / "string_batch.yaml").write_text('training:\n  train_batch_size: "64"\n')
    (tmp_path / "zero_iteration.yaml").write_text("training:\n  env_steps_per_iteration: 0\n")
    (tmp_path / "negative_lr.yaml").write_text("training:\n  lr: -1\n")
    (tmp_path / "late_start.yaml").write_text("training:\n  num_steps_sampled_before_learning_starts: 60000\n")
    (tmp_path / "unknown_section.yaml").write_text("trainer:\n  lr: 0.1\n")
    (tmp_path / "unknown_key.yaml").write_text("training:\n  learning_rate: 0.1\n")
    (tmp_path / "section_not_mapping.yaml").write_text("training: 5\n")
    (tmp_path / "a_folder.yaml").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "earlier_run.txt").write_text("keep me")
    return tmp_path


BAD_CLI = [
    (DQN + ["--kappa", "1.5"], "kappa must lie in [0, 1], got 1.5"),
    (DQN + ["--kappa", "high"], "--kappa must be a number, got 'high'"),
    (DQN + ["--c-fa", "0"], "c_fa must lie in the open interval (0, 1), got 0.0"),
    (DQN + ["--gamma", "1"], "gamma must lie in [0, 1), got 1.0"),
    (DQN + ["--total-steps", "-5"], "argument --total-steps: expected a positive integer, got '-5'"),
    (DQN + ["--torch-threads", "0"], "argument --torch-threads: expected a positive integer, got '0'"),
    (DQN + ["--num-env-runners", "-1"], "argument --num-env-runners: expected an integer >= 0, got '-1'"),
    (DQN + ["--num-cpus", "0"], "argument --num-cpus: expected a positive integer, got '0'"),
    (DQN + ["--seed", "-3"], "argument --seed: expected an integer >= 0, got '-3'"),
    (DQN + ["--checkpoint-every", "-1"], "argument --checkpoint-every: expected an integer >= 0"),
    (DQN + ["--output", "{tmp}/a_file/sub"], "--output '{tmp}/a_file/sub': cannot create the folder"),
    (DQN + ["--config", "{tmp}/a_folder.yaml"], "--config '{tmp}/a_folder.yaml' is a folder; give a YAML file"),
    (DQN + ["--config", "{tmp}/missing.yaml"], "--config '{tmp}/missing.yaml' does not exist"),
    (DQN + ["--config", "{tmp}/malformed.yaml"], "not valid YAML at line 2, column 1"),
    (DQN + ["--config", "{tmp}/list.yaml"], "the top level must be a mapping of sections"),
    (DQN + ["--config", "{tmp}/unknown_section.yaml"], "unknown section(s) ['trainer']; allowed: environment"),
    (DQN + ["--config", "{tmp}/unknown_key.yaml"], "unexpected keyword argument 'learning_rate'"),
    (DQN + ["--config", "{tmp}/section_not_mapping.yaml"], "section 'training' must be a mapping of settings"),
    (DQN + ["--config", "{tmp}/string_batch.yaml"], "train_batch_size must be an int >= 1, got '64'"),
    (DQN + ["--config", "{tmp}/zero_iteration.yaml"], "env_steps_per_iteration must be an int >= 1, got 0"),
    (DQN + ["--config", "{tmp}/negative_lr.yaml"], "lr must be a number > 0, got -1"),
    (DQN + ["--config", "{tmp}/late_start.yaml", "--total-steps", "50000"],
     "num_steps_sampled_before_learning_starts=60000 is not below total_env_steps=50000"),
    (DQN + ["--address", "127.0.0.1:1"], "--address 127.0.0.1:1: nothing answers at 127.0.0.1:1"),
    (DQN + ["--address", "ray://127.0.0.1:1"], "--address ray://127.0.0.1:1: nothing answers at 127.0.0.1:1"),
    (DQN + ["--address", "not-an-address"], "--address 'not-an-address': expected auto, HOST:PORT"),
    (DQN + ["--address", "http://127.0.0.1:8265"], "--address 'http://127.0.0.1:8265' is a dashboard (Jobs API) URL"),
    (["train", "--env", "CartPole-v1"], "--algo is required (or --resume RUN_DIR)"),
    (["train", "--algo", "dqn"], "--env is required"),
    (["train", "--resume", "{tmp}/out"], "not a `kappa-rllib train` run folder (no run.json)"),
    (["tune", "{tmp}/missing.py"], "config file '{tmp}/missing.py' does not exist"),
    (["tune", "tune_configs/small/cartpole_dqn.py", "--storage", "{tmp}/a_file"], "--storage '{tmp}/a_file'"),
    (["tune", "tune_configs/small/cartpole_dqn.py", "--grids", "nope"], "--grids: tune_configs/small/cartpole_dqn.py "
                                                                          "has no grid(s) ['nope']"),
    (["tune", "tune_configs/small/cluster_check.py", "--storage", "ftp://host/x"],
     "--storage 'ftp://host/x': expected a folder or a bucket URI such as s3://BUCKET/PATH"),
    (["tune", "tune_configs/small/cluster_check.py", "--storage", "s3:/bucket/x"],
     "--storage 's3:/bucket/x' looks like a mistyped URI: write s3://... (two slashes"),
    (["tune", "tune_configs/small/cluster_check.py", "--storage", "file:/data"],
     "--storage 'file:/data' looks like a mistyped URI: write file://..."),
    (["tune", "tune_configs/small/cluster_check.py", "--address", "ray://127.0.0.1:1", "--storage", "relative/dir"],
     "--storage 'relative/dir': with Ray Client give an absolute path on the cluster"),
    (["tune", "tune_configs/small/cluster_check.py", "--gpus-per-trial", "1.5"],
     "argument --gpus-per-trial: expected a number of GPUs: a share in [0, 1] or a whole number, got '1.5'"),
    (["report", "{tmp}/missing"], "experiment folder '{tmp}/missing' does not exist"),
]


def _snapshot(folder: Path) -> dict:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*")}


@pytest.mark.parametrize("args, message", BAD_CLI, ids=[" ".join(a[2:] if a[0] == "train" else a)[:60] for a, _ in BAD_CLI])
def test_bad_input_is_one_line_exit_2_before_ray_and_touches_nothing(files, args, message, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    args = [a.replace("{tmp}", str(files)) for a in args]
    if "--output" not in args and args[0] == "train":
        args += ["--output", str(files / "out")]
    before = _snapshot(files / "out")
    started = time.time()
    assert main(args) == 2
    assert time.time() - started < 30
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kappa-rllib: error: "), captured.err
    assert message.replace("{tmp}", str(files)) in lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert _snapshot(files / "out") == before  # nothing already there changed, no run folder made
    import ray

    assert not ray.is_initialized()


def test_gpus_per_trial_without_a_gpu_or_a_cluster_is_refused(files, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    grid = Path(__file__).resolve().parents[1] / "tune_configs" / "small" / "cluster_check.py"
    args = ["tune", str(grid), "--storage", str(files / "out"), "--gpus-per-trial", "1"]
    assert main(args) == 2
    assert "error: --gpus-per-trial 1: this machine has no CUDA GPU; run on a cluster" in capsys.readouterr().err


class _FlakyRay:
    """Stands in for `ray`: init fails with the given errors first, then succeeds."""

    def __init__(self, *errors):
        self.errors, self.inits, self.shutdowns = list(errors), 0, 0

    def init(self, address, log_to_driver):
        self.inits += 1
        if self.errors:
            raise self.errors.pop(0)

    def shutdown(self):
        self.shutdowns += 1


def test_ray_client_connect_retries_only_the_proxys_start_failure(capsys):
    from kappa_rllib.cli.ray_session import connect_ray_client as _connect_ray_client

    start_failure = ConnectionAbortedError("Initialization failure from server: RuntimeError: Starting Ray client "
                                           "server failed. See ray_client_server_23000.err for detailed logs.")
    ray = _FlakyRay(start_failure, start_failure)
    _connect_ray_client(ray, "ray://head:10001")
    assert (ray.inits, ray.shutdowns) == (3, 2)
    assert capsys.readouterr().err.count("failed to start; retrying") == 2
    # the server process died while the proxy read its command line (CI, ray-project/ray#63202)
    zombie = ConnectionAbortedError(
        "Initialization failure from server: Traceback (most recent call last): File \"proxier.py\", line 765, "
        "in Datapath if not self.proxy_manager.start_specific_server( File \"proxier.py\", line 396, in "
        "start_specific_server cmd = psutil_proc.cmdline() psutil.ZombieProcess: PID still exists but it's a "
        "zombie (pid=26090)")
    ray = _FlakyRay(zombie)
    _connect_ray_client(ray, "ray://head:10001")
    assert (ray.inits, ray.shutdowns) == (2, 1)
    ray = _FlakyRay(start_failure, start_failure, start_failure)
    with pytest.raises(ConnectionError, match="Starting Ray client server failed"):
        _connect_ray_client(ray, "ray://head:10001")  # three tries, then the error
    assert ray.inits == 3
    ray = _FlakyRay(ConnectionError("token authentication failed"))
    with pytest.raises(ConnectionError, match="token"):
        _connect_ray_client(ray, "ray://head:10001")  # any other error: no retry
    assert (ray.inits, ray.shutdowns) == (1, 0)


def test_ray_address_from_the_environment_is_checked_and_named(files, monkeypatch, capsys):
    """Without --address, RAY_ADDRESS (set in `ray job submit` entrypoints) picks the cluster."""
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert main(DQN + ["--output", str(files / "out")]) == 2
    assert "kappa-rllib: error: RAY_ADDRESS 127.0.0.1:1: nothing answers at 127.0.0.1:1" in capsys.readouterr().err


@pytest.mark.parametrize("config, message", [
    (lambda: KappaPIDQNConfig().training(kappa=True), "kappa must lie in [0, 1], got True"),
    (lambda: KappaPIDQNConfig().training(train_batch_size=0), "train_batch_size must be an int >= 1, got 0"),
    (lambda: KappaPIDQNConfig().training(lr=-1.0), "lr must be a number > 0, got -1.0"),
    (lambda: KappaPIDQNConfig().training(env_steps_per_iteration=0), "env_steps_per_iteration must be an int >= 1"),
    (lambda: KappaPIDQNConfig().training(target_network_update_freq=0), "target_network_update_freq must be an int"),
    (lambda: KappaPIDQNConfig().training(episodic_life="yes"), "episodic_life must be true or false, got 'yes'"),
    (lambda: KappaPIDQNConfig().training(replay_frames_on_device="gpu"),
     "replay_frames_on_device must be true, false or \"auto\" (the learner's device when it is a GPU), got 'gpu'"),
    (lambda: KappaPIDQNConfig().training(replay_frames_on_device=True).learners(num_learners=2),
     "replay_frames_on_device=True needs the learner in the driver's process (num_learners=0), got num_learners=2"),
    (lambda: KappaPIDQNConfig().training(total_env_steps=20_000, num_steps_sampled_before_learning_starts=20_000),
     "num_steps_sampled_before_learning_starts=20000 is not below total_env_steps=20000"),
    (lambda: KappaPIDQNConfig().training(replay_buffer_config={"type": "UniformReplayBuffer", "capacity": 8}),
     "replay_buffer_config['capacity']=8 is smaller than train_batch_size=32"),
    (lambda: KappaPIDQNConfig().env_runners(num_env_runners=-1), "num_env_runners must be an int >= 0, got -1"),
    (lambda: KappaPITRPOConfig().training(c_fa=1.0), "c_fa must lie in the open interval (0, 1), got 1.0"),
    (lambda: TRPOConfig().training(vf_lr=0.0), "vf_lr must be a number > 0, got 0.0"),
    (lambda: TRPOConfig().training(total_env_steps=100), "total_env_steps=100 is less than one batch"),
])
def test_bad_api_settings_raise_one_line_value_errors(config, message):
    env = "CartPole-v1"
    with pytest.raises(ValueError) as e:
        config().environment(env).validate()
    assert message in str(e.value) and "\n" not in str(e.value)


def _cli(args, **kw):
    return subprocess.run(CLI + args, capture_output=True, text=True, **kw)


RUN = DQN + ["--kappa", "0.84", "--c-fa", "0.2", "--total-steps", "8000", "--seed", "3", "--num-cpus", "1",
             "--checkpoint-every", "1", "--config", "{preset}"]


def _final(run_dir: Path) -> dict:
    rows = [json.loads(line) for line in (run_dir / "result.json").read_text().splitlines()]
    assert [r["training_iteration"] for r in rows] == list(range(1, len(rows) + 1))  # none lost, none twice
    return rows[-1]


@pytest.fixture
def preset(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text("training:\n  env_steps_per_iteration: 1000\n  num_steps_sampled_before_learning_starts: 500\n"
                    "  replay_buffer_config: {type: UniformReplayBuffer, capacity: 20000}\n"
                    "rl_module:\n  model_config: {fcnet_hiddens: [32], head_fcnet_hiddens: []}\n")
    return str(path)


@pytest.mark.learning
def test_sigint_checkpoints_and_resume_ends_exactly_like_an_uninterrupted_run(tmp_path, preset):
    args = [a.replace("{preset}", preset) for a in RUN]
    # the uninterrupted run, side by side with the one that is cut (two processes, two embedded Rays)
    whole = subprocess.Popen(CLI + args + ["--output", str(tmp_path / "whole")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    proc = subprocess.Popen(CLI + args + ["--output", str(tmp_path / "cut")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if "steps     3000/8000" in line:
            proc.send_signal(signal.SIGINT)  # mid-run
            break
    out, err = proc.communicate(timeout=300)
    whole_err = whole.communicate(timeout=600)[1]
    assert whole.returncode == 0, whole_err[-3000:]
    assert proc.returncode == 130, err[-3000:]
    assert "stopped by SIGINT" in err and "resume with: kappa-rllib train --resume" in err
    assert "Traceback" not in err
    (run_dir,) = (tmp_path / "cut").iterdir()
    stopped_at = checkpoints.check(checkpoints.latest(run_dir))
    assert 3000 <= stopped_at["env_steps"] < 8000

    resumed = _cli(["train", "--resume", os.path.relpath(run_dir), "--num-cpus", "1"], timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (whole_dir,) = (tmp_path / "whole").iterdir()
    a, b = _final(whole_dir), _final(run_dir)
    assert b["env_runners"]["num_env_steps_sampled_lifetime"] == a["env_runners"]["num_env_steps_sampled_lifetime"] == 8000
    for key in ("iteration", "num_iterations", "phase", "theta_updates", "phi_updates", "env_steps",
                "last_theta_target_sync", "phi_updates_at_last_target_sync"):
        assert b["kappa"][key] == a["kappa"][key], key
    manifests = [checkpoints.check(checkpoints.latest(d)) for d in (whole_dir, run_dir)]
    assert manifests[0]["env_steps"] == manifests[1]["env_steps"] == 8000
    # the replay buffers hold the same number of transitions (read from the checkpoints)
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        sizes = []
        for d in (whole_dir, run_dir):
            algo = checkpoints.load(d)
            sizes.append(len(algo.local_replay_buffer))
            algo.stop()
        assert sizes[0] == sizes[1] == 8000
    finally:
        ray.shutdown()
    again = _cli(["train", "--resume", str(run_dir)], timeout=120)
    assert again.returncode == 0 and "is complete" in again.stdout


KILL_MID_SAVE = """
import sys, time, ray
from kappa_rllib import KappaPIDQNConfig, checkpoints
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
algo = (KappaPIDQNConfig().environment("CartPole-v1")
        .training(total_env_steps=2000, env_steps_per_iteration=500, num_steps_sampled_before_learning_starts=100)
        .rl_module(model_config={"fcnet_hiddens": [8], "head_fcnet_hiddens": []}).build_algo())
algo.train()
checkpoints.save_atomic(algo, sys.argv[1])
print("saved", flush=True)
algo.train()
real = checkpoints.write_manifest
checkpoints.write_manifest = lambda path, a: (print("saving", flush=True), time.sleep(60), real(path, a))
checkpoints.save_atomic(algo, sys.argv[1])
"""


@pytest.mark.learning
def test_a_save_killed_midway_leaves_the_previous_checkpoint_loadable(tmp_path):
    folder = tmp_path / "checkpoints"
    proc = subprocess.Popen([sys.executable, "-c", KILL_MID_SAVE, str(folder)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    lines = []
    for line in proc.stdout:
        lines.append(line.strip())
        if line.strip() == "saving":  # the second save has written its files, not its manifest
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    assert lines[-2:] == ["saved", "saving"]
    assert any(p.name.startswith(".tmp_") for p in folder.iterdir())  # the torn save, never renamed
    good = checkpoints.latest(tmp_path)  # the run folder holding checkpoints/
    assert good.name == "checkpoint_000001"
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("checkpoint_")) == ["checkpoint_000001"]
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        algo = checkpoints.load(folder / "checkpoint_000001")
        assert algo.iteration == 1
        algo.stop()
    finally:
        ray.shutdown()


def _fake_checkpoint(path: Path) -> Path:
    """A manifest-bearing folder shaped like a checkpoint (no real state: never unpickled)."""
    path.mkdir(parents=True)
    (path / "algorithm_state.pkl").write_bytes(b"\x80\x04" + b"x" * 100)
    (path / "rllib_checkpoint.json").write_text("{}")
    manifest = {"package": "kappa-rllib", "format": 1, "algorithm": "KappaPIDQN", "training_iteration": 3,
                "env_steps": 300, "files": {"algorithm_state.pkl": 102, "rllib_checkpoint.json": 2}}
    (path / checkpoints.MANIFEST).write_text(json.dumps(manifest))
    return path


def test_damaged_or_foreign_checkpoints_are_refused_before_unpickling(tmp_path, monkeypatch):
    good = _fake_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint_000003")
    assert checkpoints.check(good)["training_iteration"] == 3
    monkeypatch.chdir(tmp_path)
    assert checkpoints.latest("run") == good  # a relative run folder
    assert checkpoints.latest("run/checkpoints/checkpoint_000003") == good  # a relative checkpoint

    truncated = _fake_checkpoint(tmp_path / "truncated")
    (truncated / "algorithm_state.pkl").write_bytes(b"\x80\x04xx")
    with pytest.raises(checkpoints.CheckpointError, match="algorithm_state.pkl has 4 bytes, the save wrote 102"):
        checkpoints.check(truncated)
    foreign = tmp_path / "foreign"
    shutil.copytree(truncated, foreign)
    (foreign / checkpoints.MANIFEST).unlink()
    with pytest.raises(checkpoints.CheckpointError, match="is not a kappa-rllib checkpoint"):
        checkpoints.check(foreign)
    other = _fake_checkpoint(tmp_path / "other")
    (other / checkpoints.MANIFEST).write_text(json.dumps({"package": "someone-else", "files": {}}))
    with pytest.raises(checkpoints.CheckpointError, match="is not kappa-rllib's"):
        checkpoints.check(other)
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / checkpoints.MANIFEST).write_text("{not json")
    with pytest.raises(checkpoints.CheckpointError, match="unreadable"):
        checkpoints.check(tmp_path / "garbage")
    # a newer damaged checkpoint is skipped for the older complete one
    newer = _fake_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint_000004")
    (newer / "algorithm_state.pkl").write_bytes(b"")
    assert checkpoints.latest(tmp_path / "run") == good
    # and `train --resume` on a run with only a damaged one: one line, exit 2
    run = tmp_path / "run2"
    _fake_checkpoint(run / "checkpoints" / "checkpoint_000001")
    (run / "checkpoints" / "checkpoint_000001" / "algorithm_state.pkl").write_bytes(b"garbage")
    (run / "run.json").write_text(json.dumps({"algo": "kappa-pi-dqn", "total_env_steps": 1000, "finished": False}))
    proc = _cli(["train", "--resume", str(run)], timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no complete kappa-rllib checkpoint" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.learning
def test_a_killed_env_runner_is_restarted_and_explores_at_the_global_step():
    """2 remote EnvRunners, one SIGKILLed mid-run: it is restarted, training goes on to T, the
    results report the restart, and the new runner's epsilon follows the global env-step count
    (a fresh runner counting its own steps would explore with epsilon 1.0)."""
    import ray
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS

    ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False)
    try:
        algo = (KappaPIDQNConfig().environment("CartPole-v1")
                .training(kappa=0.84, c_fa=0.2, total_env_steps=12000, env_steps_per_iteration=1000,
                          num_steps_sampled_before_learning_starts=200, epsilon=[[0, 1.0], [4000, 0.1]])
                .rl_module(model_config={"fcnet_hiddens": [16], "head_fcnet_hiddens": []})
                .env_runners(num_env_runners=2)
                .fault_tolerance(restart_failed_env_runners=True)
                .debugging(seed=0)).build_algo()
        for _ in range(3):
            algo.train()
        victim_id, victim = next(iter(algo.env_runner_group._worker_manager._actors.items()))
        pid = ray.get(victim.apply.remote(lambda runner: os.getpid()))
        os.kill(pid, signal.SIGKILL)
        results = [algo.train()]  # goes on with one runner; RLlib marks the other unhealthy
        # Ray restarts the killed runner, a fresh process importing torch and RLlib: on a busy machine
        # that takes longer than the rest of this short schedule, so wait for it (RLlib's own probe)
        deadline = time.monotonic() + 240
        while algo.env_runner_group.num_healthy_remote_env_runners() < 2 and time.monotonic() < deadline:
            time.sleep(2)
            algo.restore_env_runners(algo.env_runner_group)
        while not results[-1].get("done"):
            results.append(algo.train())
        assert results[-1][ENV_RUNNER_RESULTS]["num_env_steps_sampled_lifetime"] == 12000  # T exactly
        assert results[-1]["env_runner_restarts"] == 1 and results[-1]["healthy_env_runners"] == 2
        new_pid = ray.get(algo.env_runner_group._worker_manager._actors[victim_id].apply.remote(
            lambda runner: os.getpid()))
        assert new_pid != pid
        epsilons = algo.env_runner_group.foreach_env_runner(lambda r: getattr(r, "last_epsilon", None),
                                                           local_env_runner=False)
        for t, epsilon in epsilons:
            assert t >= 3000 and epsilon == pytest.approx(0.1)  # past the schedule's end, not 1.0
        algo.stop()
    finally:
        ray.shutdown()


@pytest.mark.parametrize("args, expected", [
    (["evaluate", "{tmp}/no/such/path"], "no checkpoint or run folder at {tmp}/no/such/path"),
    (["evaluate", "{tmp}/a_file"], "{tmp}/a_file is a file, not a checkpoint or run folder"),
    (["train", "--resume", "{tmp}/no/such/run"], "--resume: {tmp}/no/such/run is not a `kappa-rllib train` run folder"),
])
def test_a_missing_checkpoint_says_what_was_expected_and_names_the_path_once(files, args, expected, capsys):
    args = [a.replace("{tmp}", str(files)) for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("kappa-rllib: error: " + expected.replace("{tmp}", str(files))), err
    assert err.count(str(files)) == 1 and len(err.splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    # C_FA is out of range and T is below one batch: the user hears of C_FA (its own range) first
    (["train", "--algo", "kappa-pi-trpo", "--env", "Pendulum-v1", "--c-fa", "1.5", "--total-steps", "1000"],
     "c_fa must lie in the open interval (0, 1), got 1.5"),
    (["train", "--algo", "kappa-vi-trpo", "--env", "Pendulum-v1", "--kappa", "-0.5", "--total-steps", "1000"],
     "kappa must lie in [0, 1], got -0.5"),
    # kappa out of range and the CartPole preset's learning start (1,000) not below T: kappa first
    (DQN + ["--kappa", "1.2", "--total-steps", "500"], "kappa must lie in [0, 1], got 1.2"),
    # three wrong settings: all three, in one line
    (["train", "--algo", "kappa-pi-trpo", "--env", "Pendulum-v1", "--c-fa", "1.5", "--kappa", "2", "--gamma", "1",
      "--total-steps", "1000"],
     "3 settings are wrong: gamma must lie in [0, 1), got 1.0; kappa must lie in [0, 1], got 2.0; "
     "c_fa must lie in the open interval (0, 1), got 1.5"),
])
def test_each_setting_s_own_range_comes_before_relations_between_settings(args, message, capsys, tmp_path):
    assert main(args + ["--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"kappa-rllib: error: {message}\n"


def test_the_api_reports_own_ranges_first_and_all_at_once():
    config = KappaPITRPOConfig().environment("Pendulum-v1").training(c_fa=1.5, total_env_steps=1000)
    with pytest.raises(ValueError, match=r"^c_fa must lie in the open interval \(0, 1\), got 1.5$"):
        config.validate()
    config = KappaPIDQNConfig().environment("CartPole-v1").training(kappa=2.0, lr=-1.0, train_batch_size=0)
    with pytest.raises(ValueError) as e:
        config.validate()
    assert str(e.value).startswith("3 settings are wrong: ") and all(
        m in str(e.value) for m in ("train_batch_size must be an int >= 1, got 0", "kappa must lie in [0, 1], got 2.0",
                                    "lr must be a number > 0, got -1.0"))
    # once each is in range, the relation is the one left
    config.training(kappa=0.84, lr=1e-4, train_batch_size=32, total_env_steps=5_000)
    with pytest.raises(ValueError, match="num_steps_sampled_before_learning_starts=10000 is not below"):
        config.validate()


def test_replay_rings_that_would_not_fit_the_gpu_are_refused_before_ray_starts(monkeypatch):
    """A GPU learner keeps an Atari replay's frames in a ring on the GPU (`replay_frames_on_device="auto"`): 0.72
    GiB for the paper's 100k transitions (110,256 frames of 84x84). `tune --gpus-per-trial 0.25` packs 4 trials on a
    GPU: a GPU with 2 GiB free cannot hold their rings, and the check says so in one line naming the settings that
    fix it; 2 trials a GPU, one `train` run, or the frames in host memory, fit. The free memory is nvidia-smi's: the
    driver makes no CUDA context (it would hold ~0.4 GiB of the GPU its trials share)."""
    import torch

    from kappa_rllib import presets, resources

    monkeypatch.setattr(resources, "_local_gpus", lambda: 1)
    monkeypatch.setattr(resources, "_gpu_free_bytes", lambda: 2 * 2**30)  # (nvidia-smi's figure)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: pytest.fail("a CUDA context in the driver"))

    def atari(share, **training):
        config = presets.apply(KappaPIDQNConfig(), presets.load(presets.preset_for("ALE/Breakout-v5")))
        return config.environment("ALE/Breakout-v5").learners(num_gpus_per_learner=share).training(**training)

    assert resources.replay_ring_on_gpu(atari(0.25)) == 110_256 * 84 * 84
    with pytest.raises(ValueError) as e:
        resources.check_embedded("grid 'atari': a trial", atari(0.25), 16)
    assert str(e.value) == (
        "grid 'atari': a trial: the replay's frame ring needs 0.72 GiB of GPU memory a run, 2.90 GiB for 4 runs "
        "sharing a GPU (0.25 each), and the GPU has 2.00 GiB free: lower replay_buffer_config['capacity'] or set "
        "replay_frames_on_device=False (frames LZ4-compressed in host memory)")
    resources.check_embedded("a trial", atari(0.5), 16)  # 1.45 GiB: fits
    resources.check_embedded("--algo kappa-pi-dqn", atari(0.25), 16, in_driver=True)  # `train`: one run, 0.72 GiB
    monkeypatch.setattr(resources, "_gpu_free_bytes", lambda: None)  # no nvidia-smi: left to the ring's own check
    resources.check_embedded("a trial", atari(0.25), 16)
    resources.check_embedded("a trial", atari(0.25, replay_frames_on_device=False), 16)  # host memory
    assert resources.replay_ring_on_gpu(atari(0.0)) == 0  # a CPU learner: LZ4 in host memory ("auto")
    cartpole = KappaPIDQNConfig().environment("CartPole-v1").learners(num_gpus_per_learner=1)
    assert resources.replay_ring_on_gpu(cartpole) == 0  # no image stacks, no ring
