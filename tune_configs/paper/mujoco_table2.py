"""The paper's Table 2 and Fig. 2 (Sec. 5.2): kappa-PI-TRPO and kappa-VI-TRPO on six MuJoCo tasks,
C_FA = 0.2, against TRPO (kappa = 1), the naive N_kappa = T schedule and GAE.

Settings: the paper's Table 4 (the TRPO defaults here: batches of 1,024 env steps, max KL 0.01,
CG 10 iterations, value net Adam 1e-3; docs/paper-settings.md); T = 2M env steps (1,953 batches);
gymnasium's v5 tasks (the paper used v2, whose physics and rewards differ slightly).
One result row per 10 batches (`batches_per_iteration`; the same updates as one a row): the cluster's one
Tune driver spends 3.3x less CPU per trial (docs/experiments.md).

Grids (10 seeds each):
    kappa_pi_trpo        env x kappa {0, 0.36, 0.68, 0.84, 0.92, 0.98, 0.99} x seed   420 trials
    kappa_vi_trpo        env x kappa {...} x seed                                    420 trials
    trpo                 env x seed (kappa = 1)                                        60 trials
    naive_kappa_pi_trpo  env x kappa {0, 0.36, 0.68, 0.98} x seed (N_kappa = T)       240 trials
    gae                  env x lambda {0, 0.36, 0.68, 0.84, 0.98} x seed              300 trials
Cost: 1,440 trials x 2M = 2.9e9 env steps; at ~800 env steps/s per CPU (Hopper, benchmarks/
throughput.py) ~1,000 CPU-hours: a cluster job (`--address`, cluster/README.md), one CPU per trial.
Paper (Table 2): e.g. Walker kappa-PI 1438 +- 188 at kappa 0.68, TRPO 594 +- 99, GAE 1601 +- 190 at
lambda 0; every cell is in kappa_rllib/data/paper_tables.csv and shown beside the reproduced ones.

    kappa-rllib tune tune_configs/paper/mujoco_table2.py --address auto
    kappa-rllib tune tune_configs/paper/mujoco_table2.py --smoke     # one task, 2 kappa x 2 seeds
"""

from kappa_rllib.defaults import CLUSTER_TRPO_BATCHES_PER_ITERATION  # 10 batches a result row
from kappa_rllib.experiments import paper_grids

TASKS = ["Walker2d-v5", "Ant-v5", "HalfCheetah-v5", "HumanoidStandup-v5", "Swimmer-v5", "Hopper-v5"]
KAPPAS = [0.0, 0.36, 0.68, 0.84, 0.92, 0.98, 0.99]
NAIVE_KAPPAS = [0.0, 0.36, 0.68, 0.98]  # the paper's naive kappa_best values across tasks
GAE_LAMBDAS = [0.0, 0.36, 0.68, 0.84, 0.98]  # the paper's lambda_best values come from this range
NUM_SEEDS = 10
C_FA = 0.2


def experiments(smoke: bool = False):
    return paper_grids("trpo", TASKS, kappas=KAPPAS, c_fa=C_FA, num_seeds=NUM_SEEDS, naive_kappas=NAIVE_KAPPAS,
                       gae_lambdas=GAE_LAMBDAS, smoke=smoke,
                       batches_per_iteration=CLUSTER_TRPO_BATCHES_PER_ITERATION)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
