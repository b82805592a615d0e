"""The command line: one-line errors with exit code 2 before Ray starts, and a real short run."""

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "kappa_rllib.cli"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--algo", "kappa-pi-dqn", "--env", "CartPole-v1", "--kappa", "1.5"], "kappa must lie in [0, 1]"),
        (["train", "--algo", "kappa-pi-dqn", "--env", "CartPole-v1", "--c-fa", "1"], "c_fa must lie in the open interval"),
        (["train", "--algo", "kappa-vi-dqn", "--env", "NoSuchEnv-v0"], "unknown env id 'NoSuchEnv-v0'"),
        (["train", "--algo", "kappa-pi-dqn", "--env", "Pendulum-v1"], "needs discrete actions"),
        (["train", "--algo", "sarsa", "--env", "CartPole-v1"], "invalid choice: 'sarsa'"),
        (["train", "--algo", "dqn", "--env", "CartPole-v1", "--total-steps", "0"], "positive integer"),
        (["train", "--algo", "kappa-pi-dqn", "--env", "CartPole-v1", "--kappa", "0.5", "--c-fa", "0.001",
          "--total-steps", "100"], "total_env_steps=100 gives 100 env steps < N_kappa=346"),
        (["train", "--algo", "dqn", "--env", "CartPole-v1", "--config", "/no/such.yaml"], "does not exist"),
        (["compare", "--algos", "kappa-pi-dqn,sarsa", "--env", "CartPole-v1"], "unknown --algo 'sarsa'"),
        (["train", "--algo", "gae", "--env", "Hopper-v5"], "--algo gae needs --lambda"),
        (["train", "--algo", "trpo", "--env", "Hopper-v5", "--lambda", "0.9"], "--lambda applies to --algo gae only"),
        (["train", "--algo", "kappa-pi-trpo", "--env", "Hopper-v5", "--kappa", "0.5", "--c-fa", "0.001",
          "--total-steps", "10000"], "gives 9 TRPO iterations < N_kappa=346"),
        (["train", "--algo", "kappa-vi-trpo", "--env", "Hopper-v5", "--phi-fit", "iteration_end"],
         "--phi-fit applies to --algo kappa-pi-trpo only"),
        (["train", "--algo", "kappa-pi-trpo", "--env", "Hopper-v5", "--phi-fit", "sometimes"], "invalid choice"),
        (["train", "--algo", "kappa-pi-dqn", "--env", "CartPole-v1", "--phi-target", "authors"],
         "--phi-target applies to --algo kappa-pi-trpo only"),
        (["train", "--algo", "kappa-pi-trpo", "--env", "Hopper-v5", "--phi-target", "mine"], "invalid choice"),
        # the Atari preset's trials take 2 remote EnvRunners: 3 CPUs, more than an embedded Ray of 2 has
        (["tune", "tune_configs/paper/atari_table1.py", "--smoke", "--num-cpus", "2", "--storage", "/tmp/never"],
         "grid 'kappa_pi_dqn': a trial asks for 3 CPUs (its main process, 2 remote EnvRunners) but this embedded Ray "
         "has 2 CPUs (--num-cpus)"),
        # train the same: 41 CPUs on an embedded Ray of 2 waited forever before (the EnvRunners never started)
        (["train", "--algo", "kappa-pi-trpo", "--env", "Hopper-v5", "--num-env-runners", "40", "--num-cpus", "2"],
         "--algo kappa-pi-trpo asks for 40 CPUs (40 remote EnvRunners) but this embedded Ray has "
         "2 CPUs (--num-cpus): lower --num-env-runners, or run on a cluster (--address)"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(args, message):
    proc = subprocess.run(CLI + args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kappa-rllib: error: ") and message in lines[0]


def test_train_writes_progress_results_and_checkpoint(tmp_path):
    proc = subprocess.run(
        CLI + ["train", "--algo", "kappa-vi-dqn", "--env", "CartPole-v1", "--kappa", "0.9", "--c-fa", "0.3",
               "--total-steps", "5000", "--seed", "1", "--num-cpus", "2", "--output", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "N_kappa 13" in proc.stdout and "kappa-iter 13/13 (done)" in proc.stdout
    (run_dir,) = list(tmp_path.iterdir())
    rows = list(csv.DictReader(open(run_dir / "progress.csv")))
    assert [int(r["env_steps"]) for r in rows] == [2500, 5000]
    results = [json.loads(line) for line in open(run_dir / "result.json")]
    assert results[-1]["kappa"]["phase"] == "done" and results[-1]["done"] is True
    assert (run_dir / "checkpoints" / "checkpoint_000002" / "learner_group").is_dir()  # the final one
    assert (run_dir / "checkpoints" / "checkpoint_000002" / "kappa_rllib_checkpoint.json").is_file()
    assert json.load(open(run_dir / "run.json"))["finished"] is True
    params = json.load(open(run_dir / "params.json"))
    assert params["kappa"] == 0.9 and params["c_fa"] == 0.3 and params["total_env_steps"] == 5000
    assert run_dir.name.startswith("kappa-vi-dqn_CartPole-v1_k0.9_c0.3_g0.99_s1_")
    assert str(run_dir.resolve()) in proc.stdout


@pytest.mark.parametrize(
    "args, expected",
    [
        # omitted flags keep each algorithm's own (the paper's) defaults
        (["--algo", "kappa-pi-trpo", "--env", "Hopper-v5"],
         "kappa 0.84, C_FA 0.2, N_kappa 27, T_kappa 72 batches, phi_fit every_batch, phi_target bootstrap, gamma 0.99, T 2000000 env steps"),
        (["--algo", "kappa-pi-trpo", "--env", "Hopper-v5", "--phi-fit", "iteration_end"], "phi_fit iteration_end"),
        (["--algo", "kappa-pi-trpo", "--env", "Hopper-v5", "--phi-target", "authors"],
         "phi_fit every_batch, phi_target authors,"),
        (["--algo", "kappa-vi-dqn", "--env", "ALE/Breakout-v5"],
         "kappa 0.84, C_FA 0.05, N_kappa 49, T_kappa 204081 env steps, gamma 0.99, T 10000000 env steps"),
        # the CartPole preset's T
        (["--algo", "kappa-pi-dqn", "--env", "CartPole-v1"], "N_kappa 49, T_kappa 1020 env steps, gamma 0.99, T 50000"),
        (["--algo", "gae", "--lambda", "0.9", "--env", "Hopper-v5"], "lambda 0.9, gamma 0.99, T 2000000 env steps"),
        # remote EnvRunners: the Atari preset's 2; else 0, not RLlib's PPO default of 2; the flag wins
        (["--algo", "kappa-pi-dqn", "--env", "ALE/Breakout-v5"], "T 10000000 env steps, 2 remote EnvRunners"),
        (["--algo", "kappa-vi-ppo", "--env", "CartPole-v1"], "env steps, 0 remote EnvRunners"),
        (["--algo", "kappa-pi-dqn", "--env", "ALE/Breakout-v5", "--num-env-runners", "1"], "1 remote EnvRunners"),
    ],
)
def test_dry_run_prints_each_algorithms_own_defaults(args, expected):
    proc = subprocess.run(CLI + ["train", *args, "--dry-run"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert expected in proc.stdout


def test_help_shows_the_defaults_of_both_families():
    proc = subprocess.run(CLI + ["train", "--help"], capture_output=True, text=True, timeout=60)
    text = " ".join(proc.stdout.split())
    assert "DQN family 0.05, TRPO family 0.2" in text and "DQN family 10,000,000, TRPO family 2,000,000" in text


def test_run_folders_never_collide(tmp_path):
    """Two runs started in the same second with the same settings get two folders, named by
    every setting that tells runs apart (naive schedule, gamma), each with its params.json."""
    from kappa_rllib.cli import build_parser, make_config
    from kappa_rllib.cli.train import _run_dir

    args = build_parser().parse_args(["train", "--algo", "kappa-pi-dqn", "--env", "CartPole-v1", "--naive-schedule",
                       "--total-steps", "2000", "--gamma", "0.9"])
    config, _ = make_config("kappa-pi-dqn", args)
    a, b = _run_dir(str(tmp_path), "kappa-pi-dqn", args, config), _run_dir(str(tmp_path), "kappa-pi-dqn", args, config)
    assert a != b and "_naive_g0.9_" in a.name
    assert json.load(open(a / "params.json"))["naive_schedule"] is True


TRAIN_FILE = """
from kappa_rllib import TRPOConfig
config = (TRPOConfig().environment("InvertedPendulum-v5")
          .training(train_batch_size=256, total_env_steps=256 * 40).debugging(seed=2))
stop = {"training_iteration": 3}
"""


@pytest.mark.learning
def test_train_file_then_evaluate_with_video(tmp_path):
    """`train file` runs a config file to its stop rule; `evaluate` restores the run's checkpoint and
    prints greedy per-episode raw returns (InvertedPendulum: +1 per step upright)."""
    config_file = tmp_path / "pendulum.py"
    config_file.write_text(TRAIN_FILE)
    proc = subprocess.run(CLI + ["train", "file", str(config_file), "--output", str(tmp_path / "runs"),
                                 "--num-cpus", "1"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = list((tmp_path / "runs").iterdir())
    rows = [json.loads(line) for line in open(run_dir / "result.json")]
    assert [r["training_iteration"] for r in rows] == [1, 2, 3]  # stop: training_iteration 3
    assert run_dir.name.startswith("trpo_InvertedPendulum-v5_k1.0_g0.99_s2_")
    proc = subprocess.run(CLI + ["evaluate", str(run_dir), "--episodes", "2", "--render", "rgb_array",
                                 "--video", str(tmp_path / "videos"), "--num-cpus", "1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    episodes = [line for line in proc.stdout.splitlines() if line.startswith("episode ")]
    assert len(episodes) == 2
    for line in episodes:
        ret, steps = float(line.split("return ")[1].split(" ")[0]), int(line.split("(")[1].split(" ")[0])
        assert ret in (steps, steps - 1)  # v5 gives 0 on the step that falls
    assert "[evaluate] mean return" in proc.stdout
    videos = sorted((tmp_path / "videos").iterdir())
    assert [v.name for v in videos] == ["episode_000.mp4", "episode_001.mp4"] and videos[0].stat().st_size > 1000


@pytest.mark.learning
@pytest.mark.parametrize("train_args", [
    ["--algo", "kappa-pi-dqn", "--env", "CartPole-v1", "--total-steps", "3000"],
    ["--algo", "kappa-vi-trpo", "--env", "InvertedPendulum-v5", "--kappa", "0.98", "--c-fa", "0.5",
     "--total-steps", "4096"],  # N_kappa = 2 kappa-iterations of 2 batches
    ["--algo", "kappa-vi-ppo", "--env", "CartPole-v1", "--kappa", "0.9", "--c-fa", "0.5",
     "--total-steps", "8000"],  # N_kappa = 8 iterations of 1 batch; RLlib's own EnvRunner, greedy via the module
], ids=["kappa-pi-dqn", "kappa-vi-trpo", "kappa-vi-ppo"])
def test_evaluate_a_kappa_run(tmp_path, train_args):
    proc = subprocess.run(CLI + ["train", *train_args, "--num-cpus", "1", "--output", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = list(tmp_path.iterdir())
    checkpoint = sorted((run_dir / "checkpoints").iterdir())[-1]
    proc = subprocess.run(CLI + ["evaluate", str(checkpoint), "--episodes", "3", "--num-cpus", "1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    episodes = [re.fullmatch(r"episode \d: return ([\d.]+) \((\d+) steps\)", line)
                for line in proc.stdout.splitlines() if line.startswith("episode ")]
    returns = [float(m.group(1)) for m in episodes]
    # +1 a step (InvertedPendulum-v5 pays 0 on the terminating step)
    assert len(returns) == 3 and all(int(m.group(2)) - 1 <= float(m.group(1)) <= int(m.group(2)) for m in episodes)
    mean_line = next(line for line in proc.stdout.splitlines() if line.startswith("[evaluate] mean return"))
    assert f"{sum(returns) / 3:.1f}" in mean_line


@pytest.mark.parametrize("algo, kappa, run_json, label", [
    ("dqn", 1.0, True, "dqn, kappa = 1"),  # a `train --algo dqn` run: KappaPIDQN at kappa = 1
    ("dqn", 1.0, False, "dqn, kappa = 1"),  # a Tune trial's checkpoint (no run.json): read off the config
    ("kappa-pi-dqn", 0.84, True, "kappa-pi-dqn, kappa 0.84"),
    ("kappa-pi-dqn", 0.84, False, "kappa-pi-dqn, kappa 0.84"),
])
def test_evaluate_names_the_algorithm_the_run_used(tmp_path, monkeypatch, capsys, algo, kappa, run_json, label):
    """`evaluate` says what the run trained, as `train --algo` names it (its run.json, else its class and
    kappa), not the class alone: `--algo dqn` restores a KappaPIDQN. The restored algorithm is a stand-in
    (a greedy policy that pushes left), so no Ray starts."""
    import types

    from ray.rllib.algorithms.algorithm import Algorithm

    from kappa_rllib import KappaPIDQNConfig, checkpoints, runs
    from kappa_rllib.cli import evaluate, main

    config = KappaPIDQNConfig().environment("CartPole-v1").training(kappa=kappa, total_env_steps=2000)
    run_dir = runs.create(tmp_path, algo, config) if run_json else tmp_path / "trial"
    checkpoint = run_dir / "checkpoints" / "checkpoint_000001"
    checkpoint.mkdir(parents=True)
    (checkpoint / checkpoints.MANIFEST).write_text(json.dumps({"package": "kappa-rllib", "format": 1, "files": {}}))
    runner = types.SimpleNamespace(_act=lambda obs, explore, t: (None, [0]))
    restored = type("KappaPIDQN", (), {"config": config, "env_runner": runner, "stop": lambda self: None})()
    monkeypatch.setattr(Algorithm, "from_checkpoint", staticmethod(lambda path: restored))
    monkeypatch.setattr(evaluate, "start_ray", lambda *args, **kwargs: None)
    assert main(["evaluate", str(run_dir), "--episodes", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"[evaluate] {checkpoint} ({label}, on CartPole-v1), 1 greedy episodes"


def test_evaluate_names_a_missing_checkpoint_once(tmp_path):
    missing = tmp_path / "nothing"
    proc = subprocess.run(CLI + ["evaluate", str(missing)], capture_output=True, text=True, timeout=60)
    # what was expected, and the path once
    assert proc.returncode == 2 and proc.stderr == f"kappa-rllib: error: no checkpoint or run folder at {missing}\n"


def test_train_file_refuses_grids_and_files_without_config(tmp_path):
    grid = tmp_path / "grid.py"
    grid.write_text("from ray import tune\nfrom kappa_rllib import KappaPIDQNConfig\n"
                    "config = KappaPIDQNConfig().environment('CartPole-v1')\nconfig.kappa = tune.grid_search([0.5, 1.0])\n")
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    for path, message in [(grid, "config has grid axes ['kappa']; run grids with `kappa-rllib tune"),
                          (empty, "defines no `config`"), (tmp_path / "none.py", "does not exist")]:
        proc = subprocess.run(CLI + ["train", "file", str(path)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_tune_seeds_replace_every_grids_seed_axis_and_bad_seeds_are_one_line():
    """`--seeds 0-2` runs seeds 0, 1, 2 of each grid (HumanoidStandup's file has 5 a grid); a single seed is a plain
    value, not an axis; a malformed list is refused before anything runs."""
    from kappa_rllib import experiments
    from kappa_rllib.cli import tune as tune_verb

    assert tune_verb.parse_seeds("0-2") == [0, 1, 2]
    assert tune_verb.parse_seeds("3, 0-1,3") == [3, 0, 1]
    for bad, word in [("a", "integers"), ("2-1", "FIRST <= LAST"), ("-1", "integers"), ("", "integers"),
                      ("0-99999999999", "more than 10000 a grid")]:
        with pytest.raises(ValueError, match=word):
            tune_verb.parse_seeds(bad)
    grids = experiments.load_file(str(ROOT / "tune_configs/paper/table2_humanoidstandup.py"))
    assert [g.num_trials() for g in grids] == [5] * 7
    tune_verb._with_seeds(grids, [0, 1, 2])
    assert [g.num_trials() for g in grids] == [3] * 7
    assert all(g.axes()["seed"] == [0, 1, 2] for g in grids)
    assert {v["seed"] for v, _ in grids[0].trial_configs()} == {0, 1, 2}
    tune_verb._with_seeds(grids, [7])
    assert [g.num_trials() for g in grids] == [1] * 7 and grids[0].config.seed == 7
    proc = subprocess.run(CLI + ["tune", str(ROOT / "tune_configs/small/cartpole_dqn.py"), "--seeds", "1-x"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--seeds '1-x'" in proc.stderr, proc.stderr


@pytest.mark.parametrize("verb", [None, "train", "compare", "evaluate", "tune", "report"])
def test_every_help_ends_with_an_example_and_ray_verbs_take_an_address(verb, capsys):
    from kappa_rllib.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main([verb, "--help"] if verb else ["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    last_paragraph = text.strip().split("\n\n")[-1]
    assert last_paragraph.startswith(("example: kappa-rllib ", "examples: kappa-rllib ")), last_paragraph
    if verb in ("train", "compare", "evaluate", "tune"):  # the verbs that run Ray
        flat = " ".join(text.split())
        assert "--address ADDRESS" in flat and "ray://HOST:10001 (Ray Client" in flat and "$RAY_ADDRESS" in flat


def test_known_harmless_warnings_are_hidden_by_logger_and_message_and_real_ones_come_through():
    import logging

    from kappa_rllib.cli import quiet

    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    handler = Keep(level=logging.DEBUG)
    loggers = [logging.getLogger(name) for name, _, _ in quiet.KNOWN_HARMLESS]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        quiet.hide_known_warnings()
        quiet.hide_known_warnings()  # idempotent: one filter per logger
        for (name, piece, _), logger in zip(quiet.KNOWN_HARMLESS, loggers):
            logger.warning(f"before {piece} after")
            logger.warning(f"a real warning from {name}")
        logging.getLogger("ray.rllib.somewhere_else").warning("on the new API stack! (another logger)")
        assert seen == [f"a real warning from {name}" for name, _, _ in quiet.KNOWN_HARMLESS]
        seen.clear()
        quiet.show_all_warnings()  # --verbose
        for (name, piece, _), logger in zip(quiet.KNOWN_HARMLESS, loggers):
            logger.warning(f"before {piece} after")
        assert len(seen) == len(quiet.KNOWN_HARMLESS)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        quiet.show_all_warnings()


def test_the_new_api_stack_notice_is_hidden_unless_verbose():
    args = CLI + ["train", "--algo", "kappa-pi-dqn", "--env", "CartPole-v1", "--dry-run"]
    quiet_run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    loud_run = subprocess.run(args + ["--verbose"], capture_output=True, text=True, timeout=120)
    assert quiet_run.returncode == loud_run.returncode == 0
    assert "new API stack" not in quiet_run.stderr + quiet_run.stdout
    assert "You are running KappaPIDQN on the new API stack!" in loud_run.stderr


def test_the_file_view_has_a_line_per_grid_with_its_trials_env_steps_and_return():
    from types import SimpleNamespace

    from kappa_rllib.tuning.progress import FileProgress

    printed = []
    view = FileProgress("cartpole_dqn", interval_s=0.0, out=printed.append)
    pi = view.callback("kappa_pi_dqn", num_trials=4, total_env_steps=20_000)
    dqn = view.callback("dqn", num_trials=2, total_env_steps=20_000)
    trials = [SimpleNamespace(trial_id=f"t{i}", status=status, evaluated_params={"kappa": 0.84, "seed": i},
                              error_file=f"/r/t{i}/error.txt", config={"total_env_steps": 20_000})
              for i, status in enumerate(["TERMINATED", "RUNNING", "PENDING"])]
    pi.setup()
    pi.on_trial_result(1, trials, trials[0], {"env_runners": {"num_env_steps_sampled_lifetime": 20_000,
                                                              "episode_return_mean": 182.25}})
    pi.on_trial_result(1, trials, trials[1], {"env_runners": {"num_env_steps_sampled_lifetime": 3_000,
                                                              "episode_return_mean": 20.75}})
    pi.on_step_end(1, trials)
    view.poll()
    view.poll()  # nothing changed since: no second view
    assert len(printed) == 1
    lines = printed[0].splitlines()
    # one grid has made 3 of its 4 trials, the other none yet: those count as pending
    assert lines[0].startswith("[tune] cartpole_dqn after ") and lines[0].endswith(": 1 running, 4 pending, 1 done")
    assert lines[1] == "[tune]   kappa_pi_dqn  1 running, 2 pending, 1 done; 23k of 80k env steps; return 101.5"
    assert lines[2] == "[tune]   dqn           0 running, 2 pending, 0 done; 0 of 40k env steps"
    trials[2].status = "ERROR"
    pi.on_trial_error(2, trials, trials[2])  # said at once, one line
    assert printed[-1] == "[tune] kappa_pi_dqn: trial kappa 0.84, seed 2 failed; error file /r/t2/error.txt"
    assert view.view().splitlines()[1].startswith("[tune]   kappa_pi_dqn  1 running, 1 pending, 1 done, 1 failed; ")
    # Tune pickles its callbacks with the run's settings: the view (its lock, its output) stays behind
    import pickle

    alone = pickle.loads(pickle.dumps(pi))
    assert alone.file is None and alone.name == "kappa_pi_dqn"


def test_the_file_view_says_the_env_steps_done_and_the_time_left_at_the_pace_of_this_run():
    from types import SimpleNamespace

    from kappa_rllib.tuning.progress import FileProgress, _count, _duration

    now = [0.0]
    printed = []
    view = FileProgress("f", interval_s=0.0, out=printed.append, eta=True, clock=lambda: now[0])
    grid = view.callback("g", num_trials=3, total_env_steps=63_000)
    trials = [SimpleNamespace(trial_id=f"t{i}", status=status, evaluated_params={"seed": i}, error_file=None,
                              config={"total_env_steps": 63_000}) for i, status in enumerate(["RUNNING"] * 2 + ["PENDING"])]

    def result(trial, steps):
        grid.on_trial_result(1, trials, trial, {"env_runners": {"num_env_steps_sampled_lifetime": steps}})

    grid.setup()
    now[0] = 10.0
    result(trials[0], 31_000)  # resumed from a checkpoint: what it did before does not set the pace
    result(trials[1], 2_000)
    now[0] = 70.0
    result(trials[0], 34_000)
    result(trials[1], 5_000)  # 6,000 env steps in 60 s: 100 per s
    view.poll()
    # 39,000 of 189,000 done; 150,000 left at 100 env steps/s
    assert printed[-1].splitlines()[0] == ("[tune] f after 70 s: 2 running, 1 pending, 0 done; 39k of 189k env steps, "
                                           "~25 min left at this pace")
    trials[0].status = "TERMINATED"  # its total counts as done, whatever its last result said
    trials[2].status = "ERROR"  # a failed trial leaves nothing to run, and counts what it reached (0)
    assert view.view().splitlines()[0].endswith("; 68k of 189k env steps, ~10 min left at this pace")
    assert [_count(n) for n in (1_000, 39_000, 7_500_000)] == ["1,000", "39k", "7.50M"]
    assert [_duration(s) for s in (30, 1500, 4.5 * 3600)] == ["<1 min", "~25 min", "~4.5 h"]
    trials[1].config = {}  # a trial without a known total, in a grid without one: no estimate
    grid.total_env_steps = None
    assert view.view().splitlines()[0] == "[tune] f after 70 s: 1 running, 0 pending, 1 done, 1 failed"
    quiet = FileProgress("f", out=printed.append)  # eta off (another stop rule): no estimate
    quiet.grids = view.grids
    assert quiet.view().splitlines()[0].endswith(": 1 running, 0 pending, 1 done, 1 failed")


def test_a_resumed_trial_waiting_for_its_turn_counts_the_env_steps_it_had_reached():
    """A --resume's view counted a stored trial that had not started again yet as 0 env steps (HumanoidStandup:
    two trials at 1.8M of 2M each read "0 of 10.00M"), so the line's total and its time left were wrong until it
    ran. It now reads the trial's last result as Tune restored it."""
    from types import SimpleNamespace

    from kappa_rllib.tuning.progress import FileProgress

    view = FileProgress("f", interval_s=0.0, out=lambda line: None, eta=True, clock=lambda: 0.0)
    grid = view.callback("g", num_trials=2, total_env_steps=2_000_000)
    grid.trials = [SimpleNamespace(trial_id=f"t{i}", status="PENDING", evaluated_params={"seed": i}, error_file=None,
                                   config={"total_env_steps": 2_000_000},
                                   last_result={"env_runners": {"num_env_steps_sampled_lifetime": reached}})
                   for i, reached in enumerate((1_800_000, 0))]
    assert grid.steps() == (1_800_000, 4_000_000, 2_200_000)  # (before: 0 done, 4,000,000 left)


def test_run_folders_from_python_create_trim_and_read_back(tmp_path):
    from kappa_rllib import KappaPIDQNConfig, runs

    config = KappaPIDQNConfig().environment("CartPole-v1").training(kappa=0.84, c_fa=0.2, total_env_steps=20_000)
    run_dir = runs.create(tmp_path, "kappa-pi-dqn", config, command=["python"])
    assert run_dir.name.startswith("kappa-pi-dqn_CartPole-v1_k0.84_c0.2_g0.99_s0_")
    with open(run_dir / "progress.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=runs.PROGRESS_COLUMNS)
        writer.writeheader()
        for i in (1, 2, 3):
            writer.writerow({**dict.fromkeys(runs.PROGRESS_COLUMNS, "-"), "training_iteration": i, "env_steps": 1000 * i,
                             "episode_return_mean": 10.5 * i})
    (run_dir / "result.json").write_text('{"training_iteration": 1}\n{"training_iteration": 2}\n{"training_it')
    runs.trim(run_dir, 2)  # a crash after checkpoint 2: row 3 and the torn line go
    meta, rows = runs.read(run_dir)
    assert meta == {"algo": "kappa-pi-dqn", "env": "CartPole-v1", "total_env_steps": 20000, "finished": False,
                    "command": ["python"]}
    assert [(r["training_iteration"], r["env_steps"], r["episode_return_mean"]) for r in rows] == [(1, 1000, 10.5),
                                                                                                   (2, 2000, 21.0)]
    assert (run_dir / "result.json").read_text() == '{"training_iteration": 1}\n{"training_iteration": 2}\n'
    assert json.loads((run_dir / "params.json").read_text())["kappa"] == 0.84
    with pytest.raises(runs.RunError, match=f"^{tmp_path} is not a `kappa-rllib train` run folder"):
        runs.resume(tmp_path)


def test_a_grid_started_by_the_version_before_the_file_view_still_unpickles():
    """`--resume` of a grid started before the grids ran together: its tuner.pkl holds that version's
    per-grid callback, `kappa_rllib.progress.CompactProgress` (found when a Table 2 grid was resumed
    across the change: AttributeError before this name came back)."""
    import pickle

    # what that version pickled: the class by its module and name, then its __dict__
    old_state = {"grid_name": "g", "axes": ["seed"], "interval_s": 60.0, "eta": True, "latest": {}, "first": {},
                 "started": 0.0, "last_print": 0.0, "changed": False}
    data = (b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x14kappa_rllib.progress\x94\x8c\x0fCompactProgress\x94"
            b"\x93\x94)\x81\x94" + pickle.dumps(old_state, protocol=4)[2:-1] + b"b.")
    restored = pickle.loads(data)
    assert type(restored).__name__ == "CompactProgress" and restored.grid_name == "g"


def test_a_storage_error_while_the_grids_run_is_one_line_with_exit_2_and_no_empty_tuner_file(tmp_path, monkeypatch,
                                                                                            capsys):
    """An OSError from the grids' run (a disk that fills as Tune sets a grid up, a folder gone, an error of a
    cluster-side storage call): one line naming the error, its path and the storage, how to go on, exit 2, no
    traceback; the empty `tuner.pkl` a full disk leaves (which Tune would take for a run to restore) is gone."""
    import errno
    from pathlib import Path

    from kappa_rllib.cli import main, tune as tune_verb
    from kappa_rllib.tuning import driver

    storage, written = tmp_path / "results", []

    def full_disk(grids, path, **kwargs):
        folder = Path(path) / grids[0].name
        folder.mkdir(parents=True)
        (folder / "tuner.pkl").write_bytes(b"")
        written.append(folder / "tuner.pkl")
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "tuner.pkl"))

    monkeypatch.setattr(tune_verb, "start_ray", lambda *args, **kwargs: None)
    monkeypatch.setattr(driver, "run", full_disk)
    code = main(["tune", "tune_configs/small/cartpole_dqn.py", "--storage", str(storage), "--num-cpus", "2"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"kappa-rllib: error: [Errno 28] No space left on device: '{written[0]}': the storage "
                          f"{storage / 'cartpole_dqn'} could not be written; fix it, then start again, or resume "
                          "with: "), err
    assert not written[0].exists()
