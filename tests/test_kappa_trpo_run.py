"""Short kappa-TRPO runs: the schedule in batches, the end-of-iteration V_phi work, checkpoints."""

import numpy as np
import pytest

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import ENV_RUNNER_SAMPLING_TIMER, LEARNER_UPDATE_TIMER, SYNCH_WORKER_WEIGHTS_TIMER

from kappa_rllib import KappaPITRPO, KappaPITRPOConfig, KappaVITRPOConfig, TRPOConfig
from kappa_rllib.variant import PHI_MODULE_ID, PHI_SHAPING_MODULE_ID
from kappa_rllib.algorithms.kappa_loop import KAPPA_ITERATION_END_TIMER
from kappa_rllib.schedule import num_iterations

BATCH, BATCHES = 128, 26  # N_kappa = 13 for kappa 0.9, C_FA 0.3: two batches per kappa-iteration


def short_config(config_cls):
    return (
        config_cls()
        .environment("CartPole-v1")
        .training(kappa=0.9, c_fa=0.3, total_env_steps=BATCH * BATCHES + 50, train_batch_size=BATCH)
        .debugging(seed=0)
    )


def value_weights(algo, module_id):
    state = algo.learner_group.get_weights(module_ids=[module_id])[module_id]
    return {k: np.asarray(v) for k, v in state.items() if "critic_encoder" in k or k.startswith("vf.")}


@pytest.mark.parametrize("config_cls", [KappaPITRPOConfig, KappaVITRPOConfig])
def test_schedule_in_batches_and_v_phi_updates(ray_local, config_cls):
    assert num_iterations(0.9, 0.3, 0.99) == 13
    algo = short_config(config_cls).build_algo()
    phi_before = value_weights(algo, PHI_MODULE_ID)
    results, snapshots = [], []
    while not results or not results[-1].get("done"):
        results.append(algo.train())
        if config_cls is KappaPITRPOConfig:
            snapshots.append((value_weights(algo, PHI_SHAPING_MODULE_ID), value_weights(algo, PHI_MODULE_ID)))
    kappa = [r["kappa"] for r in results]
    assert len(results) == BATCHES  # the 50 extra env steps make no whole batch
    assert [k["batches"] for k in kappa] == list(range(1, BATCHES + 1))
    assert [k["iteration"] for k in kappa] == [b // 2 for b in range(1, BATCHES + 1)]
    assert all(k["num_iterations"] == 13 for k in kappa) and kappa[-1]["phase"] == "done"
    assert kappa[-1]["env_steps"] == BATCH * BATCHES
    assert results[-1]["env_runners"]["num_env_steps_sampled_lifetime"] == BATCH * BATCHES
    learner_stats = results[-1]["learners"][DEFAULT_MODULE_ID]
    for key in ("mean_kl", "line_search_steps", "surrogate_improvement", "vf_loss", "entropy"):
        assert key in learner_stats
    # RLlib-style timers; the kappa-iterations' closing copies (one per 2 batches) have their own
    assert {ENV_RUNNER_SAMPLING_TIMER, LEARNER_UPDATE_TIMER, SYNCH_WORKER_WEIGHTS_TIMER,
            KAPPA_ITERATION_END_TIMER} <= set(results[-1]["timers"])
    theta, phi = value_weights(algo, DEFAULT_MODULE_ID), value_weights(algo, PHI_MODULE_ID)
    assert theta and set(theta) == set(phi) == set(phi_before)
    assert any(not np.array_equal(phi[k], phi_before[k]) for k in phi)
    if config_cls is KappaVITRPOConfig:
        assert all(np.array_equal(theta[k], phi[k]) for k in theta)  # V_phi <- V_theta closed the last iteration
    else:
        assert not all(np.array_equal(theta[k], phi[k]) for k in theta)  # V_phi fitted to rho_j
        assert "vf_loss" in results[-1]["learners"][PHI_MODULE_ID]
        # V_phi trains on every batch; its snapshot is refreshed exactly when an iteration ends
        # (after batches 2, 4, ...) and is frozen in between.
        for batch, (snapshot, trained) in enumerate(snapshots, start=1):
            same = all(np.array_equal(snapshot[k], trained[k]) for k in snapshot)
            assert same == (batch % 2 == 0), batch
            if batch % 2 == 1 and batch > 1:
                previous = snapshots[batch - 2][0]
                assert all(np.array_equal(snapshot[k], previous[k]) for k in snapshot)
    algo.stop()


def test_checkpoint_restores_the_schedule(ray_local, tmp_path):
    algo = short_config(KappaPITRPOConfig).build_algo()
    for _ in range(5):
        algo.train()
    path = algo.save_to_path(str(tmp_path / "ckpt"))
    restored = KappaPITRPO.from_checkpoint(path)
    assert restored.phases == algo.phases and restored.phases.units == 5
    assert restored.counters == algo.counters == {"env_steps": 5 * BATCH}
    result = restored.train()
    assert result["kappa"]["batches"] == 6 and result["kappa"]["iteration"] == 3
    algo.stop()
    restored.stop()


def learner_weights(algo):
    state = algo.learner_group.get_state()["learner"]["rl_module"]
    return {(mid, k): np.asarray(v) for mid, weights in state.items() for k, v in weights.items()}


def test_overlapped_sampling_is_the_sequential_computation(ray_local, tmp_path):
    """With 2 remote EnvRunners, sampling the next batch during this batch's value fits gives
    bit-identical networks to sampling after them (6 batches, 3 kappa-iterations closed): every
    batch is sampled by the policy it updates. A checkpoint taken with a batch in flight, restored
    into the running algorithm, drops that batch and samples afresh with the restored weights."""
    def run(overlap):
        algo = short_config(KappaPITRPOConfig).training(overlap_sampling=overlap).env_runners(
            num_env_runners=2, num_envs_per_env_runner=2).build_algo()
        for _ in range(6):
            algo.train()
        return algo

    sequential = run(False)
    weights = learner_weights(sequential)
    sequential.stop()
    overlapped = run(True)
    assert overlapped.sampler.in_flight is not None  # the 7th batch is being sampled
    assert learner_weights(overlapped).keys() == weights.keys()
    for key, value in learner_weights(overlapped).items():
        np.testing.assert_array_equal(value, weights[key], err_msg=str(key))
    path = overlapped.save_to_path(str(tmp_path / "ckpt"))
    overlapped.train()  # consumes the batch in flight, starts the next
    overlapped.restore_from_path(path)
    assert overlapped.sampler.in_flight is None
    result = overlapped.train()
    assert result["env_runners"]["num_env_steps_sampled_lifetime"] == 7 * BATCH
    assert result["kappa"]["batches"] == 7
    overlapped.stop()


def test_a_restore_renews_the_acting_weights_and_runtime_is_reported_once_a_step(ray_local, tmp_path, monkeypatch):
    """TRPO restored into a running algorithm: the acting weights its next sampling request carries (and
    that a restarted EnvRunner would load) are the restored ones, not those they replaced; and a
    kappa-TRPO step reports where it runs once (TRPO's step and the kappa loop each did)."""
    from kappa_rllib import TRPOConfig
    from kappa_rllib.algorithms.sampling import Sampler

    algo = TRPOConfig().environment("CartPole-v1").training(train_batch_size=BATCH, total_env_steps=10 * BATCH) \
        .debugging(seed=0).build_algo()
    algo.train()
    path = algo.save_to_path(str(tmp_path / "ckpt"))
    def acting():
        return {k: np.array(v) for k, v in algo.sampler.weights_state["rl_module"][DEFAULT_MODULE_ID].items()}

    saved = acting()
    algo.train()
    assert any(not np.array_equal(v, saved[k]) for k, v in acting().items())
    version = algo.sampler.weights_version
    algo.restore_from_path(path)
    assert algo.sampler.weights_version > version and algo.sampler._weights_ref is None  # new, put on next use
    for k, v in acting().items():
        np.testing.assert_array_equal(v, saved[k], err_msg=k)
    algo.stop()

    calls = []
    real = Sampler.report_runtime
    monkeypatch.setattr(Sampler, "report_runtime", lambda self, r: calls.append(1) or real(self, r))
    kappa = short_config(KappaPITRPOConfig).build_algo()
    result = kappa.train()
    assert len(calls) == 1 and "node_id" in result and "healthy_env_runners" in result
    kappa.stop()


def episode_returns(results):
    returns = []
    for r in results:
        finished = r["env_runners"].get("episode_returns", [])
        returns.extend(finished if isinstance(finished, list) else [finished])
    return returns


@pytest.mark.parametrize("config_cls, num_env_runners", [(TRPOConfig, 0), (KappaPITRPOConfig, 0),
                                                         (KappaVITRPOConfig, 0), (KappaPITRPOConfig, 2)])
def test_batches_per_iteration_changes_the_rows_not_the_run(ray_local, config_cls, num_env_runners):
    """4 batches per train() call over 26 batches (kappa-iterations of 2 batches end inside calls; the
    last call holds the 2 left): the same networks, bit for bit, and the same episodes, in fewer rows.
    With 2 remote EnvRunners the next batch is sampled during the value fits across and within calls."""
    def run(batches_per_iteration):
        config = short_config(config_cls) if config_cls is not TRPOConfig else TRPOConfig().environment(
            "CartPole-v1").training(total_env_steps=BATCH * BATCHES + 50, train_batch_size=BATCH).debugging(seed=0)
        algo = config.training(batches_per_iteration=batches_per_iteration).env_runners(
            num_env_runners=num_env_runners, num_envs_per_env_runner=2).build_algo()
        results = []
        while not results or not results[-1].get("done"):
            results.append(algo.train())
        weights = learner_weights(algo)
        algo.stop()
        return results, weights

    (one, one_weights), (four, four_weights) = run(1), run(4)
    assert len(one) == BATCHES and len(four) == 7  # ceil(26 / 4)
    assert [r["env_runners"]["num_env_steps_sampled_lifetime"] for r in four] == \
        [BATCH * b for b in (4, 8, 12, 16, 20, 24, 26)]
    assert [bool(r.get("done")) for r in four] == [False] * 6 + [True]
    if config_cls is not TRPOConfig:
        assert [r["kappa"]["batches"] for r in four] == [4, 8, 12, 16, 20, 24, 26]
        assert [r["kappa"]["iteration"] for r in four] == [2, 4, 6, 8, 10, 12, 13]
        assert four[-1]["kappa"]["phase"] == "done" and four[-1]["kappa"]["env_steps"] == BATCH * BATCHES
    returns = episode_returns(one)
    assert len(returns) > 26 and episode_returns(four) == returns
    assert four_weights.keys() == one_weights.keys()
    for key, value in four_weights.items():
        np.testing.assert_array_equal(value, one_weights[key], err_msg=str(key))


def test_batches_per_iteration_must_be_a_whole_number_of_batches(ray_local):
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="batches_per_iteration"):
            short_config(KappaPITRPOConfig).training(batches_per_iteration=bad).validate()


@pytest.mark.parametrize("config_cls", [TRPOConfig, KappaPITRPOConfig])
@pytest.mark.parametrize("setting", ["min_sample_timesteps_per_iteration", "min_train_timesteps_per_iteration",
                                     "min_time_s_per_iteration"])
def test_rllibs_iteration_minimums_are_refused_for_batches_per_iteration(config_cls, setting):
    """RLlib calls training_step until its minimum is met: past T (no batch left) plain TRPO never
    ended its last call (review: a hang at T = 3 batches with min_sample_timesteps_per_iteration=256)."""
    with pytest.raises(ValueError, match=f"{setting}=256 is not supported: use batches_per_iteration"):
        config_cls().environment("CartPole-v1").reporting(**{setting: 256}).validate()
