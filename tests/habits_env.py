"""Registers a CartPole with Tune under a name of its own, as RLlib users bring a custom task, for
tests/test_rllib_habits.py: `kappa-rllib train --env habits_env:kappa_habits_module_cartpole` imports this module
(tests/ on PYTHONPATH), a grid file imports it at its top."""

import gymnasium as gym
from ray.tune.registry import register_env

NAME = "kappa_habits_module_cartpole"
register_env(NAME, lambda env_config: gym.make("CartPole-v1"))
