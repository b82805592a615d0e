"""kappa-VI-TRPO: how often V_phi <- V_theta is copied, on Walker2d-v5 and Hopper-v5 (docs/results/kvi_ablation/).

On Hopper (kappa_vi_authors_hopper.py) only the copy cadence moved kappa-VI: a copy after every batch (the
authors' `vf_phi_update_interval` default) ends at 1746 +- 281 against 737 +- 39 with the paper's N_kappa = 14
copies. This file asks whether that holds on Walker2d, the other task where kappa-VI is below the paper, and
where the score moves between 14 copies and 1,953:

    walker_vi_copy_every_batch   Walker2d, kappa 0.68: a copy after every batch (naive_schedule, 1,953 copies)
    walker_vi_copy_200           Walker2d, kappa 0.68: N_kappa = 200 (C_FA 0.002); the paper's 0.2 gives 52
    hopper_vi_copy_98            Hopper, kappa 0.92: N_kappa = 98 (C_FA 8.7e-6); the paper's 0.2 gives 14
    *_copy_every_batch_more      seeds 3 and 4 of Walker2d's and Hopper's every-batch cells (n = 5)
    halfcheetah_vi_copy_every_batch, ant_vi_copy_every_batch
                                 the two tasks where kappa-VI meets the paper with N_kappa from C_FA (kappa 0.36
                                 and 0.68): does a copy every batch lift them as well?

The cells they are read against are published: Walker2d kappa-VI at 0.68, C_FA 0.2 (708 +- 162, n = 5,
docs/results/table2/) and the Hopper ablation's cells. kappa and gamma are the paper's; T = 2M env steps;
3 seeds (0, 1, 2: the published cells' first three). C_FA below the paper's range is how N_kappa is set here:
the copy cadence, not C_FA, is the question.

Cost: 19 trials, one core each; the first 9 (Walker2d and Hopper) took 40 minutes on a 2-core machine, two at
a time. Run it niced in the background and
`--resume` after a stop:

    nice -n 19 kappa-rllib tune tune_configs/ablations/kappa_vi_copy_cadence.py --storage results/tune \\
        --num-cpus 2 --checkpoint-every 50 --resume
    kappa-rllib tune tune_configs/ablations/kappa_vi_copy_cadence.py --smoke      # ~1 minute
"""

from kappa_rllib import KappaVITRPOConfig
from kappa_rllib.experiments import SMOKE_SETTINGS, Grid, algorithm_config, seeds

TOTAL = 2_000_000
NUM_SEEDS = 3
EVERY_BATCH = {"c_fa": 0.2, "naive_schedule": True}
# grid name -> (env, kappa, training settings, first seed, seeds); the order is the order the grids run in
CELLS = {
    "walker_vi_copy_every_batch": ("Walker2d-v5", 0.68, EVERY_BATCH, 0, NUM_SEEDS),
    "walker_vi_copy_200": ("Walker2d-v5", 0.68, {"c_fa": 0.002}, 0, NUM_SEEDS),
    "hopper_vi_copy_98": ("Hopper-v5", 0.92, {"c_fa": 8.7e-6}, 0, NUM_SEEDS),
    # seeds 3 and 4 of the two every-batch cells (Hopper's seeds 0-2: kappa_vi_authors_hopper.py), for n = 5
    "walker_vi_copy_every_batch_more": ("Walker2d-v5", 0.68, EVERY_BATCH, 3, 2),
    "hopper_vi_copy_every_batch_more": ("Hopper-v5", 0.92, EVERY_BATCH, 3, 2),
    # the tasks where kappa-VI is at or above the paper with N_kappa from C_FA: does a copy every batch lift them too?
    "halfcheetah_vi_copy_every_batch": ("HalfCheetah-v5", 0.36, EVERY_BATCH, 0, NUM_SEEDS),
    "ant_vi_copy_every_batch": ("Ant-v5", 0.68, EVERY_BATCH, 0, NUM_SEEDS),
}


def experiments(smoke: bool = False):
    grids = []
    for name, (env, kappa, settings, first, count) in CELLS.items():
        common = {"seed": seeds(2 if smoke else count, 0 if smoke else first), "total_env_steps": TOTAL,
                  **(SMOKE_SETTINGS["trpo"] if smoke else {})}
        if smoke:  # the smoke's few batches cannot hold 98 or 200 kappa-iterations
            settings = {**settings, "c_fa": 0.2}
        grids.append(Grid(name, algorithm_config(KappaVITRPOConfig, env, kappa=kappa, **settings, **common)))
    return grids


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
