"""`kappa-rllib report`: the paper's tables and figures from a folder of Tune results.

Reads what Tune wrote (every trial folder holding `params.json` and `result.json`), re-runs
nothing, and writes:

* `table.md`, `table.csv`, `table.tex` - per environment (and C_FA) the paper's Table 1/2
  columns: kappa_best, kappa = 0, the kappa = 1 baseline (DQN / TRPO), the naive N_kappa = T
  schedule at its best kappa, GAE at its best lambda; each cell mean +- its Student-t 95% interval
  (t_{0.975,n-1} std / sqrt(n), data.ci95; none for one seed) over seeds with n, one run a seed of
  each cell (data.one_per_cell: every table and figure reads the same cells), the best entries in
  bold (every cell whose interval overlaps the best one's, as the paper marks ties), and the
  paper's number for the same cell beside it where it has one
  (`kappa_rllib/data/paper_tables.csv`: mean +- 1.96 s / sqrt(10) over the paper's 10 seeds).
* `iqm.md`, `iqm.csv`, `iqm.png` - the same cells by interquartile mean with 95% stratified-bootstrap CIs
  (`rliable`), per environment and, where every environment has the same seeds per cell,
  aggregated over environments on min-max normalised scores; `iqm_narrow.png`, each cell's name above
  its bar, for a phone.
* `improvement.md` - rliable's probability of improvement with 95% stratified-bootstrap CIs, per
  environment and kappa variant and over environments, for each comparison that has cells: kappa_best
  against the baseline (DQN / TRPO, kappa = 1), the C_FA schedule against the naive N_kappa = T (the paper's Sec. 5.2), kappa_best against GAE at its best
  lambda < 1, and kappa_best against kappa = 0 (`iqm.COMPARISONS`).
* `vs_paper.png` - here against the paper at a glance: a panel per task with the paper's cells, every seed
  a dot, each cell's mean and Student-t 95% CI beside the paper's mean and +- (report/vs_paper.py);
  `vs_paper_narrow.png`, the same panels in one column, for a phone.
* `lower_gamma.md`, `lower_gamma_<env>.png` - the paper's Fig. 3: the base algorithm at discounts other than
  the main one against kappa (report/lower_gamma.py), with rliable's probabilities of improvement;
  `lower_gamma_<env>_narrow.png`, its panels one above the other, for a phone.
* `curves_<env>[_cfa<C_FA>].png` - learning curves (mean and Student-t 95% band per kappa over seeds, the
  kappa = 1 baseline dashed), x = env steps, and `..._narrow.png`, 4 in wide, each legend under its panel,
  for a phone; `heatmap_<env>_<variant>.png` - final score over
  kappa x C_FA where C_FA varies.
* `scores.csv` - every run's settings and score, and the library versions it ran with (kappa_rllib.versions);
  `table.md` says which sets of versions its trials ran with.

A run's score is the paper's final training performance: the mean raw return of the last 10%
of its training episodes (at least one), from the per-episode returns every iteration reports
(`env_runners/episode_returns`; Atari returns are raw full-game scores, not clipped, not per life).
`score_window="env-steps"` (`--score-window env-steps`) takes instead the episodes reported in the
run's last 10% of env steps (data.SCORE_RULES).
"""

from __future__ import annotations

from pathlib import Path

from kappa_rllib.report import adaptive
from kappa_rllib.report.data import (LAST_FRACTION, SCORE_RULES, SCORE_WINDOWS, Cell, Run, check_score_window, ci95,
                                     final_score, one_per_cell, t95)
from kappa_rllib.report.iqm import IQM_INSTALL, improvement_with_ci, iqm_unavailable, iqm_with_ci, write_improvement, write_iqm
from kappa_rllib.report.load import load_paper_tables, load_runs
from kappa_rllib.report.lower_gamma import write_lower_gamma
from kappa_rllib.report.plots import _mean_band, write_curves, write_heatmaps
from kappa_rllib.report.tables import EnvTable, build_tables, main_gamma, write_scores, write_tables
from kappa_rllib.report.vs_paper import write_vs_paper

__all__ = ["Cell", "EnvTable", "IQM_INSTALL", "LAST_FRACTION", "Run", "SCORE_RULES", "SCORE_WINDOWS", "build_tables", "ci95", "final_score",
           "improvement_with_ci", "iqm_unavailable", "iqm_with_ci", "load_paper_tables", "load_runs", "main_gamma",
           "one_per_cell", "report", "t95",
           "write_curves", "write_heatmaps", "write_improvement", "write_iqm", "write_lower_gamma", "write_scores", "write_tables", "write_vs_paper", "_mean_band"]


def report(root, out=None, reps: int = 2000, include_unfinished: bool = False,
           notes: list | None = None, score_window: str = "episodes", title: str | None = None) -> list[Path]:
    """Writes every output for the Tune results under `root` into `out` (default: root/report);
    returns the paths written. Trials that have not reported `done` (still running, stopped or
    failed) are left out of everything but scores.csv unless `include_unfinished`.
    Raises ValueError if `root` holds no trial results. If rliable cannot be imported, the IQM files
    are skipped, everything else is written, and one line saying why is appended to `notes`. A bucket URI `root` (s3://...) is read
    through a local mirror of its result files, `out`/results (`out` default: ./<name>_report).
    `score_window`: which episodes score a run (data.SCORE_WINDOWS), "episodes" as the paper.
    `title`: the experiment's name, put before the heading of every Markdown file written
    ("# TITLE: Final training performance")."""
    paths = _report(root, out, reps, include_unfinished, notes, score_window)
    if title:
        for path in paths:
            if path.suffix == ".md":
                text = path.read_text()
                if text.startswith("# "):
                    path.write_text(f"# {title}: " + text[2:])
    return paths


def _report(root, out, reps, include_unfinished, notes, score_window) -> list[Path]:
    from kappa_rllib.tuning import storage

    check_score_window(score_window)

    root = storage.local_path(root)  # file:///PATH is the folder PATH
    if storage.is_uri(root):
        out = Path(out) if out else Path(str(root).rstrip("/").rsplit("/", 1)[-1] + "_report")
        root = storage.mirror_results(str(root), out / "results")
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"experiment folder {str(root)!r} does not exist")
    runs = load_runs(root)
    if not runs:
        raise ValueError(f"{root}: no trial results found (no params.json + result.json)")
    for run in runs:
        run.score_window = score_window
    out = Path(out) if out else root / "report"
    out.mkdir(parents=True, exist_ok=True)
    paths = [write_scores(runs, out, root)]
    unfinished = sum(not r.done for r in runs)
    if not include_unfinished:
        runs = [r for r in runs if r.done]
        if not runs:
            raise ValueError(f"{root}: no trial has finished yet ({unfinished} running or stopped); "
                             "pass --include-unfinished to report them anyway")
    members = [r for r in runs if r.population]  # adaptive kappa: reported apart (report/adaptive.py)
    runs = [r for r in runs if not r.population]
    if members:
        paths += adaptive.write(members, runs, out, score_window)
        if not runs:
            return paths
    tables = build_tables(runs)
    paper = load_paper_tables()
    paths += write_tables(tables, out, paper, left_out=0 if include_unfinished else unfinished,
                          score_window=score_window, runs=runs)
    paths += write_vs_paper(tables, runs, paper, out)
    missing = iqm_unavailable()
    if missing is None:
        paths += write_iqm(tables, out, reps, score_window)
        paths += write_improvement(tables, out, reps, score_window)
    elif notes is not None:
        notes.append(f"iqm.md/iqm.csv skipped: rliable does not import ({missing}); install a working set "
                     f"with: {IQM_INSTALL}")
    paths += write_lower_gamma(runs, out, reps, with_probabilities=missing is None)
    paths += write_curves(runs, tables, out)
    paths += write_heatmaps(runs, out)
    return paths
