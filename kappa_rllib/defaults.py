"""The kappa settings' defaults per algorithm family: the paper's (docs/paper-settings.md).

The one source of these numbers: the config classes read them, and the command line shows them
in `--help` without importing Ray. Env presets may override them (the CartPole preset trains
50,000 env steps, not the paper's Atari-scale T).
"""

from __future__ import annotations

# kappa-DQN (Atari, Table 3): C_FA after the paper's ablation on Breakout (Appendix A.1);
# T = 10M env steps, Table 3's training length (Sec. 5.1's "T ~ 10^6" is discussed in the docs).
DQN = {"kappa": 0.84, "c_fa": 0.05, "total_env_steps": 10_000_000}
# kappa-TRPO (MuJoCo, Table 4): C_FA after the ablation on Walker2d (Appendix B.1); 2000 iterations
# of 1024 env steps.
TRPO = {"kappa": 0.84, "c_fa": 0.2, "total_env_steps": 2_000_000}
# kappa-PPO (no paper setting: the paper names PPO among the solvers of the surrogate MDP but runs
# TRPO): the TRPO family's kappa, C_FA and T; PPO's own settings are RLlib's defaults.
PPO = {"kappa": 0.84, "c_fa": 0.2, "total_env_steps": 2_000_000}
# kappa-APPO (no paper setting either): the same kappa, C_FA and T, counting APPO's train batches.
APPO = {"kappa": 0.84, "c_fa": 0.2, "total_env_steps": 2_000_000}

# TRPO-family batches per result row in the cluster grid files (tune_configs/paper/mujoco_*.py): the
# Tune driver spends 3.3x less CPU per trial-second than at one batch a row (docs/experiments.md, "One
# driver feeds the trials"; benchmarks/driver_load.py). The updates are the same at any value.
CLUSTER_TRPO_BATCHES_PER_ITERATION = 10
