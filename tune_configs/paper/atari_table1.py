"""The paper's Table 1 and Fig. 1 (Sec. 5.1): kappa-PI-DQN and kappa-VI-DQN on six Atari games,
C_FA = 0.05, against DQN (kappa = 1) and the naive N_kappa = T schedule.

Settings: the paper's Table 3 DQN hyper-parameters and the DeepMind Atari setup
(kappa_rllib/presets/dqn_atari.yaml, docs/paper-settings.md "Atari"); T = 10M env steps (the
choice documented in docs/paper-settings.md, "T for DQN"); scores are raw full-game returns.

Grids (10 seeds each, the paper's n):
    kappa_pi_dqn        game x kappa {0, 0.36, 0.68, 0.84, 0.92, 0.98} x seed   360 trials
    kappa_vi_dqn        game x kappa {...} x seed                              360 trials
    dqn                 game x seed (kappa = 1)                                 60 trials
    naive_kappa_pi_dqn  game x kappa {0.68, 0.84, 0.98} x seed (N_kappa = T)   180 trials
Cost: 960 trials x 10M = 9.6e9 env steps. Atari DQN runs at ~40 env steps/s on a 2-core CPU
(benchmarks/throughput.py), so this is a GPU-cluster job: run it with `--address` on a cluster
(cluster/README.md), learners on GPUs: `--gpus-per-trial 0.25` packs four trials per GPU, each with
3 CPUs (the Atari preset's 2 remote EnvRunners): 1,597 env steps/s per H100 in all with the learner's
CUDA graphs (docs/measured.md), so ~1,670 GPU-hours for the 960 trials.
Paper (Table 1): e.g. Breakout kappa-PI 223 +- 7 at kappa 0.84, kappa-VI 181 +- 7 at 0.68, DQN
134 +- 4, naive 170 +- 2 at 0.68; all cells are in kappa_rllib/data/paper_tables.csv and appear
beside the reproduced ones in `kappa-rllib report`'s table.md.

    ray job submit -- kappa-rllib tune /opt/kappa-rllib/tune_configs/paper/atari_table1.py \
        --storage s3://BUCKET/kappa --gpus-per-trial 0.25 --resume
    kappa-rllib tune tune_configs/paper/atari_table1.py --smoke     # one game, 2 kappa x 2 seeds, 1k steps
"""

from kappa_rllib.experiments import paper_grids

GAMES = ["ALE/Breakout-v5", "ALE/SpaceInvaders-v5", "ALE/Seaquest-v5", "ALE/Enduro-v5", "ALE/BeamRider-v5",
         "ALE/Qbert-v5"]
KAPPAS = [0.0, 0.36, 0.68, 0.84, 0.92, 0.98]
NAIVE_KAPPAS = [0.68, 0.84, 0.98]  # the paper's naive kappa_best values across games
NUM_SEEDS = 10
C_FA = 0.05


def experiments(smoke: bool = False):
    return paper_grids("dqn", GAMES, kappas=KAPPAS, c_fa=C_FA, num_seeds=NUM_SEEDS, naive_kappas=NAIVE_KAPPAS,
                       smoke=smoke)


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
