"""`kappa-rllib train`: one algorithm into a run folder (kappa_rllib.runs); `train file CONFIG.py`
(RLlib's former `rllib train file`); `train --resume RUN_DIR` after Ctrl-C or a crash."""

from __future__ import annotations

import sys
from pathlib import Path

from kappa_rllib import runs
from kappa_rllib.cli.common import (ALGORITHMS, EXIT_INTERRUPTED, UsageError, add_track_options, check_output, check_track,
                                    one_line)
from kappa_rllib.cli.ray_session import check_address, start_ray
from kappa_rllib.cli.settings import ALGO_NAMES, add_run_arguments, describe, make_config


def add_parser(sub) -> None:
    train = sub.add_parser(
        "train", help="train one algorithm (or `train file CONFIG.py`, as RLlib's former `rllib train file`)",
        epilog="examples: kappa-rllib train --algo kappa-pi-dqn --env CartPole-v1 --total-steps 50000 | "
               "kappa-rllib train file my_config.py | kappa-rllib train --resume results/<run folder>")
    train.add_argument("target", nargs="*", metavar="file CONFIG.py",
                       help="`file PATH`: run a Python file defining `config` (an AlgorithmConfig without grid "
                            "axes) and optionally `stop` (Tune-style, e.g. {'training_iteration': 20})")
    train.add_argument("--algo", choices=ALGORITHMS, help="the algorithm (required unless --resume or file)")
    train.add_argument("--resume", metavar="RUN_DIR", default=None,
                       help="continue a stopped `train` run from its newest complete checkpoint to its T "
                            "(the run's own settings; other options are ignored)")
    add_run_arguments(train)
    add_track_options(train)


def main(args) -> int:
    if args.resume:
        return resume_main(args)
    if args.target:
        return train_file_main(args)
    if not args.algo:
        raise UsageError("--algo is required (or --resume RUN_DIR)")
    return run_algorithms(args, [args.algo])[0]


def _run_dir(parent: str, algo: str, args, config) -> Path:
    """The run folder of one command-line run (kappa_rllib.runs.create)."""
    return runs.create(parent, algo, config, env=args.env, seed=args.seed)


def run_algorithms(args, algos: list[str]) -> tuple[int, list[dict]]:
    """Checks every algorithm's settings before Ray starts, then trains them one after another.
    Returns the exit code (130 once a run is interrupted: the rest do not start) and the summaries."""
    if not args.env:
        raise UsageError("--env is required, e.g. --env CartPole-v1")
    configs = [(algo, *make_config(algo, args)) for algo in algos]
    if args.dry_run:
        for algo, config, preset_path in configs:
            print(f"[{algo}] {describe(algo, config, args)}, preset {preset_path or 'none (algorithm defaults)'}")
        return 0, []
    try:
        check_track(args)
    except ValueError as e:
        raise UsageError(one_line(e)) from None
    check_output("--output", args.output)
    check_address(args)
    for algo, config, _ in configs:
        check_fits(args, f"--algo {algo}", config)
    start_ray(args, args.torch_threads)
    summaries = []
    for algo, config, preset_path in configs:
        out_dir = _run_dir(args.output, algo, args, config)
        print(f"[{algo}] {describe(algo, config, args)}, preset {preset_path or 'none (algorithm defaults)'}")
        print(f"[{algo}] writing to {out_dir.resolve()}")
        summary = runs.train(algo, config, out_dir, int(config.total_env_steps),
                             checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints,
                             track=args.track, track_project=args.track_project,
                             wandb_entity=args.wandb_entity, notice_waits=bool(args.address))
        summaries.append(summary)
        code = finish_message(algo, summary, out_dir.resolve())
        if code:
            return code, summaries
    return 0, summaries


def resume_main(args) -> int:
    """`kappa-rllib train --resume RUN_DIR`: the run's newest complete checkpoint, trained on to its T."""
    run_dir = Path(args.resume).expanduser().resolve()
    try:
        meta, checkpoint, _ = runs.resumable(run_dir)
    except runs.RunError as e:
        raise UsageError(f"--resume: {one_line(e)}") from None
    if checkpoint is None:
        print(f"[{meta['algo']}] {run_dir} is complete (T = {meta['total_env_steps']} env steps); nothing to do")
        return 0
    start_ray(args, args.torch_threads)
    summary = runs.resume(run_dir, checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints)
    return finish_message(meta["algo"], summary, run_dir)


def train_file_main(args) -> int:
    """`kappa-rllib train file CONFIG.py`: RLlib's former `rllib train file`."""
    from kappa_rllib import experiments
    from kappa_rllib.envs import display_id

    if len(args.target) != 2 or args.target[0] != "file":
        raise UsageError(f"unexpected arguments {' '.join(args.target)!r}; did you mean `train file CONFIG.py`?")
    path = Path(args.target[1])
    try:
        if not path.is_file():
            raise ValueError(f"config file {str(path)!r} does not exist or is not a file")
        module = experiments.load_module(path)
        config = getattr(module, "config", None)
        if config is None or not hasattr(config, "algo_class"):
            raise ValueError(f"{path}: defines no `config` (an RLlib AlgorithmConfig)")
        stop = dict(getattr(module, "stop", None) or experiments.SCHEDULE_STOP)
        axes = experiments.Grid(path.stem, config, stop).axes()
        if axes:
            raise ValueError(f"{path}: config has grid axes {sorted(axes)}; run grids with `kappa-rllib tune {path}`")
        config.validate()
        algo = ALGO_NAMES.get(config.algo_class.__name__)
        if algo is None:
            raise ValueError(f"{path}: {config.algo_class.__name__} is not one of this package's algorithms")
        if algo == "trpo" and config.lambda_ < 1.0:
            algo = "gae"
        check_track(args)  # before the output folder is made: a bad store writes nothing
        check_output("--output", args.output)
        check_address(args)
        check_fits(args, str(path), config)
    except (ValueError, TypeError, OSError) as e:
        raise UsageError(one_line(e)) from None
    start_ray(args, args.torch_threads)
    out_dir = runs.create(args.output, algo, config)
    print(f"[{algo}] {path}: env {display_id(config.env)}, T {config.total_env_steps} env steps, stop {stop}")
    print(f"[{algo}] writing to {out_dir.resolve()}")
    summary = runs.train(algo, config, out_dir, int(config.total_env_steps), stop=stop,
                         checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints,
                         track=args.track, track_project=args.track_project, wandb_entity=args.wandb_entity,
                         notice_waits=bool(args.address))
    return finish_message(algo, summary, out_dir.resolve())


def check_fits(args, label: str, config) -> None:
    """An embedded local Ray that cannot hold the run (its EnvRunners, learner, GPUs) would wait forever: one
    line, exit 2, before Ray starts (kappa_rllib.resources). A cluster may add nodes: `runs.train` says
    every minute what the run waits for instead."""
    from kappa_rllib import resources

    if args.address:
        return
    try:
        resources.check_embedded(label, config, args.num_cpus, in_driver=True)
    except ValueError as e:
        raise UsageError(one_line(e)) from None


def finish_message(algo: str, summary: dict, out_dir: Path) -> int:
    if summary["interrupted"]:
        print(f"kappa-rllib: [{algo}] stopped by {summary['interrupted']} at {summary['env_steps']} env steps; "
              f"checkpoint {summary['checkpoint']}; resume with: kappa-rllib train --resume {out_dir}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"[{algo}] done: final return {summary['final_return']:.1f}, checkpoint {summary['checkpoint']}")
    return 0

