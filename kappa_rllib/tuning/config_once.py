"""A trial's `config` in its result rows once per stretch of training, not in every row.

Tune's `Trainable.get_auto_filled_metrics` puts the trial's whole config into every result (RLlib's
`Algorithm` turns its AlgorithmConfig into a dict for it, each iteration): ~13.5 KB of a kappa-PI-TRPO row's
~16 KB. The driver then pays for it on every report: Ray's transfer of the row, `Trial.update_last_result`
flattening it and keeping a metric record for each of its numbers, the JSON and CSV loggers, the experiment
state (each trial's last result) and the syncs' copies of result.json (docs/experiments.md, "How many trials
one driver feeds", has the benchmark).

`ConfigOnceMixin`, mixed into this package's Algorithms (and the driver benchmark's replay trainable), keeps
the `config` key on the first row of every stretch of training (a start, a restore from a checkpoint: Tune
counts `iterations_since_restore` from 1 there; a `reset_config`) and on any row whose config differs from the
one last reported, and leaves it out of every other row. A row without `config` has the config of the last
row of its trial that has one (result.json is written in the order the rows came): `kappa_rllib.report.load`
carries it forward that way, where it tells a PBT member's exploit from a resume.

Everything else that reads a trial's config reads Tune's `Trial.config` (params.json, the trackers,
`ResultGrid`'s `Result.config`, Tune's progress table), which this does not touch. Under `tune --verbose`
Tune's "Current best trial" line prints `params={}` on rows without it.
"""

from __future__ import annotations

CONFIG = "config"  # ray.tune.result.CONFIG_PREFIX, the key Tune fills in


class ConfigOnceMixin:
    """`get_auto_filled_metrics` without `config`, except on a stretch's first row or when it changed."""

    _config_reported = None  # (trial_id, config) of the last row that carried it

    def get_auto_filled_metrics(self, now=None, time_this_iter=None, timestamp=None, debug_metrics_only=False):
        filled = super().get_auto_filled_metrics(now, time_this_iter, timestamp, debug_metrics_only)
        if CONFIG not in filled:
            return filled
        config, trial_id = filled[CONFIG], filled.get("trial_id")
        first = filled.get("iterations_since_restore", 1) <= 1
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
