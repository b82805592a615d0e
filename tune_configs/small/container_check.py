"""A two-minute kappa x C_FA grid for a cluster made of containers, long enough to lose a node mid-grid.

    kappa_pi_dqn   CartPole-v1, kappa {0.68, 0.84} x C_FA {0.1, 0.2} x seed 0, T = 6,000 env steps   4 trials

Cost: 4 trials x 6,000 env steps (12 iterations of 500), about 30 s each on one CPU. Every trial reports
the Ray `node_id` it ran on. Numbers from it mean nothing (T is tiny); tests/test_images.py submits it
with `ray job submit` to a head container and a worker container of docker/Dockerfile's image, kills
the worker mid-grid, and checks that every trial still ends at T:

    ray job submit -- kappa-rllib tune /opt/kappa-rllib/tune_configs/small/container_check.py \\
        --storage /mnt/results --checkpoint-every 2
"""

from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

SETTINGS = {**SMOKE_SETTINGS["dqn"], "total_env_steps": 6_000}


def experiments(smoke: bool = False):  # `--smoke`: 2 kappa x 2 seeds at C_FA 0.2, T = 1,000
    return paper_grids("dqn", "CartPole-v1", kappas=[0.68, 0.84], c_fa=[0.1, 0.2], num_seeds=1, variants=("pi",),
                       baseline=False, smoke=smoke, **SETTINGS)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
