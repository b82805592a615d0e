"""A one-minute kappa x C_FA grid to check a Ray cluster end to end (cluster/README.md).

    kappa_pi_dqn   CartPole-v1, kappa {0.68, 0.84} x C_FA {0.1, 0.2} x seed 0, T = 1,000 env steps   4 trials

Cost: 4 trials x 1,000 env steps, about 30 s on 2 cores (one CPU per trial, two at a time).
Every trial reports the Ray `node_id` it ran on, so its results show whether trials spread over the nodes.
Numbers from it mean nothing (T is tiny); tests/test_cluster.py submits it to a real two-node cluster.

    ray job submit -- kappa-rllib tune /opt/kappa-rllib/tune_configs/small/cluster_check.py --storage /mnt/results
    kappa-rllib tune tune_configs/small/cluster_check.py --address ray://127.0.0.1:10001 --storage /mnt/results
"""

from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids


def experiments(smoke: bool = False):  # smoke-sized budgets already; `--smoke`: 2 kappa x 2 seeds at C_FA 0.2
    return paper_grids("dqn", "CartPole-v1", kappas=[0.68, 0.84], c_fa=[0.1, 0.2], num_seeds=1, variants=("pi",),
                       baseline=False, smoke=smoke, **SMOKE_SETTINGS["dqn"])


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
