"""The paper's Table 2, its other columns at its own budget: GAE at lambda_best (the baseline practitioners
use, and the paper's strongest), the one-step greedy kappa = 0, kappa-VI where `table2_focused.py` and
`table2_claim2.py` have none, Swimmer, and one check of the TRPO family's sampling layout. Same settings as
those two files (the paper's Table 4, C_FA 0.2, T = 2M env steps, gymnasium v5), 5 seeds a cell. With their
70 trials (docs/results/table2/) these answer: is kappa_best better than GAE at lambda_best, and than kappa = 0?

Grids, in the order they run (5 seeds each, 70 trials, 140M env steps), each with the paper's cell:
    walker2d_gae                  Walker2d-v5,    GAE lambda 0.0           paper: 1601 +- 190
    hopper_gae                    Hopper-v5,      GAE lambda 0.84          paper: 1600 +- 134
    halfcheetah_gae               HalfCheetah-v5, GAE lambda 0.36          paper: 1322 +- 213
    ant_gae                       Ant-v5,         GAE lambda 0.0           paper: 1094 +- 139
    walker2d_kappa0_kappa_pi_trpo     Walker2d-v5,    kappa-PI kappa 0     paper: 1371 +- 192
    hopper_kappa0_kappa_pi_trpo       Hopper-v5,      kappa-PI kappa 0     paper: 1012 +- 263
    halfcheetah_kappa0_kappa_pi_trpo  HalfCheetah-v5, kappa-PI kappa 0     paper:  907 +- 176
    ant_kappa0_kappa_pi_trpo          Ant-v5,         kappa-PI kappa 0     paper: 1006 +- 106
    walker2d_kappa_vi_trpo        Walker2d-v5,    kappa-VI kappa 0.68      paper:  954 +- 88
    hopper_kappa_vi_trpo          Hopper-v5,      kappa-VI kappa 0.92      paper: 1069 +- 76
    swimmer_trpo                  Swimmer-v5,     TRPO (kappa = 1)         paper:  107 +- 12
    swimmer_kappa0_kappa_pi_trpo  Swimmer-v5,     kappa-PI kappa 0         paper:   42 +- 3
    swimmer_kappa0_kappa_vi_trpo  Swimmer-v5,     kappa-VI kappa 0         paper:   46 +- 1
    walker2d_one_env_kappa_pi_trpo  Walker2d-v5,  kappa-PI kappa 0.68, one sub-env per EnvRunner
                                                  (the published cell: 1712 +- 541 with 4; paper 1438 +- 188)

Swimmer's kappa_best is 1 for both variants (the paper's 107 +- 12 and 114 +- 15 are TRPO's runs), and its
GAE at lambda_best = 1 (103 +- 13) is TRPO itself here: `TRPOConfig`'s lambda_ = 1 is the same computation
as TRPO (GAE(gamma, 1) advantages are the discounted returns minus V; tests/test_trpo.py,
test_gae_at_lambda_one_is_trpo), so the swimmer_trpo cell stands for both; Swimmer's naive column is the
same cell again (kappa_best = 1: one kappa-iteration).

The last cell checks a setting in which the published cells differ from the authors' runs: the TRPO family
samples each 1,024-step batch as 4 sub-envs of 256 steps (`num_envs_per_env_runner = 4`, a speed default),
the authors' `trpo_kpi/run_mujoco.py` steps one env, 1,024 contiguous steps a batch. The cell is the
published Walker2d kappa-PI cell with one sub-env; `report` keeps it apart (its variant is
"kappa-pi (num_envs_per_env_runner=1)").

Left for later: kappa-VI at kappa = 0 on Walker2d, Hopper, HalfCheetah and Ant (the paper: 830, 531, 1072,
1879), and the three HumanoidStandup cells (kappa_best 0.99, kappa = 0, TRPO; its env steps run at about
half Hopper's rate): seven cells, ~35 trials.

Cost: one CPU per trial, two at a time on a 2-core machine. Measured (each trial's `time_total_s`, summed):
walker2d_gae 1.08 trial-hours (475-1,121 s a trial), hopper_gae 1.13 (437-936 s), halfcheetah_gae 0.41
(254-344 s), halfcheetah_kappa0_kappa_pi_trpo 0.43 (299-328 s), hopper_kappa0_kappa_pi_trpo 2.07 (1,024-1,845 s,
beside benchmarks and tests), walker2d_kappa0_kappa_pi_trpo 2.14 (655-2,877 s, some of it paused for benchmarks:
an upper bound), swimmer_trpo 1.30 (485-1,304 s), swimmer_kappa0_kappa_pi_trpo 0.68 (462-508 s),
swimmer_kappa0_kappa_vi_trpo 0.61 (406-461 s; the two Swimmer kappa = 0 cells run together, 41 minutes),
ant_gae 1.04 (623-981 s) with hopper_kappa_vi_trpo 0.52 (263-732 s), run together in 51 minutes,
ant_kappa0_kappa_pi_trpo 1.57 (569-1,908 s, beside a full test run) with walker2d_kappa_vi_trpo 0.52 (289-468 s),
walker2d_one_env_kappa_pi_trpo 0.53 (352-418 s): 12-65 minutes a cell of 2 cores; the file's 70 trials
~14 trial-hours (Ant's env steps cost about twice Hopper's). Run it cell by cell, each inside a session:
`--grids` picks cells (`--grids a,b` runs two together, so no core idles on a cell's fifth trial),
`--checkpoint-every 50` keeps at most 50 iterations (~51k env steps) to redo after a stop, and `--resume`
continues.

    kappa-rllib tune tune_configs/paper/table2_columns.py --storage S --num-cpus 2 --checkpoint-every 50 \
        --grids walker2d_gae
    kappa-rllib tune tune_configs/paper/table2_columns.py --storage S --num-cpus 2 --checkpoint-every 50 \
        --grids walker2d_gae --resume
    kappa-rllib tune tune_configs/paper/table2_columns.py --smoke      # ~3 minutes
"""

from kappa_rllib.experiments import paper_grids

TASKS = ("Walker2d-v5", "Hopper-v5", "HalfCheetah-v5", "Ant-v5")
GAE_LAMBDA_BEST = {"Walker2d-v5": 0.0, "Hopper-v5": 0.84, "HalfCheetah-v5": 0.36, "Ant-v5": 0.0}  # Table 2
KAPPA_VI_BEST = {"Walker2d-v5": 0.68, "Hopper-v5": 0.92}  # Table 2's kappa-VI kappa_best where no cell exists
SWIMMER = "Swimmer-v5"
ONE_ENV = ("Walker2d-v5", 0.68)  # the published kappa-PI cell, sampled as the authors' code samples
NUM_SEEDS = 5
C_FA = 0.2
TOTAL_ENV_STEPS = 2_000_000
SMOKE_KAPPA0_C_FA = 0.6  # --smoke only: N_kappa = 51 at kappa 0, within the smoke's 60 batches


def _name(env: str) -> str:
    return env.split("-")[0].lower()


def experiments(smoke: bool = False):
    common = dict(c_fa=C_FA, num_seeds=NUM_SEEDS, smoke=smoke, total_env_steps=TOTAL_ENV_STEPS, baseline=False)
    grids = []
    for env in TASKS:  # GAE at the paper's lambda_best
        grids += paper_grids("trpo", env, kappas=[], variants=(), gae_lambdas=[GAE_LAMBDA_BEST[env]],
                             name=_name(env), **common)
    kappa0 = []
    for env in TASKS:  # the one-step greedy kappa = 0
        kappa0 += paper_grids("trpo", env, kappas=[0.0], variants=("pi",), name=_name(env) + "_kappa0", **common)
    grids += kappa0
    for env, kappa in KAPPA_VI_BEST.items():
        grids += paper_grids("trpo", env, kappas=[kappa], variants=("vi",), name=_name(env), **common)
    grids += paper_grids("trpo", SWIMMER, kappas=[], variants=(), name="swimmer", **{**common, "baseline": True})
    swimmer_kappa0 = paper_grids("trpo", SWIMMER, kappas=[0.0], variants=("pi", "vi"), name="swimmer_kappa0", **common)
    grids += swimmer_kappa0
    if smoke:  # kappa = 0 has the most kappa-iterations (161 at C_FA 0.2): more than the smoke's 60 batches hold
        for grid in kappa0 + swimmer_kappa0:
            grid.config.training(c_fa=SMOKE_KAPPA0_C_FA)
    env, kappa = ONE_ENV
    [one_env] = paper_grids("trpo", env, kappas=[kappa], variants=("pi",), name=_name(env) + "_one_env", **common)
    one_env.config.env_runners(num_envs_per_env_runner=1)
    grids.append(one_env)
    return grids


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
