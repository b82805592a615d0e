"""How one `kappa-rllib tune` driver copes with a big cluster's reports: its CPU per report, its load in
cores, and how late trials get their next train() call, for N = 10, 100, 1000 kappa-PI-TRPO trials
reporting every ~5 s (10 Hopper batches a row), simulated on this machine.

The simulation. A `ray start --head` on loopback (127.0.0.1, its own --temp-dir, no dashboard) with
--num-cpus logical CPUs (2000: no trial waits for resources), and the real driver path: `python -m
kappa_rllib.cli tune FILE --storage S --address 127.0.0.1:PORT --checkpoint-every K` (the compact progress
view, the retry policy, the state backup, sync.py's whole uploads, Tune's JSON/CSV loggers and
experiment state). FILE's one grid runs light trials (driver_cluster_parts/replay.py) that replay real
kappa-PI-TRPO result rows (recorded from a 2M-step HalfCheetah run, each ~2.2 KB plus Tune's own keys),
with a real trial's `config` (~13.5 KB, which Tune adds to a row, and kappa_rllib.tuning.config_once keeps
on a stretch's first two rows only, as in a real trial; `--compare` also runs the driver as it was before
2026-12-02: TensorBoard's logger on and the config in every row), checkpointing every K iterations
(small checkpoints) and ending by the grid's stop rule (`done`). The driver's work is per report, so N
trials at the real interval I (5 s) are emulated by M = min(N, --actors) actors each reporting every
I * M / N seconds (the same reports per second); `--check` tests that: 8 actors at 1 s against 2 actors
at 0.25 s (both 8 reports/s).

Measured from outside the driver: its CPU time from /proc/<pid>/stat, polled every 0.1 s (costs the
driver nothing), and the trials' rows read from result.json after the run. The trials all report until
one deadline (--startup + --seconds after the driver's launch); the window: from the moment every trial
has reported once to the first trial's last row (all M actors running), by the trials' own clocks (each
row carries its step()'s start and end, `replay/step_start`, `replay/step_end`). Printed:

    drivers      K `kappa-rllib tune` processes, one grid of the N / K trials each (--drivers), as on a
                 cluster with one `ray job submit ... --grids G` per grid; 1: the whole file in one
    every s      each actor's sleep per step(): 5 s * actors / N
    reports      rows the trials produced in the window (below actors * window / every s when the driver
                 cannot keep up: the trials then wait for it)
    ms/report    the driver's CPU in the window / those rows
    load         the driver's CPU seconds / wall seconds in the window (cores; at 1 it is saturated and
                 trials queue behind it); with K drivers, theirs together
    max load     the busiest driver's load (each driver is one process, one GIL: what has to stay below 1)
    wait p50/p99/mean over consecutive rows of a trial in the window: the next step()'s start minus the last
                 one's end (what Tune adds to a trial's own iteration time: the row's trip to the
                 driver, the driver's handling, the next train() call), ms

What the emulation keeps and what it does not. Per report the driver's work is the same (the same row,
the same config, the same callbacks), and below saturation so is a trial's wait (a report's trip and
handling). Not kept: (1) at saturation the actors are a closed loop of M, so the wait stays near
M * ms/report, while N real trials would each wait about N * ms/report - 5 s; read `reports` (the rate
the driver sustained) there instead; (2) what grows with the number of trials or the files' sizes rather
than with reports: the experiment-state snapshot (a row per trial), state_backup's and the syncs' walks of
the grid folder (a folder per trial), and the syncs' whole copies of each changed result.json (an
emulated trial's file grows N / M times faster, but a real 2M-step trial's reaches ~33 MB); (3) Tune
forces a state snapshot when a trial has checkpointed `num_to_keep` (2) times since the last one: an
emulated actor checkpoints N / M times as often as a real trial (every 50 of its faster iterations).

Runs alternate over N within each round; with --rounds > 1 the medians are printed too. `--profile`
then runs py-spy (`py-spy record --format raw`) on the driver at the largest N for --profile-seconds and
sums its samples by what they do (Tune's loggers, config flattening, experiment-state snapshots, our
callbacks, syncing, ...), writing the raw profile (--profile-out); py-spy samples only the thread holding
Python's GIL (--gil), so the driver's CPU by thread name is printed too (Ray's C++ threads are the rest).
py-spy is not a dependency: `.venv/bin/pip install py-spy` (it needs ptrace rights over the driver).

    python benchmarks/driver_cluster.py                                  # N = 10,100,1000, 60 s, 1 round
    python benchmarks/driver_cluster.py --trials 10,100,1000 --seconds 60 --rounds 1 --check --profile
    python benchmarks/driver_cluster.py --trials 1000 --seconds 90 --profile --profile-out profile.txt
    python benchmarks/driver_cluster.py --trials 100,1000 --rounds 2 --compare   # today's beside before's
    python benchmarks/driver_cluster.py --trials 1000 --drivers 1,2,4 --rounds 2  # one driver per grid

Linux only (/proc). Run it on quiet cores: the driver, Ray's GCS and raylet and the actors share this
machine, so on a small one the numbers are an upper bound of a real head node's.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
TICK = os.sysconf("SC_CLK_TCK")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver_load import cpu_seconds  # noqa: E402 - the driver's CPU from /proc, polled from outside
REAL_INTERVAL_S = 5.0  # a kappa-PI-TRPO row of 10 Hopper batches (batches_per_iteration 10), about

GRID = """
from driver_cluster_parts.replay import replay_grid

def experiments(smoke=False):
    return [replay_grid(f"replay_{{i}}" if {drivers} > 1 else "replay", trials=n, interval_s={interval},
                        until={until}, config_every_row={config_every_row}) for i, n in enumerate({split})]
"""
# --compare: the driver's work per report as it was before 2026-12-02 (TensorBoard's logger on, Tune's config
# in every row), measured beside today's in the same round
BEFORE = {"tune_args": ["--tensorboard"], "config_every_row": True}


class Head:
    """A Ray head on loopback, its processes marked by an environment variable so that exactly they are
    stopped at the end (never `ray stop`, which stops every Ray on the machine)."""

    def __init__(self, num_cpus: int):
        self.mark = f"driver-cluster-{uuid.uuid4().hex[:8]}"
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rdc_"))  # short: Ray's socket paths have a length limit
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "DRIVER_CLUSTER_MARK": self.mark, "RAY_USAGE_STATS_ENABLED": "0",
                    # a loopback cluster of this benchmark's own: no token (and none of ~/.ray's is read)
                    "RAY_AUTH_MODE": "disabled",
                    "PYTHONPATH": os.pathsep.join([str(BENCH), str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.env.pop("RAY_ADDRESS", None)
        ray = Path(sys.executable).parent / "ray"
        subprocess.run([str(ray), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={self.port}",
                        f"--num-cpus={num_cpus}", "--num-gpus=0", f"--temp-dir={self.temp_dir}",
                        "--include-dashboard=false", "--disable-usage-stats"],
                       env=self.env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def pids(self) -> list[int]:
        out = []
        for environ in Path("/proc").glob("[0-9]*/environ"):
            try:
                if f"DRIVER_CLUSTER_MARK={self.mark}".encode() in environ.read_bytes():
                    out.append(int(environ.parent.name))
            except OSError:
                pass
        return [p for p in out if p != os.getpid()]

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.pids()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            deadline = time.time() + 10
            while pids and time.time() < deadline:
                time.sleep(0.2)
                pids = self.pids()
            if not pids:
                break
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """{thread id: (its name, its CPU seconds)} of a process (Python's threads keep the process's name;
    Ray's C++ threads name themselves)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("[0-9]*"):
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def run_once(head: Head, trials: int, actors: int, seconds: float, startup: float, checkpoint_every: int,
             scratch: Path, profile: tuple[Path, float] | None = None, interval_s: float | None = None,
             tune_args: list[str] = (), config_every_row: bool = False, inspect=None, drivers: int = 1) -> dict:
    """One `kappa-rllib tune` run: `actors` trials each reporting every `interval_s` (default: what
    emulates `trials` trials at REAL_INTERVAL_S), all until `startup` + `seconds` from now. `tune_args`: more
    of tune's options; `config_every_row`: see BEFORE; `inspect(storage)`: called on the run's storage folder
    before it is deleted (tests). `drivers` > 1: the file holds that many grids, the actors split among them,
    each run by its own `kappa-rllib tune --grids` process into the same storage (several drivers, one per grid);
    the CPU figures are their sums, `max load` the busiest one's."""
    interval = interval_s if interval_s is not None else REAL_INTERVAL_S * actors / trials
    split = [actors // drivers + (i < actors % drivers) for i in range(drivers)]
    if min(split) < 1:
        raise SystemExit(f"--drivers {drivers}: more drivers than the {actors} actors")
    folder = Path(tempfile.mkdtemp(dir=scratch))
    grid_file = folder / "driver_cluster.py"
    grid_file.write_text(GRID.format(drivers=drivers, split=split, interval=interval,
                                     until=time.time() + startup + seconds, config_every_row=bool(config_every_row)))
    logs, procs = [], []
    for i in range(drivers):
        logs.append(folder / f"tune_{i}.log")
        with logs[-1].open("w") as out:
            grids = ["--grids", f"replay_{i}"] if drivers > 1 else []
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "kappa_rllib.cli", "tune", str(grid_file), "--storage", str(folder / "storage"),
                 "--address", head.address, "--checkpoint-every", str(checkpoint_every), *grids, *tune_args],
                cwd=ROOT, env=head.env, stdout=out, stderr=subprocess.STDOUT))
    proc = procs[0]  # the one profiled
    samples = [[] for _ in procs]  # per driver: (wall clock, its CPU seconds)
    spy = None
    threads = []  # the driver's threads' CPU when py-spy starts and when it ends

    def poll():
        nonlocal spy
        while any(p.poll() is None for p in procs):
            for p, kept in zip(procs, samples):
                cpu = cpu_seconds(p.pid) if p.poll() is None else None
                if cpu is not None:
                    kept.append((time.time(), cpu))
            # the profile: once every trial has reported, for its seconds; --gil: only the thread holding
            # Python's GIL, i.e. the driver's Python CPU (not the threads waiting in ray.wait, joins, ...)
            if profile is not None and spy is None and reporting(folder, actors):
                spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--format", "raw",
                                        "--gil", "-o", str(profile[0]), "-d", str(int(profile[1])), "-r", "100",
                                        "-p", str(proc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
                threads.append((time.time(), thread_cpu(proc.pid)))
            elif spy is not None and len(threads) == 1 and time.time() - threads[0][0] >= profile[1]:
                threads.append((time.time(), thread_cpu(proc.pid)))
            time.sleep(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    for p in procs:
        p.wait()
    poller.join()
    if spy is not None:
        spy.wait()
    for p, log in zip(procs, logs):
        if p.returncode != 0:
            raise SystemExit(f"tune failed ({p.returncode}):\n{log.read_text()[-3000:]}")
    rows_by_trial = []
    for result in (folder / "storage").glob("*/*/*/result.json"):
        rows = []
        with result.open() as f:
            for line in f:
                if line.strip():
                    replay = json.loads(line)["replay"]
                    rows.append((replay["step_start"], replay["step_end"]))
        rows_by_trial.append(rows)
    if inspect is not None:
        inspect(folder / "storage")
    shutil.rmtree(folder, ignore_errors=True)
    if len(rows_by_trial) != actors or not all(rows_by_trial):
        raise SystemExit(f"expected {actors} trials with rows, found {len(rows_by_trial)}")
    start = max(t[0][1] for t in rows_by_trial)  # every trial has reported once
    end = min(t[-1][1] for t in rows_by_trial)   # the first trial's last row
    if end - start < 5:
        raise SystemExit(f"N = {trials}: the trials ran together for {end - start:.1f} s only (the last started "
                         "late): raise --startup")
    reports = sum(1 for t in rows_by_trial for _, e in t if start < e <= end)
    waits = [b[0] - a[1] for t in rows_by_trial for a, b in itertools.pairwise(t) if start <= a[1] and b[1] <= end]
    cpus = [interpolate(kept, end) - interpolate(kept, start) for kept in samples]
    cpu = sum(cpus)
    if len(threads) == 2:
        print_threads(threads)
    return {"trials": trials, "actors": actors, "interval_s": interval, "reports": reports,
            "window_s": end - start, "ms_per_report": 1e3 * cpu / max(reports, 1), "load": cpu / (end - start),
            "drivers": drivers, "max_load": max(cpus) / (end - start),
            "wait_p50_ms": 1e3 * percentile(waits, 0.5), "wait_p99_ms": 1e3 * percentile(waits, 0.99),
            "wait_mean_ms": 1e3 * statistics.fmean(waits) if waits else float("nan")}


def reporting(folder: Path, actors: int) -> bool:
    """Every one of the run's `actors` trials has written a row."""
    results = list((folder / "storage").glob("*/*/*/result.json"))
    return len(results) >= actors and all(r.stat().st_size > 0 for r in results)


def interpolate(samples: list[tuple[float, float]], t: float) -> float:
    """The driver's CPU seconds at wall time t, from the polled samples."""
    for (t0, c0), (t1, c1) in itertools.pairwise(samples):
        if t0 <= t <= t1:
            return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1e-9)
    raise SystemExit(f"no CPU samples around {t}: the window lies outside the driver's life")


# ---------------------------------------------------------------------------------------------- profile
def print_threads(threads) -> None:
    """The driver's CPU over the profile, by thread name: how much of it py-spy's GIL samples can see."""
    (t0, before), (t1, after) = threads
    by_name = collections.Counter()
    for tid, (name, cpu) in after.items():
        by_name[name] += cpu - before.get(tid, (name, 0.0))[1]
    total = sum(by_name.values())
    print(f"the driver's CPU during the profile: {total / (t1 - t0):.2f} cores; by thread name "
          "(Python's threads are all named as the process):")
    for name, cpu in by_name.most_common(10):
        print(f"    {100 * cpu / max(total, 1e-9):5.1f}%  {name}")



# what a frame does, by where it lives (the first category that matches a frame of a sample, innermost first)
CATEGORIES = [
    ("Tune JSON logger (result.json)", ["json.py", "JsonLogger"], ["logger/json.py"]),
    ("Tune CSV logger (progress.csv)", ["CSVLogger"], ["logger/csv.py"]),
    ("Tune TensorBoard logger (tbx events)", ["TBXLogger"], ["logger/tensorboardx.py", "tensorboardX"]),
    ("Tune experiment-state snapshot", ["checkpoint_if_needed", "save_to_dir", "_experiment_state",
                                        "get_json_state", "experiment_state"], ["execution/experiment_state.py"]),
    ("kappa_rllib progress view", [], ["kappa_rllib/tuning/progress.py"]),
    ("kappa_rllib retry policy", [], ["kappa_rllib/tuning/retry.py"]),
    ("kappa_rllib state backup", [], ["kappa_rllib/tuning/repair.py"]),
    ("kappa_rllib sync / storage (sync.py)", [], ["kappa_rllib/tuning/sync.py", "kappa_rllib/tuning/storage.py"]),
    ("kappa_rllib together (caps, threads)", [], ["kappa_rllib/tuning/together.py"]),
    ("Tune storage sync (pyarrow fs)", [], ["train/_internal/storage.py", "pyarrow"]),
    ("Tune progress reporter (Tune's own)", [], ["tune/progress_reporter.py", "tune/experimental/output.py"]),
    ("config flattening (flatten_dict)", ["flatten_dict", "unflatten"], []),
    ("Tune scheduler / search alg", [], ["tune/schedulers/", "tune/search/"]),
    ("Tune result handling (controller)", ["_on_result", "_process_trial_result", "on_trial_result",
                                           "_process_trial_results"], []),
    ("Ray core (object transfer, actor calls, events)", [], ["ray/_private/", "ray/actor.py", "ray/_raylet",
                                                              "air/execution/"]),
]


def category(frames: list[str]) -> str:
    """The innermost frame's category that has one: json.dumps under the JSON logger counts as the
    logger, flatten_dict under the CSV logger as flattening."""
    for frame in reversed(frames):
        function = frame.split(" (", 1)[0]
        for name, functions, files in CATEGORIES:
            if any(f in frame for f in files) or any(fn in function for fn in functions):
                return name
    return "other"


def summarise_profile(path: Path, top: int = 25) -> None:
    """py-spy's raw profile (`frame;frame;... count`, outermost first): samples by category, by the
    outermost Tune/kappa-rllib callback frame, and the hottest functions by their own time."""
    by_category, own, callbacks = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames, n = stack.split(";"), int(count)
        total += n
        by_category[category(frames)] += n
        own[frames[-1]] += n
        for i, frame in enumerate(frames):  # the callback each sample runs in (Tune's loggers are callbacks too)
            if frame.startswith("CallbackList."):
                callbacks[" > ".join(f.split(" (", 1)[0] for f in frames[i:i + 3])] += n
                break
        else:
            callbacks["(outside Tune's callbacks)"] += n
    if not total:
        print(f"profile: no samples in {path}")
        return
    print(f"\nprofile of the driver ({total} samples at 100 Hz of the thread holding the GIL; raw: {path}):")
    print("  by what it does (inclusive):")
    for name, n in by_category.most_common():
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  in which of Tune's callbacks (inclusive: hook > callback > its method):")
    for frame, n in callbacks.most_common(12):
        print(f"    {100 * n / total:5.1f}%  {frame}")
    print(f"  the hottest functions by own time (top {top}):")
    for frame, n in own.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {frame}")


# ------------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", default="10,100,1000", help="emulated trials N (comma list)")
    parser.add_argument("--seconds", type=float, default=60, help="the trials' reporting time (s)")
    parser.add_argument("--startup", type=float, default=45,
                        help="seconds given the driver to start its trials; all report until startup + seconds")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--actors", type=int, default=8, help="actors emulating the N trials (at most N)")
    parser.add_argument("--checkpoint-every", type=int, default=50, help="as the Table 2 runs (0: at the end only)")
    parser.add_argument("--num-cpus", type=int, default=2000, help="the head's logical CPUs")
    parser.add_argument("--check", action="store_true",
                        help="also the emulation check: 8 actors at 1 s against 2 actors at 0.25 s")
    parser.add_argument("--drivers", default="1",
                        help="drivers K (comma list): the N trials split over K grids, each driven by its own "
                             "`kappa-rllib tune --grids` process (at most --actors)")
    parser.add_argument("--compare", action="store_true",
                        help="also, for each N in each round, the driver as before 2026-12-02 (TensorBoard's logger "
                             "on, the config in every row), and the ratio of today's CPU per report to it")
    parser.add_argument("--profile", action="store_true", help="also a py-spy profile at the largest N")
    parser.add_argument("--profile-seconds", type=float, default=30)
    parser.add_argument("--profile-out", default="driver_cluster_profile.txt", help="the raw profile")
    args = parser.parse_args()
    ns = [int(n) for n in args.trials.split(",")]
    ks = [int(k) for k in args.drivers.split(",")]
    if min(ks) < 1 or max(ks) > args.actors or max(ks) > min(ns):
        parser.error("--drivers: each between 1 and --actors (and the smallest --trials)")
    if args.profile and args.seconds < args.profile_seconds + 5:
        parser.error("--profile: --seconds must be at least --profile-seconds + 5")
    scratch = Path(tempfile.mkdtemp(prefix="driver_cluster_"))
    print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} cores; Ray head on loopback, "
          f"--num-cpus {args.num_cpus}; kappa-PI-TRPO rows replayed, N trials at {REAL_INTERVAL_S:g} s emulated by "
          f"min(N, {args.actors}) actors reporting together for {args.seconds:g} s (after {args.startup:g} s to start), --checkpoint-every {args.checkpoint_every}, "
          f"{args.rounds} round(s)")
    head = Head(args.num_cpus)
    try:
        print(HEADER)
        runs, before = collections.defaultdict(list), collections.defaultdict(list)  # by (N, drivers)
        for i in range(args.rounds):
            for n in ns:
                for k in ks:
                    # with --compare, the two alternate: today's first in odd rounds, the old one first in even ones
                    order = ([False, True] if i % 2 == 0 else [True, False]) if args.compare else [False]
                    for old in order:
                        run = run_once(head, n, min(n, args.actors), args.seconds, args.startup,
                                       args.checkpoint_every, scratch, drivers=k, **(BEFORE if old else {}))
                        (before if old else runs)[n, k].append(run)
                        print_run(f"{i + 1}{'b' if old else ''}", run)
        if args.rounds > 1:
            print("medians:")
            for key in runs:
                for label, kept in (("med", runs), ("med b", before)):
                    if kept[key]:
                        print_run(label, {f: statistics.median(r[f] for r in kept[key]) for f in kept[key][0]})
        if args.compare:
            print("today's CPU per report / before's (b: --tensorboard, the config in every row), per round:")
            for (n, k), today in runs.items():
                ratios = [a["ms_per_report"] / b["ms_per_report"] for a, b in zip(today, before[n, k])]
                print(f"  N = {n}, {k} driver(s): " + ", ".join(f"{r:.2f}" for r in ratios)
                      + (f"; median {statistics.median(ratios):.2f}" if len(ratios) > 1 else ""))
        if args.check:
            print("emulation check (both 8 reports/s, N = 40 at 5 s):")
            for actors, interval in ((8, 1.0), (2, 0.25)):
                print_run("check", run_once(head, 40, actors, args.seconds, args.startup, args.checkpoint_every,
                                            scratch, interval_s=interval))
        if args.profile:
            out = Path(args.profile_out).resolve()
            n = max(ns)
            run = run_once(head, n, min(n, args.actors), args.seconds, args.startup, args.checkpoint_every,
                           scratch, profile=(out, args.profile_seconds))
            print("profiled run (py-spy sampling slows the driver):")
            print_run("prof", run)
            summarise_profile(out)
    finally:
        head.stop()
        shutil.rmtree(scratch, ignore_errors=True)


HEADER = (f"{'round':>5} {'N':>5} {'drivers':>7} {'actors':>6} {'every s':>7} {'reports':>7} {'window s':>8} "
          f"{'ms/report':>9} {'load':>5} {'max load':>8} {'wait p50':>8} {'wait p99':>8} {'mean':>5}")


def print_run(label, run: dict) -> None:
    print(f"{label:>5} {run['trials']:>5.0f} {run['drivers']:>7.0f} {run['actors']:>6.0f} {run['interval_s']:>7.3f} "
          f"{run['reports']:>7.0f} {run['window_s']:>8.1f} {run['ms_per_report']:>9.1f} {run['load']:>5.2f} "
          f"{run['max_load']:>8.2f} {run['wait_p50_ms']:>8.0f} {run['wait_p99_ms']:>8.0f} {run['wait_mean_ms']:>5.0f}",
          flush=True)


if __name__ == "__main__":
    main()
