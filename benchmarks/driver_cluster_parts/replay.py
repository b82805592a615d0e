"""A light trial for benchmarks/driver_cluster.py: it replays recorded kappa-PI-TRPO result rows, so a Tune
driver handles what it handles for real trials (the same rows, the same `config`) while the trials cost the
machine next to nothing.

* `ReplayTrainable`: a Tune Trainable whose `step()` sleeps `replay_interval_s` and returns the next row of
  kappa_pi_trpo_rows.jsonl.gz (250 rows of a real 2M-step HalfCheetah kappa-PI-TRPO trial, kappa 0, every 4th
  of its first 1,000, without the keys Tune fills in itself: `config`, `timestamp`, `trial_id`, ...; cycled),
  plus `replay/step_start` and `replay/step_end`: the trainable's own clock (time.time()) when that step()
  began and ended, so the wait between two train() calls is measured without Tune's whole-second timestamps.
  It reports `done` at the wall time `replay_until` (time.time(); one deadline for all the trials of a run,
  however late Tune started each; the grid's stop rule, SCHEDULE_STOP, ends it there) and checkpoints like a real trial when Tune asks (`--checkpoint-every`, and at the end), a small one.
* `ReplayConfig`: the stand-in for an RLlib AlgorithmConfig that `kappa-rllib tune` (kappa_rllib.experiments.Grid,
  kappa_rllib.tuning.driver) needs: `algo_class` (the trainable), `env`, `total_env_steps`, `to_dict()` (Tune's
  param space: a real trial's params.json, kappa_pi_trpo_params.json, with a seed axis of `trials` values and the
  replay settings), `update_from_dict` and `validate` (Grid.validate). So each trial's `config` is as big as a
  real one's (~13.5 KB of JSON), and it reaches the rows as a real trial's does: Tune adds it to every row,
  and `ConfigOnceMixin` keeps it only on a stretch's first two rows (kappa_rllib.tuning.config_once); with the
  grid's `config_every_row` (the benchmark's --compare) on every row, as before that.
* `replay_grid(...)`: the Grid a benchmark's experiment file returns.

Trial workers import this module as `driver_cluster_parts.replay`: benchmarks/ must be on their PYTHONPATH
(driver_cluster.py starts the Ray head with it).
"""

from __future__ import annotations

import copy
import gzip
import json
import time
from pathlib import Path

from ray import tune
from ray.tune.tune import _Config

from kappa_rllib.tuning.config_once import ConfigOnceMixin

HERE = Path(__file__).resolve().parent
ROWS = HERE / "kappa_pi_trpo_rows.jsonl.gz"
PARAMS = HERE / "kappa_pi_trpo_params.json"


def load_rows(path: Path = ROWS) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


class ReplayTrainable(ConfigOnceMixin, tune.Trainable):
    """Replays recorded result rows, one per `step()`, `replay_interval_s` apart; its `config` in the rows as this
    package's Algorithms report it (kappa_rllib.tuning.config_once)."""

    def setup(self, config):
        self.interval_s = float(config["replay_interval_s"])
        self.until = float(config["replay_until"])
        self.rows = load_rows()
        self.index = 0  # the next row (cycled)

    def step(self):
        start = time.time()
        time.sleep(self.interval_s)
        row = copy.deepcopy(self.rows[self.index % len(self.rows)])
        self.index += 1
        end = time.time()
        row["replay"] = {"step_start": start, "step_end": end, "interval_s": self.interval_s}
        row["done"] = end >= self.until
        return row

    def get_auto_filled_metrics(self, *args, **kwargs):
        if self.config.get("replay_config_every_row"):  # what every trial reported before config_once
            return tune.Trainable.get_auto_filled_metrics(self, *args, **kwargs)
        return super().get_auto_filled_metrics(*args, **kwargs)

    def save_checkpoint(self, checkpoint_dir):
        Path(checkpoint_dir, "replay.json").write_text(json.dumps({"index": self.index}))

    def load_checkpoint(self, checkpoint):
        self.index = json.loads(Path(checkpoint, "replay.json").read_text())["index"]

    @classmethod
    def get_default_config(cls):
        return ReplayConfig()


class ReplayConfig(_Config):
    """What the driver reads of an AlgorithmConfig, over a real trial's settings (see the module docstring)."""

    algo_class = ReplayTrainable

    def __init__(self, settings: dict | None = None):
        self.settings = json.loads(PARAMS.read_text()) if settings is None else settings

    @property
    def env(self):
        return self.settings.get("env")

    @property
    def total_env_steps(self):
        return self.settings.get("total_env_steps")

    def to_dict(self) -> dict:
        return copy.deepcopy(self.settings)

    def update_from_dict(self, settings: dict) -> ReplayConfig:
        self.settings.update(settings)
        return self

    def validate(self) -> None:
        if "replay_interval_s" in self.settings and not float(self.settings["replay_interval_s"]) > 0:
            raise ValueError(f"replay_interval_s must be > 0, got {self.settings['replay_interval_s']!r}")


def replay_grid(name: str, *, trials: int, interval_s: float, until: float, config_every_row: bool = False):
    """A grid of `trials` replaying trials (a seed axis), each reporting every `interval_s` until the wall
    time `until` (time.time()); `config_every_row`: Tune's `config` on every row, as before config_once."""
    from kappa_rllib.experiments import Grid

    config = ReplayConfig()
    config.settings.update(seed=tune.grid_search(list(range(trials))), replay_interval_s=interval_s,
                           replay_until=until)
    if config_every_row:
        config.settings["replay_config_every_row"] = True
    return Grid(name, config)
