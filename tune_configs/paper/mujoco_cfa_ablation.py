"""The paper's C_FA ablation on Walker (Sec. 5.2, Appendix B.1): kappa-PI-TRPO and kappa-VI-TRPO
for C_FA in {0.001, 0.05, 0.2}; the paper found 0.2 best and used it everywhere else.

Grids (10 seeds, T = 2M env steps, Table 4 settings):
    kappa_pi_trpo  kappa {0, 0.36, 0.68, 0.84, 0.92, 0.98} x C_FA {0.001, 0.05, 0.2} x seed   180 trials
    kappa_vi_trpo  the same                                                                   180 trials
    trpo           seed (kappa = 1, the reference line)                                        10 trials
Cost: 370 trials x 2M = 7.4e8 env steps (~260 CPU-hours). At kappa 0 and C_FA 0.001 N_kappa = 688
iterations of ~2.8 batches. `kappa-rllib report` draws the kappa x C_FA heat-maps from this folder.

    kappa-rllib tune tune_configs/paper/mujoco_cfa_ablation.py --address auto
"""

from kappa_rllib.defaults import CLUSTER_TRPO_BATCHES_PER_ITERATION  # 10 batches a result row
from kappa_rllib.experiments import paper_grids

KAPPAS = [0.0, 0.36, 0.68, 0.84, 0.92, 0.98]
C_FAS = [0.001, 0.05, 0.2]
NUM_SEEDS = 10


def experiments(smoke: bool = False):
    return paper_grids("trpo", "Walker2d-v5", kappas=KAPPAS, c_fa=C_FAS, num_seeds=NUM_SEEDS, smoke=smoke,
                       batches_per_iteration=CLUSTER_TRPO_BATCHES_PER_ITERATION)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
