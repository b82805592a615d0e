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
from kappa_rllib.algorithms.kappa_dqn.learner_program import COPY_THETA_TO_PHI, TDUpdates, num_updates
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


def random_transitions(n: int, seed: int) -> dict:
    """`n` CartPole-shaped transitions as numpy columns, a fifth of them terminal."""
    rng = np.random.default_rng(seed)
    return {
        Columns.OBS: rng.normal(size=(n, 4)).astype(np.float32),
        Columns.NEXT_OBS: rng.normal(size=(n, 4)).astype(np.float32),
        Columns.ACTIONS: rng.integers(0, 2, size=n),
        Columns.REWARDS: rng.normal(size=n).astype(np.float32),
        Columns.TERMINATEDS: (rng.random(n) < 0.2).astype(np.float32),
    }


@pytest.mark.parametrize("module_id, v_phi_source", [(DEFAULT_MODULE_ID, "paper"), (PHI_MODULE_ID, "paper"),
                                                     (DEFAULT_MODULE_ID, "authors")])
def test_fused_update_equals_rllibs_minibatch_loop(module_id, v_phi_source):
    """K steps in one fused call = K RLlib single-minibatch updates on the same minibatches,
    with the target copy after the same update count (the authors' V_phi reads the online
    Q_theta, so its targets take the per-update path)."""
    from ray.rllib.core.learner.training_data import TrainingData
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    fused, plain = (build_learner(KappaPIDQNConfig, 0.6, v_phi_source=v_phi_source) for _ in range(2))
    plain.module.set_state(fused.module.get_state())
    before = {k: np.asarray(v).copy() for k, v in fused.module[module_id].get_state().items()}
    k, size = 5, 8
    data = random_transitions(k * size, seed=4)
    batch = MultiAgentBatch({module_id: SampleBatch(data)}, env_steps=k * size)
    results = fused.update(training_data=TrainingData(batch=batch), fused_update={
        "program": [TDUpdates(module_id, k, (2,))], "minibatch_size": size})
    value = lambda x: x.peek() if hasattr(x, "peek") else x  # noqa: E731  (reduced Stats)
    assert value(results[module_id]["num_updates"]) == k
    assert np.isfinite(value(results[module_id]["qf_loss"]))
    for j in range(k):
        part = {c: v[j * size : (j + 1) * size] for c, v in data.items()}
        plain.update(batch=MultiAgentBatch({module_id: SampleBatch(part)}, env_steps=size),
                     minibatch_size=size, num_epochs=1)
        if j + 1 == 2:
            plain.sync_target_network(module_id)
    a, b = fused.module[module_id].get_state(), plain.module[module_id].get_state()
    assert set(a) == set(b)
    for key in a:
        np.testing.assert_allclose(np.asarray(a[key]), np.asarray(b[key]), rtol=1e-5, atol=1e-6, err_msg=key)
    # the copy after update 2 moved Q' away from its initial weights, and 3 more updates moved Q on
    targets = [key for key in a if key.startswith("_target_") and key.endswith(".weight")]
    assert targets
    for key in targets:
        main = key.removeprefix("_target_")
        assert not np.allclose(np.asarray(a[key]), before[key])
        assert not np.allclose(np.asarray(a[key]), np.asarray(a[main]))


def test_fused_program_equals_its_runs_one_call_each():
    """A learner program (the naive schedule's: Q_theta and Q_phi updates alternating, a phi <- theta
    copy, target copies inside runs) in one call = each run in a fused call of its own, in order, on
    the same minibatches: Q_theta's later targets read the Q_phi that the run before it trained."""
    from ray.rllib.core.learner.training_data import TrainingData
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    program, one_by_one = (build_learner(KappaPIDQNConfig, 0.6) for _ in range(2))
    one_by_one.module.set_state(program.module.get_state())
    runs = [TDUpdates(DEFAULT_MODULE_ID, 2, (1,)), TDUpdates(PHI_MODULE_ID, 1, (1,)), TDUpdates(DEFAULT_MODULE_ID, 2),
            COPY_THETA_TO_PHI, TDUpdates(DEFAULT_MODULE_ID, 1, (1,)), TDUpdates(PHI_MODULE_ID, 2)]
    k, size = num_updates(runs), 8
    data = random_transitions(k * size, seed=7)
    results = program.update(training_data=TrainingData(batch=MultiAgentBatch(
        {DEFAULT_MODULE_ID: SampleBatch(data)}, env_steps=k * size)), fused_update={"program": runs, "minibatch_size": size})
    value = lambda x: x.peek() if hasattr(x, "peek") else x  # noqa: E731  (reduced Stats)
    assert value(results[DEFAULT_MODULE_ID]["num_updates"]) == 5 and value(results[PHI_MODULE_ID]["num_updates"]) == 3
    row = 0
    for step in runs:
        if step == COPY_THETA_TO_PHI:
            one_by_one.copy_theta_to_phi()
            continue
        n = step.num_updates
        part = {c: v[row * size : (row + n) * size] for c, v in data.items()}
        one_by_one.update(training_data=TrainingData(batch=MultiAgentBatch({step.module_id: SampleBatch(part)},
                                                                            env_steps=n * size)),
                          fused_update={"program": [step], "minibatch_size": size})
        row += n
    for module_id in (DEFAULT_MODULE_ID, PHI_MODULE_ID):
        a, b = program.module[module_id].get_state(), one_by_one.module[module_id].get_state()
        for key in a:
            np.testing.assert_allclose(np.asarray(a[key]), np.asarray(b[key]), rtol=1e-5, atol=1e-6, err_msg=key)
    # the copy reached phi, and the phi updates after it moved it on
    theta, phi = program.module[DEFAULT_MODULE_ID].get_state(), program.module[PHI_MODULE_ID].get_state()
    assert any(not np.allclose(np.asarray(theta[key]), np.asarray(phi[key])) for key in theta if "_target" not in key)


def test_lr_schedule_follows_the_env_steps_of_fused_updates():
    """An lr schedule (RLlib's [[t, lr], ...], piecewise linear in env steps) applies from the learner
    call after the one at env step t, as in RLlib's own `Learner.update`: the fused update used to
    skip that step and kept the first lr for the whole run."""
    from ray.rllib.core.learner.training_data import TrainingData
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

    learner = build_learner(KappaPIDQNConfig, 0.6, lr=[[0, 1e-3], [1000, 1e-4]])
    optimizer = learner.get_optimizer(DEFAULT_MODULE_ID)
    lr = lambda: optimizer.param_groups[0]["lr"]  # noqa: E731
    value = lambda x: x.peek() if hasattr(x, "peek") else x  # noqa: E731  (reduced Stats)

    def fused_update(env_steps, seed):
        batch = MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(random_transitions(8, seed))}, env_steps=8)
        return learner.update(training_data=TrainingData(batch=batch), timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: env_steps},
                              fused_update={"program": [TDUpdates(DEFAULT_MODULE_ID, 1)], "minibatch_size": 8})

    assert lr() == pytest.approx(1e-3)
    before = {k: np.asarray(v).copy() for k, v in learner.module[DEFAULT_MODULE_ID].get_state().items()}
    results = fused_update(500, seed=1)
    # Adam's first step moves each weight with a gradient by lr (m / sqrt(v) = sign(g)): the lr at t = 0
    after = learner.module[DEFAULT_MODULE_ID].get_state()
    step = max(np.abs(np.asarray(after[k]) - before[k]).max() for k in before if not k.startswith("_target"))
    assert step == pytest.approx(1e-3, rel=1e-3)
    assert lr() == pytest.approx(5.5e-4)  # halfway from 1e-3 to 1e-4, for the next call
    assert value(results[DEFAULT_MODULE_ID]["default_optimizer_learning_rate"]) == pytest.approx(5.5e-4)
    fused_update(2000, seed=2)
    assert lr() == pytest.approx(1e-4)  # past the schedule's last point: its last value


@pytest.mark.parametrize("scale", [0.01, 100.0])  # below and above the clip
def test_foreach_global_norm_clip_equals_rllibs(scale):
    from ray.rllib.utils.torch_utils import clip_gradients

    from kappa_rllib.algorithms.kappa_dqn.torch.gradient_step import clip_by_global_norm_

    gen = torch.Generator().manual_seed(3)
    grads = [scale * torch.randn(shape, generator=gen) for shape in [(16, 4), (16,), (2, 16), (2,)]]
    ours, theirs = [g.clone() for g in grads], {i: g.clone() for i, g in enumerate(grads)}
    clip_by_global_norm_(ours, 10.0)
    clip_gradients(theirs, grad_clip=10.0, grad_clip_by="global_norm")
    for i, g in enumerate(ours):
        torch.testing.assert_close(g, theirs[i])
    norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in ours]))
    if scale > 1:
        assert norm == pytest.approx(10.0, rel=1e-5)  # clipped to the bound
    else:
        torch.testing.assert_close(ours, grads)  # untouched below it
