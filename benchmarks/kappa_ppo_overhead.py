"""What the kappa machinery costs RLlib's PPO: stock PPO beside kappa-PI-PPO and kappa-VI-PPO, in one run.

A benchmark, not a test: compare the ratios within one table. Every row trains the same settings
(the CartPole preset kappa_rllib/presets/ppo_cartpole.yaml unless --env says otherwise: batch 1000,
6 epochs of minibatches of 250, lr 3e-4, 4 sub-envs in the driver) for `--batches` PPO iterations
after one warm-up iteration, on an embedded Ray with `--num-cpus`. Rows alternate (PPO, PI, VI,
PPO, PI, VI, ...) `--repeats` times so that drifts of the machine hit every row alike; each row's
figure is the median over its repeats.
kappa-PI-PPO does per batch: one more value forward (V_phi's snapshot, in the connector) and one
more value network trained (V_phi on rho_j); kappa-VI-PPO: the snapshot forward only.

    python benchmarks/kappa_ppo_overhead.py --batches 10 --repeats 3
    python benchmarks/kappa_ppo_overhead.py --env InvertedPendulum-v5 --batches 10
"""

from __future__ import annotations

import argparse
import statistics
import time


def _configs(env: str, kappa: float):
    from ray.rllib.algorithms.ppo import PPOConfig

    from kappa_rllib import KappaPIPPOConfig, KappaVIPPOConfig

    def common(config):
        return (config.environment(env).env_runners(num_env_runners=0, num_envs_per_env_runner=4)
                .training(train_batch_size=1000, minibatch_size=250, num_epochs=6, lr=3e-4).debugging(seed=0))

    return {
        "PPO (lambda 1)": common(PPOConfig()).training(lambda_=1.0),
        f"kappa-PI-PPO (kappa {kappa})": common(KappaPIPPOConfig()).training(kappa=kappa, c_fa=0.5,
                                                                             total_env_steps=10_000_000),
        f"kappa-VI-PPO (kappa {kappa})": common(KappaVIPPOConfig()).training(kappa=kappa, c_fa=0.5,
                                                                             total_env_steps=10_000_000),
    }


def env_steps_per_s(config, batches: int) -> float:
    algo = config.build_algo()
    try:
        algo.train()  # warm-up: module build, first sampling
        start_steps = algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"))
        start = time.perf_counter()
        for _ in range(batches):
            algo.train()
        steps = algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime")) - start_steps
        return steps / (time.perf_counter() - start)
    finally:
        algo.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--kappa", type=float, default=0.9)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()

    import ray
    import torch

    torch.set_num_threads(1)
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    configs = _configs(args.env, args.kappa)
    rates = {name: [] for name in configs}
    for _ in range(args.repeats):
        for name, config in configs.items():
            rates[name].append(env_steps_per_s(config, args.batches))
    base = statistics.median(rates["PPO (lambda 1)"])
    print(f"{args.env}: {args.batches} PPO iterations of 1,000 env steps per row, median of {args.repeats}")
    print(f"{'':30}{'env steps/s':>12}{'vs PPO':>9}   repeats")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"{name:30}{median:>12,.0f}{median / base:>9.2f}   " + ", ".join(f"{v:,.0f}" for v in values))
    ray.shutdown()


if __name__ == "__main__":
    main()
