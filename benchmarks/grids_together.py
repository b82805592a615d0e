"""Wall time of `kappa-rllib tune` on a file of several grids: this tree (the grids run together) beside
an earlier commit (`--before`, by default the last one where they ran one after another), alternated.

A benchmark, not a test: each row is one whole `kappa-rllib tune` process (Ray's start-up included) on
this machine, the two versions in turn (after, before, after, before, ...) so a drift of the machine's
speed falls on both. Prints each run's wall time and the most trials that ran at once (from each
trial's first and last result), then per workload the median wall time of each and the median of the
pairwise ratios before / after, with its range.

    python benchmarks/grids_together.py                         # both workloads, 2 rounds
    python benchmarks/grids_together.py --workload focused --rounds 3
    python benchmarks/grids_together.py --before 2ba1248 --num-cpus 2

focused: table2_focused.py's `--smoke`-sized grids, three of them on Walker2d-v5 (kappa-PI-TRPO 0.68,
    TRPO, naive kappa-PI-TRPO 0.0), each with the file's 5 seeds: 15 trials of 7,680 env steps.
    One grid at a time runs each grid's 5 trials as 2 + 2 + 1 on 2 CPUs.
readme: the README's main job, `tune_configs/small/cartpole_dqn.py` (2 grids: 8 + 2 trials of 20k).

`--before REF` is checked out into a temporary git worktree and run with PYTHONPATH pointing at it
(this venv's packages, that commit's `kappa_rllib`; Ray's workers inherit it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "2ba1248"  # the last commit whose `tune` fitted one grid's Tuner after another

FOCUSED = """
from ray import tune
from kappa_rllib.experiments import paper_grids

def experiments(smoke=False):  # table2_focused.py's --smoke budgets, its 5 seeds, three grids
    grids = paper_grids("trpo", "Walker2d-v5", kappas=[0.68], c_fa=0.2, num_seeds=5, variants=("pi",),
                        naive_kappas=[0.0], smoke=True, name="walker2d")
    for grid in grids:
        grid.config.seed = tune.grid_search(list(range(5)))  # smoke keeps 2 seeds: the file has 5
    return grids
"""
WORKLOADS = {"focused": None, "readme": ROOT / "tune_configs" / "small" / "cartpole_dqn.py"}


def peak_running(folder: Path) -> int:
    events = []
    for result in folder.glob("*/*/result.json"):
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        if rows:
            events += [(rows[0]["timestamp"] - rows[0]["time_this_iter_s"], 1), (rows[-1]["timestamp"], -1)]
    running = peak = 0
    for _, change in sorted(events):
        running += change
        peak = max(peak, running)
    return peak


def run_once(src: Path | None, grid_file: Path, num_cpus: int, scratch: Path) -> tuple[float, int, int]:
    """(wall s, peak trials at once, trials finished) of one `kappa-rllib tune` of `grid_file`."""
    storage = Path(tempfile.mkdtemp(dir=scratch))
    env = {**os.environ, "PYTHONPATH": str(src)} if src else dict(os.environ)
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "kappa_rllib.cli", "tune", str(grid_file), "--storage", str(storage),
                          "--num-cpus", str(num_cpus)], cwd=src or ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if out.returncode != 0:
        raise SystemExit(f"tune failed ({src or 'this tree'}):\n{out.stderr[-3000:]}")
    folder = storage / grid_file.stem
    done = sum(1 for r in folder.glob("*/*/result.json") if json.loads(r.read_text().splitlines()[-1]).get("done"))
    return wall, peak_running(folder), done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="focused,readme")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs (after, before) per workload")
    parser.add_argument("--before", default=BEFORE, help=f"the commit to compare with (default {BEFORE})")
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="grids_together_"))
    before_src = scratch / "before"
    subprocess.run(["git", "worktree", "add", "--detach", str(before_src), args.before], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        focused = scratch / "walker2d_smoke_5_seeds.py"
        focused.write_text(FOCUSED)
        print(f"{time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, --num-cpus {args.num_cpus}; "
              f"after = this tree, before = {args.before}")
        for name in args.workload.split(","):
            grid_file = WORKLOADS[name] or focused
            walls = {"after": [], "before": []}
            for i in range(args.rounds):
                for label, src in (("after", None), ("before", before_src)):
                    wall, peak, done = run_once(src, grid_file, args.num_cpus, scratch)
                    walls[label].append(wall)
                    print(f"{name:8s} round {i + 1} {label:6s} {wall:7.1f} s  peak {peak} trials at once  {done} finished",
                          flush=True)
            ratios = [b / a for a, b in zip(walls["after"], walls["before"])]
            print(f"{name:8s} median wall: after {statistics.median(walls['after']):.1f} s, before "
                  f"{statistics.median(walls['before']):.1f} s; before / after {statistics.median(ratios):.2f}x "
                  f"(range {min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} pairs)", flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(before_src)], cwd=ROOT, capture_output=True)


if __name__ == "__main__":
    main()
