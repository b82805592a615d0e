"""The paper's fourth claim: lowering gamma is not what makes kappa work (Sec. 5.3, Fig. 3).

A kappa algorithm solves a surrogate MDP with discount gamma * kappa, so the question is whether the base
algorithm (DQN / TRPO, kappa = 1) with a lower discount does as well. Per task this module takes every published
cell on one axis (`gamma_study`):

* the base algorithm at each discount run (0.99, the main gamma, and the lower ones);
* kappa-PI and kappa-VI at the main gamma, at each kappa run (kappa = 1 is the base algorithm at 0.99 itself);

and writes `lower_gamma.md`: every cell run at another discount, and rliable's probabilities of improvement with
95% stratified-bootstrap CIs, per task and over the tasks with equal seeds a cell:

* P(kappa_best > base at its best lower gamma): the kappa_best cell (`tables.build_tables`' rule) against the
  base algorithm at the discount < main with the best mean;
* P(base at its best lower gamma > base at the main gamma): "does lowering gamma help at all", which the paper
  answers yes on Ant only.

and `lower_gamma_<env>.png`: score against the base algorithm's discount beside score against kappa for kappa-PI
and kappa-VI, every seed a dot, each cell's mean with its Student-t 95% interval (data.ci95);
`lower_gamma_<env>_narrow.png`, the same panels one above the other, for a phone.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import CELL_INTERVAL, Cell, Run, _pyplot, _safe, baseline_rank
from kappa_rllib.report.plots import (FIGURE_WIDTH_IN, LABEL_FONT_PT, LEGEND_FONT_PT, NARROW_WIDTH_IN, TICK_FONT_PT,
                                     TITLE_FONT_PT, save_two_widths)
from kappa_rllib.report.tables import PAPER_C_FA, _by_env, _fmt

BASE = {"dqn": "DQN", "trpo": "TRPO", "ppo": "PPO", "appo": "APPO"}
VARIANTS = ("kappa-pi", "kappa-vi")


@dataclasses.dataclass
class GammaStudy:
    """One task's cells on the discount axis (each Cell's `param` is its gamma or kappa)."""

    env: str
    family: str
    main_gamma: float
    base: dict  # gamma -> Cell: the base algorithm (kappa = 1, default sampling) at each discount run
    kappas: dict  # variant -> {kappa -> Cell} at the main gamma (kappa 1: the base algorithm's cell)
    kappa_best: dict  # variant -> Cell: the table's kappa_best (best mean over the kappas < 1 run)

    @property
    def base_name(self) -> str:
        return BASE.get(self.family, "baseline")

    def best_lower(self) -> Cell | None:
        """The base algorithm at the discount below the main one with the best mean."""
        lower = [c for g, c in self.base.items() if g < self.main_gamma]
        return max(lower, key=lambda c: c.mean, default=None)


def _c_fa(runs: list[Run], family: str):
    """The C_FA of the kappa cells drawn: the paper's for the family where it was run, else the most common."""
    counts = defaultdict(int)
    for r in runs:
        counts[r.c_fa] += 1
    if PAPER_C_FA.get(family) in counts:
        return PAPER_C_FA[family]
    return max(sorted(counts, key=str), key=lambda c: counts[c], default=None)


def gamma_study(runs: list[Run]) -> list[GammaStudy]:
    """One GammaStudy per task whose base algorithm ran at a discount other than the task's main one."""
    studies = []
    for env, env_runs, gamma0 in _by_env(runs):
        base_runs = [r for r in env_runs if r.is_baseline and not r.sampling]
        by_gamma = defaultdict(list)
        for r in base_runs:
            by_gamma[r.gamma].append(r)
        if not any(g != gamma0 for g in by_gamma):
            continue
        # one run a seed (_by_env: data.one_per_cell), plain TRPO before a kappa variant run at kappa = 1, in the
        # table's order
        base = {g: Cell(np.asarray([r.score for r in sorted(rs, key=baseline_rank)]), g)
                for g, rs in sorted(by_gamma.items())}
        kappa_runs = [r for r in env_runs if r.gamma == gamma0 and r.variant in VARIANTS and not r.naive
                      and not r.is_baseline]
        c_fa = _c_fa(kappa_runs, env_runs[0].family)
        kappas, best = {}, {}
        for variant in VARIANTS:
            mine = defaultdict(list)
            for r in kappa_runs:
                if r.variant == variant and r.c_fa == c_fa:
                    mine[r.kappa].append(r.score)
            if not mine:
                continue
            cells = {k: Cell(np.asarray(s), k) for k, s in sorted(mine.items())}
            if any(0.0 < k < 1.0 for k in cells):  # the table's rule: a variant run at kappa = 0 alone has none
                best[variant] = max(cells.values(), key=lambda c: c.mean)
            if gamma0 in base:
                cells[1.0] = Cell(base[gamma0].scores, 1.0)
            kappas[variant] = cells
        studies.append(GammaStudy(env, env_runs[0].family, gamma0, base, kappas, best))
    return studies


# ----------------------------------------------------------------------------------- lower_gamma.md
def _every_cell_lines(runs: list[Run]) -> list[str]:
    """The "Every cell at another discount" table: each cell's runs one a seed (_by_env: data.one_per_cell, the
    cells table.md reads), the base algorithm at every discount, a kappa cell apart for each C_FA."""
    lines = ["| env | algorithm | gamma | kappa / lambda | score | n |", "|---|---|---|---|---|---|"]
    for env, env_runs, gamma0 in _by_env(runs):
        if all(r.gamma == gamma0 for r in env_runs):
            continue
        groups = defaultdict(list)
        for r in sorted(env_runs, key=lambda r: baseline_rank(r) if r.is_baseline else 0):
            if r.gamma != gamma0 or r.is_baseline:
                if r.is_baseline:
                    name = f"baseline (kappa = 1{', ' + r.sampling if r.sampling else ''})"
                elif r.is_plain:
                    name = r.variant
                else:
                    name = r.variant + (" naive" if r.naive else "") + (f", C_FA {r.c_fa:g}" if r.c_fa is not None
                                                                         else "")
                groups[(name, r.gamma, r.lambda_ if r.is_gae else r.kappa)].append(r.score)
        for (name, gamma, param), scores in sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[0][1], kv[0][2])):
            cell = Cell(np.asarray(scores))
            lines.append(f"| {env} | {name} | {gamma:g} | {param:g} | {_fmt(cell.mean)} +- {_fmt(cell.ci)} | {cell.n} |")
    return lines


def improvement_pairs(studies: list[GammaStudy]):
    """The two comparisons' pairs: ({(env, variant): (kappa_best, base at best lower gamma)},
    {env: (base at best lower gamma, base at the main gamma)})."""
    kappa_vs_lower, lower_vs_main = {}, {}
    for s in studies:
        lower = s.best_lower()
        if lower is None:
            continue
        for variant, best in s.kappa_best.items():
            kappa_vs_lower[(s.env, variant)] = (best, lower)
        if s.main_gamma in s.base:
            lower_vs_main[s.env] = (lower, s.base[s.main_gamma])
    return kappa_vs_lower, lower_vs_main


def _probability_lines(pairs: dict, key_text, header: str, reps: int, group=lambda key: "all") -> list[str]:
    """A table of P(X > Y) per pair, then over the pairs of each `group` with the same seeds a cell."""
    from kappa_rllib.report.iqm import improvement_with_ci

    if not pairs:
        return []
    ps = improvement_with_ci({k: (x.scores.reshape(-1, 1), y.scores.reshape(-1, 1)) for k, (x, y) in pairs.items()},
                             reps)
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for key, (x, y) in pairs.items():
        p, lo, hi = ps[key]
        lines.append(f"| {key_text(key, x, y)} | {p:.2f} | [{lo:.2f}, {hi:.2f}] |")
    groups = defaultdict(list)
    for key, (x, y) in pairs.items():
        groups[group(key)].append((key, x, y))
    overall = {}
    for name, members in groups.items():
        if len(members) >= 2 and len({(x.n, y.n) for _, x, y in members}) == 1:
            overall[f"{name}, {len(members)} tasks"] = (np.stack([x.scores for _, x, _ in members], axis=1),
                                                        np.stack([y.scores for _, _, y in members], axis=1))
    if overall:
        lines += ["", "Over the tasks (the mean of the per-task probabilities; the bootstrap resamples runs within "
                  "each task):", "", "| over | P | 95% CI |", "|---|---|---|"]
        for name, (p, lo, hi) in improvement_with_ci(overall, reps).items():
            lines.append(f"| {name} | {p:.2f} | [{lo:.2f}, {hi:.2f}] |")
    return lines


def _cell(c: Cell, name: str) -> str:
    return f"{name} {c.param:g} ({_fmt(c.mean)} +- {_fmt(c.ci)}, n={c.n})"  # as table.md: MinAtar's 5.7 and 6.3 differ


def write_lower_gamma(runs: list[Run], out: Path, reps: int = 2000, with_probabilities: bool = True) -> list[Path]:
    """`lower_gamma.md` (every cell at another discount, and the two probability tables where rliable runs) and
    one `lower_gamma_<env>.png` per task; nothing where no run used another discount."""
    every = _every_cell_lines(runs)
    if len(every) == 2:
        return []
    studies = gamma_study(runs)
    lines = ["# Lowering the discount against kappa (the paper's Sec. 5.3, Fig. 3)", "",
             "A kappa algorithm solves a surrogate MDP with discount gamma * kappa. Does the base algorithm "
             "(kappa = 1) with a lower discount do as well? Probabilities of improvement: rliable's, with 95% "
             f"stratified-bootstrap CIs; 0.5: no difference. Cells: {CELL_INTERVAL} (n seeds)."]
    kappa_vs_lower, lower_vs_main = improvement_pairs(studies)
    if with_probabilities and (kappa_vs_lower or lower_vs_main):
        lines += ["", "## kappa_best against the base algorithm at its best lower discount", "",
                  "P(kappa_best > lower gamma): a run of the kappa_best cell (at the main discount) ends above a "
                  "run of DQN / TRPO at the discount below the main one with the best mean.", ""]
        lines += _probability_lines(
            kappa_vs_lower, lambda k, x, y: f"{k[0]} | {k[1]} | {_cell(x, 'kappa')} | {_cell(y, 'gamma')}",
            "| env | variant | kappa_best cell | base at its best lower gamma | P(kappa_best > lower gamma) | 95% CI |",
            reps, group=lambda k: k[1])
        lines += ["", "## Does lowering the discount help the base algorithm?", "",
                  "P(lower gamma > main gamma): a run of DQN / TRPO at its best discount below the main one ends "
                  "above a run at the main discount (the paper: yes on Ant at 0.68, no on Walker2d, Breakout and "
                  "SpaceInvaders). The lower discount is the one with the best mean, picked from the same runs: with "
                  "several lower discounts this leans towards yes.", ""]
        lines += _probability_lines(
            lower_vs_main, lambda k, x, y: f"{k} | {_cell(x, 'gamma')} | {_cell(y, 'gamma')}",
            "| env | best lower gamma | main gamma | P(lower gamma > main gamma) | 95% CI |", reps,
            group=lambda k: "lower gamma")
    lines += ["", "## Every cell at another discount", "", *every]
    path = out / "lower_gamma.md"
    path.write_text("\n".join(lines) + "\n")
    return [path, *(p for s in studies for p in draw_study(s, out))]


# ----------------------------------------------------------------------------------- the figure
def _points(ax, x: float, cell: Cell, color, marker: str, label: str | None, spread: float, tag: str):
    """A cell at `x`: every seed a dot (spread sideways by `spread`), its mean and Student-t 95% interval a bar; the
    artists' gids are "seeds|`tag`" and "mean|`tag`"."""
    offsets = np.linspace(-spread, spread, cell.n) if cell.n > 1 else np.zeros(1)
    ax.scatter(x + offsets, cell.scores, s=12, color=color, alpha=0.45, linewidths=0, gid=f"seeds|{tag}")
    ci = 0.0 if not np.isfinite(cell.ci) else cell.ci
    bar = ax.errorbar([x], [cell.mean], yerr=[[ci], [ci]], fmt=marker, color=color, capsize=4, markersize=6,
                      label=label)
    bar.lines[0].set_gid(f"mean|{tag}")


def draw_study(study: GammaStudy, out: Path) -> list[Path]:
    """`lower_gamma_<env>.png`: left, score against the base algorithm's discount; right, score against kappa for
    kappa-PI and kappa-VI at the main discount (the paper's Fig. 3 puts the two side by side). And
    `lower_gamma_<env>_narrow.png`, the two panels one above the other, for a phone (as vs_paper_narrow.png)."""
    return save_two_widths(lambda narrow: study_figure(study, narrow=narrow), out, f"lower_gamma_{_safe(study.env)}")


def study_figure(study: GammaStudy, narrow: bool = False):
    """The figure `draw_study` saves: two panels side by side, or (`narrow`) one above the other, NARROW_WIDTH_IN
    wide, whose text a phone shows as large as the wide figure's on a desktop. Each cell's artists are tagged
    (gid) "seeds|<axis>|<series>|<x>", "mean|..."."""
    plt = _pyplot()
    if narrow:
        fig, (left, right) = plt.subplots(2, 1, figsize=(NARROW_WIDTH_IN, 7.2), sharey=True)
    else:
        fig, (left, right) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH_IN, 3.8), sharey=True)
    gammas = sorted(study.base)
    line = [study.base[g].mean for g in gammas]
    left.plot(gammas, line, "-", color="0.5", lw=1)
    for g in gammas:
        _points(left, g, study.base[g], "tab:gray", "s", None, 0.006, f"gamma|{study.base_name}|{g:g}")
    close = [i for i in range(len(gammas) - 1) if gammas[i + 1] - gammas[i] < 0.1]
    left.set_xticks(gammas, [f"{g:g}" for g in gammas], rotation=60 if len(close) > 1 else 0)
    if len(close) == 1:  # one pair of discounts close together (0.92, 0.99): their labels lean apart
        labels = left.get_xticklabels()
        labels[close[0]].set_horizontalalignment("right")
        labels[close[0] + 1].set_horizontalalignment("left")
    left.set_title(f"{study.base_name} (κ = 1) at discount γ", fontsize=TITLE_FONT_PT)
    left.set_xlabel("γ", fontsize=LABEL_FONT_PT)
    left.set_ylabel("score (each seed; mean, Student-t 95% CI)", fontsize=LABEL_FONT_PT)
    colors = {"kappa-pi": "tab:blue", "kappa-vi": "tab:orange"}
    shift = {"kappa-pi": -0.012, "kappa-vi": 0.012}
    ticks = set()
    for variant, cells in study.kappas.items():
        ks = sorted(cells)
        right.plot([k + shift[variant] for k in ks], [cells[k].mean for k in ks], "-", color=colors[variant], lw=1)
        for k in ks:
            _points(right, k + shift[variant], cells[k], colors[variant], "o",
                    {"kappa-pi": "κ-PI", "kappa-vi": "κ-VI"}[variant] if k == ks[0] else None, 0.006,
                    f"kappa|{variant}|{k:g}")
        ticks |= set(ks)
    ticks = sorted(ticks)
    right.set_xticks(ticks, [f"{k:g}" for k in ticks])
    right.set_title(f"κ-PI / κ-VI at γ = {study.main_gamma:g} (κ = 1 is {study.base_name})",
                    fontsize=TITLE_FONT_PT)
    right.set_xlabel("κ (the surrogate MDP's discount is γκ)", fontsize=LABEL_FONT_PT)
    if narrow:  # (stacked, each panel carries its own axis label)
        right.set_ylabel(left.get_ylabel(), fontsize=LABEL_FONT_PT)
    if study.kappas:
        right.legend(fontsize=LEGEND_FONT_PT, loc="best")
    for ax in (left, right):  # one x range: TRPO at gamma 0.68 stands where kappa 0.68 (discount 0.67) does
        ax.set_xlim(-0.05, 1.05)
        ax.tick_params(labelsize=TICK_FONT_PT)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{study.env}: a lower discount γ against κ", fontsize=TITLE_FONT_PT)
    fig.tight_layout()
    return fig
