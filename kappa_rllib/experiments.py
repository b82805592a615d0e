"""Experiments as Ray Tune grids: what a `tune_configs/**/*.py` file defines (`kappa-rllib tune` runs
it: kappa_rllib.tuning.driver).

A config file defines `experiments(smoke: bool = False) -> list[Grid]`: one `Grid` per algorithm
(or baseline) of the experiment, each an RLlib config with `tune.grid_search` axes (kappa, C_FA,
env, seed, ...) and a Tune stop rule. `smoke=True` gives the same grids shrunk to a run of about a
minute (2 kappa x 2 seeds, tiny budgets), for CI and for trying a file out. For RLlib-style use
(`kappa-rllib train file`), the module also exposes `config` and `stop`: its first grid's.

Every trial reports `done` when its schedule's `total_env_steps` are used up (kappa-DQN,
kappa-TRPO, TRPO/GAE alike), so a grid's default stop rule is `{"done": True}`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import re
import sys
from pathlib import Path

GRID_SEARCH = "grid_search"
GRID_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # a grid's folder under --storage, and its tag in the trackers
SCHEDULE_STOP = {"done": True}  # the default stop rule: each trial runs its total_env_steps


@dataclasses.dataclass
class Grid:
    """One Tune experiment: `config` (an AlgorithmConfig whose settings may be
    `tune.grid_search([...])`) run to `stop`, under the folder `name`.

    A population (adaptive kappa, `population()`): `scheduler` is Tune's PBT or PB2, `mutations`
    the values ({setting: [values]}) or bounds ({setting: (low, high)}) it may give a member; the
    grid's axes are then the members' initial settings, `num_samples` times over."""

    name: str
    config: object
    stop: dict = dataclasses.field(default_factory=lambda: dict(SCHEDULE_STOP))
    scheduler: object = None
    mutations: dict = dataclasses.field(default_factory=dict)
    num_samples: int = 1

    @property
    def trainable(self):
        return self.config.algo_class

    def axes(self) -> dict:
        """The grid's axes: {setting: [values]} in the order Tune expands them."""
        return {k: list(v[GRID_SEARCH]) for k, v in self.config.to_dict().items()
                if isinstance(v, dict) and set(v) == {GRID_SEARCH}}

    def num_trials(self) -> int:
        n = self.num_samples
        for values in self.axes().values():
            n *= len(values)
        return n

    def variants(self):
        """Every trial's resolved settings ({setting: value} over the axes)."""
        axes = self.axes()
        for combo in itertools.product(*axes.values()):
            yield dict(zip(axes, combo))

    def trial_configs(self):
        """(settings, config) of every trial, and of every value a population may move a member to: the
        grid's config with the trial's axis values, not validated."""
        cls = self.trainable
        base = self.config.to_dict()
        variants = list(self.variants())
        for setting, values in self.mutations.items():  # every value a population may move a member to
            variants += [{**variants[0], setting: v} for v in values]
        for variant in variants:
            yield variant, cls.get_default_config().update_from_dict({**base, **variant})

    def validate(self) -> None:
        """Builds and validates the config of every trial, without starting Ray; raises
        ValueError naming the grid and the trial's settings."""
        for variant, trial in self.trial_configs():
            try:
                trial.validate()
            except (ValueError, TypeError) as e:
                raise ValueError(f"grid {self.name!r}, trial {variant}: {' '.join(str(e).split())}") from None


def env_axis(env_ids):
    """A grid axis over env ids, with ids that need this package's construction (Atari,
    MinAtar, ...) named as RLlib will look them up (kappa_rllib.envs.rllib_env_name)."""
    from ray import tune

    from kappa_rllib import envs

    return tune.grid_search([envs.rllib_env_name(e) for e in env_ids])


def load_file(path, smoke: bool = False) -> list[Grid]:
    """The grids a config file defines: `experiments(smoke)` if present, else its `config` (and
    `stop`). Raises ValueError (one line) for a missing file or a file that defines neither."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config file {str(path)!r} does not exist or is not a file")
    try:
        module = load_module(path)
        grids = module.experiments(smoke=smoke) if hasattr(module, "experiments") else None
    except Exception as e:  # noqa: BLE001 - a user's file: any error is one line naming the file
        raise ValueError(f"{path}: {type(e).__name__}: {' '.join(str(e).split())}") from None
    if grids is None:
        if not hasattr(module, "config"):
            raise ValueError(f"{path}: defines neither experiments(smoke) nor config")
        if smoke:
            raise ValueError(f"{path}: --smoke needs the file to define experiments(smoke)")
        grids = [Grid(path.stem, module.config, getattr(module, "stop", None) or dict(SCHEDULE_STOP))]
    if not grids or not all(isinstance(g, Grid) for g in grids):
        raise ValueError(f"{path}: experiments() must return a non-empty list of kappa_rllib.experiments.Grid")
    names = [g.name for g in grids]
    bad = [n for n in names if not isinstance(n, str) or not GRID_NAME.fullmatch(n)]
    if bad:
        raise ValueError(f"{path}: grid names are folder names: letters, digits, '_', '-' and '.', got {bad}")
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: grid names must be unique, got {names}")
    return grids


def load_module(path: Path):
    """Imports a config file as a module (its folder on sys.path, for shared helpers)."""
    name = f"kappa_rllib_config_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


POPULATION_METRIC = "env_runners/episode_return_mean"


def population(kind: str, mutations: dict, *, perturbation_interval: int):
    """Tune's PBT (`kind="pbt"`: each setting moves among the listed values) or PB2 (`"pb2"`: within
    (low, high), by a GP bandit) over `mutations`, every `perturbation_interval` training iterations,
    on the mean episode return. The algorithms accept the new kappa at a kappa-iteration boundary
    when the member is restored (kappa_rllib.algorithms.kappa_loop)."""
    from ray.tune.schedulers import PopulationBasedTraining
    from ray.tune.schedulers.pb2 import PB2

    common = dict(time_attr="training_iteration", metric=POPULATION_METRIC, mode="max",
                  perturbation_interval=perturbation_interval)
    if kind == "pbt":
        return PopulationBasedTraining(hyperparam_mutations={k: list(v) for k, v in mutations.items()},
                                       resample_probability=0.25, synch=False, **common)
    if kind == "pb2":
        return PB2(hyperparam_bounds={k: [min(v), max(v)] for k, v in mutations.items()}, synch=False, **common)
    raise ValueError(f"population kind must be 'pbt' or 'pb2', got {kind!r}")


def request_gpus(grids, gpus_per_trial: float) -> None:
    """Each trial's learner (the local one, num_learners = 0) on `gpus_per_trial` GPUs: RLlib then asks
    Ray for them in the trial's main bundle, so Ray (and an autoscaler) places the trial on a GPU node."""
    for grid in grids:
        grid.config.learners(num_gpus_per_learner=gpus_per_trial)


# ----------------------------------------------------------------------------------- building grids
def seeds(n: int, first: int = 0):
    """A seed axis: seeds first .. first + n - 1 (the paper used 10 per cell)."""
    from ray import tune

    return tune.grid_search(list(range(first, first + n)))


def algorithm_config(config_cls, env_ids, *, seed, preset_family: str | None = None, **training):
    """A config of `config_cls` over `env_ids` (one id, or a list: an env axis) and `seed` (an
    int or an axis, e.g. `seeds(10)`), with the packaged preset of those envs
    (kappa_rllib.presets; every id of an axis must share it) and `training` settings (any value
    may be a `tune.grid_search` axis)."""
    from kappa_rllib import presets

    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    config = config_cls()
    if preset_family:
        found = {presets.preset_for(e, preset_family) for e in ids}
        if len(found) != 1:
            raise ValueError(f"envs {ids} use different presets {sorted(map(str, found))}: use one grid per preset")
        preset = found.pop()
        if preset:
            presets.apply(config, presets.load(preset))
    if len(ids) == 1:
        config.environment(ids[0])
    else:
        config.environment(env=env_axis(ids))
    grid_values = {k: v for k, v in training.items() if isinstance(v, dict) and GRID_SEARCH in v}
    plain = {k: v for k, v in training.items() if k not in grid_values}
    config.training(**plain)
    config.debugging(seed=seed)
    for key, value in grid_values.items():  # set directly: the setters would validate a grid as a value
        setattr(config, "lambda_" if key == "lambda" else key, value)
    return config


def _classes(family: str):
    import kappa_rllib as k

    if family == "dqn":
        return {"pi": k.KappaPIDQNConfig, "vi": k.KappaVIDQNConfig, "baseline": k.KappaPIDQNConfig}
    if family == "trpo":
        return {"pi": k.KappaPITRPOConfig, "vi": k.KappaVITRPOConfig, "baseline": k.TRPOConfig}
    if family == "ppo":  # the baseline is kappa-PI-PPO at kappa = 1: exactly PPO with lambda = 1
        return {"pi": k.KappaPIPPOConfig, "vi": k.KappaVIPPOConfig, "baseline": k.KappaPIPPOConfig}
    if family == "appo":  # the baseline is kappa-PI-APPO at kappa = 1: exactly APPO
        return {"pi": k.KappaPIAPPOConfig, "vi": k.KappaVIAPPOConfig, "baseline": k.KappaPIAPPOConfig}
    raise ValueError(f"family must be 'dqn', 'trpo', 'ppo' or 'appo', got {family!r}")


# Tiny budgets for `--smoke` (about a minute a grid on 2 cores; nothing is learned, everything runs).
SMOKE_SETTINGS = {
    "dqn": {"total_env_steps": 1_000, "env_steps_per_iteration": 500, "num_steps_sampled_before_learning_starts": 200,
            "replay_buffer_config": {"type": "UniformReplayBuffer", "capacity": 2_000}},
    # 60 batches of 128 steps: >= N_kappa (52 at kappa 0.68, C_FA 0.2)
    "trpo": {"total_env_steps": 60 * 128, "train_batch_size": 128},
    "ppo": {"total_env_steps": 60 * 128, "train_batch_size": 128, "minibatch_size": 64, "num_epochs": 2},
    "appo": {"total_env_steps": 60 * 100, "train_batch_size_per_learner": 100},
}


def paper_grids(family: str, env_ids, *, kappas, c_fa, num_seeds: int, smoke: bool = False,
                variants=("pi", "vi"), baseline: bool = True, naive_kappas=(), gae_lambdas=(),
                gammas=(), name: str = "", **settings) -> list[Grid]:
    """The grids of one of the paper's experiments (Sec. 5, Tables 1-2, Figs. 1-3):

    * `kappa_<variant>_<family>`: variant x env x kappa x C_FA x seed (kappa-PI / kappa-VI);
    * `<family>` (kappa = 1: DQN, or TRPO) x env x seed, if `baseline`;
    * `naive_kappa_pi_<family>`: N_kappa = T at `naive_kappas`, if any;
    * `gae`: TRPO with GAE(lambda) over `gae_lambdas`, if any (TRPO family only);
    * `<family>_gamma`: the baseline with each discount in `gammas` (the lower-gamma study).

    `c_fa` may be one value or a list (an axis). `smoke=True` keeps the first env, the last two
    kappas (and lambdas, gammas), the last C_FA and two seeds with tiny budgets (SMOKE_SETTINGS).
    """
    from ray import tune

    classes = _classes(family)
    env_ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    c_fas = list(c_fa) if isinstance(c_fa, (list, tuple)) else [c_fa]
    kappas, naive_kappas, gae_lambdas, gammas = map(list, (kappas, naive_kappas, gae_lambdas, gammas))
    if smoke:  # the largest kappas and C_FA: the fewest kappa-iterations, so tiny budgets still hold them
        env_ids, kappas, num_seeds = env_ids[:1], kappas[-2:], 2
        naive_kappas, gae_lambdas, gammas, c_fas = naive_kappas[-1:], gae_lambdas[-2:], gammas[-2:], c_fas[-1:]
        settings = {**settings, **SMOKE_SETTINGS[family]}
    preset = "dqn" if family == "dqn" else None

    def axis(values):
        return values[0] if len(values) == 1 else tune.grid_search(values)

    def grid(suffix, cls, **kw):
        return Grid((name + "_" if name else "") + suffix,
                    algorithm_config(cls, env_ids, preset_family=preset, seed=seeds(num_seeds), **{**settings, **kw}))

    grids = [grid(f"kappa_{v}_{family}", classes[v], kappa=axis(kappas), c_fa=axis(c_fas)) for v in variants]
    if baseline:
        grids.append(grid(family, classes["baseline"], **({"kappa": 1.0, "c_fa": c_fas[0]} if family != "trpo" else {})))
    if naive_kappas:
        grids.append(grid(f"naive_kappa_pi_{family}", classes["pi"], kappa=axis(naive_kappas), c_fa=c_fas[0],
                          naive_schedule=True))
    if gae_lambdas:
        if family != "trpo":
            raise ValueError("gae_lambdas apply to the TRPO family only")
        grids.append(grid("gae", classes["baseline"], **{"lambda": axis(gae_lambdas)}))
    if gammas:
        base = {"kappa": 1.0, "c_fa": c_fas[0]} if family != "trpo" else {}
        grids.append(grid(f"{family}_gamma", classes["baseline"], gamma=axis(gammas), **base))
    return grids
