"""The RLlib algorithms. Importing this package registers them with Tune, again after every
`ray.init` in this process."""

from __future__ import annotations


def by_name() -> dict:
    """{class name: Algorithm class} of every algorithm of this package (the names Tune knows them by)."""
    from kappa_rllib.algorithms.kappa_appo.kappa_appo import KappaPIAPPO, KappaVIAPPO
    from kappa_rllib.algorithms.kappa_dqn.kappa_dqn import KappaPIDQN, KappaVIDQN
    from kappa_rllib.algorithms.kappa_ppo.kappa_ppo import KappaPIPPO, KappaVIPPO
    from kappa_rllib.algorithms.kappa_trpo.kappa_trpo import KappaPITRPO, KappaVITRPO
    from kappa_rllib.algorithms.trpo.trpo import TRPO

    return {cls.__name__: cls for cls in (KappaPIDQN, KappaVIDQN, TRPO, KappaPITRPO, KappaVITRPO, KappaPIPPO,
                                          KappaVIPPO, KappaPIAPPO, KappaVIAPPO)}


def register_with_tune() -> None:
    """Registers the algorithms with Tune under their class names (e.g. "KappaPIDQN")."""
    from ray.tune.registry import register_trainable

    for name, cls in by_name().items():
        register_trainable(name, cls)


def _register_on_every_ray_init() -> None:
    # Tune's registry lives in the Ray cluster's key-value store: a registration made before
    # `ray.init` is flushed to the first cluster only. Registering again after every
    # `ray.init` (as Tune's own registry does, through the same hook list) keeps the names
    # valid after `ray.shutdown()` and a new `ray.init()` in the same process.
    try:
        from ray._private import worker

        if register_with_tune not in worker._post_init_hooks:
            worker._post_init_hooks.append(register_with_tune)
    except (ImportError, AttributeError):  # pragma: no cover - private API moved
        pass
    import ray

    if ray.is_initialized():
        register_with_tune()


_register_on_every_ray_init()
