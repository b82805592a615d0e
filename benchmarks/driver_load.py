"""How many trials one Tune driver can feed: its CPU per report and per trial-second, for TRPO-family
trials reporting every batch (`batches_per_iteration` 1, the default) against every K batches.

Tune's driver is one process and, for what it does per result (RLlib's ~15 KB result row through the
JSON, CSV and TensorBoard loggers, the callbacks, the experiment state), one core: while it handles
one trial's report, that trial waits for its next `train()` call. So a grid fills a cluster only while
the driver's CPU per trial-second, summed over the trials running, stays below one core.

A benchmark, not a test: each row is one whole `kappa-rllib tune` process of a two-trial grid
(kappa-PI-TRPO at the paper's Hopper cell, 2 seeds), the settings in turn (1, K, 1, K, ...) so a drift
of the machine falls on both. This script polls the driver's CPU time from outside
(/proc/<pid>/stat, so the polling costs the driver nothing) and reads each trial's result rows after
the run. Over the window from the first report to the last, it prints:

    reports        result rows in the window (both trials)
    ms/report      the driver's CPU in the window / those rows
    load/trial     the driver's CPU / the trials' running time in the window (a fraction of one core)
    trials/core    1 / load/trial: the trials one driver core could feed at this pace before it is busy
                   all the time (a ceiling, not a working point: near it reports queue), if the driver's
                   load grows in proportion to the trials (only 2 run here; more grids, a remote
                   storage such as S3, or Ray Client add to it)

    python benchmarks/driver_load.py                      # K = 10, 2 rounds, 104 batches a trial
    python benchmarks/driver_load.py --batches 1,5,20 --rounds 3 --env Walker2d-v5

Linux only (/proc). Run it on quiet cores: the trials' pace sets how often they report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")

GRID = """
from kappa_rllib.experiments import paper_grids

def experiments(smoke=False):
    return paper_grids("trpo", {env!r}, kappas=[0.68], c_fa=0.2, num_seeds=2, variants=("pi",), baseline=False,
                       total_env_steps={steps}, batches_per_iteration={k})
"""


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime (fields 14 and 15 of stat)


def run_once(env: str, steps: int, k: int, num_cpus: int, scratch: Path) -> dict:
    folder = Path(tempfile.mkdtemp(dir=scratch))
    grid_file = folder / f"driver_load_k{k}.py"
    grid_file.write_text(GRID.format(env=env, steps=steps, k=k))
    proc = subprocess.Popen([sys.executable, "-m", "kappa_rllib.cli", "tune", str(grid_file), "--storage",
                             str(folder / "storage"), "--num-cpus", str(num_cpus)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples = []  # (wall clock, the driver's CPU seconds)

    def poll():
        while proc.poll() is None:
            cpu = cpu_seconds(proc.pid)
            if cpu is not None:
                samples.append((time.time(), cpu))
            time.sleep(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    output = proc.communicate()[0]
    poller.join()
    if proc.returncode != 0:
        raise SystemExit(f"tune failed:\n{output[-3000:]}")
    trials = []
    for result in (folder / "storage").glob("*/*/*/result.json"):
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        trials.append([(r["timestamp"], r["time_this_iter_s"]) for r in rows])
    # the window: first report of any trial to the last report of any trial (whole seconds: Tune's timestamps)
    start = min(t[0][0] for t in trials)
    end = max(t[-1][0] for t in trials)
    in_window = [s for s in samples if start <= s[0] <= end + 1]
    driver = in_window[-1][1] - in_window[0][1]
    reports = sum(1 for t in trials for stamp, _ in t[1:] if start < stamp <= end)
    trial_seconds = sum(min(t[-1][0], end) - max(t[0][0], start) for t in trials)
    return {"k": k, "reports": reports, "ms_per_report": 1e3 * driver / max(reports, 1),
            "load": driver / trial_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="10", help="batches_per_iteration to compare with 1 (comma list)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--env", default="Hopper-v5")
    parser.add_argument("--trial-batches", type=int, default=104,
                        help="batches of 1,024 env steps per trial (at least N_kappa = 52: kappa 0.68, C_FA 0.2)")
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()
    ks = [1] + [int(k) for k in args.batches.split(",") if int(k) != 1]
    if max(ks) * 2 > args.trial_batches:
        parser.error(f"--trial-batches {args.trial_batches}: give each trial at least 2 reports at K = {max(ks)}")
    scratch = Path(tempfile.mkdtemp(prefix="driver_load_"))
    print(f"{time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, --num-cpus {args.num_cpus}; kappa-PI-TRPO "
          f"0.68 on {args.env}, 2 trials of {args.trial_batches} batches; batches_per_iteration {ks}, "
          f"{args.rounds} alternated rounds")
    print(f"{'round':>5} {'K':>3} {'reports':>7} {'ms/report':>9} {'load/trial':>10} {'trials/core':>11}")
    runs = {k: [] for k in ks}
    for i in range(args.rounds):
        for k in ks:
            run = run_once(args.env, args.trial_batches * 1024, k, args.num_cpus, scratch)
            runs[k].append(run)
            print(f"{i + 1:>5} {k:>3} {run['reports']:>7} {run['ms_per_report']:>9.1f} {run['load']:>10.4f} "
                  f"{1 / run['load']:>11.0f}", flush=True)
    base = statistics.median(r["load"] for r in runs[1])
    print("medians:")
    for k in ks:
        load = statistics.median(r["load"] for r in runs[k])
        ratios = [a["load"] / b["load"] for a, b in zip(runs[1], runs[k])]
        print(f"  K = {k:>3}: {statistics.median(r['ms_per_report'] for r in runs[k]):.1f} ms/report, load/trial "
              f"{load:.4f} of a core, {1 / load:.0f} trials per driver core; {base / load:.1f}x K = 1's "
              f"(pairwise {min(ratios):.1f}-{max(ratios):.1f})")


if __name__ == "__main__":
    main()
