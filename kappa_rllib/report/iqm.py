"""Interquartile means with 95% stratified-bootstrap CIs (`rliable`): `iqm.md`, `iqm.csv`."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import SCORE_RULES
from kappa_rllib.report.tables import EnvTable, _param_name


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


def _window_note(score_window: str) -> list[str]:
    """A line naming the score rule where it is not the paper's (the default files stay as they were)."""
    return [] if score_window == "episodes" else [f"Score of a run: {SCORE_RULES[score_window]}.", ""]


def write_iqm(tables: list[EnvTable], out: Path, reps: int = 2000, score_window: str = "episodes") -> list[Path]:
    lines = ["# Interquartile mean (rliable), 95% stratified-bootstrap CIs", "", *_window_note(score_window),
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


def improvement_with_ci(pairs: dict, reps: int = 2000, seed: int = 0) -> dict:
    """{label: (P(X > Y), lower, upper)} by rliable over {label: (scores_x, scores_y)}, each an
    (n_runs x n_tasks) array: the probability that a run of X scores above a run of Y on the same task,
    averaged over tasks (a Mann-Whitney U / (n_x n_y) per task), with its stratified-bootstrap 95% CI."""
    from rliable import library as rly
    from rliable import metrics

    np.random.seed(seed)
    points, intervals = rly.get_interval_estimates(
        {k: list(v) for k, v in pairs.items()},
        lambda x, y: np.array([metrics.probability_of_improvement(x, y)]), reps=reps)
    return {k: (float(points[k][0]), float(intervals[k][0][0]), float(intervals[k][1][0])) for k in pairs}


def write_improvement(tables: list[EnvTable], out: Path, reps: int = 2000, score_window: str = "episodes") -> list[Path]:
    """`improvement.md`: the paper's second claim (Sec. 5.2), N_kappa from C_FA against the naive
    N_kappa = T: for each env and kappa variant with both cells, P(kappa_best cell > naive cell) with its
    95% CI, and over the envs where every pair has the same number of seeds. Nothing if no table has both."""
    pairs, per_variant = {}, defaultdict(list)
    for t in tables:
        label = t.env + (f" (C_FA {t.c_fa:g})" if t.c_fa is not None else "")
        for variant, cols in t.rows.items():
            best, naive = cols.get("kappa_best"), cols.get("naive")
            if best is None or naive is None or not (best.n and naive.n):
                continue
            key = f"{label} | {variant} | {best.param:g} ({best.mean:.0f}, n={best.n}) | {naive.param:g} ({naive.mean:.0f}, n={naive.n})"
            pairs[key] = (best.scores.reshape(-1, 1), naive.scores.reshape(-1, 1))
            per_variant[variant].append((best.scores, naive.scores))
    if not pairs:
        return []
    lines = ["# N_kappa from C_FA against the naive N_kappa = T (the paper's Sec. 5.2)", "",
             "P(C_FA > naive): the probability that a run of the C_FA cell (kappa_best, N_kappa from C_FA) "
             "ends above a run of the naive cell (N_kappa = T at its best kappa), rliable's probability of "
             "improvement with its 95% stratified-bootstrap CI. 0.5: no difference; a CI above 0.5: C_FA better.",
             "", *_window_note(score_window), "| env | variant | C_FA cell: kappa (mean, n) | naive cell: kappa (mean, n) | P(C_FA > naive) | 95% CI |",
             "|---|---|---|---|---|---|"]
    for key, (p, lo, hi) in improvement_with_ci(pairs, reps).items():
        lines.append(f"| {key} | {p:.2f} | [{lo:.2f}, {hi:.2f}] |")
    overall = {}
    for variant, cells in per_variant.items():
        sizes = {(b.size, n.size) for b, n in cells}
        if len(cells) >= 2 and len(sizes) == 1:
            overall[f"{variant}, {len(cells)} envs"] = (np.stack([b for b, _ in cells], axis=1),
                                                         np.stack([n for _, n in cells], axis=1))
    if overall:
        lines += ["", "Over the envs (the mean of the per-env probabilities; the bootstrap resamples runs within each env):",
                  "", "| variant | P(C_FA > naive) | 95% CI |", "|---|---|---|"]
        for key, (p, lo, hi) in improvement_with_ci(overall, reps).items():
            lines.append(f"| {key} | {p:.2f} | [{lo:.2f}, {hi:.2f}] |")
    path = out / "improvement.md"
    path.write_text("\n".join(lines) + "\n")
    return [path]


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
