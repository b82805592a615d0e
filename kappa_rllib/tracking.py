"""`--track wandb` / `--track mlflow`: runs logged to Weights & Biases or MLflow (docs/experiments.md, "Tracking").

`tune` hands the logging to Ray Tune's own callbacks (`WandbLoggerCallback`, `MLflowLoggerCallback`):
one logged run per trial, its config the trial's (the grid's axes kappa, C_FA, seed among it), its
metrics every result, flattened (`kappa/iteration`, `kappa/phase_index`, `env_runners/episode_return_mean`,
...). `train` logs its one run through the libraries' own loggers (`wandb.init` / `wandb.log`,
`mlflow.start_run` / `mlflow.log_metrics`), with the same names.

Where the runs go is each library's own setting: W&B's project (`--track-project`, else WANDB_PROJECT,
else "kappa-rllib") and `WANDB_MODE=offline` to log without an account (synced later with `wandb sync`);
MLflow's `MLFLOW_TRACKING_URI`, else a SQLite store in the results folder (`<results>/mlflow.db`; `mlflow ui
--backend-store-uri sqlite:///<results>/mlflow.db`; MLflow 3 keeps its file store in maintenance mode
only), the experiment named like the W&B project.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from kappa_rllib.phases import DONE, EVALUATION, IMPROVEMENT

BACKENDS = ("wandb", "mlflow")
EXTRA = "kappa-rllib[track]"
DEFAULT_PROJECT = "kappa-rllib"
# kappa/phase as a number too (kappa/phase_index): MLflow keeps numeric metrics only
PHASE_INDEX = {IMPROVEMENT: 0, EVALUATION: 1, DONE: 2}


def parse(value: str) -> list[str]:
    """`--track wandb,mlflow` -> ["wandb", "mlflow"]; ValueError (one line) for an unknown back-end."""
    names = [n.strip().lower() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise ValueError(f"--track {value!r}: choose from {', '.join(BACKENDS)} (comma-separated for both)")
    return list(dict.fromkeys(names))


def check_installed(backends: list[str]) -> None:
    """ValueError (one line, naming the extra to install) where a back-end's package is missing."""
    import importlib.util

    for name in backends:
        if importlib.util.find_spec(name) is None:
            raise ValueError(f"--track {name}: the {name} package is not installed; pip install '{EXTRA}'")


def project(given: str | None) -> str:
    return given or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT


def mlflow_uri(results_folder) -> str:
    """MLFLOW_TRACKING_URI, else a SQLite store `results_folder`/mlflow.db."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{_results_dir(results_folder) / 'mlflow.db'}"


def with_phase_index(result: dict) -> dict:
    """`result` with `kappa/phase_index` (0 improvement, 1 evaluation, 2 done) beside the `kappa/phase` string."""
    kappa = result.get("kappa")
    if isinstance(kappa, dict) and kappa.get("phase") in PHASE_INDEX:
        result = {**result, "kappa": {**kappa, "phase_index": PHASE_INDEX[kappa["phase"]]}}
    return result


def tune_callbacks(backends: list[str], *, project_name: str, group: str, results_folder) -> list:
    """Tune's logger callbacks for `backends`, results adding `kappa/phase_index`."""
    callbacks = []
    if "wandb" in backends:
        from ray.air.integrations.wandb import WandbLoggerCallback

        class KappaWandb(WandbLoggerCallback):
            def log_trial_result(self, iteration, trial, result):
                super().log_trial_result(iteration, trial, with_phase_index(result))

        callbacks.append(KappaWandb(project=project_name, group=group, dir=str(_results_dir(results_folder))))
    if "mlflow" in backends:
        from ray.air.integrations.mlflow import MLflowLoggerCallback

        class KappaMLflow(MLflowLoggerCallback):
            def log_trial_result(self, iteration, trial, result):
                super().log_trial_result(iteration, trial, with_phase_index(result))

        callbacks.append(KappaMLflow(tracking_uri=mlflow_uri(results_folder), experiment_name=project_name,
                                     tags={"grid": group}, save_artifact=False))
    return callbacks


def _results_dir(results_folder) -> Path:
    """Where the back-ends' local files go (W&B's run folders, MLflow's SQLite store): the results
    folder, made if need be, not the cwd."""
    folder = Path(results_folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class RunTracker:
    """`train`'s one run, logged with the libraries' own loggers: `log(result)` after each iteration,
    `close()` at the end (also on an error: the run is marked failed)."""

    def __init__(self, backends: list[str], *, project_name: str, run_name: str, config: dict, results_folder):
        from ray.tune.utils import flatten_dict

        self._flatten = flatten_dict
        self.wandb_run = self.mlflow = None
        params = {k: v for k, v in flatten_dict(config, delimiter="/").items() if _loggable(v)}
        if "wandb" in backends:
            import wandb

            self.wandb_run = wandb.init(project=project_name, name=run_name, config=params,
                                        dir=str(_results_dir(results_folder)), reinit="create_new")
        if "mlflow" in backends:
            import mlflow

            self.mlflow = mlflow
            mlflow.set_tracking_uri(mlflow_uri(results_folder))
            mlflow.set_experiment(project_name)
            mlflow.start_run(run_name=run_name)
            mlflow.log_params({k: str(v)[:500] for k, v in params.items()})

    def log(self, result: dict) -> None:
        flat = self._flatten(with_phase_index(result), delimiter="/")
        step = int(flat.get("training_iteration", 0))
        if self.wandb_run is not None:
            self.wandb_run.log({k: v for k, v in flat.items() if _loggable(v)}, step=step)
        if self.mlflow is not None:
            self.mlflow.log_metrics({k: float(v) for k, v in flat.items() if _numeric(v)}, step=step)

    def close(self, failed: bool = False) -> None:
        if self.wandb_run is not None:
            self.wandb_run.finish(exit_code=1 if failed else 0)
        if self.mlflow is not None:
            self.mlflow.end_run(status="FAILED" if failed else "FINISHED")


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _loggable(v) -> bool:
    return isinstance(v, (str, bool)) or _numeric(v) or v is None
