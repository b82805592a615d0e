"""The paper's MuJoCo question at laptop scale: kappa-PI-TRPO on InvertedPendulum-v5 and Hopper-v5
against TRPO (kappa = 1) and the naive N_kappa = T schedule, with the paper's Table 4 settings
(batches of 1,024 env steps, C_FA = 0.2) and budgets a laptop allows.

Grids per env (5 seeds; InvertedPendulum T = 100,000 env steps, Hopper T = 300,000):
    <env>_kappa_pi_trpo        kappa {0.68, 0.84, 0.92} x seed   15 trials
    <env>_trpo                 kappa = 1 (TRPO) x seed            5 trials
    <env>_naive_kappa_pi_trpo  N_kappa = T at kappa 0.84 x seed   5 trials
Cost: 50 trials, 10M env steps. Measured on a 2-core CPU machine, one trial at a time (the other core
busy): InvertedPendulum's 25 trials in 17 min (~40 s each), Hopper's 25 in 76 min (~3 min each), so
~1.5 hours for the file, under an hour with 2 trials at a time.
Measured result (docs/results.md, "The small suite"): kappa-PI-TRPO on par with TRPO at these budgets
(Hopper 875 +- 152 at kappa 0.68 vs TRPO 878 +- 26, naive 777 +- 231; Student-t 95% intervals, 5 seeds).
Paper (Hopper-v2, 2M steps): kappa-PI-TRPO 1486 +- 324 at kappa 0.68 against TRPO 1142 +- 141 and
naive 1434 +- 129 (kappa 0.98). At 15% of that budget, expect lower scores and wider intervals.

    kappa-rllib tune tune_configs/small/mujoco_trpo.py --report
    kappa-rllib tune tune_configs/small/mujoco_trpo.py --smoke      # ~1 minute
"""

from kappa_rllib.experiments import paper_grids

BUDGETS = {"InvertedPendulum-v5": 100_000, "Hopper-v5": 300_000}
KAPPAS = [0.68, 0.84, 0.92]
NAIVE_KAPPAS = [0.84]
NUM_SEEDS = 5
C_FA = 0.2


def experiments(smoke: bool = False):
    grids = []
    for env, total in list(BUDGETS.items())[: 1 if smoke else None]:
        grids += paper_grids("trpo", env, kappas=KAPPAS, c_fa=C_FA, num_seeds=NUM_SEEDS, variants=("pi",),
                             naive_kappas=NAIVE_KAPPAS, smoke=smoke, name=env.split("-")[0].lower(),
                             total_env_steps=total)
    return grids


GRIDS = experiments()
config, stop = GRIDS[0].config, GRIDS[0].stop
