"""The configs of kappa-PI-DQN and kappa-VI-DQN (paper, Sec. 4.1 and Appendix A, Algorithms 5 and 6):
DQN's settings plus `kappa`, `c_fa`, `total_env_steps`, `naive_schedule`, with the paper's DQN table as
defaults (docs/paper-settings.md, Table 3), and `validate()` refusing what the algorithm does not implement
(double-Q, dueling, n-step, distributional, prioritized replay). The algorithms, and the two variants' configs
beside them (`KappaPIDQNConfig`, `KappaVIDQNConfig`, RLlib's way: a config in its algorithm's file, so that
neither file imports the other): `kappa_dqn.py`.
"""

from __future__ import annotations

from gymnasium.spaces import Discrete

from ray.rllib.algorithms.dqn.dqn import DQNConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from kappa_rllib import defaults, envs
from kappa_rllib.algorithms.config_mixins import (
    EnvIdMixin,
    KappaConfigMixin,
    RawSamplingMixin,
    SettingProblems,
    TwoStageValidationMixin,
    check_bool,
    check_int,
    check_positive,
    set_given,
)
from kappa_rllib.schedule import validate_gamma
from kappa_rllib.algorithms.kappa_dqn.renamed_settings import DEFAULT_FRAGMENT, RenamedSettingsMixin
from kappa_rllib.variant import PHI_MODULE_ID, V_PHI_AUTHORS, V_PHI_PAPER, V_PHI_SOURCES

UNIFORM_REPLAY = "UniformReplayBuffer"


class KappaDQNConfig(TwoStageValidationMixin, EnvIdMixin, RawSamplingMixin, RenamedSettingsMixin, KappaConfigMixin,
                      DQNConfig):
    """Shared config of kappa-PI-DQN and kappa-VI-DQN; use the two subclasses."""

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class)
        # --- kappa settings (paper, Sec. 4): C_FA after the paper's ablation for DQN (Appendix A.1) ---
        self.set_kappa_defaults(defaults.DQN)
        self.checkpoint_replay_buffer = True
        self.v_phi_source = V_PHI_PAPER  # or V_PHI_AUTHORS: see the torch learner's `v_phi`
        # Learning sees a terminal when a life is lost (DeepMind's episodic life); the game goes on
        # and episode returns stay per full game. Needs an env that reports `life_lost` in its
        # info (the ALE/... envs of kappa_rllib.envs do); the Atari preset turns it on.
        self.episodic_life = False
        # --- the paper's DQN table (docs/paper-settings.md, Table 3) ---
        self.lr = 1e-4
        self.gamma = 0.99
        self.train_batch_size = 32
        self.target_network_update_freq = 1000  # env steps (Q'_theta); Q'_phi: same #updates
        self.replay_buffer_config = {"type": UNIFORM_REPLAY, "capacity": 100_000}
        self.epsilon = [(0, 1.0), (1_000_000, 0.1)]
        self.env_steps_per_update = 4  # one gradient update per 4 env steps
        self.num_steps_sampled_before_learning_starts = 10_000
        self.double_q = False
        self.dueling = False
        self.grad_clip = 10.0
        self.td_error_loss_fn = "huber"
        # Env steps each EnvRunner samples per call, acted with one set of weights; a chunk is one call of every
        # remote EnvRunner (this x num_env_runners env steps): the policy lag's bound.
        self.env_steps_per_runner_call = 64
        # The update schedule's fragment: updates paid for and a due Q'_theta copy are counted at the
        # end of each fragment of this many env steps, as if EnvRunners sampled one fragment at a time
        # (the role of RLlib DQN's rollout_fragment_length, which kappa-DQN read before 2026-11-28).
        self.env_steps_per_fragment = DEFAULT_FRAGMENT
        self.updates_per_learner_call = 64  # gradient steps fused into one learner call (at most)
        # With remote EnvRunners: sample the next chunk while the learner updates on this one
        # (policy lag <= 2 chunks: 2 x env_steps_per_runner_call x num_env_runners).
        self.overlap_sampling = True
        # With overlap_sampling: the gradient steps on a thread of their own, so that collecting the next
        # chunk, adding it to the replay and drawing its minibatches overlap them (the same updates, order,
        # minibatches and acting weights as without: results identical). Off: on a 2-core CPU machine it
        # measured no faster (docs/measured.md, W3's pipeline); it is for a GPU learner, whose host thread
        # waits on the device (benchmarks/gpu_check.sh measures both).
        self.learner_thread = False
        # On a GPU: each gradient step replayed as a CUDA graph (one launch instead of ~78 for the
        # Nature CNN); settings a graph cannot hold run eagerly (torch/gradient_step.py).
        self.cuda_graphs = True
        # Where an image replay keeps its frames (replay.FrameStore): "auto", on the learner's device when it is a
        # GPU (an uncompressed uint8 ring: minibatches gathered there, no stacks copied to the device); False, in
        # host memory, LZ4-compressed; True, on the learner's device whatever it is. The same samples either way.
        self.replay_frames_on_device = "auto"
        # EnvRunners send a frame-stacked (Atari) segment as its frames, each once (replay.frames_of): a quarter
        # of the bytes, stored by the replay without building stacks. False: as stacks (the same transitions).
        self.send_frames = True
        self.set_raw_sampling_defaults()
        self.env_steps_per_iteration = 1000  # env steps per Algorithm.train() call
        # Two DQN modules (RLlib's DefaultDQNTorchRLModule, built from `model_config`):
        # Q_theta acts on the EnvRunners; Q_phi is learner-only and never leaves the learners.
        self._rl_module_spec = MultiRLModuleSpec(
            rl_module_specs={
                DEFAULT_MODULE_ID: RLModuleSpec(),
                PHI_MODULE_ID: RLModuleSpec(learner_only=True),
            }
        )

    def training(self, *, env_steps_per_update: int | None = None, env_steps_per_fragment: int | None = None,
                 env_steps_per_iteration: int | None = None, env_steps_per_runner_call: int | None = None,
                 updates_per_learner_call: int | None = None, overlap_sampling: bool | None = None,
                 learner_thread: bool | None = None,
                 checkpoint_replay_buffer: bool | None = None, v_phi_source: str | None = None,
                 episodic_life: bool | None = None, cuda_graphs: bool | None = None,
                 replay_frames_on_device: bool | str | None = None, send_frames: bool | None = None, **kwargs):
        """DQN's `.training(...)` plus the kappa settings (`KappaConfigMixin.training`) and these
        (keyword-only, like RLlib's).

        Every step setting counts env steps except `updates_per_learner_call` (gradient updates): these
        four, the kappa settings' `total_env_steps` (T), and DQN's `target_network_update_freq` and
        `num_steps_sampled_before_learning_starts`.

        Args:
            env_steps_per_update: Env steps per gradient update (the paper's 4).
            env_steps_per_fragment: The update schedule's fragment: updates paid for and a due Q'_theta copy
                are counted at the end of each fragment of this many env steps, exactly as if the EnvRunners
                sampled one fragment at a time (RLlib DQN's `rollout_fragment_length` role; that setting,
                this one's older name, is still taken, with a DeprecationWarning).
            env_steps_per_iteration: Env steps per `Algorithm.train()` call (one result row).
            env_steps_per_runner_call: Env steps each EnvRunner samples per call, acted with one set of weights.
                A chunk is one call of every remote EnvRunner (this x `num_env_runners` env steps; with none,
                of the local one), and its updates follow it: the policy lag's bound. (`env_steps_per_sample`,
                its older name, is accepted with a DeprecationWarning.)
            updates_per_learner_call: Gradient updates fused into one learner call (at most).
            overlap_sampling: With remote EnvRunners, sample the next chunk while the learner updates
                on this one (policy lag <= 2 chunks); kappa-PI also samples the next improvement phase's first
                chunk while its evaluation phase trains Q_phi (exact: Q_theta is frozen then).
            learner_thread: With `overlap_sampling`, run the gradient steps on a thread of their own: the next
                chunk is collected, added to the replay and its minibatches drawn while they run. The same
                updates in the same order on the same minibatches, the same acting weights: results are
                identical to False (the default: on 2 CPU cores it measured no faster).
            checkpoint_replay_buffer: Save the replay buffer in checkpoints (exact resume).
            v_phi_source: Which network V_phi reads: `V_PHI_PAPER` or `V_PHI_AUTHORS` (kappa_rllib.variant).
            episodic_life: Learning sees a terminal when a life is lost (needs `life_lost` in the env's info).
            cuda_graphs: On a GPU, replay each gradient step as a CUDA graph.
            replay_frames_on_device: Where an image (Atari) replay keeps its frames. "auto": on the
                learner's device when it is a GPU, else in host memory; True: on the learner's device, an
                uncompressed uint8 ring (100k Atari transitions: ~0.78 GB) whose minibatches are gathered there;
                False: in host memory, each frame LZ4-compressed (~45 MB). The same samples, updates and
                checkpoints either way; True needs the learner in the driver's process (`num_learners=0`).
            send_frames: EnvRunners send a frame-stacked (Atari) segment's frames, each once (84x84 bytes an env
                step instead of a 4-frame stack), and the replay stores them without building the stacks. False:
                they send the stacks. The same transitions, frame ids, samples and updates either way.
        """
        env_steps_per_runner_call = self.take_renamed_keywords(kwargs, env_steps_per_runner_call)
        super().training(**kwargs)
        set_given(self, dict(
            env_steps_per_update=env_steps_per_update,
            env_steps_per_fragment=env_steps_per_fragment,
            env_steps_per_iteration=env_steps_per_iteration,
            env_steps_per_runner_call=env_steps_per_runner_call,
            updates_per_learner_call=updates_per_learner_call,
            overlap_sampling=overlap_sampling, learner_thread=learner_thread,
            checkpoint_replay_buffer=checkpoint_replay_buffer,
            v_phi_source=v_phi_source,
            episodic_life=episodic_life,
            cuda_graphs=cuda_graphs,
            replay_frames_on_device=replay_frames_on_device,
            send_frames=send_frames,
        ))
        return self

    @property
    def schedule_length(self) -> int:
        return int(self.total_env_steps)

    def get_default_rl_module_spec(self):
        from kappa_rllib.algorithms.kappa_dqn.torch.kappa_dqn_torch_rl_module import KappaDQNTorchRLModule

        return RLModuleSpec(module_class=KappaDQNTorchRLModule, model_config=self.model_config)

    def get_default_learner_class(self):
        from kappa_rllib.algorithms.kappa_dqn.torch.kappa_dqn_torch_learner import (
            KappaDQNTorchLearner,
        )

        return KappaDQNTorchLearner

    def check_ranges(self, problems: SettingProblems) -> None:
        """Each setting on its own (all problems named at once; see config_mixins)."""
        problems.check(self.migrate_renamed_settings)  # renamed_settings.py: the old names, for one release
        self.check_sampling_ranges(problems)
        problems.check(validate_gamma, self.gamma)
        self.check_kappa_ranges(problems)
        for name in ("env_steps_per_update", "env_steps_per_fragment", "env_steps_per_iteration",
                     "env_steps_per_runner_call", "updates_per_learner_call", "target_network_update_freq"):
            problems.check(check_int, name, getattr(self, name), 1)
        problems.check(check_int, "num_steps_sampled_before_learning_starts",
                       self.num_steps_sampled_before_learning_starts, 0)
        if not isinstance(self.lr, (list, tuple)):  # RLlib also takes an lr schedule
            problems.check(check_positive, "lr", self.lr)
        problems.check(check_int, "replay_buffer_config['capacity']", self.replay_buffer_config.get("capacity"), 1)
        problems.check(self._check_supported)

    def _check_supported(self) -> None:
        if self.v_phi_source not in V_PHI_SOURCES:
            raise ValueError(f"v_phi_source must be {V_PHI_PAPER!r} or {V_PHI_AUTHORS!r}, got {self.v_phi_source!r}")
        check_bool("overlap_sampling", self.overlap_sampling)
        check_bool("learner_thread", self.learner_thread)
        check_bool("episodic_life", self.episodic_life)
        check_bool("send_frames", self.send_frames)
        if not (self.replay_frames_on_device == "auto" or isinstance(self.replay_frames_on_device, bool)):
            raise ValueError(f"replay_frames_on_device must be true, false or \"auto\" (the learner's device when it "
                             f"is a GPU), got {self.replay_frames_on_device!r}")
        clip = self.clip_rewards
        if not (clip is None or isinstance(clip, bool) or (isinstance(clip, (int, float)) and clip > 0)):
            raise ValueError(f"clip_rewards must be true/false/null or a number > 0, got {clip!r}")
        for name, bad, why in [
            ("double_q", self.double_q, "the paper's DQN has no double-Q"),
            ("dueling", self.dueling, "the paper's DQN has no dueling head"),
            ("noisy", self.noisy, "noisy nets are not supported"),
            ("num_atoms", self.num_atoms != 1, "distributional Q is not supported"),
            ("n_step", self.n_step != 1, "the kappa targets are one-step"),
            ("training_intensity", self.training_intensity is not None, "use env_steps_per_update"),
            (
                "min_sample_timesteps_per_iteration",
                bool(self.min_sample_timesteps_per_iteration),
                "use env_steps_per_iteration",
            ),
            ("min_time_s_per_iteration", bool(self.min_time_s_per_iteration), "use env_steps_per_iteration"),
        ]:
            if bad:
                raise ValueError(f"{name}={getattr(self, name)!r} is not supported: {why}")
        if self.replay_buffer_config.get("type") != UNIFORM_REPLAY:
            raise ValueError(
                f"replay_buffer_config['type'] must be {UNIFORM_REPLAY!r} (the paper's uniform "
                f"replay), got {self.replay_buffer_config.get('type')!r}"
            )

    def check_relations(self) -> None:
        """Settings against each other, once each is in its own range."""
        self.check_kappa_schedule("env steps")
        if self.num_steps_sampled_before_learning_starts >= self.total_env_steps:
            raise ValueError(
                f"num_steps_sampled_before_learning_starts={self.num_steps_sampled_before_learning_starts} is not "
                f"below total_env_steps={self.total_env_steps}: the run would end without one update; lower it "
                "or raise total_env_steps"
            )
        capacity = self.replay_buffer_config.get("capacity")
        if capacity < self.train_batch_size:
            raise ValueError(f"replay_buffer_config['capacity']={capacity} is smaller than "
                             f"train_batch_size={self.train_batch_size}")
        if self.replay_frames_on_device is True and self.num_learners:
            raise ValueError(
                f"replay_frames_on_device=True needs the learner in the driver's process (num_learners=0), got "
                f"num_learners={self.num_learners}: remote learners receive their minibatches through Ray"
            )
        if self.env_steps_per_runner_call % self.env_steps_per_fragment:
            raise ValueError(
                f"env_steps_per_runner_call={self.env_steps_per_runner_call} must be a multiple of "
                f"env_steps_per_fragment={self.env_steps_per_fragment} (the unit updates are counted in)"
            )
        if isinstance(self.env, str):
            space = envs.action_space_of(self.env, self.env_config)
            if not isinstance(space, Discrete):
                raise ValueError(
                    f"env {self.env!r} has a {type(space).__name__} action space: kappa-DQN needs "
                    "discrete actions (use kappa-PI-TRPO / kappa-VI-TRPO)"
                )
