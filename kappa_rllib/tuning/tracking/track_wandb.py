"""`tune --track wandb`: Ray's W&B callback and logging actor, with W&B's own step and the rows a run lacks.

Ray's logging actor passes `step=training_iteration` to `wandb.log`; that step goes back on a rollback (a retry
from a checkpoint, `--resume`, a PBT exploit) and W&B drops every row whose step is not above the last one.
Here W&B keeps its own step (monotone: every row is kept) and the x-axis is the env steps (`define_metric`): a
rollback shows as the line going back on the env-step axis and covering it again. A trial resumed by a new
driver goes on in its own W&B run (`resume="allow"`), its id `wandb_run_id`: the grid's storage key and the
trial id (kappa_rllib.tuning.tracking.replay: a run belongs to its storage).

W&B's writer (wandb-core) holds a run's rows in memory until it ends or fills a 32 KiB block, so a killed
driver's W&B runs keep none of their last rows, often none at all (a 7-byte file), while Tune's result.json on
storage has them. So each new driver gives a trial the stored rows that no local W&B file of its run holds
(`missing_rows`, through `RowReplay`, as MLflow's callback does). Online, W&B's server may hold some of them
already (its stream runs ahead of the local file): those show twice, at the same env step with the same values.
"""

from __future__ import annotations

from pathlib import Path

from kappa_rllib.tracking import _results_dir, metrics, step_key
from kappa_rllib.tuning.tracking.replay import RowReplay, last_key, replay_rows, row_key, storage_key, stored_rows
from kappa_rllib.tuning.tracking.wandb_files import HeldCache


def wandb_run_id(trial, legacy: set[str] = frozenset()) -> str:
    """The W&B run id of `trial`: `<storage key>-<trial id>`; the bare trial id where the trial has no storage
    key, or where `legacy` (the ids of the W&B run files in this results folder) holds it: a run made before
    runs had storage keys, which the trial goes on in."""
    key = storage_key(trial)
    if key is None or trial.trial_id in legacy:
        return trial.trial_id
    return f"{key}-{trial.trial_id}"


def legacy_ids(results_folder: Path) -> set[str]:
    """The run ids of the W&B run files under `results_folder`/wandb (one listing, once a driver)."""
    return {path.name[len("run-"):-len(".wandb")] for path in Path(results_folder).glob("wandb/*run-*/run-*.wandb")}


def missing_rows(results_folder: Path, trial, up_to: int | None = None, run_id: str | None = None) -> list[dict]:
    """The rows of `trial`'s stored timeline that the local files of its W&B run `run_id` (None: the trial id)
    lack (`replay_rows`), up to iteration `up_to` (None: all of them, for a trial that has ended). An ended trial
    whose last row (Tune's last result: no file read) a full check found held before, with W&B's files unchanged
    since, lacks none: so a `--resume` of a file of many finished trials reads neither their result.json nor
    their W&B files again (`HeldCache`)."""
    cache = HeldCache(results_folder, run_id or trial.trial_id)
    last = last_key(trial) if up_to is None else None
    if last is not None and cache.complete(last):
        return []
    stored = stored_rows(trial)
    rows = replay_rows(stored, cache.held(), up_to)
    if not rows and last is not None and stored and row_key(stored[-1]) == last:
        cache.mark_complete(last)
    return rows


def _wandb_callback(project_name, group, results_folder, entity_name):
    from ray.air.integrations.wandb import WandbLoggerCallback, _QueueItem, _WandbLoggingActor

    class KappaWandbActor(_WandbLoggingActor):
        """Ray's W&B logging actor (one per trial): metrics as `tracking.metrics()`, against env steps,
        W&B's own step (see the module's docstring); the trial's config was given to `wandb.init` once."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._wandb = _OwnStep(self._wandb)

        def run(self):
            try:
                return super().run()  # its rows, then wandb.finish()
            finally:
                # W&B's service process may still be writing the run's last rows to its file when finish()
                # returns, and Ray's callback kills this actor as soon as run() returns (ray.kill: no atexit, where
                # W&B would wait): a finished trial's last rows were missing from its offline run (a kill-schedule
                # test, seed 1: 2 of 4 rows, the service's log cut before its close). teardown() waits for it.
                try:
                    self._wandb.teardown()
                except (Exception, SystemExit):  # noqa: BLE001 - its exit code would hide run()'s own error
                    pass

        def _handle_result(self, result):
            if not getattr(self, "_step_defined", False):  # once, in the actor, after wandb.init
                self._wandb.define_metric(step_key())
                self._wandb.define_metric("*", step_metric=step_key())
                self._step_defined = True
            config_update = {k: result[k] for k in self._to_config if k in result}
            return metrics(result), config_update

    class KappaWandb(RowReplay, WandbLoggerCallback):
        """Ray's W&B callback: each trial's run id its storage's (`wandb_run_id`), and the rows its run lacks
        logged once per trial and driver (`RowReplay`): before the trial's first new row (it goes on from a
        checkpoint) or at the first step or the end of the run (it had ended)."""

        _logger_actor_cls = KappaWandbActor

        def _run_id(self, trial) -> str:
            if getattr(self, "_legacy", None) is None:  # the run files here before this driver: listed once
                self._legacy = legacy_ids(Path(self.kwargs["dir"]))
            return wandb_run_id(trial, self._legacy)

        def _start_logging_actor(self, trial, exclude_results, **wandb_init_kwargs):
            super()._start_logging_actor(trial, exclude_results, **{**wandb_init_kwargs, "id": self._run_id(trial)})

        def log_trial_start(self, trial):
            super().log_trial_start(trial)
            self.replay_on_start(trial)

        def lacking(self, trial, up_to):
            return missing_rows(Path(self.kwargs["dir"]), trial, up_to, run_id=self._run_id(trial))

        def log_rows(self, trial, rows) -> None:  # one remote call (Ray's Queue is unbounded: it cannot fail)
            self._trial_queues[trial].put_nowait_batch([(_QueueItem.RESULT, row) for row in rows])

        def log_ended(self, trial, rows) -> None:
            if rows:  # its own W&B run again, these rows, its end
                WandbLoggerCallback.log_trial_start(self, trial)
                self.log_rows(trial, rows)
                self._signal_logging_actor_stop(trial)

    kwargs = {"entity": entity_name} if entity_name else {}
    return KappaWandb(project=project_name, group=group, dir=str(_results_dir(results_folder)), resume="allow",
                      **kwargs)


class _OwnStep:
    """The `wandb` module as Ray's logging actor uses it, with `log(row, step=...)`'s step left to W&B."""

    def __init__(self, wandb):
        self._module = wandb

    def __getattr__(self, name):
        return getattr(self._module, name)

    def log(self, data, step=None, **kwargs):
        return self._module.log(data, **kwargs)
