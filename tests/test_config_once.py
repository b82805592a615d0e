"""A trial reports its config once a stretch of training (kappa_rllib.tuning.config_once): on the first row
after a start or a restore, and where it changed; the rows between leave it out (the driver's cost per report,
docs/experiments.md). Driven the ways Tune drives a trial: train(), save(), restore() in place and into a new
actor, reset_config."""

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
    rows = [t.train() for _ in range(3)]
    assert [r["count"] for r in rows] == [1, 2, 3]
    assert configs(rows)[1:] == [None, None] and rows[0]["config"]["lr"] == 0.1
    # every other key Tune fills in is on every row
    assert {k for k in rows[0] if k != "config"} == set(rows[1]) == set(rows[2])

    t.config["lr"] = 0.2  # changed in place (PBT's explore on a plain Trainable's dict)
    rows = [t.train() for _ in range(2)]
    assert rows[0]["config"]["lr"] == 0.2 and "config" not in rows[1]

    saved = t.save(str(tmp_path / "a"))
    t.restore(saved)  # a restore in place (Tune's PBT with reused actors)
    rows = [t.train() for _ in range(2)]
    assert rows[0]["iterations_since_restore"] == 1 and rows[0]["config"]["lr"] == 0.2 and "config" not in rows[1]

    again = Counter(config={"lr": 0.2})  # a new actor (a retry, --resume)
    again.restore(saved)
    rows = [again.train() for _ in range(2)]
    assert rows[0]["count"] == 6 and rows[0]["config"] == {"lr": 0.2} and "config" not in rows[1]

    assert again.reset({"lr": 0.3})  # Tune reusing the actor for another trial
    rows = [again.train() for _ in range(2)]
    assert rows[0]["config"] == {"lr": 0.3} and "config" not in rows[1]
    t.stop()
    again.stop()


def test_a_kappa_algorithm_reports_rllibs_config_dict_once_a_stretch(ray_local, tmp_path):
    config = KappaPITRPOConfig().environment("CartPole-v1").training(
        kappa=0.9, c_fa=0.3, total_env_steps=128 * 26, train_batch_size=128).debugging(seed=0)
    algo = config.build_algo()
    rows = [algo.train() for _ in range(3)]
    assert rows[0]["config"] == algo.config.to_dict() and rows[0]["config"]["kappa"] == 0.9
    assert configs(rows)[1:] == [None, None]
    saved = algo.save(str(tmp_path / "ckpt"))
    algo.restore(saved)
    rows = [algo.train() for _ in range(2)]
    assert rows[0]["config"] == algo.config.to_dict() and "config" not in rows[1]
    assert rows[1]["kappa"]["batches"] == 5
    algo.stop()


def test_a_config_that_cannot_be_compared_is_on_every_row():
    t = Counter(config={"lr": 0.1, "env_config": {"obs": np.zeros(2)}})  # ndarray == ndarray is no bool
    assert all(r["config"]["lr"] == 0.1 for r in [t.train() for _ in range(3)])
    t.stop()
