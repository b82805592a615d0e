"""A trial's `config` in its result rows once per stretch of training, not in every row.

Tune's `Trainable.get_auto_filled_metrics` puts the trial's whole config into every result (RLlib's
`Algorithm` turns its AlgorithmConfig into a dict for it, each iteration): ~13.5 KB of a kappa-PI-TRPO row's
~16 KB. The driver then pays for it on every report: Ray's transfer of the row, the controller flattening it
for its checks, stoppers and schedulers, the JSON and CSV loggers, and the syncs' copies of result.json (docs/experiments.md, "How many trials
one driver feeds", has the benchmark).

`ConfigOnceMixin`, mixed into this package's Algorithms (and the driver benchmark's replay trainable), keeps
the `config` key on the first two rows of every stretch of training (a start, a restore from a checkpoint:
Tune counts `iterations_since_restore` from 1 there; a `reset_config`; two, so that a row cut short by a kill or
a full disk does not take a stretch's only copy) and on any row whose config differs from the one last
reported, and leaves it out of every other row. A row without `config` has the config of the last row of its
trial that has one (result.json is written in the order the rows came): `kappa_rllib.report.load` carries it
forward that way, where it tells a PBT member's exploit from a resume.

On the driver, `ConfigOnLastResult`, the last of `kappa-rllib tune`'s callbacks (after the JSON and CSV
loggers), puts the trial's config (`Trial.config`, its params.json) back onto the result Tune keeps as the
trial's last: so `ResultGrid`'s `Result.config` (Tune reads it from the last result) and Tune's progress
reporters have it, and the files do not. Tune's `update_last_result` leaves `config` out of its metric
statistics, so it costs the driver a reference per report, and its place in each experiment-state snapshot.
What else reads a trial's config reads `Trial.config` (params.json, the trackers, PBT / PB2). Not covered:
the checkpoints' metrics (the trainable's last row), and RLlib's test helpers `check_train_results*`, which
assert `config` in every result of `Algorithm.train()`.
"""

from __future__ import annotations

from ray.tune import Callback

CONFIG = "config"  # ray.tune.result.CONFIG_PREFIX, the key Tune fills in
FIRST_ROWS = 2  # a stretch's rows that carry it, whatever


class ConfigOnceMixin:
    """`get_auto_filled_metrics` without `config`, except on a stretch's first rows or when it changed."""

    _config_reported = None  # (trial_id, config) of the last row that carried it

    def get_auto_filled_metrics(self, now=None, time_this_iter=None, timestamp=None, debug_metrics_only=False):
        filled = super().get_auto_filled_metrics(now, time_this_iter, timestamp, debug_metrics_only)
        if CONFIG not in filled:
            return filled
        config, trial_id = filled[CONFIG], filled.get("trial_id")
        first = filled.get("iterations_since_restore", 1) <= FIRST_ROWS
        if first or self._config_reported is None or not _equal((trial_id, config), self._config_reported):
            # a copy: a plain Trainable's config is one dict, which it may change in place
            self._config_reported = (trial_id, _copy(config))
        else:
            del filled[CONFIG]
        return filled


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a value whose == is no bool (a numpy array in an env_config): reported again
        return False


def _copy(config):
    import copy

    try:
        return copy.deepcopy(config)
    except Exception:  # something in it that cannot be copied: then a change in place goes unseen
        return dict(config) if isinstance(config, dict) else config


class ConfigOnLastResult(Callback):
    """A Tune callback: the trial's config onto each result without one, after the loggers have written it
    (so it is the callbacks' last), before Tune keeps it as the trial's last result."""

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if CONFIG not in result:
            result[CONFIG] = trial.config
