"""`kappa-rllib report` for adaptive-kappa populations (Tune's PBT / PB2 over kappa).

For every population (a Tune experiment whose folder holds PBT's `pbt_global.txt`) and env:
  * `adaptive_<env>_<population>.png`: each member's kappa over env steps (what PBT / PB2 gave it)
    above its learning curve;
  * `adaptive.md` / `adaptive.csv`: the best member's score (kappa_rllib.report.data.final_score: the
    mean return of its last 10% of episodes, or of its last 10% of env steps with `--score-window`) and the members'
    mean +- Student-t 95% CI, beside the best fixed kappa of the same family and variant in the same report (mean +-
    Student-t 95% CI over seeds) and
    the kappa = 1 baseline if present.
A member restored from another member's checkpoint continues that member's counters, so its curve
may jump in env steps (drawn in pieces); its episodes are its own: its rows before the jump are kept
(report/load.py tells such a restore from a `--resume` by Tune's clock).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import CELL_INTERVAL, SCORE_RULES, Cell, Run, _pyplot, _safe, baseline_rank, one_per_cell
from kappa_rllib.report.plots import LEGEND_FONT_PT, PANEL_HEIGHT_IN, PANEL_WIDTH_IN, PLOT_DPI, _style, _title
from kappa_rllib.report.tables import versions_lines


def _fmt(cell: Cell, extra: str = "") -> str:
    if not cell.n:
        return "-"
    ci = "" if np.isnan(cell.ci) else f" +- {cell.ci:.1f}"
    return f"{cell.mean:.1f}{ci} (n={cell.n}{extra})"


def _fixed_cells(fixed: list[Run], like: Run) -> tuple[Cell | None, Cell | None]:
    """(the best fixed kappa's cell, the kappa = 1 cell) among runs comparable to `like`, one run a seed of each cell
    (data.one_per_cell, as the tables)."""
    same = one_per_cell([r for r in fixed if r.env == like.env and r.family == like.family and r.gamma == like.gamma
                         and not r.naive and np.isfinite(r.score)])
    by_kappa = defaultdict(list)
    for r in same:
        if r.variant == like.variant and r.kappa < 1.0 and r.c_fa == like.c_fa:
            by_kappa[r.kappa].append(r.score)
    best = max((Cell(np.asarray(v), k) for k, v in by_kappa.items()), key=lambda c: c.mean, default=None)
    ones = [r.score for r in sorted(same, key=baseline_rank) if r.is_baseline and r.sampling == like.sampling]
    return best, Cell(np.asarray(ones), 1.0) if ones else None


def write(members: list[Run], fixed: list[Run], out: Path, score_window: str = "episodes") -> list[Path]:
    plt = _pyplot()
    paths, lines, rows_csv = [], [
        "# Adaptive kappa: populations against fixed kappa",
        "",
        f"Score of a run: {SCORE_RULES[score_window]}. Members: mean +- Student-t 95% interval "
        "(t_{0.975,n-1} std / sqrt(n)) over the population's members. Fixed kappa: the best kappa's "
        f"{CELL_INTERVAL}.",
        "",
        "| env | population | members | best member (its kappa at the end) | members | best fixed kappa | kappa = 1 |",
        "|---|---|---|---|---|---|---|",
    ], []
    groups = defaultdict(list)
    for r in members:
        groups[(r.env, r.population)].append(r)
    for (env, population), runs in sorted(groups.items()):
        runs.sort(key=lambda r: r.path)
        scores = np.asarray([r.score for r in runs])
        best = runs[int(np.nanargmax(scores))] if np.isfinite(scores).any() else None
        best_fixed, baseline = _fixed_cells(fixed, runs[0])
        end_kappa = best.kappa_path[np.isfinite(best.kappa_path)][-1] if best is not None else float("nan")
        best_text = f"{best.score:.1f} (kappa={end_kappa:g})" if best is not None else "-"
        members_cell = Cell(scores[np.isfinite(scores)])
        fixed_text = _fmt(best_fixed, f", kappa={best_fixed.param:g}") if best_fixed else "-"
        lines.append(f"| {env} | {population} | {len(runs)} | {best_text} | {_fmt(members_cell)} | {fixed_text} | "
                     f"{_fmt(baseline) if baseline else '-'} |")
        rows_csv.append({"env": env, "population": population, "members": len(runs),
                         "best_member_score": best.score if best else float("nan"), "best_member_kappa": end_kappa,
                         "members_mean": members_cell.mean, "members_ci": members_cell.ci,
                         "best_fixed_kappa": best_fixed.param if best_fixed else float("nan"),
                         "best_fixed_mean": best_fixed.mean if best_fixed else float("nan"),
                         "best_fixed_ci": best_fixed.ci if best_fixed else float("nan")})
        fig, (ax_kappa, ax_return) = plt.subplots(2, 1, figsize=(PANEL_WIDTH_IN, 1.6 * PANEL_HEIGHT_IN), sharex=True)
        for i, r in enumerate(runs):
            ok = np.isfinite(r.kappa_path)
            start = r.kappa_path[ok][0] if ok.any() else r.kappa  # params.json holds the latest config
            label = f"member {i} (start kappa={start:g}, score {r.score:.1f})"
            color = None
            for piece in np.split(np.arange(r.steps.size), r.timelines):  # apart where it took a donor's checkpoint
                keep = piece[ok[piece]]
                line, = ax_kappa.step(r.steps[keep], r.kappa_path[keep], where="post", color=color,
                                      label=None if color else label)
                color = line.get_color()
                ax_return.plot(r.steps[piece], r.curve[piece], color=color)
        if best_fixed is not None:
            ax_kappa.axhline(best_fixed.param, color="k", ls=":", lw=1, label=f"best fixed kappa={best_fixed.param:g}")
        _style(ax_kappa, "", "kappa")
        _title(ax_kappa, f"{env}: {population} population, each member's kappa")
        ax_kappa.legend(fontsize=LEGEND_FONT_PT, framealpha=0.8)
        _style(ax_return, "env steps", "episode return (RLlib's mean)")
        fig.tight_layout()
        path = out / f"adaptive_{_safe(env)}_{_safe(population)}.png"
        fig.savefig(path, dpi=PLOT_DPI)
        plt.close(fig)
        paths.append(path)
    md, csv_path = out / "adaptive.md", out / "adaptive.csv"
    versions = versions_lines(members)  # the members' (the fixed-kappa runs': table.md)
    md.write_text("\n".join(lines + ([""] + versions[:-1] if versions else [])) + "\n")
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows_csv[0]) if rows_csv else ["env"])
        writer.writeheader()
        writer.writerows(rows_csv)
    return [md, csv_path, *paths]
