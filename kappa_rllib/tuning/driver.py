"""`kappa-rllib tune`'s driver: every grid of a file as a Tune run of its own, all fitted at once in this
process (kappa_rllib.tuning, its seams), fresh or resumed.

`run` builds one Tuner per grid (restored, with this run's callbacks, cap and failure settings, or new),
checks every grid's folder before it writes anything, and fits them together; a grid that fails stops the
others, each saving its state, and comes back as one `GridFailed` line naming what `--resume` does.

Under Ray Client (`--address ray://`) `--storage` is a path on the cluster: every check and write of a grid's
folder (the fresh and resume checks, `Tuner.can_restore`, the repair, the population file, the tracking
stores) runs there, in a zero-CPU task on the head (`storage.on_storage`), where Tune runs each grid.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kappa_rllib.experiments import GRID_SEARCH, SCHEDULE_STOP
from kappa_rllib.tuning import busy, repair, retry, sync
from kappa_rllib.tuning.checks import (
    _ray_client,
    check_fresh,
    check_resume,
    param_space,
    param_space_on_restore,
    prepare_resume,
    wait_for_other_drivers,
)
from kappa_rllib.tuning.failures import GridFailed
from kappa_rllib.tuning.output import quiet_unstarted_trials, tune_output


def reregister_envs(grids) -> None:
    """Tune's registry lives in the running Ray cluster: registers every env a grid names again
    (after `ray.init`), so trials on any node find them."""
    from kappa_rllib import envs

    for grid in grids:
        env = grid.config.env
        ids = env[GRID_SEARCH] if isinstance(env, dict) and GRID_SEARCH in env else [env]
        for env_id in ids:
            if isinstance(env_id, str):
                envs.rllib_env_name(env_id)


def run(grids, storage, *, resume: bool = False, max_concurrent: int | None = None,
        checkpoint_every: int | None = None, max_failures: int = retry.DEFAULT_MAX_FAILURES, verbose: int = 1,
        compact: bool = False, track: tuple[str, ...] = (), track_project: str | None = None,
        wandb_entity: str | None = None, progress_interval_s: float = 60.0, notice_waits: bool = False,
        tensorboard: bool = False) -> dict:
    """Runs (or with `resume`, continues) every grid under `storage`/<grid name> (a folder or a bucket
    URI, kappa_rllib.tuning.storage), all at once: one Tuner per grid, each fitted in its own thread, so
    their trials share the cluster (kappa_rllib.tuning.together; docs/experiments.md). With `resume`, a grid with
    nothing stored yet starts afresh. Returns {grid name: ResultGrid}. Ray must be initialised.

    Trials checkpoint at their end and every `checkpoint_every` iterations (0 or None: only at the end;
    with `resume`, None keeps each trial's own setting, a number is applied to them all); the last two are kept. At most `max_concurrent` trials of the whole file run at once (None: as many as
    the cluster holds). A trial whose node is lost restarts from its latest checkpoint up to
    `max_failures` times (-1: unlimited), one whose own code raised, once (kappa_rllib.tuning.retry).
    `compact`: Tune prints nothing and kappa_rllib.tuning.progress prints one view of the file instead (a
    line per grid, every `progress_interval_s`). `track`: also log every trial to W&B and/or MLflow
    (kappa_rllib.tuning.tracking; one store for the file), in the project `track_project` (and the W&B entity `wandb_entity`).
    Every trial's rows go to its result.json and progress.csv; TensorBoard's events too with `tensorboard`
    (kappa_rllib.tuning.tracking.tune_loggers: they cost the driver more than the other two together).
    `notice_waits` (a cluster, which may add nodes on demand): a line about every minute while none of the
    file's trials runs and they wait for resources (kappa_rllib.tuning.progress.ResourceWait).
    Ctrl-C (SIGINT) stops every grid, each saving its state for `--resume`; so does a grid whose Tune run
    raises, which comes back as GridFailed (one line)."""
    import threading

    from kappa_rllib.tuning import storage as stores
    from kappa_rllib.tuning import together
    from kappa_rllib.tuning.progress import (
        FileProgress,
        GridProgress,
        ResourceWait,
        WaitBoard,
    )

    reregister_envs(grids)
    client = _ray_client()
    # a folder (made absolute; under Ray Client a path on the cluster, its links not followed here) or a bucket
    storage = stores.join(storage, resolve=not client)
    stop = threading.Event()
    # the head line's time left holds where trials stop at their total_env_steps. Ray Client: each grid's
    # Tune run is a process of its own on the head, where its callbacks run: each prints its own line
    view = FileProgress(Path(str(storage).rstrip("/")).name, interval_s=progress_interval_s,
                        eta=all(g.stop == SCHEDULE_STOP for g in grids)) if compact and not client else None
    # Ray Client: the cap is per grid there (Tune's own, in each grid's process)
    cap = None if client else together.SharedCap(max_concurrent, stop)
    board = WaitBoard()  # the file's trials waiting for resources (with notice_waits)
    taken = []  # the grid folders --resume locked (kappa_rllib.tuning.busy.take), each adopted by its Tune run
    try:
        if not resume:
            check_fresh(grids, storage)
        else:
            # locked from here (a local driver), before the repair: a second --resume typed at once waits
            taken = wait_for_other_drivers(grids, storage)
            check_resume(grids, storage)
        jobs, holds = [], []
        for grid in grids:
            path = stores.join(storage, grid.name, resolve=not client)  # (as Tune writes it: storage_path/name)
            started = together.Started()
            # the retry policy first, always: Tune gives callback states back by position (RetryPolicy.get_state)
            callbacks = [retry.retry_policy(max_failures), started]
            if notice_waits and not client:  # (Ray Client: each grid's callbacks run in a process of their own)
                callbacks.append(ResourceWait(grid.name, board))
            if view is not None:
                callbacks.append(view.callback(grid.name, grid.num_trials(), _total_env_steps(grid)))
            elif compact:
                callbacks.append(GridProgress(grid.name, grid.num_trials(), _total_env_steps(grid),
                                              interval_s=progress_interval_s))
            if not stores.is_uri(path):  # a full disk can cut Tune's experiment state short (kappa_rllib.tuning.retry)
                callbacks.append(repair.state_backup(Path(path)))
                holds.append(busy.lock_callback(path, grid.name))  # one Tune run at a time in the folder
                callbacks.append(holds[-1])
            callbacks.append(sync.WholeUploads())  # the driver's files onto storage whole (kappa_rllib.tuning.sync)
            if track:  # one store for the file's grids (kappa_rllib.tuning.tracking), made where the storage is
                from kappa_rllib import tracking

                callbacks += stores.on_storage(_tracking_callbacks, list(track), tracking.project(track_project),
                                               grid.name, None if stores.is_uri(storage) else storage,
                                               tracking.entity(wandb_entity), os.environ.get("MLFLOW_TRACKING_URI"))
            from kappa_rllib.tuning.config_once import around_loggers
            from kappa_rllib.tuning.tracking import tune_loggers

            # result.json, progress.csv[, TensorBoard]: last, where Tune puts its own default loggers, each row given the
            # trial's axes before them; then the trial's config onto the result Tune keeps as its last (Result.config)
            callbacks += around_loggers(tune_loggers(tensorboard=tensorboard), axes=grid.mutations)
            if resume and checkpoint_every is not None:  # last: the stateful callbacks keep their positions
                callbacks.append(checkpoint_every_callback(checkpoint_every))
            if holds and holds[-1] in callbacks:  # the folder held until every callback above has ended
                callbacks.append(holds[-1].let_go_last())
            jobs.append((grid.name, _tuner(grid, storage, path, resume=resume, cap=cap, max_concurrent=max_concurrent,
                                           checkpoint_every=checkpoint_every, max_failures=max_failures,
                                           verbose=0 if compact else verbose, callbacks=callbacks), started))
            if grid.scheduler is not None:  # tells `report` the members apart from fixed-setting trials
                stores.on_storage(stores.write_text, path, stores.POPULATION_MARKER, json.dumps(
                    {"grid": grid.name, "scheduler": type(grid.scheduler).__name__,
                     "mutations": {k: list(v) for k, v in grid.mutations.items()}}))
        with tune_output(new_engine=not compact), quiet_unstarted_trials(), \
                together.interrupt_on_signal(stop, install=not client), together.capped_actor_starts():
            try:
                results = together.fit_together(jobs, stop=stop, poll=view.poll if view is not None else None,
                                                stagger=not client)
            except together.GridRaised as e:
                raise GridFailed(e.name, e.error, storage, [name for name in e.started if name != e.name]) from None
            finally:
                # a Tune run that failed in a callback's setup after the lock's never calls its end: let go here
                # (this process goes on: a notebook, a test, the next run of the file)
                for hold in holds:
                    hold.release()
                # stopped (Ctrl-C): Tune marks every trial terminated as it cleans up, so a last view would
                # count them done; the CLI says what is left instead
                if view is not None and not stop.is_set():
                    view.final()
        return results
    finally:
        for path in taken:  # (those a run adopted are let go already)
            busy.release(path)


def _tracking_callbacks(backends, project_name, group, results_folder, entity_name, mlflow_tracking_uri=None) -> list:
    """kappa_rllib.tuning.tracking's callbacks for a grid, made where the storage is (`storage.on_storage`: they
    make their folders as they are made); `results_folder` None (a bucket): the working folder there.
    `mlflow_tracking_uri`: the driver's MLFLOW_TRACKING_URI (the one `tracking.check_store` checked), which the
    store takes over the environment of the process that builds the callbacks (the head, through Ray Client)."""
    from kappa_rllib.tuning.tracking import tune_callbacks

    before = os.environ.pop("MLFLOW_TRACKING_URI", None)
    if mlflow_tracking_uri:
        os.environ["MLFLOW_TRACKING_URI"] = mlflow_tracking_uri
    try:
        return tune_callbacks(backends, project_name=project_name, group=group,
                              results_folder=os.getcwd() if results_folder is None else results_folder,
                              entity_name=entity_name)
    finally:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        if before is not None:
            os.environ["MLFLOW_TRACKING_URI"] = before


def _total_env_steps(grid):
    """A trial's T in `grid` where every trial stops at it (the default stop rule), else None."""
    steps = getattr(grid.config, "total_env_steps", None)
    return steps if grid.stop == SCHEDULE_STOP and isinstance(steps, (int, float)) else None


def checkpoint_every_callback(checkpoint_every: int):
    """A Tune callback giving each trial this run's `--checkpoint-every` as it starts: Tune keeps a trial's
    checkpoint settings with it (restored trials, and the trials a resumed grid's generator makes from its
    saved spec), so without it `--resume --checkpoint-every N` would keep those the run started with."""
    from ray import tune

    class CheckpointEvery(tune.Callback):
        def on_trial_start(self, iteration, trials, trial, **info):
            trial.run_metadata.checkpoint_manager.checkpoint_config.checkpoint_frequency = checkpoint_every

    return CheckpointEvery()


def _tuner(grid, storage, path, *, resume, cap, max_concurrent, checkpoint_every, max_failures, verbose, callbacks):
    """The grid's Tuner: restored from `path` (`resume` and a run is stored there; its own resume state,
    with this run's callbacks, failure and concurrency settings) or new."""
    from ray import tune

    from kappa_rllib.tuning import storage as stores
    from kappa_rllib.tuning import together

    failure_config = tune.FailureConfig(max_failures=max_failures)
    per_grid_cap = max_concurrent if cap is None else None
    restorable = False
    if resume:  # where the storage is (under Ray Client, on the cluster)
        repaired, restorable, results_only = stores.on_storage(prepare_resume, path)
        for line in repaired:
            print(f"[tune] {grid.name}: {line}", file=sys.stderr)
    if resume and not restorable and results_only:
        raise ValueError(f"{path}: grid {grid.name!r} has trial results but no Tune state to resume them from "
                         "(experiment_state-*.json): move the folder aside to run the grid afresh")
    if restorable:
        with quiet_unstarted_trials():
            tuner = tune.Tuner.restore(path, trainable=grid.trainable, param_space=param_space_on_restore(grid, path),
                                       resume_unfinished=True, resume_errored=True, restart_errored=False)
        local = getattr(tuner, "_local_tuner", None)  # None with Ray Client: the stored output settings
        if local is None:  # Tune restores the grid's run on the head from its tuner.pkl, with its own settings
            print(f"[tune] {grid.name}: resumed through Ray Client, which keeps the settings the grid was started "
                  "with (--max-failures, --checkpoint-every, --max-concurrent, --track), not this command's",
                  file=sys.stderr)
        if local is not None:  # this run's output, failure and concurrency settings, not the stored ones
            run_config = local.get_run_config()
            run_config.verbose, run_config.callbacks = verbose, callbacks
            run_config.failure_config = failure_config
            tune_config = local._tune_config
            tune_config.max_concurrent_trials = per_grid_cap
            # Tune restores the generator's saved state into this one (which trials it has made)
            tune_config.search_alg = together.CappedVariantGenerator(cap) if cap is not None else None
        return tuner
    return tune.Tuner(
        grid.trainable,
        param_space=param_space(grid),
        tune_config=tune.TuneConfig(
            max_concurrent_trials=per_grid_cap, scheduler=grid.scheduler, num_samples=grid.num_samples,
            search_alg=together.CappedVariantGenerator(cap) if cap is not None else None),
        run_config=tune.RunConfig(
            name=grid.name,
            storage_path=storage,
            stop=grid.stop,
            verbose=verbose,
            callbacks=callbacks,
            # a population's members restore from each other's checkpoints: keep them all
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_frequency=checkpoint_every or 0, checkpoint_at_end=True,
                num_to_keep=None if grid.scheduler is not None else 2,
            ),
            failure_config=failure_config,
        ),
    )


