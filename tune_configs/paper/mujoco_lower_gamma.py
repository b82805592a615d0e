"""The paper's lower-discount study for TRPO (Sec. 5.3, Fig. 3): TRPO with gamma below 0.99 on
Walker and Ant (the paper reports gamma 0.68 helping on Ant only).

The paper does not list Fig. 3's other gamma values; these are the kappa grid's, so each one has
the kappa-TRPO run of the same value to compare with (mujoco_table2.py).

Grids (10 seeds, T = 2M, Table 4 settings):
    trpo          task x seed at gamma 0.99 (the reference)              20 trials
    trpo_gamma    task x gamma {0.68, 0.84, 0.92, 0.98} x seed            80 trials
Cost: 100 trials x 2M = 2e8 env steps (~70 CPU-hours). `kappa-rllib report` writes lower_gamma.md.

    kappa-rllib tune tune_configs/paper/mujoco_lower_gamma.py --address auto
"""

from kappa_rllib.defaults import CLUSTER_TRPO_BATCHES_PER_ITERATION  # 10 batches a result row
from kappa_rllib.experiments import paper_grids

TASKS = ["Walker2d-v5", "Ant-v5"]
GAMMAS = [0.68, 0.84, 0.92, 0.98]
NUM_SEEDS = 10


def experiments(smoke: bool = False):
    return paper_grids("trpo", TASKS, kappas=[], c_fa=0.2, num_seeds=NUM_SEEDS, variants=(), gammas=GAMMAS,
                       smoke=smoke, batches_per_iteration=CLUSTER_TRPO_BATCHES_PER_ITERATION)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
