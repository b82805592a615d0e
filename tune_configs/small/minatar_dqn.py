"""The paper's Atari question at laptop scale: kappa-PI-DQN on MinAtar Breakout and SpaceInvaders
against DQN (kappa = 1) and the naive N_kappa = T schedule.

MinAtar (Young & Tian 2019, the `minatar` package) keeps the Atari games' dynamics on 10x10 frames;
the network is the MinAtar paper's (one 3x3 conv of 16 filters, 128 units) and the DQN settings its
own, with one update per 4 env steps (kappa_rllib/presets/dqn_minatar.yaml). C_FA = 0.05 as in the
paper's Table 1.

Grids (T = 250,000 env steps per trial, 5 seeds, 2 games):
    kappa_pi_dqn        kappa {0.68, 0.84, 0.92} x game x seed   30 trials
    dqn                 kappa = 1 x game x seed                 10 trials
    naive_kappa_pi_dqn  N_kappa = T at kappa 0.84 x game x seed  10 trials
Cost: 50 trials, 12.5M env steps. Measured throughput on a 2-core CPU machine (torch CPU, 1 thread
per trial): ~450 env steps/s per trial once learning starts (~9.5 min per trial; the naive schedule
samples one env step per kappa-iteration and is slower), so ~4.5 hours for the file with 2 trials at
a time (estimated from that throughput; the whole file has not been run here yet).
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
    return paper_grids("dqn", GAMES, kappas=KAPPAS, c_fa=C_FA, num_seeds=NUM_SEEDS, variants=("pi",),
                       naive_kappas=NAIVE_KAPPAS, smoke=smoke, total_env_steps=TOTAL, env_steps_per_iteration=5_000)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
