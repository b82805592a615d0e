from kappa_rllib.algorithms.trpo.trpo import TRPO, TRPOConfig

__all__ = ["TRPO", "TRPOConfig"]
