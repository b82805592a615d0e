"""`kappa-rllib repeat TRIAL`: trains a published trial again from its own params.json and compares its episode
returns with the published result.json's, iteration by iteration (kappa_rllib.reproduce)."""

from __future__ import annotations

from kappa_rllib.cli.common import error, one_line, positive_int


def add_parser(sub) -> None:
    repeat_p = sub.add_parser(
        "repeat", help="train a published trial again and compare its episode returns bit for bit",
        description="Builds the algorithm a trial folder names from its params.json, trains it for --iterations "
                    "iterations in this process (one torch thread, as a one-CPU Tune trial) and compares each "
                    "iteration's episode returns with the folder's result.json. Exit 0: identical; 1: they differ "
                    "(the first differing iteration is named).",
        epilog="example: kappa-rllib repeat docs/results/table2/trials/hopper_trpo/TRPO_Hopper-v5_..._seed=0_... "
               "--iterations 20")
    repeat_p.add_argument("trial", help="a trial folder (params.json, result.json) written by kappa-rllib tune, or "
                          "its copy under docs/results/*/trials/")
    repeat_p.add_argument("--iterations", type=positive_int, default=10, help="iterations to compare (default 10)")
    repeat_p.add_argument("--torch-threads", type=positive_int, default=1,
                          help="torch's threads (default 1, what a Tune trial of one CPU runs with)")


def main(args) -> int:
    import ray

    from kappa_rllib import reproduce

    try:
        reproduce.check(args.trial, args.iterations)  # one line, before Ray starts
    except ValueError as e:
        return error(one_line(e))
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        outcome = reproduce.repeat(args.trial, args.iterations, torch_threads=args.torch_threads)
    except Exception as e:  # noqa: BLE001 - the trial's config no longer builds or trains here: one line
        return error(f"{args.trial}: could not run it again: {type(e).__name__}: {one_line(e)}")
    episodes = sum(len(r) for r in outcome.repeated)
    if outcome.identical:
        print(f"[repeat] {outcome.algorithm}: {outcome.iterations} iterations, {episodes} episode returns, "
              "identical to the published ones bit for bit")
        return 0
    i = outcome.first_difference
    published, repeated = outcome.published[i - 1], outcome.repeated[i - 1]
    at = next((k for k, (a, b) in enumerate(zip(published, repeated)) if a != b), min(len(published), len(repeated)))
    print(f"[repeat] {outcome.algorithm}: iteration {i} differs first, at its episode {at + 1}: published "
          f"{published[at] if at < len(published) else 'none'}, "
          f"repeated {repeated[at] if at < len(repeated) else 'none'}; {outcome.machines()}")
    return 1
