"""Interquartile means with 95% stratified-bootstrap CIs (`rliable`): `iqm.md`, `iqm.csv`; probabilities of
improvement (`rliable`) with the same CIs: `improvement.md`."""

from __future__ import annotations

import csv
import dataclasses
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import SCORE_RULES, Cell
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
        lines += _left_out_note(per_env, aggregate, "seeds")
    paths = [out / "iqm.md", out / "iqm.csv"]
    paths[0].write_text("\n".join(lines) + "\n")
    with open(paths[1], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["env", "cell", "iqm", "ci_low", "ci_high", "n"])
        writer.writeheader()
        writer.writerows(rows_csv)
    if aggregate and _plots_unavailable() is None:  # (rliable's plot_utils needs seaborn: no figure without it)
        families = {t.family for t in tables}
        paths.extend(write_iqm_figure(aggregate, out, base=_BASE.get(families.pop()) if len(families) == 1 else None))
    return paths


_BASE = {"dqn": "DQN", "trpo": "TRPO", "ppo": "PPO", "appo": "APPO"}
_WORDS = (("kappa-pi", "κ-PI"), ("kappa-vi", "κ-VI"), ("kappa_best", "κ_best"), ("kappa_0", "κ = 0"),
          ("naive", "naive N_κ = T"), ("gae", "GAE λ_best"))


def cell_title(name: str, base: str | None = None) -> str:
    """An aggregate cell's name as the figure shows it: "kappa-pi kappa_best" -> "κ-PI κ_best"."""
    if name == "baseline":
        return f"{base or 'baseline'} (κ = 1)"
    for word, shown in _WORDS:
        name = name.replace(word, shown)
    return name


def iqm_figure(aggregate: dict, base: str | None = None, narrow: bool = False):
    """rliable's `plot_interval_estimates` of the aggregate IQM over environments ({cell: (IQM, lower, upper,
    envs)}, `_normalised_aggregate`), the best cell on top: a bar from lower to upper and a tick at the IQM.
    `narrow`: the phone's drawing, NARROW_WIDTH_IN wide, each cell's name written above its bar rather than
    beside it (beside, the names took half of a phone's width and the text drew ~4 px high)."""
    from rliable import plot_utils

    from kappa_rllib.report.data import _pyplot
    from kappa_rllib.report.plots import LABEL_FONT_PT, NARROW_WIDTH_IN, TICK_FONT_PT

    plt = _pyplot()
    order = sorted(aggregate, key=lambda name: aggregate[name][0])  # rliable draws the first at the bottom
    labels = {name: f"{cell_title(name, base)} ({aggregate[name][3]} envs)" for name in order}
    points = {labels[k]: np.array([aggregate[k][0]]) for k in order}
    intervals = {labels[k]: np.array([[aggregate[k][1]], [aggregate[k][2]]]) for k in order}
    fig, ax = plot_utils.plot_interval_estimates(points, intervals, metric_names=["IQM"],
                                                 algorithms=[labels[k] for k in order], subfigure_width=6.0,
                                                 row_height=0.45, xlabel="",
                                                 **({"interval_height": 0.4} if narrow else {}))
    title = "IQM over environments, 95% stratified-bootstrap CIs"
    ax.set_title(title.replace(", ", ",\n") if narrow else title, fontsize=LABEL_FONT_PT)
    ax.tick_params(labelsize=TICK_FONT_PT)
    ax.set_xlabel("IQM of min-max normalised scores", fontsize=LABEL_FONT_PT)
    if narrow:  # the names above the bars, at the axis' left edge
        left = min(aggregate[k][1] for k in order)
        right = max(aggregate[k][2] for k in order)
        ax.set_xlim(left - 0.05 * (right - left), right + 0.05 * (right - left))
        ax.set_ylim(-0.5, len(order) - 0.1)
        ax.set_yticks(range(len(order)), [""] * len(order))
        ax.tick_params(axis="y", length=0)
        for i, name in enumerate(order):
            ax.text(ax.get_xlim()[0], i + 0.24, labels[name], fontsize=TICK_FONT_PT, va="bottom", ha="left",
                    gid=f"label|{name}")
        fig.set_size_inches(NARROW_WIDTH_IN, 0.62 * len(order) + 1.5)
    else:
        fig.set_size_inches(8.0, 0.45 * len(order) + 1.4)
    fig.tight_layout()
    return fig


def write_iqm_figure(aggregate: dict, out: Path, base: str | None = None) -> list[Path]:
    """iqm.png and the phone's iqm_narrow.png."""
    from kappa_rllib.report.plots import save_two_widths

    return save_two_widths(lambda narrow: iqm_figure(aggregate, base, narrow=narrow), out, "iqm",
                           bbox_inches="tight")


def _plots_unavailable() -> str | None:
    try:
        from rliable import plot_utils  # noqa: F401
    except Exception as e:  # noqa: BLE001 - a broken plotting stack means no iqm.png, not a failed report
        return f"{type(e).__name__}: {e}"
    return None


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


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One question improvement.md answers: P(X > Y) for the cells `pair` picks in each table row."""

    title: str  # the section's heading
    intro: str  # what the probability is
    x: str  # short names in "P(x > y)"
    y: str
    x_cell: str  # column headers of the two cells
    y_cell: str
    # (table, variant, its cells) -> the (X, Y) cells, a note saying why the row compares nothing, or None
    # (no row: a cell is missing)
    pair: Callable[[EnvTable, str, dict], tuple[Cell, Cell] | str | None]


def _baseline_pair(t: EnvTable, variant: str, cols: dict):
    return cols.get("kappa_best"), t.shared(variant, "baseline")  # DQN / TRPO sampled as the variant was


def _naive_pair(t: EnvTable, variant: str, cols: dict):
    return cols.get("kappa_best"), cols.get("naive")


def _gae_pair(t: EnvTable, variant: str, cols: dict):
    return cols.get("kappa_best"), t.shared(variant, "gae")  # GAE sampled as the variant was


def _kappa_0_pair(t: EnvTable, variant: str, cols: dict):
    # the best cell of 0 < kappa <= 1 against the one-step kappa = 0: where the table's kappa_best is 0 itself,
    # comparing it with kappa = 0 would compare a cell with itself. kappa = 1 is the baseline (DQN / TRPO: a
    # kappa algorithm at kappa = 1 is exactly it), sampled as the variant was: the paper's kappa_best ranges
    # over [0, 1], and on Swimmer it is 1 (Table 2)
    multi = [cell for name, kappa, cell in t.every if name == variant and 0.0 < kappa < 1.0 and cell.n]
    baseline = t.shared(variant, "baseline")
    if baseline is not None and baseline.n:
        multi.append(baseline)
    return max(multi, key=lambda cell: cell.mean, default=None), cols.get("kappa_0")


_IMPROVEMENT_CI = "rliable's probability of improvement with its 95% stratified-bootstrap CI. 0.5: no difference"
COMPARISONS = (
    Comparison("kappa_best against the baseline, kappa = 1 (the paper's Tables 1 and 2)",
               "P(kappa_best > baseline): the probability that a run of the kappa_best cell (the variant's best "
               "mean over the kappa < 1 run, N_kappa from C_FA) ends above a run of the baseline (DQN or TRPO: "
               "a kappa algorithm at kappa = 1 is it exactly), " + _IMPROVEMENT_CI +
               "; a CI above 0.5: kappa_best better.",
               "kappa_best", "baseline", "kappa_best cell: kappa", "baseline cell: kappa", _baseline_pair),
    Comparison("N_kappa from C_FA against the naive N_kappa = T (the paper's Sec. 5.2)",
               "P(C_FA > naive): the probability that a run of the C_FA cell (kappa_best, N_kappa from C_FA) "
               "ends above a run of the naive cell (N_kappa = T at its best kappa), " + _IMPROVEMENT_CI +
               "; a CI above 0.5: C_FA better.",
               "C_FA", "naive", "C_FA cell: kappa", "naive cell: kappa", _naive_pair),
    Comparison("kappa_best against GAE at lambda_best (the paper's Table 2)",
               "P(kappa_best > GAE): the probability that a run of the kappa_best cell (N_kappa from C_FA) ends "
               "above a run of GAE at its best lambda < 1 (the lambda with the best mean among those run; TRPO, "
               "lambda = 1, is not GAE), " + _IMPROVEMENT_CI + "; a CI above 0.5: kappa_best better.",
               "kappa_best", "GAE", "kappa_best cell: kappa", "GAE cell: lambda", _gae_pair),
    Comparison("kappa_best against kappa = 0 (the paper's Table 2)",
               "P(kappa_best > kappa = 0): the probability that a run of the kappa_best cell ends above a run of "
               "the same variant's kappa = 0 cell (the one-step greedy policy, N_kappa from C_FA), "
               + _IMPROVEMENT_CI + "; a CI above 0.5: kappa_best better. kappa_best here is the best cell of "
               "0 < kappa <= 1, kappa = 1 being the baseline sampled as the variant was (a kappa algorithm at "
               "kappa = 1 is it exactly; the paper's kappa_best on Swimmer is 1), where the sections above take "
               "kappa < 1 only. Where kappa = 0 has the best mean of all, the table's kappa_best is that cell "
               "itself: this row then compares the next best with it.",
               "kappa_best", "kappa = 0", "kappa_best cell (0 < kappa <= 1): kappa", "kappa = 0 cell: kappa",
               _kappa_0_pair),
)


def _improvement_section(tables: list[EnvTable], comparison: Comparison, reps: int, score_window: str) -> list[str]:
    """One comparison's lines: P(X > Y) with its 95% CI for each env and kappa variant with both cells
    (a note where `comparison.pair` gives one), and over the envs (those whose pairs have the number of seeds the most
    envs share: `largest_same_size_group`; the others named in a line). No lines if no table has a row."""
    pairs, notes, order, per_variant = {}, {}, [], defaultdict(dict)  # order: every row's key, tables' order
    for t in tables:
        label = t.env + (f" (C_FA {t.c_fa:g})" if t.c_fa is not None else "")
        for variant, cols in t.rows.items():
            picked = comparison.pair(t, variant, cols)
            if isinstance(picked, str):
                best = cols["kappa_best"]
                key = f"{label} | {variant} | {best.param:g} ({best.mean:.0f}, n={best.n}) | (the same cell)"
                notes[key] = picked
                order.append(key)
                continue
            x, y = picked
            if x is None or y is None or not (x.n and y.n):
                continue
            key = f"{label} | {variant} | {x.param:g} ({x.mean:.0f}, n={x.n}) | {y.param:g} ({y.mean:.0f}, n={y.n})"
            pairs[key] = (x.scores.reshape(-1, 1), y.scores.reshape(-1, 1))
            order.append(key)
            per_variant[variant][label] = (x.scores, y.scores)
    if not pairs and not notes:
        return []
    p_name = f"P({comparison.x} > {comparison.y})"
    lines = [f"# {comparison.title}", "", comparison.intro, "", *_window_note(score_window),
             f"| env | variant | {comparison.x_cell} (mean, n) | {comparison.y_cell} (mean, n) | {p_name} | 95% CI |",
             "|---|---|---|---|---|---|"]
    probabilities = improvement_with_ci(pairs, reps) if pairs else {}
    for key in order:
        if key in notes:
            lines.append(f"| {key} | {notes[key]} | - |")
        else:
            p, lo, hi = probabilities[key]
            lines.append(f"| {key} | {p:.2f} | [{lo:.2f}, {hi:.2f}] |")
    overall, left_out = {}, []
    for variant, cells in per_variant.items():
        kept, left = largest_same_size_group(cells, lambda pair: (pair[0].size, pair[1].size))
        if len(kept) >= 2:
            overall[f"{variant}, {len(kept)} envs"] = (np.stack([b for b, _ in kept.values()], axis=1),
                                                        np.stack([n for _, n in kept.values()], axis=1))
            x_n, y_n = (scores.size for scores in next(iter(kept.values())))
            left_out += [f"{variant}: {label} ({x} and {y} seeds, against {x_n} and {y_n})"
                         for label, (x, y) in left.items()]
    if overall:
        lines += ["", "Over the envs (the mean of the per-env probabilities; the bootstrap resamples runs within each env):",
                  "", f"| variant | {p_name} | 95% CI |", "|---|---|---|"]
        for key, (p, lo, hi) in improvement_with_ci(overall, reps).items():
            lines.append(f"| {key} | {p:.2f} | [{lo:.2f}, {hi:.2f}] |")
        if left_out:
            lines += ["", "Left out of the rows over the envs for another number of seeds (rliable's bootstrap takes "
                      "the same number in each environment): " + "; ".join(left_out) + "."]
    return lines


def write_improvement(tables: list[EnvTable], out: Path, reps: int = 2000, score_window: str = "episodes") -> list[Path]:
    """`improvement.md`: rliable's probability of improvement for each of `COMPARISONS` that has a row, a
    section each: kappa_best against the baseline (kappa = 1: DQN or TRPO, the paper's headline); the paper's
    second claim (Sec. 5.2), N_kappa from C_FA against the naive N_kappa = T
    (P(kappa_best cell > naive cell)); kappa_best against GAE at its best lambda < 1; the best cell of
    0 < kappa <= 1 (the baseline is kappa = 1) against the same variant's kappa = 0. Each per env and kappa
    variant with both cells, with its 95% CI, and over the envs whose pairs have the number of seeds the most envs share.
    Nothing if no table has a row for any of them."""
    sections = [lines for c in COMPARISONS if (lines := _improvement_section(tables, c, reps, score_window))]
    if not sections:
        return []
    path = out / "improvement.md"
    path.write_text("\n\n".join("\n".join(lines) for lines in sections) + "\n")
    return [path]


def _normalised_aggregate(per_env: dict, tables: list[EnvTable]) -> dict:
    """IQM over environments of min-max normalised scores, for cells present in >= 2 environments with the
    same number of seeds (rliable needs a runs x tasks array): the envs of the number the most envs share."""
    bounds = {}
    for t in tables:
        label = t.env + (f" (C_FA {t.c_fa:g})" if t.c_fa is not None else "")
        allscores = np.concatenate([c.scores for cols in t.rows.values() for c in cols.values() if c.n] or [np.zeros(1)])
        bounds[label] = (allscores.min(), allscores.max())
    score_dict, envs_of = {}, {}
    for (variant, column), by_env in per_env.items():
        kept, _ = largest_same_size_group(by_env, lambda scores: scores.size)
        if len(kept) < 2:
            continue
        columns = []
        for label, scores in sorted(kept.items()):
            lo, hi = bounds[label]
            columns.append((scores - lo) / (hi - lo) if hi > lo else np.zeros_like(scores))
        name = (f"{variant} " if variant else "") + column
        score_dict[name] = np.stack(columns, axis=1)
        envs_of[name] = len(kept)
    if not score_dict:
        return {}
    return {k: (*v, envs_of[k]) for k, v in iqm_with_ci(score_dict).items()}


def _left_out_note(per_env: dict, aggregate: dict, unit: str) -> list[str]:
    """Lines naming, for each aggregated cell, the envs left out for another number of runs (none: no lines)."""
    cells_of: dict = defaultdict(list)  # (env, its runs, the aggregate's runs) -> the cells leaving it out
    for (variant, column), by_env in per_env.items():
        name = (f"{variant} " if variant else "") + column
        kept, left = largest_same_size_group(by_env, lambda scores: scores.size)
        if name in aggregate:
            n = next(iter(kept.values())).size
            for label, k in left.items():
                cells_of[(label, k, n)].append(name)
    if not cells_of:
        return []
    notes = [f"{label}, {k} {unit} against {n}: " + ("every cell" if len(names) == len(aggregate) else ", ".join(names))
             for (label, k, n), names in sorted(cells_of.items())]
    return ["", "Left out of the aggregate for another number of " + unit + " (rliable's bootstrap takes the "
            "same number in each environment; their own rows are above): " + "; ".join(notes) + "."]


def largest_same_size_group(by_env: dict, size: Callable) -> tuple[dict, dict]:
    """The envs of `by_env` ({env: scores}) an aggregate over environments can take together, and those it
    leaves out: rliable's stratified bootstrap draws from a runs x tasks array, so every env it takes has the
    same number of runs. The kept group is the size shared by the most envs (ties: the larger size); the
    left-out envs keep their own rows. Returns ({env: scores} kept, {env: size} left out)."""
    groups: dict = defaultdict(list)
    for label, scores in by_env.items():
        groups[size(scores)].append(label)
    if not groups:
        return {}, {}
    chosen = max(groups, key=lambda n: (len(groups[n]), n))
    kept = {label: by_env[label] for label in groups[chosen]}
    return kept, {label: size(scores) for label, scores in by_env.items() if label not in kept}


# ----------------------------------------------------------------------------------- lower gamma
