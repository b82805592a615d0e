"""Atari: kappa = 1 and kappa-PI-DQN with the Atari preset, GPU packing, CUDA graphs, and a profile."""

from __future__ import annotations

import gc
import time

import numpy as np
import torch

from throughput_parts.common import PeakRSS, Rows, learner_alone_rate, preset_config
from throughput_parts.minimal import ATARI, minimal_dqn_loop


# ----------------------------------------------------------------- Atari
def workload_atari(steps: int, fill_replay: bool, env_runners: list[int], device: str,
                   algos: tuple = ("dqn", "kappa-pi"), learner_threads: tuple = (False,),
                   replay_frames: tuple = ("auto",), send_frames: tuple = (True,)) -> list[tuple]:
    """kappa = 1 and kappa-PI-DQN (`algos`) on Breakout with the Atari preset beside the minimal
    single-env loops, env steps/s over `steps` env steps after learning starts; each remote-runner row once
    per `learner_threads` setting (the config's `learner_thread`: gradient steps on a thread of their own) and
    per `replay_frames` setting (`replay_frames_on_device`: False, LZ4 in host memory; True, the ring on the
    learner's device) and `send_frames` setting (the runners send each frame once, or their stacks)."""
    start_steps = ATARI["replay"] if fill_replay else ATARI["learning_starts"]
    w = dict(ATARI, learning_starts=start_steps)
    rows = Rows()
    pairs = [(name, variant, kappa) for name, variant, kappa, algo in
             [("DQN", None, 1.0, "dqn"), ("kappa-PI-DQN", "pi", ATARI["kappa"], "kappa-pi")] if algo in algos]
    for name, variant, _ in pairs:
        with PeakRSS() as mem:
            rate = minimal_dqn_loop(start_steps + steps, variant, w=w, device=device, timed_from=start_steps)
        rows.append((f"minimal {name} loop ({device})", rate, name, mem.peak))
    for runners in env_runners:
        for name, kappa, thread, frames, sent in [("kappa = 1 (DQN)" if k == 1.0 else n, k, t, f, s)
                                                  for n, _, k in pairs for f in replay_frames
                                                  for t in learner_threads for s in send_frames]:
            config = preset_config("pi", kappa, ATARI["env"], start_steps + steps, runners=runners).training(
                num_steps_sampled_before_learning_starts=start_steps, env_steps_per_iteration=1024,
                learner_thread=thread, replay_frames_on_device=frames, send_frames=sent)
            if device.startswith("cuda"):
                config.learners(num_gpus_per_learner=1)
                torch.cuda.reset_peak_memory_stats()
            with PeakRSS() as mem:
                algo = config.build_algo()
                result, started = {}, None
                while not result.get("done"):
                    result = algo.train()
                    if started is None and result["kappa"]["env_steps"] >= start_steps:
                        started, at = time.perf_counter(), result["kappa"]["env_steps"]
                rate = (result["kappa"]["env_steps"] - at) / (time.perf_counter() - started)
                ceiling = (kappa == 1.0 and runners == env_runners[0] and thread == learner_threads[0]
                           and frames == replay_frames[0] and sent == send_frames[0])
                where = algo.local_replay_buffer.frames_device
                store = algo.local_replay_buffer._frames
                replay_bytes = store.nbytes if where is not None and store is not None else 0
                alone = learner_alone_rate(algo, 5) if ceiling else None
                algo.stop()
                del algo, store  # (the next row's GPU memory peak must not count this row's replay ring)
                gc.collect()
                if device.startswith("cuda"):
                    torch.cuda.empty_cache()
            threaded = (", learner thread" if thread else "") + (
                f", replay frames on {where.type}" if where is not None else ", replay frames LZ4 in host memory") + (
                "" if send_frames == (True,) else ", runners send frames" if sent else ", runners send stacks")
            rows.append((f"kappa-rllib {name}, {runners} remote EnvRunner(s), learner on {device}{threaded}", rate,
                         "DQN" if kappa == 1.0 else name, mem.peak,
                         f"policy lag <= {result['kappa']['max_policy_lag_env_steps']} env steps"
                         + (f"; GPU memory peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, replay "
                            f"{replay_bytes / 2**30:.2f} GiB of it" if device.startswith("cuda") else "")))
            if ceiling:
                rows.append((f"kappa-rllib {name}, its learner alone on {device} (nothing sampled)", alone, "DQN",
                             mem.peak, "the ceiling of any sampling layout"))
    return rows


def workload_atari_pipeline(steps: int, env_runners: list[int], replay_frames: tuple = (False, True),
                            send_frames: tuple = (True,)) -> list[tuple]:
    """The Atari pipeline's own ceiling on this machine, per storage of the replay's frames: kappa = 1 on Breakout
    with the Atari preset and N remote EnvRunners, nothing learnt (`timed_run`: each learner call draws its
    minibatches from the replay as the run does, then makes no gradient step), env steps/s over `steps` env steps
    after a 2,000-step learning start; beside it the N runners sampling the run's chunks alone. What separates the
    rows is the driver's per-chunk work (collect, replay add and draw, weight publish), with the frames LZ4 in host
    memory (`replay_frames_on_device=False`) or in the ring on the learner's device (`True`; here the CPU), and
    per `send_frames` (the runners send each frame once, or their stacks)."""
    from throughput_parts.dqn import runners_alone_rate, timed_run

    rows = Rows()
    for runners in [n for n in env_runners if n > 0]:
        alone = f"{runners} remote EnvRunner(s) sampling Breakout alone"
        for k, (frames, sent) in enumerate([(f, s) for f in replay_frames for s in send_frames]):
            config = preset_config("pi", 1.0, ATARI["env"], 2_000 + steps, runners=runners).training(
                num_steps_sampled_before_learning_starts=2_000, env_steps_per_iteration=1024,
                replay_frames_on_device=frames, send_frames=sent)
            rate, result, algo = timed_run(config, nothing_learnt=True)
            where = ("ring on the learner's device (cpu)" if frames else "LZ4 in host memory") + (
                "" if send_frames == (True,) else ", runners send frames" if sent else ", runners send stacks")
            if k == 0:
                rows.append((alone, runners_alone_rate(algo, steps), "DQN", 0, f"chunks of {algo._chunk_size()}"))
            algo.stop()
            rows.append((f"kappa = 1, {runners} remote EnvRunner(s), nothing learnt, replay frames {where}", rate,
                         "DQN", 0, "the pipeline's own ceiling; base: the runners alone", alone))
    return rows


def workload_packing(steps: int, trials_per_gpu: list[int], runners: int, device: str) -> list[tuple]:
    """N kappa-PI-DQN Atari trials at once through Tune (`kappa-rllib tune --gpus-per-trial 1/N`),
    per N: the aggregate env steps/s after learning starts and the slowest trial's rate."""
    import tempfile

    from ray import tune

    from kappa_rllib import experiments
    from kappa_rllib.tuning import driver

    start_steps = ATARI["learning_starts"]
    rows = Rows()
    for n in trials_per_gpu:
        config = preset_config("pi", ATARI["kappa"], ATARI["env"], start_steps + steps, runners=runners).training(
            num_steps_sampled_before_learning_starts=start_steps, env_steps_per_iteration=1024,
        ).debugging(seed=tune.grid_search(list(range(n))))
        grid = experiments.Grid(f"packing_{n}", config)
        if device.startswith("cuda"):
            experiments.request_gpus([grid], 1.0 / n)
        with tempfile.TemporaryDirectory() as storage, PeakRSS() as mem:
            result_grid = driver.run([grid], storage, verbose=0)[grid.name]
            rates = []
            for r in result_grid:
                if r.error is not None:
                    raise RuntimeError(f"packing trial failed: {r.error}")
                df = r.metrics_dataframe
                learning = df[df["kappa/env_steps"] >= start_steps]
                first, last = learning.iloc[0], learning.iloc[-1]
                rates.append((last["kappa/env_steps"] - first["kappa/env_steps"])
                             / (last["time_total_s"] - first["time_total_s"]))
        share = f"{1 / n:g} GPU" if device.startswith("cuda") else "cpu"
        rows.append((f"{n} kappa-PI-DQN trial(s) at once, {share} + {runners} EnvRunner(s) each", sum(rates),
                     "kappa-PI-DQN", mem.peak, f"aggregate; slowest trial {min(rates):.0f}/s"))
    return rows


def workload_graphs(device: str, updates: int = 64, calls: int = 5) -> list[tuple]:
    """kappa-PI-DQN's learner alone on Atari-shaped minibatches (the Atari preset's Nature CNN,
    batch 32, uint8 frames), eager and as CUDA graphs: per gradient step, the host's kernel
    launches (CUDA runtime launch calls, graph launches included, counted by torch.profiler) and
    the wall time of a fused call of `updates` steps (one target pass, as in an improvement phase).
    Rows are gradient steps/s."""
    from torch.profiler import ProfilerActivity, profile

    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.learner.training_data import TrainingData
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    from kappa_rllib.algorithms.kappa_dqn.learner_program import TDUpdates
    from kappa_rllib.envs import make_env

    rng = np.random.default_rng(0)
    n = updates * 32
    frames = lambda: rng.integers(0, 256, size=(n, 84, 84, 4), dtype=np.uint8)  # noqa: E731
    batch = MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch({
        "obs": frames(), "new_obs": frames(), "actions": rng.integers(0, 4, size=n),
        "rewards": rng.choice([0.0, 1.0], size=n).astype(np.float32), "terminateds": np.zeros(n, np.float32),
    })}, env_steps=n)
    program = {"program": [TDUpdates(DEFAULT_MODULE_ID, updates)], "minibatch_size": 32}
    rows = Rows()
    for graphs in (False, True):
        config = preset_config("pi", ATARI["kappa"], ATARI["env"], 10_000_000).training(cuda_graphs=graphs)
        if device.startswith("cuda"):
            config.learners(num_gpus_per_learner=1)
        learner = config.build_learner(env=make_env(ATARI["env"]))
        call = lambda: learner.update(training_data=TrainingData(batch=batch), fused_update=program)  # noqa: E731
        call()  # capture (graphs) and warm-up
        sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        rate = calls * updates / (time.perf_counter() - start)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
        with profile(activities=activities) as prof:
            call()
            sync()
        launches = sum(e.count for e in prof.key_averages()
                       if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx",
                                    "cudaGraphLaunch", "cudaMemcpyAsync"))
        layout = sum(e.count for e in prof.key_averages() if "nchwToNhwc" in e.key or "nhwcToNchw" in e.key)
        label = "CUDA graph" if graphs else "eager"
        rows.append((f"kappa-PI-DQN learner alone, {label}, {device} (gradient steps/s)", rate, "graphs", 0,
                     f"{launches / updates:.1f} launches per step; {layout} layout conversions in {updates} steps; "
                     f"graph off: {learner._graph_off}"))
        del learner
    return rows


def profile_atari(device: str, runners: int, iterations: int = 3) -> None:
    """torch.profiler over `iterations` training iterations of kappa-PI-DQN on Atari (learning
    already started), printed as the ops that take the most device (or CPU) time."""
    from torch.profiler import ProfilerActivity, profile

    start_steps = ATARI["learning_starts"]
    config = preset_config("pi", ATARI["kappa"], ATARI["env"], 10_000_000, runners=runners).training(
        num_steps_sampled_before_learning_starts=start_steps, env_steps_per_iteration=1024)
    cuda = device.startswith("cuda")
    if cuda:
        config.learners(num_gpus_per_learner=1)
    algo = config.build_algo()
    while algo.train()["kappa"]["env_steps"] < start_steps + 2048:
        pass
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(iterations):
            algo.train()
        if cuda:
            torch.cuda.synchronize()
    algo.stop()
    key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=25))
    if cuda:
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
