"""`--track` (W&B), `--track mlflow`, `--track wandb,mlflow`: runs logged to Weights & Biases or MLflow
(docs/experiments.md, "Tracking").

`train` logs its one run through the libraries' own loggers (`wandb.init` / `wandb.log`,
`mlflow.start_run` / `mlflow.log_metrics`, `RunTracker` here); `tune` through Tune callbacks
(kappa_rllib.tuning.tracking) that log the same way: one logged run per trial, found again by its grid,
its trial id and its grid's storage (a store or project may hold several files' grids of one name).

- The config once, as the run's config (W&B) or params (MLflow), never as metrics.
- Every result's metrics, flattened with `/` (`env_runners/episode_return_mean`, `kappa/iteration`,
  `kappa/phase`, `kappa/phase_index`, `timers/...`), without the `config` RLlib copies into each
  result and without Ray's host bookkeeping (`hostname`, `pid`, `date`, ...); the return, the kappa
  phase and the timers first.
- Against env steps (`env_runners/num_env_steps_sampled_lifetime`): W&B's step metric
  (`define_metric`), MLflow's `step`.

Where the runs go is each library's own setting: W&B's project (`--track-project`, else WANDB_PROJECT,
else "kappa-rllib"), entity (`--wandb-entity`, else WANDB_ENTITY, else the account's default) and
`WANDB_MODE=offline` to log without an account (synced later with `wandb sync`); MLflow's
`MLFLOW_TRACKING_URI`, else a SQLite store in the results folder (`<results>/mlflow.db`; `mlflow ui
--backend-store-uri sqlite:///<results>/mlflow.db`; for `tune`, the file's folder: one store for all its
grids, each run tagged with its grid), the experiment named like the W&B project. MLflow 3
refuses its file store (`file:` or a bare path) unless `MLFLOW_ALLOW_FILE_STORE=true`: `check_store` says
so in one line before Ray starts.
"""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path
from urllib.parse import urlparse

from kappa_rllib.phases import DONE, EVALUATION, IMPROVEMENT

BACKENDS = ("wandb", "mlflow")
EXTRA = "kappa-rllib[track]"
DEFAULT_PROJECT = "kappa-rllib"
# kappa/phase as a number too (kappa/phase_index): MLflow keeps numeric metrics only
PHASE_INDEX = {IMPROVEMENT: 0, EVALUATION: 1, DONE: 2}
# result keys that are no metrics: the config (logged once, as the run's config / params), the library
# versions (kappa_rllib.versions; in result.json), Tune's and Ray's bookkeeping of where and when the result was made
NOT_METRICS = ("config", "versions", "done", "should_checkpoint", "trial_id", "experiment_id", "experiment_tag",
               "date", "timestamp", "hostname", "node_ip", "node_id", "pid", "env_runner_node_ids")
# first in each logged result, then timers/*, then the rest (W&B's end-of-run console summary sorts its
# keys alphabetically whatever the order: wandb/sdk/wandb_run.py, Run._footer_summary)
HEADLINE = ("env_runners/episode_return_mean", "evaluation/env_runners/episode_return_mean", "kappa/phase",
            "kappa/phase_index", "kappa/iteration", "kappa/num_iterations")
MAX_PARAM_LENGTH = 500  # MLflow's limit is 6000 characters; longer values are object reprs


def parse(value: str) -> list[str]:
    """`--track wandb,mlflow` -> ["wandb", "mlflow"]; ValueError (one line) for an unknown back-end."""
    names = [n.strip().lower() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise ValueError(f"--track {value!r}: choose from {', '.join(BACKENDS)} (comma-separated for both; a bare "
                         "--track is wandb)")
    return list(dict.fromkeys(names))


def check_installed(backends: list[str]) -> None:
    """ValueError (one line, naming the extra to install) where a back-end's package is missing."""
    import importlib.util

    for name in backends:
        if importlib.util.find_spec(name) is None:
            raise ValueError(f"--track {name}: the {name} package is not installed; pip install '{EXTRA}'")


def check_store(backends: list[str]) -> None:
    """ValueError (one line) where the MLflow store set in MLFLOW_TRACKING_URI cannot work: a file store
    without MLflow 3's opt-in (MLFLOW_ALLOW_FILE_STORE=true), a SQLite database in a missing folder.
    Imports nothing and writes nothing (the CLI calls it before Ray starts)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") if "mlflow" in backends else None
    if not uri:
        return  # the SQLite default, in the results folder (checked as the output folder)
    if uri.lower() in ("databricks", "databricks-uc", "uc"):
        return  # MLflow's names for its Databricks stores (mlflow/tracking/registry.py), not paths
    scheme = urlparse(uri).scheme.lower()
    if len(scheme) == 1 and scheme.isalpha():  # a Windows drive letter: a path (mlflow.utils.uri.get_uri_scheme)
        scheme = ""
    if scheme in ("", "file"):
        # mlflow/store/tracking/file_store.py: FileStore() raises unless MLFLOW_ALLOW_FILE_STORE is true;
        # MLflow reads the variable as true/1 or false/0 (any case) and rejects anything else
        allow = os.environ.get("MLFLOW_ALLOW_FILE_STORE", "")
        if allow.lower() in ("true", "1"):
            return
        if allow and allow.lower() not in ("false", "0"):
            raise ValueError(f"--track mlflow: MLFLOW_ALLOW_FILE_STORE={allow!r}: MLflow reads true, false, 1 or 0")
        raise ValueError(f"--track mlflow: MLFLOW_TRACKING_URI {uri!r} is MLflow's file store, which MLflow 3 "
                         "refuses unless MLFLOW_ALLOW_FILE_STORE=true; set that, give a database "
                         "(sqlite:///PATH/mlflow.db), or unset MLFLOW_TRACKING_URI for <results>/mlflow.db")
    if scheme == "sqlite":
        path = uri.split(":///", 1)[1] if ":///" in uri else ""
        if path and path != ":memory:" and not Path(path).expanduser().resolve().parent.is_dir():
            raise ValueError(f"--track mlflow: MLFLOW_TRACKING_URI {uri!r}: the folder "
                             f"{str(Path(path).parent)!r} does not exist")


def project(given: str | None) -> str:
    return given or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT


def entity(given: str | None) -> str | None:
    """The W&B entity (team or user): `--wandb-entity`, else WANDB_ENTITY, else None (the account's default)."""
    return given or os.environ.get("WANDB_ENTITY") or None


def mlflow_uri(results_folder) -> str:
    """MLFLOW_TRACKING_URI, else a SQLite store `results_folder`/mlflow.db."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{_results_dir(results_folder) / 'mlflow.db'}"


def step_key() -> str:
    """The x-axis of every logged metric: RLlib's env steps sampled so far (`env_runners/num_env_steps_sampled_lifetime`)."""
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    return f"{ENV_RUNNER_RESULTS}/{NUM_ENV_STEPS_SAMPLED_LIFETIME}"


def env_steps(result: dict) -> int:
    """The env steps sampled so far, from an RLlib result."""
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    runners = result.get(ENV_RUNNER_RESULTS)
    value = runners.get(NUM_ENV_STEPS_SAMPLED_LIFETIME) if isinstance(runners, dict) else None
    if value is None:
        value = result.get(step_key(), result.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, 0))
    return int(value or 0)


def with_phase_index(result: dict) -> dict:
    """`result` with `kappa/phase_index` (0 improvement, 1 evaluation, 2 done) beside the `kappa/phase` string."""
    kappa = result.get("kappa")
    if isinstance(kappa, dict) and kappa.get("phase") in PHASE_INDEX:
        result = {**result, "kappa": {**kappa, "phase_index": PHASE_INDEX[kappa["phase"]]}}
    return result


def metrics(result: dict, *, numbers_only: bool = False) -> dict:
    """A result's metrics, flattened with `/`: no config, no bookkeeping, numbers (and strings, such as
    `kappa/phase`, unless `numbers_only`: MLflow keeps numbers only); the env steps, the return, the
    kappa phase and the timers first."""
    from ray.tune.utils import flatten_dict

    kept = {k: v for k, v in result.items() if k not in NOT_METRICS}
    flat = flatten_dict(with_phase_index(kept), delimiter="/")
    flat = {k: v for k, v in flat.items() if _numeric(v) or (isinstance(v, str) and not numbers_only)}
    first = [step_key(), *HEADLINE, *sorted(k for k in flat if k.startswith("timers/"))]
    ordered = {k: flat[k] for k in first if k in flat}
    ordered.update((k, v) for k, v in flat.items() if k not in ordered)
    return ordered


def params(config: dict) -> dict:
    """An algorithm config flattened with `/`, the values that are settings (numbers, strings, booleans,
    None, lists of those); objects (classes, functions, specs) left out."""
    from ray.tune.utils import flatten_dict

    return {k: v for k, v in flatten_dict(config, delimiter="/").items() if _setting(v)}


def mlflow_params(config: dict) -> dict:
    return {k: str(v)[:MAX_PARAM_LENGTH] for k, v in params(config).items()}


def _results_dir(results_folder) -> Path:
    """Where the back-ends' local files go (W&B's run folders, MLflow's SQLite store): the results
    folder, made if need be, not the cwd."""
    folder = Path(results_folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class RunTracker:
    """`train`'s one run, logged with the libraries' own loggers: `log(result)` after each iteration,
    `close()` at the end (also on an error: the run is marked failed)."""

    def __init__(self, backends: list[str], *, project_name: str, run_name: str, config: dict, results_folder,
                 entity_name: str | None = None):
        self.wandb_run = self.mlflow = None
        if "wandb" in backends:
            import wandb

            self.wandb_run = wandb.init(project=project_name, entity=entity_name, name=run_name,
                                        config=params(config), dir=str(_results_dir(results_folder)),
                                        reinit="create_new")
            self.wandb_run.define_metric(step_key())
            self.wandb_run.define_metric("*", step_metric=step_key())
        if "mlflow" in backends:
            import mlflow

            self.mlflow = mlflow
            mlflow.set_tracking_uri(mlflow_uri(results_folder))
            mlflow.set_experiment(project_name)
            mlflow.start_run(run_name=run_name)
            mlflow.log_params(mlflow_params(config))

    def log(self, result: dict) -> None:
        if self.wandb_run is not None:
            self.wandb_run.log(metrics(result))
        if self.mlflow is not None:
            self.mlflow.log_metrics({k: float(v) for k, v in metrics(result, numbers_only=True).items()},
                                    step=env_steps(result))

    def close(self, failed: bool = False) -> None:
        if self.wandb_run is not None:
            self.wandb_run.finish(exit_code=1 if failed else 0)
        if self.mlflow is not None:
            self.mlflow.end_run(status="FAILED" if failed else "FINISHED")


def _numeric(v) -> bool:
    """A finite number (numpy's too), not a boolean."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _setting(v) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_setting(x) for x in v)
    return isinstance(v, (str, bool, numbers.Real)) or v is None
