"""Faults (docs/reliability.md, "Faults"): what a grid keeps when a trial's code fails, a node is lost
(twice), a node joins late, or the whole cluster (its head) is lost.

The retry policy (kappa_rllib.faults) on an embedded Ray; node faults on a real multi-node Ray cluster
(`ray start` processes on loopback, token auth, tests/test_cluster.py's LocalCluster), one cluster at a
time. Every case asserts what was kept: each trial finished once, at its T, and a retried or resumed
trial went on from its latest checkpoint, not from iteration 1.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "kappa_rllib.cli"]


def grid_file(folder: Path, name: str, env: str, total_env_steps: int, kappas=(0.84,)) -> Path:
    """A kappa-PI-DQN grid (one seed, C_FA 0.2, 500 env steps per iteration) written as a tune file."""
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(f"""\
        from kappa_rllib.experiments import SMOKE_SETTINGS, paper_grids

        def experiments(smoke=False):
            return paper_grids("dqn", {env!r}, kappas={list(kappas)!r}, c_fa=[0.2], num_seeds=1, variants=("pi",),
                               baseline=False, **{{**SMOKE_SETTINGS["dqn"], "total_env_steps": {total_env_steps}}})
        """))
    return path


def trial_rows(grid_dir: Path) -> dict[str, list[dict]]:
    return {r.parent.name: [json.loads(line) for line in r.read_text().splitlines() if line.strip()]
            for r in sorted(grid_dir.glob("*/result.json"))}


def failures(grid_dir: Path) -> list[int]:
    """Tune's failure count of each trial, from its error.txt ("Failure # N ...")."""
    counts = []
    for trial in sorted(p for p in grid_dir.iterdir() if p.is_dir()):
        error = trial / "error.txt"
        counts.append(error.read_text().count("Failure # ") if error.exists() else 0)
    return counts


def tune(*args: str, env=None, timeout: float = 420) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(TESTS), **(env or {})}
    return subprocess.run([*CLI, "tune", *map(str, args)], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.mark.learning
def test_an_error_of_the_trials_own_code_is_retried_once_then_the_trial_stops(tmp_path):
    """With --max-failures -1 (unlimited node losses), a trial whose env raises at the same step every
    time fails twice (the run and one retry) and stops; `tune` exits 1. Without
    RetryPolicy, Tune would restart it forever."""
    file = grid_file(tmp_path, "crash", "crash_env:KappaCrash-v0", 1_000)
    out = tune(file, "--storage", tmp_path / "results", "--num-cpus", "1", "--max-failures", "-1")
    assert out.returncode != 0
    assert "[tune] finished: 0/1 trials without error" in out.stdout, (out.stdout + out.stderr)[-3000:]
    grid_dir = tmp_path / "results" / "crash" / "kappa_pi_dqn"
    assert failures(grid_dir) == [2]
    assert "crash_env: a deliberate error at step 300" in next(grid_dir.glob("*/error.txt")).read_text()


@pytest.mark.learning
def test_a_transient_error_of_the_trials_code_is_retried_and_the_trial_ends_at_t(tmp_path):
    """The same env raising only once (a full disk that was freed, say): the retry finishes at T."""
    file = grid_file(tmp_path, "crash_once", "crash_env:KappaCrash-v0", 1_000)
    out = tune(file, "--storage", tmp_path / "results", "--num-cpus", "1",
               env={"KAPPA_CRASH_ONCE": str(tmp_path / "crashed")})
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    grid_dir = tmp_path / "results" / "crash_once" / "kappa_pi_dqn"
    assert failures(grid_dir) == [1]
    (rows,) = trial_rows(grid_dir).values()
    assert rows[-1]["done"] and rows[-1]["kappa"]["env_steps"] == 1_000
