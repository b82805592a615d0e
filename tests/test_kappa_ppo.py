"""kappa-PPO: RLlib's PPO with the kappa-advantage connector in place of its GAE connector.

Exactness on fixed episodes: kappa = 1 is stock PPO (advantages, value targets, loss and
gradients, element for element); with V_phi = V_theta the advantages are GAE(gamma,
lambda = kappa); the connector's kappa-return equals the TRPO family's closed form
(kappa_rllib.returns). Then the schedule and V_phi's work in a short run, a checkpoint, and a
CartPole learning run."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from kappa_rllib import KappaPIPPO, KappaPIPPOConfig, KappaVIPPOConfig
from kappa_rllib.connectors.kappa_advantage_estimation import surrogate_value_targets
from kappa_rllib.returns import kappa_returns
from kappa_rllib.variant import PHI_MODULE_ID, PHI_SHAPING_MODULE_ID
from learner_batches import learner_batch, sample_episodes
from training import steps_to_reach

GAMMA = 0.99


def settings(config, **training):
    return (config.environment("CartPole-v1")
            .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
            .training(gamma=GAMMA, train_batch_size=256, minibatch_size=64, num_epochs=2, lr=3e-4, **training)
            .debugging(seed=0))


@pytest.fixture(scope="module")
def episodes():
    """~300 CartPole steps by an untrained PPO policy: several terminated episodes and a truncated chunk."""
    return sample_episodes(settings(PPOConfig()), 300)


def loss_and_gradients(learner, batch):
    """What TorchLearner._uncompiled_update computes before stepping: the loss and the gradients."""
    fwd_out = learner.module.forward_train(batch)
    losses = learner.compute_losses(fwd_out=fwd_out, batch=batch)
    learner.compute_gradients(losses)
    module = learner.module[DEFAULT_MODULE_ID]
    return losses[DEFAULT_MODULE_ID].detach(), {n: p.grad.clone() for n, p in module.named_parameters()
                                                if p.grad is not None}


def twin_learners(kappa_config, stock_config):
    """A kappa learner and a stock PPO learner whose policy/V_theta module holds the same weights."""
    env = gym.make("CartPole-v1")
    kappa_learner, stock_learner = kappa_config.build_learner(env=env), stock_config.build_learner(env=env)
    kappa_learner.module[DEFAULT_MODULE_ID].load_state_dict(stock_learner.module[DEFAULT_MODULE_ID].state_dict())
    return kappa_learner, stock_learner


@pytest.mark.parametrize("config_cls", [KappaPIPPOConfig, KappaVIPPOConfig], ids=["pi", "vi"])
def test_kappa_one_is_stock_ppo_advantages_loss_and_gradients(episodes, config_cls):
    kappa_learner, stock_learner = twin_learners(settings(config_cls(), kappa=1.0, total_env_steps=10_000),
                                                 settings(PPOConfig(), lambda_=1.0))
    kappa_batch, stock_batch = learner_batch(kappa_learner, episodes), learner_batch(stock_learner, episodes)
    assert set(kappa_batch) == {DEFAULT_MODULE_ID}  # V_phi is never read at kappa = 1
    for column in (Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS, Columns.LOSS_MASK, Columns.OBS):
        assert torch.equal(kappa_batch[DEFAULT_MODULE_ID][column], stock_batch[DEFAULT_MODULE_ID][column]), column
    kappa_loss, kappa_grads = loss_and_gradients(kappa_learner, kappa_batch)
    stock_loss, stock_grads = loss_and_gradients(stock_learner, stock_batch)
    assert torch.equal(kappa_loss, stock_loss) and kappa_grads.keys() == stock_grads.keys() and kappa_grads
    assert all(torch.equal(kappa_grads[n], stock_grads[n]) for n in kappa_grads)


@pytest.mark.parametrize("kappa", [0.5, 0.84])
def test_with_v_phi_equal_to_v_theta_the_advantages_are_gae_lambda_kappa(episodes, kappa):
    """Paper, Sec. 6: R_j(kappa, V) - V(s_j) = GAE(gamma, lambda = kappa) when V_phi = V_theta."""
    kappa_learner, gae_learner = twin_learners(settings(KappaVIPPOConfig(), kappa=kappa, total_env_steps=100_000),
                                               settings(PPOConfig(), lambda_=kappa))
    kappa_learner.end_kappa_iteration()  # kappa-VI: V_phi <- V_theta
    kappa_batch, gae_batch = learner_batch(kappa_learner, episodes), learner_batch(gae_learner, episodes)
    mask = gae_batch[DEFAULT_MODULE_ID][Columns.LOSS_MASK]
    for column in (Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS):
        torch.testing.assert_close(kappa_batch[DEFAULT_MODULE_ID][column][mask],
                                   gae_batch[DEFAULT_MODULE_ID][column][mask], rtol=1e-5, atol=1e-5)
    # and it is not the lambda = 1 (plain) advantage: kappa did something
    plain = learner_batch(twin_learners(settings(KappaVIPPOConfig(), kappa=1.0, total_env_steps=100_000),
                                        settings(PPOConfig()))[1], episodes)
    assert not torch.allclose(plain[DEFAULT_MODULE_ID][Postprocessing.VALUE_TARGETS][mask],
                              kappa_batch[DEFAULT_MODULE_ID][Postprocessing.VALUE_TARGETS][mask], atol=1e-3)


def test_the_connector_kappa_return_is_the_closed_form_one():
    """Two chunks as RLlib lays them out (each with its artificial last row): one terminated after
    3 steps, one truncated after 2; R_j must equal kappa_rllib.returns.kappa_returns per chunk."""
    gamma, kappa = 0.9, 0.6
    rewards = np.array([1.0, -2.0, 3.0, 0.0, 0.5, 4.0, 0.0], np.float32)
    v_theta = np.array([0.3, -0.1, 0.7, 9.0, 1.2, -0.4, 2.5], np.float32)  # 9.0: after a terminal, unused
    v_phi = np.array([1.0, 2.0, -1.0, 7.0, 0.2, 0.6, -0.8], np.float32)
    terminateds = np.array([0, 0, 1, 0, 0, 0, 0], np.float32)
    truncateds = np.array([0, 0, 0, 0, 0, 1, 0], np.float32)
    targets = surrogate_value_targets(v_theta, rewards, terminateds, truncateds, gamma, kappa, v_phi)
    first = kappa_returns(rewards[:3], v_phi[:4], v_theta[3], True, gamma, kappa)
    second = kappa_returns(rewards[4:6], v_phi[4:7], v_theta[6], False, gamma, kappa)
    np.testing.assert_allclose(targets[[0, 1, 2, 4, 5]], np.concatenate([first, second]), rtol=1e-6)
    # by hand, the truncated chunk's last step: r + gamma (1 - kappa) V_phi(s') + gamma kappa V_theta(s')
    assert targets[5] == pytest.approx(4.0 + gamma * (1 - kappa) * -0.8 + gamma * kappa * 2.5, rel=1e-6)


def value_weights(algo, module_id):
    state = algo.learner_group.get_weights(module_ids=[module_id])[module_id]
    # V's path: the critic encoder (or a shared encoder) and the value head; not the policy's
    return {k: np.asarray(v) for k, v in state.items() if k.startswith(("encoder.critic_encoder.", "encoder.encoder.", "vf."))}


def test_kappa_pi_ppo_schedule_v_phi_fit_snapshot_and_checkpoint(ray_local, tmp_path):
    """N_kappa = 13 (kappa 0.9, C_FA 0.3) over 26 batches: the snapshot changes exactly at
    iteration ends, V_phi trains on every batch, and a checkpoint resumes the schedule."""
    config = settings(KappaPIPPOConfig(), kappa=0.9, c_fa=0.3, total_env_steps=26 * 256)
    config.env_runners(num_env_runners=1)  # remote sampling: V_phi never leaves the learner
    algo = config.build_algo()
    snapshots, results = [value_weights(algo, PHI_SHAPING_MODULE_ID)], []
    for _ in range(5):
        results.append(algo.train())
        snapshots.append(value_weights(algo, PHI_SHAPING_MODULE_ID))
        trained = value_weights(algo, PHI_MODULE_ID)
        same = all(np.array_equal(snapshots[-1][k], trained[k]) for k in trained)
        assert same == (results[-1]["kappa"]["batches"] % 2 == 0)  # refreshed at iteration ends only
    changed = [not all(np.array_equal(a[k], b[k]) for k in a) for a, b in zip(snapshots, snapshots[1:])]
    assert changed == [False, True, False, True, False]
    kappa = results[-1]["kappa"]
    assert (kappa["batches"], kappa["iteration"], kappa["num_iterations"]) == (5, 2, 13)
    assert "kappa_phi_vf_loss" in results[-1]["learners"][PHI_MODULE_ID]
    path = algo.save_to_path(str(tmp_path / "ckpt"))
    restored = KappaPIPPO.from_checkpoint(path)
    assert restored.phases == algo.phases and restored.counters == algo.counters
    for module_id in (DEFAULT_MODULE_ID, PHI_MODULE_ID, PHI_SHAPING_MODULE_ID):
        before, after = value_weights(algo, module_id), value_weights(restored, module_id)
        assert all(np.array_equal(before[k], after[k]) for k in before)
    assert restored.train()["kappa"]["batches"] == 6
    algo.stop()
    restored.stop()


@pytest.mark.learning
def test_kappa_pi_ppo_learns_cartpole(ray_local):
    config = (settings(KappaPIPPOConfig(), kappa=0.9, c_fa=0.2, total_env_steps=30_000)
              .env_runners(num_envs_per_env_runner=4).training(train_batch_size=1000, minibatch_size=250, num_epochs=6))
    assert steps_to_reach(config, 150, 30_000)[0] is not None  # a random policy scores ~22


@pytest.mark.learning
def test_kappa_pi_ppo_inverted_pendulum_reaches_500_within_100k_steps(ray_local):
    """Continuous actions (a Gaussian policy): the TRPO family's threshold, with the settings of
    docs/results/adaptive/ (where kappa 0.84 reached 500 after ~19,000 env steps on both seeds)."""
    config = (KappaPIPPOConfig().environment("InvertedPendulum-v5")
              .env_runners(num_env_runners=0, num_envs_per_env_runner=4)
              .training(kappa=0.84, c_fa=0.2, total_env_steps=100_000, train_batch_size=1000, minibatch_size=250,
                        num_epochs=10, lr=3e-4)
              .debugging(seed=0))
    assert steps_to_reach(config, 500, 100_000)[0] is not None  # a random policy scores ~5


def test_from_ppo_keeps_the_ppo_settings_and_adds_kappa():
    ppo = (PPOConfig().environment("CartPole-v1").training(lr=1e-3, train_batch_size=500, minibatch_size=100, num_epochs=3)
           .env_runners(num_envs_per_env_runner=3).rl_module(model_config={"fcnet_hiddens": [32, 32]}))
    config = KappaVIPPOConfig.from_ppo(ppo, kappa=0.9, c_fa=0.3, total_env_steps=20_000)
    config.validate()
    assert (config.lr, config.train_batch_size, config.minibatch_size, config.num_epochs) == (1e-3, 500, 100, 3)
    assert config.num_envs_per_env_runner == 3 and config.model_config["fcnet_hiddens"] == [32, 32]
    assert (config.kappa, config.c_fa, config.algo_class.__name__) == (0.9, 0.3, "KappaVIPPO")
    assert config.num_kappa_iterations == 13 and config.schedule_length == 40  # 20,000 // 500 batches
    assert set(config._rl_module_spec.rl_module_specs) == {DEFAULT_MODULE_ID, PHI_MODULE_ID}  # VI: no snapshot
    assert ppo.algo_class.__name__ == "PPO"  # the PPOConfig itself is untouched
    with pytest.raises(ValueError, match="lambda=0.95: kappa-PPO's advantages are kappa-returns"):
        KappaPIPPOConfig.from_ppo(PPOConfig().environment("CartPole-v1").training(lambda_=0.95)).validate()


def test_a_restore_with_a_new_kappa_re_plans_the_rest_of_the_schedule(ray_local, tmp_path):
    """What PBT / PB2 do when they exploit and explore: a member restored from a checkpoint with
    another kappa. N_kappa: 13 at kappa 0.9, 7 at kappa 0.95 (C_FA 0.3), 26 batches. At batch 3
    (kappa-iteration 1, which ends at batch 4) the 22 batches left become round(22 * 7 / 26) = 6
    iterations; the learners shape with the new kappa at once; T is unchanged."""
    algo = settings(KappaPIPPOConfig(), kappa=0.9, c_fa=0.3, total_env_steps=26 * 256).build_algo()
    for _ in range(3):
        algo.train()
    path = algo.save_to_path(str(tmp_path / "member"))
    algo.stop()
    member = settings(KappaPIPPOConfig(), kappa=0.95, c_fa=0.3, total_env_steps=26 * 256).build_algo()
    member.restore_from_path(path)
    assert member.kappa_changes == [{"batches": 3, "iteration": 1, "iterations_after_current": 6,
                                     "from": {"kappa": 0.9, "c_fa": 0.3, "naive_schedule": False},
                                     "to": {"kappa": 0.95, "c_fa": 0.3, "naive_schedule": False}}]
    connector = member.learner_group._learner._learner_connector
    assert [c.kappa for c in connector.connectors if hasattr(c, "kappa")] == [0.95]
    results = [member.train()]
    while not results[-1].get("done"):
        results.append(member.train())
    kappa = [r["kappa"] for r in results]
    # iteration 1 ends at batch 4 as planned; then 4 iterations of 4 batches and 2 of 3 (22 in all)
    assert [k["iteration"] for k in kappa[:5]] == [2, 2, 2, 2, 3]
    assert [k["batches_per_iteration"] for k in kappa[:2]] == [3, 3]  # the new segment's base length
    assert kappa[-1]["batches"] == 26 and kappa[-1]["iteration"] == kappa[-1]["num_iterations"] == 8
    assert all(k["kappa"] == 0.95 and k["changes"] == 1 for k in kappa)
    member.stop()


def test_two_learners_hold_one_v_phi_snapshot_at_every_step(ray_local):
    """num_learners = 2 (torch DDP on CPU): after every batch both learners' shaping V_phi give the
    same values, and the snapshot moves exactly when a kappa-iteration ends (batches 2 and 4)."""
    config = (settings(KappaPIPPOConfig(), kappa=0.9, c_fa=0.3, total_env_steps=26 * 256)
              .learners(num_learners=2, num_cpus_per_learner=0.5).resources(num_cpus_for_main_process=0.5))
    algo = config.build_algo()
    obs = torch.tensor(np.random.default_rng(0).normal(size=(16, 4)), dtype=torch.float32)
    seen = []
    for _ in range(4):
        algo.train()
        results = algo.learner_group.foreach_learner(lambda learner: learner.snapshot_values(obs).numpy())
        first, second = (r.get() for r in results)
        np.testing.assert_array_equal(first, second)
        seen.append(first)
    moved = [not np.array_equal(a, b) for a, b in zip(seen, seen[1:])]
    assert moved == [True, False, True]  # refreshed at the ends of batches 2 and 4 only
    algo.stop()
