"""benchmarks/driver_cluster.py's light trial replays the recorded kappa-PI-TRPO rows as Tune would see them
(no Ray started): the same keys and values row after row (`perf`: Tune's system monitor, as in a real trial), the trainable's own step() times, `done` at its
deadline, a config as big as a real trial's (on a stretch's first row, as a real trial reports it), and the grid the driver checks."""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from driver_cluster_parts.replay import ReplayTrainable, load_rows, replay_grid


def test_replays_recorded_rows_with_their_step_times_until_the_deadline(tmp_path):
    recorded = load_rows()
    assert len(recorded) >= 200 and "config" not in recorded[0] and "timestamp" not in recorded[0]
    grid = replay_grid("replay", trials=3, interval_s=0.01, until=time.time() + 0.3)
    grid.validate()
    assert grid.num_trials() == 3 and grid.trainable is ReplayTrainable
    config = {**grid.config.to_dict(), "seed": 0}
    assert len(json.dumps(config)) > 13_000  # a real trial's params.json
    trainable = ReplayTrainable(config=config)
    rows = [trainable.train() for _ in range(3)]
    for row, want in zip(rows, recorded):
        assert {k: row[k] for k in want if k != "perf"} == {k: v for k, v in want.items() if k != "perf"}
        assert row["replay"]["step_end"] - row["replay"]["step_start"] >= 0.01
        assert not row["done"]
    # the config as this package's Algorithms report it: on the first row only (kappa_rllib.tuning.config_once)
    assert rows[0]["config"]["seed"] == 0 and rows[0]["config"] == config
    assert "config" not in rows[1] and "config" not in rows[2]
    assert rows[1]["replay"]["step_start"] >= rows[0]["replay"]["step_end"]
    time.sleep(0.3)
    assert trainable.train()["done"]
    saved = trainable.save(str(tmp_path))
    again = ReplayTrainable(config=config)
    again.restore(saved)
    assert again.index == trainable.index
    assert again.train()["config"] == config and "config" not in again.train()
    trainable.stop()
    again.stop()
