"""TRPO and kappa-TRPO numerics: conjugate gradient, the KL-limited step and line search,
kappa-returns against a plain loop, and the paper's identities (GAE, kappa = 1)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from kappa_rllib import KappaPITRPOConfig, KappaVITRPOConfig, TRPOConfig
from kappa_rllib.algorithms.kappa_trpo.torch.kappa_trpo_torch_learner import PHI_VALUE_TARGETS
from kappa_rllib.algorithms.trpo.torch.trpo_torch_learner import copy_value_net
from kappa_rllib.algorithms.trpo.torch.natural_gradient import backtracking_line_search, conjugate_gradient
from kappa_rllib.returns import gae_advantages
from kappa_rllib.variant import PHI_FIT_ITERATION_END, PHI_MODULE_ID, PHI_SHAPING_MODULE_ID, PHI_TARGET_AUTHORS, \
    PHI_TARGET_BOOTSTRAP

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


def step_and_measure_kl(learner, env_id):
    """One policy step on a random batch; returns its stats and the KL(old || new) it made."""
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    batch = random_batch(env_id)
    dist_cls = module.get_train_action_dist_cls()

    def dist():
        with torch.no_grad():
            return dist_cls.from_logits(module.forward_train({Columns.OBS: batch["obs"]})[Columns.ACTION_DIST_INPUTS])

    before = dist()
    stats = learner.policy_step(batch)
    return stats, before.kl(dist()).mean().item()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "InvertedPendulum-v5"])
def test_trpo_step_respects_the_kl_limit(env_id):
    learner = make_learner(TRPOConfig().environment(env_id).training(max_kl=0.01).debugging(seed=0))
    stats, kl = step_and_measure_kl(learner, env_id)
    assert stats["step_accepted"] == 1.0 and stats["surrogate_improvement"] > 0
    assert 0 < kl <= 0.01 + 1e-7
    assert kl == pytest.approx(stats["mean_kl"], rel=1e-4)


def hand_made_chunks():
    """Three chunks of one batch: a terminated episode, a time-limit truncation, and the batch end."""
    rng = np.random.default_rng(1)
    chunks = []
    for n, terminated, truncated in [(4, True, False), (3, False, True), (5, False, False)]:
        chunks.append({
            "obs": rng.normal(size=(n + 1, 4)).astype(np.float32),
            "actions": rng.integers(0, 2, size=n),
            "rewards": rng.uniform(-1, 2, size=n),
            "terminated": terminated,
            "truncated": truncated,
        })
    return chunks


def loop_returns(rewards, v_phi, v_theta_last, terminated, gamma, kappa, v_rho_last=None):
    """R_j(kappa, V_phi) and rho_j by the definition, one sum per j (no recursion).

    rho_j bootstraps with `v_rho_last` (default: V_phi(s_n))."""
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
            r_plain += gamma ** (n - j) * (v_phi[n] if v_rho_last is None else v_rho_last)
        R.append(r_kappa)
        rho.append(r_plain)
    return np.array(R), np.array(rho)


def kappa_learner(kappa=KAPPA, config_cls=KappaPITRPOConfig, **training):
    return make_learner(
        config_cls().environment("CartPole-v1").training(kappa=kappa, gamma=GAMMA, **training).debugging(seed=0)
    )


@pytest.mark.parametrize("phi_target", [PHI_TARGET_BOOTSTRAP, PHI_TARGET_AUTHORS])
def test_kappa_pi_returns_read_the_snapshot_and_rho_bootstraps_as_phi_target_says(phi_target):
    """kappa-PI: R_j shapes with the frozen snapshot V_phi_shaping; rho_j (V_phi's target)
    bootstraps with the trained V_phi at the truncation and the batch end, or (the authors') is cut
    at the truncation and bootstraps the batch end with the snapshot. R_j is the same for both. The
    two nets are made to differ first."""
    learner = kappa_learner(phi_target=phi_target)
    with torch.no_grad():  # move the trained V_phi away from its snapshot
        for p in learner.module[PHI_MODULE_ID].unwrapped().vf.parameters():
            p.add_(0.5)
    chunks = hand_made_chunks()
    values = learner.chunk_values(chunks)
    for chunk, v in zip(chunks, values):
        out = learner.advantages_and_targets(chunk, v)
        v_theta, v_shaping = v[DEFAULT_MODULE_ID], v[PHI_SHAPING_MODULE_ID]
        with torch.no_grad():  # the trained V_phi (the authors' target never reads it)
            v_phi = learner.module[PHI_MODULE_ID].unwrapped().compute_values(
                {Columns.OBS: torch.as_tensor(chunk["obs"])}).numpy().astype(np.float64)
        assert np.abs(v_shaping - v_phi).min() > 1e-3
        # the authors': nothing after a truncation, the snapshot at the batch end
        authors_last = 0.0 if chunk["truncated"] else v_shaping[-1]
        R, rho = loop_returns(chunk["rewards"], v_shaping, v_theta[-1], chunk["terminated"], GAMMA, KAPPA,
                              v_rho_last=authors_last if phi_target == PHI_TARGET_AUTHORS else v_phi[-1])
        np.testing.assert_allclose(out["value_targets"], R, rtol=1e-10)
        np.testing.assert_allclose(out["advantages"], R - v_theta[:-1], rtol=1e-10)
        # rho's bootstrap is V_phi of the last obs, which the learner and this test compute in float32 over batches
        # of other shapes (the last bits differ with the CPU's GEMM kernel); the two nets differ by > 1e-3
        np.testing.assert_allclose(out[PHI_VALUE_TARGETS], rho, rtol=1e-6)


def test_kappa_vi_returns_read_v_phi():
    learner = kappa_learner(config_cls=KappaVITRPOConfig)
    assert PHI_SHAPING_MODULE_ID not in learner.module.keys()
    chunks = hand_made_chunks()
    for chunk, v in zip(chunks, learner.chunk_values(chunks)):
        out = learner.advantages_and_targets(chunk, v)
        R, _ = loop_returns(chunk["rewards"], v[PHI_MODULE_ID], v[DEFAULT_MODULE_ID][-1], chunk["terminated"],
                            GAMMA, KAPPA)
        np.testing.assert_allclose(out["value_targets"], R, rtol=1e-10)
        assert PHI_VALUE_TARGETS not in out


def value_state(learner, module_id):
    return [p.detach().clone() for p in learner.module[module_id].unwrapped().vf.parameters()]


def phi_adam_steps(learner):
    optim = learner.get_optimizer(PHI_MODULE_ID, "value")
    return max(int(s["step"]) for s in optim.state.values()) if optim.state else 0


@pytest.mark.parametrize("phi_fit", ["every_batch", PHI_FIT_ITERATION_END])
def test_kappa_pi_v_phi_schedule_within_one_learner(phi_fit):
    """Three batches of one 3-batch kappa-iteration: V_phi trains on every batch (or only on
    the last), and the snapshot the shaped reward reads moves only at the iteration's end."""
    learner = kappa_learner(phi_fit=phi_fit)
    chunks = hand_made_chunks()  # 12 steps: one Adam minibatch per epoch
    epochs = learner.config.vf_epochs
    snapshot0 = value_state(learner, PHI_SHAPING_MODULE_ID)
    for batch, ends in enumerate([False, False, True], start=1):
        data = learner.build_train_data(chunks)
        learner.train_on(data, fit_phi=learner.plan.fits_phi_on_batch(ends))
        if ends:
            learner.end_kappa_iteration()
        fits = batch if phi_fit == "every_batch" else int(ends)
        assert phi_adam_steps(learner) == fits * epochs
        snapshot, phi = value_state(learner, PHI_SHAPING_MODULE_ID), value_state(learner, PHI_MODULE_ID)
        if ends:
            assert all(torch.equal(a, b) for a, b in zip(snapshot, phi))
        else:
            assert all(torch.equal(a, b) for a, b in zip(snapshot, snapshot0))
            if phi_fit == "every_batch":
                assert not all(torch.equal(a, b) for a, b in zip(snapshot, phi))


@pytest.mark.parametrize("config_cls", [KappaPITRPOConfig, KappaVITRPOConfig])
def test_advantages_equal_gae_lambda_kappa_when_v_phi_is_v_theta(config_cls):
    """Paper, Sec. 6: with V_phi = V_theta, kappa-TRPO's advantages are GAE(gamma, lambda = kappa)."""
    learner = kappa_learner(config_cls=config_cls)
    theta = learner.module[DEFAULT_MODULE_ID].unwrapped()
    for mid in (PHI_MODULE_ID, PHI_SHAPING_MODULE_ID):
        if mid in learner.module.keys():
            copy_value_net(theta, learner.module[mid].unwrapped())
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


def test_gae_at_lambda_one_is_trpo():
    """"GAE at lambda 1" and "TRPO" are one config: TRPOConfig's default lambda_ is 1, and GAE(gamma, 1)
    advantages are the discounted return minus V, A_j = sum_t gamma^(t-j) r_t [+ gamma^(n-j) V(s_n) unless
    terminated] - V(s_j), on a batch with a terminal, a time-limit truncation and the batch end."""
    assert TRPOConfig().lambda_ == 1.0
    learner = make_learner(TRPOConfig().environment("CartPole-v1").training(gamma=GAMMA).debugging(seed=0))
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    chunks = hand_made_chunks()
    assert [(c["terminated"], c["truncated"]) for c in chunks] == [(True, False), (False, True), (False, False)]
    expected = []
    for c in chunks:
        with torch.no_grad():
            v = module.compute_values({Columns.OBS: torch.as_tensor(c["obs"])}).numpy().astype(np.float64)
        n = len(c["rewards"])
        for j in range(n):  # one sum per j, by the definition (no recursion)
            ret = sum(GAMMA ** (t - j) * c["rewards"][t] for t in range(j, n))
            if not c["terminated"]:  # truncation or batch end: bootstrap with V(s_n)
                ret += GAMMA ** (n - j) * v[n]
            expected.append(ret - v[j])
    expected = np.asarray(expected)
    np.testing.assert_allclose(learner.build_train_data(chunks)["advantages"].numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        np.concatenate([gae_advantages(c["rewards"], v[DEFAULT_MODULE_ID], c["terminated"], GAMMA, 1.0)
                        for c, v in zip(chunks, learner.chunk_values(chunks))]), expected, rtol=1e-6, atol=1e-6)


def test_authors_trpo_options_accept_up_to_1_5_max_kl_with_subsampled_fisher_products():
    cfg = TRPOConfig().environment("CartPole-v1").training(max_kl=0.01, kl_accept_factor=1.5, fvp_subsample=5)
    stats, kl = step_and_measure_kl(make_learner(cfg.debugging(seed=0)), "CartPole-v1")
    assert stats["step_accepted"] == 1.0
    assert 0 < kl <= 0.015 + 1e-7


@pytest.mark.parametrize("setting, value", [("kl_accept_factor", 0.5), ("fvp_subsample", 0), ("fvp_subsample", True)])
def test_bad_authors_options_are_refused(setting, value):
    with pytest.raises(ValueError, match=setting):
        TRPOConfig().environment("CartPole-v1").training(**{setting: value}).validate()


@pytest.mark.parametrize("setting, value", [("phi_fit", PHI_FIT_ITERATION_END), ("phi_target", PHI_TARGET_AUTHORS)])
def test_bad_v_phi_options_are_refused(setting, value):
    with pytest.raises(ValueError, match=f"{setting} must be one of"):
        KappaPITRPOConfig().environment("CartPole-v1").training(**{setting: "sometimes"}).validate()
    KappaPITRPOConfig().environment("CartPole-v1").training(**{setting: value}).validate()
    with pytest.raises(ValueError, match=f"{setting}='{value}' applies to kappa-PI-TRPO only"):
        KappaVITRPOConfig().environment("CartPole-v1").training(**{setting: value}).validate()


def test_fitting_v_theta_and_v_phi_together_is_fitting_each_alone():
    """One backward of the summed losses per minibatch: the nets share no parameter, so each gets
    exactly its own gradient. Same minibatches (the learner's permutations), same Adam steps."""
    together, alone = kappa_learner(), kappa_learner()
    alone.module.set_state(together.module.get_state())
    data = together.build_train_data(hand_made_chunks() * 30)  # 360 steps: 3 minibatches per epoch
    obs = data["obs"]
    targets = {DEFAULT_MODULE_ID: data["value_targets"], PHI_MODULE_ID: data[PHI_VALUE_TARGETS]}
    rng_state = together._rng.bit_generator.state
    losses = together.fit_values(targets, obs)
    for module_id, target in targets.items():  # each net alone, on the same permutations
        alone._rng.bit_generator.state = rng_state
        assert alone.fit_values({module_id: target}, obs)[module_id] == pytest.approx(losses[module_id], rel=1e-5)
    for module_id in targets:
        a, b = value_state(together, module_id), value_state(alone, module_id)
        assert all(torch.allclose(x, y, rtol=1e-5, atol=1e-7) for x, y in zip(a, b))
        assert not all(torch.equal(x, y) for x, y in zip(a, value_state(kappa_learner(), module_id)))
