"""What a report is made of: one trial's results (`Run`), one table cell's scores over seeds (`Cell`),
the paper's score of a run, and the plotting helpers. The report package imports one way: its entry
(`__init__.report`) -> load, tables, iqm, plots, adaptive -> data (iqm and plots also read tables).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

LAST_FRACTION = 0.1  # the paper's "final training performance": the last 10% of episodes
# A cell's interval over its n seeds: Student's t, t_{0.975, n-1} x s / sqrt(n) (ci95; 1.96 in its place covers ~88%
# at 5 seeds, ~81% at 3). The paper's own +- is 1.96 s / sqrt(10) over its 10 seeds (its Tables 1 and 2).
CELL_INTERVAL = "mean +- Student-t 95% interval (t_{0.975,n-1} std / sqrt(n)) over seeds"
PAPER_INTERVAL = "mean +- 1.96 s/sqrt(10) over its 10 seeds"
# Which episodes are "the last 10%" (`kappa-rllib report --score-window`). "episodes" (the default, the
# paper's wording): the last 10% by count. "env-steps": those reported in the run's last 10% of env
# steps. They differ when episode lengths change over training: a run whose early episodes are many
# and short (a policy that falls at once) has a last 10% by count that reaches far back into training
# (docs/results/table2/README.md, Ant's naive cell).
SCORE_WINDOWS = ("episodes", "env-steps")
SCORE_RULES = {"episodes": "mean return over its last 10% of training episodes",
               "env-steps": "mean return of the training episodes reported in its last 10% of env steps "
                            "(at least its last episode)"}


@dataclasses.dataclass
class Run:
    """One trial: its distinguishing settings and what it reported."""

    path: str
    env: str
    family: str  # "dqn", "trpo", "ppo" or "appo"
    # "kappa-pi", "kappa-vi", or "plain" (TRPO / GAE); a non-default phi_fit or phi_target (kappa-pi) and a
    # non-default sampling layout (`sampling`) are appended: "kappa-pi (num_envs_per_env_runner=1)"
    variant: str
    kappa: float  # 1.0 for plain TRPO and GAE
    c_fa: float | None
    naive: bool
    gamma: float
    lambda_: float | None  # GAE's lambda (plain TRPO: 1.0)
    seed: int  # 0 where the trial set none (seed_given False)
    episode_returns: list
    steps: np.ndarray  # env steps at each report
    curve: np.ndarray  # RLlib's smoothed episode_return_mean at each report
    env_steps: int
    done: bool = True  # reached its T (reported `done`); unfinished runs stay out of the tables
    kappa_path: np.ndarray | None = None  # the kappa in force at each report (adaptive kappa moves it)
    population: str | None = None  # the PBT / PB2 population (Tune experiment) the run is a member of
    # the library versions it ran with, one per distinct set its stretches reported (kappa_rllib.versions);
    # () for a trial from before they were recorded
    versions: tuple = ()
    seed_given: bool = True  # its config set a seed (False: RLlib's None, read as 0; e.g. num_samples repeats)
    # RLlib's periodic evaluation (evaluation/env_runners/episode_return_mean) at each report, nan before
    # the first; None if the run was not evaluated
    eval_curve: np.ndarray | None = None
    # the env-step count of the result row that reported each episode (the row's end: an episode ends
    # within its row's env steps); needed by the "env-steps" score window only
    episode_steps: np.ndarray | None = None
    score_window: str = "episodes"  # SCORE_WINDOWS
    # a PBT / PB2 member: the reports where it went on from another member's checkpoint (and its counters),
    # and its first episode since the last of them (report/load.py)
    timelines: tuple = ()
    last_timeline: int = 0
    # its non-default sampling settings ("num_envs_per_env_runner=1", load.SAMPLING_DEFAULTS), "" for the
    # default layout: its cells (TRPO / GAE included) are kept apart from the default ones
    sampling: str = ""
    _scores: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)  # per window

    @property
    def score(self) -> float:
        if self.score_window not in self._scores:
            try:
                self._scores[self.score_window] = final_score(
                    self.episode_returns, window=self.score_window, episode_steps=self.episode_steps,
                    env_steps=self.env_steps, first=self.last_timeline)
            except ValueError as e:
                raise ValueError(f"{self.path}: {e}") from None
        return self._scores[self.score_window]

    @property
    def is_plain(self) -> bool:
        """TRPO / GAE (not a kappa algorithm), in any sampling layout."""
        return is_plain(self.variant)

    @property
    def is_baseline(self) -> bool:
        """kappa = 1 (DQN / TRPO exactly): a kappa algorithm at kappa 1, or TRPO with lambda 1."""
        return not self.naive and self.kappa == 1.0 and (not self.is_plain or self.lambda_ == 1.0)

    @property
    def is_gae(self) -> bool:
        return self.is_plain and self.lambda_ is not None and self.lambda_ < 1.0


def is_plain(variant: str) -> bool:
    """A variant of TRPO / GAE runs: "plain", or "plain (<its sampling settings>)"."""
    return variant == "plain" or variant.startswith("plain (")


def shared_row(sampling: str) -> str:
    """The table row of the baseline and GAE cells sampled with `sampling` (Run.sampling): "" for the default."""
    return f"plain ({sampling})" if sampling else ""


def check_score_window(window: str) -> None:
    if window not in SCORE_WINDOWS:
        raise ValueError(f"score window {window!r}: one of {', '.join(SCORE_WINDOWS)}")


def final_score(episode_returns, window: str = "episodes", episode_steps=None, env_steps: int | None = None,
                first: int = 0) -> float:
    """A run's score (SCORE_RULES[window]); nan if it has no episode.

    "episodes": the mean of the last ceil(10%) of its episode returns (at least one).
    "env-steps": the mean of the returns whose `episode_steps` (the env steps of the result row that
    reported them) exceed 90% of `env_steps`, the run's last count, from episode `first` on (a PBT member's
    episodes before it went on from another member's checkpoint count that member's steps); at least the
    last episode.
    """
    returns = np.asarray(episode_returns, dtype=float)
    if returns.size == 0:
        return float("nan")
    if window == "episodes":
        k = max(1, int(math.ceil(LAST_FRACTION * returns.size)))
        return float(returns[-k:].mean())
    check_score_window(window)
    steps = np.asarray(episode_steps if episode_steps is not None else [], dtype=float)
    if steps.shape != returns.shape or not env_steps or not np.isfinite(steps[first:]).all():
        raise ValueError("the env-steps score window needs the env-step count (num_env_steps_sampled_lifetime) "
                         "of every result row that reports episodes, and of the last row")
    last = steps > (1.0 - LAST_FRACTION) * env_steps
    last[:first] = False  # a PBT member's episodes before it took a donor's checkpoint count other steps
    return float(returns[last].mean()) if last.any() else float(returns[-1])


def t95(n) -> np.ndarray | float:
    """t_{0.975, n-1}: the two-sided 95% quantile of Student's t for n seeds (scipy's), element-wise; nan below 2."""
    from scipy.stats import t

    n = np.asarray(n, dtype=float)
    out = np.where(n >= 2, t.ppf(0.975, np.maximum(n, 2) - 1), np.nan)
    return float(out) if out.ndim == 0 else out


def ci95(scores) -> float:
    """The half-width of the Student-t 95% interval of the mean of `scores`: t_{0.975, n-1} x s / sqrt(n), s the
    sample std (ddof 1); nan for fewer than 2 scores (one seed has no interval)."""
    scores = np.asarray(scores, dtype=float)
    n = scores.size
    return float(t95(n) * scores.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")


# The base algorithm's runs of a cell, in the order a seed's run is taken (tables' baseline rule): TRPO / GAE first,
# then a kappa variant run at kappa = 1 (which is TRPO / DQN exactly).
_BASELINE_ORDER = {"plain": 0, "kappa-pi": 1, "kappa-vi": 2}


def baseline_rank(run: Run) -> int:
    """Where a base-algorithm run stands among a cell's runs of one seed: TRPO's first (_BASELINE_ORDER)."""
    return _BASELINE_ORDER.get(run.variant.split(" (")[0], len(_BASELINE_ORDER))


def cell_of(run: Run) -> tuple:
    """The cell a run counts in, whatever table or figure reads it: (env, gamma, what, sampling or C_FA, kappa or
    lambda). The base algorithm (kappa = 1: TRPO, or a kappa variant at kappa = 1) and GAE by their sampling layout
    (data.shared_row), never by variant; a kappa algorithm's cells by variant, schedule, C_FA and kappa."""
    if run.is_baseline:
        return run.env, run.gamma, "baseline", run.sampling, 1.0
    if run.is_plain:
        return run.env, run.gamma, "gae", run.sampling, run.lambda_
    return run.env, run.gamma, run.variant + (" naive" if run.naive else ""), run.c_fa, run.kappa


def _trial_key(run: Run):
    """What tells a cell's trials apart: the seed where the trial set one; else its folder's name (trials without a
    seed, as a grid's `num_samples` repeats make, are all different; a copy of one published twice keeps its name)."""
    from pathlib import Path

    return run.seed if run.seed_given else ("trial", Path(run.path).name)


def one_per_cell(runs: list[Run]) -> list[Run]:
    """`runs` with one run per seed of each cell (cell_of, within its family), in their order: a trial published twice (load_runs
    reads every result.json under the root, copies included) and a kappa variant's run at kappa = 1 on a seed TRPO
    (DQN) also ran count once, TRPO's run first. Every table and figure reads its cells from this, so each agrees
    on a cell's n and mean."""
    ranked = sorted(range(len(runs)), key=lambda i: (baseline_rank(runs[i]) if runs[i].is_baseline else 0, i))
    seen, kept = set(), set()
    for i in ranked:
        key = (runs[i].family, cell_of(runs[i]), _trial_key(runs[i]))
        if key not in seen:
            seen.add(key)
            kept.add(i)
    return [r for i, r in enumerate(runs) if i in kept]


@dataclasses.dataclass
class Cell:
    """Scores of one table cell over seeds."""

    scores: np.ndarray
    param: float | None = None  # the kappa (or lambda) the cell is at

    @property
    def n(self) -> int:
        return int(self.scores.size)

    @property
    def mean(self) -> float:
        return float(self.scores.mean()) if self.n else float("nan")

    @property
    def ci(self) -> float:
        """The half-width of its Student-t 95% interval over seeds (ci95); nan for one seed."""
        return ci95(self.scores)

    def overlaps(self, other: "Cell") -> bool:
        ci, oci = (0.0 if math.isnan(c) else c for c in (self.ci, other.ci))
        return self.mean + ci >= other.mean - oci and other.mean + oci >= self.mean - ci


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt
