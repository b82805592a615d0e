"""kappa-PI-TRPO and kappa-VI-TRPO (paper, Sec. 4.2 and Appendix B, Algorithms 7 and 8).

The schedule counts TRPO iterations (sample batches of M = train_batch_size env steps), as the
paper's pseudo-code does: T = total_env_steps // M batches, N_kappa from C_FA, T_kappa = T / N_kappa
batches per kappa-iteration; the naive schedule N_kappa = T is one batch per kappa-iteration (the
paper's Sec. 6 reading of GAE as kappa-PI-TRPO with T_kappa = 1).
Per batch the learner fits V_theta to R_j(kappa, V_phi) and steps the policy with advantages
R_j - V_theta(s_j); kappa-PI also fits V_phi to rho_j (every batch by default, see `phi_fit`).
A kappa-iteration ends, as in every family, in the shared loop's `_end_improvement`
(`kappa_rllib.algorithms.kappa_loop`, shared with kappa-PPO): the learner refreshes the V_phi
snapshot (kappa-PI, Alg. 7, lines 12-13) or copies V_theta to V_phi (kappa-VI, Alg. 8, line 11)
in `end_kappa_iteration`.
"""

from __future__ import annotations

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from kappa_rllib import defaults
from kappa_rllib.algorithms.config_mixins import KappaConfigMixin, set_given
from kappa_rllib.algorithms.kappa_loop import KappaLoopMixin
from kappa_rllib.algorithms.trpo.trpo import TRPO, TRPOConfig
from kappa_rllib.phases import KappaPhaseMachine
from kappa_rllib.variant import PHI_MODULE_ID, PHI_OPTION_DEFAULTS, PHI_SHAPING_MODULE_ID, PI, VI


class KappaTRPOConfig(KappaConfigMixin, TRPOConfig):
    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class)
        # C_FA after the paper's ablation for TRPO (Appendix B.1); T ~2000 iterations of 1024 steps (Table 4)
        self.set_kappa_defaults(defaults.TRPO)
        # kappa-PI only: see kappa_rllib.variant
        self.phi_fit, self.phi_target = PHI_OPTION_DEFAULTS["phi_fit"], PHI_OPTION_DEFAULTS["phi_target"]
        # kappa-VI only: V_phi <- V_theta once more, after the run's first batch (the authors' code copies
        # when `iteration % interval == 0`, iteration 0 included); False: V_phi keeps its initial weights
        # until the first kappa-iteration ends (Algorithm 8 as written).
        self.copy_phi_after_first_batch = False
        # V_theta (and the policy) in the default module; V_phi in learner-only modules.
        phi_modules = [PHI_MODULE_ID] + ([PHI_SHAPING_MODULE_ID] if self.kappa_variant == PI else [])
        self._rl_module_spec = MultiRLModuleSpec(
            rl_module_specs={
                DEFAULT_MODULE_ID: RLModuleSpec(),
                **{mid: RLModuleSpec(learner_only=True) for mid in phi_modules},
            }
        )

    def training(self, *, phi_fit: str | None = None, phi_target: str | None = None,
                 copy_phi_after_first_batch: bool | None = None, **kwargs):
        """TRPO's `.training(...)` plus the kappa settings (`KappaConfigMixin.training`) and (keyword-only):

        Args:
            phi_fit: kappa-PI only: when V_phi is fitted (`kappa_rllib.variant`, PHI_FIT_*).
            phi_target: kappa-PI only: how V_phi's target rho_j ends at a time-limit truncation and at the
                batch end (`kappa_rllib.variant`, PHI_TARGET_*).
            copy_phi_after_first_batch: kappa-VI only: also copy V_theta into V_phi after the run's first
                batch, as the authors' code does, so the first kappa-iteration's shaping reads a value net that
                has seen one batch rather than a random one. False (default): Algorithm 8 as written.
        """
        set_given(self, {"phi_fit": phi_fit, "phi_target": phi_target,
                         "copy_phi_after_first_batch": copy_phi_after_first_batch})
        return super().training(**kwargs)

    def _kappa_plan_options(self) -> dict:
        return {"phi_fit": self.phi_fit, "phi_target": self.phi_target}

    def get_default_learner_class(self):
        from kappa_rllib.algorithms.kappa_trpo.torch.kappa_trpo_torch_learner import KappaTRPOTorchLearner

        return KappaTRPOTorchLearner

    @property
    def schedule_length(self) -> int:
        """T in TRPO iterations (batches); env steps beyond a whole batch are not used."""
        return int(self.total_env_steps) // int(self.train_batch_size)

    def check_ranges(self, problems) -> None:
        super().check_ranges(problems)
        self.check_kappa_ranges(problems)
        if self.lambda_ != 1.0:
            problems.add(f"lambda={self.lambda_}: kappa-TRPO's advantages are kappa-returns; "
                         "lambda only applies to the GAE baseline (TRPOConfig)")
        if not isinstance(self.copy_phi_after_first_batch, bool):
            problems.add(f"copy_phi_after_first_batch must be True or False, got {self.copy_phi_after_first_batch!r}")
        elif self.copy_phi_after_first_batch and self.kappa_variant != VI:
            problems.add("copy_phi_after_first_batch=True applies to kappa-VI-TRPO only (kappa-PI fits V_phi)")
        if self.kappa_variant != PI:  # kappa-VI copies V_theta into V_phi: it never fits V_phi
            for name, default in PHI_OPTION_DEFAULTS.items():
                if getattr(self, name) != default:
                    problems.add(f"{name}={getattr(self, name)!r} applies to kappa-PI-TRPO only (kappa-VI never fits V_phi)")

    def check_relations(self) -> None:
        super().check_relations()
        self.check_kappa_schedule("TRPO iterations")


class KappaPITRPOConfig(KappaTRPOConfig):
    """Config of kappa-PI-TRPO (paper, Algorithm 7): TRPO on the surrogate MDP, V_phi fitted to the plain returns.

    V_theta is fitted to the kappa-returns R_j(kappa, V_phi) = sum_t (gamma kappa)^(t-j) r_t(kappa, V_phi),
    the policy step uses the advantages R_j - V_theta(s_j), and V_phi evaluates the policy on the plain
    returns rho_j (on every batch by default, as the authors' code: `phi_fit`). Defaults: the paper's
    Table 4 (C_FA 0.2, T = 2M env steps); kappa = 1 is TRPO.

    ```python
    from kappa_rllib import KappaPITRPOConfig
    config = (
        KappaPITRPOConfig()
        .environment("Hopper-v5")
        .training(kappa=0.68, c_fa=0.2, total_env_steps=2_000_000)
    )
    algo = config.build_algo()  # a KappaPITRPO
    ```
    """

    kappa_variant = PI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaPITRPO)


class KappaVITRPOConfig(KappaTRPOConfig):
    """Config of kappa-VI-TRPO (paper, Algorithm 8): TRPO on the surrogate MDP, whose value net then becomes V_phi.

    As `KappaPITRPOConfig`, but V_phi is not trained: when a kappa-iteration ends it is set to V_theta
    (phi <- theta, Algorithm 8, line 11). kappa = 1 is TRPO.

    ```python
    from kappa_rllib import KappaVITRPOConfig
    config = (
        KappaVITRPOConfig()
        .environment("HalfCheetah-v5")
        .training(kappa=0.36, c_fa=0.2, total_env_steps=2_000_000)
    )
    algo = config.build_algo()  # a KappaVITRPO
    ```
    """

    kappa_variant = VI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaVITRPO)


class KappaTRPO(KappaLoopMixin, TRPO):
    def setup(self, config) -> None:
        super().setup(config)
        self.phases = KappaPhaseMachine(
            total_units=self.config.schedule_length,
            num_iterations=self.config.num_kappa_iterations,
            with_evaluation_phase=False,  # V_phi's work happens inside the batches' updates
            unit="batches",
        )
        self.counters = {"env_steps": 0}

    def _units_per_training_step(self) -> int:
        return self.config.batches_per_iteration  # batches (TRPO updates) per RLlib iteration: 1 by default

    def _improvement_step(self, max_units: int) -> int:
        """One batch: one TRPO update, with V_phi fitted on it where the plan says so."""
        ends_iteration = self.phases.units_left_in_phase() == 1
        fit_phi = self.config.kappa_plan.fits_phi_on_batch(ends_iteration)
        first = self.phases.units == 0
        self.counters["env_steps"] += self._trpo_iteration(self.config.train_batch_size, fit_phi=fit_phi)
        self.phases.record_units(1)
        self.phases.record_updates(1)
        if first and self.config.copy_phi_after_first_batch and self.config.kappa_plan.copies_theta_to_phi:
            self.learner_group.foreach_learner(lambda learner: learner.copy_value_theta_to_phi())
        return 1


class KappaPITRPO(KappaTRPO):
    """The kappa-PI-TRPO algorithm (paper, Algorithm 7), registered with Tune as "KappaPITRPO".

    Build it from a `KappaPITRPOConfig`; one training iteration is `batches_per_iteration` batches (1 by default). Results carry
    `result["kappa"]` (batches, iteration, phase, ...).

    ```python
    from kappa_rllib import KappaPITRPOConfig
    # a KappaPITRPO
    algo = (
        KappaPITRPOConfig()
        .environment("InvertedPendulum-v5")
        .training(kappa=0.84)
        .build_algo()
    )
    # one batch; result["kappa"]["iteration"] counts kappa-iterations
    result = algo.train()
    ```
    """

    @classmethod
    def get_default_config(cls):
        return KappaPITRPOConfig()


class KappaVITRPO(KappaTRPO):
    """The kappa-VI-TRPO algorithm (paper, Algorithm 8), registered with Tune as "KappaVITRPO".

    Build it from a `KappaVITRPOConfig`; results as `KappaPITRPO`.

    ```python
    from kappa_rllib import KappaVITRPOConfig
    # a KappaVITRPO
    algo = (
        KappaVITRPOConfig()
        .environment("InvertedPendulum-v5")
        .training(kappa=0.84)
        .build_algo()
    )
    result = algo.train()  # one batch; phi <- theta when a kappa-iteration ends
    ```
    """

    @classmethod
    def get_default_config(cls):
        return KappaVITRPOConfig()
