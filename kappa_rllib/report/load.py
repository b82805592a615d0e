"""Loading what Tune wrote: every trial folder with `params.json` and `result.json` becomes a `Run`;
the paper's own numbers from `kappa_rllib/data/paper_tables.csv`."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import Run


PAPER_TABLES = Path(__file__).resolve().parents[1] / "data" / "paper_tables.csv"
_ENV_PREFIX = "kappa_rllib:"


def load_runs(root) -> list[Run]:
    """Every trial under `root` (any depth) with a params.json and a result.json."""
    runs = []
    for result_file in sorted(Path(root).rglob("result.json")):
        params_file = result_file.with_name("params.json")
        if not params_file.is_file():
            continue
        run = _load_run(params_file, result_file)
        if run is not None:
            runs.append(run)
    return runs


def _load_run(params_file: Path, result_file: Path) -> Run | None:
    params = json.loads(params_file.read_text())
    population = _population(result_file.parent.parent)
    rows, timeline = [], 0  # timeline: the first row since the member last took another member's checkpoint
    for line in result_file.read_text().splitlines():
        line = line.strip()
        if line:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a row cut short: by a kill mid-write, or a full disk (then resumed rows follow)
            if population and _from_another_members_checkpoint(row, rows[timeline:]):
                timeline = len(rows)  # its rows so far are its own past (report/adaptive.py): kept
            # A trial resumed from a checkpoint older than its last result (`tune --resume` after a
            # Ctrl-C or a crash) reports those iterations again: the resumed ones replace the rows
            # (and episodes) of the timeline that was rolled back.
            while len(rows) > timeline and (row.get("training_iteration", math.inf)
                                            <= rows[-1].get("training_iteration", -math.inf)):
                rows.pop()
            rows.append(row)
    if not rows:
        return None
    episode_returns, episode_steps, steps, curve, kappas, variant, evaluated = [], [], [], [], [], "plain", []
    for row in rows:
        evaluated.append(row.get("evaluation", {}).get("env_runners", {}).get("episode_return_mean", float("nan")))
        kappas.append(row.get("kappa", {}).get("kappa", float("nan")))
        runners = row.get("env_runners", {})
        finished = runners.get("episode_returns", [])  # RLlib unwraps a one-item series to the item
        finished = finished if isinstance(finished, list) else [finished]
        episode_returns.extend(finished)
        count = runners.get("num_env_steps_sampled_lifetime", row.get("num_env_steps_sampled_lifetime"))
        steps.append(count or 0)
        # a row that reports episodes has sampled env steps: no count (or RLlib's 0 for one it lacks) is unknown
        episode_steps.extend([count or math.nan] * len(finished))
        curve.append(runners.get("episode_return_mean", float("nan")))
        variant = {"pi": "kappa-pi", "vi": "kappa-vi"}.get(row.get("kappa", {}).get("variant"), variant)
    family = ("trpo" if "max_kl" in params else "appo" if "vtrace" in params else "ppo" if "clip_param" in params
              else "dqn")
    is_kappa = variant != "plain"
    if variant == "kappa-pi" and params.get("phi_fit", "every_batch") != "every_batch":
        variant += f" (phi_fit={params['phi_fit']})"  # kappa-PI-TRPO's V_phi schedule ablation
    lambda_ = None if is_kappa else float(params.get("lambda", params.get("lambda_", 1.0)))
    return Run(
        path=str(result_file.parent),
        env=str(params.get("env", "?")).removeprefix(_ENV_PREFIX),
        family=family,
        variant=variant,
        kappa=float(params["kappa"]) if is_kappa else 1.0,
        c_fa=float(params["c_fa"]) if is_kappa else None,
        naive=bool(params.get("naive_schedule", False)) if is_kappa else False,
        gamma=float(params.get("gamma", 0.99)),
        lambda_=lambda_,
        seed=int(params.get("seed") or 0),
        episode_returns=[float(r) for r in episode_returns],
        episode_steps=np.asarray(episode_steps, dtype=float),
        steps=np.asarray(steps, dtype=float),
        curve=np.asarray(curve, dtype=float),
        eval_curve=np.asarray(evaluated, dtype=float) if np.isfinite(evaluated).any() else None,
        env_steps=int(steps[-1]) if steps else 0,
        done=bool(rows[-1].get("done", False)),
        kappa_path=np.asarray(kappas, dtype=float),
        population=population,
    )


def _from_another_members_checkpoint(row: dict, timeline: list[dict]) -> bool:
    """Whether a PBT / PB2 member's `row` is the first after Tune restored it from another member's
    checkpoint (an exploit), not from its own (`tune --resume`, a retry).

    Tune's Trainable keeps its clock in the checkpoint, so a restored row's time_total_s less its
    time_this_iter_s is the checkpoint's time_total_s: the member's own row of the iteration before
    has exactly that time if the checkpoint is its own, and so has its restored row of the same iteration
    if it took that checkpoint before (a `--resume` before its first checkpoint of its own). (Tune's pbt_global.txt cannot say it: it logs
    decisions, some never applied, and the iterations it logs are the last results, not the
    checkpoints'.) A restart from scratch (iteration 1) or a row without Tune's counters is a resume."""
    iteration = row.get("training_iteration")
    if row.get("iterations_since_restore") != 1 or not timeline or not isinstance(iteration, int) or iteration <= 1:
        return False
    try:
        start = float(row["time_total_s"]) - float(row["time_this_iter_s"])
    except (KeyError, TypeError, ValueError):
        return False
    def same(t) -> bool:
        return math.isclose(float(t), start, rel_tol=1e-9, abs_tol=1e-9)

    for r in timeline:
        try:
            if r.get("training_iteration") == iteration - 1 and same(r["time_total_s"]):
                return False  # its own checkpoint
            if (r.get("training_iteration") == iteration and r.get("iterations_since_restore") == 1
                    and same(float(r["time_total_s"]) - float(r["time_this_iter_s"]))):
                return False  # the checkpoint it was restored from before (a resume soon after an exploit)
        except (KeyError, TypeError, ValueError):
            continue
    return True


def _population(experiment: Path) -> str | None:
    """The population a trial folder's experiment is (its name), if it is one: `kappa-rllib tune`
    marks it (kappa_rllib.storage.POPULATION_MARKER); Tune's PBT / PB2 also log pbt_global.txt
    there once they have moved a member (other tools' populations)."""
    from kappa_rllib.storage import POPULATION_MARKER

    if (experiment / POPULATION_MARKER).is_file() or (experiment / "pbt_global.txt").is_file():
        return experiment.name
    return None


def load_paper_tables() -> dict:
    """{(env, row, column): (mean, ci, param, bold)} from the paper's Tables 1 and 2."""
    out = {}
    with open(PAPER_TABLES) as f:
        for r in csv.DictReader(f):
            out[(r["env"], r["row"], r["column"])] = (float(r["mean"]), float(r["ci"]), float(r["param"]), r["bold"] == "1")
    return out
