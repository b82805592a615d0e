"""A grid's Tune run that failed, and the trials of a ResultGrid that failed or did not end: read for the CLI's
lines, beside the retry policy (kappa_rllib.tuning.retry) that decided which failures to retry.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

from kappa_rllib.tuning import retry


class GridFailed(RuntimeError):
    """A grid's Tune run raised (not a trial: Tune's own run, e.g. reading back a trial's files): the other
    grids were stopped, each saving its state. One line: the grid, the error, what `--resume` does."""

    def __init__(self, name: str, error: BaseException, storage, others: list[str]):
        self.name, self.error = name, error
        if isinstance(error, (EOFError, pickle.UnpicklingError, json.JSONDecodeError)) or _disk_full(error):
            cause = (f"writing or reading back its files under {storage} failed ({type(error).__name__}: "
                     f"{' '.join(str(error).split())[:300]}; is the disk full?): free space there, then")
        else:
            cause = f"{type(error).__name__}: {' '.join(str(error).split())[:300]};"
        stopped = (f"the other grids ({', '.join(others)}) were stopped and saved their state; " if others else "")
        super().__init__(f"grid {name!r} stopped: {cause} {stopped}--resume goes on from each trial's last "
                         "checkpoint")


def _disk_full(error: BaseException) -> bool:
    import errno

    return (isinstance(error, OSError) and error.errno == errno.ENOSPC) or retry.disk_full(error)


def unfinished(result_grid) -> int:
    """Trials of a ResultGrid that neither ended (Tune marks the last result of a trial that met its
    stop rule `done`) nor failed: an interrupted run's running and pending trials, which Tune also
    reports as terminated. `--resume` continues them."""
    from ray.tune.experiment.trial import Trial

    return sum(1 for r, trial in _with_trials(result_grid)
               if r.error is None and getattr(trial, "status", None) != Trial.ERROR
               and not (r.metrics or {}).get("done"))


def _with_trials(result_grid):
    """(result, its Trial or None) for each result: ResultGrid builds its results from its analysis' trials,
    in their order."""
    trials = getattr(getattr(result_grid, "_experiment_analysis", None), "trials", None) or []
    return [(result, trials[i] if i < len(trials) else None) for i, result in enumerate(result_grid)]


def failures(result_grid) -> list:
    """(result, error) for each trial of a ResultGrid that failed. Tune's `Result.error` reads the trial's
    error file from storage, which a full disk keeps it from copying there (kappa_rllib.tuning.sync copies
    whole or not at all): a trial Tune marked ERROR then has no error; its error is read from the driver's
    staging copy (`retry.last_error`), else named as that (`_error_file_missing`). Both look at the disks of
    the machine Tune ran on: under Ray Client, the head's (`stores.on_storage`), not the client's."""
    from ray.tune.experiment.trial import Trial

    from kappa_rllib.tuning import storage as stores

    out = []
    for result, trial in _with_trials(result_grid):
        error = result.error
        if error is None and trial is not None and trial.status == Trial.ERROR:
            try:
                (error,) = stores.on_storage(_unstored_error, trial)
            except Exception as e:  # noqa: BLE001 - the head gone, a task that failed: still a failed trial
                error = RuntimeError(f"the trial failed and its error could not be read ({type(e).__name__}: "
                                     f"{' '.join(str(e).split())[:200]})")
        if error is not None:
            out.append((result, error))
    return out


def _unstored_error(trial) -> tuple[BaseException]:
    """A failed trial's error where storage lacks its error file, read on the machine Tune ran it from; in a
    tuple, since `ray.get` raises a task's value that is itself a Ray error (the staged error of a trial is one:
    Tune stages RayTaskError and RayActorError) rather than return it."""
    return (retry.last_error(trial) or _error_file_missing(trial),)


def _error_file_missing(trial) -> OSError | RuntimeError:
    """A failed trial's error that Tune could not copy onto storage: ENOSPC where a local disk it writes to
    (the storage folder, or the driver's staging folder where Tune writes the error file first) is full (under
    1 MiB free), else said as it is."""
    import errno
    import shutil

    import pyarrow.fs

    path = getattr(trial, "path", None)
    folders = [getattr(trial, "local_path", None)]
    storage = getattr(trial, "storage", None)
    if isinstance(getattr(storage, "storage_filesystem", None), pyarrow.fs.LocalFileSystem):
        folders.append(path)  # (a bucket's path has no scheme here: never asked of a local disk)
    for folder in filter(None, folders):
        folder = Path(folder)
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            continue
        if free < 1 << 20:
            return OSError(errno.ENOSPC, f"No space left on device: the trial failed and its error file could "
                                         f"not be copied onto storage ({path}; the disk under {folder} is full)")
    return RuntimeError(f"the trial failed and Tune could not copy its error file onto storage ({path})")
