from kappa_rllib.algorithms.kappa_trpo.kappa_trpo import (
    KappaPITRPO,
    KappaPITRPOConfig,
    KappaTRPOConfig,
    KappaVITRPO,
    KappaVITRPOConfig,
)

__all__ = ["KappaPITRPO", "KappaPITRPOConfig", "KappaTRPOConfig", "KappaVITRPO", "KappaVITRPOConfig"]
