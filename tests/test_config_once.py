"""A trial reports its config once a stretch of training (kappa_rllib.tuning.config_once): on the first two
rows after a start or a restore, and where it changed; the rows between leave it out (the driver's cost per report,
docs/experiments.md). Driven the ways Tune drives a trial: train(), save(), restore() in place and into a new
actor, reset_config."""

from pathlib import Path

import numpy as np
from ray import tune

from kappa_rllib import KappaPITRPOConfig
from kappa_rllib.tuning.config_once import ConfigOnceMixin


class Counter(ConfigOnceMixin, tune.Trainable):
    def setup(self, config):
        self.count = 0

    def step(self):
        self.count += 1
        return {"count": self.count}

    def save_checkpoint(self, checkpoint_dir):
        return {"count": self.count}

    def load_checkpoint(self, checkpoint):
        self.count = checkpoint["count"]

    def reset_config(self, new_config):
        return True


def configs(rows):
    return [row.get("config") for row in rows]


def test_a_trainable_reports_its_config_on_a_stretchs_first_row_and_when_it_changes(tmp_path):
    t = Counter(config={"lr": 0.1, "env_config": {"obs": [0.0, 0.0]}})
    rows = [t.train() for _ in range(4)]
    assert [r["count"] for r in rows] == [1, 2, 3, 4]
    assert configs(rows)[2:] == [None, None] and rows[0]["config"]["lr"] == rows[1]["config"]["lr"] == 0.1
    # every other key Tune fills in is on every row
    assert {k for k in rows[0] if k != "config"} == set(rows[2]) == set(rows[3])

    t.config["lr"] = 0.2  # changed in place (PBT's explore on a plain Trainable's dict)
    rows = [t.train() for _ in range(2)]
    assert rows[0]["config"]["lr"] == 0.2 and "config" not in rows[1]

    saved = t.save(str(tmp_path / "a"))
    t.restore(saved)  # a restore in place (Tune's PBT with reused actors)
    rows = [t.train() for _ in range(3)]
    assert rows[0]["iterations_since_restore"] == 1 and configs(rows) == [t.config, t.config, None]

    again = Counter(config={"lr": 0.2})  # a new actor (a retry, --resume)
    again.restore(saved)
    rows = [again.train() for _ in range(3)]
    assert rows[0]["count"] == 7 and configs(rows) == [{"lr": 0.2}, {"lr": 0.2}, None]

    assert again.reset({"lr": 0.3})  # Tune reusing the actor for another trial
    rows = [again.train() for _ in range(3)]
    assert configs(rows) == [{"lr": 0.3}, {"lr": 0.3}, None]
    t.stop()
    again.stop()


def test_a_kappa_algorithm_reports_rllibs_config_dict_once_a_stretch(ray_local, tmp_path):
    config = KappaPITRPOConfig().environment("CartPole-v1").training(
        kappa=0.9, c_fa=0.3, total_env_steps=128 * 26, train_batch_size=128).debugging(seed=0)
    algo = config.build_algo()
    rows = [algo.train() for _ in range(3)]
    assert rows[0]["config"] == rows[1]["config"] == algo.config.to_dict() and rows[0]["config"]["kappa"] == 0.9
    assert "config" not in rows[2]
    saved = algo.save(str(tmp_path / "ckpt"))
    algo.restore(saved)
    rows = [algo.train() for _ in range(3)]
    assert rows[0]["config"] == rows[1]["config"] == algo.config.to_dict() and "config" not in rows[2]
    assert rows[2]["kappa"]["batches"] == 6
    algo.stop()


def test_a_config_that_cannot_be_compared_is_on_every_row():
    t = Counter(config={"lr": 0.1, "env_config": {"obs": np.zeros(2)}})  # ndarray == ndarray is no bool
    assert all(r["config"]["lr"] == 0.1 for r in [t.train() for _ in range(3)])
    t.stop()


def test_tunes_result_has_the_config_the_files_leave_out(ray_local, tmp_path):
    """Driven by Tune with kappa-rllib tune's loggers and ConfigOnLastResult last: ResultGrid's Result.config
    (Tune reads it from the trial's last result) is the trial's config; result.json has it on two rows of four."""
    import json

    from ray.tune import RunConfig

    from kappa_rllib.tuning.config_once import ConfigOnLastResult
    from kappa_rllib.tuning.tracking import tune_loggers

    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Counter: its workers cannot import tests/
    tuner = tune.Tuner(Counter, param_space={"lr": tune.grid_search([0.1, 0.2])},
                       run_config=RunConfig(name="once", storage_path=str(tmp_path), stop={"training_iteration": 4},
                                            callbacks=tune_loggers() + [ConfigOnLastResult()], verbose=0))
    results = tuner.fit()
    assert sorted(r.config["lr"] for r in results) == [0.1, 0.2] and not results.errors
    for r in results:
        rows = [json.loads(line) for line in (Path(r.path) / "result.json").read_text().splitlines()]
        assert [("config" in row) for row in rows] == [True, True, False, False]
        assert rows[0]["config"] == r.config == json.loads((Path(r.path) / "params.json").read_text())
