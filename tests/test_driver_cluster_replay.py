"""benchmarks/driver_cluster.py's light trial replays the recorded kappa-PI-TRPO rows as Tune would see them
(no Ray started): the same keys and values row after row (`perf`: Tune's system monitor, as in a real trial), the trainable's own step() times, `done` at its
deadline, a config as big as a real trial's (on a stretch's first two rows, as a real trial reports it), and the grid the driver checks."""

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from driver_cluster_parts.replay import ReplayTrainable, load_rows, replay_grid

from kappa_rllib.tuning.config_once import COMPACT


def test_replays_recorded_rows_with_their_step_times_until_the_deadline(tmp_path):
    recorded = load_rows()
    assert len(recorded) >= 200 and "config" not in recorded[0] and "timestamp" not in recorded[0]
    until = time.time() + 5  # room for a loaded machine to make the trainable and take three rows before it
    grid = replay_grid("replay", trials=3, interval_s=0.01, until=until)
    grid.validate()
    assert grid.num_trials() == 3 and grid.trainable is ReplayTrainable
    config = {**grid.config.to_dict(), "seed": 0, COMPACT: True}  # as kappa-rllib tune's param space has it
    assert len(json.dumps(config)) > 13_000  # a real trial's params.json
    trainable = ReplayTrainable(config=config)
    rows = [trainable.train() for _ in range(3)]
    for row, want in zip(rows, recorded):
        assert {k: row[k] for k in want if k != "perf"} == {k: v for k, v in want.items() if k != "perf"}
        assert row["replay"]["step_end"] - row["replay"]["step_start"] >= 0.01
        assert not row["done"]
    # the config as this package's Algorithms report it under kappa-rllib tune: on the first two rows only
    # (kappa_rllib.tuning.config_once)
    assert rows[0]["config"]["seed"] == 0 and rows[0]["config"] == rows[1]["config"] == config
    assert "config" not in rows[2]
    assert rows[1]["replay"]["step_start"] >= rows[0]["replay"]["step_end"]
    time.sleep(max(0.0, until - time.time()) + 0.05)
    assert trainable.train()["done"]
    saved = trainable.save(str(tmp_path))
    again = ReplayTrainable(config=config)
    again.restore(saved)
    assert again.index == trainable.index
    assert [("config" in again.train()) for _ in range(3)] == [True, True, False]
    trainable.stop()
    again.stop()


@pytest.mark.xdist_group("clusters")  # a Ray head of its own: one cluster at a time (pyproject.toml)
def test_the_drivers_cpu_per_report_is_a_fraction_of_what_it_was_and_each_report_writes_what_is_read(tmp_path):
    """benchmarks/driver_cluster.py on a small emulated grid (100 trials at 5 s: 2 replaying actors reporting
    every 0.1 s, on a `ray start` head): the driver's CPU per report, measured beside the driver as it was before
    (TensorBoard's logger on, Tune's config in every row) in the same test, is at most 0.8 of it (the benchmark
    measured ~0.3; most of the difference is TensorBoard's logger), and under 15 ms (~4 ms on 2 cores). The
    files a report writes are those `report`, `--resume` and the trackers read: result.json with the config on
    a stretch's first two rows only (its size per row guards that; report/load.py carries it to the rest),
    progress.csv, params.json; Tune's state; no TensorBoard events."""
    import driver_cluster as bench

    from kappa_rllib.report.load import _rows
    from kappa_rllib.tuning.repair import TUNE_STATES

    seen = {}

    def inspect(storage: Path):
        trials = sorted(p for p in storage.glob("*/*/*") if p.is_dir())
        assert len(trials) == 2, trials
        for trial in trials:
            files = {p.name for p in trial.iterdir() if p.is_file()}
            assert {"result.json", "progress.csv", "params.json"} <= files, files
            assert not [f for f in files if f.startswith("events.out.tfevents")], files
            lines = (trial / "result.json").read_text().splitlines()
            rows = [json.loads(line) for line in lines]
            params = json.loads((trial / "params.json").read_text())
            assert rows[0]["config"]["seed"] == rows[1]["config"]["seed"] == params["seed"]
            # one stretch (no restore in this run): its axes alone between its first two rows and its last (done)
            assert all(r["config"] == {"seed": params["seed"]} for r in rows[2:-1]) and rows[-1]["config"] == params
            # each row between a stretch's first two and its done row: ~2.6 KB, against ~16 KB with the config
            # (a row at a time: the mean over a file moves with how many rows a loaded machine reported)
            assert lines[2:-1] and max(map(len, lines[2:-1])) < 4_000, sorted(map(len, lines))[-5:]
            assert all(r["config"] == rows[0]["config"] for r in _rows(trial / "result.json", population=False))
            assert len((trial / "progress.csv").read_text().splitlines()) == len(rows) + 1
        states = list(storage.glob(f"*/*/{TUNE_STATES[0][0]}"))  # Tune's experiment state, what --resume reads
        assert states and all(json.loads(p.read_text()) for p in states), states
        seen["inspected"] = True

    head = bench.Head(num_cpus=64)
    try:
        now = bench.run_once(head, 100, 2, 15, 20, 50, tmp_path, inspect=inspect)
        before = bench.run_once(head, 100, 2, 15, 20, 50, tmp_path, **bench.BEFORE)
    finally:
        head.stop()
    print("now", now, "before", before)
    assert seen == {"inspected": True}
    assert now["reports"] >= 100 and before["reports"] >= 100, (now, before)
    assert now["ms_per_report"] <= 0.8 * before["ms_per_report"], (now, before)
    assert now["ms_per_report"] < 15, now
