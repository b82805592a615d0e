"""A uniform replay buffer of raw, unshaped transitions (s, a, r, s', terminated).

The paper's DQN uses uniform replay (no prioritisation). Transitions are stored flat in
preallocated numpy arrays: adding is one slice copy, sampling one fancy-index gather, and
the whole buffer (arrays, write position, RNG) is plain state that a checkpoint can carry.
Rewards are stored unshaped: the learner shapes them with the current V_phi at update time.
"""

from __future__ import annotations

import numpy as np
from ray.rllib.core.columns import Columns

OBS, ACTIONS, REWARDS, NEXT_OBS, TERMINATEDS = (
    Columns.OBS, Columns.ACTIONS, Columns.REWARDS, Columns.NEXT_OBS, Columns.TERMINATEDS
)
LIFE_LOST = "life_lost"  # the info key of kappa_rllib.envs' Atari wrapper


class UniformReplayBuffer:
    def __init__(self, capacity: int, seed: int | None = None):
        if capacity < 1:
            raise ValueError(f"replay_buffer_config['capacity'] must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self._arrays: dict[str, np.ndarray] | None = None
        self._next = 0
        self._size = 0
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._size

    def _allocate(self, batch: dict[str, np.ndarray]) -> None:
        self._arrays = {
            k: np.zeros((self.capacity,) + v.shape[1:], dtype=v.dtype) for k, v in batch.items()
        }

    def add(self, batch: dict[str, np.ndarray]) -> None:
        """Adds n transitions given as arrays with a leading axis of length n."""
        n = len(batch[REWARDS])
        if n == 0:
            return
        if self._arrays is None:
            self._allocate(batch)
        if n > self.capacity:  # only the newest `capacity` transitions survive
            batch = {k: v[-self.capacity :] for k, v in batch.items()}
            n = self.capacity
        idx = (self._next + np.arange(n)) % self.capacity
        for k, v in batch.items():
            self._arrays[k][idx] = v
        self._next = (self._next + n) % self.capacity
        self._size = min(self._size + n, self.capacity)

    def sample(self, n: int) -> dict[str, np.ndarray]:
        """n transitions drawn uniformly with replacement."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = self._rng.integers(0, self._size, size=n)
        return {k: v[idx] for k, v in self._arrays.items()}

    def get_state(self) -> dict:
        arrays = None
        if self._arrays is not None:
            arrays = {k: v[: self._size].copy() for k, v in self._arrays.items()}
        return {
            "capacity": self.capacity,
            "arrays": arrays,
            "next": self._next,
            "size": self._size,
            "rng": self._rng.bit_generator.state,
        }

    def set_state(self, state: dict) -> None:
        if state["capacity"] != self.capacity:
            raise ValueError(
                f"checkpointed replay capacity {state['capacity']} != configured {self.capacity}"
            )
        self._arrays = None
        if state["arrays"] is not None:
            self._allocate(state["arrays"])
            for k, v in state["arrays"].items():
                self._arrays[k][: len(v)] = v
        self._next, self._size = state["next"], state["size"]
        self._rng.bit_generator.state = state["rng"]


def episodes_to_transitions(episodes, life_loss_terminal: bool = False) -> dict[str, np.ndarray]:
    """Flattens RLlib SingleAgentEpisode chunks into raw (s, a, r, s', terminated) arrays.

    Only the last step of a terminated chunk is terminal; a truncated chunk's last step keeps
    terminated = 0 so its value is bootstrapped from the final observation. With
    `life_loss_terminal` (DeepMind's episodic life), a step whose info says `life_lost` is
    terminal for learning too, although the game (and the reported episode) goes on.
    """
    parts = {OBS: [], ACTIONS: [], REWARDS: [], NEXT_OBS: [], TERMINATEDS: []}
    for ep in episodes:
        n = len(ep)
        if n == 0:
            continue
        obs = np.asarray(ep.get_observations(slice(0, n + 1)))
        parts[OBS].append(obs[:-1])
        parts[NEXT_OBS].append(obs[1:])
        parts[ACTIONS].append(np.asarray(ep.get_actions(slice(0, n))))
        parts[REWARDS].append(np.asarray(ep.get_rewards(slice(0, n)), dtype=np.float32))
        terminated = np.zeros(n, dtype=np.float32)
        if life_loss_terminal:
            infos = ep.get_infos(slice(1, n + 1))  # info i + 1 comes with step i's outcome
            if any(LIFE_LOST not in info for info in infos):
                raise ValueError(
                    "episodic_life=True needs an env whose step info has 'life_lost' "
                    "(the ALE/... envs of kappa_rllib.envs); this env's has not"
                )
            terminated[:] = [float(info[LIFE_LOST]) for info in infos]
        terminated[-1] = max(terminated[-1], float(ep.is_terminated))
        parts[TERMINATEDS].append(terminated)
    if not parts[REWARDS]:
        return {}
    return {k: np.concatenate(v) for k, v in parts.items()}
