"""Run folders: what `kappa-rllib train` writes, usable from Python too.

    from kappa_rllib import KappaPIDQNConfig, runs
    config = (
        KappaPIDQNConfig()
        .environment("CartPole-v1")
        .training(total_env_steps=20_000)
    )
    # params.json, run.json
    run_dir = runs.create("results", "kappa-pi-dqn", config)
    # progress.csv, result.json, checkpoints/
    summary = runs.train("kappa-pi-dqn", config, run_dir)
    # after Ctrl-C or a crash, on to T
    summary = runs.resume(run_dir)
    # run.json and progress.csv back
    meta, rows = runs.read(run_dir)

A run folder holds `params.json` (the full config), `run.json` (algorithm, env, T, the command,
finished or not), `progress.csv` (PROGRESS_COLUMNS, one row per training iteration), `result.json`
(every RLlib result, one JSON object per line) and `checkpoints/checkpoint_<iteration>/`, written
atomically (kappa_rllib.checkpoints). `train` stops cleanly on SIGINT/SIGTERM after the current
iteration, with a checkpoint; `resume` drops the rows a crash left after the newest complete
checkpoint and trains on from it. Ray starts on first use if it is not running.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import sys
import time
import uuid
from pathlib import Path

RUN_META = "run.json"
PROGRESS_COLUMNS = [
    "training_iteration", "env_steps", "episode_return_mean", "kappa_iteration",
    "kappa_num_iterations", "kappa_phase", "env_steps_per_s", "time_total_s",
]


class RunError(ValueError):
    """A folder that is not a resumable run (one line, naming the folder once)."""


def create(parent, algo: str, config, *, env: str | None = None, seed: int | None = None,
           command: list[str] | None = None) -> Path:
    """A new run folder under `parent`, named by every setting that tells runs apart and a short
    unique suffix (two runs started in the same second never collide); writes params.json and run.json."""
    from kappa_rllib.envs import display_id

    env = env or display_id(config.env)
    seed = (config.seed or 0) if seed is None else seed
    if algo.startswith("kappa-"):
        tag = f"k{config.kappa}_c{config.c_fa}" + ("_naive" if config.naive_schedule else "")
    else:
        lambda_ = getattr(config, "lambda_", 1.0)
        tag = f"lam{lambda_}" if algo == "gae" else "k1.0"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"{algo}_{env.replace('/', '-')}_{tag}_g{config.gamma}_s{seed}_{stamp}_{uuid.uuid4().hex[:6]}"
    path = Path(parent) / name
    path.mkdir(parents=True, exist_ok=False)
    with open(path / "params.json", "w") as f:
        json.dump(jsonable(config.to_dict()), f, indent=1, sort_keys=True)
    update_meta(path, algo=algo, env=env, total_env_steps=int(config.total_env_steps), finished=False,
                command=sys.argv[1:] if command is None else command)
    return path


def update_meta(run_dir, **fields) -> None:
    """Merges `fields` into run.json (written atomically)."""
    path = Path(run_dir) / RUN_META
    meta = json.loads(path.read_text()) if path.exists() else {}
    meta.update(fields)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, path)


def read_meta(run_dir) -> dict:
    """run.json of a run folder; RunError if it is not one."""
    path = Path(run_dir) / RUN_META
    if not path.is_file():
        raise RunError(f"{run_dir} is not a `kappa-rllib train` run folder (no {RUN_META})")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise RunError(f"{path}: unreadable ({e})") from None


def read(run_dir) -> tuple[dict, list[dict]]:
    """(run.json, progress.csv rows with numbers as numbers)."""
    meta, rows = read_meta(run_dir), []
    progress = Path(run_dir) / "progress.csv"
    if progress.exists():
        with open(progress, newline="") as f:
            rows = [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]
    return meta, rows


def _number(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def progress_row(result: dict, started: float, steps_at_start: int = 0) -> dict:
    """One progress.csv row from an RLlib result (env steps/s over this process's run)."""
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


def jsonable(obj):
    """A JSON-writable copy (numbers as floats, anything else as its str)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    try:
        return float(obj)
    except (TypeError, ValueError):
        return str(obj)


def trim(run_dir, last_iteration: int) -> None:
    """Drops the rows a crash left after the checkpoint being resumed from (they are re-run)."""
    result_file, progress_file = Path(run_dir) / "result.json", Path(run_dir) / "progress.csv"
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


class StopOnSignal:
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


def stop_reached(result: dict, stop: dict) -> bool:
    """A Tune-style stop dict ({"training_iteration": 20, "env_runners/episode_return_mean": 450, ...})."""
    for key, limit in stop.items():
        value = result
        for part in key.split("/"):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and (value is True if limit is True else value >= limit):
            return True
    return False


def _progress_line(algo: str, row: dict, total_steps: int, result: dict | None = None,
                   last_return: float | None = None) -> str:
    """One terminal line per iteration. The return is RLlib's windowed mean (over its last episodes);
    in an iteration in which no episode ended RLlib reports none (nan), and the line shows the last
    known one, as SB3's ep_rew_mean does (`-` until a first episode has ended)."""
    value = row["episode_return_mean"]
    if isinstance(value, float) and math.isnan(value):
        value = last_return
    shown = "       -" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:8.1f}"
    line = (f"[{algo}] steps {row['env_steps']:>8d}/{total_steps}  return {shown}  "
            f"kappa-iter {row['kappa_iteration']}/{row['kappa_num_iterations']} ({row['kappa_phase']})  "
            f"{row['env_steps_per_s']:6.0f} steps/s")
    evaluation = (result or {}).get("evaluation", {}).get("env_runners", {})
    if "episode_return_mean" in evaluation:  # RLlib's periodic evaluation (its latest)
        line += f"  eval return {evaluation['episode_return_mean']:8.1f}"
    return line


def train(algo: str, config, run_dir, total_steps: int | None = None, log=print, *, algorithm=None,
          checkpoint_every: int = 10, keep_checkpoints: int = 2, stop: dict | None = None,
          track: list[str] = (), track_project: str | None = None, wandb_entity: str | None = None,
          notice_waits: bool = False) -> dict:
    """Trains to the end of the kappa schedule (T env steps), a `stop` rule, or SIGINT/SIGTERM, and
    returns a summary. Checkpoints go to run_dir/checkpoints/ every `checkpoint_every` iterations, at
    the end and on a stop signal. `algorithm`: a restored one to continue (see `resume`). `track`:
    also log each result to W&B and/or MLflow (kappa_rllib.tracking), in the project `track_project`
    (and the W&B entity `wandb_entity`). `notice_waits` (a cluster): a line every minute while the
    algorithm's EnvRunners wait for resources (kappa_rllib.resources.WaitNotice)."""
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    from kappa_rllib import checkpoints

    run_dir = Path(run_dir)
    total_steps = int(config.total_env_steps) if total_steps is None else total_steps
    resumed = algorithm is not None
    if algorithm is None:
        import contextlib

        from kappa_rllib import resources

        with resources.WaitNotice(algo, resources.asks(config, in_driver=True)) if notice_waits else contextlib.nullcontext():
            algorithm = config.build_algo()
    steps_at_start = int(algorithm.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0))
    started = time.time()
    returns, row, checkpoint, signals, finished = [], None, None, None, False
    mode = "a" if resumed else "w"
    tracker = None
    if track:
        from kappa_rllib import tracking

        tracker = tracking.RunTracker(list(track), project_name=tracking.project(track_project), run_name=run_dir.name,
                                      config={"algo": algo, **config.to_dict()}, results_folder=run_dir.parent,
                                      entity_name=tracking.entity(wandb_entity))
    failed = True
    try:
        with StopOnSignal() as signals, open(run_dir / "progress.csv", mode, newline="") as f_csv, \
                open(run_dir / "result.json", mode) as f_json:
            writer = csv.DictWriter(f_csv, fieldnames=PROGRESS_COLUMNS)
            if not resumed:
                writer.writeheader()
            written = 0  # rows this stretch: its first two carry the config (every train() result does), the rest not
            while not signals.received:
                result = algorithm.train()
                row = progress_row(result, started, steps_at_start)
                writer.writerow(row)
                f_csv.flush()
                kept = result if written < 2 else {k: v for k, v in result.items() if k != "config"}
                f_json.write(json.dumps(jsonable(kept)) + "\n")
                written += 1
                f_json.flush()
                if tracker is not None:
                    tracker.log(result)
                if not math.isnan(row["episode_return_mean"]):
                    returns.append(row["episode_return_mean"])
                log(_progress_line(algo, row, total_steps, result, returns[-1] if returns else None))
                finished = bool(result.get("done")) or row["env_steps"] >= total_steps or (
                    bool(stop) and stop_reached(result, stop))
                if finished:
                    break
                if checkpoint_every and result["training_iteration"] % checkpoint_every == 0:
                    checkpoint = checkpoints.save_atomic(algorithm, run_dir / "checkpoints", keep_checkpoints)
            if row is not None or resumed:
                checkpoint = checkpoints.save_atomic(algorithm, run_dir / "checkpoints", keep_checkpoints)
        failed = False
    finally:
        algorithm.stop()
        if tracker is not None:
            tracker.close(failed=failed)
    update_meta(run_dir, finished=finished)
    return {
        "algo": algo,
        "kappa": getattr(config, "kappa", 1.0),
        "num_iterations": getattr(config, "num_kappa_iterations", 1),
        "env_steps": row["env_steps"] if row else 0,
        "final_return": returns[-1] if returns else float("nan"),
        "best_return": max(returns) if returns else float("nan"),
        "env_steps_per_s": row["env_steps_per_s"] if row else float("nan"),
        "wall_s": time.time() - started,
        "output": str(run_dir),
        "checkpoint": str(checkpoint) if checkpoint else None,
        "interrupted": None if finished else (signals.received or "stopped"),
    }


def resumable(run_dir) -> tuple[dict, Path | None, dict | None]:
    """(run.json, newest complete checkpoint, its manifest) of an unfinished run; the checkpoint and
    manifest are None for a finished run. RunError (one line) if it cannot be resumed."""
    from kappa_rllib import checkpoints

    meta = read_meta(run_dir)
    if meta.get("finished"):
        return meta, None, None
    try:
        checkpoint = checkpoints.latest(run_dir)
        return meta, checkpoint, checkpoints.check(checkpoint)
    except checkpoints.CheckpointError as e:
        raise RunError(" ".join(str(e).split())) from None


def resume(run_dir, log=print, *, checkpoint_every: int = 10, keep_checkpoints: int = 2) -> dict | None:
    """Continues an unfinished run from its newest complete checkpoint to its T (networks, targets,
    optimizers, kappa phase, counters and replay restored). None if the run had already finished."""
    from ray.rllib.algorithms.algorithm import Algorithm

    run_dir = Path(run_dir).expanduser().resolve()
    meta, checkpoint, manifest = resumable(run_dir)
    if checkpoint is None:
        return None
    trim(run_dir, manifest["training_iteration"])
    log(f"[{meta['algo']}] resuming {run_dir} from {checkpoint.name} (iteration {manifest['training_iteration']}, "
        f"{manifest['env_steps']} env steps)")
    algorithm = Algorithm.from_checkpoint(str(checkpoint))
    return train(meta["algo"], algorithm.config, run_dir, meta["total_env_steps"], log, algorithm=algorithm,
                 checkpoint_every=checkpoint_every, keep_checkpoints=keep_checkpoints)
