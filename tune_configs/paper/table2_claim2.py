"""The paper's second claim (Sec. 5.2) and its largest effect, at its own budget: N_kappa from C_FA
against the naive N_kappa = T schedule, and Ant. Same settings as `table2_focused.py` (the paper's
Table 4, C_FA 0.2, T = 2M env steps, gymnasium v5), 5 seeds a cell. With `table2_focused.py`'s 35
trials (docs/results/table2/) these give the C_FA and the naive column side by side on four tasks.

Grids (5 seeds each, 35 trials, 70M env steps):
    walker2d_naive_kappa_pi_trpo     Walker2d-v5,    naive, kappa 0.0    paper: 1082 +- 110
    halfcheetah_naive_kappa_pi_trpo  HalfCheetah-v5, naive, kappa 0.36   paper: 1195 +- 218
    hopper_naive_kappa_pi_trpo       Hopper-v5,      naive, kappa 0.98   paper: 1434 +- 129
    ant_trpo                         Ant-v5,         TRPO                paper:  -19 +- 1
    ant_kappa_pi_trpo                Ant-v5,         kappa 0.68          paper: 1377 +- 183
    ant_kappa_vi_trpo                Ant-v5,         kappa 0.68          paper: 2998 +- 264
    ant_naive_kappa_pi_trpo          Ant-v5,         naive, kappa 0.68   paper: 1090 +- 99
The naive kappa of each task is the paper's Table 2 entry for "N_kappa = T" (each task's best kappa
under that schedule), not the C_FA cell's kappa_best.

Ant-v5 keeps gymnasium's default observation (105 values: the contact forces included). The paper's
Ant-v2 had 111, whose contact forces are zeros under MuJoCo 2.0 and later (docs/results/table2/).

Cost: one CPU per trial, two trials at a time on a 2-core machine. Measured (each trial's
`time_total_s`, summed): the 15 naive trials 6.4 trial-hours (HalfCheetah 2.74, Hopper 1.85, Walker2d
1.82; 1,009-2,838 s a trial, the slow ones beside a test suite); Ant's TRPO and kappa-VI cells 4.3
(1,171-2,232 s a trial: ~1,450 env steps/s two at a time); Ant's kappa-PI and naive cells 3.36 (kappa-PI
1.82, 1,112-1,590 s a trial; naive 1.53, 1,013-1,221 s). The whole file: 35 trials, 14.1 trial-hours, ~7 hours
of 2 cores, run in parts over several sessions. Run it in parts: `--grids` picks cells, `--checkpoint-every 50` keeps at most 50 iterations
(~51k env steps) to redo after a stop, and `--resume` continues.

    kappa-rllib tune tune_configs/paper/table2_claim2.py --storage S --num-cpus 2 --checkpoint-every 50
    kappa-rllib tune tune_configs/paper/table2_claim2.py --storage S --num-cpus 2 --checkpoint-every 50 --resume
    kappa-rllib tune tune_configs/paper/table2_claim2.py --smoke      # ~2 minutes
"""

from kappa_rllib.experiments import paper_grids

# The naive N_kappa = T cells beside table2_focused.py's C_FA cells: env -> the paper's naive kappa
NAIVE = {"Walker2d-v5": 0.0, "HalfCheetah-v5": 0.36, "Hopper-v5": 0.98}
ANT = "Ant-v5"
ANT_KAPPA = 0.68  # the paper's kappa_best on Ant, for kappa-PI, kappa-VI and the naive schedule alike
NUM_SEEDS = 5
C_FA = 0.2
TOTAL_ENV_STEPS = 2_000_000


def experiments(smoke: bool = False):
    common = dict(c_fa=C_FA, num_seeds=NUM_SEEDS, smoke=smoke, total_env_steps=TOTAL_ENV_STEPS)
    grids = []
    for env, kappa in NAIVE.items():
        grids += paper_grids("trpo", env, kappas=[], variants=(), baseline=False, naive_kappas=[kappa],
                             name=env.split("-")[0].lower(), **common)
    # Ant: the baseline first (its grid is named ant_trpo), then both variants and the naive schedule
    grids += paper_grids("trpo", ANT, kappas=[ANT_KAPPA], naive_kappas=[ANT_KAPPA], name="ant", **common)
    order = ["ant_trpo", "ant_kappa_pi_trpo", "ant_kappa_vi_trpo", "ant_naive_kappa_pi_trpo"]
    return grids[:3] + sorted(grids[3:], key=lambda g: order.index(g.name))


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
