"""Throughput of the project's algorithms beside minimal single-process torch loops, in one run.

A benchmark, not a test: every figure of one table comes from the same process and machine state,
so compare ratios within a table, not figures across runs.

    python benchmarks/throughput.py                       # W1 and W2
    python benchmarks/throughput.py --workload w1 --steps 20000
    python benchmarks/throughput.py --workload w2 --env-runners 1,2,4
    python benchmarks/throughput.py --workload w3 --steps 30000 --env-runners 0,1
    python benchmarks/throughput.py --workload pipeline --steps 25000 --env-runners 0,1,2
    python benchmarks/throughput.py --workload pipeline --steps 15000 --env-runners 1,2 --pipeline-kappa pi
    python benchmarks/throughput.py --workload pi-evaluation --steps 25000 --env-runners 1,2
    python benchmarks/throughput.py --workload local-weights --steps 25000 --env-runners 2
    python benchmarks/throughput.py --workload atari --steps 2000 --env-runners 0,2
    python benchmarks/throughput.py --workload atari --steps 50000 --env-runners 2,4 --device cuda --torch-threads 4
    python benchmarks/throughput.py --workload atari-pipeline --steps 4000 --env-runners 2
    python benchmarks/throughput.py --workload packing --steps 10000 --env-runners 2 --trials-per-gpu 1,2,4 --device cuda

W1: CartPole-v1, 2x64 MLP, batch 32, one update per 4 env steps, replay 50k, target copy every 500
    env steps, learning starts at 1000, epsilon 1 -> 0.02 over 10k steps, kappa 0.84, C_FA 0.05.
    Minimal loops: DQN, kappa-PI-DQN (Algorithm 5: improvement phases, then as many TD(0) updates of
    Q_phi as the improvement made), kappa-VI-DQN (Algorithm 6: phi <- theta per iteration).
W3: MinAtar/Breakout-v1 with the MinAtar preset (kappa_rllib/presets/dqn_minatar.yaml: one 3x3 conv of
    16 filters, 128 units, batch 32, one update per 4 env steps, replay 100k, target copy every 1000
    env steps, learning starts at 5000, Adam 2.5e-4), `--steps` env steps in all, the learning start
    included. Minimal single-env loops for DQN, kappa-PI and kappa-VI as in W1.
W2: Hopper-v5, the paper's TRPO (1024 steps per iteration, CG 10, damping 0.1, max KL 0.01, value
    fit 5 epochs x 128, entropy 0.01), one warm-up iteration, then `--iterations` timed ones.
Atari: kappa = 1 and kappa-PI-DQN on ALE/Breakout-v5 with the Atari preset (the paper's settings,
    Nature CNN, 100k replay) and `--env-runners N` remote EnvRunners, the learner on `--device`
    (cpu or cuda), beside minimal single-env loops on the same device; `--steps` env steps after
    learning starts (10k, excluded from the rate; `--fill-replay`: 100k, so the replay is full).
Pipeline: W3 at kappa = 1 taken apart per remote EnvRunner count: the run, the run with nothing learnt (the
    pipeline's own ceiling), the runners sampling alone, and the learner alone on an idle machine and with one
    core kept busy (throughput_parts.dqn.workload_pipeline). Rates after the learning start.
Atari-pipeline: the Atari run at kappa = 1 with nothing learnt (the pipeline's own ceiling, after a 2,000-step
    learning start) per remote EnvRunner count, with the replay's frames LZ4 in host memory and in the ring on the
    learner's device (`--replay-frames`), and the runners sending each frame once or their stacks
    (`--send-frames`), beside the runners sampling alone (throughput_parts.atari.workload_atari_pipeline).
Pi-evaluation: W3's kappa-PI-DQN with N remote EnvRunners, its runners sampling the next improvement phase's first
    chunk during each evaluation phase (the default) against after it (throughput_parts.dqn.workload_pi_evaluation).
Local-weights: W3 at kappa = 1 with N remote EnvRunners, the env-less local EnvRunner loading every chunk's weights
    (as it did) against loading them when read (throughput_parts.dqn.workload_local_weights).
W3 and Atari also time the kappa = 1 run's learner alone after its run (fused learner calls on its own
    replay, nothing sampled): the rate no sampling layout can beat, only a faster gradient step.
Packing: `kappa-rllib tune --gpus-per-trial 1/N`'s layout: N kappa-PI-DQN trials of the Atari run above
    (seeds 0..N-1, `--env-runners` remote EnvRunners each) at once through Tune, each trial's learner
    on 1/N of the GPU (`--device cuda`; on cpu the same trials without a GPU share); per trial its env
    steps/s after learning starts, and their sum, the aggregate. `--profile`: torch.profiler over a
    few training iterations of the last Atari row's learner (where the driver's time goes, per op).
Each row: env steps/s, the ratio to the minimal loop of the same algorithm, the peak memory of the
whole process tree (driver, Ray's own processes, workers) while that row ran, as proportional set
size (PSS: pages shared between processes, e.g. torch's libraries, count once).

Rounds (`--rounds N`, default 3): the whole table is measured N times, one round after another, so each
row alternates with the minimal loop it is compared with (A B C, A B C, ...) and a slow minute of the
machine lands on one round, not on one row. Each round's ratio divides by the minimal loop of the same
round; the table prints the median rate, the median ratio and its range over the rounds. Quote the
median. `--json FILE` writes every round's rows (benchmarks/against_commit.py reads it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from throughput_parts.atari import (profile_atari, workload_atari, workload_atari_pipeline, workload_graphs,
                                    workload_packing)
from throughput_parts.dqn import (workload_local_weights, workload_pi_evaluation, workload_pipeline, workload_w1,
                                  workload_w3)
from throughput_parts.trpo import workload_w2


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="w1,w2", help="comma-separated: w1, w2, w3, pipeline, pi-evaluation, local-weights, atari, "
                        "atari-pipeline, graphs, packing")
    p.add_argument("--steps", type=int, default=20_000, help="env steps (W1; Atari: after learning starts)")
    p.add_argument("--iterations", type=int, default=20, help="timed TRPO iterations (W2)")
    p.add_argument("--env-runners", default="0",
                   help="remote EnvRunner counts: W2's TRPO scaling rows, W3's and Atari's kappa-DQN rows")
    p.add_argument("--fill-replay", action="store_true",
                   help="Atari: start learning only when the 100k replay is full (peak memory), not at 10k")
    p.add_argument("--device", default="cpu", help="Atari: where the learners (and the minimal loops) run: cpu or cuda")
    p.add_argument("--atari-algos", default="dqn,kappa-pi", help="Atari: which of dqn, kappa-pi to run")
    p.add_argument("--learner-thread", default="off", choices=("off", "on", "both"),
                   help="Atari, pipeline: the runs' `learner_thread` setting; both: a row for each")
    p.add_argument("--replay-frames", default="auto", choices=("auto", "host", "device", "both"),
                   help="Atari: the runs' `replay_frames_on_device` (host: False, LZ4 in host memory; device: True, "
                        "the ring on the learner's device); both: a row for each")
    p.add_argument("--send-frames", default="on", choices=("on", "off", "both"),
                   help="Atari, atari-pipeline: the runs' `send_frames` (on: the runners send each frame once; off: "
                        "their stacks); both: a row for each")
    p.add_argument("--trials-per-gpu", default="1,2,4", help="packing: trial counts N, each on 1/N GPU")
    p.add_argument("--profile", action="store_true", help="Atari: torch.profiler table of a kappa-PI-DQN run")
    p.add_argument("--runner-call-steps", default="preset",
                   help="pipeline: comma-separated env steps per runner call (env_steps_per_runner_call), 'preset' the preset's")
    p.add_argument("--pipeline-kappa", choices=("1", "pi", "both"), default="1",
                   help="pipeline: kappa = 1, W3's kappa-PI-DQN (kappa 0.84: its learner alone makes the evaluation's "
                        "Q_phi updates too), or both")
    p.add_argument("--torch-threads", type=int, default=1, help="torch threads of the driver (the learner)")
    p.add_argument("--rounds", type=int, default=3,
                   help="measure the whole table this many times, alternating the rows; print medians (default 3)")
    p.add_argument("--json", help="also write every round's rows to this file")
    p.add_argument("--no-stock", action="store_true", help="W1, W2: leave out the stock RLlib DQN and PPO rows")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: at least 1")
    torch.set_num_threads(args.torch_threads)
    import ray

    runners = [int(n) for n in args.env_runners.split(",")]
    workloads = args.workload.split(",")
    cpus = max(runners) + 1
    if "packing" in workloads:
        cpus = max(cpus, max(int(n) for n in args.trials_per_gpu.split(",")) * (max(runners) + 1))
    ray.init(address="local", num_cpus=max(2, cpus), include_dashboard=False, log_to_driver=False)
    workers_import = ray.get(ray.remote(_kappa_rllib_file).remote())  # where Ray's workers import it from
    rounds = []
    for r in range(args.rounds):
        print(f"== round {r + 1} of {args.rounds}", flush=True)
        rounds.append(measure_round(args, workloads, runners))
    ray.shutdown()
    table = summarize(rounds)
    print_table(table, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            import kappa_rllib

            json.dump({"argv": sys.argv[1:] if argv is None else argv, "kappa_rllib": kappa_rllib.__file__,
                       "kappa_rllib_ray_workers": workers_import, "rounds": [[list(row) for row in rows] for rows in rounds]}, f, indent=1)
    if args.profile:  # after the table, so that a failure here loses none of it
        ray.init(address="local", num_cpus=max(2, max(runners) + 1), include_dashboard=False, log_to_driver=False)
        profile_atari(args.device, max(runners))
        ray.shutdown()


def learner_threads(args) -> tuple:
    return {"off": (False,), "on": (True,), "both": (False, True)}[args.learner_thread]


def send_frames(args) -> tuple:
    return {"on": (True,), "off": (False,), "both": (False, True)}[args.send_frames]


def replay_frames(args) -> tuple:
    return {"auto": ("auto",), "host": (False,), "device": (True,), "both": (False, True)}[args.replay_frames]


def _kappa_rllib_file() -> str:
    import kappa_rllib

    return kappa_rllib.__file__


def measure_round(args, workloads: list[str], runners: list[int]) -> list[tuple]:
    """One measurement of every row of the selected workloads, in the table's order."""
    rows = []
    if "w1" in workloads:
        rows += [("W1",)] + workload_w1(args.steps, stock=not args.no_stock)
    if "w3" in workloads:
        rows += [("W3",)] + workload_w3(args.steps, runners)
    if "pipeline" in workloads:
        for kappa_pi in {"1": (False,), "pi": (True,), "both": (False, True)}[args.pipeline_kappa]:
            rows += [("W3's pipeline (kappa-PI-DQN)" if kappa_pi else "W3's pipeline (kappa = 1)",)] + workload_pipeline(
                args.steps, runners, learner_threads(args),
                tuple(int(c) if c != "preset" else None for c in args.runner_call_steps.split(",")), kappa_pi)
    if "local-weights" in workloads:
        rows += [("W3's env-less local EnvRunner",)] + workload_local_weights(args.steps, runners)
    if "pi-evaluation" in workloads:
        rows += [("W3's kappa-PI evaluation phase",)] + workload_pi_evaluation(args.steps, runners)
    if "w2" in workloads:
        rows += [("W2",)] + workload_w2(args.iterations, runners, stock=not args.no_stock)
    if "atari" in workloads:
        rows += [("Atari",)] + workload_atari(args.steps, args.fill_replay, runners, args.device,
                                              tuple(args.atari_algos.split(",")), learner_threads(args),
                                              replay_frames(args), send_frames(args))
    if "atari-pipeline" in workloads:
        frames = (False, True) if args.replay_frames in ("auto", "both") else replay_frames(args)
        rows += [("Atari's pipeline (kappa = 1, nothing learnt)",)] + workload_atari_pipeline(args.steps, runners,
                                                                                              frames, send_frames(args))
    if "graphs" in workloads:
        rows += [("CUDA graphs (Atari, the learner alone)",)] + workload_graphs(args.device)
    if "packing" in workloads:
        rows += [("Packing (Atari, kappa-PI-DQN)",)] + workload_packing(
            args.steps, [int(n) for n in args.trials_per_gpu.split(",")], max(runners), args.device)
    return rows


def sections(rows: list[tuple]):
    """(section, row) of each measured row: rows are keyed by their workload's section, since W1, W3 and
    Atari share row names and minimal-loop labels."""
    section = ""
    for row in rows:
        if len(row) == 1:
            section = row[0]
        else:
            yield section, row


def round_ratios(rows: list[tuple]) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """(section, row name) -> (ratio to its section's minimal loop, ratio to raw env.step), both of this round."""
    minimal = {(sec, r[2]): r[1] for sec, r in sections(rows) if r[0].startswith("minimal")}
    raw_env = {(sec, r[2]): r[1] for sec, r in sections(rows) if r[0].startswith("gymnasium")}
    named = {(sec, r[0]): r[1] for sec, r in sections(rows)}

    def base(sec, r):  # a row's own base (its 6th item: another row of its section, by name), else the minimal loop
        if len(r) > 5:
            return named.get((sec, r[5]))
        return minimal.get((sec, r[2]))

    return {(sec, r[0]): (r[1] / base(sec, r) if base(sec, r) else None,
                          r[1] / raw_env[sec, r[2]] if (sec, r[2]) in raw_env else None) for sec, r in sections(rows)}


def summarize(rounds: list[list[tuple]]) -> list[tuple]:
    """The first round's rows in order, each with the medians (and ranges) over every round."""
    ratios = [round_ratios(rows) for rows in rounds]
    by_key = [dict(((sec, r[0]), r) for sec, r in sections(rows)) for rows in rounds]
    table, section = [], ""
    for row in rounds[0]:
        if len(row) == 1:
            table.append(row)
            section = row[0]
            continue
        key = (section, row[0])
        same = [rows[key] for rows in by_key if key in rows]
        to_min = [x[key][0] for x in ratios if key in x and x[key][0] is not None]
        to_env = [x[key][1] for x in ratios if key in x and x[key][1] is not None]
        table.append(dict(name=row[0], rate=statistics.median(r[1] for r in same),
                          ratio=to_min, to_env=to_env, peak=max(r[3] for r in same),
                          notes=row[4] if len(row) > 4 else ""))
    return table


def _median_range(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def print_table(table: list, rounds: int) -> None:
    what = "median of 1 round" if rounds == 1 else f"medians of {rounds} alternated rounds (range)"
    print(f"\n{what}")
    print(f"{'run':<64}{'env steps/s':>12}{'vs its base':>20}{'vs env.step':>20}{'peak PSS':>11}  notes")
    for row in table:
        if isinstance(row, tuple):
            print(f"-- {row[0]}")
            continue
        print(f"{row['name']:<64}{row['rate']:>12.0f}{_median_range(row['ratio']):>20}"
              f"{_median_range(row['to_env']):>20}{row['peak'] / 2**30:>9.2f} G  {row['notes']}")


if __name__ == "__main__":
    main()
