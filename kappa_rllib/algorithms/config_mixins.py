"""Config pieces shared by the kappa-DQN and (kappa-)TRPO configs.

Validation runs in two stages (`TwoStageValidationMixin`): first every setting's own range
(kappa in [0, 1], C_FA in (0, 1), counts, rates, ...), all of them, reported together in one line;
then RLlib's own checks; then the checks that relate settings to each other (T against a batch,
the learning start, N_kappa). A user who sets C_FA = 1.5 and a tiny T hears about C_FA first.
"""

from __future__ import annotations

from ray.rllib.algorithms.algorithm_config import NotProvided

from kappa_rllib import envs
from kappa_rllib.schedule import num_iterations, validate_c_fa, validate_kappa
from kappa_rllib.variant import KappaPlan


class EnvIdMixin:
    """`.environment(id)` as RLlib's, but ids needing our construction (`ALE/...` with the
    paper's preprocessing, the tabular MDP) are routed through `kappa_rllib.envs`."""

    def environment(self, env=NotProvided, **kwargs):
        if isinstance(env, str):
            env = envs.rllib_env_name(env)
        return super().environment(env, **kwargs)


def set_given(config, settings: dict) -> None:
    """Sets each of a `.training(...)` call's settings that the caller gave (not None or NotProvided)."""
    for name, value in settings.items():
        if value is not None and value is not NotProvided:
            setattr(config, name, value)


def check_int(name: str, value, minimum: int = 1) -> None:
    """A count: an int (not a bool) >= `minimum`; else a one-line ValueError naming the setting."""
    if isinstance(value, bool) or not (isinstance(value, int) and value >= minimum):
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def check_positive(name: str, value) -> None:
    """A rate or size: a number (not a bool) > 0."""
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
        raise ValueError(f"{name} must be a number > 0, got {value!r}")


def check_one_batch(total_env_steps: int, batch_size: int) -> None:
    """T holds at least one batch (the on-policy families: TRPO, PPO)."""
    if total_env_steps < batch_size:
        raise ValueError(f"total_env_steps={total_env_steps} is less than one batch "
                         f"(train_batch_size={batch_size}); raise total_env_steps")


def check_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")


class SettingProblems:
    """Collects the problems of the own-range checks, so that several wrong settings are named at once."""

    def __init__(self):
        self.problems: list[str] = []

    def check(self, check, *args) -> bool:
        """Runs `check(*args)`; a ValueError/TypeError it raises is kept. True if it passed."""
        try:
            check(*args)
            return True
        except (ValueError, TypeError) as e:
            self.add(str(e))
            return False

    def add(self, problem: str) -> None:
        problem = " ".join(problem.split())
        if problem not in self.problems:  # e.g. T, checked by two mixins
            self.problems.append(problem)

    def raise_if_any(self) -> None:
        if len(self.problems) == 1:
            raise ValueError(self.problems[0])
        if self.problems:
            raise ValueError(f"{len(self.problems)} settings are wrong: " + "; ".join(self.problems))


class TwoStageValidationMixin:
    """`validate()`: own ranges (all at once), RLlib's checks, then relations between settings.

    Subclasses extend `check_ranges(problems)` and `check_relations()`, calling super()."""

    def validate(self) -> None:
        problems = SettingProblems()
        self.check_ranges(problems)
        problems.raise_if_any()
        super().validate()  # RLlib's own checks (they expect the types checked above)
        self.check_relations()
        self.check_observation_space()

    def check_ranges(self, problems: SettingProblems) -> None:
        pass

    def check_relations(self) -> None:
        pass

    def check_observation_space(self) -> None:
        """RLlib's default networks read a `Box` observation only (its catalog raises "No default encoder config"
        as the algorithm is built, a traceback from the CLI): said at `validate()` instead, naming the env, unless
        the config brings its own RLModule, or (kappa-PPO / kappa-APPO, on RLlib's EnvRunner) env-to-module
        connectors that may turn the observation into one (RLlib's `FlattenObservations`). kappa-DQN and the TRPO
        family sample with `RawTransitionEnvRunner`, which runs none."""
        import gymnasium as gym

        if not isinstance(self.env, str) or _own_module(getattr(self, "_rl_module_spec", None)):
            return
        from kappa_rllib.env_runner import RawTransitionEnvRunner

        if self.env_runner_cls is not RawTransitionEnvRunner and getattr(self, "_env_to_module_connector", None):
            return  # RLlib's EnvRunner runs its env-to-module connectors (FlattenObservations gives the module a Box)
        space = envs.spaces_of(self.env, self.env_config)[0]
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"env {self.env!r} has a {space} observation space: RLlib's default networks need a Box; "
                             "wrap the env so that it gives one (one-hot a Discrete state) or give your own "
                             "RLModule with .rl_module(rl_module_spec=...)")


def _own_module(spec) -> bool:
    """Whether an RLModule spec names a module or catalog class of the user's (the kappa configs' own specs name
    their modules, `kappa_phi`, with the default classes: None)."""
    if spec is None:
        return False
    specs = getattr(spec, "rl_module_specs", None)
    specs = specs.values() if isinstance(specs, dict) else [spec]
    return any(getattr(s, "module_class", None) is not None or getattr(s, "catalog_class", None) is not None
               for s in specs)


def check_env_known(env) -> None:
    if isinstance(env, str):
        envs.check_env_id(env)


class RawSamplingMixin:
    """The raw-transition EnvRunner that kappa-DQN and the TRPO family sample with: its defaults and
    its settings checks."""

    def set_raw_sampling_defaults(self) -> None:
        """The EnvRunner settings both families share (called from their config's __init__)."""
        from kappa_rllib.env_runner import RawTransitionEnvRunner

        self.env_runner_cls = RawTransitionEnvRunner
        # Sub-envs per EnvRunner, acting in one batched forward pass: ~1.7x the env steps/s of one
        # on W1 and W2 (benchmarks/throughput.py); exact step counts are kept (kappa_rllib.env_runner).
        self.num_envs_per_env_runner = 4
        # The training_step runs its own loop (it must stop exactly at the end of the schedule), so
        # RLlib's own iteration minimums are off.
        self.min_sample_timesteps_per_iteration = 0
        self.min_time_s_per_iteration = None
        self.min_train_timesteps_per_iteration = 0

    def check_sampling_ranges(self, problems: SettingProblems) -> None:
        """Counts every algorithm here uses, checked before RLlib's own `validate` (which would
        fail on a wrong type with a message that does not name the setting), and what the
        raw-transition EnvRunner needs."""
        problems.check(check_int, "num_env_runners", self.num_env_runners, 0)
        problems.check(check_int, "num_envs_per_env_runner", self.num_envs_per_env_runner, 1)
        problems.check(check_int, "train_batch_size", self.train_batch_size, 1)
        if self.seed is not None:
            problems.check(check_int, "seed", self.seed, 0)
        problems.check(self._check_sampling)
        problems.check(check_env_known, self.env)

    def _check_sampling(self) -> None:
        from kappa_rllib.env_runner import RawTransitionEnvRunner

        if self.in_evaluation:  # evaluation samples with RLlib's own episodes (get_evaluation_config_object)
            return
        if not (isinstance(self.env_runner_cls, type) and issubclass(self.env_runner_cls, RawTransitionEnvRunner)):
            raise ValueError("env_runner_cls must be kappa_rllib.env_runner.RawTransitionEnvRunner (or a subclass)")
        if "async" in str(self.gym_env_vectorize_mode).lower():
            raise ValueError("gym_env_vectorize_mode must be 'SYNC': the EnvRunner steps the sub-envs itself")


    def get_evaluation_config_object(self):
        """RLlib's evaluation config, sampling with RLlib's own episode-building EnvRunner
        (`EpisodeReturnsEnvRunner`): RLlib's evaluation loop reads episodes, which the raw-transition
        EnvRunner does not make. Evaluation EnvRunners are their own: their episodes never reach the
        learners or the replay buffer, and the kappa schedule counts training env steps only."""
        from kappa_rllib.env_runner import EpisodeReturnsEnvRunner, RawTransitionEnvRunner

        eval_config = super().get_evaluation_config_object()
        if eval_config is not None and issubclass(eval_config.env_runner_cls, RawTransitionEnvRunner):
            eval_config.env_runner_cls = EpisodeReturnsEnvRunner
        return eval_config


class KappaConfigMixin:
    """The kappa settings (`kappa`, `c_fa`, `total_env_steps`, `naive_schedule`): declared, defaulted
    and set here for every kappa config, and N_kappa.

    `schedule_length` is T in the schedule's unit: env steps (kappa-DQN) or batches (TRPO, PPO, APPO).
    """

    kappa_variant: str = ""  # "pi" or "vi", set by the concrete config classes
    KAPPA_SETTINGS = ("kappa", "c_fa", "total_env_steps", "naive_schedule")

    def set_kappa_defaults(self, family: dict) -> None:
        """The kappa settings' defaults, from the family's row of `kappa_rllib.defaults` (the one source
        of the numbers: the paper's, docs/paper-settings.md). Called from each config's __init__."""
        self.kappa = family["kappa"]  # kappa in [0, 1]; 1 is the base algorithm exactly
        self.c_fa = family["c_fa"]  # C_FA in (0, 1): sets N_kappa (paper, Eq. 8)
        self.total_env_steps = family["total_env_steps"]  # T
        self.naive_schedule = False  # True: N_kappa = T, T_kappa = 1 (the paper's naive baseline)

    def training(self, *, kappa: float | None = NotProvided, c_fa: float | None = NotProvided,
                 total_env_steps: int | None = NotProvided, naive_schedule: bool | None = NotProvided, **kwargs):
        """The base algorithm's `.training(...)` plus the kappa settings (keyword-only, like RLlib's).

        Args:
            kappa: The surrogate MDP's discount is gamma * kappa and its reward r + gamma (1 - kappa)
                V(s') (paper, Sec. 3). In [0, 1]; kappa = 1 is the base algorithm (DQN, TRPO, ...).
            c_fa: C_FA in (0, 1), the function-approximation error constant that sets the number of
                kappa-iterations N_kappa = ceil(log(C_FA ...)) (paper, Eq. 8; `kappa_rllib.schedule`).
            total_env_steps: T, the run's env steps; each kappa-iteration gets T / N_kappa of them.
            naive_schedule: True for the paper's naive baseline: N_kappa = T, one step per iteration.
        """
        set_given(self, dict(kappa=kappa, c_fa=c_fa, total_env_steps=total_env_steps, naive_schedule=naive_schedule))
        return super().training(**kwargs)

    @property
    def kappa_plan(self) -> KappaPlan:
        """What this configuration does with V_phi (evaluate, copy, or nothing at kappa = 1)."""
        return KappaPlan(self.kappa_variant, float(self.kappa), **self._kappa_plan_options())

    def _kappa_plan_options(self) -> dict:
        return {}

    @property
    def schedule_length(self) -> int:
        raise NotImplementedError

    @property
    def num_kappa_iterations(self) -> int:
        """N_kappa: from C_FA (paper, Eq. 8), or T for the naive schedule (T_kappa = 1)."""
        if self.naive_schedule:
            return self.schedule_length
        return num_iterations(self.kappa, self.c_fa, self.gamma)

    def check_kappa_ranges(self, problems: SettingProblems) -> None:
        """kappa, C_FA, the variant's options and T, each on its own (one-line messages)."""
        kappa_ok = problems.check(validate_kappa, self.kappa)
        problems.check(validate_c_fa, self.c_fa)
        if not self.kappa_variant:
            problems.add(f"use the PI or VI config class, not {type(self).__name__}")
        elif kappa_ok:
            problems.check(lambda: self.kappa_plan)  # validates the variant's own options
        problems.check(check_int, "total_env_steps", self.total_env_steps, 1)

    def check_kappa_schedule(self, unit: str) -> None:
        """T against N_kappa (after every setting's own range is known good)."""
        if self.num_kappa_iterations > self.schedule_length:
            raise ValueError(
                f"total_env_steps={self.total_env_steps} gives {self.schedule_length} {unit} < "
                f"N_kappa={self.num_kappa_iterations} (kappa={self.kappa}, c_fa={self.c_fa}): "
                "raise total_env_steps or c_fa"
            )
