"""The Tune names stay registered across Ray sessions in one process."""

import ray
from ray.tune.registry import TRAINABLE_CLASS, _global_registry

import kappa_rllib.algorithms  # noqa: F401  (importing the algorithms registers the names)

NAMES = ("KappaPIDQN", "KappaVIDQN", "TRPO", "KappaPITRPO", "KappaVITRPO")


def test_names_survive_a_ray_restart():
    if ray.is_initialized():
        ray.shutdown()
    for _ in range(2):
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
        try:
            for name in NAMES:
                assert _global_registry.contains(TRAINABLE_CLASS, name), name
        finally:
            ray.shutdown()
