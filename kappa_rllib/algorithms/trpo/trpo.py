"""TRPO on RLlib's new API stack (RLlib has none), with the paper's Table 4 as defaults.

`lambda_ = 1` is the paper's TRPO baseline (kappa = 1); `lambda_ < 1` is its GAE baseline
(GAE(gamma, lambda) advantages, value net fitted to the discounted return).
One batch of `train_batch_size` env steps = one TRPO update; one training iteration (result row) is
`batches_per_iteration` of them, 1 by default.
"""

from __future__ import annotations

import gymnasium as gym

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.algorithms.ppo.ppo_catalog import PPOCatalog
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from kappa_rllib import defaults, envs
from kappa_rllib.algorithms.config_mixins import (
    EnvIdMixin,
    RawSamplingMixin,
    SettingProblems,
    TwoStageValidationMixin,
    check_int,
    check_one_batch,
    check_positive,
    set_given,
)
from kappa_rllib.checkpoints import ManifestMixin
from kappa_rllib.tuning.config_once import ConfigOnceMixin
from kappa_rllib.algorithms.sampling import SamplerMixin
from kappa_rllib.env_runner import segment_transitions
from kappa_rllib.schedule import validate_gamma

DEFERRED_VALUE_FITS_TIMER = "deferred_value_fits_timer"  # result["timers"]: value fits overlapped with sampling


class TRPOConfig(TwoStageValidationMixin, EnvIdMixin, RawSamplingMixin, AlgorithmConfig):
    """Config of TRPO, the paper's kappa = 1 baseline for MuJoCo, and of its GAE baseline (lambda_ < 1).

    A natural-gradient policy step (conjugate gradient on Fisher-vector products, a KL-bounded line
    search) and a separate value net fitted by Adam; advantages GAE(gamma, lambda_), lambda_ = 1 by
    default. Defaults: the paper's Table 4 and the authors' code (1024 env steps per batch, max KL 0.01,
    T = 2M env steps). `kappa-rllib train --algo trpo` / `--algo gae --lambda L`.

    ```python
    from kappa_rllib import TRPOConfig
    # .training(lambda_=0.84, ...): the paper's GAE baseline
    config = (
        TRPOConfig()
        .environment("Hopper-v5")
        .training(total_env_steps=2_000_000)
    )
    algo = config.build_algo()  # a TRPO
    ```
    """

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or TRPO)
        # The paper's Table 4 and the authors' code (docs/paper-settings.md)
        self.train_batch_size = 1024  # env steps per TRPO iteration (M)
        # T: the run reports `done` (Tune stops it) after total_env_steps // M batches, the same
        # number of batches as kappa-TRPO's schedule with the same T.
        self.total_env_steps = defaults.TRPO["total_env_steps"]
        self.gamma = 0.99
        self.lambda_ = 1.0
        self.max_kl = 0.01
        self.cg_iters = 10
        self.cg_damping = 0.1
        self.line_search_steps = 10
        self.entropy_coeff = 0.01
        self.vf_lr = 1e-3
        self.vf_epochs = 5
        self.vf_minibatch_size = 128
        # The authors' code differs here (docs/paper-settings.md, "Differences"): it accepts a
        # line-search step with KL up to 1.5 x max_kl and computes Fisher-vector products on
        # every 5th sample. 1.0 and 1 are TRPO as published.
        self.kl_accept_factor = 1.0
        self.fvp_subsample = 1
        # gymnasium's v5 tasks tell a time limit (truncated) from a fall (terminated) and the returns
        # bootstrap at a time limit; the authors' gym 0.14 `done` ended the bootstrap there as at a
        # fall (docs/paper-settings.md, "Differences"). True: the authors' semantics.
        self.truncation_as_terminal = False
        # torch's default layer initialisation; True: the authors' (baselines') orthogonal one
        # (hidden layers gain sqrt(2), policy mean output 0.01, value output 1.0, zero biases).
        self.orthogonal_init = False
        self.lr = 0.0  # unused: the policy moves by the natural-gradient step, values by vf_lr
        # Separate policy and value networks (no shared layers); see also the log-std below.
        self._model_config = {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False}
        self.set_raw_sampling_defaults()
        # Act through a numpy copy of the policy's MLP where it is one (same distribution, its
        # log-probabilities tested equal; kappa_rllib.mlp_policy): the EnvRunner's
        # forward pass costs a fraction of RLlib's. False: RLlib's module and distribution classes.
        self.numpy_actor = True
        # With remote EnvRunners: sample the next batch while the learner fits the value nets on
        # this one (exact: no policy lag; see TRPO._trpo_iteration).
        self.overlap_sampling = True
        # Batches (TRPO updates) per `Algorithm.train()` call, i.e. per result row and Tune report. The
        # updates are the same whatever it is (tests/test_kappa_trpo_run.py); a Tune driver spends ~15-20 ms
        # of its one core on each report, so on a cluster more batches per report let one driver feed more
        # trials (benchmarks/driver_load.py). RLlib's own iteration minimums are refused (check_ranges).
        self.batches_per_iteration = 1

    def training(self, *, lambda_: float | None = NotProvided, max_kl: float | None = NotProvided,
                 cg_iters: int | None = NotProvided, cg_damping: float | None = NotProvided,
                 line_search_steps: int | None = NotProvided, entropy_coeff: float | None = NotProvided,
                 vf_lr: float | None = NotProvided, vf_epochs: int | None = NotProvided,
                 vf_minibatch_size: int | None = NotProvided, kl_accept_factor: float | None = NotProvided,
                 fvp_subsample: int | None = NotProvided, total_env_steps: int | None = NotProvided,
                 numpy_actor: bool | None = NotProvided, overlap_sampling: bool | None = NotProvided,
                 batches_per_iteration: int | None = NotProvided,
                 truncation_as_terminal: bool | None = NotProvided, orthogonal_init: bool | None = NotProvided,
                 **kwargs):
        """RLlib's `.training(...)` plus the TRPO settings (keyword-only, like RLlib's; the paper's Table 4
        values are the defaults, docs/paper-settings.md).

        Args:
            lambda_: GAE's lambda (also accepted as `lambda`); 1.0 is Monte-Carlo advantages. The GAE
                baseline only: kappa-TRPO's advantages are kappa-returns.
            max_kl: The trust region: the policy step's mean KL bound.
            cg_iters: Conjugate-gradient iterations for the natural-gradient direction.
            cg_damping: Damping added to the Fisher-vector products.
            line_search_steps: Backtracking steps of the line search (halving each time).
            entropy_coeff: Weight of the policy's entropy bonus in the surrogate.
            vf_lr: Adam learning rate of the value network(s).
            vf_epochs: Passes over each batch when fitting the value network(s).
            vf_minibatch_size: Minibatch size of the value fit.
            kl_accept_factor: Accept a line-search step with KL up to this x max_kl (1.0: TRPO as
                published; the authors' code uses 1.5).
            fvp_subsample: Fisher-vector products on every n-th sample (1: all; the authors' code: 5).
            total_env_steps: T; the run reports `done` after total_env_steps // train_batch_size batches.
            numpy_actor: Act through a numpy copy of the policy's MLP where it is one (same distribution).
            overlap_sampling: With remote EnvRunners, sample the next batch while the value nets fit.
            batches_per_iteration: Batches (TRPO updates) per `train()` call, i.e. per result row; the
                last call stops at T. The same updates whatever it is; more than 1 means fewer, larger
                Tune reports (a cluster's one Tune driver then feeds more trials).
            truncation_as_terminal: End the returns (and kappa's shaping term V_phi(s')) at a time-limit
                truncation as at a termination, as the authors' gym 0.14 code did; False (default): bootstrap
                there, what a time limit means in gymnasium.
            orthogonal_init: Initialise the policy and value nets as the authors' code (OpenAI baselines):
                orthogonal, gain sqrt(2) on hidden layers, 0.01 on the policy mean's output, 1.0 on the value
                output, zero biases. False (default): torch's default initialisation.
        """
        if "lambda" in kwargs:
            lambda_ = kwargs.pop("lambda")
        super().training(**kwargs)
        set_given(self, dict(lambda_=lambda_, max_kl=max_kl, cg_iters=cg_iters, cg_damping=cg_damping,
                            line_search_steps=line_search_steps, entropy_coeff=entropy_coeff, vf_lr=vf_lr,
                            vf_epochs=vf_epochs, vf_minibatch_size=vf_minibatch_size,
                            kl_accept_factor=kl_accept_factor, fvp_subsample=fvp_subsample,
                            total_env_steps=total_env_steps, numpy_actor=numpy_actor,
                            overlap_sampling=overlap_sampling, batches_per_iteration=batches_per_iteration,
                            truncation_as_terminal=truncation_as_terminal, orthogonal_init=orthogonal_init))
        return self

    @property
    def _model_config_auto_includes(self):
        # Gaussian policies get a state-independent log-std, as in TRPO's paper and code.
        continuous = isinstance(self.env, str) and isinstance(
            envs.action_space_of(self.env, self.env_config), gym.spaces.Box
        )
        return super()._model_config_auto_includes | {"free_log_std": continuous}

    def get_default_rl_module_spec(self):
        return RLModuleSpec(module_class=DefaultPPOTorchRLModule, catalog_class=PPOCatalog)

    def get_default_learner_class(self):
        from kappa_rllib.algorithms.trpo.torch.trpo_torch_learner import TRPOTorchLearner

        return TRPOTorchLearner

    def check_ranges(self, problems: SettingProblems) -> None:
        """Each setting on its own (all problems named at once; see config_mixins)."""
        self.check_sampling_ranges(problems)
        problems.check(validate_gamma, self.gamma)
        problems.check(self._check_trpo_settings)
        for name in ("min_sample_timesteps_per_iteration", "min_train_timesteps_per_iteration",
                     "min_time_s_per_iteration"):
            if getattr(self, name):  # RLlib would call training_step again after T, forever
                problems.add(f"{name}={getattr(self, name)!r} is not supported: use batches_per_iteration")
        for name in ("max_kl", "cg_damping", "vf_lr"):
            problems.check(check_positive, name, getattr(self, name))
        for name in ("cg_iters", "line_search_steps", "vf_epochs", "vf_minibatch_size", "fvp_subsample",
                     "total_env_steps", "batches_per_iteration"):
            problems.check(check_int, name, getattr(self, name), 1)

    def _check_trpo_settings(self) -> None:
        if isinstance(self.lambda_, bool) or not (isinstance(self.lambda_, (int, float)) and 0.0 <= self.lambda_ <= 1.0):
            raise ValueError(f"lambda must lie in [0, 1], got {self.lambda_!r}")
        for name in ("truncation_as_terminal", "orthogonal_init"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not (isinstance(self.kl_accept_factor, (int, float)) and self.kl_accept_factor >= 1.0):
            raise ValueError(f"kl_accept_factor must be a number >= 1, got {self.kl_accept_factor!r}")
        if self.num_learners > 1:
            raise ValueError(
                f"num_learners={self.num_learners}: TRPO's conjugate-gradient step runs on one learner "
                "(0 = local, 1 = remote); scale sampling with num_env_runners instead"
            )
        if self.model_config.get("vf_share_layers"):
            raise ValueError("vf_share_layers=True: TRPO trains the value net separately from the policy")

    def check_relations(self) -> None:
        check_one_batch(self.total_env_steps, self.train_batch_size)


class TRPO(ConfigOnceMixin, ManifestMixin, SamplerMixin, Algorithm):
    """The TRPO algorithm (Schulman et al. 2015), the paper's baseline, registered with Tune as "TRPO".

    Build it from a `TRPOConfig`; one training iteration is `batches_per_iteration` batches (1 by default),
    each one policy step, and the run reports `done` after total_env_steps // train_batch_size batches.

    ```python
    from kappa_rllib import TRPOConfig
    algo = TRPOConfig().environment("InvertedPendulum-v5").build_algo()  # a TRPO
    result = algo.train()  # one batch of 1024 env steps, one TRPO update
    ```
    """

    on_policy = True  # every batch sampled by the policy it updates: checked at each collect (sampling.py)

    @classmethod
    def get_default_config(cls):
        return TRPOConfig()

    def training_step(self) -> None:
        for _ in range(self.config.batches_per_iteration):
            if self._t_used_up():
                break  # the last call of the run holds the batches left
            self._trpo_iteration(self.config.train_batch_size)

    def _t_env_steps(self) -> int:
        """T in env steps of whole batches (env steps beyond the last whole batch are not used)."""
        return self.config.total_env_steps // self.config.train_batch_size * self.config.train_batch_size

    @property
    def schedule_done(self) -> bool:
        """T used up: the run reports `done` (checkpoint manifests record it)."""
        return self._t_used_up()

    def _t_used_up(self) -> bool:
        sampled = self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        return sampled >= self._t_env_steps()

    def step(self):
        result = super().step()
        if self._t_used_up():
            result["done"] = True  # T used up: Tune stops the trial
        return result

    def _trpo_iteration(self, num_env_steps: int, **learner_kwargs) -> int:
        """Sample one batch, one TRPO update, new weights to the EnvRunners; returns steps sampled.

        `learner_kwargs` reach the learner's `value_targets` and `after_value_fit` with this batch.

        With remote EnvRunners and `overlap_sampling`, the update is split in two learner calls
        around the weight sync: the policy step, then (while the runners already sample the next
        batch with the new policy) the value fits. This is exact, not an approximation with policy
        lag: sampling reads only the policy, which the policy step has already moved; the value
        fits read only this batch; and V is next read when the next batch's advantages are built,
        after the fits have finished. Every batch is sampled by the policy it then updates.
        """
        lifetime = self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            if self.sampler.in_flight is not None:  # the batch the runners sampled during the last value fits
                segments = self.sampler.collect()
            else:
                segments = self.sampler.sample(num_env_steps, global_env_steps=lifetime)
        columns = segment_transitions(segments, truncateds=True)  # kappa-PI-TRPO's phi_target reads them
        steps = len(columns[Columns.REWARDS])
        batch = MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(columns)}, env_steps=steps)
        overlap = (self.config.overlap_sampling and self.env_runner_group.num_remote_workers() > 0
                   and lifetime + steps < self._t_env_steps())  # a next batch is due
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):  # with overlap: the policy step alone
            results = self.learner_group.update(
                batch=batch, timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: lifetime}, defer_value_fits=overlap,
                **learner_kwargs,
            )
        self.metrics.aggregate(results, key=LEARNER_RESULTS)
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            self.sampler.sync()
        if overlap:
            self.sampler.submit(num_env_steps, global_env_steps=lifetime + steps)  # False: sampled later
            with self.metrics.log_time((TIMERS, DEFERRED_VALUE_FITS_TIMER)):
                results = self.learner_group.foreach_learner(lambda learner: learner.deferred_value_fits())
            self.metrics.aggregate([r.get() for r in results], key=LEARNER_RESULTS)
        return steps
