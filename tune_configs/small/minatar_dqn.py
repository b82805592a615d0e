"""The paper's Atari question (Table 1) at laptop scale: kappa-PI-DQN and kappa-VI-DQN on MinAtar
Breakout and SpaceInvaders against DQN (kappa = 1) and the naive N_kappa = T schedule.

MinAtar (Young & Tian 2019, the `minatar` package) keeps the Atari games' dynamics on 10x10 frames;
the network is the MinAtar paper's (one 3x3 conv of 16 filters, 128 units) and the DQN settings its
own, with one update per 4 env steps (kappa_rllib/presets/dqn_minatar.yaml). C_FA = 0.05 as in the
paper's Table 1.

Grids (T = 250,000 env steps per trial, 5 seeds, 2 games):
    kappa_pi_dqn        kappa {0.68, 0.84, 0.92} x game x seed   30 trials
    kappa_vi_dqn        kappa {0.68, 0.84, 0.92} x game x seed   30 trials
    dqn                 kappa = 1 x game x seed                 10 trials
    naive_kappa_pi_dqn  N_kappa = T at kappa 0.84 x game x seed  10 trials
Cost: 80 trials, 20M env steps. Measured on a 2-core CPU machine (torch CPU, 1 thread per trial,
2 trials at a time): a DQN trial takes 266-315 s (~850-940 env steps/s, learning start included; the
`dqn` grid's 10 trials took 27 min). kappa-VI makes as many updates as DQN (a trial: 277-370 s),
kappa-PI twice as many (benchmarks/throughput.py --workload w3: ~0.55x DQN's rate). The naive
schedule's T_kappa = 1 makes every env step an iteration of its own; its chunks of 64 env steps
span 64 iterations (one sampling call, one learner call), ~300-420 env steps/s after learning
starts, ~10-12 min a trial. So: dqn ~0.5 h, kappa_vi_dqn ~1.3 h, kappa_pi_dqn ~2.5 h,
naive_kappa_pi_dqn ~1 h: ~5.3 hours for the file on 2 cores, about an hour on a 16-core machine
(16 trials at a time). Run it in parts with `--grids` and `--resume`. Results so far:
docs/results/minatar/.
Paper (Atari, 10M steps): kappa-PI-DQN beats DQN on all six games at kappa_best (0.84 on 4 of
them), and the naive schedule loses to kappa_best except on Enduro.

    kappa-rllib tune tune_configs/small/minatar_dqn.py --report
    kappa-rllib tune tune_configs/small/minatar_dqn.py --smoke      # ~1 minute
"""

from kappa_rllib.experiments import paper_grids

GAMES = ["MinAtar/Breakout-v1", "MinAtar/SpaceInvaders-v1"]
KAPPAS = [0.68, 0.84, 0.92]
NAIVE_KAPPAS = [0.84]
NUM_SEEDS = 5
TOTAL = 250_000
C_FA = 0.05


def experiments(smoke: bool = False):
    return paper_grids("dqn", GAMES, kappas=KAPPAS, c_fa=C_FA, num_seeds=NUM_SEEDS, variants=("pi", "vi"),
                       naive_kappas=NAIVE_KAPPAS, smoke=smoke, total_env_steps=TOTAL, env_steps_per_iteration=5_000)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
