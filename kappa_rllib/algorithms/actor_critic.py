"""What kappa-PPO and kappa-APPO share: the kappa layer on an RLlib actor-critic algorithm.

Any RLlib algorithm with a value function V_theta and a return computation that takes rewards
and a discount (PPO's GAE, APPO's V-trace) solves the surrogate MDP M_{gamma kappa}(V_phi)
(paper, Sec. 3-4) once it is fed the shaped reward r + gamma (1 - kappa) V_phi(s') and the
discount gamma * kappa. V_phi is a learner-only copy of the algorithm's own module class:

  * kappa-PI: `PHI_MODULE_ID` evaluates the current policy (it regresses on the plain returns on
    every batch) and the shaped reward reads its frozen snapshot `PHI_SHAPING_MODULE_ID`, refreshed
    when a kappa-iteration ends (the authors' TRPO code; paper, Algorithm 7);
  * kappa-VI: `PHI_MODULE_ID` <- V_theta when a kappa-iteration ends (Algorithm 8, line 11).

The config side (`KappaActorCriticConfigMixin`: settings, module spec, `from_base`, validation)
and the learner side (`KappaValueLearnerMixin`: which network shapes, optimizers, closing a
kappa-iteration) live here once; each algorithm says only where the shaped reward and the
surrogate discount enter its return computation.
"""

from __future__ import annotations

import torch

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from kappa_rllib.algorithms.config_mixins import (
    EnvIdMixin,
    KappaConfigMixin,
    SettingProblems,
    TwoStageValidationMixin,
    check_env_known,
    check_int,
    check_one_batch,
)
from kappa_rllib.algorithms.trpo.torch.trpo_torch_learner import copy_value_net
from kappa_rllib.env_runner import EpisodeReturnsEnvRunner
from kappa_rllib.schedule import validate_gamma
from kappa_rllib.variant import PHI_MODULE_ID, PHI_SHAPING_MODULE_ID, PI

PHI_VF_LOSS = "kappa_phi_vf_loss"  # kappa-PI's V_phi value loss, in the learner results of `PHI_MODULE_ID`


def kappa_module_spec(variant: str, default: RLModuleSpec | None = None) -> MultiRLModuleSpec:
    """V_theta (and the policy) in the default module; V_phi (and kappa-PI's snapshot of it) in
    learner-only copies of the same module class, which never reach the EnvRunners."""
    phi_modules = [PHI_MODULE_ID] + ([PHI_SHAPING_MODULE_ID] if variant == PI else [])
    default = default or RLModuleSpec()
    return MultiRLModuleSpec(rl_module_specs={
        DEFAULT_MODULE_ID: default,
        **{mid: RLModuleSpec(module_class=default.module_class, catalog_class=default.catalog_class,
                             model_config=default.model_config, learner_only=True) for mid in phi_modules},
    })


class KappaActorCriticConfigMixin(TwoStageValidationMixin, EnvIdMixin, KappaConfigMixin):
    """Mixed in before an RLlib actor-critic config class (`BASE_CONFIG`): the kappa settings
    `kappa`, `c_fa`, `total_env_steps`, `naive_schedule`, the V_phi modules, and `from_base`.

    T (`schedule_length`) counts batches of `train_batch_size` env steps, the unit in which both
    PPO and APPO update.
    """

    BASE_CONFIG: type = None  # PPOConfig, APPOConfig
    DEFAULTS: dict = None  # kappa_rllib.defaults.PPO, .APPO

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class)
        self.set_kappa_defaults(self.DEFAULTS)
        self._rl_module_spec = kappa_module_spec(self.kappa_variant)
        # RLlib's EnvRunner, also reporting every episode's return (the report's scores)
        self.env_runner_cls = EpisodeReturnsEnvRunner

    @classmethod
    def from_base(cls, base_config, **kappa_settings):
        """This class's config with every setting of `base_config` (env, lr, batch sizes, model,
        env runners, learners, ...) and the given kappa settings (kappa=, c_fa=, total_env_steps=, ...)."""
        name = cls.BASE_CONFIG.__name__
        if not isinstance(base_config, cls.BASE_CONFIG):
            raise ValueError(f"{cls.__name__} is built from a {name}, got {type(base_config).__name__}")
        config = cls()
        own = {"algo_class", "_rl_module_spec", *cls.KAPPA_SETTINGS}
        for setting, value in vars(base_config.copy(copy_frozen=False)).items():
            if setting not in own and not (setting == "env_runner_cls" and value is None):
                setattr(config, setting, value)
        if base_config._rl_module_spec is not None:
            config._rl_module_spec = kappa_module_spec(cls.kappa_variant, base_config._rl_module_spec)
        return config.training(**kappa_settings)

    @property
    def schedule_length(self) -> int:
        """T in batches of train_batch_size env steps."""
        return int(self.total_env_steps) // int(self.total_train_batch_size)

    def check_ranges(self, problems: SettingProblems) -> None:
        problems.check(validate_gamma, self.gamma)
        self.check_kappa_ranges(problems)
        problems.check(check_int, "train_batch_size", self.total_train_batch_size, 1)
        problems.check(check_env_known, self.env)
        if self.model_config.get("use_lstm") or self.model_config.get("use_attention"):
            problems.add("use_lstm/use_attention: kappa advantages need a stateless module")

    def check_relations(self) -> None:
        check_one_batch(self.total_env_steps, self.total_train_batch_size)
        self.check_kappa_schedule(f"{self.BASE_CONFIG.__name__[:-6]} iterations")


class KappaValueLearnerMixin:
    """Mixed in before an RLlib actor-critic TorchLearner: which network V_phi is, who trains,
    and what closes a kappa-iteration. Call `_build_kappa()` at the end of `build()`."""

    def _build_kappa(self) -> None:
        self.plan = self.config.kappa_plan
        if self.plan.evaluates_phi:  # the first iteration shapes with V_phi's initial weights
            self.end_kappa_iteration()

    @property
    def shaping_module_id(self) -> str:
        """The network whose values enter the shaped reward r + gamma (1 - kappa) V_phi(s')."""
        return PHI_SHAPING_MODULE_ID if self.plan.evaluates_phi else PHI_MODULE_ID

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        # The policy and V_theta always train; V_phi only where it is evaluated (kappa-PI). The
        # kappa-VI copy and the kappa-PI snapshot only ever receive weights: no optimizer.
        if module_id == DEFAULT_MODULE_ID or (module_id == PHI_MODULE_ID and config.kappa_plan.evaluates_phi):
            super().configure_optimizers_for_module(module_id, config)

    def end_kappa_iteration(self) -> None:
        """Closes a kappa-iteration: kappa-PI refreshes V_phi's snapshot, kappa-VI copies V_theta."""
        with torch.no_grad():
            if self.plan.evaluates_phi:  # the next surrogate MDP is fixed (Alg. 7, lines 12-13)
                copy_value_net(self.module[PHI_MODULE_ID].unwrapped(), self.module[PHI_SHAPING_MODULE_ID].unwrapped())
            elif self.plan.copies_theta_to_phi:  # Alg. 8, line 11
                copy_value_net(self.module[DEFAULT_MODULE_ID].unwrapped(), self.module[PHI_MODULE_ID].unwrapped())

    def shaping_values(self, batch) -> torch.Tensor:
        """V_phi on every row of `batch` (no gradient), as the shaped reward reads it."""
        with torch.no_grad():
            return self.module[self.shaping_module_id].unwrapped().compute_values(batch)

    def snapshot_values(self, obs) -> torch.Tensor:
        """V_phi's values on `obs` as the shaped reward reads them (tests: every learner agrees)."""
        return self.shaping_values({Columns.OBS: obs})
