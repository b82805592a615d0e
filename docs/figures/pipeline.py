"""Draws kappa-DQN's actor-learner pipeline for the layout page: `python docs/figures/pipeline.py`.

Writes kappa_dqn_pipeline.png (wide screens) and kappa_dqn_pipeline_narrow.png (phones) beside this file.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

HERE = Path(__file__).resolve().parent
COLORS = {"runner": "#e8f1fb", "driver": "#fdf3e3", "replay": "#eef7ea", "learner": "#f6ebf7"}

BOXES = {
    "runner": ("EnvRunners 1..N (Ray actors)",
               ["each: 4 sub-envs, one forward pass of $Q_\\theta$",
                "ε-greedy at the global env step",
                "returns raw segments (Atari: each frame once)",
                "and the weights version it acted with"]),
    "driver": ("Driver: KappaDQN.training_step",
               ["1. collect chunk k (64 env steps a runner)",
                "2. add it to the replay, draw its minibatches",
                "3. request chunk k+1, with the weights",
                "    after chunk k−1's updates",
                "4. chunk k's fused learner call (on the",
                "    learner thread with learner_thread=True)",
                "5. publish the new $Q_\\theta$ once: shared memory",
                "    on this node, one object for other nodes"]),
    "replay": ("Replay (uniform, raw transitions)",
               ["Atari frames stored once each:",
                "GPU learner: uint8 ring on the GPU,",
                "    minibatches gathered there",
                "CPU learner: LZ4 in host memory"]),
    "learner": ("Learner (GPU or CPU)",
                ["a chunk's TD updates in one fused call:",
                 "$Q_\\theta$, or $Q_\\phi$ in κ-PI's evaluation",
                 "target $r + \\gamma(1-\\kappa)V_\\phi(s')$ in the loss",
                 "target copies at exact update counts",
                 "on a GPU: each step a CUDA graph"]),
}


DPI = 150  # (kappa_rllib.report.plots.PLOT_DPI: tests/test_docs.py checks the text's size where it is shown)


def box(ax, key, x, y, w, h, pt):
    """A titled box at (x, y), w x h inches; its lines at `pt` points."""
    title, lines = BOXES[key]
    step = pt * 1.5 / 72
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=COLORS[key], ec="#555555", lw=1.2))
    ax.text(x + 0.12, y + h - 0.12, title, fontsize=pt + 1, fontweight="bold", va="top")
    for i, line in enumerate(lines):
        ax.text(x + 0.12, y + h - 0.16 - step * (i + 1.2), line, fontsize=pt, va="top")


def arrow(ax, start, end, label="", pt=10, side=0.08, ha="left"):
    """An arrow from `start` to `end` (inches), its label beside its middle."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, lw=1.4, color="#333333"))
    if label:
        mid = ((start[0] + end[0]) / 2 + side, (start[1] + end[1]) / 2)
        ax.text(*mid, label, fontsize=pt, ha=ha, va="center", style="italic")


def canvas(width, height):
    fig = plt.figure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def wide(pt=10):
    """Three rows, 8.5 inches wide: at a 690 px text column, 10 pt text is ~11 px high."""
    fig, ax = canvas(8.5, 6.65)
    box(ax, "runner", 0.1, 5.3, 8.3, 1.25, pt)
    box(ax, "driver", 0.1, 2.45, 8.3, 2.1, pt)
    box(ax, "replay", 0.1, 0.1, 3.9, 1.55, pt)
    box(ax, "learner", 4.4, 0.1, 4.0, 1.55, pt)
    arrow(ax, (2.0, 5.3), (2.0, 4.55), "chunk k (segments)", pt)
    arrow(ax, (6.0, 4.55), (6.0, 5.3), "request chunk k+1 + its weights", pt)
    arrow(ax, (1.2, 2.45), (1.2, 1.65), "add", pt)
    arrow(ax, (2.8, 1.65), (2.8, 2.45), "draw", pt)
    arrow(ax, (5.2, 2.45), (5.2, 1.65), "minibatches", pt)
    arrow(ax, (7.4, 1.65), (7.4, 2.45), "new $Q_\\theta$", pt)
    fig.savefig(HERE / "kappa_dqn_pipeline.png", dpi=DPI)
    plt.close(fig)


def narrow(pt=9.5):
    """Four rows, 4.6 inches wide (a phone shows it ~350 px wide: 9.5 pt text ~10 px high); the driver and the
    learner joined along the left margin, past the replay."""
    fig, ax = canvas(4.6, 9.6)
    x, w = 0.45, 4.05
    box(ax, "runner", x, 8.1, w, 1.4, pt)
    box(ax, "driver", x, 5.2, w, 2.2, pt)
    box(ax, "replay", x, 2.9, w, 1.6, pt)
    box(ax, "learner", x, 0.1, w, 2.0, pt)
    arrow(ax, (1.3, 8.1), (1.3, 7.4), "chunk k", pt)
    arrow(ax, (3.3, 7.4), (3.3, 8.1), "request k+1\n+ weights", pt)
    arrow(ax, (1.3, 5.2), (1.3, 4.5), "add", pt)
    arrow(ax, (3.3, 4.5), (3.3, 5.2), "draw", pt)
    ax.add_patch(FancyArrowPatch((0.3, 5.6), (0.3, 1.7), arrowstyle="<|-|>", mutation_scale=14, lw=1.4,
                                 color="#333333"))
    ax.text(0.14, 3.65, "minibatches (down), new $Q_\\theta$ (up)", fontsize=pt, rotation=90, ha="center",
            va="center", style="italic")
    fig.savefig(HERE / "kappa_dqn_pipeline_narrow.png", dpi=DPI)
    plt.close(fig)


if __name__ == "__main__":
    wide()
    narrow()
