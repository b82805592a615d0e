"""kappa-rllib: multi-step greedy RL (Tomar, Efroni & Ghavamzadeh, ICML 2020) on Ray RLlib.

`import kappa_rllib` (and its maths modules: `schedule`, `dp`, `variant`, `shaping`, `returns`)
loads neither Ray nor torch. The algorithms load on first use, e.g.
`from kappa_rllib import KappaPIDQNConfig`; that also registers their names with Tune (again
after every `ray.init`), as does an explicit `kappa_rllib.register_with_tune()`.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "KappaPIDQN": "kappa_rllib.algorithms.kappa_dqn",
    "KappaPIDQNConfig": "kappa_rllib.algorithms.kappa_dqn",
    "KappaVIDQN": "kappa_rllib.algorithms.kappa_dqn",
    "KappaVIDQNConfig": "kappa_rllib.algorithms.kappa_dqn",
    "KappaPITRPO": "kappa_rllib.algorithms.kappa_trpo",
    "KappaPITRPOConfig": "kappa_rllib.algorithms.kappa_trpo",
    "KappaVITRPO": "kappa_rllib.algorithms.kappa_trpo",
    "KappaVITRPOConfig": "kappa_rllib.algorithms.kappa_trpo",
    "KappaPIPPO": "kappa_rllib.algorithms.kappa_ppo",
    "KappaPIPPOConfig": "kappa_rllib.algorithms.kappa_ppo",
    "KappaVIPPO": "kappa_rllib.algorithms.kappa_ppo",
    "KappaVIPPOConfig": "kappa_rllib.algorithms.kappa_ppo",
    "KappaPIAPPO": "kappa_rllib.algorithms.kappa_appo",
    "KappaPIAPPOConfig": "kappa_rllib.algorithms.kappa_appo",
    "KappaVIAPPO": "kappa_rllib.algorithms.kappa_appo",
    "KappaVIAPPOConfig": "kappa_rllib.algorithms.kappa_appo",
    "TRPO": "kappa_rllib.algorithms.trpo",
    "TRPOConfig": "kappa_rllib.algorithms.trpo",
}
__all__ = [*_LAZY, "register_with_tune"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kappa_rllib' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


def register_with_tune() -> None:
    """Registers the algorithms with Tune under their class names (e.g. "KappaPIDQN").

    Importing any algorithm (e.g. `from kappa_rllib import KappaPIDQNConfig`) registers them too, again
    after every `ray.init`; call this where a Tune trainable is named before anything is imported.

    ```python
    import kappa_rllib
    from ray import tune
    kappa_rllib.register_with_tune()
    config = (
        kappa_rllib.KappaPITRPOConfig()
        .environment("Pendulum-v1")
        .training(total_env_steps=20_000)
    )
    tune.Tuner("KappaPITRPO", param_space=config).fit()
    ```
    """
    from kappa_rllib.algorithms import register_with_tune as register

    register()
