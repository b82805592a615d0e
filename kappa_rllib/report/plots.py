"""Figures: learning curves (training and RLlib's evaluation) and heat-maps over kappa x C_FA (the
lower-gamma study's figure is report/lower_gamma.py's, the figure against the paper report/vs_paper.py's)."""

from __future__ import annotations

import textwrap
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import Run, _pyplot, _safe, one_per_cell, shared_row, t95
from kappa_rllib.report.tables import EnvTable, _by_env, _fmt, _kappa_variants


# ----------------------------------------------------------------------------------- plots
# Sizes a figure is drawn at: one panel per row, PANEL_WIDTH_IN wide, saved at PLOT_DPI. A page shows
# a figure at most as wide as its text column (~690 px at a 1400 px window): a font of F points
# there is F * 690 / (72 * PANEL_WIDTH_IN) px high, so the smallest font (SMALLEST_FONT_PT, the
# legends' and tick labels') reads at ~12 px. tests/test_docs.py reads these numbers.
PLOT_DPI = 150
PANEL_WIDTH_IN = 7.0
PANEL_HEIGHT_IN = 4.2
TITLE_FONT_PT = 11
LABEL_FONT_PT = 10
LEGEND_FONT_PT = 9
TICK_FONT_PT = 9
ANNOTATION_FONT_PT = 10
SMALLEST_FONT_PT = min(LEGEND_FONT_PT, TICK_FONT_PT, LABEL_FONT_PT, TITLE_FONT_PT, ANNOTATION_FONT_PT)
# The two-column figures (vs_paper.png, lower_gamma_<env>.png): shown 880 px wide (the README's column), 9 pt
# text is 12 px high. Their one-column drawings for a phone (`*_narrow.png`): shown ~350 px wide, 9 pt text is
# ~11 px high (a two-column figure there: ~5 px). Pages pick one by width, under 600 px the narrow one: a <picture>
# in the README, the kappa-wide / kappa-narrow classes (docs/stylesheets/extra.css) in the docs.
FIGURE_WIDTH_IN = 9.0
NARROW_WIDTH_IN = 4.0


def save_two_widths(figure, out, stem: str, **savefig) -> list:
    """`<stem>.png` drawn by figure(narrow=False) and `<stem>_narrow.png` by figure(narrow=True), each saved at
    PLOT_DPI (and `savefig`'s other options) and closed."""
    from kappa_rllib.report.data import _pyplot

    paths = []
    for narrow, suffix in ((False, ""), (True, "_narrow")):
        fig = figure(narrow=narrow)
        paths.append(out / f"{stem}{suffix}.png")
        fig.savefig(paths[-1], dpi=PLOT_DPI, **savefig)
        _pyplot().close(fig)
    return paths
TITLE_WIDTH_CHARS = 70  # a longer title wraps onto a second line (a sub-env's kwargs)
NARROW_TITLE_CHARS = 40  # the same in a NARROW_WIDTH_IN drawing


def _title(ax, text: str, width: int = TITLE_WIDTH_CHARS) -> None:
    ax.set_title("\n".join(textwrap.wrap(text, width)), fontsize=TITLE_FONT_PT)


def _style(ax, xlabel: str, ylabel: str) -> None:
    ax.set_xlabel(xlabel, fontsize=LABEL_FONT_PT)
    ax.set_ylabel(ylabel, fontsize=LABEL_FONT_PT)
    ax.tick_params(labelsize=TICK_FONT_PT)


BAND_LABEL = "episode return (mean, Student-t 95% band)"  # the curves' y axis (plots._mean_band)


def _mean_band(runs: list[Run], points: int = 100, curve: str = "curve"):
    """(x, mean, half-width of the Student-t 95% interval: t_{0.975, n-1} s / sqrt(n) over the n runs that reached
    the point, 0 where fewer than 2 did) of the runs' `curve` ("curve": training returns; "eval_curve": RLlib's
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
    return x, mean, np.nan_to_num(t95(n) * se)


def curves_figure(t: EnvTable, runs: list[Run], narrow: bool = False):
    """One panel a variant, one above the other, of the table's env: each cell's training curve (mean over seeds,
    Student-t 95% band), the kappa = 1 baseline and GAE beside the kappa cells, one run a seed of each cell (as the
    table: data.one_per_cell). `narrow`: the phone's drawing, NARROW_WIDTH_IN wide, its legend under its panel
    (inside, it would cover the curves)."""
    plt = _pyplot()
    env_runs = one_per_cell([r for r in runs if r.env == t.env and r.gamma == t.gamma])
    variants = [v for v in t.rows if v] or ["plain"]
    width, height = (NARROW_WIDTH_IN, PANEL_HEIGHT_IN + 1.0) if narrow else (PANEL_WIDTH_IN, PANEL_HEIGHT_IN)
    fig, axes = plt.subplots(len(variants), 1, figsize=(width, height * len(variants)), squeeze=False)
    for ax, variant in zip(axes[:, 0], variants):
        mine = [r for r in env_runs if r.variant == variant and r.c_fa == t.c_fa and not r.is_baseline
                and not r.is_plain]  # (GAE runs are drawn as GAE below)
        groups = defaultdict(list)
        for r in mine:
            groups[("naive " if r.naive else "") + f"kappa={r.kappa:g}"].append(r)
        row = t.shared_row.get(variant, "")  # the baseline and GAE sampled as this variant was
        for r in env_runs:
            if r.is_gae and shared_row(r.sampling) == row:
                groups[f"GAE lambda={r.lambda_:g}"].append(r)
        baseline = [r for r in env_runs if r.is_baseline and shared_row(r.sampling) == row]
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
        _title(ax, f"{t.env} {title}" + (f", C_FA {t.c_fa:g}" if t.c_fa is not None else ""),
               NARROW_TITLE_CHARS if narrow else TITLE_WIDTH_CHARS)
        _style(ax, "env steps", BAND_LABEL)
        if narrow:
            ax.legend(fontsize=LEGEND_FONT_PT, framealpha=0.8, loc="upper center", bbox_to_anchor=(0.5, -0.16))
        else:
            ax.legend(fontsize=LEGEND_FONT_PT, framealpha=0.8)
    fig.tight_layout()
    return fig


ONE_PANEL_CELLS = 4  # an env with this many kappa cells or more also gets them side by side in one panel


def _kappa_cells(t: EnvTable, runs: list[Run]) -> dict:
    """{label: runs} of the table's kappa cells (variant, naive schedule, kappa) at its C_FA and gamma, one run a
    seed (data.one_per_cell)."""
    cells = defaultdict(list)
    for r in one_per_cell(runs):
        if r.env == t.env and r.gamma == t.gamma and r.c_fa == t.c_fa and not r.is_plain and not r.is_baseline:
            cells[f"{r.variant}{' naive' if r.naive else ''}, kappa={r.kappa:g}"].append(r)
    return dict(sorted(cells.items()))


def one_panel_figure(t: EnvTable, runs: list[Run], narrow: bool = False):
    """Every kappa cell of the table's env in one panel (mean over seeds, Student-t 95% band), with the kappa = 1
    baseline: an ablation's cells read side by side on one scale. The legend under the panel (its labels are long)."""
    plt = _pyplot()
    cells = _kappa_cells(t, runs)
    baseline = one_per_cell([r for r in runs if r.env == t.env and r.gamma == t.gamma and r.is_baseline
                             and not r.sampling])
    if baseline:
        cells["kappa=1 (baseline)"] = baseline
    width = NARROW_WIDTH_IN if narrow else PANEL_WIDTH_IN
    legend_rows = sum(len(textwrap.wrap(label, 40 if narrow else 80)) for label in cells)
    fig, ax = plt.subplots(figsize=(width, PANEL_HEIGHT_IN + 0.22 * legend_rows + 0.4))
    for label, group in cells.items():
        band = _mean_band(group)
        if band is None:
            continue
        x, mean, half = band
        style = "--" if "baseline" in label else (":" if " naive" in label else "-")
        line, = ax.plot(x, mean, style, label="\n".join(textwrap.wrap(f"{label} (n={len(group)})",
                                                                       40 if narrow else 80)))
        ax.fill_between(x, mean - half, mean + half, color=line.get_color(), alpha=0.12)
    _title(ax, f"{t.env}, every kappa cell" + (f", C_FA {t.c_fa:g}" if t.c_fa is not None else ""),
           NARROW_TITLE_CHARS if narrow else TITLE_WIDTH_CHARS)
    _style(ax, "env steps", BAND_LABEL)
    ax.legend(fontsize=LEGEND_FONT_PT, framealpha=0.8, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.tight_layout()
    return fig


def write_curves(runs: list[Run], tables: list[EnvTable], out: Path) -> list[Path]:
    """curves_<env>[_cfa<C_FA>].png, and the phone's drawing of each, ..._narrow.png; for an env with
    ONE_PANEL_CELLS kappa cells or more (an ablation), also cells_<env>[_cfa<C_FA>].png: all of them in one panel."""
    paths = []
    for t in tables:
        suffix = f"{_safe(t.env)}" + (f"_cfa{t.c_fa:g}" if t.c_fa is not None else "")
        paths += save_two_widths(lambda narrow, t=t: curves_figure(t, runs, narrow=narrow), out, f"curves_{suffix}")
        if len(_kappa_cells(t, runs)) >= ONE_PANEL_CELLS:
            paths += save_two_widths(lambda narrow, t=t: one_panel_figure(t, runs, narrow=narrow), out,
                                     f"cells_{suffix}", bbox_inches="tight")
    return paths


def heatmap_grid(mine: list[Run], baseline: list[Run]):
    """(kappas, C_FAs, grid of mean scores [kappa x C_FA], the kappa = 1 baseline's mean or None) for one
    env and variant, one run a seed of each cell (data.one_per_cell). The baseline (DQN / TRPO) has no C_FA: it is
    left out of the grid, whatever C_FA its config carried, and drawn as one row spanning every C_FA."""
    cells = [r for r in one_per_cell(mine) if not r.is_baseline]
    c_fas = sorted({r.c_fa for r in cells})
    kappas = sorted({r.kappa for r in cells})
    grid = np.full((len(kappas), len(c_fas)), np.nan)
    for i, k in enumerate(kappas):
        for j, c in enumerate(c_fas):
            s = [r.score for r in cells if r.kappa == k and r.c_fa == c]
            if s:
                grid[i, j] = np.mean(s)
    base = one_per_cell(baseline)
    return kappas, c_fas, grid, (float(np.mean([r.score for r in base])) if base else None)


def write_heatmaps(runs: list[Run], out: Path) -> list[Path]:
    plt = _pyplot()
    paths = []
    for env, env_runs, gamma in _by_env(runs):
        for variant in _kappa_variants(env_runs):
            mine = [r for r in env_runs if r.variant == variant and not r.naive and r.gamma == gamma]
            sampling = next(r.sampling for r in env_runs if r.variant == variant)
            # the baseline cell sampled as the variant was (the table's: EnvTable.shared)
            baseline = [r for r in env_runs if r.is_baseline and r.gamma == gamma and r.sampling == sampling]
            kappas, c_fas, grid, base = heatmap_grid(mine, baseline)
            if len(c_fas) < 2:
                continue
            rows = len(kappas) + (base is not None)
            fig, ax = plt.subplots(figsize=(max(PANEL_WIDTH_IN * 0.75, 1.6 * len(c_fas) + 2), 0.6 * rows + 2))
            shown = grid if base is None else np.vstack([grid, np.full((1, len(c_fas)), base)])
            im = ax.imshow(shown, cmap="viridis", aspect="auto", origin="lower")
            ax.set_xticks(range(len(c_fas)), [f"{c:g}" for c in c_fas])
            ax.set_yticks(range(rows), [f"{k:g}" for k in kappas] + (["1 (baseline)"] if base is not None else []))
            _style(ax, "C_FA", "kappa")
            for i in range(len(kappas)):
                for j in range(len(c_fas)):
                    if np.isfinite(grid[i, j]):
                        ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color="w",
                                fontsize=ANNOTATION_FONT_PT)
            if base is not None:  # one row across every C_FA: the baseline does not use it
                ax.axhline(len(kappas) - 0.5, color="w", lw=3)
                ax.text((len(c_fas) - 1) / 2, len(kappas), f"{base:.0f}  (kappa = 1: no C_FA, one cell for all)",
                        ha="center", va="center", color="w", fontsize=ANNOTATION_FONT_PT)
            _title(ax, f"{env} {variant}: final score")
            cbar = fig.colorbar(im, ax=ax)
            cbar.ax.tick_params(labelsize=TICK_FONT_PT)
            fig.tight_layout()
            path = out / f"heatmap_{_safe(env)}_{variant}.png"
            fig.savefig(path, dpi=PLOT_DPI)
            plt.close(fig)
            paths.append(path)
    return paths
