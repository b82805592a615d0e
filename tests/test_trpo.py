"""TRPO and kappa-TRPO numerics: conjugate gradient, the KL-limited step and line search,
kappa-returns against a plain loop, and the paper's identities (GAE, kappa = 1)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from kappa_rllib import KappaPITRPOConfig, KappaVITRPOConfig, TRPOConfig
from kappa_rllib.algorithms.kappa_trpo.torch.kappa_trpo_torch_learner import VALUE_PHI_MODULE_ID
from kappa_rllib.algorithms.trpo.torch.natural_gradient import backtracking_line_search, conjugate_gradient
from kappa_rllib.returns import gae_advantages

GAMMA, KAPPA = 0.99, 0.7


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n", [2, 5, 10])
def test_conjugate_gradient_solves_spd_systems(seed, n):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n))
    F = torch.as_tensor(A @ A.T + 0.1 * np.eye(n))  # symmetric positive definite
    g = torch.as_tensor(rng.normal(size=n))
    x = conjugate_gradient(lambda v: F @ v, g, iterations=10)
    torch.testing.assert_close(F @ x, g, atol=1e-6, rtol=0)


def test_line_search_rejects_steps_that_break_the_kl_limit():
    p = torch.zeros(2)
    tried = []

    def evaluate():  # surrogate grows along the step, KL = 4 * (step fraction)^2
        frac = p[0].item()
        tried.append(frac)
        return frac, 4 * frac**2

    out = backtracking_line_search([p], torch.ones(2), evaluate, 0.0, max_kl=0.3)
    assert tried == [1.0, 0.5, 0.25]  # KL 4 and 1 rejected, 0.25 accepted
    assert out == {"accepted": True, "line_search_steps": 3, "surrogate": 0.25, "kl": 0.25}
    torch.testing.assert_close(p, torch.full((2,), 0.25))


def test_line_search_restores_parameters_when_nothing_improves():
    p = torch.tensor([1.0, -2.0])
    out = backtracking_line_search([p], torch.ones(2), lambda: (-1.0, 0.0), 0.0, max_kl=0.01, max_backtracks=4)
    assert not out["accepted"] and out["line_search_steps"] == 4
    torch.testing.assert_close(p, torch.tensor([1.0, -2.0]))


def make_learner(config):
    env_id = config.env
    return config.build_learner(env=gym.make(env_id.split(":")[-1]))


def random_batch(env_id, n=512, seed=0):
    env = gym.make(env_id)
    env.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n,) + env.observation_space.shape).astype(np.float32)
    actions = np.stack([env.action_space.sample() for _ in range(n)])
    adv = rng.normal(size=n).astype(np.float32) + obs[:, 0]  # correlated with the state
    return {"obs": torch.as_tensor(obs), "actions": torch.as_tensor(actions), "advantages": torch.as_tensor(adv)}


@pytest.mark.parametrize("env_id", ["CartPole-v1", "InvertedPendulum-v5"])
def test_trpo_step_respects_the_kl_limit(env_id):
    learner = make_learner(TRPOConfig().environment(env_id).training(max_kl=0.01).debugging(seed=0))
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    batch = random_batch(env_id)
    dist_cls = module.get_train_action_dist_cls()
    with torch.no_grad():
        before = dist_cls.from_logits(module.forward_train({Columns.OBS: batch["obs"]})[Columns.ACTION_DIST_INPUTS])
    stats = learner.policy_step(batch)
    with torch.no_grad():
        after = dist_cls.from_logits(module.forward_train({Columns.OBS: batch["obs"]})[Columns.ACTION_DIST_INPUTS])
        kl = before.kl(after).mean().item()
    assert stats["step_accepted"] == 1.0 and stats["surrogate_improvement"] > 0
    assert 0 < kl <= 0.01 + 1e-7
    assert kl == pytest.approx(stats["mean_kl"], rel=1e-4)


def hand_made_chunks():
    """Three chunks of one batch: a terminated episode, a time-limit truncation, and the batch end."""
    rng = np.random.default_rng(1)
    chunks = []
    for n, terminated in [(4, True), (3, False), (5, False)]:
        chunks.append({
            "obs": rng.normal(size=(n + 1, 4)).astype(np.float32),
            "actions": rng.integers(0, 2, size=n),
            "rewards": rng.uniform(-1, 2, size=n),
            "terminated": terminated,
        })
    return chunks


def loop_returns(rewards, v_phi, v_theta_last, terminated, gamma, kappa):
    """R_j(kappa, V_phi) and rho_j by the definition, one sum per j (no recursion)."""
    n = len(rewards)
    R, rho = [], []
    for j in range(n):
        r_kappa, r_plain = 0.0, 0.0
        for t in range(j, n):
            v_next = 0.0 if (terminated and t == n - 1) else v_phi[t + 1]
            r_kappa += (gamma * kappa) ** (t - j) * (rewards[t] + gamma * (1 - kappa) * v_next)
            r_plain += gamma ** (t - j) * rewards[t]
        if not terminated:  # truncation or batch end: bootstrap
            r_kappa += (gamma * kappa) ** (n - j) * v_theta_last
            r_plain += gamma ** (n - j) * v_phi[n]
        R.append(r_kappa)
        rho.append(r_plain)
    return np.array(R), np.array(rho)


def kappa_learner(kappa=KAPPA, config_cls=KappaPITRPOConfig):
    return make_learner(config_cls().environment("CartPole-v1").training(kappa=kappa, gamma=GAMMA).debugging(seed=0))


def test_kappa_returns_and_plain_returns_match_a_loop():
    learner = kappa_learner()
    chunks = hand_made_chunks()
    values = learner.chunk_values(chunks)
    for chunk, v in zip(chunks, values):
        out = learner.advantages_and_targets(chunk, v)
        v_theta, v_phi = v[DEFAULT_MODULE_ID], v[VALUE_PHI_MODULE_ID]
        R, rho = loop_returns(chunk["rewards"], v_phi, v_theta[-1], chunk["terminated"], GAMMA, KAPPA)
        np.testing.assert_allclose(out["value_targets"], R, rtol=1e-10)
        np.testing.assert_allclose(out["advantages"], R - v_theta[:-1], rtol=1e-10)
        np.testing.assert_allclose(out["value_phi_targets"], rho, rtol=1e-10)


@pytest.mark.parametrize("config_cls", [KappaPITRPOConfig, KappaVITRPOConfig])
def test_advantages_equal_gae_lambda_kappa_when_v_phi_is_v_theta(config_cls):
    """Paper, Sec. 6: with V_phi = V_theta, kappa-TRPO's advantages are GAE(gamma, lambda = kappa)."""
    learner = kappa_learner(config_cls=config_cls)
    learner.copy_value_theta_to_phi()
    chunks = hand_made_chunks()
    data = learner.build_train_data(chunks)
    gae = np.concatenate([
        gae_advantages(c["rewards"], v[DEFAULT_MODULE_ID], c["terminated"], GAMMA, KAPPA)
        for c, v in zip(chunks, learner.chunk_values(chunks))
    ])
    np.testing.assert_allclose(data["advantages"].numpy(), gae, rtol=1e-5, atol=1e-6)
    # and the same through the GAE baseline learner, with the same V_theta weights
    gae_learner = make_learner(TRPOConfig().environment("CartPole-v1").training(lambda_=KAPPA, gamma=GAMMA))
    gae_learner.module[DEFAULT_MODULE_ID].set_state(learner.module[DEFAULT_MODULE_ID].get_state())
    np.testing.assert_allclose(
        gae_learner.build_train_data(chunks)["advantages"].numpy(), data["advantages"].numpy(), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("config_cls", [KappaPITRPOConfig, KappaVITRPOConfig])
def test_kappa_one_is_trpo_exactly(config_cls):
    ours = kappa_learner(kappa=1.0, config_cls=config_cls)
    trpo = make_learner(TRPOConfig().environment("CartPole-v1").training(gamma=GAMMA))
    trpo.module[DEFAULT_MODULE_ID].set_state(ours.module[DEFAULT_MODULE_ID].get_state())
    chunks = hand_made_chunks()
    a, b = ours.build_train_data(chunks), trpo.build_train_data(chunks)
    assert set(a) == set(b)
    for key in a:
        torch.testing.assert_close(a[key], b[key])
    assert ours.policy_step(a) == trpo.policy_step(b)
    state_a = ours.module[DEFAULT_MODULE_ID].get_state()
    state_b = trpo.module[DEFAULT_MODULE_ID].get_state()
    for k in state_a:
        np.testing.assert_array_equal(np.asarray(state_a[k]), np.asarray(state_b[k]))
