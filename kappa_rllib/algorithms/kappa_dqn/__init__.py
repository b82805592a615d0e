from kappa_rllib.algorithms.kappa_dqn.kappa_dqn import (
    KappaDQN,
    KappaDQNConfig,
    KappaPIDQN,
    KappaPIDQNConfig,
    KappaVIDQN,
    KappaVIDQNConfig,
)

__all__ = [
    "KappaDQN",
    "KappaDQNConfig",
    "KappaPIDQN",
    "KappaPIDQNConfig",
    "KappaVIDQN",
    "KappaVIDQNConfig",
]
