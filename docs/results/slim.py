"""Copies a grid's finished trials into OUT/trials, cut to what `kappa-rllib report` reads:

    python docs/results/slim.py <the grid's storage>/table2_focused docs/results/table2
    python docs/results/slim.py <the grid's storage>/breakout_1m docs/results/minatar/1m
    python docs/results/slim.py <the grid's storage>/lower_gamma_focused docs/results/minatar/1m breakout_1m_g68_dqn_gamma

A third argument keeps only the grids named (comma-separated): a file whose grids belong to two results folders.

Each finished trial's params.json, and its result.json rows with only: the iteration, `done`, the time and
Tune's restore counters, kappa's `kappa` and `variant`, the env runners' episode returns, env-step count
and mean return, and the library versions the trial ran with (where it reported them).
"""

import json
import shutil
import sys
from pathlib import Path

def slim(row: dict) -> dict:
    runners = row.get("env_runners", {})
    return {"training_iteration": row["training_iteration"], "done": row["done"],
            "time_total_s": row["time_total_s"],
            # Tune's restore counters: how `report` tells a PBT member's exploit from a resume (report/load.py)
            **{k: row[k] for k in ("iterations_since_restore", "time_since_restore") if k in row},
            "kappa": {k: row["kappa"][k] for k in ("kappa", "variant") if k in row.get("kappa", {})},
            "env_runners": {k: runners[k] for k in ("episode_returns", "num_env_steps_sampled_lifetime",
                                                    "episode_return_mean") if k in runners},
            # the library versions the trial ran with, on a stretch's first row (kappa_rllib.versions)
            **({"versions": row["versions"]} if "versions" in row else {})}


def main(experiment: Path, out: Path, grids: set | None = None) -> None:
    for result in sorted(experiment.glob("*/*/result.json")):
        if grids is not None and result.parent.parent.name not in grids:
            continue
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        if not rows or not rows[-1]["done"]:
            continue  # unfinished: not archived
        target = out / "trials" / result.parent.parent.name / result.parent.name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(result.parent / "params.json", target / "params.json")
        (target / "result.json").write_text("".join(json.dumps(slim(r), separators=(",", ":")) + "\n" for r in rows))
        print(target)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: python docs/results/slim.py EXPERIMENT_FOLDER OUT_FOLDER [GRID,GRID...]")
    main(Path(sys.argv[1]), Path(sys.argv[2]), set(sys.argv[3].split(",")) if len(sys.argv) == 4 else None)
