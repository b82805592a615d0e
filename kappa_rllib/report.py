"""`kappa-rllib report`: the paper's tables and figures from a folder of Tune results.

Reads what Tune wrote (every trial folder holding `params.json` and `result.json`), re-runs
nothing, and writes:

* `table.md`, `table.csv`, `table.tex` - per environment (and C_FA) the paper's Table 1/2
  columns: kappa_best, kappa = 0, the kappa = 1 baseline (DQN / TRPO), the naive N_kappa = T
  schedule at its best kappa, GAE at its best lambda; each cell mean +- 1.96 std / sqrt(n) over
  seeds with n, the best entries in bold (every cell whose interval overlaps the best one's, as
  the paper marks ties), and the paper's number for the same cell beside it where it has one
  (`kappa_rllib/data/paper_tables.csv`).
* `iqm.md`, `iqm.csv` - the same cells by interquartile mean with 95% stratified-bootstrap CIs
  (`rliable`), per environment and, where every environment has the same seeds per cell,
  aggregated over environments on min-max normalised scores.
* `lower_gamma.md` - runs with a discount other than the main one (the paper's Fig. 3).
* `curves_<env>[_cfa<C_FA>].png` - learning curves (mean and 95% band per kappa over seeds, the
  kappa = 1 baseline dashed), x = env steps; `heatmap_<env>_<variant>.png` - final score over
  kappa x C_FA where C_FA varies.
* `scores.csv` - every run's settings and score.

A run's score is the paper's final training performance: the mean raw return of the last 10%
of its training episodes (at least one), from the per-episode returns every iteration reports
(`env_runners/episode_returns`; Atari returns are raw full-game scores, not clipped, not per life).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from kappa_rllib import report_adaptive
from kappa_rllib.report_data import LAST_FRACTION, Z95, Cell, Run, _pyplot, _safe, final_score  # noqa: F401

PAPER_TABLES = Path(__file__).parent / "data" / "paper_tables.csv"
PAPER_C_FA = {"dqn": 0.05, "trpo": 0.2}  # the C_FA of the paper's Tables 1 and 2 (at gamma 0.99)

# Cell columns of the paper's Tables 1 and 2, in order.
COLUMNS = ("kappa_best", "kappa_0", "baseline", "naive", "gae")
COLUMN_TITLES = {
    "kappa_best": "kappa_best", "kappa_0": "kappa = 0", "baseline": "{base}, kappa = 1",
    "naive": "N_kappa = T, kappa_best", "gae": "GAE, lambda_best",
}
_ENV_PREFIX = "kappa_rllib:"


# ----------------------------------------------------------------------------------- loading
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
    rows = []
    for line in result_file.read_text().splitlines():
        line = line.strip()
        if line:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a row cut short: by a kill mid-write, or a full disk (then resumed rows follow)
            # A trial resumed from a checkpoint older than its last result (`tune --resume` after a
            # Ctrl-C or a crash) reports those iterations again: the resumed ones replace the rows
            # (and episodes) of the timeline that was rolled back.
            while rows and row.get("training_iteration", math.inf) <= rows[-1].get("training_iteration", -math.inf):
                rows.pop()
            rows.append(row)
    if not rows:
        return None
    episode_returns, steps, curve, kappas, variant, evaluated = [], [], [], [], "plain", []
    for row in rows:
        evaluated.append(row.get("evaluation", {}).get("env_runners", {}).get("episode_return_mean", float("nan")))
        kappas.append(row.get("kappa", {}).get("kappa", float("nan")))
        runners = row.get("env_runners", {})
        finished = runners.get("episode_returns", [])  # RLlib unwraps a one-item series to the item
        episode_returns.extend(finished if isinstance(finished, list) else [finished])
        steps.append(runners.get("num_env_steps_sampled_lifetime", row.get("num_env_steps_sampled_lifetime", 0)))
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
        steps=np.asarray(steps, dtype=float),
        curve=np.asarray(curve, dtype=float),
        eval_curve=np.asarray(evaluated, dtype=float) if np.isfinite(evaluated).any() else None,
        env_steps=int(steps[-1]) if steps else 0,
        done=bool(rows[-1].get("done", False)),
        kappa_path=np.asarray(kappas, dtype=float),
        population=_population(result_file.parent.parent),
    )


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


# ----------------------------------------------------------------------------------- tables
@dataclasses.dataclass
class EnvTable:
    """The paper's table rows for one environment at one C_FA."""

    env: str
    family: str
    c_fa: float | None
    gamma: float
    rows: dict  # variant -> {column: Cell}; shared columns (baseline, gae) under variant ""
    best: set  # {(variant, column)} marked best (ties included)
    every: list = dataclasses.field(default_factory=list)  # (row name, kappa or lambda, Cell) for every value run


def _kappa_variants(runs: list[Run]) -> list[str]:
    """The kappa variants among `runs`: kappa-pi, kappa-vi, then others (e.g. a phi_fit setting)."""
    found = {r.variant for r in runs if r.variant != "plain"}
    return sorted(found, key=lambda v: (v not in ("kappa-pi", "kappa-vi"), v))


def _dedupe_by_seed(runs: list[Run]) -> list[Run]:
    seen, out = set(), []
    for r in runs:
        if r.seed not in seen:
            seen.add(r.seed)
            out.append(r)
    return out


def _param_cells(runs: list[Run], param) -> list[Cell]:
    by_param = defaultdict(list)
    for r in runs:
        by_param[param(r)].append(r.score)
    return [Cell(np.asarray(s), p) for p, s in sorted(by_param.items())]


def _best_param_cell(runs: list[Run], param) -> Cell | None:
    cells = _param_cells(runs, param)
    return max(cells, key=lambda c: c.mean) if cells else None


def main_gamma(runs: list[Run]) -> float:
    """The discount most runs use (the paper's 0.99); other values form the lower-gamma study."""
    counts = defaultdict(int)
    for r in runs:
        counts[r.gamma] += 1
    return max(sorted(counts), key=lambda g: (counts[g], g))


def _by_env(runs: list[Run]):
    """(env, its scored runs, its main gamma) for every env, in order."""
    for env in sorted({r.env for r in runs}):
        env_runs = [r for r in runs if r.env == env and not math.isnan(r.score)]
        if env_runs:
            yield env, env_runs, main_gamma(env_runs)


def build_tables(runs: list[Run]) -> list[EnvTable]:
    """One EnvTable per (env, C_FA) among the runs at the main gamma."""
    tables = []
    for env, env_runs, gamma in _by_env(runs):
        env_runs = [r for r in env_runs if r.gamma == gamma]
        family = env_runs[0].family
        order = {"plain": 0, "kappa-pi": 1, "kappa-vi": 2}
        baseline = _dedupe_by_seed(sorted((r for r in env_runs if r.is_baseline),
                                          key=lambda r: order.get(r.variant, len(order))))
        gae = _best_param_cell([r for r in env_runs if r.is_gae], lambda r: r.lambda_)
        c_fas = sorted({r.c_fa for r in env_runs if r.c_fa is not None}) or [None]
        for c_fa in c_fas:
            rows: dict = {"": {}}
            every = [("baseline", 1.0, Cell(np.asarray([r.score for r in baseline]), 1.0))] if baseline else []
            every += [("gae", c.param, c) for c in _param_cells([r for r in env_runs if r.is_gae], lambda r: r.lambda_)]
            if baseline:
                rows[""]["baseline"] = Cell(np.asarray([r.score for r in baseline]), 1.0)
            if gae:
                rows[""]["gae"] = gae
            for variant in _kappa_variants(env_runs):
                mine = [r for r in env_runs if r.variant == variant and r.c_fa == c_fa]
                if not mine:
                    continue
                cells = {}
                # kappa_best is taken over kappa < 1: a kappa algorithm at kappa = 1 is DQN / TRPO,
                # the baseline column, and would make kappa_best >= baseline by construction
                regular = [r for r in mine if not r.naive and not r.is_baseline]
                best = _best_param_cell(regular, lambda r: r.kappa)
                if best:
                    cells["kappa_best"] = best
                zero = [r.score for r in regular if r.kappa == 0.0]
                if zero:
                    cells["kappa_0"] = Cell(np.asarray(zero), 0.0)
                naive = _best_param_cell([r for r in mine if r.naive], lambda r: r.kappa)
                if naive:
                    cells["naive"] = naive
                if cells:  # (a variant run only at kappa = 1 has only the baseline column)
                    rows[variant] = cells
                every += [(variant, c.param, c) for c in _param_cells(regular, lambda r: r.kappa)]
                every += [(f"{variant} naive", c.param, c) for c in _param_cells([r for r in mine if r.naive],
                                                                                 lambda r: r.kappa)]
            if len(rows) == 1 and not rows[""]:
                continue
            tables.append(EnvTable(env, family, c_fa, gamma, rows, _best_marks(rows), every))
    return tables


def _best_marks(rows: dict) -> set:
    cells = [(v, c, cell) for v, cols in rows.items() for c, cell in cols.items() if cell.n]
    if not cells:
        return set()
    top = max(cells, key=lambda t: t[2].mean)[2]
    return {(v, c) for v, c, cell in cells if cell is top or cell.overlaps(top)}


def _param_name(column: str) -> str:
    return "lambda" if column == "gae" else "kappa"


def _fmt(value: float, digits: int = 1) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _cell_text(cell: Cell, column: str, with_param: bool) -> str:
    text = f"{_fmt(cell.mean)} +- {_fmt(cell.ci)} (n={cell.n})"
    if with_param and cell.param is not None:
        text += f", {_param_name(column)}={cell.param:g}"
    return text


def _table_lines(tables: list[EnvTable], paper: dict):
    """(table, env label, row label, {column: (cell, text, bold, paper text)}) per printed row."""
    for t in tables:
        label = t.env + (f" (C_FA {t.c_fa:g})" if t.c_fa is not None else "")
        variants = [v for v in t.rows if v] or [""]
        for i, variant in enumerate(variants):
            cols = {}
            for column in COLUMNS:
                owner = "" if column in ("baseline", "gae") else variant
                if owner == "" and i > 0:
                    continue  # shared cells are printed on the environment's first row, as in the paper
                cell = t.rows.get(owner, {}).get(column)
                if cell is None:
                    continue
                same_setup = t.family in PAPER_C_FA and t.gamma == 0.99 and t.c_fa in (None, PAPER_C_FA[t.family])
                p = paper.get((t.env, owner, column)) if same_setup else None
                p_text = ""
                if p:
                    p_text = f"{p[0]:g} +- {p[1]:g}"
                    if column not in ("kappa_0", "baseline"):
                        p_text += f", {_param_name(column)}={p[2]:g}"
                cols[column] = (cell, _cell_text(cell, column, column not in ("kappa_0", "baseline")),
                                (owner, column) in t.best, p_text)
            yield t, label, variant or "-", cols


def write_tables(tables: list[EnvTable], out: Path, paper: dict, left_out: int = 0) -> list[Path]:
    base = {"dqn": "DQN", "trpo": "TRPO", "ppo": "PPO", "appo": "APPO"}
    header_cols = lambda fam: [COLUMN_TITLES[c].format(base=base.get(fam, "baseline")) for c in COLUMNS]
    md = ["# Final training performance",
          "",
          "Score of a run: mean return over its last 10% of training episodes. Cells: mean +- 1.96 std / sqrt(n) "
          "over seeds (n seeds). **Bold**: the best cell of the environment and every cell whose interval "
          "overlaps it. `paper:` the paper's Table 1/2 value for the same cell (MuJoCo v2 there, v5 here).",
          ""]
    if left_out:
        md += [f"{left_out} unfinished trial(s) (not `done`: running, stopped or failed) are left out; "
               "see scores.csv.", ""]
    rows_csv = []
    tex = ["\\begin{tabular}{l|l|" + "c|" * (len(COLUMNS) - 1) + "c}", "\\hline",
           "Domain & Alg. & $\\kappa_{\\mathrm{best}}$ & $\\kappa=0$ & baseline, $\\kappa=1$ & "
           "$N_\\kappa=T$, $\\kappa_{\\mathrm{best}}$ & GAE, $\\lambda_{\\mathrm{best}}$ \\\\ \\hline"]
    last_family = None
    for t, label, variant, cols in _table_lines(tables, paper):
        if t.family != last_family:
            md += ["| env | alg. | " + " | ".join(header_cols(t.family)) + " |",
                   "|---|---|" + "---|" * len(COLUMNS)]
            last_family = t.family
        md_cells, tex_cells = [], []
        for column in COLUMNS:
            if column not in cols:
                md_cells.append("")
                tex_cells.append("")
                continue
            cell, text, bold, p_text = cols[column]
            md_cells.append((f"**{text}**" if bold else text) + (f"<br>paper: {p_text}" if p_text else ""))
            tex_text = text.replace("+-", "$\\pm$").replace("kappa=", "$\\kappa$=").replace("lambda=", "$\\lambda$=")
            tex_cells.append(f"\\textbf{{{tex_text}}}" if bold else tex_text)
            rows_csv.append({
                "env": t.env, "c_fa": "" if t.c_fa is None else t.c_fa, "gamma": t.gamma,
                "row": "" if column in ("baseline", "gae") else variant, "column": column,
                "param": "" if cell.param is None else cell.param, "n": cell.n, "mean": cell.mean, "ci95": cell.ci,
                "best": int(bold), "paper": p_text,
            })
        md.append(f"| {label} | {variant} | " + " | ".join(md_cells) + " |")
        tex.append(f"{label} & {variant} & ".replace("_", "\\_") + " & ".join(tex_cells) + " \\\\")
    md += ["", "## Every cell (not only the best)", "", "| env | alg. | C_FA | kappa / lambda | score | n |",
           "|---|---|---|---|---|---|"]
    shown = set()
    for t in tables:
        for name, param, cell in t.every:
            if name in ("baseline", "gae"):  # shared by the env's C_FA tables: once per env
                if (t.env, name, param) in shown:
                    continue
                shown.add((t.env, name, param))
            c_fa = "" if t.c_fa is None or name in ("baseline", "gae") else f"{t.c_fa:g}"
            md.append(f"| {t.env} | {name} | {c_fa} | {param:g} | {_fmt(cell.mean)} +- {_fmt(cell.ci)} | {cell.n} |")
    tex += ["\\hline", "\\end{tabular}"]
    paths = [out / "table.md", out / "table.csv", out / "table.tex"]
    paths[0].write_text("\n".join(md) + "\n")
    with open(paths[1], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["env", "c_fa", "gamma", "row", "column", "param", "n", "mean",
                                               "ci95", "best", "paper"])
        writer.writeheader()
        writer.writerows(rows_csv)
    paths[2].write_text("\n".join(tex) + "\n")
    return paths


# ----------------------------------------------------------------------------------- IQM
# The set pyproject.toml pins for rliable (arch < 8 needs pandas < 3; statsmodels pinned with them).
IQM_INSTALL = "pip install rliable 'arch>=7.2,<8' 'statsmodels>=0.14.4,<0.16' 'pandas>=2.2.3,<3'"


def iqm_unavailable() -> str | None:
    """Why rliable cannot run here (None if it can): a missing package, or one that fails at import
    (e.g. an arch/statsmodels/pandas mismatch raising TypeError inside statsmodels)."""
    try:
        from rliable import library, metrics  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure of the stack means "no IQM", not a crash
        return f"{type(e).__name__}: {' '.join(str(e).split())}"
    return None


def iqm_with_ci(score_dict: dict, reps: int = 2000, seed: int = 0) -> dict:
    """{label: (IQM, lower, upper)} by rliable over an (n_runs x n_tasks) array per label."""
    from rliable import library as rly
    from rliable import metrics

    np.random.seed(seed)  # rliable's bootstrap draws from numpy's global generator
    points, intervals = rly.get_interval_estimates(
        score_dict, lambda scores: np.array([metrics.aggregate_iqm(scores)]), reps=reps
    )
    return {k: (float(points[k][0]), float(intervals[k][0][0]), float(intervals[k][1][0])) for k in score_dict}


def write_iqm(tables: list[EnvTable], out: Path, reps: int = 2000) -> list[Path]:
    lines = ["# Interquartile mean (rliable), 95% stratified-bootstrap CIs", "",
             "| env | cell | IQM | 95% CI | n |", "|---|---|---|---|---|"]
    rows_csv = []
    per_env: dict = defaultdict(dict)
    for t in tables:
        label = t.env + (f" (C_FA {t.c_fa:g})" if t.c_fa is not None else "")
        score_dict = {}
        for variant, cols in t.rows.items():
            for column, cell in cols.items():
                if cell.n:
                    name = (f"{variant} " if variant else "") + column + (
                        f" ({_param_name(column)}={cell.param:g})" if cell.param is not None else "")
                    score_dict[name] = cell.scores.reshape(-1, 1)
                    per_env[(variant, column)][label] = cell.scores
        if not score_dict:
            continue
        for name, (iqm, lo, hi) in iqm_with_ci(score_dict, reps).items():
            n = score_dict[name].shape[0]
            lines.append(f"| {label} | {name} | {iqm:.1f} | [{lo:.1f}, {hi:.1f}] | {n} |")
            rows_csv.append({"env": label, "cell": name, "iqm": iqm, "ci_low": lo, "ci_high": hi, "n": n})
    aggregate = _normalised_aggregate(per_env, tables)
    if aggregate:
        lines += ["", "Aggregate over environments (scores min-max normalised per environment over all its "
                  "runs in the table):", "", "| cell | IQM | 95% CI | envs |", "|---|---|---|---|"]
        for name, (iqm, lo, hi, k) in aggregate.items():
            lines.append(f"| {name} | {iqm:.3f} | [{lo:.3f}, {hi:.3f}] | {k} |")
            rows_csv.append({"env": "ALL (normalised)", "cell": name, "iqm": iqm, "ci_low": lo, "ci_high": hi, "n": k})
    paths = [out / "iqm.md", out / "iqm.csv"]
    paths[0].write_text("\n".join(lines) + "\n")
    with open(paths[1], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["env", "cell", "iqm", "ci_low", "ci_high", "n"])
        writer.writeheader()
        writer.writerows(rows_csv)
    return paths


def _normalised_aggregate(per_env: dict, tables: list[EnvTable]) -> dict:
    """IQM over environments of min-max normalised scores, for cells present in >= 2 environments
    with the same number of seeds in each (rliable needs a runs x tasks array)."""
    bounds = {}
    for t in tables:
        label = t.env + (f" (C_FA {t.c_fa:g})" if t.c_fa is not None else "")
        allscores = np.concatenate([c.scores for cols in t.rows.values() for c in cols.values() if c.n] or [np.zeros(1)])
        bounds[label] = (allscores.min(), allscores.max())
    score_dict, envs_of = {}, {}
    for (variant, column), by_env in per_env.items():
        sizes = {s.size for s in by_env.values()}
        if len(by_env) < 2 or len(sizes) != 1:
            continue
        columns = []
        for label, scores in sorted(by_env.items()):
            lo, hi = bounds[label]
            columns.append((scores - lo) / (hi - lo) if hi > lo else np.zeros_like(scores))
        name = (f"{variant} " if variant else "") + column
        score_dict[name] = np.stack(columns, axis=1)
        envs_of[name] = len(by_env)
    if not score_dict:
        return {}
    return {k: (*v, envs_of[k]) for k, v in iqm_with_ci(score_dict).items()}


# ----------------------------------------------------------------------------------- lower gamma
def write_lower_gamma(runs: list[Run], out: Path) -> Path | None:
    lines, any_other = ["# Other discounts (the paper's lower-gamma study)", "",
                        "| env | algorithm | gamma | kappa / lambda | score | n |", "|---|---|---|---|---|---|"], False
    for env, env_runs, gamma0 in _by_env(runs):
        if all(r.gamma == gamma0 for r in env_runs):
            continue
        any_other = True
        groups = defaultdict(list)
        for r in env_runs:
            if r.gamma != gamma0 or r.is_baseline:
                name = "baseline (kappa = 1)" if r.is_baseline else (r.variant + (" naive" if r.naive else ""))
                groups[(name, r.gamma, r.lambda_ if r.is_gae else r.kappa)].append(r.score)
        for (name, gamma, param), scores in sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[0][1], kv[0][2])):
            cell = Cell(np.asarray(scores))
            lines.append(f"| {env} | {name} | {gamma:g} | {param:g} | {_fmt(cell.mean)} +- {_fmt(cell.ci)} | {cell.n} |")
    if not any_other:
        return None
    path = out / "lower_gamma.md"
    path.write_text("\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------------------------- plots
def _mean_band(runs: list[Run], points: int = 100, curve: str = "curve"):
    """(x, mean, 95% half-width) of the runs' `curve` ("curve": training returns; "eval_curve": RLlib's
    evaluation) on a common env-step axis; None if no run has a point of it."""
    curves = [(r.steps, getattr(r, curve)) for r in runs if getattr(r, curve) is not None]
    ends = [steps[-1] for steps, y in curves if steps.size and np.isfinite(y).any()]
    if not ends:
        return None
    x = np.linspace(0.0, min(ends), points)
    ys = []
    for steps, y in curves:
        ok = np.isfinite(y)
        if ok.sum() == 0:
            continue
        ys.append(np.interp(x, steps[ok], y[ok], left=np.nan))
    y = np.asarray(ys)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # points no seed reached yet
        mean = np.nanmean(y, axis=0)
        n = np.sum(np.isfinite(y), axis=0)
        se = np.nanstd(y, axis=0, ddof=1) / np.sqrt(np.maximum(n, 1)) if y.shape[0] > 1 else np.zeros_like(mean)
    return x, mean, np.nan_to_num(Z95 * se)


def write_curves(runs: list[Run], tables: list[EnvTable], out: Path) -> list[Path]:
    plt = _pyplot()
    paths = []
    for t in tables:
        env_runs = [r for r in runs if r.env == t.env and r.gamma == t.gamma]
        variants = [v for v in t.rows if v] or ["plain"]
        fig, axes = plt.subplots(1, len(variants), figsize=(6 * len(variants), 4), squeeze=False)
        for ax, variant in zip(axes[0], variants):
            mine = [r for r in env_runs if r.variant == variant and r.c_fa == t.c_fa and not r.is_baseline]
            groups = defaultdict(list)
            for r in mine:
                groups[("naive " if r.naive else "") + f"kappa={r.kappa:g}"].append(r)
            for r in env_runs:
                if r.is_gae:
                    groups[f"GAE lambda={r.lambda_:g}"].append(r)
            baseline = _dedupe_by_seed([r for r in env_runs if r.is_baseline])
            if baseline:
                groups["kappa=1 (baseline)"] = baseline
            for label, group in sorted(groups.items()):
                band = _mean_band(group)
                if band is None:
                    continue
                x, mean, half = band
                style = "--" if "baseline" in label else (":" if label.startswith(("naive", "GAE")) else "-")
                line, = ax.plot(x, mean, style, label=f"{label} (n={len(group)})")
                ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.15)
                evaluation = _mean_band(group, curve="eval_curve")
                if evaluation is not None:  # RLlib's periodic evaluation, beside the training curve
                    ax.plot(evaluation[0], evaluation[1], style, color=line.get_color(), alpha=0.6, marker=".",
                            markevery=10, label=f"{label} evaluation")
            title = variant if variant != "plain" else "TRPO / GAE"
            ax.set_title(f"{t.env} {title}" + (f", C_FA {t.c_fa:g}" if t.c_fa is not None else ""))
            ax.set_xlabel("env steps")
            ax.set_ylabel("episode return (mean, 95% band)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / (f"curves_{_safe(t.env)}" + (f"_cfa{t.c_fa:g}" if t.c_fa is not None else "") + ".png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def write_heatmaps(runs: list[Run], out: Path) -> list[Path]:
    plt = _pyplot()
    paths = []
    for env, env_runs, gamma in _by_env(runs):
        for variant in _kappa_variants(env_runs):
            mine = [r for r in env_runs if r.variant == variant and not r.naive and r.gamma == gamma]
            c_fas = sorted({r.c_fa for r in mine})
            kappas = sorted({r.kappa for r in mine})
            if len(c_fas) < 2:
                continue
            grid = np.full((len(kappas), len(c_fas)), np.nan)
            for i, k in enumerate(kappas):
                for j, c in enumerate(c_fas):
                    s = [r.score for r in mine if r.kappa == k and r.c_fa == c]
                    if s:
                        grid[i, j] = np.mean(s)
            fig, ax = plt.subplots(figsize=(1.6 * len(c_fas) + 2, 0.6 * len(kappas) + 2))
            im = ax.imshow(grid, cmap="viridis", aspect="auto", origin="lower")
            ax.set_xticks(range(len(c_fas)), [f"{c:g}" for c in c_fas])
            ax.set_yticks(range(len(kappas)), [f"{k:g}" for k in kappas])
            ax.set_xlabel("C_FA")
            ax.set_ylabel("kappa")
            for i in range(len(kappas)):
                for j in range(len(c_fas)):
                    if np.isfinite(grid[i, j]):
                        ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color="w", fontsize=8)
            ax.set_title(f"{env} {variant}: final score")
            fig.colorbar(im, ax=ax)
            fig.tight_layout()
            path = out / f"heatmap_{_safe(env)}_{variant}.png"
            fig.savefig(path, dpi=100)
            plt.close(fig)
            paths.append(path)
    return paths


def write_scores(runs: list[Run], out: Path, root: Path | None = None) -> Path:
    """One row per trial; its `path` relative to the experiment folder `root` (where given), so the
    file means the same wherever the folder is moved or published."""
    path = out / "scores.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env", "family", "variant", "kappa", "c_fa", "naive", "gamma", "lambda", "seed",
                         "episodes", "env_steps", "done", "score", "path"])
        for r in runs:
            writer.writerow([r.env, r.family, r.variant, r.kappa, r.c_fa, r.naive, r.gamma, r.lambda_, r.seed,
                             len(r.episode_returns), r.env_steps, r.done, r.score,
                             os.path.relpath(r.path, root) if root is not None else r.path])
    return path


def report(root, out=None, reps: int = 2000, include_unfinished: bool = False,
           notes: list | None = None) -> list[Path]:
    """Writes every output for the Tune results under `root` into `out` (default: root/report);
    returns the paths written. Trials that have not reported `done` (still running, stopped or
    failed) are left out of everything but scores.csv unless `include_unfinished`.
    Raises ValueError if `root` holds no trial results. If rliable cannot be imported, the IQM files
    are skipped, everything else is written, and one line saying why is appended to `notes`. A bucket URI `root` (s3://...) is read
    through a local mirror of its result files, `out`/results (`out` default: ./<name>_report)."""
    from kappa_rllib import storage

    if storage.is_uri(root):
        out = Path(out) if out else Path(str(root).rstrip("/").rsplit("/", 1)[-1] + "_report")
        root = storage.mirror_results(str(root), out / "results")
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"experiment folder {str(root)!r} does not exist")
    runs = load_runs(root)
    if not runs:
        raise ValueError(f"{root}: no trial results found (no params.json + result.json)")
    out = Path(out) if out else root / "report"
    out.mkdir(parents=True, exist_ok=True)
    paths = [write_scores(runs, out, root)]
    unfinished = sum(not r.done for r in runs)
    if not include_unfinished:
        runs = [r for r in runs if r.done]
        if not runs:
            raise ValueError(f"{root}: no trial has finished yet ({unfinished} running or stopped); "
                             "pass --include-unfinished to report them anyway")
    members = [r for r in runs if r.population]  # adaptive kappa: reported apart (report_adaptive)
    runs = [r for r in runs if not r.population]
    if members:
        paths += report_adaptive.write(members, runs, out)
        if not runs:
            return paths
    tables = build_tables(runs)
    paths += write_tables(tables, out, load_paper_tables(), left_out=0 if include_unfinished else unfinished)
    missing = iqm_unavailable()
    if missing is None:
        paths += write_iqm(tables, out, reps)
    elif notes is not None:
        notes.append(f"iqm.md/iqm.csv skipped: rliable does not import ({missing}); install a working set "
                     f"with: {IQM_INSTALL}")
    lower = write_lower_gamma(runs, out)
    if lower:
        paths.append(lower)
    paths += write_curves(runs, tables, out)
    paths += write_heatmaps(runs, out)
    return paths
