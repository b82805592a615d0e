"""A compact progress table for Tune grids (`kappa-rllib tune`).

Tune's own output prints every trial's whole RLlib config (~170 settings) when it starts and
repeats wide status tables; for a grid that drowns the progress. This callback prints one table:
the grid's axes (kappa, C_FA, seed, ...), then status, iterations, env steps, the latest mean
episode return and run time, at most every `interval_s` seconds (when something changed) and once
at the end of the grid, plus one line per trial error. The full configs stay in each trial's
params.json. With `eta` (a grid whose trials stop when their `total_env_steps` are used up), the
head line also says how many of the grid's env steps are done and how long the rest takes at the
pace measured since this run (or resume) began.
"""

from __future__ import annotations

import math
import time

from ray.tune import Callback

from kappa_rllib.envs import display_id


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return display_id(value)


def _count(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e4 else f"{n:,.0f}"


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    return "<1 min" if minutes < 1 else f"~{minutes:.0f} min" if minutes < 120 else f"~{minutes / 60:.1f} h"


class CompactProgress(Callback):
    def __init__(self, grid_name: str, axes: list[str], interval_s: float = 60.0, out=print, eta: bool = False,
                 clock=time.time):
        self.grid_name, self.axes, self.interval_s, self.out = grid_name, list(axes), interval_s, out
        self.eta, self.clock = eta, clock
        self.latest: dict[str, dict] = {}  # trial id -> {"iter", "env_steps", "return", "time"}
        self.first: dict[str, tuple] = {}  # trial id -> (clock, env steps) of its first result in this run
        self.started = self.last_print = clock()
        self.changed = False

    # --- Tune's hooks (driver side) ---
    def setup(self, **info):
        self.started = self.last_print = self.clock()  # also after a restore (the callback is pickled)
        self.first = {}

    def on_trial_result(self, iteration, trials, trial, result, **info):
        runners = result.get("env_runners", {}) or {}
        env_steps = int(runners.get("num_env_steps_sampled_lifetime", 0) or 0)
        self.first.setdefault(trial.trial_id, (self.clock(), env_steps))
        self.latest[trial.trial_id] = {
            "iter": result.get("training_iteration", 0),
            "env_steps": env_steps,
            "return": runners.get("episode_return_mean", float("nan")),
            "time": result.get("time_total_s", 0.0),
        }
        self.changed = True

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.changed = True

    def on_trial_error(self, iteration, trials, trial, **info):
        self.out(f"[tune] {self.grid_name}: trial {self._label(trial)} failed; error file {trial.error_file}")
        self.changed = True

    def on_step_end(self, iteration, trials, **info):
        if self.changed and self.clock() - self.last_print >= self.interval_s:
            self.out(self.table(trials))
            self.last_print, self.changed = self.clock(), False

    def on_experiment_end(self, trials, **info):
        self.out(self.table(trials))

    # --- the table ---
    def _label(self, trial) -> str:
        params = getattr(trial, "evaluated_params", {}) or {}
        return ", ".join(f"{k} {_cell(v)}" for k, v in params.items()) or trial.trial_id

    def _eta(self, trials) -> str:
        """'; D of T env steps, ~M min left at this pace': T sums every trial's total_env_steps, D the
        env steps each reached; the time left is for the trials still to run (not a failed one's
        rest), at the env steps gained since each trial's first result of this run over the time
        since the earliest one. Empty without `eta`, before any progress, or when a trial's total
        is unknown."""
        if not self.eta:
            return ""
        done = total = left = 0
        for t in trials:
            config = getattr(t, "config", None)
            steps = config.get("total_env_steps") if isinstance(config, dict) else None
            if not isinstance(steps, (int, float)) or steps <= 0:
                return ""
            total += steps
            reached = steps if t.status == "TERMINATED" else min(self.latest.get(t.trial_id, {}).get("env_steps", 0), steps)
            done += reached
            left += 0 if t.status in ("TERMINATED", "ERROR") else steps - reached
        gained = sum(self.latest[i]["env_steps"] - s for i, (_, s) in self.first.items())
        elapsed = self.clock() - min((c for c, _ in self.first.values()), default=self.clock())
        text = f"; {_count(done)} of {_count(total)} env steps"
        if left > 0 and gained > 0 and elapsed > 0:
            text += f", {_duration(left / (gained / elapsed))} left at this pace"
        return text

    def table(self, trials) -> str:
        counts: dict[str, int] = {}
        for t in trials:
            counts[t.status] = counts.get(t.status, 0) + 1
        head = (f"[tune] {self.grid_name} after {self.clock() - self.started:.0f} s: "
                + ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items())) + self._eta(trials))
        columns = self.axes + ["status", "iter", "env steps", "return", "time s"]
        rows = []
        for t in trials:
            # a population's member shows the settings it runs with now (PBT / PB2 change them)
            params = {**(getattr(t, "evaluated_params", {}) or {}),
                      **{a: t.config[a] for a in self.axes if isinstance(getattr(t, "config", None), dict) and a in t.config}}
            latest = self.latest.get(t.trial_id, {})
            ret = latest.get("return", float("nan"))
            rows.append([_cell(params.get(a, "-")) for a in self.axes] + [
                t.status.lower(), str(latest.get("iter", 0)), f"{latest.get('env_steps', 0):,}",
                "-" if ret is None or (isinstance(ret, float) and math.isnan(ret)) else f"{ret:.1f}",
                f"{latest.get('time', 0.0):.0f}"])
        widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
        lines = [head, "  ".join(c.rjust(w) for c, w in zip(columns, widths))]
        lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
        return "\n".join(lines)
