"""What the kappa machinery costs RLlib's APPO on a 2-node Ray cluster: stock APPO beside
kappa-APPO at kappa = 1, kappa-PI-APPO and kappa-VI-APPO, in one run.

A benchmark, not a test: compare the ratios within one table. The cluster is two Ray nodes on this
machine (`ray.cluster_utils.Cluster`: a head and a second node, each its own raylet with 1 CPU,
as `ray start` makes them); every row runs 2 EnvRunners of 1 CPU (one on each node, 4 sub-envs,
fragments of 50 steps) that sample asynchronously for the learner in this process (num_learners 0),
with the CartPole preset (kappa_rllib/presets/appo_cartpole.yaml: batch 500, lr 1e-3). Each row
warms up for `--warmup-batches`, then trains for `--seconds`; env steps/s counts what the
EnvRunners returned (sampled) and what the learner trained. Rows alternate (APPO, kappa 1, PI, VI,
APPO, ...) `--repeats` times so drifts hit every row alike; each figure is the median over repeats.
Per batch, kappa-VI-APPO adds one value forward (V_phi, for the shaped reward); kappa-PI-APPO also
trains V_phi (forward, V-trace, backward) and runs the policy's target network once more.

    python benchmarks/kappa_appo_cluster.py --seconds 30 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

SAMPLED = ("env_runners", "num_env_steps_sampled_lifetime")
TRAINED = ("learners", "__all_modules__", "num_env_steps_trained_lifetime")


def _configs(kappa: float):
    from ray.rllib.algorithms.appo import APPOConfig

    from kappa_rllib import KappaPIAPPOConfig, KappaVIAPPOConfig

    def common(config):
        return (config.environment("CartPole-v1")
                .env_runners(num_env_runners=2, num_cpus_per_env_runner=1, num_envs_per_env_runner=4,
                             rollout_fragment_length=50)
                .learners(num_learners=0)
                .training(train_batch_size_per_learner=500, lr=1e-3, vf_loss_coeff=0.05, entropy_coeff=0.0)
                .debugging(seed=0))

    def kappa_config(cls, k):
        return common(cls()).training(kappa=k, c_fa=0.5, total_env_steps=100_000_000)

    return {
        # one result per >= 500 sampled env steps, as kappa-APPO reports once per batch
        "APPO": common(APPOConfig()).reporting(min_time_s_per_iteration=None,
                                               min_sample_timesteps_per_iteration=500),
        "kappa-APPO, kappa 1": kappa_config(KappaPIAPPOConfig, 1.0),
        f"kappa-PI-APPO, kappa {kappa}": kappa_config(KappaPIAPPOConfig, kappa),
        f"kappa-VI-APPO, kappa {kappa}": kappa_config(KappaVIAPPOConfig, kappa),
    }


def rates(config, warmup_batches: int, seconds: float) -> tuple[float, float, set]:
    """(sampled env steps/s, trained env steps/s, the nodes the EnvRunners ran on)."""
    import ray

    algo = config.build_algo()
    try:
        while algo.metrics.peek(SAMPLED, default=0) < warmup_batches * 500:
            algo.train()
        sampled0, trained0 = algo.metrics.peek(SAMPLED, default=0), algo.metrics.peek(TRAINED, default=0)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            algo.train()
        elapsed = time.perf_counter() - start
        sampled = algo.metrics.peek(SAMPLED, default=0) - sampled0
        trained = algo.metrics.peek(TRAINED, default=0) - trained0
        nodes = set(algo.env_runner_group.foreach_env_runner(lambda r: ray.get_runtime_context().get_node_id(),
                                                             local_env_runner=False))
        return sampled / elapsed, trained / elapsed, nodes
    finally:
        algo.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kappa", type=float, default=0.9)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup-batches", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import ray
    import torch
    from ray.cluster_utils import Cluster

    torch.set_num_threads(1)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    node_ids = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    configs = _configs(args.kappa)
    sampled, trained = {name: [] for name in configs}, {name: [] for name in configs}
    for _ in range(args.repeats):
        for name, config in configs.items():
            s, t, nodes = rates(config, args.warmup_batches, args.seconds)
            assert nodes == node_ids, f"{name}: EnvRunners on {nodes}, cluster nodes {node_ids}"
            sampled[name].append(s)
            trained[name].append(t)
    base_s, base_t = statistics.median(sampled["APPO"]), statistics.median(trained["APPO"])
    print(f"CartPole-v1 on a 2-node Ray cluster ({len(node_ids)} nodes, 1 CPU each; one EnvRunner on each), "
          f"{args.seconds:.0f} s per row after {args.warmup_batches} warm-up batches, median of {args.repeats}")
    print(f"{'':28}{'sampled/s':>10}{'vs APPO':>9}{'trained/s':>11}{'vs APPO':>9}   sampled/s per repeat")
    for name in configs:
        s, t = statistics.median(sampled[name]), statistics.median(trained[name])
        print(f"{name:28}{s:>10,.0f}{s / base_s:>9.2f}{t:>11,.0f}{t / base_t:>9.2f}   "
              + ", ".join(f"{v:,.0f}" for v in sampled[name]))
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main()
