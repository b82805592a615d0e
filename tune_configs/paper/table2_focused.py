"""The paper's Table 2 at its own budget, focused on the cells of its headline claims: TRPO against
kappa-PI-TRPO (and kappa-VI-TRPO on HalfCheetah) at the paper's kappa_best, T = 2M env steps,
C_FA = 0.2, 5 seeds, the paper's Table 4 settings (the TRPO defaults; docs/paper-settings.md).

Grids (5 seeds each, 35 trials, 70M env steps):
    walker2d_kappa_pi_trpo     Walker2d-v5,    kappa 0.68     paper: 1438 +- 188
    walker2d_trpo              Walker2d-v5,    TRPO           paper:  594 +- 99
    halfcheetah_kappa_pi_trpo  HalfCheetah-v5, kappa 0.36     paper: 1334
    halfcheetah_kappa_vi_trpo  HalfCheetah-v5, kappa 0.36     paper: 1447
    halfcheetah_trpo           HalfCheetah-v5, TRPO           paper:  -18
    hopper_kappa_pi_trpo       Hopper-v5,      kappa 0.68     paper: 1486 +- 324
    hopper_trpo                Hopper-v5,      TRPO           paper: 1142 +- 141
gymnasium's v5 tasks (the paper used v2, whose physics and rewards differ slightly).

Cost: one CPU per trial. Measured on a 2-core machine with two trials at a time, after the TRPO
family's speed work (benchmarks/throughput.py, W2): a 2M-step trial takes ~10-15 min (Walker2d,
Hopper) and ~6-9 min (HalfCheetah, whose env steps ~3x faster), so the file is ~3 hours of 2 cores,
~6 CPU-hours. Run it in parts: `--checkpoint-every 50` keeps at most 50 iterations (~51k env steps)
to redo after a stop, and `--resume` continues.

    kappa-rllib tune tune_configs/paper/table2_focused.py --storage results/tune --checkpoint-every 50 --report
    kappa-rllib tune tune_configs/paper/table2_focused.py --storage results/tune --checkpoint-every 50 --resume
    kappa-rllib tune tune_configs/paper/table2_focused.py --smoke      # ~2 minutes
"""

from kappa_rllib.experiments import paper_grids

# env -> (kappa-TRPO variants, the paper's kappa_best for them); the order is the order grids run in
CELLS = {
    "Walker2d-v5": (("pi",), 0.68),
    "HalfCheetah-v5": (("pi", "vi"), 0.36),
    "Hopper-v5": (("pi",), 0.68),
}
NUM_SEEDS = 5
C_FA = 0.2
TOTAL_ENV_STEPS = 2_000_000


def experiments(smoke: bool = False):
    grids = []
    for env, (variants, kappa) in list(CELLS.items())[: 1 if smoke else None]:
        grids += paper_grids("trpo", env, kappas=[kappa], c_fa=C_FA, num_seeds=NUM_SEEDS, variants=variants,
                             smoke=smoke, name=env.split("-")[0].lower(), total_env_steps=TOTAL_ENV_STEPS)
    return grids


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
