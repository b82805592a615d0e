"""One compact progress view for a grid file (`kappa-rllib tune`), whose grids run together.

Tune's own output prints every trial's whole RLlib config (~170 settings) when it starts and repeats
wide status tables per grid; for a file of several grids that drowns the progress. Here each grid's
Tune run gets a `GridProgress` callback that keeps its trials' latest results, and `FileProgress`
prints one block for the whole file, at most every `interval_s` seconds (when something changed) and
once at the end: a head line for the file, then one line per grid (running, pending, done, failed,
env steps, the mean of its trials' latest mean returns), plus one line per trial error when it
happens. The full configs stay in each trial's params.json.

With `eta` (grids whose trials stop when their `total_env_steps` are used up), the lines also say how
many env steps are done, and the head line how long the rest takes at the pace measured since this
run (or resume) began.
"""

from __future__ import annotations

import math
import threading
import time

from ray.tune import Callback

from kappa_rllib.envs import display_id

_STATES = ("RUNNING", "PENDING", "TERMINATED", "ERROR")  # Tune's trial statuses (PAUSED counts as pending)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return display_id(value)


def _count(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e4 else f"{n:,.0f}"


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    return "<1 min" if minutes < 1 else f"~{minutes:.0f} min" if minutes < 120 else f"~{minutes / 60:.1f} h"


class GridProgress(Callback):
    """One grid's trials as its Tune run sees them (driver side): their statuses and latest results.

    `num_trials` and `total_env_steps` (a trial's T, or None where unknown) let the view count trials
    Tune has not made yet and the env steps still to run. Without a `FileProgress` to print it (a grid
    whose Tune run went to the cluster's head with Ray Client, where this callback arrives pickled), it
    prints its own line every `interval_s`."""

    def __init__(self, name: str, num_trials: int, total_env_steps: float | None = None, *, file=None,
                 interval_s: float = 60.0, out=print, clock=time.time):
        self.name, self.num_trials, self.total_env_steps = name, num_trials, total_env_steps
        self.file, self.interval_s, self.out, self.clock = file, interval_s, out, clock
        self.trials: list = []  # Tune's Trial objects, as of its last step
        self.latest: dict[str, dict] = {}  # trial id -> {"env_steps", "return"}
        self.first: dict[str, tuple] = {}  # trial id -> (clock, env steps) of its first result in this run
        self.last_print = clock()
        self.changed = False

    def __getstate__(self):  # Tune pickles its callbacks with the run's settings: not the file's view
        return {**self.__dict__, "file": None, "out": print, "clock": time.time}

    # --- Tune's hooks ---
    def setup(self, **info):
        self.last_print, self.first = self.clock(), {}

    def on_trial_result(self, iteration, trials, trial, result, **info):
        runners = result.get("env_runners", {}) or {}
        env_steps = int(runners.get("num_env_steps_sampled_lifetime", 0) or 0)
        # latest before first: the view (another thread) reads latest for every trial in first
        self.latest[trial.trial_id] = {"env_steps": env_steps,
                                       "return": runners.get("episode_return_mean", float("nan"))}
        self.first.setdefault(trial.trial_id, (self.clock(), env_steps))
        self._changed(trials)

    def on_trial_start(self, iteration, trials, trial, **info):
        self._changed(trials)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._changed(trials)

    def on_trial_error(self, iteration, trials, trial, **info):
        params = getattr(trial, "evaluated_params", {}) or {}
        label = ", ".join(f"{k} {_cell(v)}" for k, v in params.items()) or trial.trial_id
        self._say(f"[tune] {self.name}: trial {label} failed; error file {trial.error_file}")
        self._changed(trials)

    def on_step_end(self, iteration, trials, **info):
        self.trials = list(trials)
        if self.file is None and self.changed and self.clock() - self.last_print >= self.interval_s:
            self.out(self.line())
            self.last_print, self.changed = self.clock(), False

    def on_experiment_end(self, trials, **info):
        self.trials = list(trials)
        if self.file is None:
            self.out(self.line())

    def _changed(self, trials) -> None:
        self.trials, self.changed = list(trials), True
        if self.file is not None:
            self.file.changed = True

    def _say(self, text: str) -> None:
        (self.file.say if self.file is not None else self.out)(text)

    # --- what the view shows ---
    def counts(self) -> dict[str, int]:
        """{status: trials} over RUNNING, PENDING, TERMINATED and ERROR; trials Tune has not made yet
        count as pending."""
        counts = dict.fromkeys(_STATES, 0)
        for t in self.trials:
            counts[t.status if t.status in counts else "PENDING"] += 1
        counts["PENDING"] += max(0, self.num_trials - len(self.trials))
        return counts

    def steps(self) -> tuple[float, float, float] | None:
        """(env steps done, of all, left to run) over the grid's trials; None where a T is unknown. A
        finished trial counts its T as done, a failed one what it reached, with nothing left to run."""
        made = []
        for t in self.trials:
            config = getattr(t, "config", None)
            steps = config.get("total_env_steps") if isinstance(config, dict) else None
            steps = self.total_env_steps if steps is None else steps
            if not isinstance(steps, (int, float)) or steps <= 0:
                return None
            made.append((t, steps))
        unmade = max(0, self.num_trials - len(self.trials))
        if unmade and not isinstance(self.total_env_steps, (int, float)):
            return None
        total = sum(steps for _, steps in made) + unmade * (self.total_env_steps or 0)
        done, left = 0.0, unmade * (self.total_env_steps or 0)
        for t, steps in made:
            reached = steps if t.status == "TERMINATED" else min(self._reached(t), steps)
            done += reached
            left += 0 if t.status in ("TERMINATED", "ERROR") else steps - reached
        return done, total, left

    def _reached(self, trial) -> int:
        """The env steps a trial has reached: its last result this run, else (a resumed trial waiting for its turn)
        the last result Tune restored with it, so a resumed grid's line counts what its stored trials did."""
        latest = self.latest.get(trial.trial_id)
        if latest is not None:
            return latest["env_steps"]
        last = getattr(trial, "last_result", None) or {}
        runners = last.get("env_runners", {}) if isinstance(last, dict) else {}
        return int((runners or {}).get("num_env_steps_sampled_lifetime", 0) or 0)

    def mean_return(self) -> float:
        returns = [v["return"] for v in list(self.latest.values())
                   if isinstance(v.get("return"), (int, float)) and not math.isnan(v["return"])]
        return sum(returns) / len(returns) if returns else float("nan")

    def line(self, width: int = 0) -> str:
        c = self.counts()
        text = (f"{self.name:<{width}}  {c['RUNNING']} running, {c['PENDING']} pending, {c['TERMINATED']} done"
                + (f", {c['ERROR']} failed" if c["ERROR"] else ""))
        steps = self.steps()
        if steps is not None:
            text += f"; {_count(steps[0])} of {_count(steps[1])} env steps"
        ret = self.mean_return()
        if not math.isnan(ret):
            text += f"; return {ret:.1f}"
        return f"[tune]   {text}" if self.file is not None else f"[tune] {text}"


class FileProgress:
    """The view of a whole file: `callback(grid)` gives each grid's Tune run its `GridProgress`;
    `poll()` (from the driver's main thread) prints the block when something changed and `interval_s`
    has passed; `final()` prints it once more at the end. `eta`: the head line says the time left."""

    def __init__(self, name: str, interval_s: float = 60.0, out=print, eta: bool = False, clock=time.time):
        self.name, self.interval_s, self.out, self.eta, self.clock = name, interval_s, out, eta, clock
        self.grids: list[GridProgress] = []
        self.started = self.last_print = clock()
        self.changed = False
        self.lock = threading.Lock()  # the grids' Tune runs call back from their own threads

    def callback(self, name: str, num_trials: int, total_env_steps=None) -> GridProgress:
        grid = GridProgress(name, num_trials, total_env_steps, file=self, clock=self.clock)
        self.grids.append(grid)
        return grid

    def say(self, text: str) -> None:
        with self.lock:
            self.out(text)

    def poll(self) -> None:
        if self.changed and self.clock() - self.last_print >= self.interval_s:
            self.changed = False
            self.last_print = self.clock()
            self.say(self.view())

    def final(self) -> None:
        self.say(self.view())

    def _eta(self) -> str:
        """'; D of T env steps, ~M min left at this pace': over every grid, the time left for the trials
        still to run at the env steps gained since each trial's first result of this run over the time
        since the earliest one. Empty without `eta`, before any progress, or when a T is unknown."""
        if not self.eta:
            return ""
        steps = [g.steps() for g in self.grids]
        if any(s is None for s in steps):
            return ""
        done, total, left = (sum(s[i] for s in steps) for i in range(3))
        # snapshots: the grids' threads add trials while this runs
        firsts = [(g, tid, c, s) for g in self.grids for tid, (c, s) in list(g.first.items())]
        gained = sum(g.latest.get(tid, {}).get("env_steps", s) - s for g, tid, _, s in firsts)
        elapsed = self.clock() - min((c for _, _, c, _ in firsts), default=self.clock())
        text = f"; {_count(done)} of {_count(total)} env steps"
        if left > 0 and gained > 0 and elapsed > 0:
            text += f", {_duration(left / (gained / elapsed))} left at this pace"
        return text

    def view(self) -> str:
        counts = dict.fromkeys(_STATES, 0)
        for g in self.grids:
            for status, n in g.counts().items():
                counts[status] += n
        head = (f"[tune] {self.name} after {self.clock() - self.started:.0f} s: {counts['RUNNING']} running, "
                f"{counts['PENDING']} pending, {counts['TERMINATED']} done"
                + (f", {counts['ERROR']} failed" if counts["ERROR"] else "") + self._eta())
        width = max((len(g.name) for g in self.grids), default=0)
        return "\n".join([head, *(g.line(width) for g in self.grids)])


class CompactProgress(GridProgress):
    """The per-grid progress callback of `kappa-rllib tune` before its grids ran together (2026-11-28).
    Tune pickles a run's callbacks into the grid's `tuner.pkl`, so `--resume` of a grid started by that
    version unpickles this name; the resumed run then uses this version's callbacks. Never made here."""


class WaitBoard:
    """What the file's grids wait for, shared by their ResourceWait callbacks (one driver, a thread per grid):
    the line is the file's, once a minute, while none of its trials runs."""

    def __init__(self, interval_s: float | None = None):
        from kappa_rllib.resources import WAIT_NOTICE_S

        self.interval_s = WAIT_NOTICE_S if interval_s is None else interval_s
        self.lock = threading.Lock()
        self.grids: dict = {}  # grid -> (pending, running, what a pending trial asks for)
        self.since = self.last = None

    def update(self, grid: str, pending: int, running: int, need: dict) -> None:
        import sys

        from kappa_rllib import resources

        with self.lock:
            self.grids[grid] = (pending, running, need)
            now = time.monotonic()
            waiting = sum(p for p, _, _ in self.grids.values())
            if not waiting or any(r for _, r, _ in self.grids.values()):
                self.since = None  # nothing waits, or the file makes progress: Tune's queue, not a wait
                return
            if self.since is None:
                self.since = now
            if now - self.since < self.interval_s or (self.last is not None and now - self.last < self.interval_s):
                return
            import ray

            asks = next(n for p, _, n in self.grids.values() if p)
            if not resources.shortfall(asks, ray.available_resources()):
                return  # it fits: about to start
            self.last = now
            print(f"[tune] no trial running for {now - self.since:.0f} s: {waiting} wait for resources, each asking for "
                  f"{resources.describe(asks)}; {resources.cluster_line(asks)}", file=sys.stderr, flush=True)


class ResourceWait(Callback):
    """A grid's part of the WaitBoard: a line about every minute (kappa_rllib.resources.WAIT_NOTICE_S) while
    the file's trials wait for resources the cluster does not have free (a cluster that adds nodes on
    demand, or one too small), and none of them runs: how many wait, what each asks for, what the cluster
    has free. Trials queued behind running ones, or held back by --max-concurrent, say nothing."""

    def __init__(self, grid_name: str, board: WaitBoard):
        self.grid_name, self.board = grid_name, board

    def __getstate__(self):  # Tune pickles its callbacks with the run (tuner.pkl): the board is this driver's
        return {"grid_name": self.grid_name}

    def __setstate__(self, state):
        self.__init__(state["grid_name"], WaitBoard())

    def on_step_end(self, iteration, trials, **info):
        pending = [t for t in trials if t.status == "PENDING"]
        running = sum(1 for t in trials if t.status == "RUNNING")
        need = dict(pending[0].placement_group_factory.required_resources) if pending else {}
        self.board.update(self.grid_name, len(pending), running, need)
