"""kappa-PI-TRPO's V_phi schedule on Hopper-v5: the authors' `every_batch` against Algorithm 7's
literal `iteration_end` (docs/paper-settings.md, "V_phi in kappa-PI-TRPO"), beside TRPO.

Grids (kappa 0.84, C_FA 0.2: N_kappa 27; T = 300,000 env steps; one sub-env per runner, as in the
measured runs of docs/paper-settings.md):
    kappa_pi_trpo  phi_fit {every_batch, iteration_end} x seeds {0, 1, 2}   6 trials
    trpo           seeds {0, 1, 2} (kappa = 1)                              3 trials
Cost: 9 trials x 300k env steps, ~6 min per trial per core (~30 min on 2 cores).
Measured (docs/paper-settings.md): every_batch 623 +- 264, iteration_end 341 +- 26, TRPO 769 +- 39.
In `kappa-rllib report`'s table the iteration_end runs are the row "kappa-pi (phi_fit=iteration_end)".

    kappa-rllib tune tune_configs/ablations/phi_fit_hopper.py --report
    kappa-rllib tune tune_configs/ablations/phi_fit_hopper.py --smoke
"""

from ray import tune

from kappa_rllib import KappaPITRPOConfig, TRPOConfig
from kappa_rllib.experiments import SMOKE_SETTINGS, Grid, algorithm_config, seeds

ENV = "Hopper-v5"
TOTAL = 300_000
NUM_SEEDS = 3


def experiments(smoke: bool = False):
    common = {"seed": seeds(2 if smoke else NUM_SEEDS), "total_env_steps": TOTAL,
              **(SMOKE_SETTINGS["trpo"] if smoke else {})}
    grids = [
        Grid("kappa_pi_trpo", algorithm_config(KappaPITRPOConfig, ENV, kappa=0.84, c_fa=0.2,
                                               phi_fit=tune.grid_search(["every_batch", "iteration_end"]), **common)),
        Grid("trpo", algorithm_config(TRPOConfig, ENV, **common)),
    ]
    for grid in grids:
        grid.config.env_runners(num_envs_per_env_runner=1)
    return grids


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
