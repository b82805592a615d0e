"""RLlib's own habits and test utilities on every exported algorithm, as an RLlib 2.60 user would drive each one
beside RLlib's DQN and PPO (docs/rllib-settings.md):

| algorithm | check_train_results_new_api_stack x4 | from_checkpoint round trip | bare evaluate() | register_env name | plain tune.Tuner's config | Discrete observation |
|---|---|---|---|---|---|---|
| kappa-PI-DQN, kappa-VI-DQN, DQN (kappa = 1) | each row | state equal, goes on in step | 10 episodes | trains | whole on every row | one line at validate() |
| kappa-PI-TRPO, kappa-VI-TRPO, TRPO, GAE | each row | state equal, goes on in step | 10 episodes | trains | whole on every row | one line at validate() |
| kappa-PI-PPO, kappa-VI-PPO, kappa-PI-APPO, kappa-VI-APPO | each row | state equal, goes on | 10 episodes | trains | whole on every row | one line at validate() |

"State equal": every network's weights, the kappa phase machine and the counters; "goes on in step": the restored
algorithm's next iterations report the same iteration and env-step counts as the original's. Not bit for bit:
the envs restart from a reset after a restore (their physics state is in no checkpoint), as RLlib's own DQN and
PPO do, so the episodes after it differ.
"""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from ray import tune
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
from ray.rllib.utils.test_utils import check_train_results_new_api_stack
from ray.tune.registry import register_env

from kappa_rllib import (KappaPIAPPOConfig, KappaPIDQNConfig, KappaPIPPOConfig, KappaPITRPOConfig, KappaVIAPPOConfig,
                         KappaVIDQNConfig, KappaVIPPOConfig, KappaVITRPOConfig, TRPOConfig)

ENV = "kappa_habits_cartpole"  # a name registered with Tune, the way RLlib users bring their own task


def _dqn(cls, **kw):
    return cls().training(total_env_steps=4000, env_steps_per_iteration=250, c_fa=0.5,
                          num_steps_sampled_before_learning_starts=200, **kw)


def _trpo(cls, **kw):
    extra = {"c_fa": 0.5} if cls is not TRPOConfig else {}
    return cls().training(total_env_steps=64 * 40, train_batch_size=64, **extra, **kw)


def _ppo(cls):
    return (cls().env_runners(num_env_runners=0, num_envs_per_env_runner=1)
            .training(total_env_steps=128 * 40, train_batch_size=128, minibatch_size=64, num_epochs=1, c_fa=0.5))


def _appo(cls):
    return (cls().env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length=50)
            .learners(num_learners=0).training(total_env_steps=100 * 60, train_batch_size_per_learner=100, c_fa=0.5))


ALGORITHMS = {
    "kappa-PI-DQN": lambda: _dqn(KappaPIDQNConfig, kappa=0.9),
    "kappa-VI-DQN": lambda: _dqn(KappaVIDQNConfig, kappa=0.9),
    "DQN": lambda: _dqn(KappaPIDQNConfig, kappa=1.0),
    "kappa-PI-TRPO": lambda: _trpo(KappaPITRPOConfig, kappa=0.9),
    "kappa-VI-TRPO": lambda: _trpo(KappaVITRPOConfig, kappa=0.9),
    "TRPO": lambda: _trpo(TRPOConfig),
    "GAE": lambda: _trpo(TRPOConfig, lambda_=0.9),
    "kappa-PI-PPO": lambda: _ppo(KappaPIPPOConfig),
    "kappa-VI-PPO": lambda: _ppo(KappaVIPPOConfig),
    "kappa-PI-APPO": lambda: _appo(KappaPIAPPOConfig),
    "kappa-VI-APPO": lambda: _appo(KappaVIAPPOConfig),
}
IN_STEP = ("DQN", "TRPO", "GAE")  # fixed env steps an iteration: the counts of the two runs match


@pytest.fixture(scope="module")
def registered(ray_local):
    register_env(ENV, lambda env_config: gym.make("CartPole-v1"))
    return ENV


def config_of(name, env):
    return ALGORITHMS[name]().environment(env).debugging(seed=0)


def learner_weights(algo) -> dict:
    state = algo.learner_group.get_state()["learner"]["rl_module"]
    return {(mid, k): np.asarray(v) for mid, w in state.items() for k, v in w.items()}


def equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_rllibs_utilities_hold(name, registered, tmp_path):
    """On a name registered with Tune: RLlib's result check on each of 4 iterations (the config on every row),
    a checkpoint round trip through `Algorithm.from_checkpoint`, and a bare `evaluate()`."""
    algo = config_of(name, registered).build_algo()
    try:
        for _ in range(2):
            check_train_results_new_api_stack(algo.train())
        path = algo.save_to_path(str(tmp_path / "ckpt"))
        restored = Algorithm.from_checkpoint(path)
        try:
            # against the networks in the checkpoint, as RLlib reads them (kappa-APPO's learner thread may still be
            # updating the original's from batches queued before the save)
            saved = MultiRLModule.from_checkpoint(str(Path(path) / "learner_group" / "learner" / "rl_module"))
            assert type(restored) is type(algo)
            weights = learner_weights(restored)  # (APPO's learner adds its target networks, `_old_*`, to the modules)
            saved = {(mid, k): np.asarray(v) for mid, w in saved.get_state().items() for k, v in w.items()}
            assert len(saved) > 0 and equal({k: weights[k] for k in saved}, saved)
            if hasattr(algo, "phases"):
                assert restored.phases == algo.phases and restored.counters == algo.counters
            for _ in range(2):
                row, again = algo.train(), restored.train()
                check_train_results_new_api_stack(row)
                check_train_results_new_api_stack(again)
                assert row["config"] == algo.config.to_dict() and again["config"] == restored.config.to_dict()
                assert row["training_iteration"] == again["training_iteration"]
                if name.endswith(IN_STEP):
                    steps = "num_env_steps_sampled_lifetime"
                    assert row["env_runners"][steps] == again["env_runners"][steps]
        finally:
            restored.stop()
        evaluated = algo.evaluate()  # no .evaluation(...) config: RLlib's default, 10 episodes
        runners = evaluated["env_runners"]
        assert runners["num_episodes"] >= 10 and np.isfinite(runners["episode_return_mean"])
        check_train_results_new_api_stack(algo.train())  # training goes on after it
    finally:
        algo.stop()


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_a_plain_tuner_keeps_the_config_on_every_row(name, registered, tmp_path):
    """`tune.Tuner(Algo, param_space=config)` as the class docstrings show it: the best result's config is the
    trial's, and `metrics_dataframe`'s config columns are whole on every row."""
    config = config_of(name, registered).training(kappa=tune.grid_search([0.9])) if name.startswith("kappa") \
        else config_of(name, registered)
    results = tune.Tuner(config.algo_class, param_space=config, run_config=tune.RunConfig(
        storage_path=str(tmp_path), stop={"training_iteration": 4}, verbose=0)).fit()
    assert not results.errors
    best = results.get_best_result(metric="env_runners/num_env_steps_sampled_lifetime", mode="max")
    assert best.config is not None and best.config["env"] == ENV
    frame = best.metrics_dataframe
    assert len(frame) == 4 and frame["config/env"].eq(ENV).all()
    if name.startswith("kappa"):
        assert frame["config/kappa"].eq(0.9).all()


def test_a_module_that_registers_its_env_is_imported_by_the_config(registered):
    """`.environment("module:name")` (the Python API and grid files, as `train --env module:name`): the module is
    imported, and `name`, which it registers with Tune, is the env the config names."""
    config = KappaPIDQNConfig().environment("habits_env:kappa_habits_module_cartpole")
    assert config.env == "kappa_habits_module_cartpole"
    config.validate()


def test_a_registered_env_with_the_wrong_action_space_is_refused_in_one_line(registered):
    register_env("kappa_habits_pendulum", lambda env_config: gym.make("Pendulum-v1"))
    with pytest.raises(ValueError, match="'kappa_habits_pendulum' has a Box action space: kappa-DQN needs discrete"):
        KappaPIDQNConfig().environment("kappa_habits_pendulum").validate()
    with pytest.raises(ValueError, match="unknown env id 'kappa_habits_nowhere'"):
        KappaPIDQNConfig().environment("kappa_habits_nowhere").validate()


def test_the_cli_trains_and_tunes_on_a_name_registered_with_tune(tmp_path):
    """`kappa-rllib train --env module:name` imports the module that registers `name` with Tune; `kappa-rllib tune`
    takes a grid file that registers its env at import. Both run to their end on the registered env."""
    import json
    import os
    import subprocess
    import sys
    import textwrap

    root, tests = Path(__file__).resolve().parents[1], Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": str(tests)}
    cli = [sys.executable, "-m", "kappa_rllib.cli"]
    done = subprocess.run([*cli, "train", "--algo", "trpo", "--env", "habits_env:kappa_habits_module_cartpole",
                           "--total-steps", "2048", "--num-cpus", "1", "--output", str(tmp_path / "train")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    grid = tmp_path / "grid.py"
    grid.write_text(textwrap.dedent("""\
        import habits_env  # registers kappa_habits_module_cartpole with Tune
        from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

        def experiments(smoke=False):
            return paper_grids("dqn", habits_env.NAME, kappas=[0.84], c_fa=[0.5], num_seeds=1, variants=("pi",),
                               baseline=False, **SMOKE_SETTINGS["dqn"])

        GRIDS = experiments()
        """))
    done = subprocess.run([*cli, "tune", str(grid), "--num-cpus", "1", "--storage", str(tmp_path / "tune")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "finished: 1/1 trials without error" in done.stdout + done.stderr, done.stderr[-2000:]
    (params,) = (tmp_path / "tune").glob("*/*/*/params.json")
    assert json.loads(params.read_text())["env"] == "kappa_habits_module_cartpole"


def test_from_checkpoint_checks_the_manifest_as_load_does(registered, tmp_path):
    """A checkpoint with a truncated file is refused in one line by RLlib's `Algorithm.from_checkpoint` (the check in
    `restore_from_path`, before any state file is read), by the class's own `from_checkpoint` (before anything is
    unpickled) and by `restore_from_path`; a whole one loads."""
    from kappa_rllib.checkpoints import CheckpointError

    algo = config_of("kappa-PI-TRPO", registered).build_algo()
    algo.train()
    path = Path(algo.save_to_path(str(tmp_path / "ckpt")))
    try:
        victim = max((p for p in path.rglob("*") if p.is_file() and p.name != "kappa_rllib_checkpoint.json"),
                     key=lambda p: p.stat().st_size)
        data = victim.read_bytes()
        victim.write_bytes(data[: len(data) // 2])
        name = str(victim.relative_to(path))
        for load in (Algorithm.from_checkpoint, type(algo).from_checkpoint, algo.restore_from_path):
            with pytest.raises(CheckpointError, match=f"{name} has {len(data) // 2} bytes, the save wrote {len(data)}"):
                load(str(path))
        victim.write_bytes(data)
        Algorithm.from_checkpoint(str(path)).stop()
    finally:
        algo.stop()


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_an_observation_space_without_a_default_network_is_refused_at_validate_in_one_line(name):
    """Taxi-v3's Discrete(500) observation: RLlib's catalog raised "No default encoder config" as the algorithm was
    built (a traceback from `kappa-rllib train`, exit 1); `validate()` now names the env and what to do."""
    with pytest.raises(ValueError) as refused:
        ALGORITHMS[name]().environment("Taxi-v3").validate()
    message = str(refused.value)
    assert "\n" not in message and "'Taxi-v3' has a Discrete(500) observation space" in message, message
    ALGORITHMS[name]().environment("CartPole-v1").validate()  # a Box: no word


def test_a_connector_that_flattens_the_observation_is_not_refused_on_rllibs_env_runner():
    """kappa-PPO / kappa-APPO sample on RLlib's EnvRunner, whose env-to-module connectors run: RLlib's
    FlattenObservations one-hots Taxi's Discrete(500) for the module, so validate() takes it (the review found it
    refused). kappa-DQN's and TRPO's raw-transition EnvRunner runs no connector: still refused there."""
    from ray.rllib.connectors.env_to_module import FlattenObservations

    def flatten(env=None, spaces=None, device=None):
        return FlattenObservations()

    for name in ("kappa-PI-PPO", "kappa-VI-APPO"):
        ALGORITHMS[name]().environment("Taxi-v3").env_runners(env_to_module_connector=flatten).validate()
    with pytest.raises(ValueError, match="Discrete\\(500\\) observation space"):
        ALGORITHMS["kappa-PI-DQN"]().environment("Taxi-v3").env_runners(env_to_module_connector=flatten).validate()
