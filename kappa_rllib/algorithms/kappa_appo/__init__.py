from kappa_rllib.algorithms.kappa_appo.kappa_appo import (
    KappaAPPO,
    KappaAPPOConfig,
    KappaPIAPPO,
    KappaPIAPPOConfig,
    KappaVIAPPO,
    KappaVIAPPOConfig,
)

__all__ = ["KappaAPPO", "KappaAPPOConfig", "KappaPIAPPO", "KappaPIAPPOConfig", "KappaVIAPPO", "KappaVIAPPOConfig"]
