"""kappa-rllib: multi-step greedy RL (Tomar, Efroni & Ghavamzadeh, ICML 2020) on Ray RLlib."""

from kappa_rllib.algorithms.kappa_dqn import (
    KappaPIDQN,
    KappaPIDQNConfig,
    KappaVIDQN,
    KappaVIDQNConfig,
)
from kappa_rllib.algorithms.kappa_trpo import (
    KappaPITRPO,
    KappaPITRPOConfig,
    KappaVITRPO,
    KappaVITRPOConfig,
)
from kappa_rllib.algorithms.trpo import TRPO, TRPOConfig

__version__ = "0.1.0"
__all__ = [
    "KappaPIDQN", "KappaPIDQNConfig", "KappaVIDQN", "KappaVIDQNConfig",
    "KappaPITRPO", "KappaPITRPOConfig", "KappaVITRPO", "KappaVITRPOConfig",
    "TRPO", "TRPOConfig", "register_with_tune",
]


def register_with_tune() -> None:
    """Registers the algorithms with Tune under their class names (e.g. "KappaPIDQN")."""
    from ray.tune.registry import register_trainable

    for cls in (KappaPIDQN, KappaVIDQN, TRPO, KappaPITRPO, KappaVITRPO):
        register_trainable(cls.__name__, cls)


register_with_tune()
