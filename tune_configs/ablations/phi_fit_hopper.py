"""kappa-PI-TRPO's V_phi schedule on Hopper-v5: the authors' `every_batch` against Algorithm 7's
literal `iteration_end` (docs/paper-settings.md, "V_phi in kappa-PI-TRPO").

Grid: phi_fit x seeds, kappa 0.84, C_FA 0.2 (N_kappa 27), the paper's TRPO settings otherwise.
Cost: 2 x len(SEEDS) trials of TOTAL env steps (~4 min each per core on a 2-core laptop at 200k).

    python tune_configs/ablations/phi_fit_hopper.py [--total 200000] [--seeds 0,1,2] [--storage DIR]

prints per trial the score (mean episode return over the last 10% of training episodes' reports)
and V_phi_shaping's mean beside the mean plain return rho it should track.
"""

from __future__ import annotations

import argparse
import os

from ray import tune

from kappa_rllib import KappaPITRPOConfig

TOTAL = 200_000
SEEDS = [0, 1, 2]


def make_config(total=TOTAL, seeds=SEEDS):
    return (
        KappaPITRPOConfig()
        .environment("Hopper-v5")
        .training(kappa=0.84, c_fa=0.2, total_env_steps=total,
                  phi_fit=tune.grid_search(["every_batch", "iteration_end"]))
        .debugging(seed=tune.grid_search(list(seeds)))
    )


config = make_config()
stop = {"done": True}


def main(argv=None):
    import numpy as np
    import ray

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--total", type=int, default=TOTAL)
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    p.add_argument("--storage", default=os.path.abspath("results/tune"))
    args = p.parse_args(argv)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    seeds = [int(s) for s in args.seeds.split(",")]
    tuner = tune.Tuner(
        "KappaPITRPO",
        param_space=make_config(args.total, seeds),
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(name="phi_fit_hopper", storage_path=args.storage, stop=stop, verbose=1),
    )
    results = tuner.fit()
    rows = []
    for r in results:
        df = r.metrics_dataframe
        if r.error or df is None or "env_runners/episode_return_mean" not in df:
            print(f"trial {r.path} failed: {r.error!r}")
            continue
        returns = df["env_runners/episode_return_mean"].dropna().to_numpy()
        last = returns[-max(1, len(returns) // 10):]
        cfg = r.config
        rows.append((cfg["phi_fit"], cfg["seed"], float(np.mean(last)),
                     float(df["learners/kappa_phi/v_phi_shaping_mean"].iloc[-1]),
                     float(df["learners/kappa_phi/rho_mean"].iloc[-1])))
    rows.sort()
    print(f"{'phi_fit':<15}{'seed':>5}{'score':>10}{'V_phi_shaping':>15}{'rho':>10}")
    for row in rows:
        print(f"{row[0]:<15}{row[1]:>5}{row[2]:>10.1f}{row[3]:>15.1f}{row[4]:>10.1f}")
    for fit in ("every_batch", "iteration_end"):
        s = np.array([row[2] for row in rows if row[0] == fit])
        print(f"{fit}: mean score {s.mean():.1f} +- {1.96 * s.std(ddof=1) / np.sqrt(len(s)) if len(s) > 1 else 0:.1f} (n={len(s)})")


if __name__ == "__main__":
    main()
