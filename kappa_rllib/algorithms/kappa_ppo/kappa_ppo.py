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
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

from kappa_rllib import defaults
from kappa_rllib.algorithms.actor_critic import KappaActorCriticConfigMixin
from kappa_rllib.algorithms.config_mixins import SettingProblems
from kappa_rllib.algorithms.kappa_loop import KappaLoopMixin
from kappa_rllib.algorithms.sampling import SamplerMixin
from kappa_rllib.checkpoints import ManifestMixin
from kappa_rllib.tuning.config_once import ConfigOnceMixin
from kappa_rllib.phases import KappaPhaseMachine
from kappa_rllib.variant import PI, VI


class KappaPPOConfig(KappaActorCriticConfigMixin, PPOConfig):
    """PPOConfig plus `kappa`, `c_fa`, `total_env_steps`, `naive_schedule`; use the PI/VI subclasses.

    `KappaPIPPOConfig.from_ppo(ppo_config)` puts kappa on a PPOConfig you already have.
    """

    BASE_CONFIG = PPOConfig
    DEFAULTS = defaults.PPO

    @classmethod
    def from_ppo(cls, ppo_config: PPOConfig, **kappa_settings) -> "KappaPPOConfig":
        """This class's config with every setting of `ppo_config` (env, lr, batch sizes, model,
        env runners, ...) and the given kappa settings (kappa=, c_fa=, total_env_steps=, ...)."""
        return cls.from_base(ppo_config, **kappa_settings)

    def get_default_learner_class(self):
        from kappa_rllib.algorithms.kappa_ppo.torch.kappa_ppo_torch_learner import KappaPPOTorchLearner

        return KappaPPOTorchLearner

    def check_ranges(self, problems: SettingProblems) -> None:
        super().check_ranges(problems)
        if self.lambda_ != 1.0:
            problems.add(f"lambda={self.lambda_}: kappa-PPO's advantages are kappa-returns (lambda 1 in the "
                         "surrogate MDP, where kappa plays lambda's part); leave lambda at 1")
        if not self.use_critic or not self.use_gae:
            problems.add("use_critic and use_gae must be True: the kappa-returns bootstrap with V_theta")


class KappaPIPPOConfig(KappaPPOConfig):
    """Config of kappa-PI-PPO: RLlib's PPO solving the surrogate MDP, V_phi fitted to the plain returns.

    The paper runs no PPO; this is its kappa-PI-TRPO (Algorithm 7) with PPO's clipped update in place of
    TRPO's: only the advantage connector changes (GAE with lambda = 1 on the shaped reward and discount
    gamma * kappa). `from_ppo` puts kappa on a PPOConfig you already have. Defaults: kappa 0.84, C_FA 0.2,
    T = 2M env steps; kappa = 1 is PPO with lambda = 1.

    ```python
    from ray.rllib.algorithms.ppo import PPOConfig
    from kappa_rllib import KappaPIPPOConfig
    # your PPO settings
    ppo_config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size=1000)
    )
    config = KappaPIPPOConfig.from_ppo(
        ppo_config, kappa=0.84, c_fa=0.2, total_env_steps=50_000,
    )
    algo = config.build_algo()  # a KappaPIPPO
    ```
    """

    kappa_variant = PI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaPIPPO)


class KappaVIPPOConfig(KappaPPOConfig):
    """Config of kappa-VI-PPO: RLlib's PPO solving the surrogate MDP, then V_phi <- V_theta.

    As `KappaPIPPOConfig`, with kappa-VI's copy in place of V_phi's training (the paper's Algorithm 8
    with PPO's clipped update in place of TRPO's).

    ```python
    from ray.rllib.algorithms.ppo import PPOConfig
    from kappa_rllib import KappaVIPPOConfig
    # your PPO settings
    ppo_config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size=1000)
    )
    config = KappaVIPPOConfig.from_ppo(
        ppo_config, kappa=0.84, c_fa=0.2, total_env_steps=50_000,
    )
    algo = config.build_algo()  # a KappaVIPPO
    ```
    """

    kappa_variant = VI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaVIPPO)


class KappaPPO(ConfigOnceMixin, ManifestMixin, KappaLoopMixin, SamplerMixin, PPO):
    samples_raw = False  # RLlib's own sampling loop (its set_state syncs the weights); the Sampler reports runtime

    def setup(self, config) -> None:
        super().setup(config)
        self.phases = KappaPhaseMachine(
            total_units=self.config.schedule_length,
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
        self.phases.record_units(1)
        self.phases.record_updates(1)
        return 1

    def set_state(self, state) -> None:
        super().set_state(state)
        # RLlib's EnvRunners sample PPO's batches: the remote ones take the restored policy now, not
        # after the first update (the kappa loop's own sync only reaches the local one).
        if "kappa" in state and self.env_runner_group.num_remote_env_runners():
            self.env_runner_group.sync_weights(from_worker_or_learner_group=self.learner_group, inference_only=True)


class KappaPIPPO(KappaPPO):
    """The kappa-PI-PPO algorithm (RLlib's PPO with kappa-PI's V_phi), registered with Tune as "KappaPIPPO".

    Build it from a `KappaPIPPOConfig`. One training iteration is one PPO batch; results carry
    `result["kappa"]`.

    ```python
    from ray import tune
    from kappa_rllib import KappaPIPPO, KappaPIPPOConfig
    config = (
        KappaPIPPOConfig()
        .environment("CartPole-v1")
        .training(kappa=0.84, train_batch_size=1000)
    )
    # or the registered name "KappaPIPPO"
    tune.Tuner(KappaPIPPO, param_space=config).fit()
    ```
    """

    @classmethod
    def get_default_config(cls):
        return KappaPIPPOConfig()


class KappaVIPPO(KappaPPO):
    """The kappa-VI-PPO algorithm (RLlib's PPO with kappa-VI's copy), registered with Tune as "KappaVIPPO".

    Build it from a `KappaVIPPOConfig`; results as `KappaPIPPO`.

    ```python
    from ray import tune
    from kappa_rllib import KappaVIPPO, KappaVIPPOConfig
    config = (
        KappaVIPPOConfig()
        .environment("CartPole-v1")
        .training(kappa=0.84, train_batch_size=1000)
    )
    # or the registered name "KappaVIPPO"
    tune.Tuner(KappaVIPPO, param_space=config).fit()
    ```
    """

    @classmethod
    def get_default_config(cls):
        return KappaVIPPOConfig()
