"""A trial reports its config once a stretch of training (kappa_rllib.tuning.config_once): on the first two
rows after a start or a restore, and where it changed; the rows between leave it out (the driver's cost per report,
docs/experiments.md). Driven the ways Tune drives a trial: train(), save(), restore() in place and into a new
actor, reset_config."""

from pathlib import Path

import numpy as np
from ray import tune
from ray.tune.tune import _Config

from kappa_rllib import KappaPITRPOConfig
from kappa_rllib.tuning.config_once import COMPACT, ConfigOnceMixin
from kappa_rllib.versions import libraries


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


def opted(**settings) -> dict:
    """A trial config that opts into compact rows, as `kappa-rllib tune`'s param space does (config_once.compact)."""
    return {**settings, COMPACT: True}


def test_a_trainable_reports_its_config_on_a_stretchs_first_row_and_when_it_changes(tmp_path):
    t = Counter(config=opted(lr=0.1, env_config={"obs": [0.0, 0.0]}))
    rows = [t.train() for _ in range(4)]
    assert [r["count"] for r in rows] == [1, 2, 3, 4]
    assert configs(rows)[2:] == [None, None] and rows[0]["config"]["lr"] == rows[1]["config"]["lr"] == 0.1
    # every other key Tune fills in is on every row; the library versions on a stretch's first two, with the config
    assert {k for k in rows[0] if k not in ("config", "versions")} == set(rows[2]) == set(rows[3])
    assert [r.get("versions") for r in rows] == [libraries(), libraries(), None, None]

    t.config["lr"] = 0.2  # changed in place (PBT's explore on a plain Trainable's dict)
    rows = [t.train() for _ in range(2)]
    assert rows[0]["config"]["lr"] == 0.2 and "config" not in rows[1]

    saved = t.save(str(tmp_path / "a"))
    t.restore(saved)  # a restore in place (Tune's PBT with reused actors)
    rows = [t.train() for _ in range(3)]
    assert rows[0]["iterations_since_restore"] == 1 and configs(rows) == [t.config, t.config, None]

    again = Counter(config=opted(lr=0.2))  # a new actor (a retry, --resume)
    again.restore(saved)
    rows = [again.train() for _ in range(3)]
    assert rows[0]["count"] == 7 and configs(rows) == [opted(lr=0.2), opted(lr=0.2), None]
    assert [r.get("versions") for r in rows] == [libraries(), libraries(), None]

    assert again.reset(opted(lr=0.3))  # Tune reusing the actor for another trial
    rows = [again.train() for _ in range(3)]
    assert configs(rows) == [opted(lr=0.3), opted(lr=0.3), None]
    assert [r.get("versions") for r in rows] == [libraries(), libraries(), None]
    t.stop()
    again.stop()


def test_a_kappa_algorithm_reports_rllibs_config_dict_once_a_stretch(ray_local, tmp_path):
    config = KappaPITRPOConfig().environment("CartPole-v1").training(
        kappa=0.9, c_fa=0.3, total_env_steps=128 * 26, train_batch_size=128).debugging(seed=0)
    setattr(config, COMPACT, True)  # what kappa-rllib tune's param space sets (config_once.compact)
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


def test_the_versions_a_row_names_are_the_installed_ones():
    """kappa_rllib.versions: the process's Python and the installed versions of the libraries behind a number."""
    import platform
    from importlib import metadata

    import gymnasium
    import ray
    import torch

    found = libraries()
    assert found["python"] == platform.python_version() and found["ray"] == ray.__version__ == "2.60.0"
    assert found["torch"] == torch.__version__ and found["gymnasium"] == gymnasium.__version__
    assert found["kappa-rllib"] == metadata.version("kappa-rllib") and found["mujoco"] == metadata.version("mujoco")
    assert list(found)[:4] == ["python", "kappa-rllib", "kappa-rllib commit", "ray"]
    from kappa_rllib import versions

    assert found["cpu"] == versions.cpu() and list(found)[-1] == "cpu"


def test_the_cpu_is_named_by_its_model_and_widest_vector_extension(tmp_path, monkeypatch):
    """A float sum rounds with the kernel the CPU runs (its vector width): the record names both, read from the
    first processor of /proc/cpuinfo."""
    from kappa_rllib import versions

    def cpu_of(text):
        versions.cpu.cache_clear()
        (tmp_path / "cpuinfo").write_text(text)
        monkeypatch.setattr(versions, "CPUINFO", tmp_path / "cpuinfo")
        return versions.cpu()

    one = "processor\t: 0\nmodel name\t: {model}\nflags\t\t: fpu sse4_2 {flags}\n\nprocessor\t: 1\nmodel name\t: other\n"
    try:
        assert cpu_of(one.format(model="AMD EPYC 9R14", flags="avx avx2 avx512f avx512bw")) == "AMD EPYC 9R14 (avx512)"
        assert cpu_of(one.format(model="Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz", flags="avx avx2")) == \
            "Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz (avx2)"
        assert cpu_of(one.format(model="Some CPU", flags="")) == "Some CPU (sse4_2)"
    finally:
        versions.cpu.cache_clear()


def test_a_trial_names_the_commit_of_its_code_and_dirty_where_the_tree_had_changes(tmp_path):
    """`kappa-rllib commit`: the checkout's HEAD, "-dirty" with an uncommitted change; nothing for a copy of the
    package that is no checkout of its own (inside another repository, as a wheel in a venv under a clone)."""
    import shutil
    import subprocess
    import sys

    import kappa_rllib

    def commit_seen_from(root):
        code = "import kappa_rllib.versions as v; print(v.libraries().get('kappa-rllib commit'))"
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                              env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, check=True).stdout.strip()

    repo = tmp_path / "repo"
    shutil.copytree(Path(kappa_rllib.__file__).parent, repo / "kappa_rllib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (repo / ".gitignore").write_text("__pycache__/\n")  # as the project's: Python's own caches are no change
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert commit_seen_from(repo) == head
    (repo / "kappa_rllib" / "versions.py").write_text((repo / "kappa_rllib" / "versions.py").read_text() + "\n")
    assert commit_seen_from(repo) == head + "-dirty"
    nested = repo / "site-packages"  # a copy inside the checkout, not at its top
    shutil.copytree(repo / "kappa_rllib", nested / "kappa_rllib")
    assert commit_seen_from(nested) == "None"


def test_progress_csv_keeps_its_columns_when_a_stretch_reports_versions_its_first_did_not(tmp_path):
    """progress.csv's columns are its first row's; a later stretch (a retry, a `--resume` of a trial begun before
    versions were reported, a node without one of the libraries) is written under that header with its own first
    row's keys. RowsCSV leaves the versions (a stretch's first rows) out, so every row has the header's fields."""
    import pandas as pd

    from kappa_rllib.tuning.tracking.loggers import RowsCSV

    class Trial:  # what the logger reads of Tune's Trial (a key of its dicts)
        local_path, checkpoint = str(tmp_path), None

        def init_local_path(self):
            pass

    trial = Trial()
    logger = RowsCSV()
    for i in (1, 2, 3):  # a stretch from before versions were reported
        logger.log_trial_result(i, trial, {"training_iteration": i, "iterations_since_restore": i, "score": 0.5})
    logger.log_trial_end(trial)
    again = RowsCSV()  # the resumed stretch: another driver
    for i, found in ((4, {"python": "3.11.7", "ray": "2.60.0"}), (5, {"python": "3.11.7"}), (6, None)):
        row = {"training_iteration": i, "iterations_since_restore": i - 3, "score": 1.0}
        again.log_trial_result(i, trial, {**row, "versions": found} if found else row)
    frame = pd.read_csv(tmp_path / "progress.csv")
    assert list(frame.columns) == ["training_iteration", "iterations_since_restore", "score"]
    assert list(frame["training_iteration"]) == [1, 2, 3, 4, 5, 6] and list(frame["score"]) == [0.5] * 3 + [1.0] * 3


def test_a_trial_that_does_not_opt_in_reports_its_config_on_every_row(tmp_path):
    """RLlib's habit, kept outside kappa-rllib tune's driver: `Algorithm.train()` in a script and a plain `tune.Tuner`
    see the whole config on every row (RLlib's check_train_results_new_api_stack asserts it)."""
    t = Counter(config={"lr": 0.1})
    rows = [t.train() for _ in range(4)]
    assert configs(rows) == [{"lr": 0.1}] * 4
    assert [r.get("versions") for r in rows] == [libraries(), libraries(), None, None]
    t.restore(t.save(str(tmp_path / "a")))
    assert configs([t.train() for _ in range(3)]) == [{"lr": 0.1}] * 3
    t.stop()


def test_a_config_that_cannot_be_compared_is_on_every_row():
    t = Counter(config=opted(lr=0.1, env_config={"obs": np.zeros(2)}))  # ndarray == ndarray is no bool
    assert all(r["config"]["lr"] == 0.1 for r in [t.train() for _ in range(3)])
    t.stop()


def test_tunes_result_has_the_config_the_files_leave_out(ray_local, tmp_path):
    """Driven by Tune with kappa-rllib tune's loggers around_loggers (ConfigOnLastResult last): ResultGrid's
    Result.config (Tune reads it from the trial's last result) is the trial's config; result.json has it whole on
    a stretch's first two rows and its last (Tune's stop rule), the axis (lr) alone on the row between."""
    import json

    from ray.tune import RunConfig

    from kappa_rllib.tuning.config_once import around_loggers
    from kappa_rllib.tuning.tracking import tune_loggers

    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Counter: its workers cannot import tests/
    tuner = tune.Tuner(Counter, param_space=opted(lr=tune.grid_search([0.1, 0.2]), other=1),
                       run_config=RunConfig(name="once", storage_path=str(tmp_path), stop={"training_iteration": 4},
                                            callbacks=around_loggers(tune_loggers()), verbose=0))
    results = tuner.fit()
    assert sorted(r.config["lr"] for r in results) == [0.1, 0.2] and not results.errors
    for r in results:
        rows = [json.loads(line) for line in (Path(r.path) / "result.json").read_text().splitlines()]
        params = json.loads((Path(r.path) / "params.json").read_text())
        assert [row["config"] == params for row in rows] == [True, True, False, True]
        assert rows[0]["config"] == r.config == params and rows[2]["config"] == {"lr": params["lr"]}


# ------------------------------------------------------------------------ every row says which trial it is
class Seeded(Counter):
    """A Counter that says in each row which lr it ran with."""

    def step(self):
        import time

        time.sleep(self.config.get("sleep", 0))
        self.count += 1
        return {"count": self.count, "lr_ran": self.config["lr"], "score": self.config["seed"],
                "done": self.count >= self.config.get("rows", 1e9)}


class SeededConfig(_Config):
    """What kappa-rllib tune reads of an AlgorithmConfig (kappa_rllib.experiments.Grid), over a plain dict."""

    algo_class = Seeded
    env = None
    total_env_steps = None

    def __init__(self, settings):
        self.settings = settings

    def to_dict(self):
        import copy

        return copy.deepcopy(self.settings)

    def update_from_dict(self, settings):
        self.settings.update(settings)
        return self

    def validate(self):
        pass


def _run_grids(tmp_path, grids):
    """`kappa-rllib tune`'s driver (kappa_rllib.tuning.driver.run) on `grids` of Seeded trials, in this process."""
    import sys

    from ray import cloudpickle
    from kappa_rllib.tuning import driver

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # its workers cannot import tests/
    return driver.run(grids, str(tmp_path / "storage"), verbose=0)


def test_tunes_per_row_views_have_the_grids_axes_on_every_row_and_from_path_the_whole_config(ray_local, tmp_path):
    """issue 57 (2): a real `kappa-rllib tune` run of a grid (lr x seed, 6 rows a trial, a setting that is no axis):
    Tune's own per-row views, Result.metrics_dataframe and ExperimentAnalysis.trial_dataframes, have the axes
    (config/lr, config/seed) on every row, so a groupby over them keeps every row; Result.from_path(trial).config
    is the trial's whole config (params.json); result.json carries the whole config on a stretch's first two rows and
    its last only, the axes alone on the others."""
    import json

    import pandas as pd
    from ray.air.result import Result
    from ray.tune import ExperimentAnalysis

    from kappa_rllib.experiments import Grid

    config = SeededConfig({"lr": tune.grid_search([0.1, 0.2]), "seed": tune.grid_search([0, 1, 2]), "rows": 6,
                           "note": "x" * 200})
    results = _run_grids(tmp_path, [Grid("axes", config)])["axes"]
    assert len(results) == 6 and not results.errors
    frames = [r.metrics_dataframe for r in results]
    analysis = ExperimentAnalysis(str(tmp_path / "storage" / "axes"))
    for r, frame in zip(results, frames):
        assert len(frame) == 6
        assert (frame["config/lr"] == r.config["lr"]).all() and (frame["config/seed"] == r.config["seed"]).all()
        assert (frame["config/lr"] == frame["lr_ran"]).all()
        tunes = analysis.trial_dataframes[r.metrics["trial_id"]]
        assert tunes[["config/lr", "config/seed"]].notna().all().all() and len(tunes) == 6
        params = json.loads((Path(r.path) / "params.json").read_text())
        assert Result.from_path(r.path).config == r.config == params
        rows = [json.loads(line) for line in (Path(r.path) / "result.json").read_text().splitlines()]
        assert [row["config"] == params for row in rows] == [True, True, False, False, False, True]
        assert all(row["config"] == {"lr": params["lr"], "seed": params["seed"]} for row in rows[2:5])
    grouped = pd.concat(frames).groupby(["config/lr", "config/seed"]).size()
    assert grouped.to_dict() == {(lr, seed): 6 for lr in (0.1, 0.2) for seed in (0, 1, 2)}
    assert pd.concat(frames).groupby("config/lr").size().sum() == 36


def test_a_population_members_rows_carry_the_setting_it_ran_with(ray_local, tmp_path):
    """issue 57 (2): a PBT population whose mutated setting (lr) is no axis of the grid (one start value): every
    row carries the lr that row was produced with (config/lr == the lr the trainable ran), an exploit's new one
    from its first row on, never the one PBT decided for the member before it restarted."""
    import pandas as pd
    from ray.tune.schedulers import PopulationBasedTraining

    from kappa_rllib.experiments import Grid

    mutations = {"lr": [0.01, 0.02, 0.03, 0.04]}
    # seed 1 scores higher: seed 0, the lower half, goes on from its checkpoint with another lr (and its seed)
    pbt = PopulationBasedTraining(time_attr="training_iteration", metric="score", mode="max", perturbation_interval=2,
                                  hyperparam_mutations=mutations, quantile_fraction=0.5, resample_probability=1.0,
                                  log_config=False)
    # long enough (~8 s a member) for both members to run together, whenever each actor starts on a busy machine
    config = SeededConfig({"lr": 0.05, "seed": tune.grid_search([0, 1]), "rows": 40, "sleep": 0.2})
    results = _run_grids(tmp_path, [Grid("pbt", config, scheduler=pbt, mutations=mutations)])["pbt"]
    assert len(results) == 2 and not results.errors
    frame = pd.concat(r.metrics_dataframe for r in results)
    assert len(frame) >= 40 and frame[["config/lr", "config/seed"]].notna().all().all(), frame
    assert (frame["config/lr"] == frame["lr_ran"]).all(), frame[["training_iteration", "config/lr", "lr_ran"]]
    assert set(frame["lr_ran"]) - {0.05}, "no member was ever moved: PBT did not exploit"
    # a member that starts again within the run (paused for the other's exploit, or exploited) keeps the rows it
    # wrote since the last copy onto storage (tracking.loggers._KeepsStagedRows): result.json has every row Tune
    # gave it, as progress.csv does (Tune's JSON logger copied storage's older result.json over them at each start)
    for r in results:
        csv_rows = pd.read_csv(Path(r.path) / "progress.csv")
        assert list(r.metrics_dataframe["training_iteration"]) == list(csv_rows["training_iteration"])
        assert csv_rows["training_iteration"].iloc[-1] == 40


def test_report_merges_a_rows_axes_into_the_last_whole_config(tmp_path):
    """issue 57 (2): kappa_rllib.report.load reads a row with its axes only as the last whole config with those axes
    (merged forward, nested ones too), not as a config of the axes alone."""
    import json

    from kappa_rllib.report.load import _rows

    whole = {"kappa": 0.9, "seed": 0, "lr": 1e-3, "env_config": {"a": 1, "b": 2}}
    rows = [{"training_iteration": i, "config": c} for i, c in enumerate(
        [whole, whole, {"kappa": 0.9, "seed": 0}, {"kappa": 0.8, "seed": 0, "env_config": {"b": 3}}], start=1)]
    rows.append({"training_iteration": 5})  # a row written before the axes were (config once)
    result = tmp_path / "result.json"
    result.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = [r["config"] for r in _rows(result, population=False)]
    assert got[:3] == [whole] * 3
    assert got[3] == got[4] == {"kappa": 0.8, "seed": 0, "lr": 1e-3, "env_config": {"a": 1, "b": 3}}


def test_config_axes_gives_each_row_the_axes_of_the_config_last_reported():
    """issue 57 (2), ConfigAxes on its own: nested axes ("env_config/size") and a population's mutation (kappa, not in
    Tune's evaluated_params) on each row without a config, with the values of the config the trial last reported (not
    Trial.config, which PBT changes before the member restarts); the whole config on the last row (done); nothing
    kept of a trial once it ended."""
    from types import SimpleNamespace

    from kappa_rllib.tuning.config_once import ConfigAxes

    trial = SimpleNamespace(trial_id="t0", evaluated_params={"seed": 3, "env_config/size": 8},
                            config={"seed": 3, "kappa": 0.9, "lr": 0.1, "env_config": {"size": 8, "other": 1}})
    axes = ConfigAxes(axes=["kappa"])
    rows = [{"config": dict(trial.config)}, {}, {}]
    trial.config = {**trial.config, "kappa": 0.5}  # PBT's exploit decided, the member has not restarted yet
    rows += [{}, {"config": dict(trial.config)}, {}, {"done": True}]
    for row in rows:
        axes.on_trial_result(0, [trial], trial, row)
    want = {"seed": 3, "env_config": {"size": 8}}
    assert [r["config"] for r in rows[1:4]] == [{**want, "kappa": 0.9}] * 3
    assert rows[5]["config"] == {**want, "kappa": 0.5} and rows[6]["config"] is trial.config
    assert all(r["checkpoint_dir_name"] is None for r in rows)  # Tune's Result.from_path needs the column
    axes.on_trial_complete(0, [trial], trial)
    assert axes._values == {}


class FailsOnce(Seeded):
    """A Seeded trial that raises once, at iteration `fail_at` (a marker file says it did)."""

    def step(self):
        marker = Path(self.config["marker"])
        if self.count + 1 == self.config["fail_at"] and not marker.exists():
            marker.write_text("failed")
            raise RuntimeError("once")
        return super().step()


def test_a_retried_trial_keeps_the_rows_it_wrote_before_its_error(ray_local, tmp_path):
    """A trial that errors at iteration 27, ~11 s in, retried from its checkpoint at 24: result.json and
    progress.csv hold iterations 1-26, then 25-40 again, which `report` reads as the rollback it is (every iteration
    once, the retried ones). Tune's loggers copied storage's copy of the rows back over them as the trial started
    again: the rows as they were at the last sync (every ~10 s), a gap where that was before the checkpoint
    (tracking.loggers._KeepsStagedRows)."""
    import sys

    import pandas as pd
    from ray import cloudpickle

    from kappa_rllib.experiments import Grid
    from kappa_rllib.report.load import _rows
    from kappa_rllib.tuning import driver

    class Config(SeededConfig):
        algo_class = FailsOnce

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    config = Config({"lr": 0.05, "seed": 0, "rows": 40, "sleep": 0.4, "fail_at": 27,
                     "marker": str(tmp_path / "failed")})
    (result,) = driver.run([Grid("retry", config)], str(tmp_path / "storage"), checkpoint_every=4, max_failures=1,
                           verbose=0)["retry"]
    assert (tmp_path / "failed").exists() and not result.error
    want = list(range(1, 27)) + list(range(25, 41))
    assert list(pd.read_csv(Path(result.path) / "progress.csv")["training_iteration"]) == want
    assert list(result.metrics_dataframe["training_iteration"]) == want
    assert [r["training_iteration"] for r in _rows(Path(result.path) / "result.json", population=False)] == \
        list(range(1, 41))
