"""Here against the paper at a glance: `vs_paper.png`, one panel per task that has the paper's cells (two
columns; `vs_paper_narrow.png`, one, for a phone).

Each panel lists the task's published cells at the paper's setting (gamma 0.99, the paper's C_FA): kappa-PI and
kappa-VI at the paper's kappa_best, at kappa = 0 and with the naive N_kappa = T schedule, the base algorithm
(kappa = 1), GAE at the paper's lambda_best, any other sampling layout of those, and the base algorithm at lower
discounts (the paper's Fig. 3, which gives curves, not numbers). For each cell:

* here: every seed's score as a dot, the mean and its Student-t 95% interval (t_{0.975,n-1} std / sqrt(n),
  data.ci95) as a bar;
* the paper: its mean as an open diamond and its +- (1.96 s / sqrt(10) over its 10 seeds) as a band.

A cell is taken at the paper's own kappa (or lambda) where it was run here, so that a row compares one setting
with itself; where it was not, the table's cell (`tables.build_tables`) stands, its kappa in the label. Where the
paper's kappa_best (or its naive cell's kappa, or GAE's lambda_best) is 1, that setting is the base algorithm
exactly (TRPO / DQN: kappa = 1, lambda = 1): the base cell sampled as the row was stands, "(TRPO)" or "(DQN)" in
the label, as iqm.py's kappa_best against kappa = 0 takes it (never here's best kappa < 1 under the paper's kappa 1);
for kappa_best also where the variant ran no kappa in (0, 1), for the naive and GAE columns where they ran here.
`vs_paper_panels` gives the data, `vs_paper_figure` draws exactly it (each artist tagged with its cell's label).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import Cell, Run, _pyplot, is_plain
from kappa_rllib.report.lower_gamma import gamma_study
from kappa_rllib.report.plots import NARROW_WIDTH_IN, save_two_widths
from kappa_rllib.report.tables import PAPER_C_FA, EnvTable

SHORT = {"kappa-pi": "κ-PI", "kappa-vi": "κ-VI"}
BASE = {"dqn": "DQN", "trpo": "TRPO", "ppo": "PPO", "appo": "APPO"}
PAPER_COLOR, HERE_COLOR = "tab:red", "tab:blue"
ROW_HEIGHT_IN = 0.25
# The lead figure of the README and the results page. Its desktop drawing is shown in the page's text column (~690
# px at 1400 px): drawn 7.5 in wide, with type a point larger than the other figures', so that its smallest text
# reads ~12 px there, not ~9.6 as at plots.FIGURE_WIDTH_IN (9 in) and 9 pt. The phone drawing is NARROW_WIDTH_IN.
WIDTH_IN = 7.5
TITLE_FONT_PT, LABEL_FONT_PT, TICK_FONT_PT, LEGEND_FONT_PT = 12, 11, 10, 10
SMALLEST_FONT_PT = min(TITLE_FONT_PT, LABEL_FONT_PT, TICK_FONT_PT, LEGEND_FONT_PT)


@dataclasses.dataclass
class Entry:
    """One cell of a panel: here (its seeds' scores) and the paper's mean and +- (None where the paper has none)."""

    label: str
    cell: Cell
    paper: tuple[float, float] | None = None


@dataclasses.dataclass
class Panel:
    env: str
    entries: list
    family: str | None = None  # "trpo": the paper's cells are MuJoCo v2's (its Table 2); "dqn": Atari's (Table 1)


# A seed's dot, in points squared: ~6 px across on screen where the desktop drawing is shown at ~0.6 of its size
# (the results page's column), opaque enough to read over the paper's band.
SEED_DOT_PT2 = 30


def _every(t: EnvTable, name: str, param: float) -> Cell | None:
    return next((cell for n, p, cell in t.every if n == name and p == param and cell.n), None)


def _sampling_note(variant: str) -> str:
    """ "kappa-pi (num_envs_per_env_runner=1)" -> ", 1 sub-env" (the one layout the project varies), else its text."""
    if "(" not in variant:
        return ""
    setting = variant.split("(", 1)[1].rstrip(")")
    if setting == "num_envs_per_env_runner=1":
        return ", 1 sub-env"
    return f", {setting}"


def vs_paper_panels(tables: list[EnvTable], runs: list[Run], paper: dict) -> list[Panel]:
    """One Panel per task whose table (gamma 0.99, the paper's C_FA) has at least one of the paper's cells."""
    studies = {s.env: s for s in gamma_study(runs)}
    panels = []
    for t in tables:
        if t.family not in PAPER_C_FA or t.gamma != 0.99 or t.c_fa not in (None, PAPER_C_FA[t.family]):
            continue
        entries = []
        kappa_rows = [v for v in t.rows if v and not is_plain(v)]
        base_name = BASE.get(t.family, "baseline")
        for variant in kappa_rows:
            base_variant = variant.split(" (")[0]
            short, note = SHORT.get(base_variant, base_variant), _sampling_note(variant)
            cols = t.rows[variant]
            base = t.shared(variant, "baseline")  # kappa = 1, sampled as the variant was
            for column, name in (("kappa_best", variant), ("kappa_0", variant), ("naive", f"{variant} naive")):
                p = paper.get((t.env, base_variant, column))
                cell = cols.get(column)
                at_base = False
                if p is not None and column != "kappa_0":
                    own = _every(t, name, p[2])  # at the paper's own kappa where it ran here
                    # the paper's kappa 1 is the base algorithm: its cell, never here's best kappa < 1 in its place
                    at_base = own is None and p[2] == 1.0 and (cell is not None or column == "kappa_best")
                    cell = base if at_base else own or cell
                if cell is None or not cell.n or (note and p is None):
                    continue
                kappa = f"κ={cell.param:g}" + (f" ({base_name})" if at_base else "")
                what = {"kappa_best": kappa, "kappa_0": "κ=0", "naive": f"naive N_κ=T, {kappa}"}[column]
                entries.append(Entry(f"{short} {what}{note}", cell, p[:2] if p else None))
        for row in [""] + [v for v in t.rows if is_plain(v)]:
            note = _sampling_note(row)
            for column in ("baseline", "gae"):
                p = paper.get((t.env, "", column))
                cell = t.rows.get(row, {}).get(column)
                at_base = False
                if column == "gae" and p is not None and not row:
                    own = _every(t, "gae", p[2])
                    at_base = own is None and p[2] == 1.0 and cell is not None  # GAE at lambda 1 is the base
                    cell = t.rows[row].get("baseline") if at_base else own or cell
                if cell is None or not cell.n or (note and p is None):
                    continue
                what = base_name if column == "baseline" else f"GAE λ={cell.param:g}" + (
                    f" ({base_name})" if at_base else "")
                entries.append(Entry(f"{what}{note}", cell, p[:2] if p else None))
        study = studies.get(t.env)
        if study is not None:
            for gamma, cell in study.base.items():
                if gamma < study.main_gamma:
                    entries.append(Entry(f"{base_name} γ={gamma:g}", cell, None))
        if any(e.paper for e in entries):
            panels.append(Panel(t.env, entries, t.family))
    return panels


def paper_band_label(panels: list[Panel]) -> str:
    """The legend's name of the paper's band: its +- is 1.96 s / sqrt(10) over its 10 seeds (Tables 1 and 2), run on
    MuJoCo v2 where every panel is a MuJoCo task (Table 2; here v5)."""
    mujoco = bool(panels) and all(p.family == "trpo" for p in panels)
    return "paper: ± 1.96 s/√10, 10 seeds" + (" (MuJoCo v2)" if mujoco else "")


def vs_paper_figure(panels: list[Panel], narrow: bool = False):
    """The figure of `panels`: a panel a task, two columns (`narrow`: one, NARROW_WIDTH_IN wide, for a phone);
    each artist's gid names what it draws ("seeds|<env>|<label>", "here|...", "paper|...", "paper band|...")."""
    plt = _pyplot()
    ncols = 2 if len(panels) > 1 and not narrow else 1
    nrows = math.ceil(len(panels) / ncols)
    # "score" under the bottom panel of each column only (its x axis: the others' read the same), so a row of panels
    # without one is 0.2 in shorter: the figure fits above the results page's claims at 1400 px
    labelled = {i for i in range(len(panels)) if i + ncols >= len(panels)}
    heights = [max(len(p.entries) for p in panels[r * ncols:(r + 1) * ncols]) * ROW_HEIGHT_IN
               + (0.9 if labelled & set(range(r * ncols, (r + 1) * ncols)) else 0.7) for r in range(nrows)]
    legend_in = 0.8 if narrow else 0.45  # (the legend takes two lines, four on a phone)
    fig, axes = plt.subplots(nrows, ncols, figsize=(NARROW_WIDTH_IN if narrow else WIDTH_IN,
                                                    sum(heights) + legend_in + 0.15), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for index, (ax, panel) in enumerate(zip(axes.flat, panels)):
        n = len(panel.entries)
        for i, e in enumerate(panel.entries):
            y = n - 1 - i  # the first entry on top
            tag = f"{panel.env}|{e.label}"
            if e.paper is not None:
                mean, pm = e.paper
                ax.fill_betweenx([y - 0.32, y + 0.32], mean - pm, mean + pm, color=PAPER_COLOR, alpha=0.18,
                                 linewidth=0, gid=f"paper band|{tag}")
                ax.plot([mean], [y], "D", mfc="none", mec=PAPER_COLOR, mew=1.4, ms=7, gid=f"paper|{tag}")
            offsets = np.linspace(-0.18, 0.18, e.cell.n) if e.cell.n > 1 else np.zeros(1)
            ax.scatter(e.cell.scores, y + offsets, s=SEED_DOT_PT2, color=HERE_COLOR, alpha=0.75, linewidths=0,
                       gid=f"seeds|{tag}")
            ci = e.cell.ci if np.isfinite(e.cell.ci) else 0.0
            bar = ax.errorbar([e.cell.mean], [y], xerr=[[ci], [ci]], fmt="o", color="black", ms=4, capsize=3,
                              elinewidth=1.5)
            bar.lines[0].set_gid(f"here|{tag}")
        ax.set_yticks(range(n), [e.label for e in reversed(panel.entries)])
        ax.set_ylim(-0.7, n - 0.3)
        ax.set_title(panel.env, fontsize=TITLE_FONT_PT)
        if index in labelled:
            ax.set_xlabel("score", fontsize=LABEL_FONT_PT)
        ax.tick_params(labelsize=TICK_FONT_PT)
        ax.grid(axis="x", alpha=0.3)
    handles = [plt.Line2D([], [], ls="none", marker="o", color=HERE_COLOR, alpha=0.75, ms=5, label="here: a seed"),
               plt.Line2D([], [], ls="-", marker="o", color="black", ms=4, label="here: mean, Student-t 95% CI"),
               plt.Line2D([], [], ls="none", marker="D", mfc="none", mec=PAPER_COLOR, ms=7, label="paper: mean"),
               plt.matplotlib.patches.Patch(color=PAPER_COLOR, alpha=0.18, label=paper_band_label(panels))]
    fig.legend(handles=handles, loc="upper center", ncol=1 if narrow else 2, fontsize=LEGEND_FONT_PT, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - legend_in / (sum(heights) + legend_in + 0.15)))
    return fig


def write_vs_paper(tables: list[EnvTable], runs: list[Run], paper: dict, out: Path) -> list[Path]:
    """`vs_paper.png` and, its panels in one column for a phone, `vs_paper_narrow.png`, where some task has the
    paper's cells; nothing otherwise."""
    panels = vs_paper_panels(tables, runs, paper)
    if not panels:
        return []
    return save_two_widths(lambda narrow: vs_paper_figure(panels, narrow=narrow), out, "vs_paper")
