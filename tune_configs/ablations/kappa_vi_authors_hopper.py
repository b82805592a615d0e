"""kappa-VI-TRPO against the authors' code, one difference at a time, on Hopper-v5 (docs/paper-settings.md,
"kappa-VI: the authors' code"; docs/results/kvi_ablation/).

kappa-VI sits below the paper on Hopper and Walker2d, the two tasks where episodes end by falling. Each grid
below is kappa-VI-TRPO at the paper's kappa_best for Hopper (0.92), C_FA 0.2 (N_kappa 14), T = 2M env steps,
3 seeds, with today's settings but one difference from the authors' `trpo_kvi` switched to theirs; the last
grid switches all of them at once (the paper's N_kappa kept: the paper sets it from C_FA).

    hopper_vi_copy_every_batch     naive_schedule=True: V_phi <- V_theta after every batch (their
                                   `vf_phi_update_interval` flag's default, 1; the value the paper ran is unknown)
    hopper_vi_first_copy           copy_phi_after_first_batch: their copy at iteration 0, so the first
                                   kappa-iteration does not shape with a random V_phi
    hopper_vi_time_limit_terminal  truncation_as_terminal: gym 0.14's `done` at the 1,000-step limit
    hopper_vi_authors              all of the switches below and above at once, N_kappa from C_FA
    hopper_vi_line_search          kl_accept_factor 1.5, fvp_subsample 5: their line search and Fisher products
    hopper_vi_orthogonal_init      orthogonal_init: OpenAI baselines' initialisation
    hopper_vi_one_env              one sub-env of 1,024 steps a batch (4 of 256 here)
    hopper_vi_today                today's settings again (the published cell: 737 +- 56, n = 5)

Identical in both (the list on docs/paper-settings.md): the kappa-return and its bootstrap at a batch end, the
per-batch advantage standardisation, the value fit (Adam 1e-3, 5 epochs of 128), the order policy step ->
value fit -> copy, the networks (64x64 tanh, separate), no observation normalisation, gamma, max_kl, CG.

Cost: 24 trials, one core each: 4.17 trial-hours on this project's 2-core machine, two at a time beside other
work (289-1,245 s a trial, by `time_total_s`). Run it niced in the background, `--resume` after a stop; publish
each grid as it ends (`docs/results/slim.py`, then `report`):

    nice -n 19 kappa-rllib tune tune_configs/ablations/kappa_vi_authors_hopper.py --storage results/tune \\
        --num-cpus 2 --checkpoint-every 50 --resume
    kappa-rllib tune tune_configs/ablations/kappa_vi_authors_hopper.py --smoke      # ~2 minutes
"""

from kappa_rllib import KappaVITRPOConfig
from kappa_rllib.experiments import SMOKE_SETTINGS, Grid, algorithm_config, seeds

ENV = "Hopper-v5"
KAPPA, C_FA = 0.92, 0.2
TOTAL = 2_000_000
NUM_SEEDS = 3

LINE_SEARCH = {"kl_accept_factor": 1.5, "fvp_subsample": 5}
AUTHORS = {"truncation_as_terminal": True, "copy_phi_after_first_batch": True, "orthogonal_init": True,
           **LINE_SEARCH}
# grid name -> (training settings, sub-envs per EnvRunner); the order is the order the grids run in
VARIANTS = {
    "copy_every_batch": ({"naive_schedule": True}, None),
    "first_copy": ({"copy_phi_after_first_batch": True}, None),
    "time_limit_terminal": ({"truncation_as_terminal": True}, None),
    "authors": (AUTHORS, 1),
    "line_search": (LINE_SEARCH, None),
    "orthogonal_init": ({"orthogonal_init": True}, None),
    "one_env": ({}, 1),
    "today": ({}, None),
}


def experiments(smoke: bool = False):
    grids = []
    for name, (settings, sub_envs) in VARIANTS.items():
        common = {"seed": seeds(2 if smoke else NUM_SEEDS), "total_env_steps": TOTAL,
                  **(SMOKE_SETTINGS["trpo"] if smoke else {})}
        config = algorithm_config(KappaVITRPOConfig, ENV, kappa=KAPPA, c_fa=C_FA, **settings, **common)
        if sub_envs is not None:
            config.env_runners(num_envs_per_env_runner=sub_envs)
        grids.append(Grid(f"hopper_vi_{name}", config))
    return grids


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
