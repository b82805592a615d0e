"""kappa-PI-APPO and kappa-VI-APPO: RLlib's APPO solving the surrogate MDP M_{gamma kappa}(V_phi).

The paper's kappa-PI/VI (Algorithms 7, 8) on RLlib's asynchronous actor-learner algorithm:
EnvRunners sample raw, unshaped episodes on any node; the learners shape the rewards with V_phi
and run V-trace with the discount gamma * kappa (kappa_rllib.algorithms.kappa_appo.torch).
Everything kappa is shared with the other families:

  * schedule: T = total_env_steps // train_batch_size APPO batches, N_kappa from C_FA
    (kappa_rllib.schedule), T_kappa = T / N_kappa batches per kappa-iteration; the outer loop is
    kappa_rllib.algorithms.kappa_loop, the phase machine kappa_rllib.phases;
  * what the variant does with V_phi: config.kappa_plan (kappa_rllib.variant);
  * the V_phi modules, settings and validation: kappa_rllib.algorithms.actor_critic.

APPO samples and learns asynchronously, so a kappa-iteration cannot end at an exact env step:

  * the algorithm counts the env steps its EnvRunners returned (RLlib's sampled-lifetime count) and
    ends an iteration at the first `training_step` whose count reaches the iteration's planned end
    (in batches of train_batch_size); an iteration that overshoots leaves the next one shorter, so
    every end stays where the plan puts it. One round may pass several ends: all of them close in
    that step, so the step that samples batch T ends the run (its result says done);
  * every learner closes the same iteration before the first update whose batch was sent at or
    after that count (on any learner: RLlib may drop a request for one learner only; the learner
    docstring), so with several learners all hold one snapshot.

`appo` on the command line is kappa-PI-APPO with kappa = 1: exactly APPO (tested).
"""

from __future__ import annotations

import time

from ray.rllib.algorithms.appo.appo import APPO, APPOConfig
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


class KappaAPPOConfig(KappaActorCriticConfigMixin, APPOConfig):
    """APPOConfig plus `kappa`, `c_fa`, `total_env_steps`, `naive_schedule`; use the PI/VI subclasses.

    `KappaPIAPPOConfig.from_appo(appo_config)` puts kappa on an APPOConfig you already have.
    """

    BASE_CONFIG = APPOConfig
    DEFAULTS = defaults.APPO

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class)
        # One result per `train()` call of at least one batch (not APPO's 10 s): kappa-APPO's
        # training_step itself runs until a batch of the schedule was sampled.
        self.min_time_s_per_iteration = None
        # The learner in the driver process, as in every kappa-rllib algorithm (APPO's default is
        # one remote learner actor, which needs a CPU of its own beside the EnvRunners');
        # `.learners(num_learners=N)` gives N learner actors (torch DDP for N >= 2).
        self.num_learners = 0

    @classmethod
    def from_appo(cls, appo_config: APPOConfig, **kappa_settings) -> "KappaAPPOConfig":
        """This class's config with every setting of `appo_config` (env, lr, batch sizes, model,
        env runners, learners, ...) and the given kappa settings (kappa=, c_fa=, total_env_steps=, ...)."""
        return cls.from_base(appo_config, **kappa_settings)

    def get_default_learner_class(self):
        from kappa_rllib.algorithms.kappa_appo.torch.kappa_appo_torch_learner import KappaAPPOTorchLearner

        return KappaAPPOTorchLearner

    def build_learner_connector(self, input_observation_space, input_action_space, device=None):
        connector = super().build_learner_connector(input_observation_space, input_action_space, device)
        if self.kappa_plan.evaluates_phi:  # kappa-PI's V_phi trains on the same rows as the policy
            from kappa_rllib.connectors.kappa_phi_batch import KappaPhiBatch

            connector.append(KappaPhiBatch())
        return connector

    def check_ranges(self, problems: SettingProblems) -> None:
        super().check_ranges(problems)
        if self.num_aggregator_actors_per_learner:
            problems.add("num_aggregator_actors_per_learner: kappa-APPO builds its batches on the learners "
                         "(V_phi's rows travel with the policy's); leave it at 0")


class KappaPIAPPOConfig(KappaAPPOConfig):
    """Config of kappa-PI-APPO: RLlib's asynchronous APPO solving the surrogate MDP, V_phi trained on every batch.

    The paper runs no APPO; this is kappa-PI (Algorithm 7's scheme) on RLlib's actor-learner algorithm:
    the learners shape the rewards with V_phi and run V-trace with the discount gamma * kappa, and V_phi
    learns the policy's value in the original MDP. `from_appo` puts kappa on an APPOConfig you already
    have. Defaults: kappa 0.84, C_FA 0.2, T = 2M env steps; kappa = 1 is APPO.

    ```python
    from ray.rllib.algorithms.appo import APPOConfig
    from kappa_rllib import KappaPIAPPOConfig
    appo_config = (
        APPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=2)
    )
    config = KappaPIAPPOConfig.from_appo(
        appo_config, kappa=0.9, c_fa=0.2, total_env_steps=60_000,
    )
    algo = config.build_algo()  # a KappaPIAPPO
    ```
    """

    kappa_variant = PI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaPIAPPO)


class KappaVIAPPOConfig(KappaAPPOConfig):
    """Config of kappa-VI-APPO: RLlib's asynchronous APPO solving the surrogate MDP, then V_phi <- V_theta.

    As `KappaPIAPPOConfig`, with kappa-VI's copy (Algorithm 8's scheme) in place of V_phi's training.

    ```python
    from ray.rllib.algorithms.appo import APPOConfig
    from kappa_rllib import KappaVIAPPOConfig
    appo_config = (
        APPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=2)
    )
    config = KappaVIAPPOConfig.from_appo(
        appo_config, kappa=0.9, c_fa=0.2, total_env_steps=60_000,
    )
    algo = config.build_algo()  # a KappaVIAPPO
    ```
    """

    kappa_variant = VI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaVIAPPO)


class KappaAPPO(ConfigOnceMixin, ManifestMixin, KappaLoopMixin, SamplerMixin, APPO):
    samples_raw = False  # RLlib's own sampling loop (its set_state syncs the weights); the Sampler reports runtime

    def setup(self, config) -> None:
        self._kappa_step_started = False  # a training_step of this train() call has run
        super().setup(config)
        self.phases = KappaPhaseMachine(
            total_units=self.config.schedule_length,
            num_iterations=self.config.num_kappa_iterations,
            with_evaluation_phase=False,  # V_phi's fit happens inside each update
            unit="batches",
        )
        self.counters = {"env_steps": 0}
        self._push_kappa_schedule()

    # ----- the kappa loop's hooks
    def _units_per_training_step(self) -> int:
        return 1  # a train() call lasts until one more batch of the schedule was sampled

    def training_step(self) -> None:
        if self.phases.done and self._kappa_step_started:
            time.sleep(0.05)  # RLlib's loop asked for more within the train() call that finished T
            return
        self._kappa_step_started = True
        super().training_step()

    def step(self):
        self._kappa_step_started = False
        return super().step()

    def _improvement_step(self, max_units: int) -> int:
        """One round of APPO (collect what the EnvRunners finished, send batches to the learners,
        broadcast weights); returns the batches of the schedule it completed (module docstring)."""
        before = self._env_steps_sampled()
        APPO.training_step(self)
        self.counters["env_steps"] += self._env_steps_sampled() - before
        units = min(self.counters["env_steps"] // self.config.total_train_batch_size, self.phases.total_units)
        new = max(0, units - self.phases.units)
        self.phases.record_units(new)
        self.phases.record_updates(new)
        return new

    def _env_steps_sampled(self) -> int:
        return int(self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0))

    def _end_improvement(self) -> None:
        """Nothing here: the learners close kappa-iterations themselves, from the env-step counts their
        batches carry (the shared loop's default would close them a second time)."""

    # ----- the learners' copy of the plan
    def _push_kappa_schedule(self) -> None:
        plan = self.phases.get_state()
        self.learner_group.foreach_learner(lambda learner: learner.set_kappa_schedule(plan))

    def set_state(self, state) -> None:
        super().set_state(state)
        if "kappa" in state:
            self._push_kappa_schedule()  # restored (and maybe re-planned by adaptive kappa)
            if self.env_runner_group.num_remote_env_runners():  # sample with the restored policy now
                self.env_runner_group.sync_weights(from_worker_or_learner_group=self.learner_group,
                                                   inference_only=True)


class KappaPIAPPO(KappaAPPO):
    """The kappa-PI-APPO algorithm (RLlib's APPO with kappa-PI's V_phi), registered with Tune as "KappaPIAPPO".

    Build it from a `KappaPIAPPOConfig`. A kappa-iteration ends at the first training step whose sampled
    env-step count reaches its planned end (asynchronous sampling cannot stop at an exact step).

    ```python
    from ray import tune
    from kappa_rllib import KappaPIAPPO, KappaPIAPPOConfig
    config = (
        KappaPIAPPOConfig()
        .environment("CartPole-v1")
        .training(kappa=0.9, total_env_steps=60_000)
    )
    # or the registered name "KappaPIAPPO"
    tune.Tuner(KappaPIAPPO, param_space=config).fit()
    ```
    """

    @classmethod
    def get_default_config(cls):
        return KappaPIAPPOConfig()


class KappaVIAPPO(KappaAPPO):
    """The kappa-VI-APPO algorithm (RLlib's APPO with kappa-VI's copy), registered with Tune as "KappaVIAPPO".

    Build it from a `KappaVIAPPOConfig`; iterations end as in `KappaPIAPPO`.

    ```python
    from ray import tune
    from kappa_rllib import KappaVIAPPO, KappaVIAPPOConfig
    config = (
        KappaVIAPPOConfig()
        .environment("CartPole-v1")
        .training(kappa=0.9, total_env_steps=60_000)
    )
    # or the registered name "KappaVIAPPO"
    tune.Tuner(KappaVIAPPO, param_space=config).fit()
    ```
    """

    @classmethod
    def get_default_config(cls):
        return KappaVIAPPOConfig()
