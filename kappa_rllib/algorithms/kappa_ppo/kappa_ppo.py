"""kappa-PI-PPO and kappa-VI-PPO: RLlib's PPO solving the surrogate MDP M_{gamma kappa}(V_phi).

The paper's kappa-TRPO (Algorithms 7, 8) with PPO's clipped update in place of TRPO's natural
gradient step; everything kappa is shared with the other families:
  * schedule: T = total_env_steps // train_batch_size PPO iterations (batches), N_kappa from C_FA
    (kappa_rllib.schedule), T_kappa = T / N_kappa batches per kappa-iteration; the outer loop
    is kappa_rllib.algorithms.kappa_loop, the phase machine kappa_rllib.phases;
  * what the variant does with V_phi: config.kappa_plan (kappa_rllib.variant);
  * advantages and value targets: kappa_rllib.connectors.kappa_advantage_estimation, which
    replaces RLlib's GAE connector in PPO's learner pipeline; PPO's loss is RLlib's, unchanged.

Sampling, the learner update and the weight sync are RLlib's PPO `training_step`, one call per
batch. The batch that ends a kappa-iteration is followed by the variant's closing step on every
learner (kappa-PI: V_phi's snapshot <- V_phi; kappa-VI: V_phi <- V_theta).
`ppo` on the command line is kappa-PI-PPO with kappa = 1: exactly PPO with lambda = 1 (tested).
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo.ppo import PPO, PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

from kappa_rllib import defaults
from kappa_rllib.algorithms.config_mixins import (
    EnvIdMixin,
    KappaConfigMixin,
    SettingProblems,
    TwoStageValidationMixin,
    check_env_known,
    check_int,
    check_one_batch,
)
from kappa_rllib.algorithms.kappa_loop import KappaLoopMixin
from kappa_rllib.checkpoints import ManifestMixin
from kappa_rllib.env_runner import EpisodeReturnsEnvRunner
from kappa_rllib.phases import KappaPhaseMachine
from kappa_rllib.schedule import validate_gamma
from kappa_rllib.variant import PHI_MODULE_ID, PHI_SHAPING_MODULE_ID, PI, VI


class KappaPPOConfig(TwoStageValidationMixin, EnvIdMixin, KappaConfigMixin, PPOConfig):
    """PPOConfig plus `kappa`, `c_fa`, `total_env_steps`, `naive_schedule`; use the PI/VI subclasses.

    `KappaPIPPOConfig.from_ppo(ppo_config)` puts kappa on a PPOConfig you already have.
    """

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class)
        self.kappa = defaults.PPO["kappa"]
        self.c_fa = defaults.PPO["c_fa"]
        self.total_env_steps = defaults.PPO["total_env_steps"]
        self.naive_schedule = False
        self._rl_module_spec = kappa_module_spec(self.kappa_variant)
        # RLlib's EnvRunner, also reporting every episode's return (the report's scores)
        self.env_runner_cls = EpisodeReturnsEnvRunner

    @classmethod
    def from_ppo(cls, ppo_config: PPOConfig, **kappa_settings) -> "KappaPPOConfig":
        """This class's config with every setting of `ppo_config` (env, lr, batch sizes, model,
        env runners, ...) and the given kappa settings (kappa=, c_fa=, total_env_steps=, ...)."""
        if not isinstance(ppo_config, PPOConfig):
            raise ValueError(f"from_ppo takes a PPOConfig, got {type(ppo_config).__name__}")
        config = cls()
        own = {"algo_class", "_rl_module_spec", *cls.KAPPA_SETTINGS}
        for name, value in vars(ppo_config.copy(copy_frozen=False)).items():
            if name not in own and not (name == "env_runner_cls" and value is None):
                setattr(config, name, value)
        if ppo_config._rl_module_spec is not None:
            config._rl_module_spec = kappa_module_spec(cls.kappa_variant, ppo_config._rl_module_spec)
        return config.training(**kappa_settings)

    def training(self, **kwargs):
        """PPO's `.training(...)` plus the kappa settings (keyword-only)."""
        self._set_given({k: kwargs.pop(k) for k in self.KAPPA_SETTINGS if k in kwargs})
        return super().training(**kwargs)

    @property
    def schedule_length(self) -> int:
        """T in PPO iterations (batches of train_batch_size env steps)."""
        return int(self.total_env_steps) // int(self.total_train_batch_size)

    def get_default_learner_class(self):
        from kappa_rllib.algorithms.kappa_ppo.torch.kappa_ppo_torch_learner import KappaPPOTorchLearner

        return KappaPPOTorchLearner

    def check_ranges(self, problems: SettingProblems) -> None:
        problems.check(validate_gamma, self.gamma)
        self.check_kappa_ranges(problems)
        problems.check(check_int, "train_batch_size", self.total_train_batch_size, 1)
        problems.check(check_env_known, self.env)
        if self.lambda_ != 1.0:
            problems.add(f"lambda={self.lambda_}: kappa-PPO's advantages are kappa-returns (lambda 1 in the "
                         "surrogate MDP, where kappa plays lambda's part); leave lambda at 1")
        if not self.use_critic or not self.use_gae:
            problems.add("use_critic and use_gae must be True: the kappa-returns bootstrap with V_theta")
        if self.model_config.get("use_lstm") or self.model_config.get("use_attention"):
            problems.add("use_lstm/use_attention: kappa advantages need a stateless module")

    def check_relations(self) -> None:
        check_one_batch(self.total_env_steps, self.total_train_batch_size)
        self.check_kappa_schedule("PPO iterations")


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


class KappaPIPPOConfig(KappaPPOConfig):
    kappa_variant = PI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaPIPPO)


class KappaVIPPOConfig(KappaPPOConfig):
    kappa_variant = VI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaVIPPO)


class KappaPPO(ManifestMixin, KappaLoopMixin, PPO):
    def setup(self, config) -> None:
        super().setup(config)
        self.phases = KappaPhaseMachine(
            total_steps=self.config.schedule_length,
            num_iterations=self.config.num_kappa_iterations,
            with_evaluation_phase=False,  # V_phi's fit happens inside each batch's update
            unit="batches",
        )
        self.counters = {"env_steps": 0}

    def _units_per_training_step(self) -> int:
        return 1  # one RLlib iteration = one batch = one PPO update (num_epochs over the batch)

    def _improvement_step(self, max_units: int) -> int:
        before = self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        PPO.training_step(self)
        after = self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        self.counters["env_steps"] += int(after - before)
        self.phases.record_steps(1)
        self.phases.record_updates(1)
        return 1

    def set_state(self, state) -> None:
        super().set_state(state)
        # RLlib's EnvRunners sample PPO's batches: the remote ones take the restored policy now, not
        # after the first update (the kappa loop's own sync only reaches the local one).
        if "kappa" in state and self.env_runner_group.num_remote_env_runners():
            self.env_runner_group.sync_weights(from_worker_or_learner_group=self.learner_group, inference_only=True)

    def _end_improvement(self) -> None:
        """The variant's closing step, on every learner at once (they hold one snapshot)."""
        if self.config.kappa_plan.uses_v_phi:
            self.learner_group.foreach_learner(lambda learner: learner.end_kappa_iteration())


class KappaPIPPO(KappaPPO):
    @classmethod
    def get_default_config(cls):
        return KappaPIPPOConfig()


class KappaVIPPO(KappaPPO):
    @classmethod
    def get_default_config(cls):
        return KappaVIPPOConfig()
