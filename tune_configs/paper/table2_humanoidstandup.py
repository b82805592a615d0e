"""The paper's Table 2, its HumanoidStandup row: the seven cells the other Table 2 files leave out, at the
paper's settings (its Table 4: C_FA 0.2, T = 2M env steps; HumanoidStandup-v5 here, v2 in the paper), 5 seeds
a cell. `report` puts them in the same table as `table2_focused.py`'s and `table2_columns.py`'s cells when
their trials share a results folder (docs/results/table2/trials).

Grids, in the order they run (5 seeds each, 35 trials, 70M env steps), each with the paper's cell:
    humanoidstandup_kappa_pi_trpo       kappa-PI kappa 0.99 (kappa_best)      paper: 72604 +- 1219
    humanoidstandup_trpo                TRPO (kappa = 1)                      paper: 68143 +- 1031
    humanoidstandup_kappa_vi_trpo       kappa-VI kappa 0.99 (kappa_best)      paper: 72821 +- 908
    humanoidstandup_gae                 GAE lambda 0.98 (lambda_best)         paper: 71932 +- 2122
    humanoidstandup_naive_kappa_pi_trpo kappa-PI, N_kappa = T, kappa 0.98     paper: 71331 +- 1149
    humanoidstandup_kappa0_kappa_pi_trpo  kappa-PI kappa 0                    paper: 52936 +- 1529
    humanoidstandup_kappa0_kappa_vi_trpo  kappa-VI kappa 0                    paper: 51148 +- 1377

The first two answer the paper's claim for this task (kappa_best above TRPO: 72604 against 68143) and run
first. At kappa = 0.99 and C_FA 0.2, N_kappa is 3 (Eq. 11): three kappa-iterations of ~667k env steps, each
solving the surrogate MDP at a discount of 0.99 * 0.99.

Cost: one CPU per trial, two at a time on a 2-core machine. HumanoidStandup's env steps (a 348-dimensional
observation, 17 actuators, episodes always 1,000 steps) cost about twice Hopper's; a trial took 17 min (TRPO) to
31-42 min (the kappa cells) of one core here (2026-12-05), the file ~18 trial-hours: run it across sessions with
`--resume`, or a few seeds at a time with `--seeds` (3 a cell to start: `--seeds 0-2`).

    kappa-rllib tune tune_configs/paper/table2_humanoidstandup.py --storage S --num-cpus 2 --checkpoint-every 50
    kappa-rllib tune tune_configs/paper/table2_humanoidstandup.py --storage S --num-cpus 2 --checkpoint-every 50 \
        --resume
    python docs/results/slim.py S/table2_humanoidstandup docs/results/table2
    kappa-rllib tune tune_configs/paper/table2_humanoidstandup.py --smoke      # ~3 minutes
"""

from kappa_rllib.experiments import paper_grids

ENV = "HumanoidStandup-v5"
NAME = "humanoidstandup"
KAPPA_BEST = 0.99  # Table 2: kappa_best of both kappa-PI and kappa-VI
NAIVE_KAPPA_BEST = 0.98
GAE_LAMBDA_BEST = 0.98
NUM_SEEDS = 5
C_FA = 0.2
TOTAL_ENV_STEPS = 2_000_000
SMOKE_KAPPA0_C_FA = 0.6  # --smoke only: N_kappa = 51 at kappa 0, within the smoke's 60 batches


def experiments(smoke: bool = False):
    common = dict(c_fa=C_FA, num_seeds=NUM_SEEDS, smoke=smoke, total_env_steps=TOTAL_ENV_STEPS, name=NAME)
    [kappa_pi] = paper_grids("trpo", ENV, kappas=[KAPPA_BEST], variants=("pi",), baseline=False, **common)
    [trpo] = paper_grids("trpo", ENV, kappas=[], variants=(), baseline=True, **common)
    [kappa_vi] = paper_grids("trpo", ENV, kappas=[KAPPA_BEST], variants=("vi",), baseline=False, **common)
    [gae] = paper_grids("trpo", ENV, kappas=[], variants=(), baseline=False, gae_lambdas=[GAE_LAMBDA_BEST],
                        **common)
    [naive] = paper_grids("trpo", ENV, kappas=[], variants=(), baseline=False, naive_kappas=[NAIVE_KAPPA_BEST],
                          **common)
    kappa0 = paper_grids("trpo", ENV, kappas=[0.0], variants=("pi", "vi"), baseline=False,
                         **{**common, "name": NAME + "_kappa0"})
    if smoke:  # kappa = 0 has the most kappa-iterations (161 at C_FA 0.2): more than the smoke's 60 batches hold
        for grid in kappa0:
            grid.config.training(c_fa=SMOKE_KAPPA0_C_FA)
    return [kappa_pi, trpo, kappa_vi, gae, naive, *kappa0]


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
