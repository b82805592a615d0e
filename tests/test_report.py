"""`kappa-rllib report` on a synthetic Tune results folder whose every number is known."""

import csv
import json
import math
import os
import time

import matplotlib.image
import numpy as np
import pytest
from rliable import metrics

from kappa_rllib import report
from kappa_rllib.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Student's t: t_{0.975, n-1} x std / sqrt(n); t_{0.975, 2} = 4.302653 (3 seeds), t_{0.975, 7} = 2.364624 (8)
CI = 4.302653 / math.sqrt(3)  # x std for 3 seeds


def write_trial(root, name, score, *, env, variant=None, kappa=None, c_fa=None, naive=False, gamma=0.99,
                lambda_=None, seed=0, partial_last_line=False, done=True):
    """A Tune trial folder: 4 iterations of 5 episodes; the first 18 episodes return 0 and the
    last 2 (the last 10%) return `score`, so the run's score is exactly `score`."""
    trial = root / name
    trial.mkdir(parents=True)
    params = {"env": env, "gamma": gamma, "seed": seed}
    if variant:
        params.update(kappa=kappa, c_fa=c_fa, naive_schedule=naive)
    if lambda_ is not None or (variant is None):
        params.update({"lambda": 1.0 if lambda_ is None else lambda_, "max_kl": 0.01})
    if variant and env.endswith(("Hopper-v5",)):
        params["max_kl"] = 0.01
    (trial / "params.json").write_text(json.dumps(params))
    returns = [0.0] * 18 + [float(score)] * 2
    lines = []
    for i in range(4):
        chunk = returns[5 * i: 5 * i + 5]
        row = {"training_iteration": i + 1,
               "env_runners": {"episode_returns": chunk, "num_env_steps_sampled_lifetime": 250 * (i + 1),
                               "episode_return_mean": float(np.mean(chunk))}}
        if variant:
            row["kappa"] = {"variant": variant, "iteration": i}
        if i == 3 and done:
            row["done"] = True
        lines.append(json.dumps(row))
    text = "\n".join(lines) + "\n"
    if partial_last_line:
        text += '{"training_iteration": 5, "env_runners": {"episode_ret'  # killed mid-write
    (trial / "result.json").write_text(text)


BREAKOUT = "kappa_rllib:ALE/Breakout-v5"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("tune")
    n = 0

    def cell(scores, **kw):
        nonlocal n
        for seed, s in enumerate(scores):
            n += 1
            write_trial(root / "grid", f"trial_{n:03d}", s, seed=seed, **kw)

    # Breakout, C_FA 0.05 (the paper's Table 1 setting)
    cell([200, 210, 220], env=BREAKOUT, variant="pi", kappa=0.84, c_fa=0.05, partial_last_line=True)
    cell([999], env=BREAKOUT, variant="pi", kappa=0.84, c_fa=0.05, done=False)  # still running: left out
    cell([150, 160, 170], env=BREAKOUT, variant="pi", kappa=0.68, c_fa=0.05)
    cell([100, 110, 120], env=BREAKOUT, variant="pi", kappa=0.0, c_fa=0.05)
    cell([180, 185, 190], env=BREAKOUT, variant="vi", kappa=0.84, c_fa=0.05)
    cell([90, 95, 100], env=BREAKOUT, variant="vi", kappa=0.0, c_fa=0.05)
    cell([130, 135, 140], env=BREAKOUT, variant="pi", kappa=1.0, c_fa=0.05)  # DQN
    cell([160, 165, 170], env=BREAKOUT, variant="pi", kappa=0.68, c_fa=0.05, naive=True)
    cell([150, 150, 150], env=BREAKOUT, variant="pi", kappa=0.84, c_fa=0.05, naive=True)
    # Breakout, C_FA 0.2: a second column of the heat-map
    cell([100, 100, 110], env=BREAKOUT, variant="pi", kappa=0.84, c_fa=0.2)
    cell([90, 95, 100], env=BREAKOUT, variant="pi", kappa=0.68, c_fa=0.2)
    # DQN at a lower gamma
    cell([50, 60, 70], env=BREAKOUT, variant="pi", kappa=1.0, c_fa=0.05, gamma=0.84)
    # Hopper: kappa-PI-TRPO (8 seeds, one outlier), TRPO, GAE
    cell([1300, 1350, 1400, 1450, 1500, 1550, 1600, 5000], env="Hopper-v5", variant="pi", kappa=0.68, c_fa=0.2)
    cell([1000, 1100, 1200], env="Hopper-v5")
    cell([1250, 1350, 1450], env="Hopper-v5", lambda_=0.84)
    cell([500, 500, 600], env="Hopper-v5", lambda_=0.0)
    out = root / "report"
    paths = report.report(root, out, reps=500)
    return root, out, paths


def table_rows(out):
    with open(out / "table.csv") as f:
        return {(r["env"], r["c_fa"], r["row"], r["column"]): r for r in csv.DictReader(f)}


def test_run_score_is_the_mean_of_the_last_tenth_of_episodes():
    assert report.final_score([0.0] * 18 + [7.0, 9.0]) == 8.0
    assert report.final_score(list(range(25))) == np.mean([22, 23, 24])  # ceil(2.5) = 3 episodes
    assert report.final_score([5.0]) == 5.0
    assert math.isnan(report.final_score([]))


def test_loader_reads_every_trial_and_ignores_a_torn_last_line(results):
    root, _, _ = results
    runs = report.load_runs(root / "grid")
    assert len(runs) == 3 * 14 + 8 + 1 and sum(not r.done for r in runs) == 1
    assert {r.env for r in runs} == {"ALE/Breakout-v5", "Hopper-v5"}  # RLlib's env name prefix stripped
    torn = [r for r in runs if r.kappa == 0.84 and r.c_fa == 0.05 and r.variant == "kappa-pi" and not r.naive]
    assert sorted(r.score for r in torn) == [200, 210, 220, 999]
    assert all(len(r.episode_returns) == 20 for r in runs)


def test_a_resumed_trials_replayed_iterations_replace_the_rolled_back_ones(tmp_path):
    """Tune appends the iterations after a trial's restored checkpoint again: 1 2 3 4 | 3 4 5."""
    trial = tmp_path / "grid" / "trial"
    trial.mkdir(parents=True)
    (trial / "params.json").write_text(json.dumps({"env": BREAKOUT, "seed": 0, "kappa": 0.84, "c_fa": 0.05}))
    rows = [(1, [1.0]), (2, [2.0]), (3, [3.0]), (4, [4.0]), (3, [30.0]), (4, [40.0, 41.0]), (5, [50.0])]
    (trial / "result.json").write_text("".join(json.dumps(
        {"training_iteration": i, "kappa": {"variant": "pi"}, "done": i == 5,
         "env_runners": {"episode_returns": r, "num_env_steps_sampled_lifetime": 100 * i,
                         "episode_return_mean": float(np.mean(r))}}) + "\n" for i, r in rows))
    [run] = report.load_runs(tmp_path / "grid")
    assert run.episode_returns == [1.0, 2.0, 30.0, 40.0, 41.0, 50.0]
    assert run.steps.tolist() == [100, 200, 300, 400, 500] and run.curve.tolist() == [1.0, 2.0, 30.0, 40.5, 50.0]
    assert run.done and run.env_steps == 500 and run.score == 50.0


def _member_rows(path, rows):
    """A population member's result.json: (iteration, iterations since restore, time_total_s, time_since_restore,
    env steps, returns) a row, with Tune's counters as its Trainable reports them."""
    path.write_text("".join(json.dumps(
        {"training_iteration": i, "iterations_since_restore": since, "time_total_s": total, "time_since_restore": run,
         "time_this_iter_s": 1.0, "kappa": {"variant": "pi", "kappa": 0.84}, "done": False,
         "env_runners": {"episode_returns": r, "num_env_steps_sampled_lifetime": n,
                         "episode_return_mean": float(np.mean(r))}}) + "\n" for i, since, total, run, n, r in rows))


def test_a_pbt_member_keeps_its_rows_before_a_donor_checkpoint_and_a_resume_rolls_back_only_after_it(tmp_path):
    """Member 1 of a population reports iterations 1-5 on its own (Tune's clock at 1 ... 5 s), then goes on from
    member 0's checkpoint of iteration 2 (its clock at 2.5 s): 3 4 on the donor's counters. `--resume` restores
    that checkpoint again (3 4 5, the first row cut short), and later its own checkpoint of iteration 4 (its clock
    at 4.75 s): 5 again. Its own first five rows stay (its episodes are its own); each resume replaces what it
    rolls back, even when the resumed stretch's first row is missing."""
    population = tmp_path / "pbt"
    trial = population / "member1"
    trial.mkdir(parents=True)
    (population / "kappa_population.json").write_text("{}")
    (trial / "params.json").write_text(json.dumps({"env": BREAKOUT, "seed": 0, "kappa": 0.84, "c_fa": 0.05}))
    _member_rows(trial / "result.json", [
        (1, 1, 1.0, 1.0, 100, [1.0]), (2, 2, 2.0, 2.0, 200, [2.0]), (3, 3, 3.0, 3.0, 300, [3.0]),
        (4, 4, 4.0, 4.0, 400, [4.0]), (5, 5, 5.0, 5.0, 500, [5.0]),
        (3, 1, 3.5, 1.0, 230, [30.0]), (4, 2, 4.5, 2.0, 330, [40.0]),  # the donor's checkpoint (2, 2.5 s)
        (4, 2, 4.75, 2.25, 330, [400.0]), (5, 3, 5.75, 3.25, 430, [500.0]),  # --resume from it (row 3 lost)
        (5, 1, 5.75, 1.0, 430, [5000.0])])  # --resume from its own checkpoint of iteration 4 (4.75 s)
    [run] = report.load_runs(tmp_path)
    assert run.population == "pbt"
    assert run.episode_returns == [1.0, 2.0, 3.0, 4.0, 5.0, 400.0, 5000.0]
    assert run.steps.tolist() == [100, 200, 300, 400, 500, 330, 430] and run.env_steps == 430
    assert run.timelines == (5,) and run.last_timeline == 5
    assert run.score == 5000.0  # the last 10% of 7 episodes: the last one
    # the last 10% of env steps (> 387) since the donor's checkpoint: 500 before it counted other steps
    run.score_window = "env-steps"
    assert run.score == 5000.0
    assert report.final_score([5.0, 6.0, 7.0], window="env-steps", episode_steps=[400, 395, 430], env_steps=430,
                              first=1) == 6.5
    assert report.final_score([5.0, 6.0, 7.0], window="env-steps", episode_steps=[math.nan, 395, 430], env_steps=430,
                              first=1) == 6.5  # a count missing before the exploit does not matter
    # outside a population the jump reads as a resume, as before: the member's own rows 3 4 5 are lost
    (population / "kappa_population.json").unlink()
    assert report.load_runs(tmp_path)[0].episode_returns == [1.0, 2.0, 400.0, 5000.0]


def _row(i, since, total, run, ret, **extra):
    """A result row as Tune writes it: iteration i, `since` iterations and `run` s since the restore, `total` s
    on Tune's clock, one episode returning `ret` at 100 env steps an iteration."""
    row = {"training_iteration": i, "iterations_since_restore": since, "time_total_s": total,
           "time_since_restore": run, "time_this_iter_s": 1.0, "config": {"kappa": 0.84},
           "kappa": {"variant": "pi", "kappa": 0.84},
           "env_runners": {"episode_returns": [ret], "num_env_steps_sampled_lifetime": 100 * i, "episode_return_mean": ret}}
    row.update(extra)
    return {k: v for k, v in row.items() if v is not None}


def _config_once(rows):
    """The rows as this package's trials write them (kappa_rllib.tuning.config_once): the config on a stretch's
    first two rows and where it changed."""
    thin, last = [], None
    for row in rows:
        since = row.get("iterations_since_restore")
        if isinstance(since, int) and since > 2 and row["config"] == last:
            row = {k: v for k, v in row.items() if k != "config"}
        else:
            last = row["config"]
        thin.append(row)
    return thin


OWN = [_row(i, i, float(i), float(i), float(i)) for i in range(1, 6)]  # iterations 1-5, its clock at 1 ... 5 s


@pytest.mark.parametrize("case, rows, manifest, returns, timelines", [
    ("its own checkpoint's row lost (Tune lost it): its manifest says the clock is its own",
     OWN[:4] + [_row(6, 1, 6.0, 1.0, 60.0), _row(7, 2, 7.0, 2.0, 70.0)], (5, 5.0), [1, 2, 3, 4, 60, 70], ()),
    ("the same without the manifest: the donor was ahead (a forward jump)",
     OWN[:4] + [_row(6, 1, 6.0, 1.0, 60.0), _row(7, 2, 7.0, 2.0, 70.0)], None, [1, 2, 3, 4, 60, 70], (4,)),
    ("a resume to its own checkpoint from before an exploit goes back past it",
     OWN + [_row(3, 1, 3.5, 1.0, 30.0), _row(4, 2, 4.5, 2.0, 40.0), _row(5, 1, 5.25, 1.25, 555.0)], None,
     [1, 2, 3, 4, 555], ()),
    ("a row written twice replaces itself", OWN + [OWN[-1]], None, [1, 2, 3, 4, 5], ()),
    ("the same donor checkpoint again with the config PBT's explore gave: a second exploit",
     OWN + [_row(3, 1, 3.5, 1.0, 30.0, config={"kappa": 0.9}), _row(4, 2, 4.5, 2.0, 40.0, config={"kappa": 0.9}),
            _row(3, 1, 3.75, 1.25, 300.0, config={"kappa": 0.95})], None, [1, 2, 3, 4, 5, 30, 40, 300], (5, 7)),
    ("the same donor checkpoint again with the same config: a resume",
     OWN + [_row(3, 1, 3.5, 1.0, 30.0, config={"kappa": 0.9}), _row(4, 2, 4.5, 2.0, 40.0, config={"kappa": 0.9}),
            _row(3, 1, 3.75, 1.25, 300.0, config={"kappa": 0.9})], None, [1, 2, 3, 4, 5, 300], (5,)),
    ("rows without Tune's counters as numbers read as before: by iteration",
     OWN[:3] + [_row(2, 1, 2.5, None, 20.0), _row(3, "2", 3.5, 2.0, 30.0), _row(4, 3, math.nan, 3.0, 40.0)], None,
     [1, 20, 30, 40], ()),
])
@pytest.mark.parametrize("config_once", [False, True], ids=["config-every-row", "config-once"])
def test_a_population_members_restores_read_from_tunes_counters(tmp_path, case, rows, manifest, returns, timelines,
                                                               config_once):
    """config-once: the rows as this package's trials write them, the config only on a stretch's first two rows and
    where it changed (kappa_rllib.tuning.config_once); the report reads them as rows that all carry it."""
    if config_once:
        rows = _config_once(rows)
        assert any("config" not in r for r in rows), case  # rows without it
    trial = tmp_path / "pbt" / "member"
    trial.mkdir(parents=True)
    (tmp_path / "pbt" / "kappa_population.json").write_text("{}")
    (trial / "params.json").write_text(json.dumps({"env": BREAKOUT, "seed": 0, "kappa": 0.84, "c_fa": 0.05}))
    (trial / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if manifest:
        (trial / "checkpoint_000000").mkdir()
        (trial / "checkpoint_000000" / "kappa_rllib_checkpoint.json").write_text(
            json.dumps({"training_iteration": manifest[0], "time_total_s": manifest[1]}))
    [run] = report.load_runs(tmp_path)
    assert (run.episode_returns, run.timelines) == ([float(r) for r in returns], timelines), case


def test_a_second_exploit_whose_first_row_was_cut_short_keeps_the_config_explore_gave_it(tmp_path):
    """With the config on a stretch's first two rows only (kappa_rllib.tuning.config_once), a kill or a full disk
    that cuts the first row of an exploit's stretch leaves the config on the second: the exploit reads as one,
    as with the config on every row."""
    rows = OWN + [_row(3, 1, 3.5, 1.0, 30.0, config={"kappa": 0.9}), _row(4, 2, 4.5, 2.0, 40.0, config={"kappa": 0.9}),
                  _row(3, 1, 3.75, 1.25, 300.0, config={"kappa": 0.95}),
                  _row(4, 2, 4.75, 2.25, 400.0, config={"kappa": 0.95}),
                  _row(5, 3, 5.75, 3.25, 500.0, config={"kappa": 0.95})]
    out = {}
    for name, thin in (("every row", False), ("config once", True)):
        lines = [json.dumps(r) for r in (_config_once(rows) if thin else rows)]
        assert thin is ("config" not in lines[-1])
        lines[7] = lines[7][:40]  # the second exploit's first row, cut short
        trial = tmp_path / name / "pbt" / "member"
        trial.mkdir(parents=True)
        (tmp_path / name / "pbt" / "kappa_population.json").write_text("{}")
        (trial / "params.json").write_text(json.dumps({"env": BREAKOUT, "seed": 0, "kappa": 0.84, "c_fa": 0.05}))
        (trial / "result.json").write_text("\n".join(lines) + "\n")
        [run] = report.load_runs(tmp_path / name)
        out[name] = run.episode_returns, run.timelines
    assert out["config once"] == out["every row"] == ([1.0, 2.0, 3.0, 4.0, 5.0, 30.0, 40.0, 400.0, 500.0], (5, 7))


@pytest.mark.parametrize("config_once", [False, True], ids=["config-every-row", "config-once"])
def test_a_member_driven_as_tune_drives_it_keeps_its_own_rows_and_resumes_replace_theirs(tmp_path, config_once):
    """Tune's own Trainable, restored the ways Tune restores it: PBT's exploit (pbt.py gives the donor's
    checkpoint with the donor's last result as its metrics), a `--resume` (its own checkpoint, its own
    result), and kappa-rllib's --resume repair (faults.py: the metrics from the checkpoint's manifest, as
    they were before the manifest carried the clock, and as they are now). Rows are what train() returns;
    iterations of 5-7 s on Tune's clock (hundreds of them: the origin clocks carry float sums' rounding).
    config-once: the member reports its config as this package's Algorithms do (ConfigOnceMixin)."""
    import itertools

    from ray import tune
    from ray.train import Checkpoint
    from ray.train._internal.session import _TrainingResult

    from kappa_rllib.tuning.config_once import COMPACT, ConfigOnceMixin

    returns = itertools.count()

    class Member(*((ConfigOnceMixin,) if config_once else ()), tune.Trainable):
        def setup(self, config):
            self.count, self.rng = 0, np.random.default_rng(config["seed"])

        def step(self):
            self.count += 100
            ret = float(next(returns))
            return {"time_this_iter_s": float(self.rng.uniform(5.0, 7.0)), "kappa": {"variant": "pi", "kappa": 0.84},
                    "env_runners": {"episode_returns": [ret], "num_env_steps_sampled_lifetime": self.count,
                                    "episode_return_mean": ret}}

        def save_checkpoint(self, checkpoint_dir):
            return {"count": self.count}

        def load_checkpoint(self, checkpoint):
            self.count = checkpoint["count"]

    def restored(saved, metrics=None, seed=1):
        member = Member(config={"seed": seed, COMPACT: config_once})
        member.restore(_TrainingResult(checkpoint=Checkpoint(saved.checkpoint.path),
                                       metrics=saved.metrics if metrics is None else metrics))
        return member

    # config-once as kappa-rllib tune's driver runs it: the trial's config opts into compact rows
    donor, member, rows = (Member(config={"seed": 0, COMPACT: config_once}),
                           Member(config={"seed": 1, COMPACT: config_once}), [])
    for _ in range(100):
        donor.train()
    from_donor = donor.save(str(tmp_path / "donor"))  # iteration 100
    rows += [member.train() for _ in range(300)]  # 0-299: its own iterations 1-300
    member = restored(from_donor, seed=2)
    rows += [member.train() for _ in range(50)]  # 300-349: iterations 101-150 on the donor's counters
    own = member.save(str(tmp_path / "own"))  # its own checkpoint of iteration 150
    rows += [member.train() for _ in range(20)]  # 350-369: 151-170
    member = restored(own, seed=3)  # --resume
    rows += [member.train() for _ in range(20)]  # 370-389: 151-170 again
    member = restored(own, {"training_iteration": 150}, seed=4)  # --resume repaired, before manifests had the clock
    rows += [member.train() for _ in range(5)]  # 390-394: 151-155
    member = restored(own, {"training_iteration": 150, "time_total_s": own.metrics["time_total_s"]}, seed=5)  # now
    rows += [member.train()]  # 395: 151
    folder = tmp_path / "pbt" / "member"
    folder.mkdir(parents=True)
    (tmp_path / "pbt" / "kappa_population.json").write_text("{}")
    (folder / "params.json").write_text(json.dumps({"env": BREAKOUT, "seed": 0, "kappa": 0.84, "c_fa": 0.05}))
    (folder / "result.json").write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
    assert sum("config" in r for r in rows) == (9 if config_once else len(rows))  # a start, four restores: 2 each, 1
    [run] = report.load_runs(tmp_path)
    kept = [*range(350), 395]
    assert run.episode_returns == [rows[i]["env_runners"]["episode_returns"][0] for i in kept]
    assert run.steps.tolist() == [100 * i for i in [*range(1, 301), *range(101, 152)]] and run.timelines == (300,)


def test_evaluation_results_make_a_curve_and_a_row_cut_mid_file_is_skipped(tmp_path):
    """RLlib's periodic evaluation (evaluation/env_runners/episode_return_mean, repeated between
    evaluations) becomes the run's eval_curve, drawn beside the training curve; a row a full disk cut
    short, with the resumed rows after it, is skipped, not the end of the run."""
    trial = tmp_path / "grid" / "trial"
    trial.mkdir(parents=True)
    (trial / "params.json").write_text(json.dumps({"env": BREAKOUT, "seed": 0, "kappa": 0.84, "c_fa": 0.05}))

    def row(i, evaluation=None):
        r = {"training_iteration": i, "kappa": {"variant": "pi"}, "done": i == 4,
             "env_runners": {"episode_returns": [float(i)], "num_env_steps_sampled_lifetime": 100 * i,
                             "episode_return_mean": float(i)}}
        if evaluation is not None:
            r["evaluation"] = {"env_runners": {"episode_return_mean": evaluation}}
        return json.dumps(r) + "\n"

    (trial / "result.json").write_text(row(1) + row(2, 10.0) + '{"training_iteration": 3, "env_run\n'
                                       + row(3, 10.0) + row(4, 20.0))
    [run] = report.load_runs(tmp_path / "grid")
    assert run.steps.tolist() == [100, 200, 300, 400] and run.done
    np.testing.assert_array_equal(run.eval_curve, [np.nan, 10.0, 10.0, 20.0])
    x, mean, half = report._mean_band([run], points=4, curve="eval_curve")
    np.testing.assert_allclose(mean, [np.nan, np.nan, 10.0, 20.0])  # x = 0, 133, 267, 400 env steps
    no_eval = report.load_runs(tmp_path / "grid")[0]
    no_eval.eval_curve = None
    assert report._mean_band([no_eval], curve="eval_curve") is None


def test_table_means_cis_kappa_best_and_best_marks(results):
    _, out, _ = results
    rows = table_rows(out)
    key = ("ALE/Breakout-v5", "0.05")
    pi_best = rows[(*key, "kappa-pi", "kappa_best")]
    assert float(pi_best["param"]) == 0.84 and float(pi_best["mean"]) == 210.0 and pi_best["n"] == "3"
    assert float(pi_best["ci95"]) == pytest.approx(10 * CI)
    assert float(rows[(*key, "kappa-pi", "kappa_0")]["mean"]) == 110.0
    vi_best = rows[(*key, "kappa-vi", "kappa_best")]
    assert float(vi_best["param"]) == 0.84 and float(vi_best["mean"]) == 185.0
    assert float(vi_best["ci95"]) == pytest.approx(5 * CI)
    assert float(rows[(*key, "kappa-vi", "kappa_0")]["mean"]) == 95.0
    base = rows[(*key, "", "baseline")]
    assert float(base["mean"]) == 135.0 and base["n"] == "3"  # the gamma 0.84 runs are not mixed in
    naive = rows[(*key, "kappa-pi", "naive")]
    assert float(naive["param"]) == 0.68 and float(naive["mean"]) == 165.0
    # 210 +- 24.8 reaches kappa-VI's 185 +- 12.4 and nothing else: the bold cells of Breakout at C_FA 0.05
    assert [k[2:] for k, r in rows.items() if k[:2] == key and r["best"] == "1"] == [("kappa-pi", "kappa_best"),
                                                                                      ("kappa-vi", "kappa_best")]
    # the second C_FA gets its own table rows
    assert float(rows[("ALE/Breakout-v5", "0.2", "kappa-pi", "kappa_best")]["mean"]) == pytest.approx(310 / 3)


def test_kappa_best_is_never_the_kappa_1_baseline_even_when_it_scores_highest(tmp_path):
    for seed in range(3):
        write_trial(tmp_path / "grid", f"pi84_{seed}", 10 + seed, env=BREAKOUT, variant="pi", kappa=0.84, c_fa=0.05,
                    seed=seed)
        write_trial(tmp_path / "grid", f"dqn_{seed}", 20, env=BREAKOUT, variant="pi", kappa=1.0, c_fa=0.05, seed=seed)
        write_trial(tmp_path / "grid", f"vi1_{seed}", 30, env=BREAKOUT, variant="vi", kappa=1.0, c_fa=0.05, seed=seed)
    [table] = report.build_tables(report.load_runs(tmp_path / "grid"))
    assert table.rows[""]["baseline"].mean == 20.0  # kappa-PI's kappa = 1 runs come first; one per seed
    assert set(table.rows) == {"", "kappa-pi"}  # kappa-VI ran only at kappa = 1: no kappa-VI row
    best = table.rows["kappa-pi"]["kappa_best"]
    assert (best.param, best.mean) == (0.84, 11.0)
    assert [(name, param) for name, param, _ in table.every] == [("baseline", 1.0), ("kappa-pi", 0.84)]
    assert table.best == {("", "baseline")}


def test_overlapping_intervals_are_marked_as_ties_and_gae_takes_its_best_lambda(results):
    _, out, _ = results
    rows = table_rows(out)
    key = ("Hopper-v5", "0.2")
    pi = rows[(*key, "kappa-pi", "kappa_best")]
    scores = np.array([1300, 1350, 1400, 1450, 1500, 1550, 1600, 5000.0])
    assert float(pi["mean"]) == pytest.approx(scores.mean())
    assert float(pi["ci95"]) == pytest.approx(2.364624 * scores.std(ddof=1) / math.sqrt(8), rel=1e-6)
    gae = rows[(*key, "", "gae")]
    assert float(gae["param"]) == 0.84 and float(gae["mean"]) == 1350.0
    assert float(rows[(*key, "", "baseline")]["mean"]) == 1100.0
    best = {k[2:] for k, r in rows.items() if k[:2] == key and r["best"] == "1"}
    assert best == {("kappa-pi", "kappa_best"), ("", "gae"), ("", "baseline")}  # the wide kappa-PI interval


def test_paper_numbers_stand_beside_the_same_cells(results):
    _, out, _ = results
    rows = table_rows(out)
    assert rows[("ALE/Breakout-v5", "0.05", "kappa-pi", "kappa_best")]["paper"] == "223 +- 7, kappa=0.84"
    assert rows[("ALE/Breakout-v5", "0.05", "", "baseline")]["paper"] == "134 +- 4"
    assert rows[("ALE/Breakout-v5", "0.2", "kappa-pi", "kappa_best")]["paper"] == ""  # not the paper's C_FA
    assert rows[("Hopper-v5", "0.2", "", "gae")]["paper"] == "1600 +- 134, lambda=0.84"
    md = (out / "table.md").read_text()
    assert "1 unfinished trial(s)" in md  # the running 999 is not in the 210 above
    assert "**210.0 +- 24.8 (n=3), kappa=0.84**<br>paper: 223 +- 7, kappa=0.84" in md
    tex = (out / "table.tex").read_text()
    assert "\\textbf{210.0 $\\pm$ 24.8 (n=3), $\\kappa$=0.84}" in tex and "C\\_FA" in tex


def test_iqm_matches_rliable_on_the_same_scores(results):
    _, out, _ = results
    with open(out / "iqm.csv") as f:
        rows = {(r["env"], r["cell"]): r for r in csv.DictReader(f)}
    hopper = rows[("Hopper-v5 (C_FA 0.2)", "kappa-pi kappa_best (kappa=0.68)")]
    scores = np.array([1300, 1350, 1400, 1450, 1500, 1550, 1600, 5000.0])
    assert float(hopper["iqm"]) == pytest.approx(metrics.aggregate_iqm(scores.reshape(-1, 1)))
    assert float(hopper["iqm"]) == pytest.approx(1475.0)  # the middle half: 1400 .. 1550
    assert float(hopper["ci_low"]) <= 1475.0 <= float(hopper["ci_high"])
    breakout = rows[("ALE/Breakout-v5 (C_FA 0.05)", "kappa-pi kappa_best (kappa=0.84)")]
    assert float(breakout["iqm"]) == pytest.approx(metrics.aggregate_iqm(np.array([[200.0], [210.0], [220.0]])))


def test_lower_gamma_curves_and_heatmaps_are_written(results):
    _, out, paths = results
    lower = (out / "lower_gamma.md").read_text()
    assert "| ALE/Breakout-v5 | baseline (kappa = 1) | 0.84 | 1 | 60.0 +- " in lower
    names = {p.name for p in paths}
    assert {"curves_ALE-Breakout-v5_cfa0.05.png", "curves_ALE-Breakout-v5_cfa0.2.png",
            "curves_Hopper-v5_cfa0.2.png", "heatmap_ALE-Breakout-v5_kappa-pi.png",
            "vs_paper.png", "vs_paper_narrow.png", "lower_gamma_ALE-Breakout-v5.png",
            "lower_gamma_ALE-Breakout-v5_narrow.png"} <= names  # (report_figures tests what they draw)
    assert "heatmap_ALE-Breakout-v5_kappa-vi.png" not in names  # kappa-VI ran at one C_FA only
    for p in paths:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == PNG_MAGIC
            image = matplotlib.image.imread(p)
            assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_report_command_prints_the_table_and_refuses_an_empty_folder(results, tmp_path, capsys):
    root, _, _ = results
    assert main(["report", str(root / "grid"), "--out", str(tmp_path / "r"), "--bootstrap-reps", "200"]) == 0
    printed = capsys.readouterr().out
    assert "| ALE/Breakout-v5 (C_FA 0.05) | kappa-pi |" in printed and str(tmp_path / "r" / "table.md") in printed
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "no trial results" in capsys.readouterr().err


def test_rliable_library_imports():
    """The pinned set (pyproject: rliable, arch < 8, statsmodels, pandas < 3) imports together; a
    statsmodels that does not fit arch once broke `import arch` with a TypeError inside statsmodels."""
    import rliable.library  # noqa: F401

    assert report.iqm_unavailable() is None


def test_report_without_rliable_writes_the_rest_and_says_what_is_missing(results, tmp_path, capsys, monkeypatch):
    """As with a statsmodels that does not fit arch: `import rliable` raises a TypeError from deep inside."""
    import sys

    root, _, _ = results
    broken = tmp_path / "site" / "rliable"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise TypeError('deprecate_kwarg() missing 1 required positional argument')\n")
    for name in [m for m in sys.modules if m == "rliable" or m.startswith("rliable.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert main(["report", str(root / "grid"), "--out", str(tmp_path / "r")]) == 0
    captured = capsys.readouterr()
    written = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"table.md", "table.csv", "table.tex", "scores.csv", "lower_gamma.md"} <= written
    assert not {"iqm.md", "iqm.csv"} & written
    notes = [line for line in captured.out.splitlines() if "iqm.md/iqm.csv skipped" in line]
    assert len(notes) == 1 and "TypeError: deprecate_kwarg()" in notes[0] and "pip install rliable 'arch>=7.2,<8'" in notes[0]
    assert "Traceback" not in captured.out + captured.err


def test_scores_name_each_trial_relative_to_the_experiment_folder(results):
    """scores.csv is published with the results: its paths must not name the machine's folders."""
    root, out, _ = results
    with open(out / "scores.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows
    for row in rows:
        assert not os.path.isabs(row["path"]), row["path"]
        assert (root / row["path"] / "result.json").is_file()


def test_the_probability_that_the_c_fa_cell_beats_the_naive_one_is_mann_whitneys_count(tmp_path):
    """improvement.md (the paper's Sec. 5.2 claim): P(C_FA > naive) per env is the share of (C_FA run,
    naive run) pairs where the C_FA run scores higher, ties counted half; over envs, the mean of those."""
    import numpy as np

    from kappa_rllib.report import Cell, EnvTable, improvement_with_ci, write_improvement

    x, y = np.array([1.0, 2.0, 3.0]), np.array([0.0, 2.0])
    # pairs: 1>0, 2>0, 3>0, 3>2 and the tie 2=2 (half): 4.5 of 6
    ((p, lo, hi),) = improvement_with_ci({"a": (x.reshape(-1, 1), y.reshape(-1, 1))}, reps=200).values()
    assert p == pytest.approx(4.5 / 6) and lo <= p <= hi
    tables = [EnvTable("Walker2d-v5", "trpo", 0.2, 0.99, {"kappa-pi": {"kappa_best": Cell(x, 0.68), "naive": Cell(y, 0.0)}},
                       set()),
              EnvTable("Hopper-v5", "trpo", 0.2, 0.99, {"kappa-pi": {"kappa_best": Cell(np.array([5.0, 6.0, 7.0]), 0.68),
                                                                     "naive": Cell(np.array([1.0, 9.0]), 0.98)}}, set()),
              EnvTable("Ant-v5", "trpo", 0.2, 0.99, {"": {"baseline": Cell(y, 1.0)}}, set())]
    (path,) = write_improvement(tables, tmp_path, reps=200)
    text = path.read_text()
    assert "| Walker2d-v5 (C_FA 0.2) | kappa-pi | 0.68 (2, n=3) | 0 (1, n=2) | 0.75 |" in text
    assert "| Hopper-v5 (C_FA 0.2) | kappa-pi | 0.68 (6, n=3) | 0.98 (5, n=2) | 0.50 |" in text  # 3 of 6
    assert "| kappa-pi, 2 envs | 0.62 |" in text  # (0.75 + 0.5) / 2
    assert "Ant-v5" not in text  # no pair there
    assert write_improvement(tables[2:], tmp_path) == []


def test_the_env_steps_score_window_takes_the_episodes_of_the_last_tenth_of_env_steps():
    """By count, a run's last 10% of episodes reaches back as far as its episodes are short early on;
    the env-steps window takes the episodes reported in the last 10% of its env steps (each episode
    dated by its result row), at least the last one."""
    returns = [0.0] * 90 + [5.0] * 9 + [7.0]  # 90 short episodes in the first row, 10 in the last ten rows
    steps = [100.0] * 90 + [200.0 + 100 * i for i in range(10)]  # rows end at 100, 200, ..., 1100 env steps
    assert report.final_score(returns) == np.mean([5.0] * 9 + [7.0])  # the last 10 by count
    # last 10% of 1100 env steps: rows ending above 990, i.e. the row at 1000 and the one at 1100
    assert report.final_score(returns, window="env-steps", episode_steps=steps, env_steps=1100) == 6.0
    # no episode reported in the window (a long last episode): the last one
    assert report.final_score([1.0, 2.0], window="env-steps", episode_steps=[100.0, 500.0], env_steps=1000) == 2.0
    with pytest.raises(ValueError, match="score window 'steps'"):
        report.final_score(returns, window="steps")


def test_report_scores_by_env_steps_when_asked_and_says_so(tmp_path, capsys):
    """Two runs of one cell whose early episodes are many and short: by count their score reaches
    back into the early episodes, by env steps it is the last rows' returns only. The CLI's choices
    are the report's."""
    for seed in range(2):
        trial = tmp_path / "grid" / f"trial_{seed}"
        trial.mkdir(parents=True)
        (trial / "params.json").write_text(json.dumps({"env": "Hopper-v5", "seed": seed, "lambda": 1.0, "max_kl": 0.01}))
        rows = [(1, [-1.0] * 36), *[(i, []) for i in range(2, 10)], (10, [100.0 + seed, 100.0 + seed])]
        (trial / "result.json").write_text("".join(json.dumps(
            {"training_iteration": i, "done": i == 10,
             "env_runners": {"episode_returns": r, "num_env_steps_sampled_lifetime": 1000 * i,
                             "episode_return_mean": float(np.mean(r)) if r else float("nan")}}) + "\n"
            for i, r in rows))
    # by count: the last ceil(3.8) = 4 episodes, two of them -1: (2 x -1 + 2 x (100 + seed)) / 4
    assert main(["report", str(tmp_path / "grid"), "--out", str(tmp_path / "by_count"), "--bootstrap-reps", "50"]) == 0
    by_count = {r["seed"]: float(r["score"]) for r in csv.DictReader(open(tmp_path / "by_count" / "scores.csv"))}
    assert by_count == {"0": 49.5, "1": 50.0}
    assert main(["report", str(tmp_path / "grid"), "--out", str(tmp_path / "by_steps"), "--bootstrap-reps", "50",
                 "--score-window", "env-steps"]) == 0
    by_steps = {r["seed"]: float(r["score"]) for r in csv.DictReader(open(tmp_path / "by_steps" / "scores.csv"))}
    assert by_steps == {"0": 100.0, "1": 101.0}
    assert "reported in its last 10% of env steps" in (tmp_path / "by_steps" / "table.md").read_text()
    assert "last 10% of training episodes" in (tmp_path / "by_count" / "table.md").read_text()
    from kappa_rllib.cli import build_parser
    for window in report.SCORE_WINDOWS:  # the CLI keeps its own literal list (no numpy at start-up)
        assert build_parser().parse_args(["report", "F", "--score-window", window]).score_window == window
    # one Run, both windows: each read scores by the window in force (no stale cache)
    [run, _] = sorted(report.load_runs(tmp_path / "grid"), key=lambda r: r.seed)
    assert run.score == 49.5
    run.score_window = "env-steps"
    assert run.score == 100.0
    # a row that reports episodes without its env-step count (RLlib writes 0 where it has none): one line
    trial = tmp_path / "grid" / "trial_0" / "result.json"
    trial.write_text(trial.read_text().replace('"num_env_steps_sampled_lifetime": 1000,', '"num_env_steps_sampled_lifetime": 0,'))
    capsys.readouterr()
    assert main(["report", str(tmp_path / "grid"), "--out", str(tmp_path / "bad"), "--score-window", "env-steps"]) == 2
    err = capsys.readouterr().err
    assert "trial_0: the env-steps score window needs the env-step count" in err and len(err.strip().splitlines()) == 1
    assert main(["report", str(tmp_path / "grid"), "--out", str(tmp_path / "fine"), "--bootstrap-reps", "50"]) == 0


def test_an_adaptive_member_is_drawn_in_pieces_where_it_took_a_donors_checkpoint(tmp_path, monkeypatch):
    """report/adaptive.py draws a PBT member apart at each of its timelines (Run.timelines): its curve and
    its kappa are one colour, but no segment joins its own last row to the donor's counters it went on
    from. A member without a donor checkpoint is one line."""
    from kappa_rllib.report import adaptive
    from kappa_rllib.report.data import Run

    def member(name, steps, kappa_path, timelines=()):
        steps = np.asarray(steps, dtype=float)
        return Run(path=name, env="CartPole-v1", family="ppo", variant="kappa-pi", kappa=kappa_path[-1], c_fa=None,
                   naive=False, gamma=0.99, lambda_=None, seed=0, episode_returns=[1.0, 2.0],
                   steps=steps, curve=steps / 100.0, env_steps=int(steps[-1]),
                   kappa_path=np.asarray(kappa_path, dtype=float), population="pbt", timelines=timelines)

    # member a: rows 0-3 its own (kappa unknown at row 0), then at row 4 it went on from a donor's
    # checkpoint taken at 200 steps, and again at row 6 from one taken at 300
    a = member("a", [100, 200, 300, 400, 200, 300, 300, 400], [np.nan, .9, .9, .9, .6, .6, .3, .3], timelines=(4, 6))
    b = member("b", [100, 200, 300, 400], [.8, .8, .8, .8])
    figures = []
    plt = adaptive._pyplot()
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to read its lines
    adaptive.write([a, b], [], tmp_path)
    (fig,) = figures
    ax_kappa, ax_return = fig.axes
    returns = [(list(line.get_xdata()), line.get_color()) for line in ax_return.lines]
    assert [x for x, _ in returns] == [[100, 200, 300, 400], [200, 300], [300, 400], [100, 200, 300, 400]]
    assert len({c for _, c in returns[:3]}) == 1 and returns[3][1] != returns[0][1]  # a's pieces: one colour
    kappas = [(list(line.get_xdata()), list(line.get_ydata())) for line in ax_kappa.lines]
    assert kappas == [([200, 300, 400], [.9, .9, .9]), ([200, 300], [.6, .6]), ([300, 400], [.3, .3]),
                      ([100, 200, 300, 400], [.8, .8, .8, .8])]
    assert [t.get_text() for t in ax_kappa.get_legend().get_texts()] == [
        "member 0 (start kappa=0.9, score 2.0)", "member 1 (start kappa=0.8, score 2.0)"]  # one entry a member
    # adaptive.md ends with the library versions its members ran with (kappa_rllib.versions)
    a.versions = ({"python": "3.11.7", "mujoco": "4.0.1"},)
    adaptive.write([a, b], [], tmp_path)
    assert (tmp_path / "adaptive.md").read_text().endswith(
        "\n\nLibrary versions the trials ran with (each trial's own, `scores.csv` has them per trial):\n\n"
        "- python 3.11.7, mujoco 4.0.1: 1 trial(s)\n"
        "- not recorded (trials from before kappa-rllib recorded them): 1 trial(s)\n")


def test_kappa_pi_trpos_v_phi_ablations_are_their_own_rows(tmp_path):
    """A kappa-PI-TRPO trial with a non-default phi_fit or phi_target (kappa_rllib.variant) is its own
    variant in the tables, never averaged into the default cell; the defaults, given or not, are not."""
    settings = {"default": {}, "given": {"phi_fit": "every_batch", "phi_target": "bootstrap"},
                "fit": {"phi_fit": "iteration_end"}, "target": {"phi_target": "authors"},
                "both": {"phi_fit": "iteration_end", "phi_target": "authors"}}
    for name, extra in settings.items():
        write_trial(tmp_path, name, 1.0, env="Hopper-v5", variant="pi", kappa=0.68, c_fa=0.2)
        params = json.loads((tmp_path / name / "params.json").read_text())
        (tmp_path / name / "params.json").write_text(json.dumps({**params, "max_kl": 0.01, **extra}))
    variants = {os.path.basename(r.path): r.variant for r in report.load_runs(tmp_path)}
    assert variants == {"default": "kappa-pi", "given": "kappa-pi", "fit": "kappa-pi (phi_fit=iteration_end)",
                        "target": "kappa-pi (phi_target=authors)",
                        "both": "kappa-pi (phi_fit=iteration_end, phi_target=authors)"}


def test_an_env_made_with_keyword_arguments_is_its_own_task(tmp_path):
    """A trial whose env_config gave the env keyword arguments (Ant-v5 without contact forces) is a task of
    its own in every table; an empty env_config is the plain id."""
    for name, env_config in (("plain", {}), ("kw", {"include_cfrc_ext_in_observation": False,
                                                     "contact_cost_weight": 0})):
        write_trial(tmp_path, name, 1.0, env="Ant-v5", variant="pi", kappa=0.68, c_fa=0.2)
        params = json.loads((tmp_path / name / "params.json").read_text())
        (tmp_path / name / "params.json").write_text(json.dumps({**params, "max_kl": 0.01, "env_config": env_config}))
    envs = {os.path.basename(r.path): r.env for r in report.load_runs(tmp_path)}
    assert envs == {"plain": "Ant-v5", "kw": "Ant-v5 (contact_cost_weight=0, include_cfrc_ext_in_observation=False)"}


def test_a_trpo_trial_with_an_authors_switch_is_kept_apart(tmp_path):
    """A TRPO-family trial with a switch to the authors' code set (load.AUTHORS_DEFAULTS: the config's defaults) is
    its own variant, each switch named once in the label, never averaged into the default cell; a params.json that
    lacks them (older trials) ran the defaults."""
    from kappa_rllib import KappaVITRPOConfig
    from kappa_rllib.report.load import AUTHORS_DEFAULTS

    config = KappaVITRPOConfig()
    assert AUTHORS_DEFAULTS["trpo"] == {k: getattr(config, k) for k in AUTHORS_DEFAULTS["trpo"]}
    trials = {"absent": (700, {}, "vi"), "default": (710, dict(AUTHORS_DEFAULTS["trpo"]), "vi"),
              "trunc": (900, {"truncation_as_terminal": True}, "vi"),
              "all": (1000, {"truncation_as_terminal": True, "copy_phi_after_first_batch": True,
                             "kl_accept_factor": 1.5, "fvp_subsample": 5, "orthogonal_init": True,
                             "num_envs_per_env_runner": 1}, "vi"),
              "trpo_init": (300, {"orthogonal_init": True}, None)}
    for name, (score, extra, kind) in trials.items():
        if kind:  # ("absent" and "default": two seeds of one cell)
            write_trial(tmp_path, name, score, env="Hopper-v5", variant=kind, kappa=0.92, c_fa=0.2,
                        seed=int(name == "default"))
        else:
            write_trial(tmp_path, name, score, env="Hopper-v5")
        params = json.loads((tmp_path / name / "params.json").read_text())
        (tmp_path / name / "params.json").write_text(json.dumps({**params, "max_kl": 0.01, **extra}))
    runs = report.load_runs(tmp_path)
    assert {os.path.basename(r.path): r.variant for r in runs} == {
        "absent": "kappa-vi", "default": "kappa-vi", "trunc": "kappa-vi (truncation_as_terminal=True)",
        "all": "kappa-vi (truncation_as_terminal=True, orthogonal_init=True, copy_phi_after_first_batch=True, "
               "kl_accept_factor=1.5, fvp_subsample=5, num_envs_per_env_runner=1)",
        "trpo_init": "plain (orthogonal_init=True)"}
    (t,) = report.build_tables(runs)
    assert t.rows["kappa-vi"]["kappa_best"].scores.tolist() == [700.0, 710.0]
    assert t.rows["kappa-vi (truncation_as_terminal=True)"]["kappa_best"].scores.tolist() == [900.0]


def test_a_trpo_trial_with_other_sub_envs_per_env_runner_is_kept_apart(tmp_path):
    """A TRPO-family trial whose num_envs_per_env_runner is not the family's default 4 (given, or absent in
    older params.json: the default) is its own variant: " (num_envs_per_env_runner=1)" is appended, after a
    V_phi ablation where both are set; TRPO and GAE trials sampled so are a row of their own ("plain (...)"),
    never averaged into the default baseline and GAE cells."""
    from kappa_rllib import TRPOConfig
    from kappa_rllib.report.load import SAMPLING_DEFAULTS

    assert SAMPLING_DEFAULTS["trpo"]["num_envs_per_env_runner"] == TRPOConfig().num_envs_per_env_runner == 4
    trials = {"absent": (1000, {}, "pi"), "default": (1010, {"num_envs_per_env_runner": 4}, "pi"),
              "one": (2000, {"num_envs_per_env_runner": 1}, "pi"),
              "one_target": (3000, {"num_envs_per_env_runner": 1, "phi_target": "authors"}, "pi"),
              "vi_one": (4000, {"num_envs_per_env_runner": 1}, "vi"),
              "trpo": (100, {}, None), "trpo_one": (200, {"num_envs_per_env_runner": 1}, None),
              "gae": (500, {}, 0.5), "gae_one": (900, {"num_envs_per_env_runner": 1}, 0.5)}
    for name, (score, extra, kind) in trials.items():
        if kind in ("pi", "vi"):  # ("absent" and "default": two seeds of one cell)
            write_trial(tmp_path, name, score, env="Walker2d-v5", variant=kind, kappa=0.68, c_fa=0.2,
                        seed=int(name == "default"))
        else:
            write_trial(tmp_path, name, score, env="Walker2d-v5", lambda_=kind)
        params = json.loads((tmp_path / name / "params.json").read_text())
        (tmp_path / name / "params.json").write_text(json.dumps({**params, "max_kl": 0.01, **extra}))
    runs = report.load_runs(tmp_path)
    variants = {os.path.basename(r.path): r.variant for r in runs}
    assert variants == {"absent": "kappa-pi", "default": "kappa-pi", "one": "kappa-pi (num_envs_per_env_runner=1)",
                        "one_target": "kappa-pi (phi_target=authors, num_envs_per_env_runner=1)",
                        "vi_one": "kappa-vi (num_envs_per_env_runner=1)", "trpo": "plain",
                        "trpo_one": "plain (num_envs_per_env_runner=1)", "gae": "plain",
                        "gae_one": "plain (num_envs_per_env_runner=1)"}
    (t,) = report.build_tables(runs)
    assert t.rows[""]["baseline"].scores.tolist() == [100.0] and t.rows[""]["gae"].scores.tolist() == [500.0]
    assert t.rows["kappa-pi"]["kappa_best"].scores.tolist() == [1000.0, 1010.0]
    assert t.rows["kappa-pi (num_envs_per_env_runner=1)"]["kappa_best"].scores.tolist() == [2000.0]
    sampled = t.rows["plain (num_envs_per_env_runner=1)"]
    assert sampled["baseline"].scores.tolist() == [200.0] and sampled["gae"].scores.tolist() == [900.0]
    assert t.shared("kappa-vi (num_envs_per_env_runner=1)", "gae") is sampled["gae"]
    assert t.shared("kappa-pi", "gae") is t.rows[""]["gae"]
    out = tmp_path / "report"
    report.report(tmp_path, out, reps=50)
    rows = table_rows(out)
    assert rows[("Walker2d-v5", "0.2", "", "baseline")]["mean"] == "100.0"
    assert rows[("Walker2d-v5", "0.2", "plain (num_envs_per_env_runner=1)", "baseline")]["mean"] == "200.0"
    assert rows[("Walker2d-v5", "0.2", "plain (num_envs_per_env_runner=1)", "gae")]["mean"] == "900.0"
    md = (out / "table.md").read_text()
    assert "| Walker2d-v5 (C_FA 0.2) | plain (num_envs_per_env_runner=1) |  |  | 200.0 +- - (n=1) |  | " \
           "900.0 +- - (n=1), lambda=0.5 |" in md
    assert "| Walker2d-v5 | gae (num_envs_per_env_runner=1) |  | 0.5 | 900.0 +- - | 1 |" in md
    improvement = (out / "improvement.md").read_text()  # each variant against the GAE sampled as it was
    assert "| Walker2d-v5 (C_FA 0.2) | kappa-pi | 0.68 (1005, n=2) | 0.5 (500, n=1) | 1.00 |" in improvement
    assert "| Walker2d-v5 (C_FA 0.2) | kappa-pi (num_envs_per_env_runner=1) | 0.68 (2000, n=1) | 0.5 (900, n=1) | 1.00 |" \
           in improvement


def _runs(env, scores, *, variant="plain", kappa=1.0, lambda_=None, naive=False, c_fa=0.2):
    """Hand-built Runs of one cell, one episode each: a run's score is its score."""
    from kappa_rllib.report.data import Run

    plain = variant == "plain"
    return [Run(path=f"{env}/{variant}/{kappa}/{lambda_}/{naive}/{seed}", env=env, family="trpo", variant=variant,
                kappa=kappa, c_fa=None if plain else c_fa, naive=naive, gamma=0.99,
                lambda_=(1.0 if lambda_ is None else lambda_) if plain else None, seed=seed,
                episode_returns=[float(s)], steps=np.array([1000.0]), curve=np.array([float(s)]), env_steps=1000)
            for seed, s in enumerate(scores)]


def _improvement_sections(tmp_path, runs, **kw):
    (path,) = report.write_improvement(report.build_tables(runs), tmp_path, reps=200, **kw)
    text = path.read_text()
    return text, {s.split("\n", 1)[0]: s for s in ("\n" + text).split("\n# ")[1:]}


BASELINE_SECTION = "kappa_best against the baseline, kappa = 1 (the paper's Tables 1 and 2)"
GAE_SECTION = "kappa_best against GAE at lambda_best (the paper's Table 2)"
KAPPA_0_SECTION = "kappa_best against kappa = 0 (the paper's Table 2)"


def test_kappa_best_against_gae_at_its_best_lambda_is_the_probability_of_improvement(tmp_path):
    """improvement.md's P(kappa_best > GAE): per env and kappa variant, the share of (kappa_best run, GAE run)
    pairs where the kappa_best run scores higher, ties half, against GAE at the lambda < 1 with the best mean
    (never TRPO, lambda = 1, however high); over envs, their mean. An env without GAE has no row."""
    runs = (_runs("Walker2d-v5", [300, 400, 500], variant="kappa-pi", kappa=0.68)
            + _runs("Walker2d-v5", [100, 110, 120], variant="kappa-pi", kappa=0.0)
            + _runs("Walker2d-v5", [1, 2, 3], variant="kappa-vi", kappa=0.68)
            + _runs("Walker2d-v5", [350, 450, 550], lambda_=0.84)  # the best GAE: 3 of 9 pairs below kappa_best
            + _runs("Walker2d-v5", [100, 100, 100], lambda_=0.36)  # (every pair below kappa_best)
            + _runs("Walker2d-v5", [1000, 1000, 1000])  # TRPO: above every run, not GAE
            + _runs("Hopper-v5", [5, 6, 7], variant="kappa-pi", kappa=0.68)
            + _runs("Hopper-v5", [1, 2, 3], variant="kappa-vi", kappa=0.92)
            + _runs("Hopper-v5", [1, 2, 3], lambda_=0.0)
            + _runs("Ant-v5", [9, 9, 9], variant="kappa-pi", kappa=0.68))  # no GAE: no row
    _, sections = _improvement_sections(tmp_path, runs)
    gae = sections[GAE_SECTION]
    assert "| env | variant | kappa_best cell: kappa (mean, n) | GAE cell: lambda (mean, n) | P(kappa_best > GAE) | 95% CI |" in gae
    assert "| Walker2d-v5 (C_FA 0.2) | kappa-pi | 0.68 (400, n=3) | 0.84 (450, n=3) | 0.33 |" in gae
    assert "| Walker2d-v5 (C_FA 0.2) | kappa-vi | 0.68 (2, n=3) | 0.84 (450, n=3) | 0.00 | [0.00, 0.00] |" in gae
    assert "| Hopper-v5 (C_FA 0.2) | kappa-pi | 0.68 (6, n=3) | 0 (2, n=3) | 1.00 | [1.00, 1.00] |" in gae
    assert "| Hopper-v5 (C_FA 0.2) | kappa-vi | 0.92 (2, n=3) | 0 (2, n=3) | 0.50 |" in gae  # all ties or even
    assert "| kappa-pi, 2 envs | 0.67 |" in gae and "| kappa-vi, 2 envs | 0.25 |" in gae  # (1/3 + 1) / 2, (0 + .5) / 2
    assert "Ant-v5" not in gae
    assert list(sections) == [BASELINE_SECTION, GAE_SECTION, KAPPA_0_SECTION]  # no naive cell: no such section
    # kappa_best against TRPO (kappa = 1): only Walker2d has TRPO; every TRPO run (1000) is above every kappa run
    assert "| Walker2d-v5 (C_FA 0.2) | kappa-pi | 0.68 (400, n=3) | 1 (1000, n=3) | 0.00 | [0.00, 0.00] |" in \
        sections[BASELINE_SECTION] and "Hopper-v5" not in sections[BASELINE_SECTION]
    # no GAE anywhere: no section (and no crash); nothing to compare at all: no file
    _, sections = _improvement_sections(tmp_path, [r for r in runs if r.lambda_ is None or r.lambda_ == 1.0])
    assert GAE_SECTION not in sections and KAPPA_0_SECTION in sections
    assert report.write_improvement(report.build_tables(_runs("Hopper-v5", [1, 2, 3], lambda_=0.0)), tmp_path) == []


def test_kappa_best_against_kappa_0_compares_the_best_multi_step_c_fa_cell_with_kappa_0(tmp_path):
    """improvement.md's P(kappa_best > kappa = 0): the best multi-step cell (0 < kappa < 1) against the same
    variant's kappa = 0 cell of the C_FA schedule (never the naive one), also where kappa = 0 has the best mean
    of all (the table's kappa_best). Each section follows the score window; the P(C_FA > naive) section stays first, unchanged."""
    runs = (_runs("Walker2d-v5", [300, 400, 500], variant="kappa-pi", kappa=0.68)
            + _runs("Walker2d-v5", [100, 110, 120], variant="kappa-pi", kappa=0.0)
            + _runs("Walker2d-v5", [900, 900, 900], variant="kappa-pi", kappa=0.0, naive=True)  # not kappa = 0's cell
            + _runs("Walker2d-v5", [5, 6, 8], variant="kappa-vi", kappa=0.68)
            + _runs("Walker2d-v5", [6, 6, 6], variant="kappa-vi", kappa=0.0)
            + _runs("Hopper-v5", [10, 20, 30], variant="kappa-pi", kappa=0.68)
            + _runs("Hopper-v5", [50, 60, 70], variant="kappa-pi", kappa=0.0)  # kappa_best is 0
            + _runs("Hopper-v5", [10, 20, 30], variant="kappa-vi", kappa=0.68)
            + _runs("Hopper-v5", [0, 0, 0], variant="kappa-vi", kappa=0.0)
            + _runs("Ant-v5", [9, 9, 9], variant="kappa-pi", kappa=0.68))  # no kappa = 0: no row
    _, sections = _improvement_sections(tmp_path, runs)
    assert list(sections) == ["N_kappa from C_FA against the naive N_kappa = T (the paper's Sec. 5.2)", KAPPA_0_SECTION]
    zero = sections[KAPPA_0_SECTION]
    assert ("| env | variant | kappa_best cell (0 < kappa <= 1): kappa (mean, n) | kappa = 0 cell: kappa (mean, n) "
            "| P(kappa_best > kappa = 0) | 95% CI |") in zero
    assert "| Walker2d-v5 (C_FA 0.2) | kappa-pi | 0.68 (400, n=3) | 0 (110, n=3) | 1.00 | [1.00, 1.00] |" in zero
    assert "| Walker2d-v5 (C_FA 0.2) | kappa-vi | 0.68 (6, n=3) | 0 (6, n=3) | 0.50 |" in zero  # 3 ties, 3 above, 3 below
    assert "| Hopper-v5 (C_FA 0.2) | kappa-vi | 0.68 (20, n=3) | 0 (0, n=3) | 1.00 |" in zero
    # kappa = 0 the best of all: the best multi-step cell (0.68) against it, never kappa = 0 against itself
    assert "| Hopper-v5 (C_FA 0.2) | kappa-pi | 0.68 (20, n=3) | 0 (60, n=3) | 0.00 | [0.00, 0.00] |" in zero
    assert "| kappa-vi, 2 envs | 0.75 |" in zero  # (0.5 + 1) / 2
    assert "| kappa-pi, 2 envs | 0.50 |" in zero  # (1 + 0) / 2
    assert "Ant-v5" not in zero
    assert "| Walker2d-v5 (C_FA 0.2) | kappa-pi | 0.68 (400, n=3) | 0 (900, n=3) | 0.00 |" in sections[
        "N_kappa from C_FA against the naive N_kappa = T (the paper's Sec. 5.2)"]
    windowed, by_window = _improvement_sections(tmp_path, runs, score_window="env-steps")
    note = f"Score of a run: {report.SCORE_RULES['env-steps']}."
    assert all(note in s for s in by_window.values()) and windowed.count(note) == 2


def test_kappa_best_against_kappa_0_takes_the_baseline_as_kappa_1(tmp_path):
    """Where no 0 < kappa < 1 cell beats it, the baseline (kappa = 1: a kappa algorithm at kappa = 1 is
    TRPO exactly) is the kappa_best that kappa = 0 is compared with: Swimmer's, whose paper kappa_best is 1.
    A multi-step cell above the baseline is still taken. The main table's kappa_best column is taken over
    kappa < 1, and only where a kappa in (0, 1) was run: a variant run at kappa = 0 alone has no kappa_best
    (so no aggregate takes its kappa = 0 cell for one)."""
    runs = (_runs("Swimmer-v5", [110, 120, 130])  # TRPO, the paper's kappa_best there
            + _runs("Swimmer-v5", [40, 45, 115], variant="kappa-pi", kappa=0.0)  # 8 of 9 pairs below TRPO
            + _runs("Swimmer-v5", [46, 46, 46], variant="kappa-vi", kappa=0.0)
            + _runs("Hopper-v5", [100, 100, 100])  # TRPO, below the multi-step cell
            + _runs("Hopper-v5", [300, 310, 320], variant="kappa-pi", kappa=0.68)
            + _runs("Hopper-v5", [200, 200, 200], variant="kappa-pi", kappa=0.0))
    _, sections = _improvement_sections(tmp_path, runs)
    zero = sections[KAPPA_0_SECTION]
    assert "| Swimmer-v5 (C_FA 0.2) | kappa-pi | 1 (120, n=3) | 0 (67, n=3) | 0.89 |" in zero  # 8 / 9
    assert "| Swimmer-v5 (C_FA 0.2) | kappa-vi | 1 (120, n=3) | 0 (46, n=3) | 1.00 | [1.00, 1.00] |" in zero
    assert "| Hopper-v5 (C_FA 0.2) | kappa-pi | 0.68 (310, n=3) | 0 (200, n=3) | 1.00 |" in zero
    assert "| kappa-pi, 2 envs | 0.94 |" in zero  # (8 / 9 + 1) / 2
    swimmer, hopper = sorted((t for t in report.build_tables(runs)), key=lambda t: t.env != "Swimmer-v5")
    assert set(swimmer.rows["kappa-pi"]) == set(swimmer.rows["kappa-vi"]) == {"kappa_0"}
    assert swimmer.rows["kappa-pi"]["kappa_0"].mean == pytest.approx(200 / 3)
    assert swimmer.rows[""]["baseline"].mean == 120.0
    assert hopper.rows["kappa-pi"]["kappa_best"].param == 0.68  # kappa < 1: never the baseline
    # a variant sampled otherwise (one sub-env) takes the baseline sampled as it was, never the default's
    for r in (one := _runs("Swimmer-v5", [300, 300, 300]) + _runs("Swimmer-v5", [50, 200, 350], variant="kappa-pi",
                                                                   kappa=0.0)):
        r.sampling, r.variant = "num_envs_per_env_runner=1", r.variant + " (num_envs_per_env_runner=1)"
    _, sections = _improvement_sections(tmp_path, runs + one)
    zero = sections[KAPPA_0_SECTION]
    assert "| Swimmer-v5 (C_FA 0.2) | kappa-pi (num_envs_per_env_runner=1) | 1 (300, n=3) | 0 (200, n=3) | 0.67 |" \
           in zero  # 6 of 9 pairs above (the default layout's TRPO, at 110-130, would give 0.33)
    assert "| Swimmer-v5 (C_FA 0.2) | kappa-pi | 1 (120, n=3) | 0 (67, n=3) | 0.89 |" in zero


def _heat_run(kappa, c_fa, score, seed=0, variant="kappa-pi"):
    return report.Run(path=f"t{kappa}_{c_fa}_{seed}", env="ALE/Breakout-v5", family="dqn", variant=variant,
                      kappa=kappa, c_fa=c_fa, naive=False, gamma=0.99, lambda_=None, seed=seed,
                      episode_returns=[score], steps=np.array([0.0]), curve=np.array([score]), env_steps=1)


def test_the_heatmaps_baseline_is_one_row_across_every_c_fa(tmp_path):
    """The kappa = 1 baseline (DQN) has no C_FA, whatever C_FA its config carried (0.05 here): it is not
    a cell under one C_FA with the other left empty, but a row of its own spanning all of them."""
    from kappa_rllib.report.plots import heatmap_grid, write_heatmaps

    runs = [_heat_run(k, c, 10 * k + c) for k in (0.68, 0.84) for c in (0.05, 0.2)]
    baseline = [_heat_run(1.0, 0.05, 50.0, seed) for seed in range(2)] + [_heat_run(1.0, 0.05, 70.0, 1)]
    kappas, c_fas, grid, base = heatmap_grid(runs + baseline, baseline)
    assert kappas == [0.68, 0.84] and c_fas == [0.05, 0.2]  # no kappa = 1 row inside the grid
    assert np.isfinite(grid).all()
    assert base == pytest.approx(50.0)  # one run per seed (as the tables' baseline column)
    (path,) = write_heatmaps(runs + baseline, tmp_path)
    assert path.name == "heatmap_ALE-Breakout-v5_kappa-pi.png" and path.read_bytes()[:8] == PNG_MAGIC


def test_a_title_names_the_experiment_on_every_page_written(results, tmp_path):
    """`--title`: each Markdown file's heading says which experiment it belongs to (the site shows many
    reports' table.md and iqm.md pages)."""
    root, _, _ = results
    paths = report.report(root / "grid", tmp_path / "r", reps=50, title="Breakout check")
    pages = [p for p in paths if p.suffix == ".md"]
    assert {"table.md", "iqm.md"} <= {p.name for p in pages}
    for p in pages:
        assert p.read_text().startswith("# Breakout check: "), p.name


def test_report_says_which_library_versions_each_trial_ran_with(tmp_path):
    """A trial's rows say which library versions it ran with on each stretch's first row (kappa_rllib.versions):
    scores.csv gives each trial's (two sets where a resume ran on others), table.md each set with its count, and
    the trials from before they were recorded as such."""
    from kappa_rllib.report import report

    old = {"python": "3.11.7", "ray": "2.60.0", "mujoco": "3.3.7"}
    new = {"python": "3.11.7", "ray": "2.60.0", "mujoco": "4.0.1"}
    for seed, stretches in enumerate([{0: old}, {0: old, 2: new}, {}, {0: new}]):
        write_trial(tmp_path / "grid", f"trial_{seed}", 100 + seed, env="Hopper-v5", seed=seed)
        result = tmp_path / "grid" / f"trial_{seed}" / "result.json"
        rows = [json.loads(line) for line in result.read_text().splitlines()]
        for i, found in stretches.items():
            rows[i]["versions"] = found
        result.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report(tmp_path / "grid", tmp_path / "out", reps=50)
    with open(tmp_path / "out" / "scores.csv") as f:
        got = {row["seed"]: row["versions"] for row in csv.DictReader(f)}
    old_text, new_text = "python 3.11.7, ray 2.60.0, mujoco 3.3.7", "python 3.11.7, ray 2.60.0, mujoco 4.0.1"
    assert got == {"0": old_text, "1": f"{old_text} | {new_text}", "2": "", "3": new_text}
    table = (tmp_path / "out" / "table.md").read_text()
    assert (f"- {old_text}: 1 trial(s)\n- {old_text} | {new_text}: 1 trial(s)\n- {new_text}: 1 trial(s)\n"
            "- not recorded (trials from before kappa-rllib recorded them): 1 trial(s)\n") in table


def test_an_ablation_with_four_kappa_cells_gets_them_in_one_panel(tmp_path):
    """report writes cells_<env>_cfa<C_FA>.png (and its phone drawing) where one env has four kappa cells or more
    (an ablation's variants, each its own label), not where it has fewer (Table 2's tasks)."""
    import json

    settings = [{}, {"truncation_as_terminal": True}, {"orthogonal_init": True}, {"kl_accept_factor": 1.5}]
    for i, extra in enumerate(settings):
        name = f"v{i}"
        write_trial(tmp_path / "results", name, 700 + i, env="Hopper-v5", variant="vi", kappa=0.92, c_fa=0.2)
        params = json.loads((tmp_path / "results" / name / "params.json").read_text())
        (tmp_path / "results" / name / "params.json").write_text(json.dumps({**params, "max_kl": 0.01, **extra}))
    report.report(tmp_path / "results", tmp_path / "four", reps=20)
    assert {p.name for p in (tmp_path / "four").glob("cells_*")} == {"cells_Hopper-v5_cfa0.2.png",
                                                                    "cells_Hopper-v5_cfa0.2_narrow.png"}
    import shutil

    shutil.rmtree(tmp_path / "results" / "v3")
    report.report(tmp_path / "results", tmp_path / "three", reps=20)
    assert not list((tmp_path / "three").glob("cells_*"))


@pytest.mark.parametrize("scores, t_quantile, s_over_root_n", [
    ([0.0, 2.0], 12.706, 1.0),  # s = sqrt(2), n = 2
    ([1.0, 2.0, 3.0], 4.303, 1 / math.sqrt(3)),  # s = 1
    ([1.0, 2.0, 3.0, 4.0, 5.0], 2.776, math.sqrt(0.5)),  # s = sqrt(2.5)
    (list(range(10)), 2.262, math.sqrt(55 / 6) / math.sqrt(10)),  # s = sqrt(82.5 / 9)
], ids=["n=2", "n=3", "n=5", "n=10"])
def test_a_cells_interval_is_students_t_over_its_seeds(scores, t_quantile, s_over_root_n):
    """A cell's 95% interval is t_{0.975, n-1} x s / sqrt(n) (s the sample std, ddof 1), not 1.96 x s / sqrt(n)
    (which covers ~88% at 5 seeds, ~81% at 3); one seed has none."""
    exact = {2: 12.7062047, 3: 4.3026527, 5: 2.7764451, 10: 2.2621572}[len(scores)]
    assert exact == pytest.approx(t_quantile, abs=5e-4)
    cell = report.Cell(np.asarray(scores, dtype=float))
    assert cell.ci == pytest.approx(exact * s_over_root_n, rel=1e-6)
    from kappa_rllib.report.data import ci95

    assert ci95(scores) == pytest.approx(exact * s_over_root_n, rel=1e-6)
    assert math.isnan(report.Cell(np.array([5.0])).ci) and math.isnan(ci95([5.0]))


def test_table_md_csv_and_tex_give_each_cell_its_students_t_interval_and_name_it(tmp_path):
    """A report end to end: five seeds of kappa-PI at 0.68 (100 .. 500: mean 300, s = 158.1) read 300.0 +- 196.3 in
    table.md (its cell and its "Every cell" line), table.csv and table.tex (t_{0.975, 4} = 2.776, not 1.96: 138.6);
    one seed of TRPO reads its value with no interval. table.md names both intervals: ours and the paper's."""
    for seed, score in enumerate([100, 200, 300, 400, 500]):
        write_trial(tmp_path / "grid", f"pi_{seed}", score, env="Hopper-v5", variant="pi", kappa=0.68, c_fa=0.2,
                    seed=seed)
    write_trial(tmp_path / "grid", "trpo_0", 250, env="Hopper-v5", seed=0)
    out = tmp_path / "report"
    report.report(tmp_path / "grid", out, reps=50)
    rows = table_rows(out)
    pi = rows[("Hopper-v5", "0.2", "kappa-pi", "kappa_best")]
    assert pi["n"] == "5" and float(pi["mean"]) == 300.0
    assert float(pi["ci95"]) == pytest.approx(2.7764451 * math.sqrt(25000) / math.sqrt(5), rel=1e-6)
    assert rows[("Hopper-v5", "0.2", "", "baseline")]["ci95"] == "nan"
    md = (out / "table.md").read_text()
    assert "300.0 +- 196.3 (n=5), kappa=0.68" in md and "| Hopper-v5 | kappa-pi | 0.2 | 0.68 | 300.0 +- 196.3 | 5 |" in md
    assert "250.0 +- - (n=1)" in md and "| Hopper-v5 | baseline |  | 1 | 250.0 +- - | 1 |" in md
    assert "Cells: mean +- Student-t 95% interval (t_{0.975,n-1} std / sqrt(n)) over seeds (n seeds)." in md
    assert "1.96 std" not in md
    assert "the paper's Table 1/2 value for the same cell, mean +- 1.96 s/sqrt(10) over its 10 seeds" in md
    assert "300.0 $\\pm$ 196.3 (n=5), $\\kappa$=0.68" in (out / "table.tex").read_text()


def test_every_table_and_figure_counts_a_trial_once(tmp_path):
    """One number per cell: kappa-PI run at kappa = 1 on TRPO's seeds (the same cell: kappa = 1 is TRPO exactly) and
    a trial published twice (copied into a second folder: load_runs reads every result.json under the root) are
    counted once, TRPO first (the table's baseline rule), in table.md / table.csv, lower_gamma.md and its study,
    iqm.csv, improvement.md, vs_paper's panel, the curves, the one-panel figure, the heat-map and adaptive.md's
    fixed cells: each reads n = 3 and the same mean for the same cell."""
    import shutil

    from kappa_rllib.report import adaptive, lower_gamma, plots, vs_paper

    root = tmp_path / "results"
    for seed in range(3):
        write_trial(root / "grid", f"trpo_{seed}", 1000 + 100 * seed, env="Hopper-v5", seed=seed)
        write_trial(root / "grid", f"pi1_{seed}", 3000, env="Hopper-v5", variant="pi", kappa=1.0, c_fa=0.2, seed=seed)
        write_trial(root / "grid", f"trpo68_{seed}", 400 + 20 * seed, env="Hopper-v5", gamma=0.68, seed=seed)
        write_trial(root / "grid", f"pi68_{seed}", 1500 + 200 * seed, env="Hopper-v5", variant="pi", kappa=0.68,
                    c_fa=0.2, seed=seed)
        write_trial(root / "grid", f"pi0_{seed}", 1200 + 100 * seed, env="Hopper-v5", variant="pi", kappa=0.0,
                    c_fa=0.2, seed=seed)
    for name in ("trpo_2", "trpo68_1", "pi68_0"):  # the same trials, published again
        shutil.copytree(root / "grid" / name, root / "copy" / name)
    out = tmp_path / "report"
    report.report(root, out, reps=50)
    runs = report.load_runs(root)
    assert len(runs) == 18  # every folder is read ...
    base, lower, pi = (3, 1100.0, 100.0), (3, 420.0, 20.0), (3, 1700.0, 200.0)  # ... each cell counts a seed once

    def ci(s):
        return f"{4.302653 * s / math.sqrt(3):.1f}"

    rows = table_rows(out)
    for key, (n, mean, _) in ((("Hopper-v5", "0.2", "", "baseline"), base),
                              (("Hopper-v5", "0.2", "kappa-pi", "kappa_best"), pi)):
        assert (rows[key]["n"], float(rows[key]["mean"])) == (str(n), mean)
    md = (out / "table.md").read_text()
    assert "\n6 trial(s) repeat a seed of a cell that another trial already has" in md  # 3 copies, kappa-PI's 3
    assert f"| Hopper-v5 | baseline |  | 1 | 1100.0 +- {ci(100)} | 3 |" in md
    assert f"| Hopper-v5 | kappa-pi | 0.2 | 0.68 | 1700.0 +- {ci(200)} | 3 |" in md
    lower_md = (out / "lower_gamma.md").read_text()
    assert f"| Hopper-v5 | baseline (kappa = 1) | 0.99 | 1 | 1100.0 +- {ci(100)} | 3 |" in lower_md
    assert f"| Hopper-v5 | baseline (kappa = 1) | 0.68 | 1 | 420.0 +- {ci(20)} | 3 |" in lower_md
    assert (f"| Hopper-v5 | kappa-pi | kappa 0.68 (1700.0 +- {ci(200)}, n=3) | gamma 0.68 (420.0 +- {ci(20)}, n=3) |"
            in lower_md)
    assert f"| Hopper-v5 | gamma 0.68 (420.0 +- {ci(20)}, n=3) | gamma 0.99 (1100.0 +- {ci(100)}, n=3) |" in lower_md
    with open(out / "iqm.csv") as f:
        iqm_rows = {r["cell"]: r for r in csv.DictReader(f) if r["env"] == "Hopper-v5 (C_FA 0.2)"}
    for name, (n, mean, _) in (("baseline (kappa=1)", base), ("kappa-pi kappa_best (kappa=0.68)", pi)):
        assert (iqm_rows[name]["n"], float(iqm_rows[name]["iqm"])) == (str(n), pytest.approx(mean))  # IQM of 3: mean
    assert "| Hopper-v5 (C_FA 0.2) | kappa-pi | 0.68 (1700, n=3) | 0 (1300, n=3) |" in (out / "improvement.md").read_text()
    # the figures' data, from the same runs as report read them
    tables = report.build_tables([r for r in runs if r.done])
    [table] = tables
    [panel] = vs_paper.vs_paper_panels(tables, runs, report.load_paper_tables())
    drawn = {e.label: (e.cell.n, e.cell.mean) for e in panel.entries}
    assert drawn["TRPO"] == base[:2] and drawn["κ-PI κ=0.68"] == pi[:2] and drawn["TRPO γ=0.68"] == lower[:2]
    [study] = lower_gamma.gamma_study(runs)
    assert (study.base[0.99].n, study.base[0.99].mean) == base[:2]
    assert (study.base[0.68].n, study.base[0.68].mean) == lower[:2]
    assert (study.kappas["kappa-pi"][0.68].n, study.kappas["kappa-pi"][0.68].mean) == pi[:2]
    assert (study.kappas["kappa-pi"][1.0].n, study.kappas["kappa-pi"][1.0].mean) == base[:2]
    fig = plots.curves_figure(table, runs)
    labels = {line.get_label(): line.get_ydata()[-1] for ax in fig.axes for line in ax.get_lines()}
    # (a run's last report's mean return: 2 of its 5 episodes return its score)
    assert labels["kappa=0.68 (n=3)"] == pytest.approx(0.4 * 1700) and "kappa=1 (baseline) (n=3)" in labels
    assert labels["kappa=1 (baseline) (n=3)"] == pytest.approx(0.4 * 1100)
    fig = plots.one_panel_figure(table, runs)
    assert {line.get_label() for line in fig.axes[0].get_lines()} >= {"kappa-pi, kappa=0.68 (n=3)",
                                                                      "kappa=1 (baseline) (n=3)"}
    mine = [r for r in runs if r.variant == "kappa-pi" and r.gamma == 0.99]
    kappas, _, grid, base_mean = plots.heatmap_grid(mine, [r for r in runs if r.is_baseline and r.gamma == 0.99])
    assert grid[kappas.index(0.68), 0] == pytest.approx(1700) and base_mean == pytest.approx(1100)
    best, baseline = adaptive._fixed_cells(runs, next(r for r in runs if r.kappa == 0.68))
    assert (best.n, best.mean) == pi[:2] and (baseline.n, baseline.mean) == base[:2]


def test_trials_without_a_seed_each_count_and_a_copy_of_one_still_counts_once(tmp_path):
    """A grid of `num_samples` repeats sets no seed (RLlib's None, read as 0): each trial is its own run, n = 3, and
    a copy of one of them published in a second folder counts once (the review found every such trial merged into
    one, n = 1, the interval lost)."""
    import shutil

    from kappa_rllib.report import data
    from kappa_rllib.report.load import load_runs

    root = tmp_path / "grid"
    for i, score in enumerate((100.0, 200.0, 300.0)):
        write_trial(root / "a", f"KappaPITRPO_CartPole-v1_{i:05d}", score, env="CartPole-v1", variant="kappa-pi",
                    kappa=0.5, c_fa=0.2)
        params = json.loads((root / "a" / f"KappaPITRPO_CartPole-v1_{i:05d}" / "params.json").read_text())
        params["seed"] = None
        (root / "a" / f"KappaPITRPO_CartPole-v1_{i:05d}" / "params.json").write_text(json.dumps(params))
    shutil.copytree(root / "a" / "KappaPITRPO_CartPole-v1_00001", root / "b" / "KappaPITRPO_CartPole-v1_00001")
    runs = load_runs(root)
    assert len(runs) == 4 and not any(r.seed_given for r in runs)
    kept = data.one_per_cell(runs)
    assert sorted(r.episode_returns[-1] for r in kept) == [100.0, 200.0, 300.0]
    (table,) = report.build_tables(runs)
    cells = [cell for _, _, cell in table.every]
    assert [(c.n, c.mean) for c in cells] == [(3, 200.0)]


def test_runs_of_two_families_on_one_seed_are_two_runs():
    """kappa-PI-TRPO and kappa-PI-PPO at the same env, kappa, C_FA and seed (the small suite's and the adaptive
    grid's fixed cells in one storage): neither is a copy of the other."""
    from dataclasses import replace

    from kappa_rllib.report import data

    (trpo,) = _runs("InvertedPendulum-v5", [500.0], variant="kappa-pi", kappa=0.84)
    ppo = replace(trpo, family="ppo", path=trpo.path + "/ppo")
    assert data.one_per_cell([trpo, ppo]) == [trpo, ppo]
    assert data.one_per_cell([trpo, replace(trpo, path=trpo.path + "/copy")]) == [trpo]  # a copy: once


def test_an_env_with_fewer_seeds_keeps_its_rows_and_the_aggregates_over_the_others_stand(tmp_path):
    """rliable's stratified bootstrap takes a runs x tasks array. An env run with 3 seeds beside envs of 5 (Table 2's
    HumanoidStandup row) keeps its own rows; the aggregates over environments take the envs of the size the most
    envs share, exactly as if the other env were absent, and a line names what they leave out. Before, one such env
    dropped every aggregate from iqm.md and improvement.md."""
    def env_runs(env, scale, seeds):
        base = np.arange(seeds, dtype=float)
        return (_runs(env, list(scale * (10 + base)), variant="kappa-pi", kappa=0.68)
                + _runs(env, list(scale * (5 + base)), variant="kappa-pi", kappa=0.68, naive=True)
                + _runs(env, list(scale * (2 + 2 * base))))
    five = env_runs("Hopper-v5", 1.0, 5) + env_runs("Walker2d-v5", 3.0, 5) + env_runs("Ant-v5", 7.0, 5)
    three = env_runs("HumanoidStandup-v5", 1000.0, 3)
    alone, mixed = tmp_path / "alone", tmp_path / "mixed"
    for out, runs in ((alone, five), (mixed, five + three)):
        out.mkdir()
        report.write_iqm(report.build_tables(runs), out, reps=200)
        report.write_improvement(report.build_tables(runs), out, reps=200)

    def aggregate_rows(out):
        with open(out / "iqm.csv") as f:
            return {r["cell"]: r for r in csv.DictReader(f) if r["env"] == "ALL (normalised)"}
    assert aggregate_rows(mixed) == aggregate_rows(alone) and len(aggregate_rows(alone)) == 3
    best = aggregate_rows(mixed)["kappa-pi kappa_best"]
    # the normalised matrix by hand: per env, (score - min) / (max - min) over every run of that env
    columns = []
    for env in ("Ant-v5", "Hopper-v5", "Walker2d-v5"):
        cell = np.array([r.episode_returns[0] for r in five if r.env == env and r.variant == "kappa-pi" and not r.naive])
        every = np.array([r.episode_returns[0] for r in five if r.env == env])
        columns.append((cell - every.min()) / (every.max() - every.min()))
    assert float(best["iqm"]) == pytest.approx(metrics.aggregate_iqm(np.stack(columns, axis=1)))
    assert best["n"] == "3"  # environments
    iqm_md = (mixed / "iqm.md").read_text()
    assert "| HumanoidStandup-v5 (C_FA 0.2) | kappa-pi kappa_best (kappa=0.68) |" in iqm_md
    assert "HumanoidStandup-v5 (C_FA 0.2), 3 seeds against 5: every cell." in iqm_md
    assert "Left out" not in (alone / "iqm.md").read_text()

    improvement = (mixed / "improvement.md").read_text()
    assert improvement.count("| kappa-pi, 3 envs | 1.00 |") == 1  # C_FA's runs above every naive run: P = 1
    assert "| HumanoidStandup-v5 (C_FA 0.2) | kappa-pi | 0.68 (11000, n=3) | 0.68 (6000, n=3) | 1.00 |" in improvement
    assert "kappa-pi: HumanoidStandup-v5 (C_FA 0.2) (3 and 3 seeds, against 5 and 5)" in improvement

    # two envs of 3 seeds against one of 5: the aggregate takes the two
    out = tmp_path / "two_small"
    out.mkdir()
    runs = env_runs("Hopper-v5", 1.0, 5) + three + env_runs("Swimmer-v5", 2.0, 3)
    report.write_iqm(report.build_tables(runs), out, reps=200)
    assert aggregate_rows(out)["kappa-pi kappa_best"]["n"] == "2"
    assert "Hopper-v5 (C_FA 0.2), 5 seeds against 3: every cell." in (out / "iqm.md").read_text()
