"""What both trackers share (kappa_rllib.tuning.tracking): which run is a trial's, a trial's stored rows, and
logging the rows its run lacks, once per driver, the same way for W&B and MLflow.

**A run belongs to its storage.** A W&B project or an MLflow store may hold the runs of several files, and grid
names (`kappa_pi_dqn`) recur across files: a trial's run is found by its grid, its trial id and `storage_key`,
a short hash of the grid's folder on storage (Tune's `experiment_fs_path`, with the filesystem's kind: a
folder made absolute, or a bucket's path). A `--resume` of the same storage gives the same key; a grid moved
elsewhere and resumed there gets new runs (its stored rows logged into them, as for a trial with no run).

**Rows a run lacks, once per driver** (`RowReplay`): a trial's result.json on storage is what `--resume` goes
on from; what a tracker holds may be less (W&B's writer loses a killed driver's last rows; a run resumed
without `--track`, or a driver stopped while it logged, leaves gaps in either). So each new driver, before a
trial that goes on from a checkpoint logs its first new row, logs the rows of the stored timeline up to that
checkpoint that its run lacks (the later rows it logs again as it reruns them); and at its first step (or at
the end of a run with nothing to step), gives each trial that had ended the rows its run lacks, all of them,
and its end. Each backend says what its run holds (`lacking`) and how rows go in (`log_rows`, `log_ended`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from kappa_rllib.tracking import env_steps

ENDED = ("TERMINATED", "ERROR")  # Tune's statuses of a trial that has ended


def storage_key(trial) -> str | None:
    """8 hex digits of the grid's folder on storage (the filesystem's kind and Tune's `experiment_fs_path`):
    the same on every `--resume` of that storage, another for another file's grid of the same name. None for a
    trial that has no storage (a stand-in in tests): its run is found as before, by grid and trial id."""
    storage = getattr(trial, "storage", None)
    path = getattr(storage, "experiment_fs_path", None)
    if not path:
        return None
    kind = getattr(getattr(storage, "storage_filesystem", None), "type_name", "local")
    return hashlib.sha256(f"{kind}:{str(path).rstrip('/')}".encode()).hexdigest()[:8]


def stored_rows(trial) -> list[dict]:
    """A trial's rows in its result.json on storage (what --resume goes on from), rows cut short left out."""
    path = Path(trial.storage.trial_fs_path, "result.json").as_posix()
    try:
        with trial.storage.storage_filesystem.open_input_stream(path) as f:
            data = f.read()
    except OSError:  # FileNotFoundError among them: no row reached storage
        return []
    rows = []
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def replay_rows(rows: list[dict], held: set[tuple], up_to: int | None = None) -> list[dict]:
    """The rows a run lacks: of `rows` as the trial's last timeline went (a row replaces the rolled-back rows
    of its iteration and after), those at or before iteration `up_to` (None: all) whose `row_key` is not in
    `held` (what the run holds)."""
    line = []
    for row in rows:
        while line and line[-1].get("training_iteration", 0) >= row.get("training_iteration", 0):
            line.pop()
        line.append(row)
    return [row for row in line if (up_to is None or row.get("training_iteration", 0) <= up_to)
            and row_key(row) not in held]


def checkpoint_iteration(trial) -> int | None:
    """The training iteration of the checkpoint a trial goes on from."""
    return (trial.latest_checkpoint_result.metrics or {}).get("training_iteration")


def row_key(row: dict) -> tuple:
    """(env steps, time_total_s): a row, told from one rerun after a rollback (the kappa algorithms end an
    iteration at the same env step whichever timeline it is on)."""
    return env_steps(row), _seconds(row.get("time_total_s"))


def last_key(trial) -> tuple | None:
    """`row_key` of Tune's last result of `trial` (no file read), None where it has none."""
    last = getattr(trial, "last_result", None)
    return row_key(last) if last and "time_total_s" in last else None


def _seconds(value) -> float | None:
    return None if value is None else float(value)


class RowReplay:
    """Mixed into a tracker's Tune callback: the rows a run lacks, logged once per trial and driver (the
    module's docstring). The tracker gives `lacking(trial, up_to)` (the stored rows up to iteration `up_to`,
    None: all, that its run lacks), `log_rows(trial, rows)` (into the run of a trial that goes on) and
    `log_ended(trial, rows)` (into the run of a trial that had ended, made if need be, then the run's end), and
    calls `replay_on_start(trial)` as a trial starts, its run open; `before_ended(trials)` may look up runs."""

    def lacking(self, trial, up_to: int | None) -> list[dict]:
        raise NotImplementedError

    def log_rows(self, trial, rows: list[dict]) -> None:
        raise NotImplementedError

    def log_ended(self, trial, rows: list[dict]) -> None:
        raise NotImplementedError

    def before_ended(self, trials) -> None:
        pass

    def _first_look(self, trial) -> bool:
        """Whether this driver looks at `trial` for the first time (and from now on it has)."""
        if not hasattr(self, "_looked"):  # trial ids this driver has looked at (not pickled by Tune: set late)
            self._looked = set()
        first = trial.trial_id not in self._looked
        self._looked.add(trial.trial_id)
        return first

    def replay_on_start(self, trial) -> None:
        """At a trial's first start in this driver: from a checkpoint, the rows up to it that its run lacks (no
        checkpoint: it starts from scratch, and logs every row as it makes it)."""
        if self._first_look(trial) and getattr(trial, "checkpoint", None) is not None:
            rows = self.lacking(trial, checkpoint_iteration(trial))
            if rows:
                self.log_rows(trial, rows)

    def _check_ended(self, trials) -> None:
        if getattr(self, "_ends_checked", False):
            return
        self._ends_checked = True
        self.before_ended(trials)
        for trial in trials:
            if trial.status in ENDED and self._first_look(trial):
                self.log_ended(trial, self.lacking(trial, None))

    def on_step_begin(self, iteration, trials, **info):
        self._check_ended(trials)
        super().on_step_begin(iteration, trials, **info)

    def on_experiment_end(self, trials, **info):
        self._check_ended(trials)  # a run with nothing left to step (all had ended): Tune never stepped
        super().on_experiment_end(trials, **info)
