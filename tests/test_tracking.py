"""`--track wandb` / `--track mlflow` (kappa_rllib.tracking), both offline: W&B's offline mode (its run
files read back record by record), MLflow's local SQLite store (read back with MLflow's own search)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "kappa_rllib.cli"]
OFFLINE = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "MLFLOW_TRACKING_URI": ""}


def wandb_records(path: Path):
    """The protobuf records of a W&B run file (`run-ID.wandb`): a 7-byte header (":W&B", magic, version),
    then LevelDB's log format (32 KiB blocks; per record a 7-byte header: CRC, length, type
    1 full / 2 first / 3 middle / 4 last)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:8]
    i, buf, block = 7, b"", 32768
    while i + 7 <= len(data):
        left = block - i % block
        if left < 7:  # a block's tail too short for a header is padding
            i += left
            continue
        length, kind = int.from_bytes(data[i + 4:i + 6], "little"), data[i + 6]
        if kind == 0:  # zeros to the end of the block
            i += left
            continue
        chunk, i = data[i + 7:i + 7 + length], i + 7 + length
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(buf)
            yield record


def wandb_run(folder: Path) -> tuple[dict, list[dict]]:
    """(config, history rows) of the offline W&B run in `folder` (an offline-run-* folder)."""
    (run_file,) = folder.glob("run-*.wandb")
    config, history = {}, []
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            config.update({i.key: json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item})
    return config, history


def mlflow_runs(db: Path, experiment: str):
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}")
    (exp,) = [e for e in client.search_experiments() if e.name == experiment]
    return client, client.search_runs([exp.experiment_id])


def result_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "result.json").read_text().splitlines()]


def test_track_settings_are_checked_in_one_line(tmp_path, monkeypatch):
    from kappa_rllib import tracking

    assert tracking.parse("wandb, MLflow,wandb") == ["wandb", "mlflow"]
    with pytest.raises(ValueError, match=r"^--track 'tensorboard': choose from wandb, mlflow"):
        tracking.parse("tensorboard")
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match=r"^--track mlflow: the mlflow package is not installed; "
                                         r"pip install 'kappa-rllib\[track\]'$"):
        tracking.check_installed(["mlflow"])
    assert tracking.with_phase_index({"kappa": {"phase": "evaluation"}})["kappa"]["phase_index"] == 1
    out = subprocess.run([*CLI, "train", "--algo", "dqn", "--env", "CartPole-v1", "--track", "neptune",
                          "--output", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "kappa-rllib: error: --track 'neptune': choose from wandb, mlflow (comma-separated for both)"]


@pytest.mark.learning
def test_train_logs_each_iteration_to_wandb_and_mlflow_offline(tmp_path):
    out = subprocess.run([*CLI, "train", "--algo", "kappa-pi-dqn", "--env", "CartPole-v1", "--kappa", "0.68",
                          "--total-steps", "3000", "--num-cpus", "1", "--output", str(tmp_path),
                          "--track", "wandb,mlflow", "--track-project", "kt"],
                         capture_output=True, text=True, cwd=ROOT, env=OFFLINE, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("kappa-pi-dqn_")]
    rows = result_rows(run_dir)
    assert len(rows) >= 2

    (wandb_folder,) = (tmp_path / "wandb").glob("offline-run-*")
    config, history = wandb_run(wandb_folder)
    assert (config["kappa"], config["seed"]) == (0.68, 0) and "c_fa" in config
    assert [h["_step"] for h in history] == [r["training_iteration"] for r in rows]
    assert [h["kappa/iteration"] for h in history] == [r["kappa"]["iteration"] for r in rows]
    assert [h["kappa/phase"] for h in history] == [r["kappa"]["phase"] for r in rows]
    assert [h["env_runners/num_env_steps_sampled_lifetime"] for h in history] == [
        r["env_runners"]["num_env_steps_sampled_lifetime"] for r in rows]

    client, (run,) = mlflow_runs(tmp_path / "mlflow.db", "kt")
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    assert float(run.data.params["kappa"]) == 0.68 and run.data.params["seed"] == "0"
    iterations = client.get_metric_history(run.info.run_id, "kappa/iteration")
    assert [(m.step, m.value) for m in iterations] == [(r["training_iteration"], r["kappa"]["iteration"]) for r in rows]
    assert "kappa/phase_index" in run.data.metrics


@pytest.mark.learning
def test_tune_logs_each_trial_to_wandb_and_mlflow_offline(tmp_path):
    file = tmp_path / "tracked.py"
    file.write_text(textwrap.dedent("""\
        from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

        def experiments(smoke=False):
            return paper_grids("dqn", "CartPole-v1", kappas=[0.68, 0.84], c_fa=[0.2], num_seeds=1, variants=("pi",),
                               baseline=False, **{**SMOKE_SETTINGS["dqn"], "total_env_steps": 1500})
        """))
    out = subprocess.run([*CLI, "tune", str(file), "--storage", str(tmp_path / "results"), "--num-cpus", "2",
                          "--track", "wandb,mlflow", "--track-project", "kt"],
                         capture_output=True, text=True, cwd=ROOT, env=OFFLINE, timeout=400)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    grid_dir = tmp_path / "results" / "tracked" / "kappa_pi_dqn"
    trials = {json.loads((p / "params.json").read_text())["kappa"]: result_rows(p)
              for p in grid_dir.iterdir() if (p / "result.json").is_file()}
    assert sorted(trials) == [0.68, 0.84]

    runs = [wandb_run(folder) for folder in (grid_dir / "wandb").glob("offline-run-*")]
    assert sorted(config["kappa"] for config, _ in runs) == [0.68, 0.84]
    for config, history in runs:
        rows = trials[config["kappa"]]
        assert (config["c_fa"], config["seed"]) == (0.2, 0)
        assert [h["kappa/iteration"] for h in history] == [r["kappa"]["iteration"] for r in rows]
        assert [h["kappa/phase_index"] for h in history] == [
            {"improvement": 0, "evaluation": 1, "done": 2}[r["kappa"]["phase"]] for r in rows]

    client, runs = mlflow_runs(grid_dir / "mlflow.db", "kt")
    assert sorted(float(r.data.params["kappa"]) for r in runs) == [0.68, 0.84]
    for run in runs:
        rows = trials[float(run.data.params["kappa"])]
        history = client.get_metric_history(run.info.run_id, "kappa/iteration")
        assert [m.value for m in history] == [r["kappa"]["iteration"] for r in rows]
