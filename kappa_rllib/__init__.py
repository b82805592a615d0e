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


def _register_on_every_ray_init() -> None:
    # Tune's registry lives in the Ray cluster's key-value store: a registration made before
    # `ray.init` is flushed to the first cluster only. Registering again after every
    # `ray.init` (as Tune's own registry does, through the same hook list) keeps the names
    # valid after `ray.shutdown()` and a new `ray.init()` in the same process.
    register_with_tune()
    try:
        from ray._private import worker

        if register_with_tune not in worker._post_init_hooks:
            worker._post_init_hooks.append(register_with_tune)
    except (ImportError, AttributeError):  # pragma: no cover - private API moved
        pass


_register_on_every_ray_init()
