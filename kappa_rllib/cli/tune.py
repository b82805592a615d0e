"""`kappa-rllib tune FILE`: an experiment file's grids (kappa x C_FA x seed ...) with Ray Tune."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kappa_rllib.cli import report as report_verb
from kappa_rllib.cli.common import (EXIT_INTERRUPTED, UsageError, add_track_options, check_output, check_track, error,
                                    gpu_share, one_line, positive_int)
from kappa_rllib.cli.ray_session import add_ray_options, check_address, check_local_gpus, start_ray
from kappa_rllib.tuning import retry
from kappa_rllib.tuning.retry import DEFAULT_MAX_FAILURES


def add_parser(sub) -> None:
    tune_p = sub.add_parser(
        "tune", help="run an experiment file's grids with Ray Tune",
        description="Runs the grids a tune_configs/ file defines (kappa x C_FA x seed ...) with Ray Tune, all its grids at "
                    "once so their trials fill the cluster: one compact view of the file (a line per grid) on the terminal (--verbose: Tune's own output), results "
                    "(result.json, progress.csv; TensorBoard's events with --tensorboard) under --storage, a checkpoint at the end of every trial (and every "
                    "--checkpoint-every iterations).",
        epilog="example: kappa-rllib tune tune_configs/small/cartpole_dqn.py --storage results/tune && "
               "kappa-rllib report results/tune/cartpole_dqn")
    tune_p.add_argument("file", help="a Python file defining experiments(smoke) (or config and stop)")
    tune_p.add_argument("--smoke", action="store_true", help="the file's ~1 minute version (2 kappa x 2 seeds, tiny T)")
    tune_p.add_argument("--storage", default="results/tune",
                        help="parent folder, or a bucket URI (s3://BUCKET/PATH, gs://...); results go to "
                             "STORAGE/<file name>[_smoke]/<grid>/. On a cluster it must be shared: an NFS mount at "
                             "the same path on every node, or a bucket (default: results/tune)")
    tune_p.add_argument("--resume", action="store_true",
                        help="continue a stopped run in the same --storage: unfinished and errored trials go on "
                             "from their last checkpoint, finished ones are kept; a grid with nothing stored yet "
                             "starts afresh (so a retried cluster job can always pass --resume)")
    tune_p.add_argument("--max-concurrent", type=positive_int, default=None,
                        help="trials at once over the whole file, all its grids together (default: as many as the CPUs "
                             "allow, one CPU per trial; with a ray:// address, per grid)")
    tune_p.add_argument("--checkpoint-every", type=int, default=None,
                        help="also checkpoint every N training iterations (default 0: only at the end; with "
                             "--resume, the trials' own setting from the run that started them)")
    tune_p.add_argument("--max-failures", type=int, default=DEFAULT_MAX_FAILURES,
                        help=f"restarts of a trial from its latest checkpoint after its node was lost (default "
                             f"{DEFAULT_MAX_FAILURES}; -1: unlimited); an error of the trial's own code is "
                             "retried once where the trial has one of its N left (never with 0), and stops it if it "
                             "comes back before a new checkpoint (docs/reliability.md, Faults)")
    add_track_options(tune_p)
    add_ray_options(tune_p)
    tune_p.add_argument("--grids", default=None,
                        help="comma-separated grid names: run only these of the file's grids (default: all)")
    tune_p.add_argument("--seeds", default=None,
                        help="seeds to run in place of each grid's seed axis: comma-separated, ranges allowed "
                             "(0-2 or 0,1,2; 5-9 runs five more seeds of a grid that ran 0-4, in another --storage: "
                             "a stored grid's seeds cannot change). With --resume, pass the same seeds")
    tune_p.add_argument("--report", action="store_true", help="run `report` on the results when the grids finish")
    tune_p.add_argument("--tensorboard", action="store_true",
                        help="also write TensorBoard's events for every trial (off by default: they cost the one "
                             "driver more CPU per report than everything else Tune writes; docs/experiments.md)")
    tune_p.add_argument("--torch-threads", type=positive_int, default=1, help="torch threads per trial")
    tune_p.add_argument("--gpus-per-trial", type=gpu_share, default=0.0,
                        help="GPUs for each trial's learner (RLlib's num_gpus_per_learner; a share such as 0.25 "
                             "packs 4 trials on a GPU); Ray places such trials on GPU nodes (cluster/). Default 0")


def _select(grids, names: str | None, file: str):
    if not names:
        return grids
    wanted = [g.strip() for g in names.split(",") if g.strip()]
    unknown = sorted(set(wanted) - {g.name for g in grids})
    if unknown:
        raise ValueError(f"--grids: {file} has no grid(s) {unknown}; it has {[g.name for g in grids]}")
    by_name = {g.name: g for g in grids}
    return [by_name[name] for name in dict.fromkeys(wanted)]  # in the order given


MAX_SEEDS = 10_000  # a typo's guard: 0-10000000000 would build the list before Tune refused it


def parse_seeds(text: str) -> list[int]:
    """`--seeds`: "0,1,2", "0-2" or "0-2,7" -> [0, 1, 2(, 7)], each once, in the order given."""
    seeds = []
    for part in (p.strip() for p in text.split(",")):
        first, dash, last = part.partition("-")
        try:
            lo, hi = int(first), int(last) if dash else int(first)
        except ValueError:
            raise ValueError(f"--seeds {text!r}: give seeds as 0,1,2 or a range 0-2 (integers >= 0)") from None
        if lo < 0 or hi < lo:
            raise ValueError(f"--seeds {text!r}: a range FIRST-LAST needs 0 <= FIRST <= LAST, got {part!r}")
        if hi - lo >= MAX_SEEDS:
            raise ValueError(f"--seeds {text!r}: {hi - lo + 1} seeds in {part!r}, more than {MAX_SEEDS} a grid")
        seeds += range(lo, hi + 1)
    return list(dict.fromkeys(seeds))


def _with_seeds(grids, seeds: list[int] | None):
    """Each grid's seed axis (or single seed) replaced by `seeds`: a grid of 5 seeds run as 3, or extended."""
    from ray import tune

    if seeds is not None:
        for grid in grids:
            grid.config.debugging(seed=seeds[0] if len(seeds) == 1 else tune.grid_search(seeds))
    return grids


def _check_storage(args) -> None:
    from kappa_rllib.tuning import storage as stores

    if stores.is_uri(args.storage):
        stores.check_uri("--storage", args.storage)
        return
    stores.check_not_mistyped("--storage", args.storage)  # a folder from here on (file:///PATH too)
    if _client(args):  # Tune's driver runs on the cluster's head: checked there once connected
        if not Path(stores.local_path(args.storage)).is_absolute():
            raise ValueError(f"--storage {args.storage!r}: with Ray Client give an absolute path on the "
                             "cluster (its shared volume, e.g. /mnt/results) or a bucket URI")
    else:
        check_output("--storage", stores.local_path(args.storage))


def _client(args) -> bool:
    """Ray Client (`--address ray://`): `--storage` is a path on the cluster, which this machine may not see."""
    return (args.address or "").startswith("ray://")


def _check_storage_on_cluster(storage: str) -> None:
    """Under Ray Client, the grids' folder can be made and written on the cluster (where Tune writes it)."""
    from kappa_rllib.tuning import storage as stores

    if not stores.is_uri(storage):
        stores.on_storage(check_output, "--storage", storage)


def _check_local_cpus(args, grids) -> None:
    """An embedded Ray that cannot hold one trial (its CPUs, GPUs) would leave every trial pending
    (kappa_rllib.resources); a cluster may add nodes on demand, and trials that wait say so every minute."""
    from kappa_rllib import resources

    if args.address:
        return
    for grid in grids:
        seen = set()
        for _, config in grid.trial_configs():
            key = (config.num_env_runners, config.num_cpus_per_env_runner, config.num_learners,
                   config.num_gpus_per_learner, config.num_cpus_for_main_process, repr(config.env),
                   repr(config.env_config),
                   repr(getattr(config, "replay_buffer_config", None)), getattr(config, "replay_frames_on_device", None))
            if key not in seen:  # the trials' resource settings (and what sizes a replay ring on a GPU), each once
                seen.add(key)
                resources.check_embedded(f"grid {grid.name!r}: a trial", config, args.num_cpus,
                                         lower="set .env_runners(num_env_runners=...) lower in the file")


def _drop_empty_tuner_files(storage, grids) -> None:
    """The empty `tuner.pkl` a full disk leaves in a grid's (local) folder as Tune sets the grid up: Tune would
    take it for a run to restore, and fail to read it."""
    from kappa_rllib.tuning import storage as stores

    if stores.is_uri(storage):
        return
    for grid in grids:
        path = Path(storage) / grid.name / "tuner.pkl"
        try:
            if path.is_file() and path.stat().st_size == 0:
                path.unlink()
        except OSError:
            pass


def main(args) -> int:
    """Every grid of the file, validated before Ray starts."""
    from kappa_rllib import experiments
    from kappa_rllib.tuning import checks, driver, failures
    from kappa_rllib.tuning import storage as stores

    try:
        grids = _select(experiments.load_file(args.file, smoke=args.smoke), args.grids, args.file)
        _with_seeds(grids, parse_seeds(args.seeds) if args.seeds is not None else None)
        for grid in grids:
            grid.validate()
        if args.checkpoint_every is not None and args.checkpoint_every < 0:
            raise ValueError(f"--checkpoint-every must be >= 0, got {args.checkpoint_every}")
        if args.max_failures < -1:
            raise ValueError(f"--max-failures must be >= 0, or -1 for unlimited, got {args.max_failures}")
        if args.gpus_per_trial:
            check_local_gpus(args)
            experiments.request_gpus(grids, args.gpus_per_trial)
        check_track(args)  # before the storage folder is made: a bad store writes nothing
        _check_storage(args)
        check_address(args)
        _check_local_cpus(args, grids)
    except (ValueError, TypeError, OSError, UsageError) as e:
        return error(one_line(e))
    # (under Ray Client a path on the cluster: this machine's links are not followed)
    storage = stores.join(args.storage, Path(args.file).stem + ("_smoke" if args.smoke else ""),
                          resolve=not _client(args))
    if _client(args):  # the storage is on the cluster: checked there, once connected
        start_ray(args, args.torch_threads)  # a UsageError reaches main()
    try:  # before any grid writes a file (kappa_rllib.tuning.driver); but for Ray Client, before Ray starts
        if _client(args):
            _check_storage_on_cluster(storage)
        (checks.check_resume if args.resume else checks.check_fresh)(grids, storage)
    except (ValueError, OSError, UsageError) as e:
        return error(one_line(e))
    total = sum(g.num_trials() for g in grids)
    print(f"[tune] {args.file}: {len(grids)} grid(s), {total} trials -> {storage}")
    for grid in grids:
        axes = ", ".join(f"{k} {v}" for k, v in grid.axes().items())
        print(f"[tune]   {grid.name}: {grid.num_trials()} trials ({axes})")
    if not _client(args):
        start_ray(args, args.torch_threads)  # a UsageError reaches main()
    try:
        results = driver.run(grids, storage, resume=args.resume, max_concurrent=args.max_concurrent,
                                  checkpoint_every=args.checkpoint_every, max_failures=args.max_failures,
                                  compact=not args.verbose, track=args.track, track_project=args.track_project,
                                  wandb_entity=args.wandb_entity, notice_waits=bool(args.address),
                                  tensorboard=args.tensorboard)
    except ValueError as e:
        return error(one_line(e))
    except OSError as e:  # a full disk, a folder that went away, a cluster-side storage error: one line, no traceback
        _drop_empty_tuner_files(storage, grids)
        return error(f"{one_line(e)}: the storage {storage} could not be written; fix it, then "
                     f"{'' if args.resume else 'start again, or '}resume with: {_resume_command(args)}")
    except failures.GridFailed as e:  # a grid's Tune run raised: the others stopped, each saved its state
        print(f"kappa-rllib: error: {e}; resume with: {_resume_command(args)}", file=sys.stderr)
        return 1
    failed = [f for rg in results.values() for f in failures.failures(rg)]
    errors = len(failed)
    resume = _resume_command(args)
    for result, exc in failed:  # one line each; the whole traceback is in the trial's error.txt
        print(f"[tune] failed: {result.path}: {retry.failure_line(exc)}", file=sys.stderr)
    if any(retry.disk_full(e) for _, e in failed):
        print(f"[tune] the disk under {storage} is full (No space left on device): free space there, then "
              f"`{resume}` goes on from each trial's last complete checkpoint", file=sys.stderr)
    # trials neither ended nor failed: those of an interrupted grid, and every trial of the grids after it
    left = total - sum(len(rg) - failures.unfinished(rg) for rg in results.values())
    if left > 0:  # say so, and how to go on (and no report of a partial grid)
        print(f"[tune] stopped: {total - left - errors}/{total} trials finished, {errors} failed, {left} not run "
              f"to their end; resume with: {resume}", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"[tune] finished: {total - errors}/{total} trials without error; results in {storage}")
    if args.report and _client(args) and not stores.is_uri(storage):
        # the results are on the cluster, which this machine may not see: their result files copied here first
        out = Path(Path(storage).name + "_report")
        try:
            stores.mirror_from_cluster(storage, out / "results")
        except (ValueError, OSError) as e:
            return error(one_line(e))
        print(f"[tune] the results are on the cluster: their result files copied into {out / 'results'}")
        return report_verb.main_with_defaults(out / "results", out=out)
    if args.report:
        return report_verb.main_with_defaults(storage)
    if _client(args) and not stores.is_uri(storage):  # a path on the cluster: read there, or copied here
        print(f"[tune] tables and plots: `kappa-rllib report {storage}` on the cluster, or here: "
              f"{_resume_command(args)} --report (runs nothing, copies the result files and reports)")
    else:
        print(f"[tune] tables and plots: kappa-rllib report {storage}")
    return 1 if errors else 0


def _resume_command(args) -> str:
    """This run's command with --resume: every setting it was given kept (tracking, the cap, retries,
    checkpoints, the cluster, resources, the report), so a line copied from the terminal goes on as it ran."""
    import shlex

    track = ",".join(args.track) if isinstance(args.track, list) else args.track
    given = [("--smoke", args.smoke), ("--grids", args.grids), ("--seeds", args.seeds),
             ("--max-concurrent", args.max_concurrent),
             ("--checkpoint-every", args.checkpoint_every),
             ("--max-failures", None if args.max_failures == DEFAULT_MAX_FAILURES else args.max_failures),
             ("--track", track or None), ("--track-project", args.track_project if track else None),
             ("--wandb-entity", args.wandb_entity if track and "wandb" in track else None),
             ("--address", args.address), ("--num-cpus", args.num_cpus),
             ("--torch-threads", None if args.torch_threads == 1 else args.torch_threads),
             ("--gpus-per-trial", args.gpus_per_trial or None), ("--tensorboard", args.tensorboard),
             ("--report", args.report), ("--verbose", getattr(args, "verbose", False))]
    words = ["kappa-rllib tune", shlex.quote(args.file), "--storage", shlex.quote(str(args.storage)), "--resume"]
    for option, value in given:
        if value is True:
            words.append(option)
        elif value is not None and value is not False:  # (0 is a value: --max-failures 0)
            words += [option, shlex.quote(str(value))]
    return " ".join(words)
