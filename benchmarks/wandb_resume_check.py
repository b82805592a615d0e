"""What `--resume --track wandb` spends, before Tune steps, looking at ended trials for rows their W&B runs lack
(kappa_rllib/tuning/tracking.py, `missing_rows`): the full check (each trial's result.json and every W&B file
of its run read) beside the check as `--resume` makes it now (`HeldCache`: a trial a full check found complete
is not read again while its W&B files are unchanged), on the same trials, alternated.

A benchmark, not a test. N ended trials of a 2M-step kappa-PI-TRPO grid: 1,953 rows each (the recorded rows of
benchmarks/driver_cluster_parts/, cycled, with the env steps and times of a 2M-step trial), a result.json of
~5 MB each and an offline W&B run holding every row (one run written by wandb, copied under each trial's id).
Per round: `full` (the check before the cache), then `cold` (the first --resume with the cache: a full check
that records it), then `warm` (every later --resume). Prints each round's seconds for the N trials and the
medians, with warm / full.

    python benchmarks/wandb_resume_check.py                  # 50 trials, 3 rounds
    python benchmarks/wandb_resume_check.py --trials 200 --rounds 5
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "benchmarks" / "driver_cluster_parts" / "kappa_pi_trpo_rows.jsonl.gz"
ITERATIONS = 1953  # 2M env steps in batches of 1,024

WRITE_RUN = """
import json, sys, wandb
from kappa_rllib.tracking import metrics, step_key
run = wandb.init(mode="offline", dir=sys.argv[1], id=sys.argv[2], project="bench")
run.define_metric(step_key()); run.define_metric("*", step_metric=step_key())
for line in open(sys.argv[3]):
    run.log(metrics(json.loads(line)))
run.finish()
"""


def trial_rows() -> list[dict]:
    recorded = [json.loads(line) for line in gzip.open(ROWS, "rt")]
    rows = []
    for i in range(ITERATIONS):
        row = dict(recorded[i % len(recorded)])
        row.update(training_iteration=i + 1, time_total_s=0.3 * (i + 1), done=i + 1 == ITERATIONS)
        row["env_runners"] = {**row["env_runners"], "num_env_steps_sampled_lifetime": 1024 * (i + 1)}
        rows.append(row)
    return rows


def make_trials(folder: Path, n: int) -> list:
    """N ended trials under `folder`: their result.json, and an offline W&B run of each holding every row."""
    import pyarrow.fs

    rows = trial_rows()
    text = "".join(json.dumps(r) + "\n" for r in rows)
    template_id = "bench_template"
    (folder / "template").mkdir(parents=True)
    (folder / "template" / "result.json").write_text(text)
    subprocess.run([sys.executable, "-c", WRITE_RUN, str(folder / "template"), template_id,
                    str(folder / "template" / "result.json")], check=True, capture_output=True, cwd=ROOT,
                   env={**__import__("os").environ, "WANDB_SILENT": "true"})
    (run_folder,) = (folder / "template" / "wandb").glob(f"offline-run-*-{template_id}")
    trials = []
    for k in range(n):
        trial_id = f"b{k:04d}_00000"
        (folder / "trials" / trial_id).mkdir(parents=True)
        (folder / "trials" / trial_id / "result.json").write_text(text)
        target = folder / "wandb" / run_folder.name.replace(template_id, trial_id)
        target.mkdir(parents=True)
        shutil.copy(run_folder / f"run-{template_id}.wandb", target / f"run-{trial_id}.wandb")
        trials.append(SimpleNamespace(trial_id=trial_id, last_result=rows[-1], status="TERMINATED",
                                      storage=SimpleNamespace(trial_fs_path=str(folder / "trials" / trial_id),
                                                              storage_filesystem=pyarrow.fs.LocalFileSystem())))
    return trials


def full_check(folder: Path, trial) -> list[dict]:
    """The check without the cache: the trial's result.json and every W&B file of its run, read."""
    from kappa_rllib.tuning import tracking
    from kappa_rllib.tuning.tracking.wandb_files import _read_held

    paths = sorted(folder.glob(f"wandb/*run-*-{trial.trial_id}/run-{trial.trial_id}.wandb"))
    return tracking.replay_rows(tracking.stored_rows(trial), _read_held(paths))


def timed(check, folder: Path, trials) -> float:
    start = time.perf_counter()
    for trial in trials:
        assert check(folder, trial) == [], "a benchmark trial's W&B run lacks rows"
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from kappa_rllib.tuning import tracking

    with tempfile.TemporaryDirectory(prefix="wandb_resume_check_") as tmp:
        folder = Path(tmp)
        trials = make_trials(folder, args.trials)
        print(f"{args.trials} ended trials of {ITERATIONS} rows; result.json "
              f"{(folder / 'template' / 'result.json').stat().st_size / 1e6:.1f} MB, W&B run file "
              f"{next((folder / 'wandb').glob('*/*.wandb')).stat().st_size / 1e6:.1f} MB each")
        timed(full_check, folder, trials[:1])  # imports (wandb's protobuf) out of the first round
        figures = {"full": [], "cold": [], "warm": []}
        for r in range(args.rounds):
            shutil.rmtree(folder / "wandb" / "kappa-held", ignore_errors=True)
            figures["full"].append(timed(full_check, folder, trials))
            figures["cold"].append(timed(tracking.missing_rows, folder, trials))
            figures["warm"].append(timed(tracking.missing_rows, folder, trials))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in figures.items()))
        med = {k: statistics.median(v) for k, v in figures.items()}
        print(f"median over {args.rounds} rounds, {args.trials} trials: full {med['full']:.3f} s "
              f"({1000 * med['full'] / args.trials:.1f} ms a trial), cold {med['cold']:.3f} s, "
              f"warm {med['warm']:.4f} s ({1000 * med['warm'] / args.trials:.2f} ms a trial); "
              f"warm / full {med['warm'] / med['full']:.4f}")


if __name__ == "__main__":
    main()
