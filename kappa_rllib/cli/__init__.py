"""`kappa-rllib`: an RLlib-style command line (RLlib 2.60 ships none).

    kappa-rllib train --algo kappa-pi-dqn --env CartPole-v1 --kappa 0.84 --c-fa 0.05 \\
        --total-steps 50000 --seed 0
    kappa-rllib compare --algos kappa-pi-dqn,dqn --env CartPole-v1 --total-steps 50000
    kappa-rllib tune tune_configs/small/cartpole_dqn.py --report
    kappa-rllib evaluate results/<run folder> --episodes 10
    kappa-rllib report results/tune/cartpole_dqn
    kappa-rllib repeat docs/results/table2/trials/hopper_trpo/<trial folder> --iterations 20

One module per verb (`train`, `compare`, `tune`, `evaluate`, `report`, `repeat`); `settings` builds configs
from options, `ray_session` starts Ray, `quiet` hides RLlib's known-harmless warnings. Bad
arguments or settings: one line on stderr and exit code 2, before Ray starts.
"""

from __future__ import annotations

import sys

from kappa_rllib.cli import compare, evaluate, quiet, repeat, report, train, tune
from kappa_rllib.cli.common import EXIT_INTERRUPTED, Parser, UsageError, bare_track, error
from kappa_rllib.cli.ray_session import resolve_address
from kappa_rllib.cli.settings import describe, make_config  # noqa: F401 (the Python API of the options)

VERBS = {"train": train, "compare": compare, "evaluate": evaluate, "tune": tune, "report": report, "repeat": repeat}


def build_parser():
    parser = Parser(
        prog="kappa-rllib", description="Multi-step greedy RL on Ray RLlib. `kappa-rllib VERB --help` for each verb.",
        epilog="examples: kappa-rllib tune tune_configs/small/cartpole_dqn.py --report | "
               "ray job submit -- kappa-rllib tune /opt/kappa-rllib/tune_configs/paper/mujoco_table2.py "
               "--storage s3://BUCKET/kappa --resume (on a cluster, cluster/README.md)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for verb in VERBS.values():
        verb.add_parser(sub)
    for verb_parser in sub.choices.values():
        verb_parser.add_argument("--verbose", action="store_true",
                                 help="show everything: RLlib's and Ray's known-harmless warnings and, for "
                                      "`tune`, Tune's own progress output")
    return parser


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(bare_track(sys.argv[1:] if argv is None else list(argv)))
    except UsageError as e:
        return error(e)
    if args.verbose:
        quiet.show_all_warnings()
    else:
        quiet.hide_known_warnings()
    try:
        resolve_address(args)
        return VERBS[args.command].main(args)
    except UsageError as e:
        return error(e)


def run() -> int:
    """The console entry point: a second Ctrl-C (abort) ends with one line, not a traceback."""
    try:
        return main()
    except KeyboardInterrupt:
        print("kappa-rllib: aborted (no checkpoint written for the current iteration)", file=sys.stderr)
        return EXIT_INTERRUPTED
