"""`kappa-rllib compare`: several algorithms on one env, one after another, then a table."""

from __future__ import annotations

from kappa_rllib.cli.common import ALGORITHMS, UsageError
from kappa_rllib.cli.settings import add_run_arguments
from kappa_rllib.cli.train import run_algorithms


def add_parser(sub) -> None:
    compare = sub.add_parser(
        "compare", help="train several algorithms one after another, print a table",
        epilog="example: kappa-rllib compare --algos kappa-pi-dqn,dqn --env CartPole-v1 --total-steps 50000")
    compare.add_argument("--algos", default="kappa-pi-dqn,dqn",
                         help=f"comma-separated, from {', '.join(ALGORITHMS)}")
    add_run_arguments(compare)


def main(args) -> int:
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    if not algos:
        raise UsageError("--algos is empty")
    code, summaries = run_algorithms(args, algos)
    if code == 0 and len(summaries) > 1:
        print()
        print(summary_table(summaries))
    return code


def summary_table(summaries) -> str:
    header = f"{'algo':<14}{'kappa':>7}{'N_kappa':>9}{'env steps':>11}{'final return':>14}{'best return':>13}{'steps/s':>9}"
    lines = [header, "-" * len(header)]
    for s in summaries:
        lines.append(
            f"{s['algo']:<14}{s['kappa']:>7.2f}{s['num_iterations']:>9d}{s['env_steps']:>11d}"
            f"{s['final_return']:>14.1f}{s['best_return']:>13.1f}{s['env_steps_per_s']:>9.0f}"
        )
    return "\n".join(lines)
