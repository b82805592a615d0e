"""kappa-PI-TRPO and kappa-VI-TRPO (paper, Sec. 4.2 and Appendix B, Algorithms 7 and 8).

The schedule counts TRPO iterations (sample batches of M = train_batch_size env steps), as the
paper's pseudo-code does: T = total_env_steps // M batches, N_kappa from C_FA, T_kappa = T / N_kappa
batches per kappa-iteration; the naive schedule N_kappa = T is one batch per kappa-iteration (the
paper's Sec. 6 reading of GAE as kappa-PI-TRPO with T_kappa = 1).
Per batch the learner fits V_theta to R_j(kappa, V_phi) and steps the policy with advantages
R_j - V_theta(s_j). At the end of each kappa-iteration: kappa-PI fits V_phi to rho_j on the last
batch (Alg. 7, lines 12-13); kappa-VI copies V_theta to V_phi (Alg. 8, line 11).
"""

from __future__ import annotations

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from kappa_rllib.algorithms.common import KappaStateMixin
from kappa_rllib.algorithms.config_mixins import KappaConfigMixin
from kappa_rllib.algorithms.kappa_trpo.torch.kappa_trpo_torch_learner import VALUE_PHI_MODULE_ID
from kappa_rllib.algorithms.trpo.trpo import TRPO, TRPOConfig
from kappa_rllib.phases import KappaPhaseMachine


class KappaTRPOConfig(KappaConfigMixin, TRPOConfig):
    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class)
        self.kappa = 0.84
        self.c_fa = 0.2  # the paper's C_FA for TRPO after its ablation (Appendix B.1)
        self.total_env_steps = 2_000_000  # ~2000 iterations of 1024 steps (Table 4)
        self.naive_schedule = False
        # V_theta (and the policy) in the default module; V_phi in a learner-only module.
        self._rl_module_spec = MultiRLModuleSpec(
            rl_module_specs={
                DEFAULT_MODULE_ID: RLModuleSpec(),
                VALUE_PHI_MODULE_ID: RLModuleSpec(learner_only=True),
            }
        )

    def training(self, **kwargs):
        """TRPO's `.training(...)` plus the kappa settings (keyword-only)."""
        self._set_given({k: kwargs.pop(k) for k in self.KAPPA_SETTINGS if k in kwargs})
        return super().training(**kwargs)

    def get_default_learner_class(self):
        from kappa_rllib.algorithms.kappa_trpo.torch.kappa_trpo_torch_learner import KappaTRPOTorchLearner

        return KappaTRPOTorchLearner

    @property
    def schedule_length(self) -> int:
        """T in TRPO iterations (batches); env steps beyond a whole batch are not used."""
        return int(self.total_env_steps) // int(self.train_batch_size)

    def validate(self) -> None:
        super().validate()
        if self.lambda_ != 1.0:
            raise ValueError(f"lambda={self.lambda_}: kappa-TRPO's advantages are kappa-returns; "
                             "lambda only applies to the GAE baseline (TRPOConfig)")
        self.validate_kappa_schedule("TRPO iterations")


class KappaPITRPOConfig(KappaTRPOConfig):
    kappa_variant = "pi"

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaPITRPO)


class KappaVITRPOConfig(KappaTRPOConfig):
    kappa_variant = "vi"

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaVITRPO)


class KappaTRPO(KappaStateMixin, TRPO):
    def setup(self, config) -> None:
        super().setup(config)
        self.phases = KappaPhaseMachine(
            total_steps=self.config.schedule_length,
            num_iterations=self.config.num_kappa_iterations,
            with_evaluation_phase=False,
            unit="batches",
        )
        self.counters = {"env_steps": 0}

    def training_step(self) -> None:
        self._check_not_done()
        self.counters["env_steps"] += self._trpo_iteration(self.config.train_batch_size)
        self.phases.record_steps(1)
        self.phases.record_updates(1)
        if self.phases.improvement_complete():
            self._end_kappa_iteration()
            self.phases.end_improvement()

    def _end_kappa_iteration(self) -> None:
        if self.config.kappa == 1.0:
            return  # V_phi has weight gamma (1 - kappa) = 0: nothing to evaluate
        if self.config.kappa_variant == "pi":
            self.learner_group.foreach_learner(lambda learner: learner.fit_value_phi())
        else:
            self.learner_group.foreach_learner(lambda learner: learner.copy_value_theta_to_phi())


class KappaPITRPO(KappaTRPO):
    @classmethod
    def get_default_config(cls):
        return KappaPITRPOConfig()


class KappaVITRPO(KappaTRPO):
    @classmethod
    def get_default_config(cls):
        return KappaVITRPOConfig()
