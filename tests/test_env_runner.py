"""The raw-transition EnvRunner: every transition exactly as the env produced it, none lost or
duplicated across sample() calls, vector-env resets and runners (local and remote)."""

import numpy as np
import pytest

from ray.rllib.core.columns import Columns

from kappa_rllib import KappaPIDQNConfig, KappaPITRPOConfig
from kappa_rllib.env_runner import segment_transitions, split_segments
from kappa_rllib.envs import COUNTING_ENV

TRUNC, TERM = 5, 7  # CountingEnv: even episodes truncate after 5 steps, odd ones terminate after 7


def counting_algo(config_cls=KappaPIDQNConfig, runners=0, envs=3):
    config = (
        config_cls()
        .environment(COUNTING_ENV, env_config={"truncate_at": TRUNC, "terminate_at": TERM})
        .env_runners(num_env_runners=runners, num_envs_per_env_runner=envs)
        .training(kappa=0.5, c_fa=0.5, total_env_steps=100_000)
        .debugging(seed=1)
    )
    return config.build_algo()


def check_stream(columns, total):
    """Each (uid, episode) shows steps t = 0, 1, ... with the env's exact obs, next obs, reward and
    terminal flag; every episode but the last of each sub-env is complete."""
    obs, nxt = columns[Columns.OBS], columns[Columns.NEXT_OBS]
    rew, term = columns[Columns.REWARDS], columns[Columns.TERMINATEDS]
    assert len(rew) == total
    steps = {}
    for o, n, r, d in zip(obs, nxt, rew, term):
        uid, ep, t = (int(x) for x in o)
        steps.setdefault((uid, ep), []).append(t)
        assert r == 1000 * uid + 10 * ep + t
        np.testing.assert_array_equal(n, [uid, ep, t + 1])
        length = TERM if ep % 2 else TRUNC
        assert d == float(ep % 2 == 1 and t + 1 == length)  # truncations are not terminal
    last = {}
    for (uid, ep), ts in steps.items():
        assert ts == list(range(len(ts)))  # in order, none lost, none twice
        last[uid] = max(last.get(uid, -1), ep)
    for (uid, ep), ts in steps.items():
        if ep < last[uid]:
            assert len(ts) == (TERM if ep % 2 else TRUNC)
    return steps


@pytest.mark.parametrize("runners", [0, 2])
def test_transitions_are_exact_across_calls_resets_and_runners(ray_local, runners):
    algo = counting_algo(runners=runners)
    sizes = [1, 4, 13, 2, 30, 7, 64]
    segments = []
    for i, n in enumerate(sizes):
        segments += algo.sampler.sample(n, global_env_steps=sum(sizes[:i]))
    # segments of one sub-env's episode, cut at call boundaries, join up exactly
    columns = segment_transitions(segments)
    steps = check_stream(columns, sum(sizes))
    uids = {uid for uid, _ in steps}
    assert len(uids) == 3 * max(1, runners)  # every sub-env of every runner stepped
    metrics = algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"))
    assert metrics == sum(sizes)
    assert algo.metrics.peek(("env_runners", "episode_return_mean")) > 0
    algo.stop()


def test_split_segments_gives_trpo_its_chunks_back(ray_local):
    algo = counting_algo(KappaPITRPOConfig)
    segments = algo.sampler.sample(40)
    for seg in segments:
        assert Columns.ACTION_LOGP in seg  # a sampled policy reports log-probs
    assert {seg["truncated"] for seg in segments} == {True, False}  # CountingEnv's time limit cuts some
    chunks = split_segments(segment_transitions(segments, truncateds=True))
    assert len(chunks) == len(segments)
    for chunk, seg in zip(chunks, segments):
        np.testing.assert_array_equal(chunk[Columns.OBS], seg[Columns.OBS])
        np.testing.assert_array_equal(chunk[Columns.REWARDS], seg[Columns.REWARDS])
        assert chunk["terminated"] == seg["terminated"] and chunk["truncated"] == seg["truncated"]
    assert not any(c["truncated"] for c in split_segments(segment_transitions(segments)))  # not asked: not kept
    algo.stop()


def test_epsilon_follows_the_global_step_count(ray_local):
    algo = counting_algo(envs=1)
    algo.env_runner.sample(num_timesteps=1, global_env_steps=5_000_000)
    module = algo.env_runner.module
    assert module.epsilon_schedule.get_current_value() == pytest.approx(0.1)  # end of the 1M decay
    algo.env_runner.sample(num_timesteps=1, global_env_steps=500_000)
    assert module.epsilon_schedule.get_current_value() == pytest.approx(1.0 - 0.9 * 0.5, abs=1e-6)
    algo.stop()


def test_overlapped_sampling_on_remote_runners_keeps_the_schedule_exact(ray_local, tmp_path):
    """With remote EnvRunners the next chunk is sampled while the learner updates, the next train() call's
    first too where a call ends inside an improvement phase (in flight between the calls; never after the
    last): every env step is still counted exactly once, and the acting weights lag at most two chunks. A
    checkpoint leaves the chunk in flight; restored, the algorithm drops it and goes on exactly."""
    config = (
        KappaPIDQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=2)
        .training(env_steps_per_fragment=8, kappa=0.9, c_fa=0.3, total_env_steps=2000, env_steps_per_iteration=400, env_steps_per_runner_call=32,
                  num_steps_sampled_before_learning_starts=100, target_network_update_freq=100,
                  replay_buffer_config={"type": "UniformReplayBuffer", "capacity": 5000})
        .rl_module(model_config={"fcnet_hiddens": [16], "head_fcnet_hiddens": []})
        .debugging(seed=0)
    )
    algo = config.build_algo()
    results, between = [], []
    while not results or not results[-1].get("done"):
        results.append(algo.train())
        between.append(algo.sampler.in_flight is not None)
        if len(results) == 2:  # a checkpoint with the next call's first chunk in flight
            assert between[-1]
            path = algo.save_to_path(str(tmp_path / "ckpt"))
            assert algo.sampler.in_flight is not None
    # (the phases of 400-env-step calls end inside calls, or with the last one: a chunk in flight after each
    # call but the last)
    assert between[:-1] == [True] * (len(between) - 1) and between[-1] is False, between
    assert results[-1]["kappa"]["env_steps"] == 2000
    assert results[-1]["env_runners"]["num_env_steps_sampled_lifetime"] == 2000
    assert len(algo.local_replay_buffer) == 2000
    # a chunk: 32 env steps from each of the 2 runners; overlapped, the acting weights are up to 2 chunks old
    assert 64 < results[-1]["kappa"]["max_policy_lag_env_steps"] <= 128
    algo.restore_from_path(path)  # into the running algorithm: what it had in flight is dropped
    assert algo.sampler.in_flight is None and algo.phases.units == 800
    while not algo.train().get("done"):
        pass
    assert algo.phases.units == 2000 and algo.counters["theta_updates"] == results[-1]["kappa"]["theta_updates"]
    algo.stop()


def test_a_module_loaded_by_a_component_restore_is_the_one_every_runner_then_acts_with(ray_local, tmp_path):
    """RLlib loads a trained module with `restore_from_path(..., component=...)`, which does not call
    set_state: the Sampler's acting weights must follow, or a remote runner (and any runner Ray restarts)
    would keep acting with the weights from before the load."""
    import torch
    from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_LEARNER_GROUP, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID

    from kappa_rllib import TRPOConfig

    algo = (TRPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1)
            .training(train_batch_size=256, vf_epochs=1).debugging(seed=0).build_algo())
    algo.train()
    component = f"{COMPONENT_LEARNER_GROUP}/{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}/{DEFAULT_MODULE_ID}"
    module_path = tmp_path / "module"
    algo.learner_group._learner.module[DEFAULT_MODULE_ID].save_to_path(module_path)
    saved = {k: v.clone() for k, v in algo.learner_group._learner.module[DEFAULT_MODULE_ID].state_dict().items()}
    algo.train()  # the weights move on
    version = algo.sampler.weights_version
    assert algo.sampler.in_flight is not None  # TRPO samples the next batch during the value fits
    algo.restore_from_path(module_path, component=component)
    # that batch was sampled by the replaced weights: dropped (before the fix, the next train() used it)
    assert algo.sampler.in_flight is None

    def acting():  # what the remote runner acts with, after one sampling request
        algo.sampler.sample(8)
        return algo.env_runner_group.foreach_env_runner(
            lambda er: (er.weights_version, {k: v.clone() for k, v in er.module.state_dict().items()}),
            local_env_runner=False)[0]

    runner_version, runner_weights = acting()
    assert algo.sampler.weights_version == runner_version == version + 1  # before the fix: unchanged
    for name, value in runner_weights.items():
        torch.testing.assert_close(value, saved[name], rtol=0, atol=0)
    algo.stop()


@pytest.mark.parametrize("config_cls", [KappaPIDQNConfig, KappaPITRPOConfig])
def test_settings_the_raw_transition_runner_cannot_serve_are_refused(config_cls):
    base = lambda: config_cls().environment("CartPole-v1")  # noqa: E731
    base().evaluation(evaluation_interval=1).validate()  # evaluation samples with RLlib's own runner
    with pytest.raises(ValueError, match="gym_env_vectorize_mode must be 'SYNC'"):
        base().env_runners(gym_env_vectorize_mode="async").validate()
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    with pytest.raises(ValueError, match="env_runner_cls must be"):
        base().env_runners(env_runner_cls=SingleAgentEnvRunner).validate()


@pytest.mark.parametrize("normalize, clip", [(True, False), (False, True), (False, False)])
def test_box_actions_reach_the_env_as_rllibs_connector_sends_them(ray_local, normalize, clip):
    from ray.rllib.utils.spaces.space_utils import clip_action, unsquash_action

    from kappa_rllib import TRPOConfig

    algo = TRPOConfig().environment("Pendulum-v1", normalize_actions=normalize, clip_actions=clip).build_algo()
    runner = algo.env_runner
    space = runner.env.single_action_space
    actions = np.random.default_rng(0).uniform(-3, 3, size=(16, 1)).astype(np.float32)
    if normalize:
        expected = [unsquash_action(a, space) for a in actions]
    elif clip:
        expected = [clip_action(a, space) for a in actions]
    else:
        expected = list(actions)
    np.testing.assert_allclose(np.array(runner._to_env(actions)), np.array(expected), rtol=1e-6)
    algo.stop()


@pytest.mark.parametrize("sent", [2, 1])
def test_a_prefetch_rllib_did_not_send_to_every_runner_is_dropped_not_collected_short(sent):
    """Sampler.submit asks each healthy remote EnvRunner for its share; RLlib may send fewer requests
    (a runner found unhealthy as the call goes out, or at its limit of requests in flight). Collecting
    the rest would give a short batch: the submit says False and waits out what was sent, so the caller
    samples the steps synchronously."""
    from types import SimpleNamespace

    from kappa_rllib.algorithms.sampling import Sampler

    calls = []
    group = SimpleNamespace(
        healthy_worker_ids=lambda: [1, 2],
        foreach_env_runner_async=lambda funcs, tag, kwargs, remote_worker_ids: calls.append(("submit", len(funcs))) or sent,
        fetch_ready_async_reqs=lambda tags, timeout_seconds: calls.append(("drop", tags)) or [],
    )
    sampler = Sampler(SimpleNamespace(env_runner_group=group), on_policy=True)
    assert sampler.submit(100, global_env_steps=0) is (sent == 2)
    assert calls == [("submit", 2)] + ([] if sent == 2 else [("drop", "kappa_rllib_sample")])
    assert (sampler.in_flight is None) is (sent != 2)


@pytest.mark.parametrize("on_policy", [True, False])
def test_the_sampler_checks_at_run_time_which_weights_a_collected_batch_acted_with(on_policy):
    """Each runner returns, with its segments, the version of the acting weights it acted with. A batch
    collected after the weights moved on (a sync between submit and collect): for an on-policy family
    (TRPO, kappa-TRPO) an OffPolicyBatch error; for kappa-DQN, which samples a chunk ahead by design,
    the lag in versions as env_runners/acting_weights_lag."""
    from types import SimpleNamespace

    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from kappa_rllib.algorithms.sampling import ACTING_WEIGHTS_LAG, OffPolicyBatch, Sampler

    submitted = []
    group = SimpleNamespace(
        healthy_worker_ids=lambda: [1, 2],
        foreach_env_runner_async=lambda funcs, tag, kwargs, remote_worker_ids: submitted.append(funcs) or len(funcs),
        # the runners acted with the version the request carried (3): what _sample_with_weights returns
        fetch_ready_async_reqs=lambda tags, timeout_seconds: [(i, ([{"actions": [i] * 5}], {}, 3, (i, 10 + i, "n")))
                                                              for i in (1, 2)],
    )
    algorithm = SimpleNamespace(env_runner_group=group, metrics=MetricsLogger())
    sampler = Sampler(algorithm, on_policy=on_policy)
    sampler.weights_version, sampler.weights_state = 3, {"rl_module": {}}
    sampler._weights_ref, sampler._shared = "ref", None  # (the object store's path: no Ray here)
    assert sampler.submit(10, global_env_steps=0) and sampler.in_flight.weights_version == 3
    assert sampler.collect() == [{"actions": [1] * 5}, {"actions": [2] * 5}]  # acted with the current weights: no lag
    sampler.submit(10, global_env_steps=10)
    sampler.weights_version = 4  # the learner's weights moved on while the batch was sampled
    if on_policy:
        with pytest.raises(OffPolicyBatch, match="1 version"):
            sampler.collect()
    else:
        sampler.collect()
        assert algorithm.metrics.peek((ENV_RUNNER_RESULTS, ACTING_WEIGHTS_LAG)) == 1
    assert sampler.in_flight is None


@pytest.mark.parametrize("lost", [1, 3])
@pytest.mark.parametrize("prefetched", [True, False])
def test_a_share_lost_with_its_runner_mid_request_is_sampled_again_so_the_batch_is_never_short(prefetched, lost):
    """RLlib's group drops the answer of a runner lost while it samples (restart_failed_env_runners) without
    an error: the batch would be silently short. The Sampler samples the lost share again, now, from the
    runners that still answer, at the share's own t on the epsilon schedule, and counts it
    (resampled_env_steps): every t of the batch is sampled exactly once, whichever runner was lost."""
    from types import SimpleNamespace

    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from kappa_rllib.algorithms.sampling import Sampler

    class Runner:  # what _sample_with_weights calls on an EnvRunner
        def __init__(self, index):
            self.worker_index, self.weights_version, self.asked = index, 0, []

        def act_with(self, version, ref):
            self.weights_version = version

        def sample(self, num_timesteps, explore, global_env_steps):
            self.asked.append((num_timesteps, global_env_steps))
            return [{"actions": [self.worker_index] * num_timesteps}]

        def get_metrics(self):
            return {}

    runners = {1: Runner(1), 2: Runner(2), 3: Runner(3)}
    healthy, pending = [1, 2, 3], []

    def run(funcs, kwargs, ids):  # runner `lost` dies while it samples: its answer never comes
        answers = [(i, f(runners[i], **k)) for f, k, i in zip(funcs, kwargs, ids)]
        if lost in ids:
            healthy.remove(lost)
        return [answer for i, answer in answers if i != lost]

    group = SimpleNamespace(
        num_remote_workers=lambda: len(healthy), healthy_worker_ids=lambda: list(healthy),
        foreach_env_runner=lambda funcs, kwargs, remote_worker_ids, local_env_runner: run(funcs, kwargs,
                                                                                           remote_worker_ids),
        foreach_env_runner_async=lambda funcs, tag, kwargs, remote_worker_ids: pending.append(
            run(funcs, kwargs, remote_worker_ids)) or len(funcs),
        fetch_ready_async_reqs=lambda tags, timeout_seconds: [(None, r) for r in pending.pop()],
    )
    sampler = Sampler(SimpleNamespace(env_runner_group=group, metrics=MetricsLogger()), on_policy=True)
    sampler.weights_version, sampler._weights_ref = 1, "ref"
    sampler._runner_nodes = {1: "n", 2: "n", 3: "n"}  # (as after earlier answers)
    if prefetched:
        assert sampler.submit(100, global_env_steps=1000)
        segments = sampler.collect()
    else:
        segments = sampler.sample(100, global_env_steps=1000)
    assert sum(len(s["actions"]) for s in segments) == 100  # before the fix: 67 (the lost runner's 33 or 34)
    answered = [(n, t) for i, r in runners.items() if i != lost for n, t in r.asked]
    steps_t = sorted(t + k for n, t in answered for k in range(n))
    assert steps_t == list(range(1000, 1100))  # each t once: the lost share again at its own t
    assert sampler.runtime.resampled_env_steps == (34 if lost == 1 else 33) and sampler.in_flight is None
    # the lost runner's node is forgotten (restarted, it may run elsewhere: it takes the object store's copy of the
    # weights until it answers again, not the shared-memory file of this node)
    assert sorted(sampler._runner_nodes) == healthy


def test_the_runtime_report_asks_the_runners_nothing_where_the_sampler_samples():
    """An EnvRunner serves one call at a time: asking the runners where they run while they sample a
    batch ahead would hold Tune's reporting and checkpointing until the batch is done. Each sampling
    answer says where its runner runs; the report reads that (a changed process id is a restart), and
    asks the runners itself only for RLlib's own sampling (kappa-PPO, kappa-APPO)."""
    from types import SimpleNamespace

    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from kappa_rllib.algorithms.sampling import Sampler

    five = [{"actions": [0] * 5}]
    asked, answers = [], [[(1, (five, {}, 1, (1, 11, "n1"))), (2, (five, {}, 1, (2, 12, "n2")))],
                          [(1, (five, {}, 1, (1, 11, "n1"))), (2, (five, {}, 1, (2, 99, "n3")))]]
    group = SimpleNamespace(
        num_remote_env_runners=lambda: 2, healthy_worker_ids=lambda: [1, 2],
        foreach_env_runner=lambda f, local_env_runner: asked.append(1) or [(1, 11, "n1")],
        foreach_env_runner_async=lambda funcs, tag, kwargs, remote_worker_ids: len(funcs),
        fetch_ready_async_reqs=lambda tags, timeout_seconds: answers.pop(0))
    algorithm = SimpleNamespace(env_runner_group=group, metrics=MetricsLogger(), samples_raw=True)
    sampler = Sampler(algorithm, on_policy=True)
    sampler.weights_version, sampler._weights_ref = 1, "ref"
    reports = []
    for _ in range(2):
        sampler.submit(10, global_env_steps=0)
        sampler.collect()
        reports.append({})
        sampler.report_runtime(reports[-1])
    sampler.submit(10, global_env_steps=0)  # a batch in flight at the report: still nothing asked
    reports.append({})
    sampler.report_runtime(reports[-1])
    assert not asked and reports[-1] == reports[-2]
    assert [(r["healthy_env_runners"], r["env_runner_node_ids"], r["env_runner_restarts"]) for r in reports[:2]] == \
        [(2, "n1,n2", 0), (2, "n1,n3", 1)]  # runner 2 came back in another process, on another node
    algorithm.samples_raw = False
    sampler.in_flight = None
    sampler.report_runtime({})
    assert asked == [1]


def test_trpo_learners_chunks_say_where_the_time_limit_cut(ray_local):
    """What kappa-PI-TRPO's `phi_target="authors"` reads: the learner's chunks, through the algorithm's
    own batch, carry the EnvRunner's truncation flag (CountingEnv: even episodes cut at TRUNC steps)."""
    algo = (KappaPITRPOConfig()
            .environment(COUNTING_ENV, env_config={"truncate_at": TRUNC, "terminate_at": TERM})
            .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
            .training(kappa=0.5, c_fa=0.5, total_env_steps=100_000, train_batch_size=64, phi_target="authors")
            .debugging(seed=1)).build_algo()
    learner, seen = algo.learner_group._learner, []
    own = learner.advantages_and_targets

    def spy(chunk, values):
        seen.append((len(chunk[Columns.REWARDS]), chunk["terminated"], chunk["truncated"]))
        return own(chunk, values)

    learner.advantages_and_targets = spy
    algo.train()
    algo.stop()
    # 64 steps of one sub-env: episodes of 5 (cut), 7 (terminal), 5, 7, ... then 4 steps to the batch end
    assert seen == [(5, False, True), (7, True, False)] * 5 + [(4, False, False)]


@pytest.mark.parametrize("obs, narrowed", [
    (np.random.default_rng(0).integers(0, 2, (65, 10, 10, 4)).astype(np.float32), True),  # MinAtar's 0/1 channels
    (np.arange(256, dtype=np.float32).reshape(2, 128), True),
    (np.array([[0.0, 1.0], [-0.0, 1.0]], np.float32), False),  # -0.0 would come back as +0.0
    (np.array([[0.5, 1.0]], np.float32), False),
    (np.array([[255.0, 256.0]], np.float32), False),
    (np.array([[-1.0, 0.0]], np.float32), False),
    (np.array([[np.nan, 0.0]], np.float32), False),
    (np.array([[np.inf, 0.0]], np.float32), False),
    (np.array([[1.0, 0.0]], np.float64), False),  # only float32, what the runner sends (`_float32`)
    (np.zeros((2, 84, 84, 4), np.uint8), False),  # uint8 stacks go as they are
    (np.zeros((0, 3), np.float32), False),
])
def test_a_remote_segments_whole_number_obs_travel_as_uint8_and_arrive_bit_for_bit(obs, narrowed):
    """A remote answer over Ray's inline limit (100 KB) goes through the object store: MinAtar's 64-step chunk
    is 126 KB as float32. Observations that are whole numbers 0..255 travel as uint8 and arrive as the same
    float32 array, bit for bit; anything else (-0.0, a fraction, out of range, NaN, inf, another dtype)
    travels as it is. The segment's other columns are untouched, and the runner's own segment is not changed."""
    from kappa_rllib.algorithms.sampling import OBS_AS_UINT8, _narrowed, _widened

    segment = {Columns.OBS: obs, Columns.ACTIONS: np.arange(max(len(obs) - 1, 0)), "terminated": True}
    sent = _narrowed(segment)
    assert (OBS_AS_UINT8 in sent) == narrowed and (Columns.OBS in sent) != narrowed
    assert segment[Columns.OBS] is obs and OBS_AS_UINT8 not in segment
    if narrowed:
        assert sent[OBS_AS_UINT8].dtype == np.uint8 and sent[OBS_AS_UINT8].shape == obs.shape
    back = _widened(sent)
    assert back[Columns.OBS].dtype == obs.dtype and back[Columns.OBS].shape == obs.shape
    assert back[Columns.OBS].tobytes() == obs.tobytes()
    assert back[Columns.ACTIONS] is segment[Columns.ACTIONS] and back["terminated"] is True


def test_minatar_chunks_travel_inline_as_uint8_and_arrive_as_the_envs_own_observations(ray_local):
    """A remote MinAtar runner's 64-step answer is under Ray's inline limit (its obs as uint8), and what the
    Sampler hands the replay is the env's own float32 observations: a chunk starts with the observation the
    runner's sub-env held after the chunk before, bit for bit, and a segment going on ends with it."""
    import pickle

    from kappa_rllib.algorithms.sampling import OBS_AS_UINT8

    algo = (KappaPIDQNConfig().environment("MinAtar/Breakout-v1")
            .env_runners(num_env_runners=1, num_envs_per_env_runner=1)
            .training(kappa=0.5, c_fa=0.5, total_env_steps=100_000)
            .rl_module(model_config={"fcnet_hiddens": [16], "head_fcnet_hiddens": []})
            .debugging(seed=3).build_algo())
    group, answers, held, checked = algo.env_runner_group, [], None, 0
    foreach = group.foreach_env_runner

    def recording(*args, **kwargs):
        results = foreach(*args, **kwargs)
        answers.extend(results)
        return results

    group.foreach_env_runner = recording
    for chunk in range(6):
        answers.clear()
        segments = algo.sampler.sample(64, global_env_steps=64 * chunk)
        ((raw, _, _, _),) = answers
        assert len(pickle.dumps(answers[0], protocol=5)) < 100 * 1024
        assert all(OBS_AS_UINT8 in s and Columns.OBS not in s for s in raw)
        assert sum(len(s[Columns.ACTIONS]) for s in segments) == 64
        for sent, got in zip(raw, segments, strict=True):
            assert got[Columns.OBS].dtype == np.float32
            np.testing.assert_array_equal(got[Columns.OBS], sent[OBS_AS_UINT8])
        if held is not None:  # the env's own float32 observation, read from the runner
            assert segments[0][Columns.OBS][0].tobytes() == held.tobytes()
            checked += 1
        (held,) = foreach(lambda er: np.asarray(er._obs[0], np.float32).copy(), local_env_runner=False)
        if not (segments[-1]["terminated"] or segments[-1]["truncated"]):
            assert segments[-1][Columns.OBS][-1].tobytes() == held.tobytes()
            checked += 1
    assert checked >= 6
    algo.stop()
