"""A trial's `config` in its result rows once per stretch of training, not in every row.

Tune's `Trainable.get_auto_filled_metrics` puts the trial's whole config into every result (RLlib's
`Algorithm` turns its AlgorithmConfig into a dict for it, each iteration): ~13.5 KB of a kappa-PI-TRPO row's
~16 KB. The driver then pays for it on every report: Ray's transfer of the row, the controller flattening it
for its checks, stoppers and schedulers, the JSON and CSV loggers, and the syncs' copies of result.json (docs/experiments.md, "How many trials
one driver feeds", has the benchmark).

Compact rows are the project's own driver's choice, never a default: a trial whose config sets
`compact_result_rows` (`COMPACT`; `kappa-rllib tune` sets it in each grid's param space, `compact()`) gets them,
and every other run (`Algorithm.train()` in a script, a plain `tune.Tuner(KappaPIDQN, param_space=config)`) keeps
the whole `config` on every row, as RLlib's own algorithms do: RLlib's `check_train_results_new_api_stack` and
Tune's `Result.config` / `metrics_dataframe["config/..."]` then read it on every row.

`ConfigOnceMixin`, mixed into this package's Algorithms (and the driver benchmark's replay trainable), keeps
(where the trial's config opts in) the whole `config` on the first two rows of every stretch of training (a start, a restore from a checkpoint:
Tune counts `iterations_since_restore` from 1 there; a `reset_config`; two, so that a row cut short by a kill or
a full disk does not take a stretch's only copy) and on any row whose config differs from the one last
reported, and leaves it out of every other row. A stretch's first two rows also say which library versions the
trial ran with (kappa_rllib.versions; in result.json, not progress.csv: tracking.loggers.RowsCSV).

On the driver, around Tune's loggers (`around_loggers`, as `kappa-rllib tune` runs them):

* `ConfigAxes`, before the loggers, gives each row without `config` the trial's axes there: every setting that
  tells the grid's trials apart (seed, kappa, C_FA, lambda, gamma, env, ...: what Tune resolved for the trial,
  and a population's mutations), with the values of the config the trial last reported, a few hundred bytes;
  and the trial's last row (Tune's `done`) its whole config. So every row of result.json and progress.csv
  says which trial it is, and Tune's per-row views have the axes on every row (`Result.metrics_dataframe`,
  `ExperimentAnalysis.trial_dataframes`: `config/seed`, `config/kappa`, ... on every row, so
  `pd.concat(r.metrics_dataframe for r in results).groupby("config/kappa")` keeps every row) and
  `Result.from_path(trial_dir).config` (the last row's) is the trial's whole config (each row also gets Tune's
  `checkpoint_dir_name`, None, which a class Trainable's rows lack and `Result.from_path` needs).
* `ConfigOnLastResult`, the callbacks' last, puts the trial's whole config (`Trial.config`, its params.json)
  onto the result Tune keeps as the trial's last: so `ResultGrid`'s `Result.config` and Tune's progress
  reporters have it, and the files do not. Tune's `update_last_result` leaves `config` out of its metric
  statistics, so it costs the driver a reference per report, and its place in each experiment-state snapshot.

Reading the files: a row's `config` is the trial's whole config where it has more than the axes; a row with
the axes only has the whole config of the last row of its trial that has one, with those axes (result.json is
written in the order the rows came): `kappa_rllib.report.load` merges it forward that way, where it tells a PBT
member's exploit from a resume. What else reads a trial's config reads `Trial.config` (params.json, the
trackers, PBT / PB2).

Not covered (compact rows only): the rows' other settings in Tune's per-row views (`config/lr` of a trial whose lr is no axis: on a
stretch's first two rows and its last only; params.json and `Result.config` have them); the last row of a
trial that errored or was stopped by a Ctrl-C or a lost driver (its axes, not the whole config: then
`Result.from_path(trial_dir).config` is the axes; `Result.config` of a ResultGrid and params.json are whole);
the checkpoints' metrics (the trainable's last row).
"""

from __future__ import annotations

from ray.tune import Callback

from kappa_rllib import versions

CONFIG = "config"  # ray.tune.result.CONFIG_PREFIX, the key Tune fills in
FIRST_ROWS = 2  # a stretch's rows that carry it, whatever
CHECKPOINT_DIR_NAME = "checkpoint_dir_name"  # ray.train.constants.CHECKPOINT_DIR_NAME
COMPACT = "compact_result_rows"  # a config key: the trial's rows leave its config out (the driver's opt-in)


def compact(config) -> dict:
    """`config` (an AlgorithmConfig, or anything with `to_dict()`, or a param-space dict) as the param-space dict Tune
    makes of it (`Tuner` calls `to_dict()`), with `COMPACT` set; the caller's config is untouched."""
    space = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    space[COMPACT] = True
    return space


class ConfigOnceMixin:
    """`get_auto_filled_metrics` without `config` where the trial's config sets `COMPACT`, except on a stretch's
    first rows or when it changed; with it on every row otherwise (RLlib's and Tune's habit)."""

    _config_reported = None  # (trial_id, config) of the last row that carried it

    def get_auto_filled_metrics(self, now=None, time_this_iter=None, timestamp=None, debug_metrics_only=False):
        filled = super().get_auto_filled_metrics(now, time_this_iter, timestamp, debug_metrics_only)
        if CONFIG not in filled:
            return filled
        config, trial_id = filled[CONFIG], filled.get("trial_id")
        first = filled.get("iterations_since_restore", 1) <= FIRST_ROWS
        if first:  # what it ran with, beside the config (two rows: a row cut short does not take the only copy)
            filled[versions.KEY] = versions.libraries()
        if not (isinstance(config, dict) and config.get(COMPACT)):  # not opted in: RLlib's rows, config on each
            return filled
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


def around_loggers(loggers: list, axes=()) -> list:
    """Tune's loggers of a grid's trials between this module's two callbacks: `ConfigAxes(axes)` before them (what
    the files get), `ConfigOnLastResult` after them (what Tune keeps). `axes`: settings a population moves (its
    mutations' keys), over the axes Tune resolved for each trial."""
    return [ConfigAxes(axes), *loggers, ConfigOnLastResult()]


class ConfigAxes(Callback):
    """A Tune callback before the loggers: every row a trial reports without `config` gets its axes there (the
    settings that tell the grid's trials apart, `axes_of`) with the values of the config the trial last reported
    (on a stretch's first rows, or where it changed: so a PBT member's row carries the kappa it was produced with,
    not the one an exploit decided since), and its last row (Tune's `done`: the trial's own, or Tune's stop rule,
    or a scheduler's stop) the trial's whole config (`Trial.config`, its params.json): Tune's `Result.from_path`
    reads the config from a trial's last row. A few hundred bytes a row; what the driver keeps: the axes'
    values per trial. Also Tune's `checkpoint_dir_name` (None) on each row without it, as Tune's function trainables
    write it: `Result.from_path` raises a KeyError without that column wherever a trial folder has checkpoints."""

    def __init__(self, axes=()):
        self._more = tuple(axes)
        self._values = {}  # trial_id -> {axis: value} of the config the trial last reported

    def on_trial_result(self, iteration, trials, trial, result, **info):
        # Tune's Result.from_path looks each checkpoint folder up in this column, which a class Trainable's rows lack
        # (a KeyError wherever a trial has checkpoints): None, no checkpoint reported with the row (Tune saves one after)
        result.setdefault(CHECKPOINT_DIR_NAME, None)
        config = result.get(CONFIG)
        if config is not None:  # the trainable reported it (a stretch's first rows, or a change)
            self._values[trial.trial_id] = _values(config, trial, self._more)
        elif result.get("done"):  # the trial's last row
            result[CONFIG] = trial.config
        else:
            values = self._values.get(trial.trial_id)
            if values is None:  # none reported since this driver started: the trial's own
                values = self._values[trial.trial_id] = _values(trial.config, trial, self._more)
            if values:  # (a grid of one trial has none)
                result[CONFIG] = _nested(values)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._values.pop(trial.trial_id, None)

    on_trial_error = on_trial_complete


def axes_of(trial, more=()) -> list[str]:
    """What tells a trial apart from the others of its grid: the settings Tune resolved for it (its
    `evaluated_params`: a grid_search's axes, a search space's samples, a PB2's bounds, "/"-joined where nested)
    and `more` (a PBT's mutations, which Tune lists there only where the config lacked them)."""
    return list(dict.fromkeys([*trial.evaluated_params, *more]))


_MISSING = object()


def _values(config, trial, more) -> dict:
    """The trial's axes' values in `config` (what it reported), those it lacks from `Trial.config`."""
    keys = axes_of(trial, more)
    values = _pick(config, keys)
    if len(values) < len(keys) and config is not trial.config:
        values = {**_pick(trial.config, [k for k in keys if k not in values]), **values}
    return values


def _pick(config, keys) -> dict:
    """{key: value} of `config` at each of `keys` ("a/b": config["a"]["b"]) that it has."""
    out = {}
    if not isinstance(config, dict):
        return out
    for key in keys:
        value = config.get(key, _MISSING)
        if value is _MISSING and "/" in key:
            value = config
            for part in key.split("/"):
                value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
                if value is _MISSING:
                    break
        if value is not _MISSING:
            out[key] = value
    return out


def _nested(values: dict) -> dict:
    """`_pick`'s {key: value} as a config: "a/b" under "a" (a new dict each time: a row's own)."""
    out = {}
    for key, value in values.items():
        if "/" in key and key not in out:
            *parents, leaf = key.split("/")
            node = out
            for parent in parents:
                node = node.setdefault(parent, {})
                if not isinstance(node, dict):
                    break
            else:
                node[leaf] = value
                continue
        out[key] = value
    return out


class ConfigOnLastResult(Callback):
    """A Tune callback: the trial's whole config (`Trial.config`) onto each result, after the loggers have written
    the row (so it is the callbacks' last), before Tune keeps it as the trial's last result (`Result.config`)."""

    def on_trial_result(self, iteration, trials, trial, result, **info):
        result[CONFIG] = trial.config
