"""`kappa-rllib tune --track`: Tune callbacks logging every trial to W&B and/or MLflow, as `train` logs its
run (kappa_rllib.tracking: the metrics, the config once, env steps as the x-axis). One idea a module:

| module | what it holds |
|---|---|
| `loggers` | Tune's file loggers of a grid's trials: result.json, progress.csv, TensorBoard's only when asked |
| `replay` | both trackers': a run found by its storage (`storage_key`), stored rows a run lacks (`RowReplay`) |
| `wandb_files` | W&B's local run files read back (`wandb_records`), what a run's files hold, cached (`HeldCache`) |
| `track_wandb` | the W&B callback and logging actor: W&B's own step, run ids by storage, `missing_rows` |
| `track_mlflow` | the MLflow callback: one store and experiment for the file, runs tagged by grid, trial and storage |

One file, one store, however many grids run at once (docs/experiments.md, "Tracking"): MLflow's runs of every
grid in one experiment of one store, W&B's in one project, each trial's run found again by its grid, trial id
and storage key, so that a store or project shared by several files (whose grid names recur) keeps their runs
apart. W&B and MLflow fill gaps alike: each new driver logs the stored rows (result.json) that a trial's run
lacks, up to the checkpoint it goes on from, or all of them for a trial that had ended (`replay`).
"""

from __future__ import annotations

from kappa_rllib.tracking import mlflow_uri

# the names the driver, the tests and the benchmarks take from here, from the modules that hold them
from kappa_rllib.tuning.tracking.loggers import NoTensorBoard, tune_loggers  # noqa: F401
from kappa_rllib.tuning.tracking.replay import ENDED, RowReplay, replay_rows, storage_key, stored_rows  # noqa: F401
from kappa_rllib.tuning.tracking.track_mlflow import GRID_TAG, STORAGE_TAG, TRIAL_TAG, MLflowCallback  # noqa: F401
from kappa_rllib.tuning.tracking.track_wandb import _wandb_callback, missing_rows, wandb_run_id  # noqa: F401
from kappa_rllib.tuning.tracking.wandb_files import HeldCache, wandb_held, wandb_records, wandb_steps  # noqa: F401

# Tune's saved runs (tuner.pkl) made before the split name these, where the W&B callback's methods used them:
# a --resume of such a run unpickles them (then puts this run's callbacks in their place)
from kappa_rllib.tuning.tracking.replay import checkpoint_iteration as _checkpoint_iteration  # noqa: E402, F401
from kappa_rllib.tuning.tracking.track_wandb import _OwnStep  # noqa: E402, F401


def tune_callbacks(backends: list[str], *, project_name: str, group: str, results_folder,
                   entity_name: str | None = None) -> list:
    """Tune's logger callbacks for `backends`, for the grid `group`; `results_folder` holds the default
    MLflow store and W&B's offline runs (the file's folder: one for all its grids)."""
    callbacks = []
    if "wandb" in backends:
        callbacks.append(_wandb_callback(project_name, group, results_folder, entity_name))
    if "mlflow" in backends:
        callbacks.append(MLflowCallback(mlflow_uri(results_folder), project_name, group))
    return callbacks
