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
    rows = _rows(result_file, population is not None)
    if not rows:
        return None
    episode_returns, episode_steps, steps, curve, kappas, variant, evaluated = [], [], [], [], [], "plain", []
    timelines, last_timeline = [], 0
    for i, row in enumerate(rows):
        if row.get(_NEW_TIMELINE):
            timelines.append(i)
            last_timeline = len(episode_returns)
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
        timelines=tuple(timelines),
        last_timeline=last_timeline,
    )


_NEW_TIMELINE = "_kappa_rllib_new_timeline"  # set by _rows on the first row after a PBT / PB2 exploit
_CLOCK_TOL = 1e-4  # s: a stretch's origin clock is a difference of two float sums of the same increments


def _rows(result_file: Path, population: bool) -> list[dict]:
    """The result rows of a trial's timeline as it went: a trial resumed from a checkpoint older than
    its last result (`tune --resume` after a Ctrl-C or a crash, a retry after a failure) reports those
    iterations again, and the resumed ones replace the rows (and episodes) of the timeline that was
    rolled back. A PBT / PB2 member that goes on from another member's checkpoint (an exploit) keeps its
    rows before it (its episodes are its own, report/adaptive.py); later rollbacks stop there, and the first
    row since is marked _NEW_TIMELINE."""
    rows, timeline, stretch, since, origins, starts = [], 0, None, 0, [], []
    for line in result_file.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a row cut short: by a kill mid-write, or a full disk (then resumed rows follow)
        origin = _origin(row)
        rolled_back_to = None
        if origin is not None and stretch is not None and (not _same(origin, stretch)
                                                           or row["iterations_since_restore"] <= since):
            # restored or restarted (from another checkpoint, or from the same one again)
            if population and _another_members(origin, rows[timeline:], origins):
                timeline, origins = len(rows), []
                starts.append(timeline)
            else:
                rolled_back_to = origin[0]
            origins.append(origin)
        elif origin is not None and stretch is None:
            origins.append(origin)
        if origin is not None:
            stretch, since = origin, row["iterations_since_restore"]
        if rolled_back_to is not None:  # the rows after the checkpoint, its first rows here lost or not
            while len(rows) > timeline and rows[-1].get("training_iteration", math.inf) > rolled_back_to:
                rows.pop()
        while len(rows) > timeline and (row.get("training_iteration", math.inf)
                                        <= rows[-1].get("training_iteration", -math.inf)):
            rows.pop()
        rows.append(row)
    for start in starts:  # (a rollback never reaches back past one; a later exploit may start at the same row)
        if start < len(rows):
            rows[start][_NEW_TIMELINE] = True
    return rows


def _origin(row: dict) -> tuple[int, float] | None:
    """(iteration, Tune's clock) of the checkpoint the row's stretch of training went on from, (0, 0.0) for a
    start from scratch: Tune's Trainable restores both from the checkpoint and counts `iterations_since_restore`
    and `time_since_restore` from there, on every row. None for a row without those counters."""
    try:
        return (int(row["training_iteration"]) - int(row["iterations_since_restore"]),
                float(row["time_total_s"]) - float(row["time_since_restore"]))
    except (KeyError, TypeError, ValueError):
        return None


def _same(a: tuple[int, float], b: tuple[int, float]) -> bool:
    return a[0] == b[0] and math.isclose(a[1], b[1], rel_tol=1e-9, abs_tol=_CLOCK_TOL)


def _another_members(origin: tuple[int, float], timeline: list[dict], origins: list) -> bool:
    """Whether a PBT / PB2 member's new stretch went on from another member's checkpoint (an exploit),
    not from its own (a resume, a retry). Its own checkpoint of iteration i carries the clock of its own
    row i. Read as its own, too: a start from scratch, a checkpoint without Tune's clock (kappa-rllib's
    --resume repair wrote none before checkpoints carried it), and a checkpoint the timeline went on from
    before (a resume before the member's first checkpoint of its own; also, indistinguishably, a second
    exploit of the same donor checkpoint, whose first rows are then replaced). Tune's pbt_global.txt
    cannot tell these apart: it logs decisions, some never applied, with the last results' iterations."""
    iteration, clock = origin
    if iteration <= 0 or math.isclose(clock, 0.0, abs_tol=_CLOCK_TOL):
        return False
    if any(_same(origin, seen) for seen in origins):
        return False
    for r in timeline:
        if r.get("training_iteration") == iteration:
            try:
                return not math.isclose(float(r["time_total_s"]), clock, rel_tol=1e-9, abs_tol=_CLOCK_TOL)
            except (KeyError, TypeError, ValueError):
                return False
    return True  # no row of its own at that iteration: the donor was ahead


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
