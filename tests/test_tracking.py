"""`--track wandb` / `--track mlflow` (kappa_rllib.tracking), both offline: W&B's offline mode (its run
files read back record by record), MLflow's local SQLite store (read back with MLflow's own search)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from kappa_rllib.tuning.tracking import wandb_records

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "kappa_rllib.cli"]
OFFLINE = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "MLFLOW_TRACKING_URI": ""}
STEP = "env_runners/num_env_steps_sampled_lifetime"  # RLlib's ENV_RUNNER_RESULTS / NUM_ENV_STEPS_SAMPLED_LIFETIME


def wandb_run(folder: Path, with_axes: bool = False):
    """(config, history rows) of the offline W&B run in `folder` (an offline-run-* folder); `with_axes`:
    also {metric name or glob: its step metric} (`define_metric`)."""
    (run_file,) = folder.glob("run-*.wandb")
    config, history, axes = {}, [], {}
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            config.update({i.key: json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item})
        elif kind == "metric":
            axes[record.metric.name or record.metric.glob_name] = record.metric.step_metric or None
    return (config, history, axes) if with_axes else (config, history)


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
        "kappa-rllib: error: --track 'neptune': choose from wandb, mlflow (comma-separated for both; a bare "
        "--track is wandb)"]


@pytest.mark.parametrize("verb", [["train", "--algo", "dqn"], ["tune", "tune_configs/small/cartpole_dqn.py"]])
def test_a_bare_track_is_wandb(verb, monkeypatch):
    """CleanRL's `--track`: W&B; `--track mlflow`, `--track wandb,mlflow`, `--track-project` and
    `--wandb-entity` (else WANDB_ENTITY) on `train` and `tune` alike."""
    from kappa_rllib.cli import build_parser
    from kappa_rllib.cli.common import check_track

    monkeypatch.delenv("WANDB_ENTITY", raising=False)
    parser = build_parser()
    assert parser.parse_args([*verb, "--track"]).track == "wandb"
    args = parser.parse_args([verb[0], "--track", "--track-project", "p", "--wandb-entity", "team", *verb[1:]])
    check_track(args)
    assert (args.track, args.track_project, args.wandb_entity) == (["wandb"], "p", "team")
    args = parser.parse_args([*verb, "--track", "wandb,mlflow"])
    check_track(args)
    assert (args.track, args.track_project, args.wandb_entity) == (["wandb", "mlflow"], None, None)
    assert parser.parse_args(verb).track is None


def test_a_bare_track_before_a_positional_does_not_take_it_as_its_value():
    """`kappa-rllib tune --track FILE.py` and `train --track file CONFIG.py`: the next word is the file,
    not a back-end (before: "the following arguments are required: file"); a back-end, or a typo of one,
    stays the value (a typo gets tracking.parse's one line)."""
    from kappa_rllib.cli import build_parser
    from kappa_rllib.cli.common import bare_track

    parser = build_parser()
    args = parser.parse_args(bare_track(["tune", "--track", "tune_configs/small/cartpole_dqn.py", "--smoke"]))
    assert (args.track, args.file) == ("wandb", "tune_configs/small/cartpole_dqn.py")
    args = parser.parse_args(bare_track(["train", "--track", "file", "cfg.py"]))
    assert (args.track, args.target) == ("wandb", ["file", "cfg.py"])
    assert bare_track(["tune", "f.py", "--track", "mlflow"]) == ["tune", "f.py", "--track", "mlflow"]
    assert bare_track(["tune", "f.py", "--track", "wandb,mlflow"])[-1] == "wandb,mlflow"
    assert bare_track(["tune", "f.py", "--track", "wanbd"])[-1] == "wanbd"  # a typo: parse's one line
    assert bare_track(["train", "--track", "neptune", "--algo", "dqn"])[2] == "neptune"
    assert bare_track(["tune", "f.py", "--track"]) == ["tune", "f.py", "--track"]


def test_wandb_entity_defaults_to_wandb_entity(monkeypatch):
    from kappa_rllib import tracking

    monkeypatch.setenv("WANDB_ENTITY", "lab")
    assert tracking.entity(None) == "lab" and tracking.entity("me") == "me"


def test_metrics_leave_the_config_out_and_put_the_return_first():
    """The config RLlib copies into every result is no metric (it is the run's config / params, once), nor are
    the library versions; the env steps, the return, the kappa phase and the timers come first."""
    from kappa_rllib import tracking

    result = {"config": {"_disable_preprocessor_api": False, "lr": 0.1, "model": {"fcnet_hiddens": [64]}},
              "versions": {"python": "3.11.7", "ray": "2.60.0"},  # a stretch's first row (kappa_rllib.versions)
              "learners": {"default_policy": {"qf_loss": 0.5}}, "hostname": "vm", "pid": 7, "done": False,
              "timers": {"training_step": 0.2}, "training_iteration": 3,
              "kappa": {"iteration": 2, "num_iterations": 9, "phase": "evaluation"},
              "env_runners": {"episode_return_mean": 21.5, "num_env_steps_sampled_lifetime": 7500, "returns": [1, 2]}}
    logged = tracking.metrics(result)
    assert list(logged)[:6] == ["env_runners/num_env_steps_sampled_lifetime", "env_runners/episode_return_mean",
                                "kappa/phase", "kappa/phase_index", "kappa/iteration", "kappa/num_iterations"]
    assert list(logged)[6] == "timers/training_step"
    assert not [k for k in logged if k.startswith("config")]
    assert set(logged) == {"env_runners/num_env_steps_sampled_lifetime", "env_runners/episode_return_mean",
                           "kappa/phase", "kappa/phase_index", "kappa/iteration", "kappa/num_iterations",
                           "timers/training_step", "learners/default_policy/qf_loss", "training_iteration"}
    assert "kappa/phase" not in tracking.metrics(result, numbers_only=True)
    assert tracking.env_steps(result) == 7500
    assert tracking.step_key() == "env_runners/num_env_steps_sampled_lifetime"
    assert tracking.params(result["config"]) == {"_disable_preprocessor_api": False, "lr": 0.1,
                                                 "model/fcnet_hiddens": [64]}


FILE_STORE_LINE = ("kappa-rllib: error: --track mlflow: MLFLOW_TRACKING_URI '{uri}' is MLflow's file store, which "
                   "MLflow 3 refuses unless MLFLOW_ALLOW_FILE_STORE=true; set that, give a database "
                   "(sqlite:///PATH/mlflow.db), or unset MLFLOW_TRACKING_URI for <results>/mlflow.db")


@pytest.mark.parametrize("verb", [["train", "--algo", "dqn", "--env", "CartPole-v1", "--output"],
                                  ["tune", "tune_configs/small/cartpole_dqn.py", "--storage"]])
def test_an_mlflow_file_store_without_the_opt_in_stops_before_ray(verb, tmp_path, monkeypatch, capsys):
    """MLflow 3's FileStore raises unless MLFLOW_ALLOW_FILE_STORE=true (mlflow/store/tracking/file_store.py):
    one line and exit 2 before Ray starts, the results folder and the store not made."""
    import ray

    from kappa_rllib.cli import main, train, tune

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray started")

    monkeypatch.setattr(train, "start_ray", no_ray)
    monkeypatch.setattr(tune, "start_ray", no_ray)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    store, results = tmp_path / "mlruns", tmp_path / "results"
    for uri in (f"file://{store}", str(store)):  # a file: URI, a bare path
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        assert main([*verb, str(results), "--track", "mlflow"]) == 2
        out = capsys.readouterr()
        assert out.out == "" and out.err.splitlines() == [FILE_STORE_LINE.format(uri=uri)]
    assert list(tmp_path.iterdir()) == [] and not ray.is_initialized()


def test_the_mlflow_store_check(tmp_path, monkeypatch):
    from kappa_rllib import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file:{tmp_path}/mlruns")
    for allow in ("true", "TRUE", "1"):  # MLflow's opt-in, read as MLflow reads it
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", allow)
        tracking.check_store(["mlflow"])
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "yes")
    with pytest.raises(ValueError, match=r"^--track mlflow: MLFLOW_ALLOW_FILE_STORE='yes': MLflow reads true, "):
        tracking.check_store(["mlflow"])
    tracking.check_store(["wandb"])  # no MLflow, no check
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/no/such/mlflow.db")
    with pytest.raises(ValueError, match=r"the folder '.*/no/such' does not exist$"):
        tracking.check_store(["mlflow"])
    for uri in (f"sqlite:///{tmp_path}/mlflow.db", "http://localhost:5000", "", "databricks", "databricks-uc"):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        tracking.check_store(["mlflow"])
    assert list(tmp_path.iterdir()) == []


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

    steps = [r["env_runners"]["num_env_steps_sampled_lifetime"] for r in rows]
    (wandb_folder,) = (tmp_path / "wandb").glob("offline-run-*")
    config, history, axes = wandb_run(wandb_folder, with_axes=True)
    assert (config["algo"], config["kappa"], config["seed"]) == ("kappa-pi-dqn", 0.68, 0) and "c_fa" in config
    assert config["model/fcnet_hiddens"] == [256, 256]
    # every metric against env steps: the return, the kappa schedule
    assert axes == {STEP: None, "*": STEP}
    assert [(h[STEP], h["env_runners/episode_return_mean"]) for h in history] == [
        (s, r["env_runners"]["episode_return_mean"]) for s, r in zip(steps, rows)]
    assert [h["kappa/iteration"] for h in history] == [r["kappa"]["iteration"] for r in rows]
    assert [h["kappa/phase"] for h in history] == [r["kappa"]["phase"] for r in rows]
    assert not [k for h in history for k in h if k.startswith("config") or k in ("hostname", "pid", "date")]

    client, (run,) = mlflow_runs(tmp_path / "mlflow.db", "kt")
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    assert float(run.data.params["kappa"]) == 0.68 and run.data.params["seed"] == "0"
    assert run.data.params["algo"] == "kappa-pi-dqn" and run.data.params["model/fcnet_hiddens"] == "[256, 256]"
    assert not [k for k in run.data.metrics if k.startswith("config")]
    for name, value in [("kappa/iteration", lambda r: r["kappa"]["iteration"]),
                        ("env_runners/episode_return_mean", lambda r: r["env_runners"]["episode_return_mean"])]:
        history = client.get_metric_history(run.info.run_id, name)
        assert [(m.step, m.value) for m in history] == [(s, value(r)) for s, r in zip(steps, rows)]
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

    file_dir = grid_dir.parent  # one store for the file's grids (kappa_rllib.tuning.tracking)
    runs = [wandb_run(folder, with_axes=True) for folder in (file_dir / "wandb").glob("offline-run-*")]
    assert sorted(config["kappa"] for config, _, _ in runs) == [0.68, 0.84]
    for config, history, axes in runs:
        rows = trials[config["kappa"]]
        assert (config["c_fa"], config["seed"]) == (0.2, 0)
        assert axes == {STEP: None, "*": STEP}
        assert [(h[STEP], h["kappa/iteration"]) for h in history] == [
            (r["env_runners"]["num_env_steps_sampled_lifetime"], r["kappa"]["iteration"]) for r in rows]
        assert [h["kappa/phase_index"] for h in history] == [
            {"improvement": 0, "evaluation": 1, "done": 2}[r["kappa"]["phase"]] for r in rows]
        assert not [k for h in history for k in h if k.startswith("config")]

    client, runs = mlflow_runs(file_dir / "mlflow.db", "kt")
    assert sorted(float(r.data.params["kappa"]) for r in runs) == [0.68, 0.84]
    assert {r.data.tags["grid"] for r in runs} == {"kappa_pi_dqn"} and {r.info.status for r in runs} == {"FINISHED"}
    for run in runs:
        rows = trials[float(run.data.params["kappa"])]
        history = client.get_metric_history(run.info.run_id, "kappa/iteration")
        assert [(m.step, m.value) for m in history] == [
            (r["env_runners"]["num_env_steps_sampled_lifetime"], r["kappa"]["iteration"]) for r in rows]
        assert not [k for k in run.data.metrics if k.startswith("config")]


# ------------------------------------------------------------------------------------------ MLflow on --resume
def _as_if_killed_after_the_last_checkpoint(grid_dir: Path, *, only: str | None = None,
                                            lose_rows: bool = False) -> None:
    """A finished grid's Tune state rewritten as a driver killed between its trials' last checkpoint and Tune's
    next save of its state leaves it (test_seams.py::test_resume_keeps_a_trial_that_finished_after_tunes_last_
    state_finished): each trial (`only`: that one) RUNNING, pointed at its checkpoint before the final, live in
    the search state; `lose_rows`: its last row never reached storage either (--resume then goes on from that
    checkpoint instead of keeping the trial as finished)."""
    from ray import cloudpickle
    from ray.tune.experiment.trial import Trial

    state_file = max(grid_dir.glob("experiment_state-*.json"))
    state, faked = json.loads(state_file.read_text()), set()
    for row in state["trial_data"]:
        trial = Trial.from_json_state(row[0], stub=True)
        if only is not None and trial.trial_id != only:
            continue
        trial.restore_run_metadata(row[1])
        manager = trial.run_metadata.checkpoint_manager
        manager._latest_checkpoint_result = manager._checkpoint_results[0]  # two kept: the one before the final
        trial.run_metadata._cached_json = None
        row[1] = trial.run_metadata.get_json_state()
        row[0] = json.dumps({**json.loads(row[0]), "status": "RUNNING"})
        faked.add(trial.trial_id)
        if lose_rows:
            (result,) = grid_dir.glob(f"*_{trial.trial_id}_*/result.json")
            result.write_text("".join(result.read_text().splitlines(keepends=True)[:-1]))
    state_file.write_text(json.dumps(state))
    search_file = max(grid_dir.glob("basic-variant-state-*.json"))
    search = cloudpickle.loads(search_file.read_bytes())
    search["_live_trials"] = faked
    search_file.write_bytes(cloudpickle.dumps(search))


def _mlflow_axes(db: Path) -> tuple[dict, dict]:
    """{trial id: [runs]} of the store's `seams` experiment, and {run id: [(env steps, return)]} by env step."""
    client, runs = mlflow_runs(db, "seams")
    by_trial, axes = {}, {}
    for run in runs:
        by_trial.setdefault(run.data.tags["trial_id"], []).append(run)
        history = client.get_metric_history(run.info.run_id, "env_runners/episode_return_mean")
        axes[run.info.run_id] = sorted((m.step, m.value) for m in history)
    return by_trial, axes


@pytest.mark.learning
def test_track_mlflow_added_on_resume_logs_the_stored_rows_of_ended_trials_and_of_trials_going_on(tmp_path):
    """A grid of two trials run without tracking; one then as a kill leaves it (its last row lost: --resume goes
    on from its checkpoint before the final). `--resume --track mlflow`: the trial that had ended gets a run with
    all its rows at the first step, the one going on gets its rows up to its checkpoint as it starts, then the
    rest as it runs: one FINISHED run each, its env-step axis and values those of result.json's last timeline.
    A second --resume (nothing to run) adds no run and no row."""
    from test_seams import environment, run, seam_file, timeline, tune_args

    file, storage, ray_tmp = seam_file(tmp_path, seeds=2), tmp_path / "results", Path(f"/tmp/kt{os.getpid()}r")
    env, grid_dir = environment(ray_tmp), storage / "seams" / "dqn"
    args = tune_args(file, storage, "--grids", "dqn")
    out = run(args, env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    ended, going_on = sorted(result_rows(p.parent)[0]["trial_id"] for p in grid_dir.glob("*/result.json"))
    _as_if_killed_after_the_last_checkpoint(grid_dir, only=going_on, lose_rows=True)
    out = run([*args, "--resume", "--track", "mlflow", "--track-project", "seams"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]

    stored = {rows[0]["trial_id"]: timeline(rows) for rows in map(result_rows, (p.parent for p in
                                                                                grid_dir.glob("*/result.json")))}
    assert [r["training_iteration"] for r in stored[going_on]] == [1, 2, 3, 4]
    by_trial, axes = _mlflow_axes(storage / "seams" / "mlflow.db")
    assert sorted(by_trial) == sorted([ended, going_on])
    for trial_id, rows in stored.items():
        (mlflow_run,) = by_trial[trial_id]
        assert mlflow_run.info.status == "FINISHED" and mlflow_run.data.tags["grid"] == "dqn"
        assert mlflow_run.data.params["seed"] == str(rows[0]["config"]["seed"])
        assert axes[mlflow_run.info.run_id] == [(r[STEP.split("/")[0]][STEP.split("/")[1]],
                                                 r["env_runners"]["episode_return_mean"]) for r in rows]
    out = run([*args, "--resume", "--track", "mlflow", "--track-project", "seams"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    again, again_axes = _mlflow_axes(storage / "seams" / "mlflow.db")
    assert {t: [r.info.run_id for r in runs] for t, runs in again.items()} == {
        t: [r.info.run_id for r in runs] for t, runs in by_trial.items()} and again_axes == axes


@pytest.mark.learning
def test_resume_with_nothing_to_run_ends_the_mlflow_run_of_a_trial_kept_as_finished(tmp_path):
    """A driver killed after its trial's last row and checkpoint, before Tune saved its state and before MLflow
    heard of the trial's end: the run RUNNING, the state as test_seams fakes it. --resume keeps the trial as
    finished (kappa_rllib.tuning.repair) and has nothing to run, so Tune never steps: the run is ended
    (FINISHED) at the experiment's end, its rows not logged again."""
    from test_seams import environment, run, seam_file, tune_args

    file, storage, ray_tmp = seam_file(tmp_path), tmp_path / "results", Path(f"/tmp/kt{os.getpid()}e")
    env, grid_dir, db = environment(ray_tmp), storage / "seams" / "kappa_pi_dqn", storage / "seams" / "mlflow.db"
    args = tune_args(file, storage, "--grids", "kappa_pi_dqn", "--track", "mlflow", "--track-project", "seams")
    out = run(args, env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    client, (mlflow_run,) = mlflow_runs(db, "seams")
    client.update_run(mlflow_run.info.run_id, status="RUNNING")
    before = _mlflow_axes(db)[1]
    _as_if_killed_after_the_last_checkpoint(grid_dir)
    out = run([*args, "--resume"], env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert out.stderr.count("kept as finished") == 1, out.stderr[-3000:]
    client, (after,) = mlflow_runs(db, "seams")
    assert after.info.run_id == mlflow_run.info.run_id and after.info.status == "FINISHED"
    assert _mlflow_axes(db)[1] == before and len(before[after.info.run_id]) == 4


def _row(iteration, seconds, value=None, width=0):
    """A stored row: `width` numbers more (a real row has ~400)."""
    return {"training_iteration": iteration, "time_total_s": seconds, "timestamp": 1_700_000_000 + iteration,
            "env_runners": {"num_env_steps_sampled_lifetime": 500 * iteration,
                            "episode_return_mean": seconds if value is None else value},
            "learners": {f"m{i}": float(i) for i in range(width)}, "config": {"lr": 0.1}}


def _trial(folder: Path, trial_id, status, rows, checkpoint_at=None, grid_folder=None):
    """A stand-in for Tune's Trial: its result.json holds `rows` (in `folder`/`trial_id`); `grid_folder`: the grid's
    folder on storage (Tune's experiment_fs_path: what the storage key hashes), None: no storage key."""
    import pyarrow.fs

    (folder / trial_id).mkdir(parents=True)
    (folder / trial_id / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    storage = SimpleNamespace(trial_fs_path=str(folder / trial_id), storage_filesystem=pyarrow.fs.LocalFileSystem())
    if grid_folder is not None:
        storage.experiment_fs_path = str(grid_folder)
    return SimpleNamespace(
        trial_id=trial_id, status=status, config={"seed": 0}, checkpoint=checkpoint_at and object(),
        latest_checkpoint_result=SimpleNamespace(metrics={"training_iteration": checkpoint_at}), storage=storage)


def _history(uri: str, run_id: str, key: str = "env_runners/episode_return_mean") -> list[tuple]:
    import mlflow

    return sorted((m.step, m.value) for m in mlflow.MlflowClient(tracking_uri=uri).get_metric_history(run_id, key))


def test_mlflow_logs_a_trials_stored_rows_where_it_has_no_run_in_batches_of_1000_and_never_twice(tmp_path):
    """MLflowCallback without Ray: a trial going on from its checkpoint at iteration 3 with no run gets rows 1-3
    as it starts, an ended one all its rows (the last timeline) in a run ended at the first step; ~400 numbers a
    row, so in log_batch calls of at most 1000 metrics. A new driver's callback finds both runs in one search
    of the grid's runs and logs no row again (the runs lack none)."""
    from kappa_rllib.tuning.tracking import track_mlflow

    def row(iteration, seconds):
        return _row(iteration, seconds, width=398)

    def trial(name, status, rows, checkpoint_at=None):
        return _trial(tmp_path, name, status, rows, checkpoint_at)

    # ended: iterations 1-3, a rollback to 1, 2 and 3 again (the last timeline: 1, 2', 3')
    ended = trial("ended", "TERMINATED", [row(1, 1.0), row(2, 2.0), row(3, 3.0), row(2, 9.0), row(3, 10.0)])
    going_on = trial("going_on", "PENDING", [row(1, 1.0), row(2, 2.0), row(3, 3.0), row(4, 4.0)], checkpoint_at=3)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, _ = track_mlflow._store(uri)
    calls = []
    real = client.log_batch

    def log_batch(run_id, metrics=(), **kwargs):
        calls.append(len(metrics))
        return real(run_id, metrics=metrics, **kwargs)

    searches = []
    real_search = client.search_runs

    def search_runs(*args, **kwargs):
        searches.append(kwargs.get("filter_string"))
        return real_search(*args, **kwargs)

    client.log_batch, client.search_runs = log_batch, search_runs
    try:
        callback = track_mlflow.MLflowCallback(uri, "kt", "g")
        callback.setup()
        callback.on_step_begin(0, [ended, going_on])
        callback.log_trial_start(going_on)
        per_row = len(track_mlflow.metrics(row(1, 1.0), numbers_only=True))  # 402
        assert [n for n in calls if n] == [1000, 3 * per_row - 1000] * 2  # the params' calls: 0 metrics
        assert searches == ["tags.grid = 'g'"]
        store = track_mlflow.MLflowCallback(uri, "kt", "g")  # a new driver: nothing to run
        store.setup()
        calls.clear()
        store.on_experiment_end([ended, going_on])
        store.log_trial_start(going_on)
        assert sum(calls) == 0 and searches == ["tags.grid = 'g'"] * 2
    finally:
        del client.log_batch, client.search_runs
    mlflow_client, runs = mlflow_runs(tmp_path / "mlflow.db", "kt")
    by_trial = {r.data.tags["trial_id"]: r for r in runs}
    assert sorted(by_trial) == ["ended", "going_on"] and len(runs) == 2
    assert by_trial["ended"].info.status == "FINISHED" and by_trial["going_on"].info.status == "RUNNING"
    for name, expected in (("ended", [(500, 1.0), (1000, 9.0), (1500, 10.0)]),
                           ("going_on", [(500, 1.0), (1000, 2.0), (1500, 3.0)])):
        history = mlflow_client.get_metric_history(by_trial[name].info.run_id, "env_runners/episode_return_mean")
        assert sorted((m.step, m.value) for m in history) == expected
        assert {m.timestamp for m in history} == {1_700_000_001_000, 1_700_000_002_000, 1_700_000_003_000}
    assert "config/lr" not in by_trial["ended"].data.metrics and by_trial["ended"].data.params["seed"] == "0"

    # a driver stopped while it logged a trial's stored rows (its second batch never came): the run lacks row 3
    # (cut mid-row, its time_total_s, logged last of a row, not in), and the next driver logs it again
    cut = trial("cut", "TERMINATED", [row(1, 1.0), row(2, 2.0), row(3, 3.0)])
    stopped = track_mlflow.MLflowCallback(uri, "kt", "g")
    stopped.setup()
    batches = []

    def killed(run_id, metrics=(), **kwargs):
        if metrics:
            batches.append(len(metrics))
            if len(batches) == 2:
                raise KeyboardInterrupt  # the second Ctrl-C, mid-replay
        return real(run_id, metrics=metrics, **kwargs)

    client.log_batch = killed
    try:
        with pytest.raises(KeyboardInterrupt):
            stopped.on_experiment_end([cut])
    finally:
        del client.log_batch
    mlflow_client, runs = mlflow_runs(tmp_path / "mlflow.db", "kt")
    (run,) = [r for r in runs if r.data.tags["trial_id"] == "cut"]
    assert run.info.status == "RUNNING" and _history(uri, run.info.run_id, "time_total_s") == [(500, 1.0),
                                                                                                (1000, 2.0)]
    again = track_mlflow.MLflowCallback(uri, "kt", "g")
    again.setup()
    again.on_experiment_end([cut])
    mlflow_client, runs = mlflow_runs(tmp_path / "mlflow.db", "kt")
    (run,) = [r for r in runs if r.data.tags["trial_id"] == "cut"]
    assert run.info.status == "FINISHED"
    for key, values in (("env_runners/episode_return_mean", [1.0, 2.0, 3.0]), ("learners/m397", [397.0] * 3),
                        ("time_total_s", [1.0, 2.0, 3.0])):
        history = mlflow_client.get_metric_history(run.info.run_id, key)  # (m397: row 3's, after the cut)
        assert sorted((m.step, m.value) for m in history) == list(zip((500, 1000, 1500), values))


def test_mlflow_fills_the_rows_a_run_lacks_at_every_new_driver_as_wandb_does(tmp_path):
    """A trial's MLflow run holds rows 1-2; its result.json holds 1-4 (a driver that logged them was killed, or a
    --resume ran without --track mlflow). A new driver (--resume --track mlflow) fills the gap as W&B's callback
    does: a trial going on from its checkpoint at 3 gets row 3 as it starts (4 it logs again as it reruns it), an
    ended one rows 3 and 4 at the first step, then its end; a driver after that logs nothing. (Before: a trial
    with a run got no row again, its run's gap left for good.)"""
    from kappa_rllib.tuning.tracking import track_mlflow

    uri, grid_folder = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "file" / "g"
    rows = [_row(i, 1.5 * i) for i in (1, 2, 3, 4)]
    going_on = _trial(tmp_path, "t_00000", "PENDING", rows, grid_folder=grid_folder)
    ended = _trial(tmp_path, "t_00001", "PENDING", rows, grid_folder=grid_folder)
    first = track_mlflow.MLflowCallback(uri, "kt", "g")  # the driver that logged rows 1-2, then was killed
    first.setup()
    first.on_step_begin(0, [going_on, ended])
    for trial in (going_on, ended):
        first.log_trial_start(trial)
        for i, row in enumerate(rows[:2]):
            first.log_trial_result(i + 1, trial, row)
    runs = {t.trial_id: first._runs[t.trial_id] for t in (going_on, ended)}
    assert _history(uri, runs["t_00000"], "time_total_s") == [(500, 1.5), (1000, 3.0)]
    going_on.checkpoint, going_on.latest_checkpoint_result.metrics = object(), {"training_iteration": 3}
    ended.status = "TERMINATED"

    resumed = track_mlflow.MLflowCallback(uri, "kt", "g")
    resumed.setup()
    resumed.on_step_begin(0, [going_on, ended])
    resumed.log_trial_start(going_on)
    steps = [(500 * i, 1.5 * i) for i in (1, 2, 3, 4)]
    assert _history(uri, runs["t_00000"], "time_total_s") == steps[:3]
    assert _history(uri, runs["t_00001"], "time_total_s") == steps
    assert _history(uri, runs["t_00001"]) == steps  # (the return: the stored rows' own)
    client, found = mlflow_runs(tmp_path / "mlflow.db", "kt")
    assert len(found) == 2 and {r.info.run_id: r.info.status for r in found} == {
        runs["t_00000"]: "RUNNING", runs["t_00001"]: "FINISHED"}
    ended.last_result = rows[-1]  # a third driver: the ended trial's run whole, marked so: no history read
    third = track_mlflow.MLflowCallback(uri, "kt", "g")
    third.setup()
    third.on_step_begin(0, [ended])
    assert not third.lacking(ended, None)
    fourth = track_mlflow.MLflowCallback(uri, "kt", "g")
    fourth.setup()
    fourth._held = None  # not called: the run marked whole through the trial's last row
    fourth.on_step_begin(0, [ended])
    assert _history(uri, runs["t_00001"], "time_total_s") == steps


def _two_files(tmp_path):
    """Two files' grids of the same name (`kappa_pi_dqn`), each with a trial of the same id (abc12_00000) whose
    rows have the same env steps and times, other returns; and a trial of each in a grid `old_grid`."""
    folders = {name: tmp_path / "storage" / name / "kappa_pi_dqn" for name in ("a", "b")}
    rows = {"a": [_row(i, 1.5 * i, value=float(i)) for i in (1, 2, 3)],
            "b": [_row(i, 1.5 * i, value=100.0 + i) for i in (1, 2, 3)]}
    trials = {name: _trial(tmp_path / name, "abc12_00000", "PENDING", rows[name], grid_folder=folders[name])
              for name in ("a", "b")}
    old = {name: _trial(tmp_path / f"old_{name}", "old12_00000", "PENDING", rows[name][:1],
                        grid_folder=folders[name].with_name("old_grid")) for name in ("a", "b")}
    return rows, trials, old


def test_a_tracked_run_belongs_to_its_storage_in_mlflow(tmp_path):
    """Two files with a grid of the same name and a trial of the same id, tracked into one MLflow store: each
    trial has a run of its own (tagged with the grid's storage key) and neither takes the other's rows, on a first
    run and on a --resume (the key is the same for the same storage). A run made before storage keys (no tag) is
    taken by the storage that finds it first, and only by it. (Before: one run for both, b's rows in a's.)"""
    import pickle

    from kappa_rllib.tuning.tracking import storage_key, track_mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rows, trials, old = _two_files(tmp_path)
    assert storage_key(trials["a"]) != storage_key(trials["b"])
    assert storage_key(trials["a"]) == storage_key(_trial(tmp_path / "again", "x", "PENDING", [],
                                                          grid_folder=trials["a"].storage.experiment_fs_path))

    callbacks = {}
    for name, trial in trials.items():  # each file's driver: its trial runs iterations 1-2, then is stopped
        callback = callbacks[name] = track_mlflow.MLflowCallback(uri, "kt", "kappa_pi_dqn")
        callback.setup()
        callback.on_step_begin(0, [trial])
        callback.log_trial_start(trial)
        for i, row in enumerate(rows[name][:2]):
            callback.log_trial_result(i + 1, trial, row)
    for name, trial in trials.items():  # --resume of each: from its checkpoint at 2, then iteration 3
        trial.checkpoint, trial.latest_checkpoint_result.metrics = object(), {"training_iteration": 2}
        callback = pickle.loads(pickle.dumps(callbacks[name]))  # as Tune restores it from tuner.pkl
        callback.setup()
        callback.on_step_begin(0, [trial])
        callback.log_trial_start(trial)
        callback.log_trial_result(3, trial, rows[name][2])
        callback.log_trial_end(trial)
    client, runs = mlflow_runs(tmp_path / "mlflow.db", "kt")
    assert len(runs) == 2
    by_storage = {r.data.tags[track_mlflow.STORAGE_TAG]: r for r in runs}
    for name, trial in trials.items():
        run = by_storage[storage_key(trial)]
        assert run.data.tags["trial_id"] == "abc12_00000" and run.info.status == "FINISHED"
        assert _history(uri, run.info.run_id) == [(500 * i, r["env_runners"]["episode_return_mean"])
                                                  for i, r in zip((1, 2, 3), rows[name])]

    # a run from before storage keys: the first storage that looks for it takes it (tagged), the other makes its own
    legacy = track_mlflow.MLflowCallback(uri, "kt", "old_grid")
    legacy.log_trial_start(_trial(tmp_path / "old", "old12_00000", "PENDING", []))  # no storage key: no tag
    legacy.log_trial_result(1, old["a"], rows["a"][0])
    for name in ("a", "b"):
        callback = track_mlflow.MLflowCallback(uri, "kt", "old_grid")
        callback.log_trial_start(old[name])
        callback.log_trial_result(1, old[name], rows[name][0])
    client, runs = mlflow_runs(tmp_path / "mlflow.db", "kt")
    old_runs = {r.data.tags.get(track_mlflow.STORAGE_TAG): r.info.run_id for r in runs
                if r.data.tags["grid"] == "old_grid"}
    assert old_runs[storage_key(old["a"])] == legacy._runs["old12_00000"] and len(old_runs) == 2
    assert _history(uri, old_runs[storage_key(old["b"])]) == [(500, 101.0)]


def test_a_tracked_run_belongs_to_its_storage_in_wandb(tmp_path, monkeypatch):
    """The two files of the MLflow test, in one W&B project and one results folder (a bucket's storage: the
    driver's cwd): each trial's W&B run id is `<storage key>-<trial id>`, the same on a --resume, and what W&B's
    files of a's run hold is not taken for b's rows. A trial whose run file under its bare trial id is in the
    results folder (a run made before storage keys) goes on in it. (Before: both logged into run abc12_00000.)"""
    from ray.air.integrations.wandb import WandbLoggerCallback

    from kappa_rllib.tuning.tracking import _wandb_callback, storage_key, track_wandb

    rows, trials, old = _two_files(tmp_path)
    started = []  # the run id, as Ray's callback starts a trial's logging actor

    def start(self, trial, exclude_results, **kwargs):
        started.append(kwargs["id"])

    monkeypatch.setattr(WandbLoggerCallback, "_start_logging_actor", start)
    for name in ("a", "b", "a"):  # the last: a --resume of a
        _wandb_callback("kt", "kappa_pi_dqn", tmp_path / "results", None).log_trial_start(trials[name])
    legacy = tmp_path / "results" / "wandb" / "offline-run-20261203_000000-old12_00000"
    legacy.mkdir(parents=True)
    (legacy / "run-old12_00000.wandb").touch()
    _wandb_callback("kt", "old_grid", tmp_path / "results", None).log_trial_start(old["a"])
    key_a, key_b = storage_key(trials["a"]), storage_key(trials["b"])
    assert started == [f"{key_a}-abc12_00000", f"{key_b}-abc12_00000", f"{key_a}-abc12_00000", "old12_00000"]
    assert track_wandb.wandb_run_id(trials["a"]) == f"{key_a}-abc12_00000"
    # what W&B's files of a's run hold is not b's: b's rows all lacking, a's none
    wandb_offline_run(tmp_path / "results", f"{key_a}-abc12_00000", rows["a"])
    for name, lacking in (("a", []), ("b", rows["b"])):
        trials[name].last_result = None
        assert track_wandb.missing_rows(tmp_path / "results", trials[name],
                                        run_id=track_wandb.wandb_run_id(trials[name])) == lacking


def wandb_offline_run(folder: Path, run_id: str, rows: list[dict]) -> None:
    """An offline W&B run of id `run_id` under `folder`/wandb holding `rows`, as the logging actor logs them."""
    script = textwrap.dedent(f"""\
        import json, sys, wandb
        from kappa_rllib.tracking import metrics
        run = wandb.init(mode="offline", dir={str(folder)!r}, id={run_id!r}, project="kt")
        for row in json.loads(sys.stdin.read()):
            run.log(metrics(row))
        run.finish()
        """)
    out = subprocess.run([sys.executable, "-c", script], input=json.dumps(rows), cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, "WANDB_SILENT": "true"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def test_state_saved_before_the_modules_moved_still_loads():
    """Tune's tuner.pkl of a run started before kappa_rllib/tuning/tracking.py became a package names the names
    its W&B callback's methods used (cloudpickle: by reference), and checkpoints name kappa-DQN's variant configs
    in kappa_dqn_config (`AlgorithmConfig.get_state` keeps the class): each still resolves (pickle's GLOBAL), so
    a --resume of such a run, or such a checkpoint, loads."""
    import pickle

    old_names = {"kappa_rllib.tuning.tracking": ["_OwnStep", "_checkpoint_iteration", "missing_rows", "ENDED",
                                                 "MLflowCallback", "NoTensorBoard", "stored_rows", "replay_rows"],
                 "kappa_rllib.algorithms.kappa_dqn.kappa_dqn_config": ["KappaPIDQNConfig", "KappaVIDQNConfig"]}
    for module, names in old_names.items():
        for name in names:
            assert pickle.loads(f"c{module}\n{name}\n.".encode()) is not None, (module, name)
    from kappa_rllib.algorithms.kappa_dqn import KappaPIDQNConfig

    assert pickle.loads(b"ckappa_rllib.algorithms.kappa_dqn.kappa_dqn_config\nKappaPIDQNConfig\n.") is KappaPIDQNConfig
