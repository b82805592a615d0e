"""kappa-DQN settings renamed on 2026-11-28, still taken for one release with a DeprecationWarning.

  * `env_steps_per_sample` -> `env_steps_per_runner_call` (the old name read like replay sampling);
  * `rollout_fragment_length` -> `env_steps_per_fragment` (RLlib's sampling setting, which kappa-DQN
    read as its update schedule's unit; kappa-DQN now leaves it at RLlib's default).

Each old name is taken wherever a user may have set it: as a keyword, as an attribute, in a preset,
and in a config state saved before the rename (RLlib's `AlgorithmConfig.from_state` puts the saved
attributes back into `__dict__`, so `migrate_renamed_settings` runs in `validate()`).
"""

from __future__ import annotations

import warnings

from ray.rllib.algorithms.dqn.dqn import DQNConfig

RLLIB_DQN_FRAGMENT = DQNConfig().rollout_fragment_length  # "auto": RLlib's default, which kappa-DQN leaves alone
DEFAULT_FRAGMENT = 4  # env_steps_per_fragment's default (rollout_fragment_length's in kappa-DQN before the rename)


def _warn_sample_name() -> None:
    warnings.warn("env_steps_per_sample is deprecated: use env_steps_per_runner_call", DeprecationWarning,
                  stacklevel=3)


class RenamedSettingsMixin:
    """Mixed into KappaDQNConfig: the old names of its renamed settings."""

    @staticmethod
    def take_renamed_keywords(kwargs: dict, env_steps_per_runner_call: int | None) -> int | None:
        """`.training(env_steps_per_sample=...)`: pops it from `kwargs`; returns the chunk setting."""
        if "env_steps_per_sample" in kwargs:
            _warn_sample_name()
            return kwargs.pop("env_steps_per_sample")
        return env_steps_per_runner_call

    @property
    def env_steps_per_sample(self) -> int:
        """Deprecated: `env_steps_per_runner_call`'s old name."""
        return self.env_steps_per_runner_call

    @env_steps_per_sample.setter
    def env_steps_per_sample(self, value: int) -> None:
        _warn_sample_name()
        self.env_steps_per_runner_call = value

    def migrate_renamed_settings(self) -> None:
        """The old names in a config's attributes moved to the new ones (in `__dict__`: a config may be frozen).

        `rollout_fragment_length` set to anything but RLlib's default ("auto") is the old spelling of
        `env_steps_per_fragment`, except in an evaluation config (RLlib sets its fragment to 1 or 10 for
        evaluation sampling); set beside a different `env_steps_per_fragment`, it is refused."""
        attrs = self.__dict__
        if "env_steps_per_sample" in attrs:
            attrs["env_steps_per_runner_call"] = attrs.pop("env_steps_per_sample")
        fragment = self.rollout_fragment_length
        if fragment == RLLIB_DQN_FRAGMENT or self.in_evaluation:
            return
        if fragment != self.env_steps_per_fragment:
            if self.env_steps_per_fragment != DEFAULT_FRAGMENT:
                raise ValueError(
                    f"rollout_fragment_length={fragment!r} and env_steps_per_fragment={self.env_steps_per_fragment} "
                    "disagree: kappa-DQN reads only env_steps_per_fragment; drop rollout_fragment_length")
            warnings.warn(f"kappa-DQN: rollout_fragment_length={fragment!r} is deprecated as the update schedule's "
                          f"unit: use .training(env_steps_per_fragment={fragment!r})", DeprecationWarning, stacklevel=3)
            attrs["env_steps_per_fragment"] = fragment
        attrs["rollout_fragment_length"] = RLLIB_DQN_FRAGMENT
