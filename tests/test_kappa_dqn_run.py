"""Short kappa-DQN runs on the embedded Ray: schedule reporting, phi updates, checkpoints, Tune."""

import numpy as np
import pytest
import torch

from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import (
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_UPDATE_TIMER,
    REPLAY_BUFFER_ADD_DATA_TIMER,
    REPLAY_BUFFER_SAMPLE_TIMER,
    SYNCH_WORKER_WEIGHTS_TIMER,
)

from kappa_rllib import KappaPIDQN, KappaPIDQNConfig, KappaVIDQNConfig
from kappa_rllib.algorithms.kappa_dqn.learner_program import COPY_THETA_TO_PHI
from kappa_rllib.variant import PHI_MODULE_ID
from kappa_rllib.replay import unpack_array
from kappa_rllib.algorithms.kappa_loop import KAPPA_ITERATION_END_TIMER
from kappa_rllib.schedule import iteration_end, num_iterations

KAPPA, C_FA, T, PER_ITER = 0.9, 0.3, 2600, 400


def short_config(config_cls):
    return (
        config_cls()
        .environment("CartPole-v1")
        .training(
            kappa=KAPPA, c_fa=C_FA, total_env_steps=T, env_steps_per_iteration=PER_ITER,
            num_steps_sampled_before_learning_starts=200, target_network_update_freq=100,
            epsilon=[(0, 1.0), (1000, 0.1)], replay_buffer_config={"type": "UniformReplayBuffer", "capacity": 5000},
            env_steps_per_fragment=8,
        )
        .rl_module(model_config={"fcnet_hiddens": [16], "head_fcnet_hiddens": []})
        .debugging(seed=0)
    )


def expected_iteration(env_steps, n, phase):
    finished = sum(iteration_end(i, T, n) <= env_steps for i in range(n))
    return finished - (1 if phase == "evaluation" else 0)


def module_weights(algo, module_id):
    state = algo.learner_group.get_weights(module_ids=[module_id])[module_id]
    return {k: np.asarray(v) for k, v in state.items() if not k.startswith("_target")}


@pytest.mark.parametrize("config_cls", [KappaPIDQNConfig, KappaVIDQNConfig])
def test_schedule_is_reported_and_followed(ray_local, config_cls):
    n = num_iterations(KAPPA, C_FA, 0.99)
    assert n == 13
    algo = short_config(config_cls).build_algo()
    results = []
    while not results or not results[-1].get("done"):
        results.append(algo.train())
    kappa = [r["kappa"] for r in results]
    assert all(k["num_iterations"] == n for k in kappa)
    assert [k["env_steps"] for k in kappa] == [400, 800, 1200, 1600, 2000, 2400, 2600]
    for k in kappa[:-1]:
        assert k["iteration"] == expected_iteration(k["env_steps"], n, k["phase"])
    assert kappa[-1]["iteration"] == n and kappa[-1]["phase"] == "done"
    assert results[-1]["env_runners"]["num_env_steps_sampled_lifetime"] == T
    # where the time goes, under RLlib's timer names plus the kappa-iterations' ends
    assert {ENV_RUNNER_SAMPLING_TIMER, REPLAY_BUFFER_ADD_DATA_TIMER, REPLAY_BUFFER_SAMPLE_TIMER, LEARNER_UPDATE_TIMER,
            SYNCH_WORKER_WEIGHTS_TIMER, KAPPA_ITERATION_END_TIMER} <= set(results[-1]["timers"])

    theta, phi = module_weights(algo, DEFAULT_MODULE_ID), module_weights(algo, PHI_MODULE_ID)
    same = all(np.array_equal(theta[k], phi[k]) for k in theta)
    if config_cls is KappaVIDQNConfig:
        # kappa-VI: no evaluation updates; phi <- theta closed the last iteration
        assert kappa[-1]["phi_updates"] == 0 and same
    else:
        # kappa-PI: phi trained by TD(0), as many updates as theta got in iterations 0..N-2
        assert 0 < kappa[-1]["phi_updates"] < kappa[-1]["theta_updates"] and not same
    with pytest.raises(RuntimeError, match="kappa schedule is complete"):
        algo.train()
    algo.stop()


def test_checkpoint_restores_kappa_state_and_replay(ray_local, tmp_path):
    algo = short_config(KappaPIDQNConfig).build_algo()
    for _ in range(2):
        algo.train()
    assert set(algo.get_state()["kappa"]) == {"phases", "counters", "replay_buffer", "settings", "changes"}
    path = algo.save_to_path(str(tmp_path / "ckpt"))
    restored = KappaPIDQN.from_checkpoint(path)
    assert restored.phases == algo.phases
    assert restored.counters == algo.counters
    buf, rbuf = algo.local_replay_buffer.get_state(), restored.local_replay_buffer.get_state()
    assert buf["size"] == rbuf["size"] == 800
    for key in buf["arrays"]:
        np.testing.assert_array_equal(unpack_array(buf["arrays"][key]), unpack_array(rbuf["arrays"][key]))
    for mid in (DEFAULT_MODULE_ID, PHI_MODULE_ID):
        a, b = module_weights(algo, mid), module_weights(restored, mid)
        assert all(np.array_equal(a[k], b[k]) for k in a)
    result = restored.train()
    assert result["kappa"]["env_steps"] == 1200
    algo.stop()
    restored.stop()


def test_registered_with_tune_and_result_keys_exist(ray_local, tmp_path):
    from ray import tune

    config = short_config(KappaVIDQNConfig).training(total_env_steps=800)
    tuner = tune.Tuner(
        "KappaVIDQN",
        param_space=config,
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    )
    results = tuner.fit()
    assert not results.errors
    df = results.get_dataframe()
    # the trial stopped by itself ("done") at the end of the schedule: 800 steps, 2 iterations
    row = df.iloc[-1]
    assert row["kappa/env_steps"] == 800
    assert row["kappa/num_iterations"] == 13
    assert row["env_runners/num_env_steps_sampled_lifetime"] == 800
    assert "env_runners/episode_return_mean" in df.columns
    assert row["kappa/phase"] == "done" and row["training_iteration"] == 2



def test_policy_lag_is_bounded_and_weights_follow_each_chunk(ray_local):
    """The EnvRunners act with weights at most `env_steps_per_runner_call` env steps old: after every
    chunk that trained, the acting Q_theta equals the learner's."""
    algo = short_config(KappaPIDQNConfig).training(env_steps_per_runner_call=24, env_steps_per_iteration=240).build_algo()
    chunks = []
    original = algo._improvement_step

    def recording(max_steps):
        steps = original(max_steps)
        learner = module_weights(algo, DEFAULT_MODULE_ID)
        acting = {k: v.detach().numpy() for k, v in algo.env_runner.module.state_dict().items()
                  if not k.startswith("_target")}
        chunks.append((steps, algo.phases.units, all(np.array_equal(acting[k], learner[k]) for k in acting)))
        return steps

    algo._improvement_step = recording
    for _ in range(4):
        result = algo.train()
    assert all(steps <= 24 for steps, _, _ in chunks) and result["kappa"]["max_policy_lag_env_steps"] == 24
    assert all(synced for _, at, synced in chunks if at > 200)  # every chunk after learning starts
    algo.stop()


def test_bad_chunk_settings_are_refused():
    with pytest.raises(ValueError, match="env_steps_per_runner_call=20 must be a multiple of env_steps_per_fragment=8"):
        short_config(KappaPIDQNConfig).training(env_steps_per_runner_call=20).validate()
    with pytest.raises(ValueError, match="updates_per_learner_call must be an int >= 1"):
        short_config(KappaPIDQNConfig).training(updates_per_learner_call=0).validate()


def test_the_old_name_env_steps_per_sample_still_sets_the_chunk_with_a_deprecation_warning():
    """`env_steps_per_sample` (renamed `env_steps_per_runner_call`): as a keyword, as an attribute, and in a
    config state saved before the rename (RLlib's `from_state` restores it into __dict__)."""
    with pytest.warns(DeprecationWarning, match="use env_steps_per_runner_call"):
        config = short_config(KappaPIDQNConfig).training(env_steps_per_sample=24)
    assert config.env_steps_per_runner_call == 24
    with pytest.warns(DeprecationWarning):
        config.env_steps_per_sample = 40
    assert config.env_steps_per_runner_call == 40 and config.env_steps_per_sample == 40
    state = config.get_state()
    state["env_steps_per_sample"] = state.pop("env_steps_per_runner_call")
    old = KappaPIDQNConfig.from_state(state)
    old.validate()
    assert old.env_steps_per_runner_call == 40


def test_rollout_fragment_length_still_sets_the_schedule_fragment_with_a_deprecation_warning():
    """kappa-DQN counted its update schedule in `rollout_fragment_length` before 2026-11-28: set on
    `.env_runners(...)` or in a config state saved then (no `env_steps_per_fragment` in it), it becomes
    `env_steps_per_fragment`; set beside a different `env_steps_per_fragment`, it is refused."""
    config = short_config(KappaPIDQNConfig).training(env_steps_per_fragment=4).env_runners(rollout_fragment_length=8)
    with pytest.warns(DeprecationWarning, match=r"use \.training\(env_steps_per_fragment=8\)"):
        config.validate()
    assert config.env_steps_per_fragment == 8 and config.rollout_fragment_length == "auto"
    state = short_config(KappaPIDQNConfig).get_state()
    state.pop("env_steps_per_fragment")
    state["rollout_fragment_length"] = 16
    old = KappaPIDQNConfig.from_state(state)
    with pytest.warns(DeprecationWarning):
        old.validate()
    assert old.env_steps_per_fragment == 16
    with pytest.raises(ValueError, match="rollout_fragment_length=8 and env_steps_per_fragment=2 disagree"):
        short_config(KappaPIDQNConfig).training(env_steps_per_fragment=2).env_runners(
            rollout_fragment_length=8).validate()


def test_remote_runners_act_with_the_weights_sent_with_each_overlapped_chunk(ray_local):
    """With a remote EnvRunner and overlap, a chunk acts with the learner's weights as they were when it was
    requested (the weights travel with the sampling request): one sampled during step i's updates with those at
    step i's start, one sampled during a kappa-PI evaluation phase with those the improvement phase ended with
    (Q_theta is frozen then). So every chunk after learning starts acts with weights at most 2 chunks old, and they
    do change as the learner trains."""
    algo = (short_config(KappaPIDQNConfig).env_runners(num_env_runners=1)
            .training(env_steps_per_runner_call=24, env_steps_per_iteration=240).build_algo())
    original, submit, requested, checks = algo._improvement_step, algo.sampler.submit, [], []

    def _acting_weights(env_runner):  # local, so Ray ships it by value to the remote runner
        return {k: v.detach().numpy().copy() for k, v in env_runner.module.state_dict().items()
                if not k.startswith("_target")}

    def submitting(*args, **kwargs):
        requested.append((module_weights(algo, DEFAULT_MODULE_ID), algo.phases.phase))
        return submit(*args, **kwargs)

    def recording(max_steps):
        if algo.sampler.in_flight is not None:  # the chunk in flight, acting with the weights of its request
            (acting,) = algo.env_runner_group.foreach_env_runner(_acting_weights, local_env_runner=False)
            expected, phase = requested[-1]
            checks.append((algo.phases.units, phase, all(np.array_equal(acting[k], expected[k]) for k in expected)))
        return original(max_steps)

    algo._improvement_step, algo.sampler.submit = recording, submitting
    for _ in range(4):
        result = algo.train()
    trained = [ok for at, _, ok in checks if at > 250]
    assert len(trained) > 10 and all(trained)
    assert {phase for at, phase, _ in checks if at > 250} == {"improvement", "evaluation"}  # (both kinds checked)
    assert not all(np.array_equal(requested[5][0][k], requested[-1][0][k]) for k in requested[-1][0])  # they moved
    assert result["kappa"]["max_policy_lag_env_steps"] == 48
    algo.stop()


def train_to_done(algo, result=None) -> dict:
    """Trains until the schedule is used up (from `result`, the last one already had); its last result."""
    result = result or {}
    while not result.get("done"):
        result = algo.train()
    return result


def final_counts(algo, result):
    """(the schedule's counts and last target copies, replay size, policy lag) at the end of a run."""
    k = result["kappa"]
    counts = {key: k[key] for key in ("env_steps", "iteration", "theta_updates", "phi_updates",
                                      "last_theta_target_sync", "phi_updates_at_last_target_sync")}
    return counts, len(algo.local_replay_buffer), k["max_policy_lag_env_steps"]


@pytest.mark.parametrize("runners", [1, 2])
def test_overlap_keeps_every_count_and_target_copy_of_the_plain_loop(ray_local, runners):
    """With remote EnvRunners, overlapped and plain sampling reach T with the same env steps, theta/phi updates, kappa
    iterations, replay size and the same env-step and update counts at the last target copies."""
    finals = []
    for overlap in (False, True):
        algo = (short_config(KappaPIDQNConfig).env_runners(num_env_runners=runners)
                .training(env_steps_per_runner_call=24, overlap_sampling=overlap).build_algo())
        finals.append(final_counts(algo, train_to_done(algo)))
        algo.stop()
    (plain, plain_size, plain_lag), (overlapped, size, lag) = finals
    assert plain == overlapped and plain_size == size == T
    assert plain["env_steps"] == T and plain["theta_updates"] > 0 and plain["phi_updates"] > 0
    assert plain_lag == 24 * runners and lag == 48 * runners  # a chunk: one call of 24 env steps from each runner


def test_a_chunk_is_one_call_of_every_remote_runner_and_the_schedule_is_the_local_runs(ray_local):
    """issue 63: with N remote EnvRunners a chunk is `env_steps_per_runner_call` env steps from each (it was that many
    split over the N, so each runner's call, and the driver's per-chunk work, paid for 1/N of the env steps). The
    schedule does not see the chunk: 2 runners x 24 env steps reach T with the counts and target copies of one local
    runner sampling 48 at a time, and of 8 at a time (the update schedule's fragment)."""
    finals, sizes = [], []
    for runners, call in ((2, 24), (0, 48), (0, 8)):
        algo = (short_config(KappaPIDQNConfig).env_runners(num_env_runners=runners)
                .training(env_steps_per_runner_call=call).build_algo())
        original = algo._improvement_step

        def recording(max_steps, original=original, runners=runners):
            steps = original(max_steps)
            if runners:
                sizes.append(steps)
            return steps

        algo._improvement_step = recording
        assert algo._chunk_size() == (48 if call != 8 else 8)
        finals.append(final_counts(algo, train_to_done(algo))[:2])
        algo.stop()
    assert finals[0] == finals[1] == finals[2] and finals[0][0]["env_steps"] == T
    assert max(sizes) == 48 and sizes.count(48) > len(sizes) // 2  # (shorter only at a phase's or a call's end)


@pytest.mark.parametrize("config_cls", [KappaPIDQNConfig, KappaVIDQNConfig])
def test_the_learner_thread_makes_the_serial_runs_updates_exactly(ray_local, config_cls):
    """`learner_thread` (the gradient steps on a thread of their own while the next chunk is collected, added to
    the replay and its minibatches drawn) against the serial order, with a remote EnvRunner and overlap: every
    count, the same Q_theta and Q_phi weights to the bit, the same episodes, the same policy lag, at T. T = 2000
    puts train() calls' ends inside improvement phases (the next call's first chunk in flight between the calls),
    and a learning rate of 0.01 makes the greedy actions follow the weights a chunk acts with."""
    runs = []
    for thread in (False, True):
        algo = (short_config(config_cls).env_runners(num_env_runners=1)
                .training(env_steps_per_runner_call=24, learner_thread=thread, total_env_steps=2000, lr=0.01)
                .build_algo())
        returns, result, between = [], {}, 0
        while not result.get("done"):
            result = algo.train()
            returns += list(result["env_runners"].get("episode_returns", []))
            between += algo.sampler.in_flight is not None
        assert (getattr(algo, "_pool", None) is not None) == thread  # the thread was used
        assert between >= 3  # calls that ended with the next one's first chunk in flight
        runs.append((final_counts(algo, result), module_weights(algo, DEFAULT_MODULE_ID),
                     module_weights(algo, PHI_MODULE_ID), returns))
        algo.stop()
    (counts, theta, phi, returns), (counts_t, theta_t, phi_t, returns_t) = runs
    assert counts == counts_t and counts[0]["theta_updates"] > 0
    assert counts[0]["phi_updates"] > 0 if config_cls is KappaPIDQNConfig else counts[0]["iteration"] > 1
    assert theta.keys() == theta_t.keys() and all(np.array_equal(theta[k], theta_t[k]) for k in theta)
    assert all(np.array_equal(phi[k], phi_t[k]) for k in phi)
    assert returns == returns_t and len(returns) > 10


@pytest.mark.parametrize("thread", [False, True], ids=["serial", "learner thread"])
def test_kappa_pi_samples_the_next_improvement_during_its_evaluation_exactly(ray_local, monkeypatch, thread):
    """issue 63: kappa-PI's evaluation phase trains Q_phi only, so with overlap the remote runner samples the next
    improvement phase's first chunk meanwhile (`_sample_next_improvement`). Against the same run that samples it
    after the evaluation: every count, the same Q_theta and Q_phi weights to the bit, the same episodes, the same
    policy lag, at T; and each evaluation phase but none had a chunk sampled during it."""
    from kappa_rllib.algorithms.kappa_dqn.kappa_dqn import KappaDQN

    runs = []
    for during in (False, True):
        if not during:
            monkeypatch.setattr(KappaDQN, "_sample_next_improvement", lambda self, units_left: None)
        else:
            monkeypatch.undo()
        algo = (short_config(KappaPIDQNConfig).env_runners(num_env_runners=1)
                .training(env_steps_per_runner_call=24, learner_thread=thread).build_algo())
        returns, result, evaluations = [], {}, 0
        while not result.get("done"):
            result = algo.train()
            returns += list(result["env_runners"].get("episode_returns", []))
        runs.append((final_counts(algo, result), module_weights(algo, DEFAULT_MODULE_ID),
                     module_weights(algo, PHI_MODULE_ID), returns, result["kappa"]["chunks_sampled_in_evaluation"],
                     result["kappa"]["iteration"]))
        algo.stop()
    (counts, theta, phi, returns, during_0, _), (counts_d, theta_d, phi_d, returns_d, during_1, iterations) = runs
    assert counts == counts_d and counts[0]["phi_updates"] > 0
    assert during_0 == 0 and during_1 == iterations - 1 > 1  # every evaluation phase (none after the last iteration)
    assert theta.keys() == theta_d.keys() and all(np.array_equal(theta[k], theta_d[k]) for k in theta)
    assert all(np.array_equal(phi[k], phi_d[k]) for k in phi)
    assert returns == returns_d and len(returns) > 10


def test_the_env_less_local_runner_takes_the_acting_weights_when_read_not_every_chunk(ray_local):
    """issue 63: beside a remote EnvRunner the local one has no env and samples nothing, so the acting weights are
    not loaded into it every chunk (its load_state_dict was 11% of the driver's time in W3's pipeline); it takes
    them when read, through RLlib's `algo.env_runner` (a user's `algo.env_runner.module`, RLlib's `get_state` and
    checkpoints): the learner's newest weights there, loaded once a read that follows new weights. With no remote
    runner the local one samples, and takes every new set at once. (A load: a `set_state` with module weights;
    RLlib's step also sets the runner's connector states.)"""
    algo = (short_config(KappaPIDQNConfig).env_runners(num_env_runners=1)
            .training(env_steps_per_runner_call=24).build_algo())
    local = algo.env_runner_group.local_env_runner
    assert local.env is None  # (RLlib's: no env on the local runner beside remote ones)
    loads, set_state = [], local.set_state
    local.set_state = lambda state: (COMPONENT_RL_MODULE in state and loads.append(1)) or set_state(state)
    versions = algo.sampler.weights_version
    algo.train()
    assert algo.sampler.weights_version - versions > 5 and not loads  # new weights every chunk, none loaded
    module = algo.env_runner.module
    assert len(loads) == 1
    theta = module_weights(algo, DEFAULT_MODULE_ID)
    held = {k: v.detach().numpy() for k, v in module.state_dict().items() if k in theta}
    assert held.keys() and all(np.array_equal(held[k], theta[k]) for k in held)
    algo.env_runner, algo.get_state()  # (no new weights since: nothing loaded again)
    assert len(loads) == 1
    # RLlib brings an unhealthy runner back with the local runner's state, read from the group itself (not through
    # `algo.env_runner`): the local runner takes the newest weights first, so the runner brought back acts with them
    algo.train()
    group = algo.env_runner_group
    group.num_healthy_remote_workers, group.probe_unhealthy_env_runners = (lambda: 0), (lambda: [1])
    algo.restore_env_runners(group)
    theta = module_weights(algo, DEFAULT_MODULE_ID)
    (acting,) = group.foreach_env_runner(
        lambda er: {k: v.detach().numpy() for k, v in er.module.state_dict().items()}, local_env_runner=False)
    assert all(np.array_equal(acting[k], theta[k]) for k in theta if k in acting) and set(theta) & set(acting)
    algo.stop()

    algo = short_config(KappaPIDQNConfig).build_algo()  # the local runner samples: each new set at once
    local = algo.env_runner_group.local_env_runner
    loads, set_state = [], local.set_state
    local.set_state = lambda state: (COMPONENT_RL_MODULE in state and loads.append(1)) or set_state(state)
    versions = algo.sampler.weights_version
    algo.train()
    assert len(loads) == algo.sampler.weights_version - versions >= 5
    algo.stop()


# ----- the naive schedule (N_kappa = T, T_kappa = 1): chunks that span kappa-iterations
NAIVE_T, NAIVE_START, NAIVE_SYNC = 300, 21, 40  # phi's target period: 40 // 4 = 10 phi updates


def naive_config(config_cls, **training):
    return (short_config(config_cls)
            .training(naive_schedule=True, total_env_steps=NAIVE_T, num_steps_sampled_before_learning_starts=NAIVE_START,
                      target_network_update_freq=NAIVE_SYNC, env_steps_per_iteration=100, env_steps_per_fragment=4,
                      **training))


def naive_ops_one_step_at_a_time(variant):
    """The learner's steps of the naive schedule, written out env step by env step (Algorithms 5
    and 6 with T_kappa = 1): (module, target copy after it). Iteration t - 1 is env step t; from
    learning start on, every 4th env step pays for a Q_theta update; kappa-PI then evaluates the
    new policy with one Q_phi update (not after the last iteration); kappa-VI copies phi <- theta
    at every iteration's end."""
    ops, counted, last_sync, phi = [], 0, 0, 0
    for t in range(1, NAIVE_T + 1):
        updated = False
        if t >= NAIVE_START:
            counted += 1
            if counted % 4 == 0:
                sync = t - last_sync >= NAIVE_SYNC
                last_sync = t if sync else last_sync
                ops.append((DEFAULT_MODULE_ID, sync))
                updated = True
        if variant == "vi":
            ops.append((COPY_THETA_TO_PHI, False))
        elif updated and t < NAIVE_T:
            phi += 1
            ops.append((PHI_MODULE_ID, phi % 10 == 0))
    return ops


@pytest.mark.parametrize("chunk", [4, 64])
@pytest.mark.parametrize("config_cls", [KappaPIDQNConfig, KappaVIDQNConfig])
def test_naive_chunks_make_the_updates_of_one_env_step_at_a_time(config_cls, chunk):
    """A chunk of the naive schedule spans up to `chunk` kappa-iterations; its learner program holds
    their Q_theta updates, Q_phi updates, phi <- theta copies and target copies in the order and at
    the counts of the schedule walked one env step at a time."""
    config = naive_config(config_cls, env_steps_per_runner_call=chunk)
    config.validate()
    algo = object.__new__(config.algo_class)  # the schedule's bookkeeping only: no Ray, no learner
    algo.config = config
    algo._init_schedule_state()
    ops, chunks = [], []
    while not algo.phases.done:  # train() calls of env_steps_per_iteration = 100 env steps
        used = 0
        while not algo.phases.done and used < 100:
            n = min(chunk, algo._chunk_bound(), 100 - used)
            for step in algo._chunk_program(n):
                if step == COPY_THETA_TO_PHI:
                    ops.append((COPY_THETA_TO_PHI, False))
                else:
                    ops += [(step.module_id, j in step.target_syncs) for j in range(1, step.num_updates + 1)]
            chunks.append(n)
            used += n
    variant = "vi" if config_cls is KappaVIDQNConfig else "pi"
    expected = naive_ops_one_step_at_a_time(variant)
    assert ops == expected
    assert sum(chunks) == NAIVE_T and max(chunks) == min(chunk, 100)
    c = algo.counters
    assert c["theta_updates"] == (NAIVE_T - NAIVE_START + 1) // 4 == 70
    assert c["phi_updates"] == (69 if variant == "pi" else 0)  # the last env step's update is not evaluated
    assert algo.phases.iteration == algo.phases.num_iterations == NAIVE_T


@pytest.mark.parametrize("naive", [True, False])
def test_a_chunk_longer_than_what_is_left_is_refused_not_looped_on(naive):
    """_chunk_program records a chunk's env steps phase by phase; steps past the end of the improvement
    phase (one-step schedule) or of the schedule (naive) could never be recorded, and the loop would never
    end: it is refused with one line instead, the schedule untouched."""
    config = naive_config(KappaPIDQNConfig, env_steps_per_runner_call=4)
    config.naive_schedule = naive
    config.validate()
    algo = object.__new__(config.algo_class)
    algo.config = config
    algo._init_schedule_state()
    bound = algo._chunk_bound()
    with pytest.raises(RuntimeError, match=f"a chunk of {bound + 1} env steps runs past"):
        algo._chunk_program(bound + 1)
    assert algo.phases.units == 0
    assert algo._chunk_program(min(bound, 4)) is not None and algo.phases.units == min(bound, 4)


def test_naive_schedule_counts_overlap_and_resume(ray_local, tmp_path):
    """kappa-PI-DQN on the naive schedule in 64-step chunks sampled ahead by a remote EnvRunner,
    checkpointed and restored after the first train() call, ends with the counts, target copies
    and replay of 4-step chunks (one update pair per chunk, as one env step at a time gives),
    and its policy lag is bounded by the chunks of one train() call (64 + 36 env steps)."""
    finals = []
    for chunk, runners in ((4, 0), (64, 1)):
        algo = naive_config(KappaPIDQNConfig, env_steps_per_runner_call=chunk).env_runners(num_env_runners=runners).build_algo()
        result = algo.train()
        if runners:
            restored = KappaPIDQN.from_checkpoint(algo.save_to_path(str(tmp_path / "naive")))
            algo.stop()
            algo = restored
        finals.append(final_counts(algo, train_to_done(algo, result)))
        algo.stop()
    (small, small_size, small_lag), (chunked, size, lag) = finals
    assert small == chunked and small_size == size == NAIVE_T
    assert chunked["iteration"] == NAIVE_T and chunked["theta_updates"] == 70 and chunked["phi_updates"] == 69
    assert chunked["phi_updates_at_last_target_sync"] == 60 and chunked["last_theta_target_sync"] == 280
    assert small_lag == 4 and lag == 64 + 36


def test_kappa_vi_with_the_authors_v_phi_shapes_with_the_latest_copy(ray_local):
    """kappa-VI with `v_phi_source="authors"` reads V_phi from Q'_phi: every phi <- theta must reach
    it (it once stayed at its initial weights for the whole run). After the run, Q'_phi holds the
    online Q_theta of the last iteration's end, which the learner's V_phi then reads."""
    algo = short_config(KappaVIDQNConfig).training(v_phi_source="authors").build_algo()
    learner = algo.learner_group._learner
    phi = learner.module[PHI_MODULE_ID].unwrapped()
    initial = [p.detach().clone() for _, target in phi.get_target_network_pairs() for p in target.parameters()]
    copies = []
    original = learner.copy_theta_to_phi

    def recording():
        original()
        theta = learner.module[DEFAULT_MODULE_ID].unwrapped()
        copies.append([p.detach().clone() for net, _ in theta.get_target_network_pairs() for p in net.parameters()])

    learner.copy_theta_to_phi = recording
    train_to_done(algo)
    assert len(copies) >= 2
    final_target = [p.detach() for _, target in phi.get_target_network_pairs() for p in target.parameters()]
    assert not all(torch.equal(a, b) for a, b in zip(final_target, initial))
    assert all(torch.equal(a, b) for a, b in zip(final_target, copies[-1]))
    # and the shaped V_phi reads it: Q'_phi at the online Q_theta's greedy action
    obs = torch.randn(6, 4)
    q_theta = learner.module[DEFAULT_MODULE_ID].unwrapped().compute_q_values({"obs": obs})["qf_preds"]
    v_phi = learner.v_phi(learner.config.get_config_for_module(DEFAULT_MODULE_ID), obs, None)
    with torch.no_grad():
        expected = phi.forward_target({"obs": obs})["qf_preds"].gather(-1, q_theta.argmax(-1, keepdim=True)).squeeze(-1)
    torch.testing.assert_close(v_phi, expected)
    algo.stop()
