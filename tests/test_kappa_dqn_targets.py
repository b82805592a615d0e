"""The kappa-DQN targets on a hand-made batch, against closed forms and RLlib's own DQN."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from ray.rllib.algorithms.dqn import DQNConfig
from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from kappa_rllib import KappaPIDQNConfig, KappaVIDQNConfig
from kappa_rllib.variant import PHI_MODULE_ID

GAMMA = 0.97
MODEL = {"fcnet_hiddens": [16], "head_fcnet_hiddens": []}


def hand_made_batch():
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(5, 4)).astype(np.float32)
    return {
        Columns.OBS: torch.tensor(obs),
        Columns.NEXT_OBS: torch.tensor(rng.normal(size=(5, 4)).astype(np.float32)),
        Columns.ACTIONS: torch.tensor([0, 1, 1, 0, 1]),
        Columns.REWARDS: torch.tensor([1.0, 0.0, -0.5, 2.0, 1.0]),
        # transition 2 is terminal; transition 4 ends in a time-limit truncation, which is
        # not terminal and therefore bootstrapped like any other step
        Columns.TERMINATEDS: torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0]),
    }


def build_learner(config_cls, kappa, **training):
    config = (
        config_cls()
        .environment("CartPole-v1")
        .training(kappa=kappa, gamma=GAMMA, c_fa=0.1, **training)
        .rl_module(model_config=MODEL)
    )
    learner = config.build_learner(env=gym.make("CartPole-v1"))
    # Make Q'_theta differ from Q_theta and Q'_phi from Q_phi, so that a target reading the
    # wrong network fails the closed-form check.
    for mid in (DEFAULT_MODULE_ID, PHI_MODULE_ID):
        for _, target in learner.module[mid].unwrapped().get_target_network_pairs():
            for p in target.parameters():
                p.data.add_(0.3 * torch.randn_like(p))
    return learner


def q_tables(learner, next_obs):
    theta, phi = learner.module[DEFAULT_MODULE_ID].unwrapped(), learner.module[PHI_MODULE_ID].unwrapped()
    with torch.no_grad():
        return {
            "theta_target": theta.forward_target({Columns.OBS: next_obs})[QF_PREDS].numpy(),
            "phi": phi.compute_q_values({Columns.OBS: next_obs})[QF_PREDS].numpy(),
            "phi_target": phi.forward_target({Columns.OBS: next_obs})[QF_PREDS].numpy(),
            "theta": theta.compute_q_values({Columns.OBS: next_obs})[QF_PREDS].numpy(),
        }


def improvement_target(learner, batch):
    fwd = learner.module[DEFAULT_MODULE_ID].forward_train(batch)
    target, _ = learner.improvement_target(learner.config, batch, fwd)
    return target.numpy()


@pytest.mark.parametrize("variant", ["pi", "vi"])
@pytest.mark.parametrize("kappa", [0.0, 0.6])
def test_improvement_target_closed_form(variant, kappa):
    learner = build_learner(KappaPIDQNConfig if variant == "pi" else KappaVIDQNConfig, kappa)
    batch = hand_made_batch()
    q = q_tables(learner, batch[Columns.NEXT_OBS])
    expected = []
    for j in range(5):
        r, done = float(batch[Columns.REWARDS][j]), float(batch[Columns.TERMINATEDS][j])
        greedy = int(np.argmax(q["theta_target"][j]))  # pi_{i-1}(s') = argmax_a Q'_theta(s', a)
        v_phi = q["phi"][j, greedy] if variant == "pi" else q["phi"][j].max()
        shaped = r + GAMMA * (1 - kappa) * (1 - done) * v_phi  # r_j(kappa, V_phi)
        expected.append(shaped + GAMMA * kappa * (1 - done) * q["theta_target"][j].max())
    np.testing.assert_allclose(improvement_target(learner, batch), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", ["pi", "vi"])
def test_improvement_target_with_the_authors_v_phi(variant):
    """`v_phi_source="authors"`: V_phi(s') = Q'_phi(s', argmax_a Q_theta(s', a)), both variants."""
    kappa = 0.6
    learner = build_learner(KappaPIDQNConfig if variant == "pi" else KappaVIDQNConfig, kappa, v_phi_source="authors")
    batch = hand_made_batch()
    q = q_tables(learner, batch[Columns.NEXT_OBS])
    expected = []
    for j in range(5):
        r, done = float(batch[Columns.REWARDS][j]), float(batch[Columns.TERMINATEDS][j])
        v_phi = q["phi_target"][j, int(np.argmax(q["theta"][j]))]
        expected.append(r + GAMMA * (1 - kappa) * (1 - done) * v_phi + GAMMA * kappa * (1 - done) * q["theta_target"][j].max())
    np.testing.assert_allclose(improvement_target(learner, batch), expected, rtol=1e-5, atol=1e-6)


def test_evaluation_target_closed_form():
    learner = build_learner(KappaPIDQNConfig, 0.6)
    batch = hand_made_batch()
    q = q_tables(learner, batch[Columns.NEXT_OBS])
    fwd = learner.module[PHI_MODULE_ID].forward_train(batch)
    target = learner.evaluation_target(learner.config, batch, fwd).numpy()
    expected = [
        float(batch[Columns.REWARDS][j])
        + GAMMA * (1 - float(batch[Columns.TERMINATEDS][j])) * q["phi_target"][j, np.argmax(q["theta_target"][j])]
        for j in range(5)
    ]
    np.testing.assert_allclose(target, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("config_cls", [KappaPIDQNConfig, KappaVIDQNConfig])
def test_kappa_one_is_rllib_dqn_exactly(config_cls):
    """kappa = 1: same loss and same gradients as RLlib's DQN learner (no double-Q, no
    dueling, 1-step, uniform weights) with the same weights on the same batch."""
    ours = build_learner(config_cls, 1.0)
    dqn_config = (
        DQNConfig()
        .environment("CartPole-v1")
        .training(double_q=False, dueling=False, gamma=GAMMA, n_step=1, td_error_loss_fn="huber")
        .rl_module(model_config=MODEL)
    )
    rllib = dqn_config.build_learner(env=gym.make("CartPole-v1"))
    theta = ours.module[DEFAULT_MODULE_ID].unwrapped()
    rllib.module[DEFAULT_MODULE_ID].set_state(theta.get_state())

    batch = hand_made_batch()
    rllib_batch = dict(batch, weights=torch.ones(5), n_step=torch.ones(5))
    losses = []
    for learner, b in ((ours, batch), (rllib, rllib_batch)):
        module = learner.module[DEFAULT_MODULE_ID]
        module.unwrapped().zero_grad()
        fwd = module.forward_train(b)
        loss = learner.compute_loss_for_module(
            module_id=DEFAULT_MODULE_ID, config=learner.config, batch=b, fwd_out=fwd
        )
        loss.backward()
        grads = [p.grad.clone() for p in module.unwrapped().parameters() if p.grad is not None]
        losses.append((loss.item(), grads))
    assert losses[0][0] == pytest.approx(losses[1][0], rel=1e-6)
    assert len(losses[0][1]) == len(losses[1][1]) > 0
    for g_ours, g_rllib in zip(losses[0][1], losses[1][1]):
        torch.testing.assert_close(g_ours, g_rllib)
