"""Adaptive kappa: kappa-PI-PPO populations whose kappa Tune's PBT and PB2 move during training,
beside fixed-kappa runs at the same budget (the paper's Sec. 7 names choosing kappa adaptively as
future work).

Grids (InvertedPendulum-v5, T = 100,000 env steps = 100 PPO iterations of 1,000, C_FA 0.2):
    pbt            4 members starting at kappa {0.5, 0.7, 0.84, 0.95}; every 10 iterations the bottom
                   quarter copies a top-quarter member (weights, optimizer, V_phi) and moves its kappa
                   to a neighbouring value of {0.5, 0.6, 0.7, 0.8, 0.84, 0.9, 0.95, 0.99} (or resamples)
    pb2            the same 4 starting points; PB2's GP bandit picks kappa in [0.5, 0.99]
    kappa_pi_ppo   fixed kappa {0.5, 0.7, 0.84, 0.95, 0.99} x 2 seeds
A member takes its new kappa when it is restored: the current kappa-iteration keeps its planned
end and the batches left are re-planned with the new N_kappa (kappa_rllib.algorithms.kappa_loop).
`kappa-rllib report` draws each member's kappa over env steps and sets the best member's score
beside the best fixed kappa's (adaptive.md).

Cost: 18 trials x 100k env steps; ~20 minutes on 2 cores (the populations' 4 members run side by
side at half a CPU each). Results: docs/results/adaptive/.

    kappa-rllib tune tune_configs/adaptive/inverted_pendulum_ppo.py --report
    kappa-rllib tune tune_configs/adaptive/inverted_pendulum_ppo.py --smoke --grids pbt,kappa_pi_ppo  # ~1 minute
"""

from ray import tune

from kappa_rllib import KappaPIPPOConfig
from kappa_rllib.experiments import Grid, population, seeds

ENV = "InvertedPendulum-v5"
START_KAPPAS = [0.5, 0.7, 0.84, 0.95]
KAPPA_VALUES = [0.5, 0.6, 0.7, 0.8, 0.84, 0.9, 0.95, 0.99]  # PBT's moves; PB2 searches [0.5, 0.99]
FIXED_KAPPAS = [0.5, 0.7, 0.84, 0.95, 0.99]
C_FA = 0.2
PPO = dict(train_batch_size=1000, minibatch_size=250, num_epochs=10, lr=3e-4, total_env_steps=100_000)
INTERVAL = 10  # PPO iterations between two PBT / PB2 decisions
# --smoke: 4 members still (PBT moves the bottom quarter), kappa >= 0.84 so that N_kappa (27 at most)
# fits 30 tiny batches; nothing is learned, every mechanism runs.
SMOKE = dict(train_batch_size=100, minibatch_size=50, num_epochs=1, lr=3e-4, total_env_steps=100 * 30)
SMOKE_KAPPAS, SMOKE_INTERVAL = [0.84, 0.9, 0.95, 0.99], 10


def kappa_ppo(kappa, seed, settings):
    return (KappaPIPPOConfig().environment(ENV)
            .env_runners(num_env_runners=0, num_envs_per_env_runner=4)
            # half a CPU per trial: a population's 4 members run side by side on 2 cores (PBT compares
            # members at the same iteration; members left pending would meet only finished ones)
            .resources(num_cpus_for_main_process=0.5).learners(num_cpus_per_learner=0.5)
            .training(kappa=kappa, c_fa=C_FA, **settings)
            .debugging(seed=seed))


def experiments(smoke: bool = False):
    settings, interval = (SMOKE, SMOKE_INTERVAL) if smoke else (PPO, INTERVAL)
    values = SMOKE_KAPPAS if smoke else KAPPA_VALUES
    start = tune.grid_search(SMOKE_KAPPAS if smoke else START_KAPPAS)
    fixed = tune.grid_search(FIXED_KAPPAS[-2:] if smoke else FIXED_KAPPAS)
    bounds = (min(values), max(values))
    return [
        Grid("pbt", kappa_ppo(start, 0, settings), mutations={"kappa": values},
             scheduler=population("pbt", {"kappa": values}, perturbation_interval=interval)),
        Grid("pb2", kappa_ppo(start, 0, settings), mutations={"kappa": bounds},
             scheduler=population("pb2", {"kappa": bounds}, perturbation_interval=interval)),
        Grid("kappa_pi_ppo", kappa_ppo(fixed, seeds(2), settings)),
    ]


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
