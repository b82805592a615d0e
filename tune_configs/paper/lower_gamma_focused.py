"""The paper's fourth claim at its own budget: lowering gamma is not what makes kappa work (Sec. 5.3, Fig. 3),
and Table 2's kappa-VI column at kappa = 0. The cells of the cluster-sized `mujoco_lower_gamma.py` and
`atari_lower_gamma.py` that test the claim against the cells already published: the base algorithm (kappa = 1)
at the discounts of the published kappa_best cells, 5 seeds a cell, with the settings of `table2_columns.py`
(the paper's Table 4, C_FA 0.2, T = 2M env steps, gymnasium v5) and, for DQN, of `small/minatar_breakout_1m.py`
(the MinAtar preset, C_FA 0.05, T = 1M env steps).

Why these cells: a kappa-TRPO run at kappa solves a surrogate MDP with discount gamma * kappa. The question a
reviewer asks is whether TRPO with that discount does as well. gamma 0.68 is the kappa_best of the published
Walker2d and Ant cells (their surrogate discount 0.99 * 0.68 = 0.67) and gamma 0.92 lies between it and 0.99,
as in the paper's Fig. 3. TRPO and DQN at gamma 0.99 are published (`table2_focused.py`, `table2_claim2.py`,
`minatar_breakout_1m.py`). The cluster files keep the paper's full design (gamma 0.68, 0.84, 0.92, 0.98 over
10 seeds, and Atari at 10M): about 70 CPU-hours, more than this project's 2-core machine can give.

Grids, in the order they run (5 seeds each, 50 trials), each with the paper's reading (its Fig. 3 shows curves,
not numbers; Table 2's kappa = 0 cells are numbers):
    walker2d_g68_trpo_gamma     Walker2d-v5, TRPO gamma 0.68    paper: no better than TRPO at 0.99 (594 +- 99),
                                                                 below kappa-PI at kappa 0.68 (1438 +- 188)
    ant_g68_trpo_gamma          Ant-v5,      TRPO gamma 0.68    paper: better than TRPO at 0.99 (-19 +- 1), yet
                                                                 below kappa-PI (1377) and kappa-VI (2998) at 0.68
    walker2d_g92_trpo_gamma     Walker2d-v5, TRPO gamma 0.92    paper: about TRPO at 0.99
    ant_g92_trpo_gamma          Ant-v5,      TRPO gamma 0.92    paper: between gamma 0.68 and 0.99
    breakout_1m_g68_dqn_gamma   MinAtar Breakout, DQN gamma 0.68 (1M)  paper (Atari Breakout): worse than or
                                                                 equal to DQN at 0.99, as kappa falls kappa-DQN rises
    breakout_1m_g92_dqn_gamma   MinAtar Breakout, DQN gamma 0.92 (1M)  paper: as above
    walker2d_kappa0_kappa_vi_trpo     Walker2d-v5,    kappa-VI kappa 0   paper:  830 +- 262
    ant_kappa0_kappa_vi_trpo          Ant-v5,         kappa-VI kappa 0   paper: 1879 +- 128
    halfcheetah_kappa0_kappa_vi_trpo  HalfCheetah-v5, kappa-VI kappa 0   paper: 1072 +- 30
    hopper_kappa0_kappa_vi_trpo       Hopper-v5,      kappa-VI kappa 0   paper:  531 +- 125

Not run here: gamma 0.84 and 0.98 (the paper's curves lie between the ones here), SpaceInvaders, and 10 seeds.

Cost: one CPU per trial, two at a time on a 2-core machine. From the published cells of the same tasks
(`table2_focused.py`, `table2_claim2.py`, `table2_columns.py`, `minatar_breakout_1m.py`): a Walker2d
TRPO-family cell 0.5-2.3 trial-hours, an Ant cell 1.0-2.4, a MinAtar DQN cell at 1M 2.2-4.2 (the high ends
beside other work); the file's 50 trials ~17 trial-hours or more. Each cell's measured cost is published beside
it (docs/results/table2/README.md, docs/results/minatar/README.md).

Publish each cell as it finishes, into the folder that holds its gamma = 0.99 cells, and report over all of
that folder (a report of these cells alone has no gamma 0.99 run, and would take a lower gamma for the main one):

    python docs/results/slim.py S/lower_gamma_focused docs/results/table2 walker2d_g68_trpo_gamma
    python docs/results/slim.py S/lower_gamma_focused docs/results/minatar/1m breakout_1m_g68_dqn_gamma Run it cell by
cell: `--grids a,b` runs two together, so no core idles on a cell's fifth trial, `--checkpoint-every 50` keeps
at most 50 iterations to redo after a stop, and `--resume` continues.

    kappa-rllib tune tune_configs/paper/lower_gamma_focused.py --storage S --num-cpus 2 --checkpoint-every 50 \
        --grids walker2d_g68_trpo_gamma,ant_g68_trpo_gamma
    kappa-rllib tune tune_configs/paper/lower_gamma_focused.py --storage S --num-cpus 2 --checkpoint-every 50 \
        --grids walker2d_g68_trpo_gamma,ant_g68_trpo_gamma --resume
    kappa-rllib tune tune_configs/paper/lower_gamma_focused.py --smoke      # ~3 minutes
"""

from kappa_rllib.experiments import paper_grids

TRPO_TASKS = ("Walker2d-v5", "Ant-v5")  # the paper's Fig. 3 MuJoCo panels
GAMMAS = (0.68, 0.92)  # the published kappa_best (0.68) and a discount between it and 0.99
KAPPA0_TASKS = ("Walker2d-v5", "Ant-v5", "HalfCheetah-v5", "Hopper-v5")  # Table 2's kappa-VI kappa = 0 column
GAME = "MinAtar/Breakout-v1"
NUM_SEEDS = 5
C_FA = 0.2  # Table 2 (TRPO)
DQN_C_FA = 0.05  # Table 1 (DQN); unused by DQN itself (kappa = 1), kept as in minatar_breakout_1m.py
TOTAL_ENV_STEPS = 2_000_000
DQN_TOTAL_ENV_STEPS = 1_000_000
SMOKE_KAPPA0_C_FA = 0.6  # --smoke only: N_kappa = 51 at kappa 0, within the smoke's 60 batches


def _name(env: str) -> str:
    return env.split("-")[0].lower()


def experiments(smoke: bool = False):
    common = dict(c_fa=C_FA, num_seeds=NUM_SEEDS, smoke=smoke, total_env_steps=TOTAL_ENV_STEPS, baseline=False,
                  kappas=[], variants=())
    grids = []
    for gamma in GAMMAS:  # TRPO (kappa = 1) at a lower discount: one cell a (task, gamma)
        for env in TRPO_TASKS:
            grids += paper_grids("trpo", env, gammas=[gamma], name=f"{_name(env)}_g{round(gamma * 100)}", **common)
    for gamma in GAMMAS:  # DQN (kappa = 1) at a lower discount, minatar_breakout_1m.py's settings
        grids += paper_grids("dqn", GAME, kappas=[], variants=(), baseline=False, gammas=[gamma], c_fa=DQN_C_FA,
                             num_seeds=NUM_SEEDS, smoke=smoke, name=f"breakout_1m_g{round(gamma * 100)}",
                             total_env_steps=DQN_TOTAL_ENV_STEPS, env_steps_per_iteration=5_000)
    kappa0 = []
    for env in KAPPA0_TASKS:  # kappa-VI at the one-step greedy kappa = 0
        kappa0 += paper_grids("trpo", env, **{**common, "kappas": [0.0], "variants": ("vi",)},
                              name=_name(env) + "_kappa0")
    if smoke:  # kappa = 0 has the most kappa-iterations (161 at C_FA 0.2): more than the smoke's 60 batches hold
        for grid in kappa0:
            grid.config.training(c_fa=SMOKE_KAPPA0_C_FA)
    return grids + kappa0


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
