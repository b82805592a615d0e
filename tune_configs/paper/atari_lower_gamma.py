"""The paper's lower-discount study for DQN (Sec. 5.3, Fig. 3): DQN with gamma below 0.99 on
Breakout and SpaceInvaders, to compare with kappa-PI/VI-DQN at the same kappa (atari_table1.py).

The paper does not list the gamma values of Fig. 3 (the text names 0.68); these are the kappa
grid's values, so each lower-gamma DQN has the kappa-DQN run of the same value to compare with.

Grids (10 seeds, T = 10M, the Atari preset):
    dqn           game x seed at gamma 0.99 (the reference)                 20 trials
    dqn_gamma     game x gamma {0.68, 0.84, 0.92, 0.98} x seed               80 trials
Cost: 100 trials x 10M env steps (a GPU-cluster job). `kappa-rllib report` writes lower_gamma.md.

    kappa-rllib tune tune_configs/paper/atari_lower_gamma.py --address auto
"""

from kappa_rllib.experiments import paper_grids

GAMES = ["ALE/Breakout-v5", "ALE/SpaceInvaders-v5"]
GAMMAS = [0.68, 0.84, 0.92, 0.98]
NUM_SEEDS = 10


def experiments(smoke: bool = False):
    return paper_grids("dqn", GAMES, kappas=[], c_fa=0.05, num_seeds=NUM_SEEDS, variants=(), gammas=GAMMAS,
                       smoke=smoke)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
