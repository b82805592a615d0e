"""kappa-PI-DQN and kappa-VI-DQN (paper, Sec. 4.1 and Appendix A, Algorithms 5 and 6).

Config (`kappa_dqn_config.py`, imported here): DQN's settings plus `kappa`, `c_fa`, `total_env_steps`,
`naive_schedule`, the paper's DQN table as defaults; the two variants' configs (`KappaPIDQNConfig`,
`KappaVIDQNConfig`) are here, beside their algorithms (RLlib's way: no import circle).

Algorithm: `training_step` walks the phase machine (`kappa_rllib.phases`) through
N_kappa iterations (`kappa_rllib.schedule`):
  improvement: EnvRunners sample raw transitions -> replay buffer -> one Q_theta update per
               `env_steps_per_update` env steps (shaped target, see the torch learner);
  evaluation (kappa-PI only): as many Q_phi TD(0) updates as the improvement phase made;
  kappa-VI: phi <- theta at the end of each iteration.
With the naive schedule (T_kappa = 1 env step) one sampled chunk spans many iterations, and one
fused learner call makes their updates in the same order (`_chunk_program`).
The phase machine, all counters and the replay buffer are part of `get_state()`, so a
checkpoint resumes the schedule exactly.
"""

from __future__ import annotations

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from ray.rllib.utils.metrics import (
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    REPLAY_BUFFER_ADD_DATA_TIMER,
    REPLAY_BUFFER_SAMPLE_TIMER,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from kappa_rllib.checkpoints import ManifestMixin
from kappa_rllib.tuning.config_once import ConfigOnceMixin
from kappa_rllib.algorithms.kappa_loop import KappaLoopMixin
from kappa_rllib.algorithms.sampling import SamplerMixin
from kappa_rllib.env_runner import segment_transitions
from kappa_rllib.phases import EVALUATION, KappaPhaseMachine
from kappa_rllib.replay import UniformReplayBuffer
from kappa_rllib.variant import PI, VI
from kappa_rllib.algorithms.kappa_dqn import kappa_dqn_config
from kappa_rllib.algorithms.kappa_dqn.kappa_dqn_config import KappaDQNConfig
from kappa_rllib.algorithms.kappa_dqn.learner_program import COPY_THETA_TO_PHI, num_updates, split_into_calls
from kappa_rllib.algorithms.kappa_dqn.update_schedule import UpdateScheduleMixin


class KappaDQN(ConfigOnceMixin, ManifestMixin, KappaLoopMixin, UpdateScheduleMixin, SamplerMixin, Algorithm):
    """The kappa-DQN algorithm; `KappaPIDQN` and `KappaVIDQN` pick the variant."""

    on_policy = False  # with overlap_sampling a chunk acts with the weights of one update before (by design)

    def setup(self, config) -> None:
        super().setup(config)
        replay = self.local_replay_buffer
        replay.frames_device = self._replay_frames_device()
        if replay._frames is not None and replay._frames.device != replay.frames_device:
            replay.set_state(replay.get_state())  # (filled during setup, by a callback's restore: moved there)
        self._init_schedule_state()

    def _replay_frames_device(self):
        """Where the replay keeps image frames (`replay_frames_on_device`): the local learner's device, or None
        (host memory, LZ4). A learner in the driver's process only: its minibatches are then gathered where it
        trains, and `_fused_batch_tensors` takes them as they are."""
        import torch

        setting = self.config.replay_frames_on_device
        learner = getattr(self.learner_group, "_learner", None)  # (RLlib's local Learner; None with remote ones)
        if setting is False or learner is None:
            return None
        device = torch.device(learner._device)
        return device if setting is True or device.type == "cuda" else None

    def _init_schedule_state(self) -> None:
        """The phase machine and the counters, at the start of the schedule (all that the
        schedule's bookkeeping, `_chunk_program`, reads besides the config)."""
        cfg = self.config
        self.phases = KappaPhaseMachine(
            total_units=cfg.total_env_steps,
            num_iterations=cfg.num_kappa_iterations,
            # kappa-PI evaluates Q_phi in a phase of its own; at kappa = 1 V_phi is multiplied by
            # gamma (1 - kappa) = 0, so evaluating it is wasted work and the algorithm is DQN.
            with_evaluation_phase=cfg.kappa_plan.evaluates_phi,
        )
        self._last_chunk_steps = 0
        self.counters = {
            "theta_updates": 0,
            "phi_updates": 0,
            "pending_update_env_steps": 0,  # env steps not yet paid for by an update
            "last_theta_target_sync": 0,  # env steps at the last Q'_theta <- Q_theta
            "phi_updates_at_last_target_sync": 0,
            "max_policy_lag_env_steps": 0,  # most env steps sampled with one set of acting weights
            "chunks_sampled_in_evaluation": 0,  # kappa-PI: chunks the runners sampled while Q_phi trained
        }

    def _create_local_replay_buffer_if_necessary(self, config):
        return UniformReplayBuffer(config["replay_buffer_config"]["capacity"], seed=config.get("seed"))

    # ----- the hooks of the shared kappa loop (kappa_rllib.algorithms.kappa_loop)
    def _units_per_training_step(self) -> int:
        return self.config.env_steps_per_iteration

    def _improvement_step(self, max_steps: int) -> int:
        """Sample a chunk of <= `_chunk_size()` env steps (one set of acting weights), store
        it, then the updates it pays for in one fused learner call, then one weight sync.

        Updates and Q'_theta copies are counted per fragment of env_steps_per_fragment env steps,
        exactly as if each fragment were sampled and trained on by itself (`_theta_schedule`).
        A chunk ends with the improvement phase, except where iterations are shorter than a chunk
        (`_spans_iterations`): then it spans them, and its learner call holds their updates in order.
        """
        cfg = self.config
        n = min(self._chunk_size(), self._chunk_bound(), max_steps)
        prefetched = self.sampler.in_flight is not None
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            if prefetched:  # sampled while the previous chunk's updates ran
                if self.sampler.in_flight.num_steps != n:
                    raise RuntimeError(f"the chunk in flight holds {self.sampler.in_flight.num_steps} env steps, "
                                       f"the schedule's next chunk {n}")
                segments = self.sampler.collect()
            else:
                segments = self.sampler.sample(n, global_env_steps=self.phases.units)
        with self.metrics.log_time((TIMERS, REPLAY_BUFFER_ADD_DATA_TIMER)):
            # (Atari: the runners' frames go into the replay as they came, each once: no stacks built)
            transitions = segment_transitions(segments, life_loss_terminal=cfg.episodic_life, frames=True)
            steps = len(transitions.get(Columns.REWARDS, ()))
            self.local_replay_buffer.add(transitions)
        program = self._chunk_program(steps)
        # env steps acted with weights older than this chunk's update (one chunk more when prefetched)
        lag = steps + (self._last_chunk_steps if prefetched else 0)
        self.counters["max_policy_lag_env_steps"] = max(self.counters["max_policy_lag_env_steps"], lag)
        self._last_chunk_steps = steps
        n_next = min(self._chunk_size(), self._chunk_bound(), max_steps - steps)
        threaded = self._threaded_learner()
        if n_next <= 0 and self._phase_goes_on_next_call(max_steps - steps):
            # this train() call's last chunk, in a phase the next call goes on with: its first chunk, the one
            # the next call's improvement step asks for, is sampled meanwhile (as TRPO's next batch: a checkpoint
            # leaves it in flight, a restore drops it)
            n_next = min(self._chunk_size(), self._chunk_bound(), self._units_per_training_step())
        if threaded:
            # this chunk's minibatches, drawn now (the replay holds the chunks up to this one, as in the serial
            # order); then the previous chunk's gradient steps, running since, are waited for and their weights
            # published, so the next chunk acts with the same weights as in the serial order
            draws = self._draw(program, cfg.total_train_batch_size)
            self._join_learning()
        if cfg.overlap_sampling and self.env_runner_group.num_remote_workers() and n_next > 0:
            # Overlap: the remote EnvRunners sample the next chunk (same phase, or same run of short
            # iterations; the next train() call's first where this call ends inside a phase) while the
            # learner updates on this one.
            self.sampler.submit(n_next, global_env_steps=self.phases.units)  # False: sampled next step
        if program and threaded:
            self._learning = self._learner_pool().submit(self._learn, draws)
            if self.sampler.in_flight is None or steps >= max_steps:  # a phase's or this train() call's end:
                self._join_learning()  # its updates finish in it (a chunk in flight acts with the weights before)
        elif program:
            self._update(program)
            with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
                self.sampler.sync()
        return steps

    def _phase_goes_on_next_call(self, units_left: int) -> bool:
        """Whether this call's units are used up in an improvement phase that is not: the next `train()` call then
        starts with an improvement step of this phase (`KappaLoopMixin.training_step`), whose chunk is known."""
        return (units_left <= 0 and not self.phases.done and self.phases.phase != EVALUATION
                and not self.phases.improvement_complete())

    def _chunk_size(self) -> int:
        """Env steps a chunk holds: `env_steps_per_runner_call` from each remote EnvRunner (the configured count, so
        a chunk keeps its size while a lost runner's share is sampled again by the others), or from the local one.
        Each runner's call pays the same per-call costs whatever the chunk (a Ray round trip, the weights it acts
        with, the driver's replay add, draw and weight publish per chunk): split over N runners, a fixed chunk paid
        them N times for the same env steps (docs/measured.md, W3's pipeline)."""
        return self.config.env_steps_per_runner_call * max(1, self.config.num_env_runners)

    # ----- the learner thread (`learner_thread`): gradient steps beside the next chunk's collection
    def _threaded_learner(self) -> bool:
        cfg = self.config
        return bool(cfg.learner_thread and cfg.overlap_sampling and self.env_runner_group.num_remote_workers())

    def _learner_pool(self):
        if getattr(self, "_pool", None) is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kappa-learner")
        return self._pool

    def _join_learning(self) -> None:
        """Waits for the gradient steps running on the learner thread, if any: their results into the metrics,
        then the new acting weights published (`Sampler.sync`), as the serial order does after its update."""
        learning, self._learning = getattr(self, "_learning", None), None
        if learning is None:
            return
        results, seconds = learning.result()  # (an error of the learner thread is raised here)
        self.metrics.log_value((TIMERS, LEARNER_UPDATE_TIMER), seconds, reduce="ema")
        for result in results:
            self.metrics.aggregate(result, key=LEARNER_RESULTS)
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            self.sampler.sync()

    def _end_improvement(self) -> None:
        self._join_learning()
        self._update(self._iteration_end_program())

    def _evaluation_step(self, units_left: int) -> None:
        """Up to `updates_per_learner_call` Q_phi updates of the evaluation phase, one fused learner call; on its
        first step the remote EnvRunners start sampling the next improvement phase's first chunk
        (`_sample_next_improvement`)."""
        self._join_learning()
        self._sample_next_improvement(units_left)
        self._update(self._evaluation_program(min(self.phases.updates_left_in_phase(),
                                                  self.config.updates_per_learner_call)))

    def _sample_next_improvement(self, units_left: int) -> None:
        """kappa-PI's evaluation phase trains Q_phi only, on the replay as the improvement left it (Algorithm 5,
        line 16), while the runners would sit idle: with `overlap_sampling` they sample the next improvement
        phase's first chunk meanwhile. Exact: the chunk acts with the weights, and from the epsilon schedule's t,
        that it would act with after the evaluation (Q_theta is frozen in it: no acting weights are published), and
        it reaches the replay when the improvement step collects it, after the last Q_phi update. The same
        `train()` call collects it: an evaluation phase runs to its end in the call that starts it, and the
        improvement step after it gets the units the call has left (`units_left`), the size asked for here."""
        if (not self.config.overlap_sampling or self.sampler.in_flight is not None or self._spans_iterations()
                or not self.env_runner_group.num_remote_workers() or units_left <= 0):
            return  # (the naive schedule's chunks span iterations: its next chunk is not one improvement phase's)
        n = min(self._chunk_size(), self.phases.units_in_next_improvement(), units_left)
        if n > 0 and self.sampler.submit(n, global_env_steps=self.phases.units):
            self._last_chunk_steps = 0  # (it acts with the newest Q_theta: its lag is its own env steps)
            # (.get: a checkpoint from before this counter has none)
            self.counters["chunks_sampled_in_evaluation"] = self.counters.get("chunks_sampled_in_evaluation", 0) + 1

    def _update(self, program: list) -> None:
        """A learner program (learner_program.py), one minibatch per gradient step, in fused learner
        calls of at most `updates_per_learner_call` gradient steps (`KappaDQNTorchLearner.update`)."""
        for call in split_into_calls(program, self.config.updates_per_learner_call):
            self._learner_call(call, self.config.total_train_batch_size)

    def _learner_call(self, call: list, minibatch_size: int) -> None:
        """One fused learner call: its minibatches sampled from the replay in one draw."""
        results, seconds = self._learn(self._draw(call, minibatch_size, split=False))
        self.metrics.log_value((TIMERS, LEARNER_UPDATE_TIMER), seconds, reduce="ema")
        for result in results:
            self.metrics.aggregate(result, key=LEARNER_RESULTS)

    def _draw(self, program: list, minibatch_size: int, split: bool = True) -> list[tuple]:
        """The program's fused learner calls (`updates_per_learner_call` gradient steps at most; `split` False:
        `program` is one call), each with its minibatches drawn from the replay in one draw (None: a call with no
        gradient step) and the env steps sampled so far."""
        calls = split_into_calls(program, self.config.updates_per_learner_call) if split else [program]
        draws = []
        for call in calls:
            gradient_steps = num_updates(call)  # (checks every step is typed)
            batch = None
            if gradient_steps:
                with self.metrics.log_time((TIMERS, REPLAY_BUFFER_SAMPLE_TIMER)):
                    data = self.local_replay_buffer.sample(gradient_steps * minibatch_size)
                batch = MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(data)}, env_steps=gradient_steps * minibatch_size)
            draws.append((call, batch, minibatch_size, self.phases.units))
        return draws

    def _learn(self, draws: list[tuple]) -> tuple[list, float]:
        """The learner calls of `_draw`, in order: (their results, the seconds they took). No gradient step:
        nothing to learn; phi <- theta only where the call says so. Touches the learners only (it may run on the
        learner thread): the metrics are the caller's to log."""
        import time

        start, results = time.perf_counter(), []
        for call, batch, minibatch_size, units in draws:
            if batch is None:
                if COPY_THETA_TO_PHI in call:
                    self.learner_group.foreach_learner(lambda learner: learner.copy_theta_to_phi())
                continue
            results.append(self.learner_group.update(
                batch=batch,
                timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: units},
                fused_update={"program": call, "minibatch_size": minibatch_size},
            ))
        return results, time.perf_counter() - start

    def stop(self) -> None:
        learning, self._learning = getattr(self, "_learning", None), None
        if learning is not None:
            learning.exception()  # (waits; whatever it raised no longer matters)
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        super().stop()

    # ----- checkpoints: phases and counters via KappaLoopMixin's get_state, plus the replay buffer
    def get_state(self, *args, **kwargs):
        self._join_learning()  # (before the learners' weights are read: every update made is in the state)
        return super().get_state(*args, **kwargs)

    def set_state(self, state) -> None:
        self._join_learning()  # (before the learners' weights are replaced)
        super().set_state(state)

    def _extra_kappa_state(self) -> dict:
        if not self.config.checkpoint_replay_buffer:
            return {"replay_buffer": None}
        return {"replay_buffer": self.local_replay_buffer.get_state()}

    def _set_extra_kappa_state(self, state: dict) -> None:
        if state.get("replay_buffer") is not None:
            self.local_replay_buffer.set_state(state["replay_buffer"])


class KappaPIDQN(KappaDQN):
    """The kappa-PI-DQN algorithm (paper, Algorithm 5), an RLlib Algorithm registered with Tune as "KappaPIDQN".

    Build it from a `KappaPIDQNConfig` (`config.build_algo()`) or hand it to Tune. Every result carries
    `result["kappa"]` (iteration, num_iterations, phase, ...); the run reports `done` once T env steps are used.

    ```python
    from ray import tune
    from kappa_rllib import KappaPIDQN, KappaPIDQNConfig
    config = (
        KappaPIDQNConfig()
        .environment("CartPole-v1")
        .training(total_env_steps=20_000)
    )
    # or the registered name "KappaPIDQN"
    tune.Tuner(KappaPIDQN, param_space=config).fit()
    ```
    """

    @classmethod
    def get_default_config(cls):
        return KappaPIDQNConfig()


class KappaVIDQN(KappaDQN):
    """The kappa-VI-DQN algorithm (paper, Algorithm 6), an RLlib Algorithm registered with Tune as "KappaVIDQN".

    Build it from a `KappaVIDQNConfig` (`config.build_algo()`) or hand it to Tune; results as `KappaPIDQN`.

    ```python
    from ray import tune
    from kappa_rllib import KappaVIDQN, KappaVIDQNConfig
    config = (
        KappaVIDQNConfig()
        .environment("CartPole-v1")
        .training(total_env_steps=20_000)
    )
    # or the registered name "KappaVIDQN"
    tune.Tuner(KappaVIDQN, param_space=config).fit()
    ```
    """

    @classmethod
    def get_default_config(cls):
        return KappaVIDQNConfig()


class KappaPIDQNConfig(KappaDQNConfig):
    """Config of kappa-PI-DQN (paper, Algorithm 5): DQN on the surrogate MDP, then TD(0) evaluation of its policy.

    Each of the N_kappa kappa-iterations has an improvement phase, DQN on M_{gamma kappa}(V_phi) (discount
    gamma * kappa, shaped reward r + gamma (1 - kappa) V_phi(s'), V_phi(s) = Q_phi(s, argmax_a Q'_theta(s, a))),
    and an evaluation phase that fits Q_phi to the new greedy policy by off-policy TD(0). Defaults: the
    paper's Table 3 (docs/paper-settings.md); kappa = 1 is DQN. `.training(...)` takes RLlib's DQN settings
    plus `kappa`, `c_fa`, `total_env_steps`, `naive_schedule`.

    ```python
    from kappa_rllib import KappaPIDQNConfig
    config = (
        KappaPIDQNConfig()
        .environment("CartPole-v1")
        .training(kappa=0.84, c_fa=0.05, total_env_steps=50_000)
    )
    # a KappaPIDQN; algo.train() runs one training iteration
    algo = config.build_algo()
    ```
    """

    kappa_variant = PI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaPIDQN)


class KappaVIDQNConfig(KappaDQNConfig):
    """Config of kappa-VI-DQN (paper, Algorithm 6): DQN on the surrogate MDP, whose Q-network then becomes Q_phi.

    Each of the N_kappa kappa-iterations runs DQN on M_{gamma kappa}(V_phi) with V_phi(s) = max_a Q_phi(s, a)
    for T_kappa env steps, then copies phi <- theta (one application of the kappa-optimal Bellman operator).
    Defaults: the paper's Table 3; kappa = 1 is DQN. Settings as `KappaPIDQNConfig`.

    ```python
    from kappa_rllib import KappaVIDQNConfig
    config = (
        KappaVIDQNConfig()
        .environment("CartPole-v1")
        .training(kappa=0.84, c_fa=0.05, total_env_steps=50_000)
    )
    algo = config.build_algo()  # a KappaVIDQN
    ```
    """

    kappa_variant = VI

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or KappaVIDQN)


# Checkpoints (the config's state: `AlgorithmConfig.get_state` keeps its class) and Tune's saved runs made before
# the two configs moved here from kappa_dqn_config.py name them there: they still load (the package's __init__
# loads this file whenever kappa_dqn_config is imported)
kappa_dqn_config.KappaPIDQNConfig, kappa_dqn_config.KappaVIDQNConfig = KappaPIDQNConfig, KappaVIDQNConfig
