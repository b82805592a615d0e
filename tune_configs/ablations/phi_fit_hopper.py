"""kappa-PI-TRPO's V_phi schedule on Hopper-v5: the authors' `every_batch` against Algorithm 7's
literal `iteration_end` (docs/paper-settings.md, "V_phi in kappa-PI-TRPO").

Grid: phi_fit x seeds, kappa 0.84, C_FA 0.2 (N_kappa 27), the paper's TRPO settings otherwise.
Cost: 2 x len(SEEDS) trials of TOTAL env steps (~4 min each per core on a 2-core laptop at 200k).

    python tune_configs/ablations/phi_fit_hopper.py [--total 300000] [--seeds 0,1,2] [--storage DIR] [--with-trpo]

prints per trial the score (mean episode return over the last 10% of training episodes' reports)
and V_phi_shaping's mean beside the mean plain return rho it should track.
"""

from __future__ import annotations

import argparse
import os

from ray import tune

from kappa_rllib import KappaPITRPOConfig

TOTAL = 300_000
SEEDS = [0, 1, 2]


def make_config(total=TOTAL, seeds=SEEDS):
    return (
        KappaPITRPOConfig()
        .environment("Hopper-v5")
        .env_runners(num_envs_per_env_runner=1)  # as the measured runs in the README note
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
    p.add_argument("--with-trpo", action="store_true", help="also run TRPO (kappa = 1) with the same seeds and budget")
    p.add_argument("--only-trpo", action="store_true", help="run only the TRPO baseline")
    args = p.parse_args(argv)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    seeds = [int(s) for s in args.seeds.split(",")]
    grids = []
    if not args.only_trpo:
        grids.append(("KappaPITRPO", "phi_fit_hopper", make_config(args.total, seeds)))
    if args.with_trpo or args.only_trpo:
        from kappa_rllib import TRPOConfig

        trpo = (TRPOConfig().environment("Hopper-v5").env_runners(num_envs_per_env_runner=1)
                .debugging(seed=tune.grid_search(seeds)))
        grids.append(("TRPO", "trpo_hopper", trpo))
    rows = []
    for trainable, name, space in grids:
        stop_at = stop if trainable != "TRPO" else {"num_env_steps_sampled_lifetime": args.total // 1024 * 1024}
        tuner = tune.Tuner(
            trainable,
            param_space=space,
            tune_config=tune.TuneConfig(max_concurrent_trials=2),
            run_config=tune.RunConfig(name=name, storage_path=args.storage, stop=stop_at, verbose=1),
        )
        for r in tuner.fit():
            df = r.metrics_dataframe
            if r.error or df is None or "env_runners/episode_return_mean" not in df:
                print(f"trial {r.path} failed: {r.error!r}")
                continue
            returns = df["env_runners/episode_return_mean"].dropna().to_numpy()
            last = returns[-max(1, len(returns) // 10):]
            cfg = r.config
            v_col, rho_col = "learners/kappa_phi/v_phi_shaping_mean", "learners/kappa_phi/rho_mean"
            rows.append((cfg.get("phi_fit", "TRPO (kappa=1)"), cfg["seed"], float(np.mean(last)),
                         float(df[v_col].iloc[-1]) if v_col in df else float("nan"),
                         float(df[rho_col].iloc[-1]) if rho_col in df else float("nan")))
    rows.sort()
    print(f"{'phi_fit':<15}{'seed':>5}{'score':>10}{'V_phi_shaping':>15}{'rho':>10}")
    for row in rows:
        print(f"{row[0]:<15}{row[1]:>5}{row[2]:>10.1f}{row[3]:>15.1f}{row[4]:>10.1f}")
    for fit in dict.fromkeys(row[0] for row in rows):
        s = np.array([row[2] for row in rows if row[0] == fit])
        print(f"{fit}: mean score {s.mean():.1f} +- {1.96 * s.std(ddof=1) / np.sqrt(len(s)) if len(s) > 1 else 0:.1f} (n={len(s)})")


if __name__ == "__main__":
    main()
