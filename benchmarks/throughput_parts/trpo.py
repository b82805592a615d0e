"""W2: the TRPO family on Hopper beside the minimal TRPO loop and raw env.step."""

from __future__ import annotations

import time

from throughput_parts.common import PeakRSS, Rows
from throughput_parts.minimal import minimal_trpo_loop, raw_env_step_rate


def rllib_rate(config, iterations: int, runners: int) -> float:
    config = config.environment("Hopper-v5").env_runners(num_env_runners=runners).debugging(seed=0)
    algo = config.build_algo()
    algo.train()  # warm-up
    before = algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"))
    start = time.perf_counter()
    for _ in range(iterations):
        result = algo.train()
    steps = result["env_runners"]["num_env_steps_sampled_lifetime"] - before
    rate = steps / (time.perf_counter() - start)
    algo.stop()
    return rate


def workload_w2(iterations: int, env_runners: list[int], stock: bool = True) -> list[tuple]:
    from ray.rllib.algorithms.ppo import PPOConfig

    from kappa_rllib import KappaPITRPOConfig, KappaVITRPOConfig, TRPOConfig

    rows = Rows()
    with PeakRSS() as mem:
        rate = minimal_trpo_loop(iterations)
    rows.append(("minimal TRPO loop", rate, "TRPO", mem.peak))
    raw = raw_env_step_rate()
    rows.append(("gymnasium Hopper-v5 env.step alone, one process", raw, "TRPO", mem.peak, "the env's own rate"))
    kappa = dict(kappa=0.84, c_fa=0.2, total_env_steps=2_000_000)
    runs = [("TRPO", TRPOConfig()), ("kappa-PI-TRPO", KappaPITRPOConfig().training(**kappa)),
            ("kappa-VI-TRPO", KappaVITRPOConfig().training(**kappa)),
            ("stock RLlib PPO", PPOConfig().training(train_batch_size_per_learner=1024))][:None if stock else 3]
    for name, config in runs:
        for runners in (env_runners if "PPO" not in name else [0]):
            with PeakRSS() as mem:
                rate = rllib_rate(config.copy(copy_frozen=False), iterations, runners)
            label = f"kappa-rllib {name}" if "PPO" not in name else name
            rows.append((f"{label}, {runners} remote EnvRunner(s)", rate, "TRPO", mem.peak))
    return rows
