"""kappa-APPO: RLlib's APPO whose V-trace gets the shaped reward and the discount gamma * kappa.

Exactness on fixed episodes: kappa = 1 is stock APPO (loss and gradients, element for element);
kappa < 1 is stock APPO run on the hand-shaped rewards r + gamma (1 - kappa) V_phi(s') with
gamma * kappa; kappa-PI's V_phi targets are V-trace's definition, computed here term by term.
Then the learner-side schedule (which update closes a kappa-iteration), checkpoints, a restore with
a new kappa, two learners agreeing at every close, and a CartPole learning run."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from ray.rllib.algorithms.appo import APPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from kappa_rllib import KappaPIAPPO, KappaPIAPPOConfig, KappaVIAPPOConfig
from kappa_rllib.algorithms.kappa_appo.kappa_appo import KappaAPPO
from kappa_rllib.algorithms.kappa_appo.torch.kappa_appo_torch_learner import vtrace_value_targets
from kappa_rllib.algorithms.kappa_loop import KappaLoopMixin
from kappa_rllib.phases import KappaPhaseMachine
from kappa_rllib.variant import PHI_MODULE_ID
from learner_batches import learner_batch, sample_episodes

GAMMA = 0.99
FRAGMENT = 20


def settings(config, **training):
    return (config.environment("CartPole-v1")
            .env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length=FRAGMENT)
            .learners(num_learners=0)
            .training(**{"gamma": GAMMA, "train_batch_size_per_learner": 200, "lr": 5e-4, **training})
            .debugging(seed=0))


@pytest.fixture(scope="module")
def episodes():
    """~207 CartPole steps by an untrained policy: several terminated episodes and a truncated chunk."""
    return sample_episodes(settings(APPOConfig()), 207)


def loss_and_gradients(learner, batch, module_id=DEFAULT_MODULE_ID):
    """What TorchLearner._uncompiled_update computes before stepping: the loss and the gradients."""
    for module in learner.module.values():
        module.zero_grad(set_to_none=True)
    fwd_out = learner.module.forward_train(batch)
    losses = learner.compute_losses(fwd_out=fwd_out, batch=batch)
    learner.compute_gradients(losses)
    return losses[module_id].detach(), {n: p.grad.clone() for n, p in learner.module[module_id].named_parameters()
                                        if p.grad is not None}


@pytest.fixture
def build_learner():
    """config -> a learner in this process, shut down after the test: an APPO learner starts a
    thread that polls its batch buffer without pause (RLlib's CircularBuffer.get) until stopped."""
    learners = []

    def build(config):
        learners.append(config.build_learner(env=gym.make("CartPole-v1")))
        return learners[-1]

    yield build
    for learner in learners:
        learner.shutdown()


@pytest.fixture
def twin_learners(build_learner):
    """(kappa config, stock config) -> a kappa learner and a stock APPO learner whose policy/V_theta
    module (and its target network) hold the same weights."""
    def build(kappa_config, stock_config):
        kappa_learner, stock_learner = build_learner(kappa_config), build_learner(stock_config)
        kappa_learner.module[DEFAULT_MODULE_ID].load_state_dict(stock_learner.module[DEFAULT_MODULE_ID].state_dict())
        return kappa_learner, stock_learner

    return build


def assert_same(first, second):
    (loss_a, grads_a), (loss_b, grads_b) = first, second
    torch.testing.assert_close(loss_a, loss_b, rtol=1e-6, atol=1e-6)
    assert grads_a.keys() == grads_b.keys() and grads_a
    for name in grads_a:
        torch.testing.assert_close(grads_a[name], grads_b[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("config_cls", [KappaPIAPPOConfig, KappaVIAPPOConfig], ids=["pi", "vi"])
def test_kappa_one_is_stock_appo_loss_and_gradients(episodes, twin_learners, config_cls):
    kappa_learner, stock_learner = twin_learners(settings(config_cls(), kappa=1.0, total_env_steps=10_000),
                                                 settings(APPOConfig()))
    kappa_batch, stock_batch = learner_batch(kappa_learner, episodes), learner_batch(stock_learner, episodes)
    assert set(kappa_batch) == {DEFAULT_MODULE_ID}  # V_phi is never read at kappa = 1
    kappa_loss, kappa_grads = loss_and_gradients(kappa_learner, kappa_batch)
    stock_loss, stock_grads = loss_and_gradients(stock_learner, stock_batch)
    assert torch.equal(kappa_loss, stock_loss)  # the same V-trace targets, advantages, loss: bit for bit
    assert kappa_grads.keys() == stock_grads.keys() and all(torch.equal(kappa_grads[n], stock_grads[n]) for n in kappa_grads)


@pytest.mark.parametrize("config_cls", [KappaPIAPPOConfig, KappaVIAPPOConfig], ids=["pi", "vi"])
def test_kappa_appo_is_appo_on_the_shaped_reward_with_discount_gamma_kappa(episodes, twin_learners, config_cls):
    """The shaped rewards are written out here from V_phi's values: r_t + gamma (1 - kappa)
    V_phi(s_{t+1}) (1 - terminated_t) on real rows, the reward untouched on RLlib's artificial
    rows; stock APPO built with gamma * kappa on that batch gives kappa-APPO's loss and gradients."""
    kappa = 0.6
    kappa_learner, stock_learner = twin_learners(settings(config_cls(), kappa=kappa, total_env_steps=100_000),
                                                 settings(APPOConfig(), gamma=GAMMA * kappa))
    torch.manual_seed(1)
    with torch.no_grad():  # a V_phi unlike V_theta, so the shaping term is not a rescaled V_theta
        for p in kappa_learner.module[kappa_learner.shaping_module_id].parameters():
            p.add_(torch.randn_like(p) * 0.5)
    kappa_batch = learner_batch(kappa_learner, episodes)
    assert set(kappa_batch) == ({DEFAULT_MODULE_ID, PHI_MODULE_ID} if config_cls is KappaPIAPPOConfig
                                else {DEFAULT_MODULE_ID})
    rows = kappa_batch[DEFAULT_MODULE_ID]
    with torch.no_grad():
        v_phi = kappa_learner.module[kappa_learner.shaping_module_id].compute_values(rows).numpy()
    rewards, terminated = rows[Columns.REWARDS].numpy(), rows[Columns.TERMINATEDS].numpy().astype(np.float32)
    real = rows[Columns.LOSS_MASK].numpy()
    shaped = rewards.copy()
    for t in np.flatnonzero(real):  # a real row is always followed by its next state's row
        shaped[t] = rewards[t] + GAMMA * (1 - kappa) * v_phi[t + 1] * (1 - terminated[t])
    assert not np.allclose(shaped, rewards)
    stock_batch = learner_batch(stock_learner, episodes)
    stock_batch[DEFAULT_MODULE_ID][Columns.REWARDS] = torch.from_numpy(shaped)
    assert_same(loss_and_gradients(kappa_learner, kappa_batch), loss_and_gradients(stock_learner, stock_batch))


def vtrace_by_definition(values, bootstrap, rewards, discounts, rhos, rho_bar=1.0, c_bar=1.0):
    """IMPALA's v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i c_i) rho_t delta_t, one column."""
    n = len(values)
    next_values = np.append(values[1:], bootstrap)
    deltas = np.minimum(rhos, rho_bar) * (rewards + discounts * next_values - values)
    cs = np.minimum(rhos, c_bar)
    vs = np.empty(n)
    for s in range(n):
        total, weight = 0.0, 1.0
        for t in range(s, n):
            total += weight * deltas[t]
            weight *= discounts[t] * cs[t]
        vs[s] = values[s] + total
    return vs


def test_v_phi_targets_are_v_trace_of_the_plain_rewards():
    """kappa-PI's V_phi targets: V-trace with the plain rewards and gamma, on a hand-made batch
    of two trajectories of 4 rows laid out as RLlib's APPO lays them (time-major by fragment)."""
    rng = np.random.default_rng(3)
    values = rng.normal(size=8).astype(np.float32)
    rewards = rng.normal(size=8).astype(np.float32)
    terminateds = np.array([0, 1, 0, 0, 0, 0, 0, 0], bool)
    loss_mask = np.array([1, 1, 1, 0, 1, 1, 1, 1], bool)  # row 3: an artificial row
    target_logp, behaviour_logp = rng.normal(size=8).astype(np.float32) - 1, rng.normal(size=8).astype(np.float32) - 1
    vs, mask = vtrace_value_targets(
        values=torch.from_numpy(values), rewards=torch.from_numpy(rewards), terminateds=torch.from_numpy(terminateds),
        loss_mask=torch.from_numpy(loss_mask), target_logp=torch.from_numpy(target_logp),
        behaviour_logp=torch.from_numpy(behaviour_logp), gamma=0.9, trajectory_len=4,
        clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0)
    assert vs.shape == (4, 2) and torch.equal(mask, torch.from_numpy(loss_mask.reshape(2, 4).T.astype(np.float32)))
    rhos = np.exp(target_logp - behaviour_logp)
    discounts = 0.9 * (1 - terminateds) * loss_mask
    # RLlib bootstraps a fragment with the next fragment's first value (the last one: the first's)
    expected = [vtrace_by_definition(values[:4], values[4], rewards[:4], discounts[:4], rhos[:4]),
                vtrace_by_definition(values[4:], values[0], rewards[4:], discounts[4:], rhos[4:])]
    np.testing.assert_allclose(vs.numpy().T, np.array(expected), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("config_cls", [KappaPIAPPOConfig, KappaVIAPPOConfig], ids=["pi", "vi"])
def test_the_first_update_sent_at_an_iteration_end_closes_it(build_learner, config_cls):
    """The learner's copy of the plan: 10 batches of 200 env steps, N_kappa = 3 (ends after batches
    4, 7, 10). Updates carry the env steps sampled when their batch was sent; the snapshot moves
    only at the first update at or past an end, once even when one update passes two ends, and
    never for an update that carries an older count (a replayed batch)."""
    learner = build_learner(settings(config_cls(), kappa=0.9, c_fa=0.3, total_env_steps=2000))
    learner.set_kappa_schedule(KappaPhaseMachine(total_units=10, num_iterations=3, with_evaluation_phase=False,
                                                 unit="batches").get_state())
    closed, moved = [], []
    for sampled in (200, 600, 799, 800, 1000, 600, 1400, 2000, 2000):
        before = learner._snapshot_checksum()
        with torch.no_grad():  # what an update does: V_theta trains, and kappa-PI's evaluated V_phi
            for module_id in {DEFAULT_MODULE_ID, PHI_MODULE_ID} - {learner.shaping_module_id}:
                for p in learner.module[module_id].parameters():
                    p.add_(0.01)
        learner.before_gradient_based_update(timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: sampled})
        closed.append(learner._kappa_closed)
        moved.append(learner._snapshot_checksum() != before)
    assert closed == [0, 0, 0, 1, 1, 1, 2, 3, 3]
    assert moved == [False, False, False, True, False, False, True, True, False]
    assert [c[:2] for c in learner.kappa_closings()] == [(4, 1), (7, 2), (8, 3)]
    assert learner.get_state(components=[])["kappa_iterations_closed"] == 3


class RoundsLoop(KappaLoopMixin):
    """The shared kappa loop with kappa-APPO's shape and no Ray: one `training_step` per `train()` call,
    budget one batch, and each round brings whatever batches the EnvRunners finished (maybe several)."""

    def __init__(self, rounds, total_units=12, num_iterations=8):
        self.phases = KappaPhaseMachine(total_units=total_units, num_iterations=num_iterations,
                                        with_evaluation_phase=False, unit="batches")
        self.metrics = MetricsLogger()
        self.rounds, self.closed = iter(rounds), []

    _units_per_training_step = KappaAPPO._units_per_training_step

    def _improvement_step(self, max_units):
        new = min(next(self.rounds), self.phases.total_units - self.phases.units)
        self.phases.record_units(new)
        return new

    def _end_improvement(self):
        self.closed.append(self.phases.iteration)


def test_a_round_that_passes_several_iteration_ends_closes_them_all_in_its_call():
    """12 batches, N_kappa = 8 (ends after batches 2, 4, 6, 8, 9, 10, 11, 12). The round from batch 6
    to 10 passes three ends: all three close in that `train()` call, and the call that samples
    batch T ends the schedule, so its result says done (before this, the ends past the first waited for
    the next call, and `kappa-rllib train` stops once T env steps are sampled: a cluster run on a loaded
    machine ended with iterations open and a last result that did not say done)."""
    loop = RoundsLoop([1, 4, 1, 4, 2])
    after_each_call = []
    for _ in range(5):
        loop.training_step()
        after_each_call.append((loop.phases.units, loop.phases.iteration))
    assert after_each_call == [(1, 0), (5, 2), (6, 3), (10, 6), (12, 8)]
    assert loop.phases.done and loop.closed == list(range(8))


def test_kappa_pi_appo_run_checkpoint_and_restore_with_a_new_kappa(ray_local, tmp_path):
    """A short run with a remote EnvRunner: the schedule counts APPO's sampled env steps, the
    learner closes the iterations the driver ended (they agree once its queue is drained), V_phi
    trains, a checkpoint restores phases, counters, the learner's closes and the sampled count, and
    a restore with another kappa re-plans the rest and reaches the learners."""
    config = (settings(KappaPIAPPOConfig(), kappa=0.9, c_fa=0.3, total_env_steps=26 * 200)
              .env_runners(num_env_runners=1, num_envs_per_env_runner=4))
    algo = config.build_algo()
    results = [algo.train() for _ in range(6)]
    kappa = [r["kappa"] for r in results]
    assert [k["batches"] for k in kappa] == sorted(k["batches"] for k in kappa) and kappa[-1]["batches"] >= 6
    assert all(k["batches"] == k["env_steps"] // 200 for k in kappa)
    assert kappa[-1]["env_steps"] == results[-1]["env_runners"][NUM_ENV_STEPS_SAMPLED_LIFETIME]
    assert kappa[-1]["iteration"] == algo.phases.iterations_ended_by(kappa[-1]["batches"])
    assert "kappa_phi_vf_loss" in results[-1]["learners"][PHI_MODULE_ID]
    learner = algo.learner_group._learner
    assert 1 <= learner._kappa_closed <= kappa[-1]["iteration"]  # the learner lags by what is in its queue
    assert learner._kappa_schedule.num_iterations == algo.phases.num_iterations == 13

    path = algo.save_to_path(str(tmp_path / "ckpt"))
    closed, phases, counters = learner._kappa_closed, algo.phases, dict(algo.counters)
    restored = KappaPIAPPO.from_checkpoint(path)
    assert restored.phases == phases and restored.counters == counters
    assert restored.learner_group._learner._kappa_closed == closed
    assert restored._env_steps_sampled() == counters["env_steps"]  # the learners' counts go on from there
    assert restored.learner_group._learner._kappa_schedule.num_iterations == phases.num_iterations
    assert restored.train()["kappa"]["batches"] > phases.units
    restored.stop()

    member = (settings(KappaPIAPPOConfig(), kappa=0.95, c_fa=0.3, total_env_steps=26 * 200)
              .env_runners(num_envs_per_env_runner=4).build_algo())
    member.restore_from_path(path)
    change = member.kappa_changes[0]
    assert (change["from"]["kappa"], change["to"]["kappa"]) == (0.9, 0.95)
    member_learner = member.learner_group._learner
    assert member_learner.plan.kappa == 0.95
    assert member_learner._kappa_schedule.num_iterations == member.phases.num_iterations != phases.num_iterations
    results = [member.train()]
    while not results[-1].get("done"):
        results.append(member.train())
    assert results[-1]["kappa"]["batches"] == 26 and results[-1]["kappa"]["kappa"] == 0.95
    member.stop()
    algo.stop()


def test_two_learners_close_every_iteration_at_the_same_update_with_one_snapshot(ray_local):
    """num_learners = 2 (torch DDP on CPU): every kappa-iteration close happens before the same
    update on both learners and leaves the same snapshot (checksums equal), and after the run both
    learners' V_phi give the same values."""
    config = (settings(KappaPIAPPOConfig(), kappa=0.9, c_fa=0.5, total_env_steps=8 * 400)
              .env_runners(num_env_runners=1, num_cpus_per_env_runner=0.5, num_envs_per_env_runner=4,
                           rollout_fragment_length=50)
              .learners(num_learners=2, num_cpus_per_learner=0.5).resources(num_cpus_for_main_process=0.5))
    algo = config.build_algo()
    while not algo.train().get("done"):
        pass
    closings = [r.get() for r in algo.learner_group.foreach_learner(lambda learner: learner.kappa_closings())]
    first, second = closings
    common = min(len(first), len(second))
    assert common >= 2, closings
    assert first[:common] == second[:common]
    obs = torch.tensor(np.random.default_rng(0).normal(size=(16, 4)), dtype=torch.float32)
    values = [r.get() for r in algo.learner_group.foreach_learner(lambda learner: learner.snapshot_values(obs).numpy())]
    if len(first) == len(second):
        np.testing.assert_array_equal(values[0], values[1])
    algo.stop()


def test_two_learners_agree_on_a_close_when_their_updates_carry_different_counts(ray_local):
    """RLlib drops an async update request for a learner that already has
    `max_requests_in_flight_per_learner` in flight, so the k-th updates of two DDP learners can carry
    different env-step counts. At the update where only one learner's
    count reaches an iteration's end, both close it (the largest count wins), with one snapshot."""
    config = (settings(KappaPIAPPOConfig(), kappa=0.9, c_fa=0.5, total_env_steps=8 * 400)
              .learners(num_learners=2, num_cpus_per_learner=0.5).resources(num_cpus_for_main_process=0.5))
    algo = config.build_algo()
    ends = [next(units for units in range(algo.phases.total_units + 1) if algo.phases.iterations_ended_by(units) >= i)
            for i in (1, 2)]
    batch = config.total_train_batch_size
    # Update 1: only learner 1 has reached the first end. Update 2: only learner 0 the second.
    for update, reached in enumerate([1, 0]):  # the learner whose count reaches the end
        end_steps = ends[update] * batch

        def before_update(learner, reached=reached, end_steps=end_steps):
            steps = end_steps if learner._rank == reached else end_steps - 1
            learner.before_gradient_based_update(timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: steps})
            return learner.kappa_closings()

        first, second = [r.get() for r in algo.learner_group.foreach_learner(before_update)]
        assert [c[:2] for c in first] == [c[:2] for c in second] == [(i + 1, i + 1) for i in range(update + 1)]
        assert first == second
    algo.stop()


def test_from_appo_keeps_the_appo_settings_and_adds_kappa():
    appo = (APPOConfig().environment("CartPole-v1").training(lr=1e-3, train_batch_size_per_learner=400, vf_loss_coeff=0.1)
            .env_runners(num_envs_per_env_runner=3).rl_module(model_config={"fcnet_hiddens": [32, 32]}))
    config = KappaVIAPPOConfig.from_appo(appo, kappa=0.9, c_fa=0.3, total_env_steps=20_000)
    config.validate()
    assert (config.lr, config.train_batch_size_per_learner, config.vf_loss_coeff) == (1e-3, 400, 0.1)
    assert config.num_envs_per_env_runner == 3 and config.model_config["fcnet_hiddens"] == [32, 32]
    assert (config.kappa, config.c_fa, config.algo_class.__name__) == (0.9, 0.3, "KappaVIAPPO")
    assert config.num_kappa_iterations == 13 and config.schedule_length == 50  # 20,000 // 400 batches
    assert set(config._rl_module_spec.rl_module_specs) == {DEFAULT_MODULE_ID, PHI_MODULE_ID}  # VI: no snapshot
    with pytest.raises(ValueError, match="built from a APPOConfig, got PPOConfig"):
        from ray.rllib.algorithms.ppo import PPOConfig

        KappaPIAPPOConfig.from_appo(PPOConfig())
    with pytest.raises(ValueError, match="num_aggregator_actors_per_learner"):
        settings(KappaPIAPPOConfig()).learners(num_aggregator_actors_per_learner=1).validate()


@pytest.mark.learning
def test_kappa_pi_appo_learns_cartpole(ray_local):
    config = (settings(KappaPIAPPOConfig(), kappa=0.9, c_fa=0.2, total_env_steps=60_000, vf_loss_coeff=0.05,
                       entropy_coeff=0.0, lr=2e-3)
              .env_runners(num_env_runners=1, num_envs_per_env_runner=8, rollout_fragment_length=50)
              .training(train_batch_size_per_learner=500))
    algo = config.build_algo()
    best = 0.0
    while True:
        result = algo.train()
        best = max(best, result["env_runners"].get("episode_return_mean", 0.0))
        if result.get("done") or best >= 150:
            break
    algo.stop()
    assert best >= 150, best  # a random policy scores ~22
