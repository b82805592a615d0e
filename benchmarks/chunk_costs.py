"""Where one chunk's time goes in a kappa-DQN run with remote EnvRunners: W3 (MinAtar Breakout, kappa = 1, the
MinAtar preset), the driver's wall time per chunk in each part of `_improvement_step`, after the learning start.

A benchmark, not a test. Each part is timed around the method that does it, in the run itself (no part is
simulated): the learner's gradient steps with their minibatch draws (`_update`), the wait for the chunk in flight
(`Sampler.collect`: the runners' answer, deserialized, and RLlib's metrics of it), the request of the next chunk
with the acting weights written to shared memory (put in the object store for runners on other nodes) (`Sampler.submit`), a chunk sampled while the driver waits
(`Sampler.sample`: none where every chunk is requested ahead, a `train()` call's first too), the acting weights read from the learner (`Sampler.sync`), the segments cut into transitions and added to the
replay, and what `train()` does around its training step (results, metrics). Beside them, the learner alone on
the run's replay (`learner_alone_rate`: the same gradient steps and draws, nothing sampled), per chunk.

    python benchmarks/chunk_costs.py --steps 30000 --env-runners 1,2 --rounds 3

Rounds alternate the runner counts (1, 2, 1, 2, ...); the table prints each part's median over rounds.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PARTS = ("train", "training_step", "update", "collect", "submit", "sample_sync", "weights_sync", "replay_add",
         "segment_transitions")
LABELS = {
    "train": "the whole train() call, per chunk",
    "training_step": "its training step",
    "update": "the gradient steps and their minibatch draws",
    "collect": "waiting for the chunk in flight, and reading it",
    "submit": "requesting the next chunk (the acting weights written to shared memory)",
    "sample_sync": "a chunk sampled while the driver waits",
    "weights_sync": "the acting weights read from the learner",
    "replay_add": "the replay add",
    "segment_transitions": "segments cut into transitions",
}


def one_run(steps: int, runners: int) -> tuple[dict, float, float]:
    """({part: ms per chunk}, env steps/s of the run, ms per chunk of the learner alone) of one run."""
    from throughput_parts.common import learner_alone_rate, preset_config
    from throughput_parts.minimal import W3

    from kappa_rllib.algorithms.kappa_dqn import kappa_dqn

    config = preset_config("pi", 1.0, W3["env"], steps, runners=runners)
    algo = config.build_algo()
    spent, timing = collections.Counter(), [False]

    def timed(owner, name, part):
        method = getattr(owner, name)

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                if timing[0]:
                    spent[part] += time.perf_counter() - start

        setattr(owner, name, wrapper)
        return method

    sampler = algo.sampler
    for owner, name, part in ((sampler, "collect", "collect"), (sampler, "sample", "sample_sync"),
                              (sampler, "submit", "submit"), (sampler, "sync", "weights_sync"),
                              (algo, "_update", "update"), (algo.local_replay_buffer, "add", "replay_add"),
                              (algo, "training_step", "training_step")):
        timed(owner, name, part)
    original = timed(kappa_dqn, "segment_transitions", "segment_transitions")
    try:
        result, first = {}, None
        while not result.get("done"):
            start = time.perf_counter()
            result = algo.train()
            if timing[0]:
                spent["train"] += time.perf_counter() - start
            elif result["kappa"]["env_steps"] >= config.num_steps_sampled_before_learning_starts:
                timing[0], first = True, result["kappa"]["env_steps"]
        chunks = (result["kappa"]["env_steps"] - first) / algo._chunk_size()
        rate = (result["kappa"]["env_steps"] - first) / spent["train"]
        alone = algo._chunk_size() / learner_alone_rate(algo, 20) * 1e3
    finally:
        kappa_dqn.segment_transitions = original
        algo.stop()
    return {part: spent[part] / chunks * 1e3 for part in PARTS}, rate, alone


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30000, help="env steps a run, the 5k learning start included")
    parser.add_argument("--env-runners", default="1,2", help="comma-separated remote EnvRunner counts")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    import ray
    import torch

    torch.set_num_threads(1)  # the learner's, as a Tune trial of one CPU has it
    counts = [int(n) for n in args.env_runners.split(",")]
    ray.init(address="local", num_cpus=max(2, max(counts) + 1), include_dashboard=False, log_to_driver=False)
    measured = collections.defaultdict(list)
    for r in range(args.rounds):
        for n in counts:
            parts, rate, alone = one_run(args.steps, n)
            measured[n].append((parts, rate, alone))
            print(f"round {r + 1}, {n} remote EnvRunner(s): {rate:.0f} env steps/s, "
                  + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()) + f" ms/chunk; learner alone {alone:.2f}",
                  flush=True)
    ray.shutdown()
    print(f"\nmedians of {args.rounds} round(s), ms per chunk")
    print("| part | " + " | ".join(f"{n} remote EnvRunner(s)" for n in counts) + " |")
    print("|---|" + "---|" * len(counts))
    for part in PARTS:
        print(f"| {LABELS[part]} | " + " | ".join(
            f"{statistics.median(p[part] for p, _, _ in measured[n]):.2f}" for n in counts) + " |")
    print("| the learner alone: the same gradient steps and draws, nothing sampled | " + " | ".join(
        f"{statistics.median(a for _, _, a in measured[n]):.2f}" for n in counts) + " |")
    print("| env steps/s of the run | " + " | ".join(
        f"{statistics.median(r for _, r, _ in measured[n]):,.0f}" for n in counts) + " |")


if __name__ == "__main__":
    main()
