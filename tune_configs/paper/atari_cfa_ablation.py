"""The paper's C_FA ablation on Breakout (Sec. 5.1, Appendix A.1): kappa-PI-DQN and kappa-VI-DQN
for C_FA in {0.001, 0.05, 0.2}; the paper found 0.05 best and used it everywhere else.

Grids (10 seeds, T = 10M env steps, the Atari preset):
    kappa_pi_dqn  kappa {0, 0.36, 0.68, 0.84, 0.92, 0.98} x C_FA {0.001, 0.05, 0.2} x seed   180 trials
    kappa_vi_dqn  the same                                                                   180 trials
    dqn           seed (kappa = 1, the reference line)                                        10 trials
Cost: 370 trials x 10M env steps (a GPU-cluster job, see atari_table1.py). Smaller C_FA means
more kappa-iterations: at kappa 0 and C_FA 0.001, N_kappa = 688 iterations of ~14.5k steps.
`kappa-rllib report` draws the kappa x C_FA heat-maps of final score from this folder.

    kappa-rllib tune tune_configs/paper/atari_cfa_ablation.py --address auto
"""

from kappa_rllib.experiments import paper_grids

KAPPAS = [0.0, 0.36, 0.68, 0.84, 0.92, 0.98]
C_FAS = [0.001, 0.05, 0.2]
NUM_SEEDS = 10


def experiments(smoke: bool = False):
    return paper_grids("dqn", "ALE/Breakout-v5", kappas=KAPPAS, c_fa=C_FAS, num_seeds=NUM_SEEDS, smoke=smoke)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
