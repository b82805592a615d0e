"""A compact progress table for Tune grids (`kappa-rllib tune`).

Tune's own output prints every trial's whole RLlib config (~170 settings) when it starts and
repeats wide status tables; for a grid that drowns the progress. This callback prints one table:
the grid's axes (kappa, C_FA, seed, ...), then status, iterations, env steps, the latest mean
episode return and run time, at most every `interval_s` seconds (when something changed) and once
at the end of the grid, plus one line per trial error. The full configs stay in each trial's
params.json.
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


class CompactProgress(Callback):
    def __init__(self, grid_name: str, axes: list[str], interval_s: float = 60.0, out=print):
        self.grid_name, self.axes, self.interval_s, self.out = grid_name, list(axes), interval_s, out
        self.latest: dict[str, dict] = {}  # trial id -> {"iter", "env_steps", "return", "time"}
        self.started = time.time()
        self.last_print = time.time()
        self.changed = False

    # --- Tune's hooks (driver side) ---
    def setup(self, **info):
        self.started = self.last_print = time.time()  # also after a restore (the callback is pickled)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        runners = result.get("env_runners", {}) or {}
        self.latest[trial.trial_id] = {
            "iter": result.get("training_iteration", 0),
            "env_steps": int(runners.get("num_env_steps_sampled_lifetime", 0) or 0),
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
        if self.changed and time.time() - self.last_print >= self.interval_s:
            self.out(self.table(trials))
            self.last_print, self.changed = time.time(), False

    def on_experiment_end(self, trials, **info):
        self.out(self.table(trials))

    # --- the table ---
    def _label(self, trial) -> str:
        params = getattr(trial, "evaluated_params", {}) or {}
        return ", ".join(f"{k} {_cell(v)}" for k, v in params.items()) or trial.trial_id

    def table(self, trials) -> str:
        counts: dict[str, int] = {}
        for t in trials:
            counts[t.status] = counts.get(t.status, 0) + 1
        head = (f"[tune] {self.grid_name} after {time.time() - self.started:.0f} s: "
                + ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items())))
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
