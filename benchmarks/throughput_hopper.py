"""env steps/s on Hopper-v5: TRPO, kappa-PI-TRPO, kappa-VI-TRPO beside stock RLlib PPO.

All four sample 1024 env steps per training iteration with one remote EnvRunner and update on a
local learner, one after another in this process (same machine state). The first iteration
(warm-up) is excluded; the rate is env steps over wall time of the timed iterations, which
includes the updates (PPO: RLlib's defaults, 10 epochs of minibatch SGD).

    python benchmarks/throughput_hopper.py [--iterations 10]
"""

from __future__ import annotations

import argparse
import time

import ray
import torch

BATCH = 1024


def configs():
    from ray.rllib.algorithms.ppo import PPOConfig

    from kappa_rllib import KappaPITRPOConfig, KappaVITRPOConfig, TRPOConfig

    kappa = dict(kappa=0.84, c_fa=0.2, total_env_steps=2_000_000)
    return {
        "TRPO": TRPOConfig(),
        "kappa-PI-TRPO": KappaPITRPOConfig().training(**kappa),
        "kappa-VI-TRPO": KappaVITRPOConfig().training(**kappa),
        "RLlib PPO (stock)": PPOConfig().training(train_batch_size_per_learner=BATCH),
    }


def measure(config, iterations: int) -> float:
    config = config.environment("Hopper-v5").env_runners(num_env_runners=1).debugging(seed=0)
    algo = config.build_algo()
    algo.train()  # warm-up
    start = time.perf_counter()
    before = algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"))
    for _ in range(iterations):
        result = algo.train()
    steps = result["env_runners"]["num_env_steps_sampled_lifetime"] - before
    rate = steps / (time.perf_counter() - start)
    algo.stop()
    return rate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    rates = {name: measure(cfg, args.iterations) for name, cfg in configs().items()}
    ray.shutdown()
    ppo = rates["RLlib PPO (stock)"]
    print(f"\nHopper-v5, {BATCH} env steps per iteration, 1 EnvRunner, {args.iterations} timed iterations")
    print(f"{'algorithm':<20}{'env steps/s':>12}{'vs PPO':>8}")
    for name, rate in rates.items():
        print(f"{name:<20}{rate:>12.0f}{rate / ppo:>8.2f}")


if __name__ == "__main__":
    main()
