"""Figures: learning curves (training and RLlib's evaluation), heat-maps over kappa x C_FA, and the
lower-gamma study (the paper's Fig. 3)."""

from __future__ import annotations

import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import Z95, Cell, Run, _pyplot, _safe, shared_row
from kappa_rllib.report.tables import EnvTable, _by_env, _dedupe_by_seed, _fmt, _kappa_variants


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
                name = (f"baseline (kappa = 1{', ' + r.sampling if r.sampling else ''})" if r.is_baseline
                        else (r.variant + (" naive" if r.naive else "")))
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
            mine = [r for r in env_runs if r.variant == variant and r.c_fa == t.c_fa and not r.is_baseline
                    and not r.is_plain]  # (GAE runs are drawn as GAE below)
            groups = defaultdict(list)
            for r in mine:
                groups[("naive " if r.naive else "") + f"kappa={r.kappa:g}"].append(r)
            row = t.shared_row.get(variant, "")  # the baseline and GAE sampled as this variant was
            for r in env_runs:
                if r.is_gae and shared_row(r.sampling) == row:
                    groups[f"GAE lambda={r.lambda_:g}"].append(r)
            baseline = _dedupe_by_seed([r for r in env_runs if r.is_baseline and shared_row(r.sampling) == row])
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
