"""RLlib's periodic evaluation (`config.evaluation(evaluation_interval=N, ...)`) for kappa-DQN and
kappa-TRPO: results under `evaluation/`, and training untouched by it. Evaluation samples with
RLlib's own EnvRunner on its own envs (config_mixins.RawSamplingMixin.get_evaluation_config_object),
so each run below is compared with the same run without evaluation: the same kappa schedule and
counters, the same replay contents and the same networks, bit for bit."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ray.rllib.core import DEFAULT_MODULE_ID

from kappa_rllib import KappaPIDQNConfig, KappaPITRPOConfig
from kappa_rllib.env_runner import EpisodeReturnsEnvRunner

ROOT = Path(__file__).resolve().parents[1]


def dqn_config():
    return (KappaPIDQNConfig().environment("CartPole-v1")
            .training(kappa=0.84, c_fa=0.2, total_env_steps=2400, env_steps_per_iteration=600,
                      num_steps_sampled_before_learning_starts=300, target_network_update_freq=200,
                      epsilon=[(0, 1.0), (1200, 0.1)])
            .rl_module(model_config={"fcnet_hiddens": [16], "head_fcnet_hiddens": []})
            .debugging(seed=0))


def trpo_config():
    return (KappaPITRPOConfig().environment("Pendulum-v1")
            .training(kappa=0.84, c_fa=0.4, total_env_steps=6400, train_batch_size=400)
            .debugging(seed=0))


def weights(algo) -> dict:
    state = algo.learner_group.get_state()["learner"]["rl_module"]
    return {(mid, k): np.asarray(v) for mid, w in state.items() for k, v in w.items()}


def train_to_done(config):
    algo = config.build_algo()
    try:
        results = []
        while not results or not results[-1].get("done"):
            results.append(algo.train())
        return results, algo.phases.get_state(), dict(algo.counters), weights(algo), _replay(algo)
    finally:
        algo.stop()


def with_and_without_evaluation(config, *, interval: int, episodes: int):
    """`train_to_done` of the config with greedy evaluation every `interval` iterations, and without."""
    evaluated = train_to_done(config().evaluation(
        evaluation_interval=interval, evaluation_duration=episodes, evaluation_duration_unit="episodes",
        evaluation_config={"explore": False}))
    return evaluated, train_to_done(config())


def _replay(algo):
    buffer = getattr(algo, "local_replay_buffer", None)
    return None if buffer is None else buffer.get_state()


def assert_same_training(with_eval, without):
    (results_e, phases_e, counters_e, weights_e, replay_e), (results, phases, counters, weights_, replay) = with_eval, without
    assert phases_e == phases and counters_e == counters  # the kappa schedule counted training env steps only
    assert [r["kappa"] for r in results_e] == [r["kappa"] for r in results]
    assert [r["env_runners"]["num_env_steps_sampled_lifetime"] for r in results_e] == [
        r["env_runners"]["num_env_steps_sampled_lifetime"] for r in results]
    assert weights_e.keys() == weights_.keys()
    for key in weights_:
        np.testing.assert_array_equal(weights_e[key], weights_[key], err_msg=str(key))
    assert same(replay_e, replay)  # evaluation episodes never entered the replay buffer


def same(a, b) -> bool:
    """Deep equality of nested dicts / lists / arrays / bytes."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(a, b)
    return a == b


@pytest.mark.learning
def test_kappa_dqn_evaluates_greedily_every_iteration_without_touching_training(ray_local):
    evaluated, plain = with_and_without_evaluation(dqn_config, interval=1, episodes=3)
    results = evaluated[0]
    assert len(results) == 4
    for r in results:
        ev = r["evaluation"]["env_runners"]
        assert ev["num_episodes"] == 3 and np.isfinite(ev["episode_return_mean"])
    assert_same_training(evaluated, plain)


def test_the_evaluation_envrunner_and_an_atari_style_epsilon(ray_local):
    """Evaluation samples with RLlib's episode-building EnvRunner, with the evaluation config's own
    epsilon (DeepMind evaluated Atari at epsilon 0.05), while training keeps its schedule."""
    config = dqn_config().evaluation(evaluation_interval=1, evaluation_duration=1,
                                     evaluation_config={"explore": True, "epsilon": [(0, 0.05)]})
    eval_config = config.get_evaluation_config_object()
    assert eval_config.env_runner_cls is EpisodeReturnsEnvRunner and eval_config.in_evaluation
    algo = config.build_algo()
    try:
        module = algo.eval_env_runner.module[DEFAULT_MODULE_ID] if hasattr(algo.eval_env_runner.module, "keys") \
            else algo.eval_env_runner.module
        assert module.epsilon_schedule.get_current_value() == 0.05
        result = algo.train()
        assert result["evaluation"]["env_runners"]["num_episodes"] >= 1
        assert result["kappa"]["env_steps"] == 600
    finally:
        algo.stop()


@pytest.mark.learning
def test_kappa_trpo_evaluates_every_second_iteration_without_touching_training(ray_local):
    evaluated, plain = with_and_without_evaluation(trpo_config, interval=2, episodes=1)
    results = evaluated[0]
    # first evaluated after iteration 2 (RLlib repeats the latest evaluation results in between)
    assert "evaluation" not in results[0] and all("evaluation" in r for r in results[1:])
    for r in results[1:]:
        assert r["evaluation"]["env_runners"]["num_episodes"] == 1
        assert r["evaluation"]["env_runners"]["episode_len_mean"] == 200  # Pendulum's time limit
    assert_same_training(evaluated, plain)


@pytest.mark.learning
def test_train_eval_every_on_the_command_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kappa_rllib.cli", "train", "--algo", "kappa-vi-dqn",
                          "--env", "CartPole-v1", "--total-steps", "2000", "--num-cpus", "1",
                          "--eval-every", "1", "--eval-episodes", "2", "--output", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (run_dir / "result.json").read_text().splitlines()]
    assert rows and all(r["evaluation"]["env_runners"]["num_episodes"] == 2 for r in rows)
    assert "eval return" in out.stdout


def test_evaluation_options_are_checked_in_one_line():
    def train(*args):
        return subprocess.run([sys.executable, "-m", "kappa_rllib.cli", "train", "--dry-run", *args],
                              capture_output=True, text=True, cwd=ROOT)

    out = train("--algo", "kappa-pi-trpo", "--env", "Pendulum-v1", "--eval-every", "2", "--eval-epsilon", "0.05")
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "kappa-rllib: error: --eval-epsilon applies to the DQN family with --eval-every N"]
    out = train("--algo", "dqn", "--env", "CartPole-v1", "--eval-epsilon", "0.05")
    assert out.returncode == 2 and out.stderr.strip().endswith("--eval-epsilon needs --eval-every N")
    assert train("--algo", "dqn", "--env", "CartPole-v1", "--eval-every", "5", "--eval-epsilon", "0.05").returncode == 0
