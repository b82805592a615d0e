"""A raw-transition EnvRunner: RLlib's EnvRunner contract without per-step episode objects.

RLlib's `SingleAgentEnvRunner` runs two connector pipelines and builds `SingleAgentEpisode`
objects on every env step; for small networks that is most of the time a DQN step costs. This
runner keeps everything RLlib relies on - construction from the config, the env (built by RLlib's
own `make_env`), the inference-only RLModule, weight syncs through `set_state`, metrics through
`get_metrics` (`episode_return_mean`, `num_env_steps_sampled_lifetime`, ...), local and remote
use - and replaces the sampling loop: the sub-envs of the vector env are stepped directly, all
actions come from one batched forward pass of the module, and `sample()` returns plain numpy
**segments** instead of episodes.

A segment is consecutive steps of one sub-env's episode (the same cut as an RLlib episode chunk):
    obs        (n + 1, ...)  s_0 .. s_n; or, for stacked uint8 frames that shift by one frame a step (Atari),
    frames     (n + depth, H, W) instead: each frame once, s_t = frames[t : t + depth] channels last
               (`kappa_rllib.replay.frames_of`: a quarter of the bytes to send, and the replay stores them as
               they are; `segment_stacks` gives the stacks)
    actions    (n, ...)      the module's actions (before unsquashing to the env's bounds)
    rewards    (n,)          raw env rewards
    terminated bool          s_n is terminal
    truncated  bool          s_n ends the episode by a time limit
    life_lost  (n,)          only if the env's info has `life_lost` (kappa_rllib.envs' Atari)
    action_logp (n,)         only for policies with an action distribution (TRPO)
A segment that is neither terminated nor truncated continues in the next `sample()` call, whose
segment for that sub-env starts with the same s_n.

Exploration: DQN modules act epsilon-greedily with epsilon at the *global* env-step count that the
algorithm passes in (`global_env_steps`); other modules sample their action distribution.
Set with `config.env_runners(env_runner_cls=RawTransitionEnvRunner)` (the default of every
algorithm here).
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import ray
import torch

from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

from kappa_rllib.envs import LIFE_LOST
from kappa_rllib.mlp_policy import NumpyActor
from kappa_rllib.replay import FRAMES, frame_stacks, frames_of

# Result key (under env_runners/) listing the raw return of every episode finished in an iteration.
EPISODE_RETURNS = "episode_returns"



def _float32(obs: np.ndarray) -> np.ndarray:
    """Float observations as float32, what the torch modules take; other dtypes (uint8 frames) as they are."""
    return obs.astype(np.float32) if obs.dtype.kind == "f" and obs.dtype != np.float32 else obs


class EpisodeReturnsEnvRunner(SingleAgentEnvRunner):
    """RLlib's EnvRunner that also reports every finished episode's raw return, in order, under
    env_runners/episode_returns: the report's scores use them all, not RLlib's smoothed
    episode_return_mean. kappa-PPO samples with it (RLlib's own sampling otherwise)."""

    def _log_episode_metrics(self, length, ret, sec):
        super()._log_episode_metrics(length, ret, sec)
        self.metrics.log_value(EPISODE_RETURNS, float(ret), reduce="item_series")


class RawTransitionEnvRunner(EpisodeReturnsEnvRunner):
    def __init__(self, *, config, **kwargs):
        super().__init__(config=config, **kwargs)
        self._subenvs = None
        self._obs: list | None = None  # current observation of each sub-env
        self._episode = None  # running (return, length, start time) of each sub-env's episode
        if self.env is not None:
            self._subenvs = list(getattr(self.env.unwrapped, "envs", []))
            if len(self._subenvs) != self.num_envs:
                raise ValueError(
                    "RawTransitionEnvRunner steps the sub-envs itself and needs "
                    "gym_env_vectorize_mode='SYNC' (config.env_runners(gym_env_vectorize_mode='SYNC'))"
                )
        self._epsilon_greedy = hasattr(self.module, "epsilon_schedule") if self.module is not None else False
        self._rng = np.random.default_rng(None if self._seed is None else self._seed + 7919)
        self._numpy_actor = None
        # frame-stacked segments sent as their frames (`FRAMES`); kappa-DQN's `send_frames`, on elsewhere too
        # (`segment_transitions` rebuilds the stacks for whoever wants them)
        self._send_frames = bool(getattr(self.config, "send_frames", True))
        self.weights_version = 0  # of the acting weights this runner acts with (kappa_rllib.algorithms.sampling)
        if self.module is not None:
            # Acting never trains: eval mode once, then the modules' private forwards (RLlib's
            # public forward_* toggle train/eval on every call, a recursive walk per env step).
            self.module.eval()
            self._numpy_actor_of_module()

    def _numpy_actor_of_module(self) -> None:
        """Policies that are a plain MLP act through `NumpyActor` (kappa_rllib.mlp_policy):
        the same distribution as RLlib's forward pass and distribution classes, at a fraction of
        their per-call cost (for a 64x64 actor and a few sub-envs, dispatch is most of that cost).
        The draws come from this runner's seeded generator. Other modules use RLlib's path."""
        self._numpy_actor = None
        if self.module is not None and not self._epsilon_greedy and getattr(self.config, "numpy_actor", False):
            explore_cls = self.module.get_exploration_action_dist_cls()
            if explore_cls is self.module.get_inference_action_dist_cls():
                self._numpy_actor = NumpyActor.of(self.module, explore_cls)

    def set_state(self, state) -> None:
        super().set_state(state)
        self._numpy_actor_of_module()  # in case the parameter tensors were replaced, not loaded into

    def act_with(self, version: int, weights) -> None:
        """Acts with the Sampler's acting weights of `version` (`weights`: the state, or its object-store
        reference), loading them unless this runner already does (0: none synced yet, a runner's own)."""
        if version and version != self.weights_version:
            self.set_state(ray.get(weights) if isinstance(weights, ray.ObjectRef) else weights)
            self.weights_version = version

    # ----- sampling
    def sample(self, *, num_timesteps: int, explore: bool = True, global_env_steps: int | None = None,
               **kwargs) -> list[dict]:
        """Exactly `num_timesteps` env steps over the sub-envs; returns segments (module docstring).

        `global_env_steps`: env steps sampled so far by all EnvRunners (the epsilon schedule's t).
        """
        if self._subenvs is None:
            raise ValueError(f"{self} has no env: it cannot sample")
        if self._obs is None:
            self._reset_all()
        n_envs = len(self._subenvs)
        if global_env_steps is None:  # RLlib's own estimate
            global_env_steps = self.num_env_steps_sampled_lifetime * (self.config.num_env_runners or 1)
        parts = [self._new_part(i) for i in range(n_envs)]
        segments: list[dict] = []
        steps = episodes_done = 0
        while steps < num_timesteps:
            active = min(n_envs, num_timesteps - steps)  # the last round may step fewer sub-envs
            actions, env_actions, logps = self._act(self._obs[:active], explore, global_env_steps + steps)
            for i in range(active):
                obs, reward, terminated, truncated, info = self._subenvs[i].step(env_actions[i])
                part = parts[i]
                part["obs"].append(obs)
                part["actions"].append(actions[i])
                part["rewards"].append(reward)
                if logps is not None:
                    part["logp"].append(logps[i])
                if LIFE_LOST in info:
                    part["life_lost"].append(bool(info[LIFE_LOST]))
                ep = self._episode[i]
                ep[0] += reward
                ep[1] += 1
                if terminated or truncated:
                    segments.append(self._close(part, terminated, truncated))
                    self._log_episode_metrics(ep[1], ep[0], time.perf_counter() - ep[2])
                    episodes_done += 1
                    self._reset_one(i)
                    parts[i] = self._new_part(i)
                else:
                    self._obs[i] = obs
            steps += active
        segments.extend(self._close(p, False, False) for p in parts if p["actions"])
        self.num_env_steps_sampled_lifetime += steps
        self._increase_sampled_metrics(steps, episodes_done)
        self.metrics.log_value(WEIGHTS_SEQ_NO, self._weights_seq_no, window=1)
        return segments

    def get_metrics(self):
        return self.metrics.reduce()  # episode metrics were logged when the episodes ended

    @torch.no_grad()
    def _act(self, observations, explore: bool, t: int):
        """One batched forward pass: (module actions, env actions, log-probs or None)."""
        batch = {Columns.OBS: torch.from_numpy(_float32(np.stack(observations)))}
        logps = None
        if self._epsilon_greedy:
            # epsilon-greedy on Q_theta, epsilon from the module's own schedule at global step t
            greedy = self.module.compute_q_values(batch)[QF_PREDS].argmax(dim=-1).numpy()
            actions = greedy
            if explore:
                self.module.epsilon_schedule.update(t)
                epsilon = float(self.module.epsilon_schedule.get_current_value())
                self.last_epsilon = (t, epsilon)  # what the last step explored with (checked after restarts)
                explore_mask = self._rng.random(len(greedy)) < epsilon
                if explore_mask.any():
                    random_actions = self._rng.integers(0, self.env.single_action_space.n, len(greedy))
                    actions = np.where(explore_mask, random_actions, greedy)
        elif self._numpy_actor is not None:
            actions, logps = self._numpy_actor.act(batch[Columns.OBS].numpy(), self._rng, explore)
        else:
            out = self.module._forward_exploration(batch, t=t) if explore else self.module._forward_inference(batch)
            dist_cls = (self.module.get_exploration_action_dist_cls() if explore
                        else self.module.get_inference_action_dist_cls())
            dist = dist_cls.from_logits(out[Columns.ACTION_DIST_INPUTS])
            if not explore:
                dist = dist.to_deterministic()
            sampled = dist.sample()
            logps = dist.logp(sampled).numpy() if explore else None
            actions = sampled.numpy()
        return actions, self._to_env(actions), logps

    def _to_env(self, actions: np.ndarray) -> list:
        return to_env_actions(actions, self.env.single_action_space, self.config)

    def _new_part(self, i: int) -> dict:
        return {"obs": [self._obs[i]], "actions": [], "rewards": [], "logp": [], "life_lost": []}

    def _close(self, part: dict, terminated: bool, truncated: bool) -> dict:
        frames = frames_of(part["obs"]) if self._send_frames else None
        seg = {
            **({FRAMES: frames} if frames is not None else {Columns.OBS: _float32(np.stack(part["obs"]))}),
            Columns.ACTIONS: np.stack(part["actions"]),
            Columns.REWARDS: np.asarray(part["rewards"], np.float32),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        }
        if part["logp"]:
            seg[Columns.ACTION_LOGP] = np.asarray(part["logp"], np.float32)
        if part["life_lost"]:
            seg[LIFE_LOST] = np.asarray(part["life_lost"], bool)
        return seg

    def _reset_all(self) -> None:
        self._obs, self._episode = [None] * len(self._subenvs), [None] * len(self._subenvs)
        for i in range(len(self._subenvs)):
            seed = None if self._seed is None else self._seed * 1000 + i  # each sub-env its own stream
            self._reset_one(i, seed=seed)

    def _reset_one(self, i: int, seed: int | None = None) -> None:
        obs, _ = self._subenvs[i].reset(seed=seed)
        self._obs[i] = obs
        self._episode[i] = [0.0, 0, time.perf_counter()]


def segment_stacks(segment: dict) -> np.ndarray:
    """A segment's observations s_0 .. s_n, whichever way it holds them (a read-only view of its frames)."""
    if FRAMES in segment:
        frames = segment[FRAMES]
        return frame_stacks(frames, len(frames) - len(segment[Columns.REWARDS]))
    return segment[Columns.OBS]


def segment_transitions(segments: list[dict], life_loss_terminal: bool = False,
                        truncateds: bool = False, frames: bool = False) -> dict[str, np.ndarray]:
    """Flat (s, a, r, s', terminated) columns of a list of segments (RLlib's column names).

    Only a terminated segment's last step is terminal; a truncated one is bootstrapped. With
    `life_loss_terminal` (DeepMind's episodic life), a step that lost a life is terminal too.
    With `truncateds`, `Columns.TRUNCATEDS` marks a segment's last step cut by the time limit
    (TRPO's chunks keep it; a replay buffer, which stores every column, is not given it).
    `Columns.EPS_ID` numbers the segments (0, 1, ...), so `split_segments` can undo the
    flattening; `Columns.ACTION_LOGP` is kept where the segments have it. With `frames`, where every
    segment holds its frames (`FRAMES`), the columns hold those (a list, a segment each) instead of the
    obs and next obs stacks: what `UniformReplayBuffer.add` stores without building the stacks.
    """
    segments = [s for s in segments if len(s[Columns.REWARDS])]
    if not segments:
        return {}
    terms = []
    for s in segments:
        n = len(s[Columns.REWARDS])
        term = np.zeros(n, np.float32)
        if life_loss_terminal:
            if LIFE_LOST not in s:
                raise ValueError(
                    "episodic_life=True needs an env whose step info has 'life_lost' "
                    "(the ALE/... envs of kappa_rllib.envs); this env's has not"
                )
            term[:] = s[LIFE_LOST]
        term[-1] = max(term[-1], float(s["terminated"]))
        terms.append(term)
    if frames and all(FRAMES in s for s in segments):
        out = {FRAMES: [s[FRAMES] for s in segments]}
    else:
        stacks = [segment_stacks(s) for s in segments]
        out = {Columns.OBS: np.concatenate([s[:-1] for s in stacks]),
               Columns.NEXT_OBS: np.concatenate([s[1:] for s in stacks])}
    out |= {
        Columns.ACTIONS: np.concatenate([s[Columns.ACTIONS] for s in segments]),
        Columns.REWARDS: np.concatenate([s[Columns.REWARDS] for s in segments]),
        Columns.TERMINATEDS: np.concatenate(terms),
        Columns.EPS_ID: np.concatenate([np.full(len(s[Columns.REWARDS]), k) for k, s in enumerate(segments)]),
    }
    if truncateds:
        cuts = [np.zeros(len(s[Columns.REWARDS]), np.float32) for s in segments]
        for cut, s in zip(cuts, segments):
            cut[-1] = float(s["truncated"])
        out[Columns.TRUNCATEDS] = np.concatenate(cuts)
    if all(Columns.ACTION_LOGP in s for s in segments):
        out[Columns.ACTION_LOGP] = np.concatenate([s[Columns.ACTION_LOGP] for s in segments])
    return out


def split_segments(columns: dict) -> list[dict]:
    """The per-segment view of `segment_transitions` columns: obs s_0..s_n, actions, rewards,
    whether s_n is terminal (what TRPO's returns are computed on), and whether the time limit cut
    the episode at s_n (False where the columns do not say)."""
    ids = np.asarray(columns[Columns.EPS_ID])
    if len(ids) == 0:
        return []
    bounds = np.flatnonzero(np.diff(ids)) + 1
    starts, ends = np.r_[0, bounds], np.r_[bounds, len(ids)]
    obs, next_obs = np.asarray(columns[Columns.OBS]), np.asarray(columns[Columns.NEXT_OBS])
    truncated = np.asarray(columns[Columns.TRUNCATEDS]) if Columns.TRUNCATEDS in columns else np.zeros(len(ids))
    return [
        {
            Columns.OBS: np.concatenate([obs[a:b], next_obs[b - 1 : b]]),
            Columns.ACTIONS: np.asarray(columns[Columns.ACTIONS][a:b]),
            Columns.REWARDS: np.asarray(columns[Columns.REWARDS][a:b], np.float64),
            "terminated": bool(columns[Columns.TERMINATEDS][b - 1]),
            "truncated": bool(truncated[b - 1]),
        }
        for a, b in zip(starts, ends)
    ]


def to_env_actions(actions: np.ndarray, space, config) -> list:
    """What RLlib's module-to-env connector does to actions: for a Box space, unsquash from
    [-1, 1] to the bounds (`normalize_actions`, RLlib's default) or clip (`clip_actions`)."""
    if isinstance(space, gym.spaces.Box) and space.dtype.kind == "f":
        low, high = space.low, space.high
        if config.normalize_actions:
            if np.all(space.bounded_below) and np.all(space.bounded_above):  # RLlib's unsquash_action
                actions = np.clip(low + (actions + 1.0) * (high - low) / 2.0, low, high)
            return list(actions)
        if config.clip_actions:
            return list(np.clip(actions, low, high))
        return list(actions)
    return [a.item() if isinstance(a, np.ndarray) and a.ndim == 0 else a for a in actions]


@torch.no_grad()
def greedy_action(module, obs, space, config):
    """The deterministic action of a policy module (argmax / the mean) for one observation, as the
    env takes it: what `evaluate` runs for algorithms sampled by RLlib's own EnvRunner (PPO)."""
    out = module.forward_inference({Columns.OBS: torch.from_numpy(_float32(np.asarray(obs)[None]))})
    dist = module.get_inference_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS]).to_deterministic()
    return to_env_actions(dist.sample().numpy(), space, config)[0]

