"""W1 (CartPole) and W3 (MinAtar Breakout): kappa-rllib's DQN family beside the minimal loops and stock
RLlib DQN."""

from __future__ import annotations

import time

from throughput_parts.common import PeakRSS, Rows, learner_alone_rate, preset_config, run_to_done
from throughput_parts.minimal import W1, W3, minimal_dqn_loop


# ----------------------------------------------------------------- the project's and RLlib's W1 runs
def w1_config(variant: str, kappa: float, total_steps: int, seed: int = 0):
    from kappa_rllib import KappaPIDQNConfig, KappaVIDQNConfig

    return (
        (KappaPIDQNConfig if variant == "pi" else KappaVIDQNConfig)()
        .environment("CartPole-v1")
        .training(
            kappa=kappa, c_fa=W1["c_fa"], total_env_steps=total_steps, lr=W1["lr"], gamma=W1["gamma"],
            train_batch_size=W1["batch"], env_steps_per_update=W1["env_steps_per_update"],
            target_network_update_freq=W1["target_every"],
            num_steps_sampled_before_learning_starts=W1["learning_starts"],
            epsilon=[(0, 1.0), (W1["epsilon_steps"], W1["epsilon_final"])],
            replay_buffer_config={"type": "UniformReplayBuffer", "capacity": W1["replay"]},
            env_steps_per_iteration=5120, env_steps_per_fragment=W1["env_steps_per_update"],
        )
        .rl_module(model_config={"fcnet_hiddens": [W1["hidden"]] * 2, "head_fcnet_hiddens": []})
        .debugging(seed=seed)
    )


def stock_rllib_dqn(total_steps: int, seed: int = 0) -> float:
    from ray.rllib.algorithms.dqn import DQNConfig

    config = (
        DQNConfig()
        .environment("CartPole-v1")
        .training(
            lr=W1["lr"], gamma=W1["gamma"], train_batch_size=W1["batch"], double_q=False, dueling=False,
            target_network_update_freq=W1["target_every"],
            num_steps_sampled_before_learning_starts=W1["learning_starts"],
            epsilon=[(0, 1.0), (W1["epsilon_steps"], W1["epsilon_final"])],
            replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": W1["replay"]},
        )
        .rl_module(model_config={"fcnet_hiddens": [W1["hidden"]] * 2, "head_fcnet_hiddens": []})
        .env_runners(rollout_fragment_length=W1["env_steps_per_update"])  # one update per 4 env steps
        .debugging(seed=seed)
    )
    algo = config.build_algo()
    start, steps = time.perf_counter(), 0
    while steps < total_steps:
        steps = algo.train()["env_runners"]["num_env_steps_sampled_lifetime"]
    rate = steps / (time.perf_counter() - start)
    algo.stop()
    return rate


def workload_w1(steps: int, stock: bool = True) -> list[tuple]:
    rows = Rows()
    for name, variant in [("DQN", None), ("kappa-PI-DQN", "pi"), ("kappa-VI-DQN", "vi")]:
        with PeakRSS() as mem:
            rate = minimal_dqn_loop(steps, variant)
        rows.append((f"minimal {name} loop", rate, name, mem.peak))
    if stock:
        with PeakRSS() as mem:
            rate = stock_rllib_dqn(steps)
        rows.append(("stock RLlib DQN", rate, "DQN", mem.peak))
    for name, variant, kappa in [("kappa = 1 (DQN)", "pi", 1.0), ("kappa-PI-DQN", "pi", W1["kappa"]),
                                 ("kappa-VI-DQN", "vi", W1["kappa"])]:
        with PeakRSS() as mem:
            rate, result = run_to_done(w1_config(variant, kappa, steps))
        base = "DQN" if kappa == 1.0 else name
        rows.append((f"kappa-rllib {name}", rate, base, mem.peak,
                     f"return {result['env_runners'].get('episode_return_mean', float('nan')):.0f}, "
                     f"policy lag <= {result['kappa']['max_policy_lag_env_steps']} env steps"))
    return rows


def workload_w3(steps: int, env_runners: list[int]) -> list[tuple]:
    rows = Rows()
    for name, variant in [("DQN", None), ("kappa-PI-DQN", "pi"), ("kappa-VI-DQN", "vi")]:
        with PeakRSS() as mem:
            rate = minimal_dqn_loop(steps, variant, w=W3)
        rows.append((f"minimal {name} loop", rate, name, mem.peak))
    for runners in env_runners:
        for name, variant, kappa in [("kappa = 1 (DQN)", "pi", 1.0), ("kappa-PI-DQN", "pi", W3["kappa"]),
                                     ("kappa-VI-DQN", "vi", W3["kappa"])]:
            ceiling = kappa == 1.0 and runners == env_runners[0]
            with PeakRSS() as mem:
                rate, result = run_to_done(preset_config(variant, kappa, W3["env"], steps, runners=runners),
                                           learner_alone_calls=20 if ceiling else 0)
            base = "DQN" if kappa == 1.0 else name
            rows.append((f"kappa-rllib {name}, {runners} remote EnvRunner(s)", rate, base, mem.peak,
                         f"policy lag <= {result['kappa']['max_policy_lag_env_steps']} env steps"))
            if ceiling:
                rows.append((f"kappa-rllib {name}, its learner alone (nothing sampled)", result["learner_alone_rate"],
                             base, mem.peak, "the ceiling of any sampling layout"))
    return rows


# ----------------------------------------------------------------- W3's pipeline: what binds a remote runner
LEARNER_ALONE = "kappa = 1's learner alone, idle machine"


def workload_pipeline(steps: int, env_runners: list[int], learner_threads: tuple = (False,),
                      call_steps: tuple = (None,), kappa_pi: bool = False) -> list[tuple]:
    """W3 (MinAtar Breakout, kappa = 1, the MinAtar preset) taken apart, per remote EnvRunner count N, rates after
    the learning start (`timed_run`):

    * the whole run;
    * the same run with nothing learnt: each learner call draws its minibatches from the replay as the run does,
      then makes no gradient step (the acting weights never change, and are still published every chunk): the
      pipeline's own ceiling (sampling calls, replay adds and draws, weight publishing);
    * the N runners sampling alone: chunks of the run's size, one call a runner at a time as the run asks them,
      nothing else done with the segments: what the runners give when nobody waits on a learner;
    * after the N = first run: its learner alone on an idle machine (`learner_alone_rate`), then the same while
      one process spins on a core (as a remote runner does during the run): on a 2-core machine the gradient step
      itself slows while a runner samples.

    `call_steps`: the env steps each runner samples per call (`env_steps_per_runner_call`; a chunk is one call of
    every runner) the runs are measured at; None is the preset's. The call's size sets the per-call costs' share of
    each env step, and the policy lag (each row says its bound). `kappa_pi`: W3's kappa-PI-DQN (its kappa) instead
    of kappa = 1, whose learner alone makes the evaluation phases' Q_phi updates too."""
    rows = Rows()
    kappa = W3["kappa"] if kappa_pi else 1.0
    name = f"kappa-PI-DQN (kappa = {kappa:g})" if kappa_pi else "kappa = 1"
    learner_alone = f"{name}'s learner alone, idle machine"
    algo_label = "kappa-PI-DQN" if kappa_pi else "DQN"
    for runners in env_runners:
        ceiling = runners == env_runners[0]
        for chunk in call_steps:
            def config(chunk=chunk, runners=runners):
                made = preset_config("pi", kappa, W3["env"], steps, runners=runners)
                return made.training(env_steps_per_runner_call=chunk) if chunk else made

            size = f", calls of {chunk}" if chunk else ""
            for thread in learner_threads if runners else (False,):  # (the thread needs remote runners)
                if thread:
                    rate, result, algo = timed_run(config().training(learner_thread=True))
                    algo.stop()
                    rows.append((f"{name}, {runners} remote EnvRunner(s){size}: the run, learner thread", rate,
                                 algo_label, 0, f"policy lag <= {result['kappa']['max_policy_lag_env_steps']} env "
                                 "steps; base: the learner alone, idle machine", learner_alone))
            rate, result, algo = timed_run(config())
            rows.append((f"{name}, {runners} remote EnvRunner(s){size}: the run", rate, algo_label, 0,
                         f"policy lag <= {result['kappa']['max_policy_lag_env_steps']} env steps; base: the learner "
                         "alone, idle machine", learner_alone))
            if ceiling:
                rows.append((learner_alone, learner_alone_rate(algo, 20, evaluation=kappa_pi), algo_label, 0,
                             "typed calls of 64 updates" + (", each with one of 64 Q_phi updates" if kappa_pi else "")
                             + ", replay draws included"))
                with busy_core():
                    rows.append((f"{name}'s learner alone, one core kept busy",
                                 learner_alone_rate(algo, 20, evaluation=kappa_pi), algo_label,
                                 0, "as during a run with a remote runner", learner_alone))
                ceiling = False
            algo.stop()
            rate, _, algo = timed_run(config(), nothing_learnt=True)
            nothing = f"{name}, {runners} remote EnvRunner(s){size}: nothing learnt"
            if runners:
                alone = f"{runners} remote EnvRunner(s) sampling alone{size}"
                rows.append((alone, runners_alone_rate(algo, steps), algo_label, 0,
                             f"chunks of {algo._chunk_size()} env steps"))
                rows.append((nothing, rate, algo_label, 0, "the pipeline's own ceiling; base: the runners alone",
                             alone))
            else:
                rows.append((nothing, rate, algo_label, 0, "the pipeline's own ceiling"))
            algo.stop()
    return rows


def workload_pi_evaluation(steps: int, env_runners: list[int]) -> list[tuple]:
    """W3 at the MinAtar preset's kappa-PI-DQN, per remote EnvRunner count N (>= 1): the run whose runners sample the
    next improvement phase's first chunk while the evaluation phase trains Q_phi (`_sample_next_improvement`, the
    default), against the same run sampling it after the evaluation, the runners idle meanwhile (the method made a
    no-op on that run's algorithm). The two make the same updates on the same transitions (tests/test_kappa_dqn_run.py::
    test_kappa_pi_samples_the_next_improvement_during_its_evaluation_exactly). Rates after the learning start."""
    rows = Rows()
    for runners in [n for n in env_runners if n > 0]:
        after = f"kappa-PI-DQN, {runners} remote EnvRunner(s): the next chunk sampled after the evaluation"
        rate, result, algo = timed_run(preset_config("pi", W3["kappa"], W3["env"], steps, runners=runners),
                                       sample_in_evaluation=False)
        algo.stop()
        rows.append((after, rate, "kappa-PI-DQN", 0,
                     f"policy lag <= {result['kappa']['max_policy_lag_env_steps']} env steps"))
        rate, result, algo = timed_run(preset_config("pi", W3["kappa"], W3["env"], steps, runners=runners))
        algo.stop()
        rows.append((f"kappa-PI-DQN, {runners} remote EnvRunner(s): sampled during the evaluation", rate,
                     "kappa-PI-DQN", 0, f"{result['kappa']['chunks_sampled_in_evaluation']} chunks sampled during "
                     f"evaluation phases; policy lag <= {result['kappa']['max_policy_lag_env_steps']} env steps; "
                     "base: the same run sampling after", after))
    return rows


def workload_local_weights(steps: int, env_runners: list[int]) -> list[tuple]:
    """W3 at kappa = 1 (the MinAtar preset) per remote EnvRunner count N (>= 1): the env-less local EnvRunner loading
    the acting weights every chunk, as it did (`eager_local_weights`), against loading them when read (now:
    `Sampler.refresh_local`); the whole run and the run with nothing learnt (the pipeline's own ceiling)."""
    rows = Rows()
    for runners in [n for n in env_runners if n > 0]:
        for nothing in (False, True):
            what = "nothing learnt" if nothing else "the run"
            eager = f"kappa = 1, {runners} remote EnvRunner(s), {what}: the local runner loads every chunk's weights"
            rate, _, algo = timed_run(preset_config("pi", 1.0, W3["env"], steps, runners=runners),
                                      nothing_learnt=nothing, eager_local_weights=True)
            algo.stop()
            rows.append((eager, rate, "DQN", 0, ""))
            rate, _, algo = timed_run(preset_config("pi", 1.0, W3["env"], steps, runners=runners),
                                      nothing_learnt=nothing)
            algo.stop()
            rows.append((f"kappa = 1, {runners} remote EnvRunner(s), {what}: loaded when read", rate, "DQN", 0,
                         "base: loading every chunk", eager))
    return rows


def timed_run(config, nothing_learnt: bool = False, sample_in_evaluation: bool = True,
              eager_local_weights: bool = False):
    """(env steps/s after the learning start, last result, the algorithm, still running) of a run to its end.
    `nothing_learnt`: every learner call draws its minibatches from the replay, then returns (no gradient step).
    `sample_in_evaluation` False: kappa-PI's runners do not sample during its evaluation phases.
    `eager_local_weights`: the local EnvRunner loads each new set of acting weights at once, remote runners or not."""
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch  # noqa: F401 (as the run builds it)

    from kappa_rllib.algorithms.kappa_dqn.learner_program import num_updates

    algo = config.build_algo()
    if nothing_learnt:
        def draw_only(call, minibatch_size, algo=algo):
            n = num_updates(call)
            if n:
                algo.local_replay_buffer.sample(n * minibatch_size)

        algo._learner_call = draw_only
    if not sample_in_evaluation:
        algo._sample_next_improvement = lambda units_left: None
    if eager_local_weights:
        sync = algo.sampler.sync
        algo.sampler.sync = lambda: (sync(), algo.sampler.refresh_local())
    start_steps = config.num_steps_sampled_before_learning_starts
    result, t0, s0 = {}, None, 0
    while not result.get("done"):
        result = algo.train()
        if t0 is None and result["kappa"]["env_steps"] >= start_steps:
            t0, s0 = time.perf_counter(), result["kappa"]["env_steps"]
    return (result["kappa"]["env_steps"] - s0) / (time.perf_counter() - t0), result, algo


def runners_alone_rate(algo, steps: int) -> float:
    """Env steps/s of the algorithm's remote EnvRunners sampling the run's chunks (`env_steps_per_runner_call` from
    each), split across them as the run splits them, back to back, nothing else done: `steps` env steps in all."""
    from kappa_rllib.algorithms.sampling import _env_steps

    sampler, chunk = algo.sampler, algo._chunk_size()
    sampler.sample(chunk)  # warm-up
    done, start = 0, time.perf_counter()
    while done < steps:
        done += _env_steps(sampler.sample(chunk, global_env_steps=done))
    return done / (time.perf_counter() - start)


class busy_core:
    """A process spinning on one core for the duration of the `with`."""

    def __enter__(self):
        import subprocess
        import sys

        self._proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        self._proc.kill()
        self._proc.wait()
