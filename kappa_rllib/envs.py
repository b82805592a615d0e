"""Environment creation and checks: one place that turns an env id into an env.

* `ALE/...` ids get the DeepMind preprocessing of the paper's DQN runs (docs/paper-settings.md,
  "Atari"): no-op reset (30), max-and-skip 4, 84x84 grayscale, fire on reset for games that need
  it, an episodic-life *signal*, 4-frame stack (channels last, uint8), no sticky actions (the paper
  used the v4 `NoFrameskip` games). Rewards stay raw game scores here: the learner clips them
  for learning only (`clip_rewards`), so reported episode returns are raw full-game scores.
* `MinAtar/...` ids (the `minatar` package: Breakout-v1, SpaceInvaders-v1, ... with the minimal
  action set) are MinAtar's own gymnasium envs (10x10xC binary frames, sticky actions 0.1, as in
  the MinAtar paper) with observations as float32 0/1 channels for the small conv network.
* Any other id is `gymnasium.make(id)`.
* `TabularMDPEnv` exposes a finite MDP `(P, R)` with one-hot observations, so that a learned
  policy can be valued exactly with `kappa_rllib.dp`.
"""

from __future__ import annotations

import importlib
import json

import gymnasium as gym
import numpy as np

LIFE_LOST = "life_lost"  # the info key LifeLossSignal sets on every step
TABULAR_ENV = "kappa_rllib/TabularMDP"
COUNTING_ENV = "kappa_rllib/Counting"  # a scripted env for checking samplers (CountingEnv)
_OWN_IDS = (TABULAR_ENV, COUNTING_ENV)
_PREFIX = "kappa_rllib:"


def _register_ale() -> None:
    try:
        import ale_py

        gym.register_envs(ale_py)
        # ALE's banner ("A.L.E: ... [Powered by Stella]") on stderr at every env creation is no news:
        # its warnings and errors still come through
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)
    except ImportError:  # pragma: no cover - ale-py is a declared dependency
        pass


def _register_minatar() -> None:
    try:
        from minatar.gym import register_envs
    except ImportError:  # pragma: no cover - minatar is a declared dependency
        return
    if "MinAtar/Breakout-v1" not in gym.registry:
        register_envs()


def is_atari(env_id: str) -> bool:
    return isinstance(env_id, str) and env_id.startswith("ALE/")


def display_id(env) -> str:
    """The gymnasium id a user gave, without the registration prefix RLlib's config holds."""
    return str(env).removeprefix(_PREFIX)


def is_minatar(env_id: str) -> bool:
    return isinstance(env_id, str) and env_id.startswith("MinAtar/")


def tune_registered(name) -> bool:
    """Whether `name` is an env registered with Tune (`ray.tune.registry.register_env`), the way RLlib users bring
    their own task: RLlib's EnvRunners then make it with the registered creator, before any gymnasium id."""
    from ray.tune.registry import ENV_CREATOR, _global_registry

    return isinstance(name, str) and _global_registry.contains(ENV_CREATOR, name)


def _make_registered(name: str, env_config: dict | None) -> gym.Env:
    """The env Tune's registry makes for `name`, as RLlib's EnvRunner calls the creator (an EnvContext)."""
    from ray.rllib.env.env_context import EnvContext
    from ray.tune.registry import ENV_CREATOR, _global_registry

    return _global_registry.get(ENV_CREATOR, name)(EnvContext(dict(env_config or {}), worker_index=0))


def check_env_id(env_id: str) -> None:
    """Raises ValueError (one line) if `env_id` is neither a registered gymnasium id nor a name registered
    with Tune. `module:Id-v0`, as `gymnasium.make` takes it, imports `module` first (where a user's own
    envs register, with gymnasium or with Tune)."""
    if not env_id.startswith(_PREFIX) and tune_registered(env_id):
        return
    env_id = env_id.removeprefix(_PREFIX)
    if env_id in _OWN_IDS:
        return
    _register_ale()
    if is_minatar(env_id):
        _register_minatar()
    module, _, name = env_id.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
            if tune_registered(name):  # the module registered it with Tune
                return
        gym.spec(name)
    except ImportError as e:
        raise ValueError(f"unknown env id {env_id!r}: cannot import {module!r} ({e})") from None
    except gym.error.Error as e:
        raise ValueError(f"unknown env id {env_id!r}: {e}") from None


def make_env(env_id: str, env_config: dict | None = None) -> gym.Env:
    """The env for `env_id`, as every run builds it: `ALE/...` with the paper's DeepMind preprocessing,
    `MinAtar/...` with float32 frames, this package's tabular MDP and counting env, else `gym.make`.

    ```python
    from kappa_rllib import envs
    env = envs.make_env("ALE/Breakout-v5")  # 84x84x4 uint8 frames, channels last
    ```
    """
    env_config = dict(env_config or {})
    if not env_id.startswith(_PREFIX) and tune_registered(env_id):  # RLlib's EnvRunner prefers Tune's too
        return _make_registered(env_id, env_config)
    env_id = env_id.removeprefix(_PREFIX)
    if env_id == TABULAR_ENV:
        return TabularMDPEnv(**env_config)
    if env_id == COUNTING_ENV:
        return CountingEnv(**env_config)
    check_env_id(env_id)
    if is_atari(env_id):
        env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0, **env_config)
        env = gym.wrappers.AtariPreprocessing(
            env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True, scale_obs=False
        )
        env = LifeLossSignal(env)
        env = gym.wrappers.FrameStackObservation(env, 4)
        # RLlib's CNN encoders take channels-last (H, W, C) frames.
        return gym.wrappers.TransformObservation(
            env, lambda obs: np.moveaxis(obs, 0, -1), gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        )
    if is_minatar(env_id):
        env = gym.make(env_id, **env_config)
        space = gym.spaces.Box(0.0, 1.0, env.observation_space.shape, np.float32)
        return gym.wrappers.TransformObservation(env, lambda obs: obs.astype(np.float32), space)
    return gym.make(env_id, **env_config)


class LifeLossSignal(gym.Wrapper):
    """DeepMind's EpisodicLifeEnv and FireResetEnv, with the game kept whole.

    DeepMind's wrappers end the *episode* when a life is lost (and fake a reset); here the
    episode stays the full game, so reported returns are full-game scores, and the step's info
    carries `life_lost=True` instead: the kappa-DQN learner treats that step as terminal when
    `episodic_life` is on. What DeepMind's reset did after a lost life is done inside that step:
    one no-op, then FIRE and action 2 in games that need FIRE to go on (their rewards are kept
    in the step's reward, so the score stays the game's). A new game fires the same way.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = getattr(env.unwrapped, "get_action_meanings", lambda: [])()
        self.fire_action = meanings.index("FIRE") if "FIRE" in meanings and len(meanings) >= 3 else None
        self.lives = 0

    def _after_life_actions(self, new_game: bool) -> list[int]:
        noop = [] if new_game else [0]  # a new game already had its no-op starts
        return noop + ([self.fire_action, 2] if self.fire_action is not None else [])

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for action in self._after_life_actions(new_game=True):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.lives = int(info.get("lives", 0))
        return obs, {**info, LIFE_LOST: False}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = int(info.get("lives", 0))
        life_lost = 0 < lives < self.lives  # losing the last life ends the game: terminal anyway
        if life_lost and not (terminated or truncated):
            for extra in self._after_life_actions(new_game=False):
                obs, r, terminated, truncated, info = self.env.step(extra)
                reward += r
                if terminated or truncated:
                    break
        self.lives = int(info.get("lives", 0))
        return obs, reward, terminated, truncated, {**info, LIFE_LOST: life_lost}


_SPACES: dict[tuple[str, str], tuple[gym.Space, gym.Space]] = {}


def spaces_of(env_id: str, env_config: dict | None = None) -> tuple[gym.Space, gym.Space]:
    """The env's (observation space, action space), made once per id and config, then cached."""
    key = (env_id, json.dumps(dict(env_config or {}), sort_keys=True, default=repr))
    # a user's Tune name may be registered again, to another env (this package's own prefixed names never are)
    if key not in _SPACES or (not str(env_id).startswith(_PREFIX) and tune_registered(env_id)):
        env = make_env(env_id, env_config)
        try:
            _SPACES[key] = (env.observation_space, env.action_space)
        finally:
            env.close()
    return _SPACES[key]


def action_space_of(env_id: str, env_config: dict | None = None) -> gym.Space:
    """The env's action space (`spaces_of`)."""
    return spaces_of(env_id, env_config)[1]


def rllib_env_name(env_id: str) -> str:
    """The name RLlib should use for `env_id`: ids that need our own construction (Atari
    preprocessing, the tabular MDP) are registered in Tune's registry under a prefixed name;
    other ids are returned unchanged for RLlib's own `gymnasium.make`."""
    from ray.tune.registry import register_env

    env_id = env_id.removeprefix(_PREFIX)
    module, _, name = env_id.rpartition(":")
    if module:  # `module:name`: a module that registers `name` with Tune (imported here, as check_env_id does)
        try:
            importlib.import_module(module)
        except ImportError:
            pass  # check_env_id says so in one line
        if tune_registered(name):
            return name
    if not (is_atari(env_id) or is_minatar(env_id) or env_id in _OWN_IDS):
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


class CountingEnv(gym.Env):
    """A scripted env whose every transition can be checked: obs = (uid, episode, t), where uid
    is the seed of the env's first reset; reward = 1000 uid + 10 episode + t. Episodes alternate
    between a time-limit truncation after `truncate_at` steps (even episodes) and a termination
    after `terminate_at` steps (odd ones). Actions are ignored."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, truncate_at: int = 5, terminate_at: int = 7):
        self.truncate_at, self.terminate_at = int(truncate_at), int(terminate_at)
        self.uid, self.episode, self.t = 0, -1, 0

    def _obs(self):
        return np.array([self.uid, self.episode, self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.uid = int(seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = 1000.0 * self.uid + 10.0 * self.episode + self.t
        self.t += 1
        terminates = self.episode % 2 == 1
        end = self.terminate_at if terminates else self.truncate_at
        done = self.t >= end
        return self._obs(), reward, done and terminates, done and not terminates, {}
