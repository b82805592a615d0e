"""`kappa-rllib report`'s figures read as data: what each draws is checked against the report's numbers (the
artists' data, tagged by gid), never the pixels. The figure against the paper (`vs_paper.png`), the IQM interval
plot (`iqm.png`) and the lower-discount study (`lower_gamma.md`, `lower_gamma_<env>.png`, the paper's Fig. 3)."""

import math

import numpy as np
import pytest
from rliable import metrics

from kappa_rllib import report
from kappa_rllib.report import iqm, lower_gamma, plots, vs_paper
from kappa_rllib.report.data import Run


def _runs(env, scores, *, variant="plain", kappa=1.0, lambda_=None, naive=False, c_fa=0.2, gamma=0.99,
          family="trpo", sampling=""):
    """Hand-built Runs of one cell, one episode each: a run's score is its score."""
    plain = variant.startswith("plain")
    return [Run(path=f"{env}/{variant}/{kappa}/{lambda_}/{naive}/{gamma}/{seed}", env=env, family=family,
                variant=variant, kappa=kappa, c_fa=None if plain else c_fa, naive=naive, gamma=gamma,
                lambda_=(1.0 if lambda_ is None else lambda_) if plain else None, seed=seed,
                episode_returns=[float(s)], steps=np.array([1000.0]), curve=np.array([float(s)]), env_steps=1000,
                sampling=sampling)
            for seed, s in enumerate(scores)]


def _ci(scores):
    """Student's t 95% half-width: t_{0.975, n-1} std / sqrt(n) (3 seeds: t_{0.975, 2} = 4.302653)."""
    return {2: 12.706205, 3: 4.302653, 5: 2.776445}[len(scores)] * np.std(scores, ddof=1) / math.sqrt(len(scores))


def _tagged(fig):
    """{gid: artist} over every axis of the figure."""
    found = {}
    for ax in fig.axes:
        for artist in ax.get_children():
            if artist.get_gid():
                found[artist.get_gid()] = artist
    return found


# Walker2d: the paper's Table 2 cells (kappa-PI 1438 +- 188 at 0.68, kappa = 0 1371 +- 192, kappa-VI 954 +- 88 at 0.68,
# TRPO 594 +- 99, naive 1082 +- 110 at kappa 0, GAE 1601 +- 190 at lambda 0); TRPO at two lower discounts
WALKER = (_runs("Walker2d-v5", [1500, 1700, 1900], variant="kappa-pi", kappa=0.68)
          + _runs("Walker2d-v5", [2500, 2600, 2700], variant="kappa-pi", kappa=0.36)  # here's best, not the paper's
          + _runs("Walker2d-v5", [1200, 1300, 1400], variant="kappa-pi", kappa=0.0)
          + _runs("Walker2d-v5", [900, 1000, 1100], variant="kappa-pi", kappa=0.0, naive=True)
          + _runs("Walker2d-v5", [700, 710, 720], variant="kappa-vi", kappa=0.68)
          + _runs("Walker2d-v5", [1800, 1900, 2000], variant="kappa-pi", kappa=0.68,
                  sampling="num_envs_per_env_runner=1")
          + _runs("Walker2d-v5", [580, 590, 600])  # TRPO
          + _runs("Walker2d-v5", [1300, 1310, 1320], lambda_=0.0)  # GAE
          + _runs("Walker2d-v5", [1400, 1400, 1400], lambda_=0.84)  # a better GAE lambda than the paper's
          + _runs("Walker2d-v5", [400, 420, 440], gamma=0.68)
          + _runs("Walker2d-v5", [610, 620, 630], gamma=0.92))
for _r in WALKER:  # the one-sub-env cell is its own variant, as report/load.py names it
    if _r.sampling:
        _r.variant = "kappa-pi (num_envs_per_env_runner=1)"


def test_vs_paper_takes_each_cell_at_the_papers_own_setting_beside_the_papers_number():
    tables = report.build_tables(WALKER)
    [panel] = vs_paper.vs_paper_panels(tables, WALKER, report.load_paper_tables())
    entries = {e.label: e for e in panel.entries}
    assert list(entries) == ["κ-PI κ=0.68", "κ-PI κ=0", "κ-PI naive N_κ=T, κ=0", "κ-VI κ=0.68",
                             "κ-PI κ=0.68, 1 sub-env", "TRPO", "GAE λ=0", "TRPO γ=0.68", "TRPO γ=0.92"]
    # at the paper's kappa_best 0.68, not here's best 0.36; GAE at the paper's lambda 0, not here's best 0.84
    assert entries["κ-PI κ=0.68"].cell.mean == pytest.approx(1700) and entries["κ-PI κ=0.68"].paper == (1438, 188)
    assert entries["GAE λ=0"].cell.mean == pytest.approx(1310) and entries["GAE λ=0"].paper == (1601, 190)
    assert entries["κ-PI κ=0"].paper == (1371, 192) and entries["κ-VI κ=0.68"].paper == (954, 88)
    assert entries["TRPO"].paper == (594, 99) and entries["κ-PI naive N_κ=T, κ=0"].paper == (1082, 110)
    assert entries["κ-PI κ=0.68, 1 sub-env"].paper == (1438, 188)  # the authors sample one env: the same cell
    assert entries["TRPO γ=0.68"].paper is None and entries["TRPO γ=0.68"].cell.mean == pytest.approx(420)


@pytest.mark.parametrize("narrow", [False, True], ids=["two columns", "one column (a phone)"])
def test_vs_paper_draws_every_seed_each_mean_and_its_ci_and_the_papers_mean_and_band(narrow):
    tables = report.build_tables(WALKER)
    panels = vs_paper.vs_paper_panels(tables, WALKER, report.load_paper_tables())
    fig = vs_paper.vs_paper_figure(panels, narrow=narrow)
    assert fig.get_figwidth() == (plots.NARROW_WIDTH_IN if narrow else vs_paper.WIDTH_IN)
    drawn = _tagged(fig)
    for e in panels[0].entries:
        tag = f"Walker2d-v5|{e.label}"
        seeds = drawn[f"seeds|{tag}"].get_offsets()
        assert sorted(seeds[:, 0]) == pytest.approx(sorted(e.cell.scores))
        y = seeds[:, 1].mean()
        here = drawn[f"here|{tag}"]
        assert here.get_xdata()[0] == pytest.approx(e.cell.mean) and here.get_ydata()[0] == pytest.approx(y)
        if e.paper is None:
            assert f"paper|{tag}" not in drawn and f"paper band|{tag}" not in drawn
            continue
        assert drawn[f"paper|{tag}"].get_xdata()[0] == e.paper[0]
        band = drawn[f"paper band|{tag}"].get_paths()[0].vertices
        assert band[:, 0].min() == pytest.approx(e.paper[0] - e.paper[1])
        assert band[:, 0].max() == pytest.approx(e.paper[0] + e.paper[1])
        assert band[:, 1].min() < y < band[:, 1].max()  # on its cell's row
    # the 95% interval: the error bar's half-width is t_{0.975, n-1} std / sqrt(n) of the seeds
    bars = [c for c in fig.axes[0].containers if c.lines[0].get_gid() == "here|Walker2d-v5|κ-PI κ=0.68"]
    segment = bars[0].lines[2][0].get_segments()[0]
    assert segment[1][0] - segment[0][0] == pytest.approx(2 * _ci([1500, 1700, 1900]))
    # the legend names both intervals, ours and the paper's, and stands above the panels, inside the figure
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == [
        "here: a seed", "here: mean, Student-t 95% CI", "paper: mean", "paper: ± 1.96 s/√10, 10 seeds (MuJoCo v2)"]
    fig.canvas.draw()
    box, top = legend.get_window_extent(), max(ax.get_window_extent().y1 for ax in fig.axes if ax.get_visible())
    assert box.y0 > top and box.x0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1
    # MinAtar (no paper cell for it): no figure
    minatar = _runs("MinAtar/Breakout-v1", [5, 6, 7], variant="kappa-pi", kappa=0.84, family="dqn", c_fa=0.05)
    assert vs_paper.vs_paper_panels(report.build_tables(minatar), minatar, report.load_paper_tables()) == []


def test_vs_paper_compares_the_base_cell_where_the_papers_setting_is_1():
    """The paper's kappa_best is 1 on Swimmer (kappa-PI and kappa-VI) and BeamRider (kappa-PI), so is its naive
    N_kappa = T cell's kappa there, and Swimmer's GAE lambda_best is 1: kappa = 1 (lambda = 1) is the base algorithm
    exactly, so vs_paper compares the base cell (TRPO / DQN, sampled as the row was) with those paper values, never
    here's best kappa < 1 (a kappa = 0 stand-in) under them; as iqm.py's kappa_best against kappa = 0 does."""
    one = "num_envs_per_env_runner=1"
    swimmer = (_runs("Swimmer-v5", [110, 120, 130])  # TRPO
               + _runs("Swimmer-v5", [40, 45, 50], variant="kappa-pi", kappa=0.0)  # here's best kappa-PI cell
               + _runs("Swimmer-v5", [30, 35, 40], variant="kappa-pi", kappa=0.68)
               + _runs("Swimmer-v5", [60, 60, 60], variant="kappa-pi", kappa=0.68, naive=True)
               + _runs("Swimmer-v5", [20, 25, 30], variant="kappa-vi", kappa=0.84)
               + _runs("Swimmer-v5", [70, 80, 90], lambda_=0.84)  # GAE
               + _runs("Swimmer-v5", [50, 55, 60], variant="kappa-pi", kappa=0.68, sampling=one)
               + _runs("Swimmer-v5", [300, 310, 320], variant=f"plain ({one})", sampling=one))  # TRPO, 1 sub-env
    for r in swimmer:
        if r.sampling and not r.is_plain:
            r.variant = f"kappa-pi ({one})"
    dqn = {"family": "dqn", "c_fa": 0.05}
    beamrider = (_runs("ALE/BeamRider-v5", [3000, 3100, 3200], variant="kappa-pi", kappa=1.0, **dqn)  # DQN
                 + _runs("ALE/BeamRider-v5", [2000, 2100, 2200], variant="kappa-pi", kappa=0.0, **dqn)
                 + _runs("ALE/BeamRider-v5", [1000, 1100, 1200], variant="kappa-pi", kappa=0.84, **dqn)
                 + _runs("ALE/BeamRider-v5", [4000, 4100, 4200], variant="kappa-vi", kappa=0.84, **dqn))
    runs = swimmer + beamrider
    tables = report.build_tables(runs)
    panels = {p.env: p for p in vs_paper.vs_paper_panels(tables, runs, report.load_paper_tables())}
    swim = {e.label: e for e in panels["Swimmer-v5"].entries}
    assert list(swim) == ["κ-PI κ=1 (TRPO)", "κ-PI κ=0", "κ-PI naive N_κ=T, κ=1 (TRPO)", "κ-VI κ=1 (TRPO)",
                          "κ-PI κ=1 (TRPO), 1 sub-env", "TRPO", "GAE λ=1 (TRPO)", "TRPO, 1 sub-env"]
    table = next(t for t in tables if t.env == "Swimmer-v5")
    for label in ("κ-PI κ=1 (TRPO)", "κ-PI naive N_κ=T, κ=1 (TRPO)", "κ-VI κ=1 (TRPO)", "GAE λ=1 (TRPO)"):
        assert swim[label].cell is table.rows[""]["baseline"], label
    assert swim["κ-PI κ=1 (TRPO), 1 sub-env"].cell is table.rows[f"plain ({one})"]["baseline"]
    assert swim["κ-PI κ=1 (TRPO)"].paper == (107, 12) and swim["κ-VI κ=1 (TRPO)"].paper == (114, 15)
    assert swim["κ-PI naive N_κ=T, κ=1 (TRPO)"].paper == (107, 12) and swim["GAE λ=1 (TRPO)"].paper == (103, 13)
    assert swim["κ-PI κ=0"].cell.mean == pytest.approx(45) and swim["κ-PI κ=0"].paper == (42, 3)
    beam = {e.label: e for e in panels["ALE/BeamRider-v5"].entries}
    assert list(beam) == ["κ-PI κ=1 (DQN)", "κ-PI κ=0", "κ-VI κ=0.84", "DQN"]
    assert beam["κ-PI κ=1 (DQN)"].cell.mean == pytest.approx(3100) and beam["κ-PI κ=1 (DQN)"].paper == (3849, 110)
    assert beam["κ-VI κ=0.84"].cell.mean == pytest.approx(4100) and beam["κ-VI κ=0.84"].paper == (4277, 269)
    # a panel of Atari tasks alone: the paper's band is its 10 seeds' interval, with no MuJoCo version
    fig = vs_paper.vs_paper_figure([panels["ALE/BeamRider-v5"]])
    assert fig.legends[0].get_texts()[-1].get_text() == "paper: ± 1.96 s/√10, 10 seeds"


def test_the_curves_band_is_the_students_t_interval_of_the_seeds_reached(tmp_path):
    """plots._mean_band: at each env-step count, the mean over the seeds that reached it and t_{0.975, n-1} x s /
    sqrt(n) over them (n = 2 where one seed starts later: 12.706), no band for one seed."""
    def run(seed, steps, curve):
        return Run(path=f"r{seed}", env="Hopper-v5", family="trpo", variant="plain", kappa=1.0, c_fa=None,
                   naive=False, gamma=0.99, lambda_=1.0, seed=seed, episode_returns=[1.0],
                   steps=np.asarray(steps, dtype=float), curve=np.asarray(curve, dtype=float), env_steps=100)

    runs = [run(0, [0, 100], [0, 100]), run(1, [0, 100], [10, 110]), run(2, [50, 100], [200, 200])]
    x, mean, half = plots._mean_band(runs, points=3)
    assert x.tolist() == [0, 50, 100]
    assert mean == pytest.approx([5, 310 / 3, 410 / 3])
    assert half[0] == pytest.approx(12.706205 * 5.0, rel=1e-6)  # [0, 10]: s / sqrt(2) = 5
    assert half[1:] == pytest.approx([_ci([50, 60, 200]), _ci([100, 110, 200])], rel=1e-6)
    assert plots._mean_band(runs[:1], points=3)[2].tolist() == [0, 0, 0]


def test_the_iqm_figure_draws_the_aggregate_iqm_md_gives(tmp_path):
    runs = []
    for env, shift in (("Walker2d-v5", 0), ("Hopper-v5", 100)):
        runs += (_runs(env, [500 + shift, 600 + shift, 700 + shift], variant="kappa-pi", kappa=0.68)
                 + _runs(env, [100 + shift, 200 + shift, 300 + shift]))
    paths = iqm.write_iqm(report.build_tables(runs), tmp_path, reps=200)
    assert [p.name for p in paths] == ["iqm.md", "iqm.csv", "iqm.png", "iqm_narrow.png"]
    aggregate = iqm._normalised_aggregate(
        {(v, c): {t.env + " (C_FA 0.2)": cell.scores for t in report.build_tables(runs)
                  for v2, cols in t.rows.items() for c2, cell in cols.items() if (v2, c2) == (v, c)}
         for v, c in (("kappa-pi", "kappa_best"), ("", "baseline"))}, report.build_tables(runs))
    fig = iqm.iqm_figure(aggregate, "TRPO")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["TRPO (κ = 1) (2 envs)", "κ-PI κ_best (2 envs)"]  # the best on top
    bars = [p for p in ax.patches if p.get_width() > 0]
    for label, name in zip(labels, ["baseline", "kappa-pi kappa_best"]):
        value, lo, hi, _ = aggregate[name]
        [bar] = [b for b in bars if abs(b.get_y() + b.get_height() / 2 - labels.index(label)) < 1e-9]
        assert bar.get_x() == pytest.approx(lo) and bar.get_x() + bar.get_width() == pytest.approx(hi)
    # the phone's drawing: the same bars, NARROW_WIDTH_IN wide, each cell's name above its bar, none beside
    narrow = iqm.iqm_figure(aggregate, "TRPO", narrow=True)
    nax = narrow.axes[0]
    assert narrow.get_figwidth() == plots.NARROW_WIDTH_IN
    assert not any(t.get_text() for t in nax.get_yticklabels())
    written = {t.get_gid(): t for t in nax.texts}
    for i, name in enumerate(["baseline", "kappa-pi kappa_best"]):
        value, lo, hi, _ = aggregate[name]
        assert written[f"label|{name}"].get_text() == labels[i]
        [bar] = [b for b in nax.patches if b.get_width() > 0 and abs(b.get_y() + b.get_height() / 2 - i) < 1e-9]
        assert bar.get_x() == pytest.approx(lo) and bar.get_x() + bar.get_width() == pytest.approx(hi)
        assert i < written[f"label|{name}"].get_position()[1] < i + 1 - bar.get_height() / 2  # between two bars
    # the IQM of the normalised kappa-PI runs: each env's min-max over its 6 runs puts them at 2/3 .. 1
    assert aggregate["kappa-pi kappa_best"][0] == pytest.approx(
        metrics.aggregate_iqm(np.array([[2 / 3, 2 / 3], [5 / 6, 5 / 6], [1.0, 1.0]])))


# Ant: TRPO improves at gamma 0.68 (the paper's reading) but kappa-VI beats it; Walker2d: a lower gamma does not help
STUDY = (_runs("Ant-v5", [-20, -18, -16])  # TRPO at 0.99
         + _runs("Ant-v5", [800, 900, 1000], gamma=0.68)
         + _runs("Ant-v5", [100, 200, 300], gamma=0.92)
         + _runs("Ant-v5", [1300, 1400, 1500], variant="kappa-pi", kappa=0.68)
         + _runs("Ant-v5", [700, 1000, 1300], variant="kappa-pi", kappa=0.0)
         + _runs("Ant-v5", [3000, 3100, 3200], variant="kappa-vi", kappa=0.68)
         + _runs("Walker2d-v5", [590, 600, 610])
         + _runs("Walker2d-v5", [500, 650, 400], gamma=0.68)
         + _runs("Walker2d-v5", [1500, 1600, 1700], variant="kappa-pi", kappa=0.68)
         + _runs("Walker2d-v5", [900, 1000, 1100], variant="kappa-vi", kappa=0.68)
         + _runs("Hopper-v5", [1000, 1100, 1200], variant="kappa-pi", kappa=0.68))  # no lower gamma: no study


def test_the_gamma_study_puts_every_cell_of_a_task_on_the_discount_axis():
    studies = {s.env: s for s in lower_gamma.gamma_study(STUDY)}
    assert set(studies) == {"Ant-v5", "Walker2d-v5"}
    ant = studies["Ant-v5"]
    assert {g: c.mean for g, c in ant.base.items()} == pytest.approx({0.68: 900, 0.92: 200, 0.99: -18})
    assert ant.best_lower().param == 0.68
    assert {k: c.mean for k, c in ant.kappas["kappa-pi"].items()} == pytest.approx({0.0: 1000, 0.68: 1400, 1.0: -18})
    assert ant.kappa_best["kappa-pi"].param == 0.68 and ant.kappa_best["kappa-vi"].param == 0.68
    for narrow in (False, True):  # the wide drawing, and the phone's: the same cells, one panel above the other
        fig = lower_gamma.study_figure(ant, narrow=narrow)
        drawn = _tagged(fig)
        for g, cell in ant.base.items():
            assert sorted(drawn[f"seeds|gamma|TRPO|{g:g}"].get_offsets()[:, 1]) == pytest.approx(sorted(cell.scores))
            assert drawn[f"mean|gamma|TRPO|{g:g}"].get_ydata()[0] == pytest.approx(cell.mean)
        for variant, cells in ant.kappas.items():
            for k, cell in cells.items():
                assert drawn[f"mean|kappa|{variant}|{k:g}"].get_ydata()[0] == pytest.approx(cell.mean)
        left, right = fig.axes[:2]
        assert [t.get_text() for t in left.get_xticklabels()] == ["0.68", "0.92", "0.99"]
        # one close pair (0.92, 0.99): its labels lean apart, level
        assert [(t.get_ha(), t.get_rotation()) for t in left.get_xticklabels()] == [
            ("center", 0), ("right", 0), ("left", 0)]
        assert [t.get_text() for t in right.get_xticklabels()] == ["0", "0.68", "1"]
        assert fig.get_figwidth() == (plots.NARROW_WIDTH_IN if narrow else plots.FIGURE_WIDTH_IN)
        (lx, ly), (rx, ry) = (ax.get_position().p0 for ax in (left, right))
        assert (lx == pytest.approx(rx) and ly > ry) if narrow else (rx > lx and ly == pytest.approx(ry))


def test_the_discount_labels_turn_when_more_than_one_pair_stands_close():
    """The cluster files' discounts (0.68, 0.84, 0.92, 0.98 and 0.99): three close pairs, leaning apart would
    still print "0.840.920.98 0.99"; the labels turn 60 degrees instead."""
    runs = _runs("Walker2d-v5", [600, 610, 620]) + _runs("Walker2d-v5", [1500, 1600, 1700], variant="kappa-pi",
                                                         kappa=0.68)
    for g in (0.68, 0.84, 0.92, 0.98):
        runs += _runs("Walker2d-v5", [400, 420, 440], gamma=g)
    [study] = lower_gamma.gamma_study(runs)
    left = lower_gamma.study_figure(study).axes[0]
    assert [t.get_text() for t in left.get_xticklabels()] == ["0.68", "0.84", "0.92", "0.98", "0.99"]
    assert {t.get_rotation() for t in left.get_xticklabels()} == {60}


def test_lower_gamma_md_gives_both_probabilities_of_improvement_per_task_and_over_the_tasks(tmp_path):
    paths = lower_gamma.write_lower_gamma(STUDY, tmp_path, reps=200)
    assert [p.name for p in paths] == ["lower_gamma.md", "lower_gamma_Ant-v5.png", "lower_gamma_Ant-v5_narrow.png",
                                       "lower_gamma_Walker2d-v5.png", "lower_gamma_Walker2d-v5_narrow.png"]
    text = paths[0].read_text()
    # kappa_best against the base algorithm at its best lower gamma: Mann-Whitney counts over the 3 x 3 pairs
    assert "| Ant-v5 | kappa-pi | kappa 0.68 (1400.0 +- 248.4, n=3) | gamma 0.68 (900.0 +- 248.4, n=3) | 1.00 |" in text
    assert "| Ant-v5 | kappa-vi | kappa 0.68 (3100.0 +- 248.4, n=3) | gamma 0.68 (900.0 +- 248.4, n=3) | 1.00 |" in text
    assert "| Walker2d-v5 | kappa-vi | kappa 0.68 (1000.0 +- 248.4, n=3) | gamma 0.68 (516.7 +- 312.6, n=3) | 1.00 |" in text
    assert "| kappa-pi, 2 tasks | 1.00 |" in text and "| kappa-vi, 2 tasks | 1.00 |" in text
    # does a lower gamma help the base algorithm? On Ant every pair: 1.00; on Walker2d 4 of 9 pairs above
    assert "| Ant-v5 | gamma 0.68 (900.0 +- 248.4, n=3) | gamma 0.99 (-18.0 +- 5.0, n=3) | 1.00 |" in text
    walker = metrics.probability_of_improvement(np.array([[500.0], [650.0], [400.0]]),
                                                np.array([[590.0], [600.0], [610.0]]))
    assert walker == pytest.approx(1 / 3)
    assert f"| Walker2d-v5 | gamma 0.68 (516.7 +- 312.6, n=3) | gamma 0.99 (600.0 +- 24.8, n=3) | {walker:.2f} |" in text
    assert f"| lower gamma, 2 tasks | {(1 + walker) / 2:.2f} |" in text
    assert "| Ant-v5 | baseline (kappa = 1) | 0.92 | 1 | 200.0 +- " in text  # every cell at another discount
    # a cell is written as table.md writes it, to a tenth: MinAtar's scores (5.7 against 6.3) read apart
    small = _runs("Walker2d-v5", [5.9, 6.0, 6.1]) + _runs("Walker2d-v5", [5.0, 6.5, 4.0], gamma=0.68)
    (tmp_path / "small").mkdir()
    small_text = lower_gamma.write_lower_gamma(small, tmp_path / "small", reps=200)[0].read_text()
    assert "| Walker2d-v5 | gamma 0.68 (5.2 +- 3.1, n=3) | gamma 0.99 (6.0 +- 0.2, n=3) |" in small_text
    # no run at another discount: nothing written
    assert lower_gamma.write_lower_gamma([r for r in STUDY if r.gamma == 0.99], tmp_path / "none") == []


def test_the_studys_base_at_the_main_discount_is_the_tables_baseline_plain_trpo_first():
    """A kappa variant run at kappa = 1 on the same seeds as plain TRPO: the table's baseline is TRPO's runs
    (tables.build_tables sorts plain first), and so is the study's point at gamma 0.99 and its kappa = 1."""
    runs = (_runs("Walker2d-v5", [900, 900, 900], variant="kappa-pi", kappa=1.0)
            + _runs("Walker2d-v5", [580, 590, 600])
            + _runs("Walker2d-v5", [400, 420, 440], gamma=0.68)
            + _runs("Walker2d-v5", [1500, 1700, 1900], variant="kappa-pi", kappa=0.68))
    [table] = report.build_tables(runs)
    [study] = lower_gamma.gamma_study(runs)
    assert sorted(table.rows[""]["baseline"].scores) == [580, 590, 600]
    assert sorted(study.base[0.99].scores) == [580, 590, 600]
    assert sorted(study.kappas["kappa-pi"][1.0].scores) == [580, 590, 600]


def test_the_curves_are_drawn_for_a_phone_too_with_the_same_lines_and_the_legend_under_each_panel(tmp_path):
    """plots.curves_figure at both widths: the same curves (label and mean) in the same panels; the narrow one
    NARROW_WIDTH_IN wide, each legend under its panel (inside a 4 in panel it covered the curves), its
    smallest text the wide one's; write_curves saves both."""
    runs = []
    for seed, shift in enumerate((0, 50, 100)):
        for variant, kappa, level in (("kappa-pi", 0.68, 1000), ("kappa-vi", 0.68, 800), ("plain", 1.0, 500)):
            steps = np.linspace(1e4, 1e6, 50)
            runs.append(Run(path=f"{variant}/{seed}", env="Walker2d-v5", family="trpo", variant=variant,
                            kappa=kappa, c_fa=None if variant == "plain" else 0.2, naive=False, gamma=0.99,
                            lambda_=1.0 if variant == "plain" else None, seed=seed,
                            episode_returns=[float(level + shift)], steps=steps,
                            curve=level * steps / 1e6 + shift, env_steps=1_000_000))
    [table] = report.build_tables(runs)
    drawn = {}
    for narrow in (False, True):
        fig = plots.curves_figure(table, runs, narrow=narrow)
        assert fig.get_figwidth() == (plots.NARROW_WIDTH_IN if narrow else plots.PANEL_WIDTH_IN)
        drawn[narrow] = [{line.get_label(): line.get_ydata()[-1] for line in ax.get_lines()} for ax in fig.axes]
        fig.canvas.draw()
        for ax in fig.axes:
            legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
            assert (legend.y1 < box.y0) if narrow else (box.y0 < legend.y0 and legend.y1 < box.y1)
    assert drawn[True] == drawn[False] and len(drawn[True]) == 2
    assert drawn[True][0]["kappa=0.68 (n=3)"] == pytest.approx(1050) and "kappa=1 (baseline) (n=3)" in drawn[True][1]
    names = [p.name for p in plots.write_curves(runs, [table], tmp_path)]
    assert names == ["curves_Walker2d-v5_cfa0.2.png", "curves_Walker2d-v5_cfa0.2_narrow.png"]
