"""`kappa-rllib`: an RLlib-style command line (RLlib 2.60 ships none).

    kappa-rllib train --algo kappa-pi-dqn --env CartPole-v1 --kappa 0.84 --c-fa 0.05 \
        --total-steps 50000 --seed 0
    kappa-rllib compare --algos kappa-pi-dqn,dqn --env CartPole-v1 --total-steps 50000
    kappa-rllib train --algo kappa-pi-trpo --env Hopper-v5 --kappa 0.84 --c-fa 0.2 --total-steps 2000000
    kappa-rllib train --algo gae --lambda 0.84 --env Hopper-v5 --total-steps 2000000

Runs on an embedded local Ray unless `--address` is given, prints one progress line per
training iteration, and writes `progress.csv`, `result.json` (one JSON result per line) and a
final checkpoint to the output folder it prints. Bad arguments or settings: one line on
stderr and exit code 2, before Ray starts.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import os
import signal
import socket
import sys
import time
import uuid
from pathlib import Path

from kappa_rllib import defaults
from kappa_rllib.variant import PHI_FITS

DQN_FAMILY = ("kappa-pi-dqn", "kappa-vi-dqn", "dqn")
TRPO_FAMILY = ("kappa-pi-trpo", "kappa-vi-trpo", "trpo", "gae")
ALGORITHMS = DQN_FAMILY + TRPO_FAMILY
KAPPA_ALGORITHMS = ("kappa-pi-dqn", "kappa-vi-dqn", "kappa-pi-trpo", "kappa-vi-trpo")
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # stopped by SIGINT / SIGTERM (after writing a checkpoint)


class UsageError(Exception):
    """A bad argument or setting: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage + error; we print one line
        raise UsageError(message)


def _probability(name):
    def parse(text):
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{name} must be a number, got {text!r}") from None

    return parse


def _int_at_least(minimum: int, what: str):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_non_negative_int = _int_at_least(0, "an integer >= 0")


def _gpu_share(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GPUs >= 0, got {text!r}") from None
    if not value >= 0 or (value > 1 and not value.is_integer()):
        raise argparse.ArgumentTypeError(f"expected a number of GPUs: a share in [0, 1] or a whole number, got {text!r}")
    return value


ADDRESS_HELP = (
    "the Ray cluster to run on: auto (the cluster `ray start` runs on this machine), HOST:6379 (the head's GCS, "
    "from inside the cluster) or ray://HOST:10001 (Ray Client, over grpcio, from outside it); default: "
    "$RAY_ADDRESS if set (as in a `ray job submit` entrypoint), else an embedded local Ray")


def _add_ray_options(parser) -> None:
    """--address and --num-cpus, the same on every verb that runs Ray."""
    parser.add_argument("--address", default=None, help=ADDRESS_HELP)
    parser.add_argument("--num-cpus", type=_positive_int, default=None,
                        help="CPUs for the embedded local Ray (default: all); ignored with a cluster address")


def _family_defaults(key: str, fmt=str) -> str:
    return f"DQN family {fmt(defaults.DQN[key])}, TRPO family {fmt(defaults.TRPO[key])}"


def _add_run_arguments(p):
    p.add_argument("--env", help="gymnasium id, e.g. CartPole-v1 or ALE/Breakout-v5 (required)")
    p.add_argument("--kappa", type=_probability("kappa"), default=None,
                   help=f"kappa in [0, 1] (kappa-* algorithms); default: {_family_defaults('kappa')}")
    p.add_argument("--lambda", dest="lambda_", type=_probability("lambda"), default=None,
                   help="GAE lambda in [0, 1] (required by --algo gae)")
    p.add_argument("--c-fa", type=_probability("c-fa"), default=None,
                   help=f"C_FA in (0, 1): sets N_kappa; default: {_family_defaults('c_fa')} (the paper's)")
    p.add_argument("--total-steps", type=_positive_int, default=None,
                   help=f"T, total env steps; default: the env preset's (CartPole: 50,000), else the paper's: "
                        f"{_family_defaults('total_env_steps', lambda v: f'{v:,}')}")
    p.add_argument("--naive-schedule", action="store_true", help="N_kappa = T (paper's naive baseline)")
    p.add_argument("--phi-fit", choices=PHI_FITS, default=None,
                   help="kappa-pi-trpo: fit V_phi on every batch (default, the authors' code) or once per "
                        "kappa-iteration (Alg. 7 read literally)")
    p.add_argument("--dry-run", action="store_true",
                   help="check the settings, print the resolved schedule (N_kappa, T_kappa) and exit; Ray is not started")
    p.add_argument("--seed", type=_non_negative_int, default=0)
    p.add_argument("--config", help="YAML preset (sections training/rl_module/env_runners); "
                   "default: the packaged preset for the env, if any")
    p.add_argument("--gamma", type=_probability("gamma"), default=None)
    p.add_argument("--num-env-runners", type=_non_negative_int, default=0,
                   help="remote EnvRunners (0: sample in the driver)")
    _add_ray_options(p)
    p.add_argument("--output", default="results", help="parent folder of the run folder")
    p.add_argument("--checkpoint-every", type=_non_negative_int, default=10,
                   help="write a checkpoint every N training iterations (atomically; 0: only at the end); default 10")
    p.add_argument("--keep-checkpoints", type=_positive_int, default=2,
                   help="how many of the newest checkpoints to keep (default 2)")
    p.add_argument("--torch-threads", type=_positive_int, default=1,
                   help="torch intra-op threads in the driver (1 is fastest for small nets on few cores)")


def build_parser():
    parser = _Parser(
        prog="kappa-rllib", description="Multi-step greedy RL on Ray RLlib. `kappa-rllib VERB --help` for each verb.",
        epilog="examples: kappa-rllib tune tune_configs/small/cartpole_dqn.py --report | "
               "ray job submit -- kappa-rllib tune /opt/kappa-rllib/tune_configs/paper/mujoco_table2.py "
               "--storage s3://BUCKET/kappa --resume (on a cluster, cluster/README.md)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
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
    _add_run_arguments(train)
    compare = sub.add_parser(
        "compare", help="train several algorithms one after another, print a table",
        epilog="example: kappa-rllib compare --algos kappa-pi-dqn,dqn --env CartPole-v1 --total-steps 50000")
    compare.add_argument("--algos", default="kappa-pi-dqn,dqn",
                         help=f"comma-separated, from {', '.join(ALGORITHMS)}")
    _add_run_arguments(compare)

    evaluate = sub.add_parser(
        "evaluate", help="run the greedy policy of a saved algorithm and print per-episode raw returns",
        description="Restores a checkpoint (a checkpoint folder or a `train` run folder: its newest complete "
                    "checkpoint), runs N episodes with the greedy policy (argmax Q for kappa-DQN, the mean "
                    "action for TRPO) and prints each episode's raw return and their mean.",
        epilog="example: kappa-rllib evaluate results/<run folder> --episodes 10 --render rgb_array --video videos/")
    evaluate.add_argument("checkpoint", help="a checkpoint folder or a `kappa-rllib train` run folder")
    evaluate.add_argument("--episodes", type=_positive_int, default=10, help="episodes to run (default 10)")
    evaluate.add_argument("--seed", type=_non_negative_int, default=0, help="episode i resets with seed + i")
    evaluate.add_argument("--render", choices=["rgb_array"], default=None, help="render frames (for --video)")
    evaluate.add_argument("--video", default=None, help="write one MP4 per episode into this folder (needs --render)")
    _add_ray_options(evaluate)

    tune_p = sub.add_parser(
        "tune", help="run an experiment file's grids with Ray Tune",
        description="Runs the grids a tune_configs/ file defines (kappa x C_FA x seed ...) with Ray Tune: Tune's "
                    "progress table on the terminal, results and TensorBoard logs under --storage, a checkpoint "
                    "at the end of every trial (and every --checkpoint-every iterations).",
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
    tune_p.add_argument("--max-concurrent", type=_positive_int, default=None,
                        help="trials at once (default: as many as the CPUs allow, one CPU per trial)")
    tune_p.add_argument("--checkpoint-every", type=int, default=0,
                        help="also checkpoint every N training iterations (default 0: only at the end)")
    _add_ray_options(tune_p)
    tune_p.add_argument("--grids", default=None,
                        help="comma-separated grid names: run only these of the file's grids, in this order (default: all)")
    tune_p.add_argument("--report", action="store_true", help="run `report` on the results when the grids finish")
    tune_p.add_argument("--torch-threads", type=_positive_int, default=1, help="torch threads per trial")
    tune_p.add_argument("--gpus-per-trial", type=_gpu_share, default=0.0,
                        help="GPUs for each trial's learner (RLlib's num_gpus_per_learner; a share such as 0.25 "
                             "packs 4 trials on a GPU); Ray places such trials on GPU nodes (cluster/). Default 0")

    report_p = sub.add_parser(
        "report", help="tables (md/csv/tex), IQM, curves and heat-maps from Tune results",
        description="Reads the Tune results under a folder (no re-running) and writes table.md/.csv/.tex (the paper's "
                    "Table 1/2 columns with 95%% CIs, the paper's numbers beside), iqm.md/.csv (rliable), "
                    "curves_*.png, heatmap_*.png and scores.csv.",
        epilog="example: kappa-rllib report results/tune/cartpole_dqn --out results/tune/cartpole_dqn/report")
    report_p.add_argument("folder", help="an experiment folder written by `kappa-rllib tune` (any Tune results), "
                          "or its bucket URI (s3://BUCKET/PATH/<file name>: the result files are mirrored to "
                          "OUT/results, checkpoints are not read)")
    report_p.add_argument("--out", default=None, help="output folder (default: FOLDER/report; for a URI "
                          "./<name>_report)")
    report_p.add_argument("--include-unfinished", action="store_true",
                          help="also score trials that have not reached their T (running, stopped or failed)")
    report_p.add_argument("--bootstrap-reps", type=_positive_int, default=2000,
                          help="stratified-bootstrap repetitions for the IQM CIs (default 2000)")
    return parser


def _config_class(algo: str):
    import kappa_rllib as k

    return {
        "kappa-pi-dqn": k.KappaPIDQNConfig, "kappa-vi-dqn": k.KappaVIDQNConfig, "dqn": k.KappaPIDQNConfig,
        "kappa-pi-trpo": k.KappaPITRPOConfig, "kappa-vi-trpo": k.KappaVITRPOConfig,
        "trpo": k.TRPOConfig, "gae": k.TRPOConfig,
    }[algo]


def make_config(algo: str, args):
    """The validated AlgorithmConfig for one run; raises UsageError on bad settings.

    dqn is kappa-PI-DQN with kappa = 1 (exactly DQN); trpo is TRPO with lambda = 1 (the paper's
    kappa = 1 baseline); gae is TRPO with GAE(gamma, lambda) advantages.
    """
    from kappa_rllib import envs, presets

    if algo not in ALGORITHMS:
        raise UsageError(f"unknown --algo {algo!r}; choose from {', '.join(ALGORITHMS)}")
    if algo == "gae" and args.lambda_ is None:
        raise UsageError("--algo gae needs --lambda (e.g. --lambda 0.84)")
    if args.command == "train" and algo != "gae" and args.lambda_ is not None:
        raise UsageError(f"--lambda applies to --algo gae only, not {algo}")
    try:
        envs.check_env_id(args.env)
    except ValueError as e:
        raise UsageError(f"--env: {e}") from None
    config = _config_class(algo)()
    family = "dqn" if algo in DQN_FAMILY else "trpo"
    preset_path = args.config or presets.preset_for(args.env, family)
    try:
        if preset_path:
            presets.apply(config, presets.load(preset_path))
        config.environment(args.env)
        if algo in KAPPA_ALGORITHMS or algo == "dqn":
            # An omitted flag leaves the algorithm's (or its env preset's) own default.
            config.training(kappa=1.0 if algo == "dqn" else args.kappa, c_fa=args.c_fa,
                            total_env_steps=args.total_steps, naive_schedule=args.naive_schedule or None)
        else:
            if args.naive_schedule:
                raise ValueError(f"--naive-schedule applies to kappa algorithms, not {algo}")
            config.training(total_env_steps=args.total_steps)
        if args.phi_fit is not None:
            if algo != "kappa-pi-trpo":
                raise ValueError(f"--phi-fit applies to --algo kappa-pi-trpo only, not {algo}")
            config.training(phi_fit=args.phi_fit)
        if algo == "gae":
            config.training(lambda_=args.lambda_)
        if args.gamma is not None:
            config.training(gamma=args.gamma)
        config.env_runners(num_env_runners=args.num_env_runners)
        config.debugging(seed=args.seed)
        config.validate()
    except (ValueError, TypeError, OSError) as e:
        raise UsageError(_one_line(e)) from None
    return config, preset_path


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())


def describe(algo: str, config, args) -> str:
    """The resolved schedule of one run, as printed before it starts (and by --dry-run)."""
    if hasattr(config, "kappa"):
        unit = "batches" if config.schedule_length != config.total_env_steps else "env steps"
        n = config.num_kappa_iterations
        schedule = (f"kappa {config.kappa}, C_FA {config.c_fa}, N_kappa {n}, "
                    f"T_kappa {config.schedule_length // n} {unit}, ")
        if getattr(config, "kappa_variant", "") == "pi" and hasattr(config, "phi_fit"):
            schedule += f"phi_fit {config.phi_fit}, "
    else:
        schedule = f"lambda {config.lambda_}, "
    return f"env {args.env}, {schedule}gamma {config.gamma}, T {config.total_env_steps} env steps"


def _run_dir(parent: str, algo: str, args, config) -> Path:
    """A new run folder, named by every setting that tells runs apart and a short unique suffix
    (two runs started in the same second never collide); the full config goes to params.json."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if algo in KAPPA_ALGORITHMS:
        tag = f"k{config.kappa}_c{config.c_fa}" + ("_naive" if config.naive_schedule else "")
    else:
        tag = f"lam{args.lambda_}" if algo == "gae" else "k1.0"
    name = f"{algo}_{args.env.replace('/', '-')}_{tag}_g{config.gamma}_s{args.seed}_{stamp}_{uuid.uuid4().hex[:6]}"
    path = Path(parent) / name
    path.mkdir(parents=True, exist_ok=False)
    with open(path / "params.json", "w") as f:
        json.dump(_jsonable(config.to_dict()), f, indent=1, sort_keys=True)
    _update_run_meta(path, algo=algo, env=args.env, total_env_steps=int(config.total_env_steps), finished=False,
                     command=sys.argv[1:])
    return path


PROGRESS_COLUMNS = [
    "training_iteration", "env_steps", "episode_return_mean", "kappa_iteration",
    "kappa_num_iterations", "kappa_phase", "env_steps_per_s", "time_total_s",
]


def _row(result, started, steps_at_start: int = 0) -> dict:
    kappa, runners = result.get("kappa", {}), result.get("env_runners", {})
    elapsed = time.time() - started
    env_steps = int(runners.get("num_env_steps_sampled_lifetime", 0))
    return {
        "training_iteration": result["training_iteration"],
        "env_steps": env_steps,
        "episode_return_mean": runners.get("episode_return_mean", float("nan")),
        "kappa_iteration": kappa.get("iteration", "-"),
        "kappa_num_iterations": kappa.get("num_iterations", "-"),
        "kappa_phase": kappa.get("phase", "-"),
        "env_steps_per_s": (env_steps - steps_at_start) / elapsed if elapsed > 0 else float("nan"),
        "time_total_s": elapsed,
    }


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    try:
        return float(obj)
    except (TypeError, ValueError):
        return str(obj)


class _StopOnSignal:
    """SIGINT (Ctrl-C) or SIGTERM asks the run to stop after the current training iteration, so
    the checkpoint holds a whole iteration; a second signal aborts at once."""

    def __init__(self):
        self.received = None

    def _handle(self, signum, frame):
        if self.received is not None:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name
        print(f"kappa-rllib: {self.received}: stopping after this iteration to write a checkpoint "
              "(again to abort without one)", file=sys.stderr, flush=True)

    def __enter__(self):
        self._old = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        return False


def _trim_logs(out_dir: Path, last_iteration: int) -> None:
    """Drops the rows a crash left after the checkpoint being resumed from (they are re-run)."""
    result_file, progress_file = out_dir / "result.json", out_dir / "progress.csv"
    if result_file.exists():
        kept = []
        for line in result_file.read_text().splitlines():
            try:
                if json.loads(line).get("training_iteration", 0) <= last_iteration:
                    kept.append(line)
            except json.JSONDecodeError:
                break  # a line torn by the crash, and nothing after it
        result_file.write_text("".join(k + "\n" for k in kept))
    if progress_file.exists():
        with open(progress_file, newline="") as f:
            rows = [r for r in csv.DictReader(f) if int(r["training_iteration"]) <= last_iteration]
        with open(progress_file, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=PROGRESS_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)


def run_one(algo: str, config, out_dir: Path, total_steps: int, log=print, *, algorithm=None,
            checkpoint_every: int = 10, keep_checkpoints: int = 2, stop: dict | None = None) -> dict:
    """Trains to the end of the kappa schedule (T env steps), or until SIGINT/SIGTERM; returns a
    summary. Checkpoints go to out_dir/checkpoints/ every `checkpoint_every` iterations, at the
    end and on a stop signal. `algorithm`: a restored one to continue (`train --resume`)."""
    from kappa_rllib import checkpoints

    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    resumed = algorithm is not None
    algorithm = algorithm or config.build_algo()
    steps_at_start = int(algorithm.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0))
    started = time.time()
    returns, row, checkpoint, signals = [], None, None, None
    mode = "a" if resumed else "w"
    try:
        with _StopOnSignal() as signals, open(out_dir / "progress.csv", mode, newline="") as f_csv, \
                open(out_dir / "result.json", mode) as f_json:
            writer = csv.DictWriter(f_csv, fieldnames=PROGRESS_COLUMNS)
            if not resumed:
                writer.writeheader()
            while not signals.received:
                result = algorithm.train()
                row = _row(result, started, steps_at_start)
                writer.writerow(row)
                f_csv.flush()
                f_json.write(json.dumps(_jsonable(result)) + "\n")
                f_json.flush()
                if not math.isnan(row["episode_return_mean"]):
                    returns.append(row["episode_return_mean"])
                log(
                    f"[{algo}] steps {row['env_steps']:>8d}/{total_steps}  "
                    f"return {row['episode_return_mean']:8.1f}  "
                    f"kappa-iter {row['kappa_iteration']}/{row['kappa_num_iterations']} "
                    f"({row['kappa_phase']})  {row['env_steps_per_s']:6.0f} steps/s"
                )
                finished = bool(result.get("done")) or row["env_steps"] >= total_steps or (
                    bool(stop) and _stop_reached(result, stop))
                if finished:
                    break
                if checkpoint_every and result["training_iteration"] % checkpoint_every == 0:
                    checkpoint = checkpoints.save_atomic(algorithm, out_dir / "checkpoints", keep_checkpoints)
            else:
                finished = False
            if row is not None or resumed:
                checkpoint = checkpoints.save_atomic(algorithm, out_dir / "checkpoints", keep_checkpoints)
    finally:
        algorithm.stop()
    _update_run_meta(out_dir, finished=finished)
    env_steps = row["env_steps"] if row else 0
    return {
        "algo": algo,
        "kappa": getattr(config, "kappa", 1.0),
        "num_iterations": getattr(config, "num_kappa_iterations", 1),
        "env_steps": env_steps,
        "final_return": returns[-1] if returns else float("nan"),
        "best_return": max(returns) if returns else float("nan"),
        "env_steps_per_s": row["env_steps_per_s"] if row else float("nan"),
        "wall_s": time.time() - started,
        "output": str(out_dir),
        "checkpoint": str(checkpoint) if checkpoint else None,
        "interrupted": None if finished else (signals.received or "stopped"),
    }


RUN_META = "run.json"


def _update_run_meta(out_dir: Path, **fields) -> None:
    path = out_dir / RUN_META
    meta = json.loads(path.read_text()) if path.exists() else {}
    meta.update(fields)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, path)


def _check_local_gpus(args) -> None:
    """An embedded Ray only has this machine's GPUs: asking for more would leave every trial pending."""
    if args.address:
        return  # a cluster's GPU nodes may not be up yet (the autoscaler starts them on demand)
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"--gpus-per-trial {args.gpus_per_trial:g}: this machine has no CUDA GPU; run on a "
                         "cluster with GPU nodes (--address, cluster/README.md)")


def _resolve_address(args) -> None:
    """No --address: $RAY_ADDRESS if set (a `ray job submit` entrypoint runs with it), else embedded Ray."""
    args.address_option = "--address"
    if getattr(args, "address", None) is None and os.environ.get("RAY_ADDRESS"):
        args.address, args.address_option = os.environ["RAY_ADDRESS"], "RAY_ADDRESS"


def _check_address(args) -> None:
    """An unreachable cluster address is answered at once, not by Ray's endless retries."""
    address, option = args.address, args.address_option
    if address in (None, "auto", "local"):
        return
    if address.startswith(("http://", "https://")):
        raise UsageError(f"{option} {address!r} is a dashboard (Jobs API) URL: `ray job submit` takes it (through "
                         "RAY_API_SERVER_ADDRESS); training takes auto, HOST:PORT or ray://HOST:PORT")
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"{option} {address!r}: expected auto, HOST:PORT (e.g. 10.0.0.5:6379) or "
                         "ray://HOST:PORT (Ray Client, e.g. ray://10.0.0.5:10001)")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise UsageError(f"{option} {address}: nothing answers at {host}:{port} ({e.strerror or e}; one TCP "
                         "connection tried, 5 s timeout); is the cluster up (`ray start --head`)?") from None


def _check_output(option: str, folder) -> None:
    """The output folder can be created and written, checked before Ray starts."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{option} {str(folder)!r}: cannot create the folder ({e.strerror or e})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {str(folder)!r}: the folder is not writable")


def _start_ray(args, torch_threads: int) -> None:
    """The driver's torch threads, then Ray: embedded, or the cluster at args.address."""
    import torch

    torch.set_num_threads(torch_threads)
    _init_ray(args)


def _init_ray(args):
    import ray

    try:
        if args.address and args.address.startswith("ray://"):
            _connect_ray_client(ray, args.address)
        elif args.address:
            ray.init(address=args.address, log_to_driver=False)
        else:
            # Ray's own processes start with SIGINT ignored, so Ctrl-C reaches only this driver,
            # which then checkpoints with its Ray intact.
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
            finally:
                signal.signal(signal.SIGINT, previous)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as e:
        raise UsageError(f"{args.address_option} {args.address}: could not connect ({_one_line(e)})") from None


def _connect_ray_client(ray, address: str, attempts: int = 3) -> None:
    """Ray Client: the head's proxy starts one server process per client, and a first start right
    after the cluster comes up sometimes fails ("Starting Ray client server failed"); try again."""
    for attempt in range(1, attempts + 1):
        try:
            ray.init(address=address, log_to_driver=False)
            return
        except ConnectionError as e:
            if "Starting Ray client server failed" not in str(e) or attempt == attempts:
                raise
            ray.shutdown()
            print(f"[ray] {address}: the cluster's Ray Client server failed to start; retrying "
                  f"({attempt}/{attempts - 1})", file=sys.stderr)


def _summary_table(summaries) -> str:
    header = f"{'algo':<14}{'kappa':>7}{'N_kappa':>9}{'env steps':>11}{'final return':>14}{'best return':>13}{'steps/s':>9}"
    lines = [header, "-" * len(header)]
    for s in summaries:
        lines.append(
            f"{s['algo']:<14}{s['kappa']:>7.2f}{s['num_iterations']:>9d}{s['env_steps']:>11d}"
            f"{s['final_return']:>14.1f}{s['best_return']:>13.1f}{s['env_steps_per_s']:>9.0f}"
        )
    return "\n".join(lines)


def _error(message) -> int:
    print(f"kappa-rllib: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def tune_main(args) -> int:
    """`kappa-rllib tune FILE`: every grid of the file, validated before Ray starts."""
    from kappa_rllib import experiments
    from kappa_rllib import storage as stores

    try:
        grids = experiments.load_file(args.file, smoke=args.smoke)
        if args.grids:
            wanted = [g.strip() for g in args.grids.split(",") if g.strip()]
            unknown = sorted(set(wanted) - {g.name for g in grids})
            if unknown:
                raise ValueError(f"--grids: {args.file} has no grid(s) {unknown}; it has {[g.name for g in grids]}")
            by_name = {g.name: g for g in grids}
            grids = [by_name[name] for name in dict.fromkeys(wanted)]  # in the order given
        for grid in grids:
            grid.validate()
        if args.checkpoint_every < 0:
            raise ValueError(f"--checkpoint-every must be >= 0, got {args.checkpoint_every}")
        if args.gpus_per_trial:
            _check_local_gpus(args)
            experiments.request_gpus(grids, args.gpus_per_trial)
        if stores.is_uri(args.storage):
            stores.check_uri("--storage", args.storage)
        elif (args.address or "").startswith("ray://"):  # Tune's driver runs on the cluster's head
            if not Path(args.storage).is_absolute():
                raise ValueError(f"--storage {args.storage!r}: with Ray Client give an absolute path on the "
                                 "cluster (its shared volume, e.g. /mnt/results) or a bucket URI")
        else:
            _check_output("--storage", args.storage)
        _check_address(args)
    except (ValueError, TypeError, OSError, UsageError) as e:
        return _error(_one_line(e))
    storage = stores.join(args.storage, Path(args.file).stem + ("_smoke" if args.smoke else ""))
    total = sum(g.num_trials() for g in grids)
    print(f"[tune] {args.file}: {len(grids)} grid(s), {total} trials -> {storage}")
    for grid in grids:
        axes = ", ".join(f"{k} {v}" for k, v in grid.axes().items())
        print(f"[tune]   {grid.name}: {grid.num_trials()} trials ({axes})")
    _start_ray(args, args.torch_threads)  # a UsageError reaches main()
    try:
        results = experiments.run(grids, storage, resume=args.resume, max_concurrent=args.max_concurrent,
                                  checkpoint_every=args.checkpoint_every)
    except ValueError as e:
        return _error(_one_line(e))
    errors = sum(1 for rg in results.values() for r in rg if r.error)
    print(f"[tune] finished: {total - errors}/{total} trials without error; results in {storage}")
    if args.report:
        return report_main(argparse.Namespace(folder=str(storage), out=None, bootstrap_reps=2000,
                                              include_unfinished=False))
    print(f"[tune] tables and plots: kappa-rllib report {storage}")
    return 1 if errors else 0


def report_main(args) -> int:
    from kappa_rllib import report

    try:
        paths = report.report(args.folder, args.out, reps=args.bootstrap_reps,
                              include_unfinished=args.include_unfinished)
    except (ValueError, OSError) as e:
        return _error(_one_line(e))
    table = next(p for p in paths if p.name == "table.md")
    print(table.read_text())
    print("[report] wrote:")
    for p in paths:
        print(f"  {p.resolve()}")
    return 0


def resume_main(args) -> int:
    """`kappa-rllib train --resume RUN_DIR`: the run's newest complete checkpoint, trained on to its T."""
    from kappa_rllib import checkpoints

    run_dir = Path(args.resume).expanduser().resolve()
    meta_file = run_dir / RUN_META
    try:
        if not meta_file.is_file():
            raise UsageError(f"--resume {args.resume!r}: not a `kappa-rllib train` run folder (no {RUN_META})")
        meta = json.loads(meta_file.read_text())
        if meta.get("finished"):
            print(f"[{meta['algo']}] {run_dir} is complete (T = {meta['total_env_steps']} env steps); nothing to do")
            return 0
        checkpoint = checkpoints.latest(run_dir)
        manifest = checkpoints.check(checkpoint)
    except (checkpoints.CheckpointError, json.JSONDecodeError, KeyError) as e:
        raise UsageError(f"--resume {args.resume!r}: {_one_line(e)}") from None
    from ray.rllib.algorithms.algorithm import Algorithm

    _start_ray(args, args.torch_threads)
    _trim_logs(run_dir, manifest["training_iteration"])
    print(f"[{meta['algo']}] resuming {run_dir} from {checkpoint.name} (iteration {manifest['training_iteration']}, "
          f"{manifest['env_steps']} env steps)")
    algorithm = Algorithm.from_checkpoint(str(checkpoint))
    summary = run_one(meta["algo"], algorithm.config, run_dir, meta["total_env_steps"], algorithm=algorithm,
                      checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints)
    return _finish_message(meta["algo"], summary, run_dir)


def evaluate_main(args) -> int:
    """`kappa-rllib evaluate CHECKPOINT`: greedy episodes of a restored algorithm, raw returns."""
    from kappa_rllib import checkpoints, envs

    try:
        if args.video and not args.render:
            raise UsageError("--video needs --render rgb_array")
        checkpoint = checkpoints.latest(args.checkpoint)
        if args.video:
            _check_output("--video", args.video)
        _check_address(args)
    except checkpoints.CheckpointError as e:
        raise UsageError(f"{args.checkpoint!r}: {_one_line(e)}") from None
    if args.render:
        os.environ.setdefault("MUJOCO_GL", "egl")  # MuJoCo renders headless
    import numpy as np
    from ray.rllib.algorithms.algorithm import Algorithm

    _start_ray(args, torch_threads=1)
    algorithm = Algorithm.from_checkpoint(str(checkpoint))
    try:
        env_id = str(algorithm.config.env).removeprefix("kappa_rllib:")
        env_config = dict(algorithm.config.env_config or {})
        if args.render:
            env_config["render_mode"] = args.render
        env = envs.make_env(env_id, env_config)
        runner = algorithm.env_runner  # the local EnvRunner: the restored policy's weights
        print(f"[evaluate] {checkpoint} ({type(algorithm).__name__} on {env_id}), {args.episodes} greedy episodes")
        returns = []
        for episode in range(args.episodes):
            obs, _ = env.reset(seed=args.seed + episode)
            total, length, frames, done = 0.0, 0, [], False
            while not done:
                _, env_actions, _ = runner._act([obs], explore=False, t=0)
                obs, reward, terminated, truncated, _ = env.step(env_actions[0])
                total, length, done = total + float(reward), length + 1, terminated or truncated
                if args.render:
                    frames.append(env.render())
            returns.append(total)
            line = f"episode {episode}: return {total:.1f} ({length} steps)"
            if args.video:
                line += f", video {_write_video(frames, Path(args.video) / f'episode_{episode:03d}.mp4')}"
            print(line)
        env.close()
    finally:
        algorithm.stop()
    r = np.asarray(returns)
    print(f"[evaluate] mean return {r.mean():.1f} +- {r.std():.1f} (std) over {len(r)} episodes; "
          f"min {r.min():.1f}, max {r.max():.1f}")
    return 0


def _write_video(frames, path: Path, fps: int = 30) -> Path:
    import cv2

    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    for frame in frames:
        writer.write(cv2.cvtColor(frame.astype("uint8"), cv2.COLOR_RGB2BGR))
    writer.release()
    return path


_ALGO_NAMES = {"KappaPIDQN": "kappa-pi-dqn", "KappaVIDQN": "kappa-vi-dqn", "KappaPITRPO": "kappa-pi-trpo",
               "KappaVITRPO": "kappa-vi-trpo", "TRPO": "trpo"}


def _stop_reached(result: dict, stop: dict) -> bool:
    """A Tune-style stop dict ({"training_iteration": 20, "env_runners/episode_return_mean": 450, ...})."""
    for key, limit in stop.items():
        value = result
        for part in key.split("/"):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and (value is True if limit is True else value >= limit):
            return True
    return False


def train_file_main(args) -> int:
    """`kappa-rllib train file CONFIG.py`: RLlib's former `rllib train file`."""
    from kappa_rllib import experiments

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
        stop = dict(getattr(module, "stop", None) or {"done": True})
        axes = experiments.Grid(path.stem, config, stop).axes()
        if axes:
            raise ValueError(f"{path}: config has grid axes {sorted(axes)}; run grids with `kappa-rllib tune {path}`")
        config.validate()
        algo = _ALGO_NAMES.get(config.algo_class.__name__)
        if algo is None:
            raise ValueError(f"{path}: {config.algo_class.__name__} is not one of this package's algorithms")
        if algo == "trpo" and config.lambda_ < 1.0:
            algo = "gae"
        _check_output("--output", args.output)
        _check_address(args)
    except (ValueError, TypeError, OSError) as e:
        raise UsageError(_one_line(e)) from None
    _start_ray(args, args.torch_threads)
    env = str(config.env).removeprefix("kappa_rllib:")
    naming = argparse.Namespace(env=env, seed=config.seed or 0, lambda_=getattr(config, "lambda_", 1.0))
    out_dir = _run_dir(args.output, algo, naming, config)
    print(f"[{algo}] {path}: env {env}, T {config.total_env_steps} env steps, stop {stop}")
    print(f"[{algo}] writing to {out_dir.resolve()}")
    summary = run_one(algo, config, out_dir, int(config.total_env_steps), stop=stop,
                      checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints)
    return _finish_message(algo, summary, out_dir.resolve())


def _finish_message(algo: str, summary: dict, out_dir: Path) -> int:
    if summary["interrupted"]:
        print(f"kappa-rllib: [{algo}] stopped by {summary['interrupted']} at {summary['env_steps']} env steps; "
              f"checkpoint {summary['checkpoint']}; resume with: kappa-rllib train --resume {out_dir}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"[{algo}] done: final return {summary['final_return']:.1f}, checkpoint {summary['checkpoint']}")
    return 0


def main(argv=None) -> int:
    # RLlib warns on every validate() that the new API stack is in use; that is our design.
    logging.getLogger("ray.rllib.algorithms.algorithm_config").setLevel(logging.ERROR)
    try:
        args = build_parser().parse_args(argv)
        _resolve_address(args)
        if args.command == "tune":
            return tune_main(args)
        if args.command == "report":
            return report_main(args)
        if args.command == "evaluate":
            return evaluate_main(args)
        if args.command == "train" and args.resume:
            return resume_main(args)
        if args.command == "train" and args.target:
            return train_file_main(args)
        if args.command == "train" and not args.algo:
            raise UsageError("--algo is required (or --resume RUN_DIR)")
        if not args.env:
            raise UsageError("--env is required, e.g. --env CartPole-v1")
        algos = [args.algo] if args.command == "train" else [a.strip() for a in args.algos.split(",") if a.strip()]
        if not algos:
            raise UsageError("--algos is empty")
        configs = [(algo, *make_config(algo, args)) for algo in algos]  # all checked before Ray starts
        if not args.dry_run:
            _check_output("--output", args.output)
            _check_address(args)
    except UsageError as e:
        return _error(e)

    if args.dry_run:
        for algo, config, preset_path in configs:
            print(f"[{algo}] {describe(algo, config, args)}, preset {preset_path or 'none (algorithm defaults)'}")
        return 0

    try:
        _start_ray(args, args.torch_threads)
    except UsageError as e:
        return _error(e)
    summaries = []
    for algo, config, preset_path in configs:
        out_dir = _run_dir(args.output, algo, args, config)
        print(f"[{algo}] {describe(algo, config, args)}, preset {preset_path or 'none (algorithm defaults)'}")
        print(f"[{algo}] writing to {out_dir.resolve()}")
        summary = run_one(algo, config, out_dir, int(config.total_env_steps), checkpoint_every=args.checkpoint_every,
                          keep_checkpoints=args.keep_checkpoints)
        summaries.append(summary)
        code = _finish_message(algo, summary, out_dir.resolve())
        if code:
            return code
    if len(summaries) > 1:
        print()
        print(_summary_table(summaries))
    return 0


def run() -> int:
    """The console entry point: a second Ctrl-C (abort) ends with one line, not a traceback."""
    try:
        return main()
    except KeyboardInterrupt:
        print("kappa-rllib: aborted (no checkpoint written for the current iteration)", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(run())
