"""The paper's Tables 1 and 2 from runs: cells per environment and C_FA, best marks, and the
`table.md` / `table.csv` / `table.tex` and `scores.csv` files."""

from __future__ import annotations

import csv
import dataclasses
import math
import os
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import (CELL_INTERVAL, PAPER_INTERVAL, SCORE_RULES, Cell, Run, baseline_rank, is_plain,
                                     one_per_cell, shared_row)
from kappa_rllib.versions import describe


PAPER_C_FA = {"dqn": 0.05, "trpo": 0.2}  # the C_FA of the paper's Tables 1 and 2 (at gamma 0.99)

# Cell columns of the paper's Tables 1 and 2, in order.
COLUMNS = ("kappa_best", "kappa_0", "baseline", "naive", "gae")
COLUMN_TITLES = {
    "kappa_best": "kappa_best", "kappa_0": "kappa = 0", "baseline": "{base}, kappa = 1",
    "naive": "N_kappa = T, kappa_best", "gae": "GAE, lambda_best",
}


# ----------------------------------------------------------------------------------- tables
@dataclasses.dataclass
class EnvTable:
    """The paper's table rows for one environment at one C_FA."""

    env: str
    family: str
    c_fa: float | None
    gamma: float
    # variant -> {column: Cell}; shared columns (baseline, gae) under variant "", those of a non-default
    # sampling layout under "plain (<its settings>)"
    rows: dict
    best: set  # {(variant, column)} marked best (ties included)
    every: list = dataclasses.field(default_factory=list)  # (row name, kappa or lambda, Cell) for every value run
    # row -> the row holding the baseline and GAE cells of its sampling layout (data.shared_row; default "")
    shared_row: dict = dataclasses.field(default_factory=dict)

    def shared(self, variant: str, column: str) -> Cell | None:
        """The shared cell (baseline, gae) sampled as `variant` was."""
        return self.rows.get(self.shared_row.get(variant, ""), {}).get(column)


def _kappa_variants(runs: list[Run]) -> list[str]:
    """The kappa variants among `runs`: kappa-pi, kappa-vi, then others (e.g. a phi_fit setting)."""
    found = {r.variant for r in runs if not r.is_plain}
    return sorted(found, key=lambda v: (v not in ("kappa-pi", "kappa-vi"), v))


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
    """(env, its scored runs, one per seed of each cell (data.one_per_cell), its main gamma) for every env, in order."""
    for env in sorted({r.env for r in runs}):
        env_runs = one_per_cell([r for r in runs if r.env == env and not math.isnan(r.score)])
        if env_runs:
            yield env, env_runs, main_gamma(env_runs)


def build_tables(runs: list[Run]) -> list[EnvTable]:
    """One EnvTable per (env, C_FA) among the runs at the main gamma."""
    tables = []
    for env, env_runs, gamma in _by_env(runs):
        env_runs = [r for r in env_runs if r.gamma == gamma]
        family = env_runs[0].family
        # the baseline and GAE runs of each sampling layout ("" the default first): kept apart; one run a seed,
        # TRPO's before a kappa variant's at kappa = 1 (_by_env: data.one_per_cell)
        shared = {}
        for sampling in sorted({r.sampling for r in env_runs}):
            mine = [r for r in env_runs if r.sampling == sampling]
            shared[sampling] = (sorted((r for r in mine if r.is_baseline), key=baseline_rank),
                                [r for r in mine if r.is_gae])
        c_fas = sorted({r.c_fa for r in env_runs if r.c_fa is not None}) or [None]
        for c_fa in c_fas:
            rows: dict = {"": {}}
            sampled: dict = {}  # "plain (<settings>)" -> its shared cells, after the kappa rows
            every = []
            for sampling, (baseline, gae_runs) in shared.items():
                cells, suffix = (rows[""], "") if not sampling else ({}, f" ({sampling})")
                if baseline:
                    every.append(("baseline" + suffix, 1.0, Cell(np.asarray([r.score for r in baseline]), 1.0)))
                    cells["baseline"] = Cell(np.asarray([r.score for r in baseline]), 1.0)
                every += [("gae" + suffix, c.param, c) for c in _param_cells(gae_runs, lambda r: r.lambda_)]
                gae = _best_param_cell(gae_runs, lambda r: r.lambda_)
                if gae:
                    cells["gae"] = gae
                if sampling and cells:
                    sampled[shared_row(sampling)] = cells
            shared_rows = {row: row for row in sampled}
            for variant in _kappa_variants(env_runs):
                mine = [r for r in env_runs if r.variant == variant and r.c_fa == c_fa]
                if not mine:
                    continue
                cells = {}
                # kappa_best is taken over kappa < 1: a kappa algorithm at kappa = 1 is DQN / TRPO,
                # the baseline column, and would make kappa_best >= baseline by construction
                regular = [r for r in mine if not r.naive and not r.is_baseline]
                best = _best_param_cell(regular, lambda r: r.kappa)
                # and only where a kappa in (0, 1) was run: a variant run at kappa = 0 alone has searched no
                # kappa, so it has a kappa = 0 column and no kappa_best (Swimmer's table2_columns cells, whose
                # paper kappa_best is 1: the baseline column)
                if best and any(0.0 < r.kappa < 1.0 for r in regular):
                    cells["kappa_best"] = best
                zero = [r.score for r in regular if r.kappa == 0.0]
                if zero:
                    cells["kappa_0"] = Cell(np.asarray(zero), 0.0)
                naive = _best_param_cell([r for r in mine if r.naive], lambda r: r.kappa)
                if naive:
                    cells["naive"] = naive
                if cells:  # (a variant run only at kappa = 1 has only the baseline column)
                    rows[variant] = cells
                    shared_rows[variant] = shared_row(mine[0].sampling)
                every += [(variant, c.param, c) for c in _param_cells(regular, lambda r: r.kappa)]
                every += [(f"{variant} naive", c.param, c) for c in _param_cells([r for r in mine if r.naive],
                                                                                 lambda r: r.kappa)]
            rows.update(sampled)
            if len(rows) == 1 and not rows[""]:
                continue
            tables.append(EnvTable(env, family, c_fa, gamma, rows, _best_marks(rows), every, shared_rows))
    return tables


def _best_marks(rows: dict) -> set:
    cells = [(v, c, cell) for v, cols in rows.items() for c, cell in cols.items() if cell.n]
    if not cells:
        return set()
    top = max(cells, key=lambda t: t[2].mean)[2]
    return {(v, c) for v, c, cell in cells if cell is top or cell.overlaps(top)}


def _is_shared(name: str) -> bool:
    """A baseline or GAE entry of `EnvTable.every` (in any sampling layout): one per env, not per C_FA."""
    return name.split(" (")[0] in ("baseline", "gae")


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
        kappa_rows = [v for v in t.rows if v and not is_plain(v)]
        sampled = [v for v in t.rows if is_plain(v)]  # TRPO / GAE sampled otherwise: rows of their own
        variants = (kappa_rows or ([""] if t.rows.get("") or not sampled else [])) + sampled
        for i, variant in enumerate(variants):
            cols = {}
            for column in COLUMNS:
                owner = "" if column in ("baseline", "gae") and not is_plain(variant) else variant
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
                                (owner, column) in t.best, p_text, owner)
            yield t, label, variant or "-", cols


def versions_lines(runs: list[Run]) -> list[str]:
    """Markdown: each set of library versions the `runs` ran with (kappa_rllib.versions) and how many ran with it;
    nothing where no run recorded them."""
    counts = Counter(" | ".join(describe(v) for v in r.versions) for r in runs)
    if not any(counts):
        return []
    lines = ["Library versions the trials ran with (each trial's own, `scores.csv` has them per trial):", ""]
    for text, n in sorted(counts.items(), key=lambda item: (item[0] == "", -item[1], item[0])):
        lines.append(f"- {text}: {n} trial(s)" if text else
                     f"- not recorded (trials from before kappa-rllib recorded them): {n} trial(s)")
    return lines + [""]


def write_tables(tables: list[EnvTable], out: Path, paper: dict, left_out: int = 0,
                 score_window: str = "episodes", runs: list[Run] = ()) -> list[Path]:
    base = {"dqn": "DQN", "trpo": "TRPO", "ppo": "PPO", "appo": "APPO"}
    header_cols = lambda fam: [COLUMN_TITLES[c].format(base=base.get(fam, "baseline")) for c in COLUMNS]
    md = ["# Final training performance",
          "",
          f"Score of a run: {SCORE_RULES[score_window]}. Cells: {CELL_INTERVAL} (n seeds). **Bold**: the best "
          "cell of the environment and every cell whose interval overlaps it. `paper:` the paper's Table 1/2 value "
          f"for the same cell, {PAPER_INTERVAL} (MuJoCo v2 there, v5 here).",
          ""]
    if left_out:
        md += [f"{left_out} unfinished trial(s) (not `done`: running, stopped or failed) are left out; "
               "see scores.csv.", ""]
    scored = [r for r in runs if not math.isnan(r.score)]
    repeats = len(scored) - len(one_per_cell(scored))
    if repeats:
        md += [f"{repeats} trial(s) repeat a seed of a cell that another trial already has (a trial published twice, "
               "or a kappa variant at kappa = 1 on a seed the base algorithm ran): each cell counts a seed once, the "
               "base algorithm's run first, in every table and figure; scores.csv lists every trial.", ""]
    md += versions_lines(runs)
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
            cell, text, bold, p_text, owner = cols[column]
            md_cells.append((f"**{text}**" if bold else text) + (f"<br>paper: {p_text}" if p_text else ""))
            tex_text = text.replace("+-", "$\\pm$").replace("kappa=", "$\\kappa$=").replace("lambda=", "$\\lambda$=")
            tex_cells.append(f"\\textbf{{{tex_text}}}" if bold else tex_text)
            rows_csv.append({
                "env": t.env, "c_fa": "" if t.c_fa is None else t.c_fa, "gamma": t.gamma,
                "row": owner, "column": column,
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
            if _is_shared(name):  # shared by the env's C_FA tables: once per env
                if (t.env, name, param) in shown:
                    continue
                shown.add((t.env, name, param))
            c_fa = "" if t.c_fa is None or _is_shared(name) else f"{t.c_fa:g}"
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


def write_scores(runs: list[Run], out: Path, root: Path | None = None) -> Path:
    """One row per trial; its `path` relative to the experiment folder `root` (where given), so the
    file means the same wherever the folder is moved or published; the library versions it ran with
    (kappa_rllib.versions: empty where not recorded; sets apart by " | " where its stretches differed)."""
    path = out / "scores.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["env", "family", "variant", "kappa", "c_fa", "naive", "gamma", "lambda", "seed",
                         "episodes", "env_steps", "done", "score", "path", "versions"])
        for r in runs:
            writer.writerow([r.env, r.family, r.variant, r.kappa, r.c_fa, r.naive, r.gamma, r.lambda_, r.seed,
                             len(r.episode_returns), r.env_steps, r.done, r.score,
                             os.path.relpath(r.path, root) if root is not None else r.path,
                             " | ".join(describe(v) for v in r.versions)])
    return path
