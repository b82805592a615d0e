"""Short learning tests (CI): kappa-DQN on CartPole with the committed preset and on a tabular
MDP valued exactly with `kappa_rllib.dp`; TRPO and kappa-PI-TRPO on InvertedPendulum and
CartPole. A run stops as soon as it reaches its threshold. Thresholds are fixed by the issues;
never lower them."""

import numpy as np
import pytest
import torch

from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from kappa_rllib import KappaPIDQNConfig, KappaPITRPOConfig, KappaVIDQNConfig, TRPOConfig, presets
from kappa_rllib.dp import evaluate_policy, solve_mdp
from kappa_rllib.envs import TABULAR_ENV
from training import steps_to_reach

pytestmark = pytest.mark.learning


def train_to_end(config):
    algo = config.build_algo()
    results = []
    while not results or not results[-1].get("done"):
        results.append(algo.train())
    return algo, results


@pytest.mark.parametrize("config_cls", [KappaPIDQNConfig, KappaVIDQNConfig])
def test_kappa_dqn_cartpole_reaches_150_within_50k_steps(ray_local, config_cls):
    config = presets.apply(config_cls(), presets.load(presets.preset_for("CartPole-v1")))
    config.environment("CartPole-v1").training(kappa=0.84, c_fa=0.05, total_env_steps=50_000).debugging(seed=0)
    reached, _ = steps_to_reach(config, 150, 50_000)
    assert reached is not None and reached <= 50_000


@pytest.mark.parametrize(
    "config",
    [
        lambda: TRPOConfig(),
        lambda: KappaPITRPOConfig().training(kappa=0.84, c_fa=0.2, total_env_steps=100_000),
    ],
    ids=["trpo", "kappa-pi-trpo"],
)
def test_trpo_inverted_pendulum_reaches_500_within_100k_steps(ray_local, config):
    reached, _ = steps_to_reach(config().environment("InvertedPendulum-v5").debugging(seed=0), 500, 100_000)
    assert reached is not None and reached <= 100_000


def test_trpo_solves_cartpole_within_100k_steps(ray_local):
    reached, _ = steps_to_reach(TRPOConfig().environment("CartPole-v1").debugging(seed=0), 195, 100_000)
    assert reached is not None and reached <= 100_000


def small_mdp(seed=3, num_states=6, num_actions=3):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(num_states, 0.3), size=(num_states, num_actions))
    R = rng.uniform(-1.0, 1.0, size=(num_states, num_actions))
    return P, R


@pytest.mark.parametrize("config_cls", [KappaPIDQNConfig, KappaVIDQNConfig])
def test_tabular_greedy_policy_closes_90_percent_of_gap(ray_local, config_cls):
    torch.set_num_threads(1)
    gamma = 0.9
    P, R = small_mdp()
    initial = np.full(P.shape[0], 1.0 / P.shape[0])
    config = (
        config_cls()
        .environment(TABULAR_ENV, env_config={"P": P.tolist(), "R": R.tolist(), "horizon": 50})
        .training(
            kappa=0.5, c_fa=0.1, gamma=gamma, total_env_steps=12_000, lr=1e-3, train_batch_size=64,
            target_network_update_freq=200, num_steps_sampled_before_learning_starts=500,
            epsilon=[(0, 1.0), (4000, 0.05)], env_steps_per_update=2, env_steps_per_iteration=3000,
            replay_buffer_config={"type": "UniformReplayBuffer", "capacity": 20_000}, env_steps_per_fragment=8,
        )
        .rl_module(model_config={"fcnet_hiddens": [32], "head_fcnet_hiddens": []})
        .debugging(seed=0)
    )
    algo, _ = train_to_end(config)
    theta = algo.learner_group._learner.module[DEFAULT_MODULE_ID].unwrapped()
    with torch.no_grad():
        q = theta.compute_q_values({Columns.OBS: torch.eye(P.shape[0])})[QF_PREDS].numpy()
    algo.stop()

    greedy = q.argmax(axis=1)
    v_learned = initial @ evaluate_policy(P, R, gamma, greedy)
    v_random = initial @ evaluate_policy(P, R, gamma, np.full(R.shape, 1.0 / R.shape[1]))
    v_star = initial @ solve_mdp(P, R, gamma)[1]
    gap_closed = (v_learned - v_random) / (v_star - v_random)
    print(f"{config_cls.__name__}: V(random) {v_random:.3f}  V(learned) {v_learned:.3f}  V* {v_star:.3f}  "
          f"gap closed {gap_closed:.3f}")
    assert v_star - v_random > 0.5  # the test MDP has a real gap to close
    assert gap_closed >= 0.9
