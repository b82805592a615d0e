from kappa_rllib.algorithms.kappa_ppo.kappa_ppo import (
    KappaPIPPO,
    KappaPIPPOConfig,
    KappaPPO,
    KappaPPOConfig,
    KappaVIPPO,
    KappaVIPPOConfig,
)

__all__ = ["KappaPIPPO", "KappaPIPPOConfig", "KappaPPO", "KappaPPOConfig", "KappaVIPPO", "KappaVIPPOConfig"]
