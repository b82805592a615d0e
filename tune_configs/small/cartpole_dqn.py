"""kappa x C_FA on CartPole-v1 with kappa-PI-DQN, beside DQN (kappa = 1): the README's main job.

Grids (CartPole preset, kappa_rllib/presets/dqn_cartpole.yaml, T = 20,000 env steps per trial):
    kappa_pi_dqn   kappa {0.68, 0.84} x C_FA {0.05, 0.2} x seeds {0, 1}   8 trials
    dqn            kappa = 1 x seeds {0, 1}                                2 trials
Cost: 10 trials x 20k = 200k env steps, ~3 minutes on 2 cores (2 trials at a time).
Paper: no CartPole numbers (its DQN experiments are Atari, tune_configs/paper/atari_table1.py);
this grid shows the whole loop - grid, table, curves, heat-map - in minutes.

    kappa-rllib tune tune_configs/small/cartpole_dqn.py --report
    kappa-rllib tune tune_configs/small/cartpole_dqn.py --smoke     # ~1 minute: T = 1,000
"""

from kappa_rllib.experiments import paper_grids

ENV = "CartPole-v1"


def experiments(smoke: bool = False):
    return paper_grids("dqn", ENV, kappas=[0.68, 0.84], c_fa=[0.05, 0.2], num_seeds=2, variants=("pi",),
                       smoke=smoke, total_env_steps=20_000, env_steps_per_iteration=2_000)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
