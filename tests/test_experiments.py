"""The experiment files (tune_configs/) and `kappa-rllib tune`: every grid builds and validates
without Ray, smoke grids run end to end through the CLI into `report`, and `--resume` finishes a
grid whose driver was killed."""

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kappa_rllib import experiments
from kappa_rllib.tuning import checks, driver

ROOT = Path(__file__).resolve().parents[1]
CONFIG_FILES = sorted(glob.glob(str(ROOT / "tune_configs" / "**" / "*.py"), recursive=True))
CLI = [sys.executable, "-m", "kappa_rllib.cli"]


def test_there_are_paper_small_and_ablation_files():
    names = {str(Path(f).relative_to(ROOT / "tune_configs")) for f in CONFIG_FILES}
    assert {"paper/atari_table1.py", "paper/atari_cfa_ablation.py", "paper/atari_lower_gamma.py",
            "paper/mujoco_table2.py", "paper/mujoco_cfa_ablation.py", "paper/mujoco_lower_gamma.py",
            "small/cartpole_dqn.py", "small/minatar_dqn.py", "small/mujoco_trpo.py",
            "ablations/phi_fit_hopper.py", "adaptive/inverted_pendulum_ppo.py", "paper/table2_focused.py",
            "small/minatar_breakout_1m.py", "ablations/ant_kappa_pi_level.py"} <= names


@pytest.mark.parametrize("smoke", [False, True], ids=["full", "smoke"])
@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: str(Path(p).relative_to(ROOT / "tune_configs")))
def test_every_config_file_builds_and_validates_its_grids(path, smoke):
    grids = experiments.load_file(path, smoke=smoke)
    module = experiments.load_module(Path(path))
    assert module.config is module.GRIDS[0].config and module.stop == {"done": True}  # RLlib-style file
    assert module.__doc__ and "Cost" in module.__doc__ and "kappa-rllib tune" in module.__doc__
    for grid in grids:
        grid.validate()  # every trial's config, and every value a population may move a member to
        if grid.scheduler is not None:  # a population (adaptive kappa): members, not seeds
            assert grid.num_trials() >= 4 and grid.mutations and set(grid.mutations) <= set(grid.config.to_dict())
            continue
        assert grid.num_trials() >= 1 and "seed" in grid.axes()
        if smoke:
            assert len(grid.axes()["seed"]) == 2 and len(grid.axes().get("kappa", [0, 0])) == 2
            assert grid.config.total_env_steps <= 10_000


def axes(path, name):
    [grid] = [g for g in experiments.load_file(ROOT / "tune_configs" / path) if g.name == name]
    return grid, grid.axes()


def test_paper_axes_are_the_documented_ones():
    grid, ax = axes("paper/atari_table1.py", "kappa_pi_dqn")
    assert ax["kappa"] == [0.0, 0.36, 0.68, 0.84, 0.92, 0.98] and ax["seed"] == list(range(10))
    assert [e.removeprefix("kappa_rllib:") for e in ax["env"]] == [
        "ALE/Breakout-v5", "ALE/SpaceInvaders-v5", "ALE/Seaquest-v5", "ALE/Enduro-v5", "ALE/BeamRider-v5",
        "ALE/Qbert-v5"]
    assert grid.config.c_fa == 0.05 and grid.config.total_env_steps == 10_000_000
    assert grid.config.clip_rewards is True and grid.config.episodic_life  # the Atari preset
    assert grid.num_trials() == 360
    grid, ax = axes("paper/atari_table1.py", "naive_kappa_pi_dqn")
    assert grid.config.naive_schedule is True and ax["kappa"] == [0.68, 0.84, 0.98]
    grid, _ = axes("paper/atari_table1.py", "dqn")
    assert grid.config.kappa == 1.0 and grid.num_trials() == 60
    _, ax = axes("paper/atari_cfa_ablation.py", "kappa_vi_dqn")
    assert ax["c_fa"] == [0.001, 0.05, 0.2]
    _, ax = axes("paper/atari_lower_gamma.py", "dqn_gamma")
    assert ax["gamma"] == [0.68, 0.84, 0.92, 0.98]
    grid, ax = axes("paper/mujoco_table2.py", "kappa_vi_trpo")
    assert ax["kappa"][-1] == 0.99 and len(ax["env"]) == 6 and grid.config.c_fa == 0.2
    assert grid.config.total_env_steps == 2_000_000 and grid.config.train_batch_size == 1024
    _, ax = axes("paper/mujoco_table2.py", "gae")
    assert ax["lambda"] == [0.0, 0.36, 0.68, 0.84, 0.98]
    # the cluster files: 10 batches a result row, 3.3x less of the Tune driver's CPU a trial (docs/experiments.md)
    for path in ("paper/mujoco_table2.py", "paper/mujoco_cfa_ablation.py", "paper/mujoco_lower_gamma.py"):
        assert {g.config.batches_per_iteration for g in experiments.load_file(ROOT / "tune_configs" / path)} == {10}
    assert {g.config.batches_per_iteration for g in experiments.load_file(ROOT / "tune_configs/paper/table2_focused.py")} == {1}
    for variant in ("pi", "vi"):  # Table 1 has both variants
        grid, ax = axes("small/minatar_dqn.py", f"kappa_{variant}_dqn")
        assert len(ax["seed"]) >= 5 and ax["kappa"] == [0.68, 0.84, 0.92] and len(ax["env"]) == 2
        assert grid.config.model_config["conv_filters"] == [[16, 3, 1, "valid"]]  # the MinAtar paper's net


def test_a_bad_grid_is_refused_naming_the_trial(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from ray import tune\n"
        "from kappa_rllib import KappaPITRPOConfig\n"
        "from kappa_rllib.experiments import Grid, algorithm_config\n"
        "def experiments(smoke=False):\n"
        "    return [Grid('g', algorithm_config(KappaPITRPOConfig, 'Hopper-v5', seed=0,\n"
        "                 kappa=tune.grid_search([0.5, 1.5])))]\n")
    out = subprocess.run([*CLI, "tune", str(bad), "--storage", str(tmp_path / "s")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "grid 'g', trial {'kappa': 1.5}: kappa must lie in [0, 1], got 1.5" in out.stderr
    assert not (tmp_path / "s").exists()  # refused before Ray started or anything was written
    out = subprocess.run([*CLI, "tune", str(tmp_path / "missing.py")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "does not exist" in out.stderr


def run_tune(*args, timeout=420):
    return subprocess.run([*CLI, "tune", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.learning
@pytest.mark.parametrize("path, grids", [
    ("small/minatar_dqn.py", {"kappa_pi_dqn": 4, "kappa_vi_dqn": 4, "dqn": 2, "naive_kappa_pi_dqn": 2}),
    # on demand (-m slow): the same path through Tune and `report` as the MinAtar smoke, for the
    # TRPO family (~80 s); CI keeps the suite near 20 minutes
    pytest.param("small/mujoco_trpo.py", {"invertedpendulum_kappa_pi_trpo": 4, "invertedpendulum_trpo": 2,
                                          "invertedpendulum_naive_kappa_pi_trpo": 2}, marks=pytest.mark.slow),
])
def test_smoke_grid_runs_through_tune_and_report(tmp_path, path, grids):
    out = run_tune(f"tune_configs/{path}", "--smoke", "--storage", str(tmp_path), "--num-cpus", "2", "--report",
                   "--tensorboard")
    assert out.returncode == 0, out.stderr[-3000:]
    folder = tmp_path / (Path(path).stem + "_smoke")
    for name, n in grids.items():
        trials = [d for d in (folder / name).iterdir() if (d / "result.json").is_file()]
        assert len(trials) == n
        for trial in trials:
            rows = [json.loads(line) for line in (trial / "result.json").read_text().splitlines()]
            assert rows[-1]["done"] is True
            assert any(trial.glob("checkpoint_*"))  # checkpoint at the end of the trial
            assert list(trial.glob("events.out.tfevents.*"))  # TensorBoard (--tensorboard; off by default)
    table = (folder / "report" / "table.md").read_text()
    env = "MinAtar/Breakout-v1 (C_FA 0.05)" if "minatar" in path else "InvertedPendulum-v5 (C_FA 0.2)"
    row = next(line for line in table.splitlines() if line.startswith(f"| {env} | kappa-pi |"))
    assert row.count("(n=2)") == 3  # kappa_best, the kappa = 1 baseline and naive, two seeds each
    assert list((folder / "report").glob("curves_*.png"))
    # One view of the file (kappa_rllib.progress): a head line and a line per grid, not Tune's per-trial
    # config dumps (~200 lines a trial). A file that runs past a minute (a busy machine) prints the
    # view on the way too.
    printed = (out.stdout + out.stderr).splitlines()
    heads = [i for i, line in enumerate(printed) if line.startswith(f"[tune] {Path(path).stem}_smoke after ")]
    total = sum(grids.values())
    assert printed[heads[-1]].split(": ", 1)[1].startswith(f"0 running, 0 pending, {total} done; "), printed[heads[-1]]
    lines = {line.split()[1]: line for line in printed[heads[-1] + 1:heads[-1] + 1 + len(grids)]}
    for name, n in grids.items():
        assert f" 0 running, 0 pending, {n} done; " in lines[name], lines
        steps = lines[name].split("; ")[1]
        assert steps.split(" of ")[0] == steps.split(" of ")[1].split()[0], steps  # every step done
    assert len(printed) - len(heads[:-1]) * (len(grids) + 1) <= 60, "\n".join(printed)
    assert not any("Configuration for experiment" in line or "started with configuration" in line for line in printed)


def _trial_results(folder):
    out = {}
    for f in sorted(folder.rglob("result.json")):
        rows = []
        for line in f.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
        out[f.parent.name] = rows
    return out


def _wait_for_a_finished_trial(folder, timeout_s: float = 300.0) -> None:
    """Until the first trial under `folder` has written its `done` result (or the timeout)."""
    started = time.time()
    while time.time() - started < timeout_s:
        results = _trial_results(folder) if folder.exists() else {}
        if any(rows and rows[-1].get("done") for rows in results.values()):
            return
        time.sleep(0.1)


def _peak_running(folder) -> int:
    """The most trials of `folder` (a file's storage: grid/trial/result.json) that ran at once, from
    each trial's first and last result: [first result's time minus its iteration's, last result's time]."""
    events = []
    for rows in _trial_results(folder).values():
        if rows:
            events += [(rows[0]["timestamp"] - rows[0]["time_this_iter_s"], 1), (rows[-1]["timestamp"], -1)]
    running = peak = 0
    for _, change in sorted(events):  # at a tie an end comes first: no overlap is counted that is not sure
        running += change
        peak = max(peak, running)
    return peak


GRIDS_FILE = """
from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

def experiments(smoke=False):  # three grids of two trials: kappa-PI-DQN, kappa-VI-DQN, DQN
    return paper_grids("dqn", "CartPole-v1", kappas=[0.84], c_fa=0.2, num_seeds=2,
                       **{**SMOKE_SETTINGS["dqn"], "total_env_steps": 3_000})
"""


@pytest.mark.learning
def test_a_files_grids_run_together_so_the_trials_fill_every_cpu(tmp_path):
    """Three grids of two trials on a Ray of 4 CPUs: 4 trials run at once (one grid at a time, as
    before the grids ran together, peaks at its 2 seeds), and every trial ends at its T."""
    grid_file = tmp_path / "three_grids.py"
    grid_file.write_text(GRIDS_FILE)
    out = run_tune(str(grid_file), "--storage", str(tmp_path), "--num-cpus", "4")
    assert out.returncode == 0, out.stderr[-3000:]
    folder = tmp_path / "three_grids"
    results = _trial_results(folder)
    assert sorted(p.parent.parent.name for p in folder.glob("*/*/result.json")) == \
        ["dqn"] * 2 + ["kappa_pi_dqn"] * 2 + ["kappa_vi_dqn"] * 2  # one folder per grid, as before
    assert all(rows[-1]["done"] and rows[-1]["env_runners"]["num_env_steps_sampled_lifetime"] == 3_000
               for rows in results.values())
    assert _peak_running(folder) == 4
    # one view of the file: its head line and a line per grid, not a table per grid
    printed = out.stdout.splitlines()
    last = max(i for i, line in enumerate(printed) if line.startswith("[tune] three_grids after "))
    assert printed[last].endswith(": 0 running, 0 pending, 6 done; 18k of 18k env steps"), printed[last]
    assert [line.split()[1:8] for line in printed[last + 1:last + 4]] == [
        [name, "0", "running,", "0", "pending,", "2", "done;"] for name in ("kappa_pi_dqn", "kappa_vi_dqn", "dqn")]


@pytest.mark.learning
def test_resume_after_the_driver_is_killed_finishes_every_trial_exactly_once(tmp_path):
    """SIGKILL the whole `kappa-rllib tune` process group (driver and its Ray) as soon as the first
    trial has finished, then `--resume`: no trial lost, none re-run, each ends at its T. With 2 CPUs
    and two grids, `--max-concurrent 1` holds for the file, not per grid."""
    args = ["tune_configs/small/cartpole_dqn.py", "--smoke", "--storage", str(tmp_path), "--num-cpus", "2",
            "--max-concurrent", "1", "--checkpoint-every", "1"]
    folder = tmp_path / "cartpole_dqn_smoke"
    driver = subprocess.Popen([*CLI, "tune", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        _wait_for_a_finished_trial(folder)  # the other five are then running or pending
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    before = _trial_results(folder)
    done_before = {n: rows for n, rows in before.items() if rows and rows[-1].get("done")}
    assert done_before and len(done_before) < 6, "the kill must land mid-grid"

    out = run_tune(*args, "--resume")
    assert out.returncode == 0, out.stderr[-3000:]
    # the trials that never started have no result file yet: Tune's warning about it is not shown
    assert "Failed to fetch metrics" not in out.stderr + out.stdout
    after = _trial_results(folder)
    assert len(after) == 6  # 4 kappa-PI-DQN + 2 DQN trials, none lost, none duplicated
    for name, rows in after.items():
        assert sum(1 for r in rows if r.get("done")) == 1, name  # finished exactly once
        assert rows[-1]["env_runners"]["num_env_steps_sampled_lifetime"] == 1_000  # its T
    for name, rows in done_before.items():
        assert after[name] == rows  # finished trials were not run again
    assert _peak_running(folder) == 1


@pytest.mark.learning
def test_a_bucket_uri_storage_runs_refuses_overwrite_resumes_and_reports(tmp_path):
    """--storage as a file:// URI, a local folder (kappa_rllib.tuning.storage; the bucket code path's helpers:
    tests/test_client_storage.py): Tune writes through it, a second run without --resume is refused, --resume
    has nothing left to do, and `report URI` reads the folder in place."""
    uri = f"file://{tmp_path}/bucket/kappa"
    grid = "tune_configs/small/cluster_check.py"
    out = run_tune(grid, "--storage", uri, "--num-cpus", "2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"results in {tmp_path}/bucket/kappa/cluster_check" in out.stdout
    folder = tmp_path / "bucket" / "kappa" / "cluster_check" / "kappa_pi_dqn"
    before = _trial_results(folder)
    assert len(before) == 4 and all(rows[-1]["done"] for rows in before.values())

    again = run_tune(grid, "--storage", uri, "--num-cpus", "2")
    assert again.returncode == 2 and "already holds a run of grid 'kappa_pi_dqn'" in again.stderr
    resumed = run_tune(grid, "--storage", uri, "--num-cpus", "2", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _trial_results(folder) == before  # nothing re-run

    report_dir = tmp_path / "report"
    rep = subprocess.run([*CLI, "report", f"{uri}/cluster_check", "--out", str(report_dir), "--bootstrap-reps", "50"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert not (report_dir / "results").exists()  # a folder: nothing mirrored
    assert "| CartPole-v1 | kappa-pi | 0.2 | 0.84 |" in (report_dir / "table.md").read_text()


@pytest.mark.parametrize("path", ["small/mujoco_trpo.py", "small/cluster_check.py"])
def test_gpus_per_trial_puts_the_gpu_in_every_trials_resource_request(path):
    """`tune --gpus-per-trial`: each trial's placement-group bundle (what Ray and the autoscaler
    place, e.g. on cluster/aws.yaml's gpu_learners) asks for the GPU share beside its CPU."""
    grids = experiments.load_file(str(ROOT / "tune_configs" / path), smoke=True)
    experiments.request_gpus(grids, 0.25)
    for grid in grids:
        base = grid.config.to_dict()
        for variant in grid.variants():
            trial = grid.trainable.get_default_config().update_from_dict({**base, **variant})
            request = grid.trainable.default_resource_request(trial)
            assert request.bundles[0] == {"CPU": 1, "GPU": 0.25}, (grid.name, request.bundles)
            assert request.required_resources["GPU"] == 0.25


@pytest.mark.learning
def test_a_pbt_population_runs_through_tune_and_its_report_shows_each_member_s_kappa(tmp_path):
    """Adaptive kappa end to end: 4 kappa-PI-PPO members under PBT (kappa moved at iterations 10
    and 20 of 30), then `report`: the members stay out of the fixed-kappa tables, adaptive.md
    sets the best member beside the fixed kappas, and the plot draws every member's kappa."""
    out = run_tune("tune_configs/adaptive/inverted_pendulum_ppo.py", "--smoke", "--grids", "pbt", "--storage",
                   str(tmp_path), "--num-cpus", "2", "--report", timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    folder = tmp_path / "inverted_pendulum_ppo_smoke"
    assert json.loads((folder / "pbt" / "kappa_population.json").read_text())["scheduler"] == "PopulationBasedTraining"
    paths = []
    for result in sorted((folder / "pbt").glob("*/result.json")):
        rows = [json.loads(line) for line in result.read_text().splitlines()]
        assert rows[-1]["done"] is True and rows[-1]["kappa"]["batches"] == 30
        paths.append([r["kappa"]["kappa"] for r in rows])
    assert len(paths) == 4
    assert all(set(p) <= {0.84, 0.9, 0.95, 0.99} for p in paths)
    adaptive = (folder / "report" / "adaptive.md").read_text()
    assert "| InvertedPendulum-v5 | pbt | 4 | " in adaptive
    assert (folder / "report" / "adaptive_InvertedPendulum-v5_pbt.png").read_bytes()[:4] == b"\x89PNG"
    view = out.stdout.splitlines()
    head = max(i for i, line in enumerate(view) if line.startswith("[tune] inverted_pendulum_ppo_smoke after "))
    assert view[head + 1].startswith("[tune]   pbt  0 running, 0 pending, 4 done; "), view[head:]


@pytest.mark.learning
def test_ctrl_c_stops_every_grid_says_what_is_left_and_resume_finishes_each_trial_once(tmp_path):
    """SIGINT (Ctrl-C) to `kappa-rllib tune` mid-file: every grid saves its state and returns as if
    done, so the CLI must itself say that trials were left, exit 130 and print the resume command;
    `--resume` then finishes every trial of both grids exactly once at its T."""
    args = ["tune_configs/small/cartpole_dqn.py", "--smoke", "--storage", str(tmp_path), "--num-cpus", "2"]
    folder = tmp_path / "cartpole_dqn_smoke"
    driver = subprocess.Popen([*CLI, "tune", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    _wait_for_a_finished_trial(folder)  # of 6, in two grids that run together
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "[tune] finished" not in out
    assert ": 0 running, 0 pending, 6 done" not in out  # no last view counting the stopped trials done
    # this run's command with --resume, its settings kept
    resume = (f"resume with: kappa-rllib tune tune_configs/small/cartpole_dqn.py --storage {tmp_path} --resume --smoke "
              "--num-cpus 2")
    stopped = next(line for line in err.splitlines() if line.startswith("[tune] stopped: "))
    assert stopped.endswith(resume) and ", 0 failed, " in stopped, stopped
    before = _trial_results(folder)
    done_before = {n: rows for n, rows in before.items() if rows and rows[-1].get("done")}
    assert 0 < len(done_before) < 6

    resumed = run_tune(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = _trial_results(folder)
    assert sorted(p.parent.parent.name for p in folder.glob("*/*/result.json")) == ["dqn"] * 2 + ["kappa_pi_dqn"] * 4
    for name, rows in after.items():
        assert sum(1 for r in rows if r.get("done")) == 1, name
        assert rows[-1]["env_runners"]["num_env_steps_sampled_lifetime"] == 1_000
        iterations = [r["training_iteration"] for r in rows]
        assert iterations == sorted(set(iterations)), (name, iterations)  # no iteration twice
    for name, rows in done_before.items():
        assert after[name] == rows


def test_only_the_warning_about_trials_without_results_is_hidden():
    """Tune's "Failed to fetch metrics" warning is dropped when every trial it names merely has no
    result file yet (pending trials); a trial whose results fail to load for any other reason keeps it."""
    import logging

    def shown(*failures):
        record = logging.LogRecord("ray.tune.analysis.experiment_analysis", logging.WARNING, __file__, 1,
                                   "Failed to fetch metrics for %d trial(s):\n%s", (len(failures), "\n".join(failures)),
                                   None)
        from kappa_rllib.tuning.output import UnstartedTrialsFilter

        return UnstartedTrialsFilter().filter(record)

    missing = "- T_00001: FileNotFoundError('Could not fetch metrics for T_00001: both result.json and progress.csv were not found at /x')"
    corrupt = "- T_00002: ParserError('Error tokenizing data. C error: Expected 3 fields in line 7, saw 5')"
    assert not shown(missing, missing)
    assert shown(missing, corrupt) and shown(corrupt)


def test_the_grids_share_tunes_ctrl_c_hook_and_one_cap_on_live_trials():
    """kappa_rllib.together leans on two pieces of Ray Tune 2.60 (pinned): the per-run SIGINT hook it
    replaces while the grids run, and the variant generator's own count of live trials."""
    import importlib
    import threading

    from ray.tune.experiment import Experiment

    from kappa_rllib.tuning import together

    tune_module = importlib.import_module(together._TUNE_MODULE)
    original = getattr(tune_module, together._TUNE_HOOK)
    stop = threading.Event()
    with together.interrupt_on_signal(stop, install=False):
        assert getattr(tune_module, together._TUNE_HOOK)() is stop  # every grid's run gets the one event
    assert getattr(tune_module, together._TUNE_HOOK) is original

    def trainable(config):
        return {"x": 1}

    cap = together.SharedCap(3)
    generators = [together.CappedVariantGenerator(cap) for _ in range(2)]
    for g in generators:
        g.add_configurations([Experiment("g", trainable, config={"seed": {"grid_search": [0, 1, 2, 3]}})])
    made = [generators[0].next_trial(), generators[0].next_trial(), generators[1].next_trial()]
    assert all(made) and generators[1].next_trial() is None and generators[0].next_trial() is None  # 3 live
    generators[0].on_trial_complete(made[0].trial_id)
    assert generators[1].next_trial() is not None  # one ended: the other grid may make one
    state = generators[1].get_state()
    generators[1].set_state({**state, "max_concurrent": 2})  # a grid restored with its own old cap
    assert generators[1].max_concurrent == 0 and cap.live() == 3
    assert together.CappedVariantGenerator(together.SharedCap(None)).next_trial() is None  # no config: none


def test_a_grid_stopped_before_its_first_trial_resumes_afresh_and_no_grid_starts_after_a_stop(tmp_path):
    """A Ctrl-C while the file's grids start: a grid that made no trial holds Tune's settings (tuner.pkl) but
    an experiment state without trials, which Tune's restore fails on and restarts loudly; `--resume`
    starts it afresh instead. A folder with trial results and no state to resume them is refused in one
    line. And once the stop is set, fit_together starts no further grid (--resume will)."""
    import threading
    from types import SimpleNamespace

    from kappa_rllib.tuning import together

    grid = tmp_path / "g"
    grid.mkdir()
    (grid / "tuner.pkl").write_bytes(b"x")
    assert not checks.restorable(str(tmp_path / "missing"))
    assert not checks.restorable(str(grid))  # no experiment state yet
    (grid / "experiment_state-2026-11-28_10-00-00.json").write_text(json.dumps({"trial_data": []}))
    assert not checks.restorable(str(grid))  # a state without trials
    (grid / "experiment_state-2026-11-28_11-00-00.json").write_text(json.dumps({"trial_data": [["t"]]}))
    assert checks.restorable(str(grid))  # the newest names a trial
    (tmp_path / "h" / "T_0").mkdir(parents=True)
    (tmp_path / "h" / "T_0" / "result.json").write_text("{}\n")
    with pytest.raises(ValueError, match="has trial results but no Tune state to resume them from"):
        driver._tuner(SimpleNamespace(name="h"), str(tmp_path), str(tmp_path / "h"), resume=True, cap=None,
                           max_concurrent=None, checkpoint_every=0, max_failures=1, verbose=0, callbacks=[])

    stop, fitted = threading.Event(), []

    class Tuner:
        def __init__(self, name):
            self.name = name

        def fit(self):
            fitted.append(self.name)
            stop.set()  # a Ctrl-C while this grid runs
            return self.name

    started = together.Started()
    started.event.set()
    jobs = [("a", Tuner("a"), started), ("b", Tuner("b"), together.Started())]
    assert together.fit_together(jobs, stop=stop, poll_s=0.05) == {"a": "a"} and fitted == ["a"]


def test_resume_of_a_run_started_before_a_setting_was_added_keeps_the_stored_keys(tmp_path):
    """Tune refuses a restore whose param space has keys the run did not start with (its tuner.pkl lists
    them). A run started before `batches_per_iteration` existed must still resume: the new key is left
    out (its trials take the default). A stored key this version lacks is one clear line."""
    from ray import cloudpickle
    from ray.tune.utils import flatten_dict

    [grid] = [g for g in experiments.load_file(ROOT / "tune_configs/paper/table2_claim2.py") if g.name == "ant_trpo"]
    keys = sorted(flatten_dict(grid.config.to_dict()))
    older = [k for k in keys if k != "batches_per_iteration"]
    (tmp_path / "tuner.pkl").write_bytes(cloudpickle.dumps({"__flattened_param_space_keys": older}))
    space = checks.param_space_on_restore(grid, tmp_path)
    assert sorted(flatten_dict(space)) == older  # what Tune's restore compares (tuner_internal.py)
    assert space["seed"] == {"grid_search": [0, 1, 2, 3, 4]} and space["env"] == grid.config.env
    (tmp_path / "tuner.pkl").write_bytes(cloudpickle.dumps({"__flattened_param_space_keys": keys + ["retired"]}))
    with pytest.raises(ValueError, match=r"grid 'ant_trpo' was started with settings this kappa-rllib does not "
                                         r"have \(retired\): resume it with the version that started it"):
        checks.param_space_on_restore(grid, tmp_path)
