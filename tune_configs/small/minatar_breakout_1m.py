"""Does the 250k-step tie on MinAtar Breakout separate at 1M env steps? DQN against kappa-PI-DQN and
kappa-VI-DQN at the paper's Breakout kappa_best values (Table 1: kappa-PI 0.84, kappa-VI 0.68), with
the MinAtar preset (kappa_rllib/presets/dqn_minatar.yaml) and C_FA = 0.05 as in the paper's Table 1;
and the paper's second claim on the DQN side: kappa-PI-DQN 0.84 with the naive N_kappa = T schedule.

Grids (T = 1,000,000 env steps per trial, 5 seeds):
    breakout_1m_dqn            kappa = 1 (DQN)      5 trials
    breakout_1m_kappa_pi_dqn   kappa 0.84           5 trials
    breakout_1m_kappa_vi_dqn   kappa 0.68           5 trials
    breakout_1m_naive_kappa_pi_dqn  kappa 0.84, N_kappa = T   5 trials
Cost: 20 trials, 20M env steps, 12.8 trial-hours (Tune's clock), measured on the project's 2-core
machine, two trials at a time. A DQN trial's 5,000-step iterations take ~6 s on quiet cores (~830 env
steps/s: ~20 min per 1M) and 11-13 s beside other work; the DQN and kappa-VI cells took 1,237-1,958 s a
trial (about half of it beside other work). kappa-PI and the naive schedule make twice DQN's updates:
kappa-PI trials took 2,478-3,394 s (an iteration ~6-7 s, ~28 s when it runs an evaluation phase), naive
trials 2,822-3,265 s (~13 s an iteration). Run it in parts with `--resume` (`--grids` picks cells).
The 250k result (docs/results/minatar/): DQN 4.4 +- 0.3, kappa-PI 4.7 +- 0.2 (0.92), kappa-VI 4.6 +- 0.3 (0.84).
At 1M (docs/results/minatar/1m/): DQN 5.7 +- 0.2, kappa-PI 0.84 6.3 +- 0.6, its naive schedule 6.0 +- 0.3
(P(C_FA > naive) 0.84 [0.52, 1.00]), kappa-VI 0.68 6.2 +- 0.3 (Student-t 95% intervals, 5 seeds).

    kappa-rllib tune tune_configs/small/minatar_breakout_1m.py --checkpoint-every 20 --report
    kappa-rllib tune tune_configs/small/minatar_breakout_1m.py --checkpoint-every 20 --resume
    kappa-rllib tune tune_configs/small/minatar_breakout_1m.py --smoke      # ~1 minute
"""

from kappa_rllib.experiments import paper_grids

GAME = "MinAtar/Breakout-v1"
NUM_SEEDS = 5
TOTAL = 1_000_000
C_FA = 0.05


def experiments(smoke: bool = False):
    common = dict(c_fa=C_FA, num_seeds=NUM_SEEDS, smoke=smoke, name="breakout_1m", total_env_steps=TOTAL,
                  env_steps_per_iteration=5_000)
    return (paper_grids("dqn", GAME, kappas=[0.84], variants=("pi",), naive_kappas=[0.84], **common)  # kappa-PI, DQN, naive
            + paper_grids("dqn", GAME, kappas=[0.68], variants=("vi",), baseline=False, **common))


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
