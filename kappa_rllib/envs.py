"""Environment creation and checks: one place that turns an env id into an env.

* `ALE/...` ids get DeepMind-style preprocessing as in the paper's DQN runs (NOTES.md, Sec. 2):
  no-op reset (30), max-and-skip 4, 84x84 grayscale, reward clipping to [-1, 1], 4-frame stack
  (channels last, uint8), no sticky actions (the paper used the v4 `NoFrameskip` games).
* Any other id is `gymnasium.make(id)`.
* `TabularMDPEnv` exposes a finite MDP `(P, R)` with one-hot observations, so that a learned
  policy can be valued exactly with `kappa_rllib.dp`.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np

TABULAR_ENV = "kappa_rllib/TabularMDP"
_PREFIX = "kappa_rllib:"


def _register_ale() -> None:
    try:
        import ale_py

        gym.register_envs(ale_py)
    except ImportError:  # pragma: no cover - ale-py is a declared dependency
        pass


def is_atari(env_id: str) -> bool:
    return isinstance(env_id, str) and env_id.startswith("ALE/")


def check_env_id(env_id: str) -> None:
    """Raises ValueError (one line) if `env_id` is not a registered gymnasium id."""
    env_id = env_id.removeprefix(_PREFIX)
    if env_id == TABULAR_ENV:
        return
    _register_ale()
    try:
        gym.spec(env_id)
    except gym.error.Error as e:
        raise ValueError(f"unknown env id {env_id!r}: {e}") from None


def make_env(env_id: str, env_config: dict | None = None) -> gym.Env:
    env_config = dict(env_config or {})
    env_id = env_id.removeprefix(_PREFIX)
    if env_id == TABULAR_ENV:
        return TabularMDPEnv(**env_config)
    check_env_id(env_id)
    if is_atari(env_id):
        env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0, **env_config)
        env = gym.wrappers.AtariPreprocessing(
            env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True, scale_obs=False
        )
        env = gym.wrappers.ClipReward(env, -1.0, 1.0)
        env = gym.wrappers.FrameStackObservation(env, 4)
        # RLlib's CNN encoders take channels-last (H, W, C) frames.
        return gym.wrappers.TransformObservation(
            env, lambda obs: np.moveaxis(obs, 0, -1), gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        )
    return gym.make(env_id, **env_config)


_ACTION_SPACES: dict[tuple[str, str], gym.Space] = {}


def action_space_of(env_id: str, env_config: dict | None = None) -> gym.Space:
    """The env's action space (made once per id and config, then cached)."""
    key = (env_id, json.dumps(dict(env_config or {}), sort_keys=True, default=repr))
    if key not in _ACTION_SPACES:
        env = make_env(env_id, env_config)
        try:
            _ACTION_SPACES[key] = env.action_space
        finally:
            env.close()
    return _ACTION_SPACES[key]


def rllib_env_name(env_id: str) -> str:
    """The name RLlib should use for `env_id`: ids that need our own construction (Atari
    preprocessing, the tabular MDP) are registered in Tune's registry under a prefixed name;
    other ids are returned unchanged for RLlib's own `gymnasium.make`."""
    from ray.tune.registry import register_env

    env_id = env_id.removeprefix(_PREFIX)
    if not (is_atari(env_id) or env_id == TABULAR_ENV):
        return env_id
    name = _PREFIX + env_id
    register_env(name, lambda cfg, _id=env_id: make_env(_id, cfg))
    return name


class TabularMDPEnv(gym.Env):
    """A finite MDP with one-hot observations, episodes truncated after `horizon` steps.

    `P[s][a][s']` and `R[s][a]` as in `kappa_rllib.dp`; `initial[s]` the start distribution.
    Truncation (not termination) makes learned values estimate the infinite-horizon,
    gamma-discounted values that `dp` computes, since truncated steps are bootstrapped.
    """

    def __init__(self, P, R, initial=None, horizon: int = 100):
        self.P = np.asarray(P, dtype=np.float64)
        self.R = np.asarray(R, dtype=np.float64)
        n_states, n_actions = self.R.shape
        self.initial = (
            np.full(n_states, 1.0 / n_states) if initial is None else np.asarray(initial, float)
        )
        self.horizon = int(horizon)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (n_states,), np.float32)
        self.action_space = gym.spaces.Discrete(n_actions)
        self._state, self._t = 0, 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.observation_space.shape, np.float32)
        obs[self._state] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._state = int(self.np_random.choice(len(self.initial), p=self.initial))
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(self.R[self._state, action])
        self._state = int(self.np_random.choice(self.P.shape[2], p=self.P[self._state, action]))
        self._t += 1
        return self._obs(), reward, False, self._t >= self.horizon, {}
