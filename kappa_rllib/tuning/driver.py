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
import pickle
import sys
from pathlib import Path

from kappa_rllib.experiments import GRID_SEARCH, SCHEDULE_STOP
from kappa_rllib.tuning import busy, repair, retry, sync
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
    from kappa_rllib.tuning.progress import FileProgress, GridProgress, ResourceWait, WaitBoard

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
                holds.append(busy.hold(path, grid.name))  # one Tune run at a time in the folder
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


def _holding(paths: list[str]) -> list[tuple[bool, str | None]]:
    """Whether each folder holds anything, and who runs a grid in it now (kappa_rllib.tuning.busy), if anyone."""
    from kappa_rllib.tuning import storage as stores

    return [(stores.holds_files(path), None if stores.is_uri(path) else busy.holder(stores.local_path(path)))
            for path in paths]


def check_fresh(grids, storage) -> None:
    """A fresh run (no --resume): ValueError (one line) if any grid's folder under `storage` holds a run,
    checked for every grid before any Tuner writes its settings (tuner.pkl) into one (where the storage is:
    `storage.on_storage`)."""
    from kappa_rllib.tuning import storage as stores

    paths = [stores.join(storage, grid.name, resolve=not _ray_client()) for grid in grids]
    for grid, path, (held, who) in zip(grids, paths, stores.on_storage(_holding, paths)):
        if held and who:
            raise ValueError(busy.busy_message(path, grid.name, who))
        if held:
            raise ValueError(f"{path} already holds a run of grid {grid.name!r}: pass --resume to "
                             "continue it, or choose another --storage")


def wait_for_other_drivers(grids, storage, wait_s: float = busy.WAIT_S) -> list[str]:
    """Before `--resume` touches a grid's folder: waits up to `wait_s` (saying so) for any other Tune run of the
    file's grids to end (kappa_rllib.tuning.busy), then GridBusy (one line) for one still going. Where the
    storage is (`storage.on_storage`); a bucket has no lock. A local driver holds the folders' locks from here
    on: the paths it took (for the grids' Tune runs to adopt; `busy.release` each if none will)."""
    from kappa_rllib.tuning import storage as stores

    if stores.is_uri(storage):
        return []
    client = _ray_client()
    paths = [stores.join(storage, grid.name, resolve=not client) for grid in grids]
    # a local driver takes each free folder's lock as it looks (busy.take), for its Tune run to adopt; through
    # Ray Client the look is a task on the head that can hold nothing past its end (busy.holders)
    look = busy.holders if client else busy.take
    try:
        held = stores.on_storage(look, paths)
        if any(held):
            for grid, who in zip(grids, held):
                if who:
                    print(f"[tune] {grid.name}: another driver is still running it ({who}); waiting up to "
                          f"{wait_s:.0f} s for it to end", file=sys.stderr)
            held = stores.on_storage(look, paths, wait_s)
        for grid, path, who in zip(grids, paths, held):
            if who:
                raise busy.GridBusy(busy.busy_message(path, grid.name, who))
    except BaseException:  # refused, Ctrl-C while waiting: let go of the folders taken so far
        if not client:
            busy.release_unadopted(paths)
        raise
    return [] if client else paths


def _ray_client() -> bool:
    import ray

    return ray.util.client.ray.is_connected()


def _total_env_steps(grid):
    """A trial's T in `grid` where every trial stops at it (the default stop rule), else None."""
    steps = getattr(grid.config, "total_env_steps", None)
    return steps if grid.stop == SCHEDULE_STOP and isinstance(steps, (int, float)) else None


def _param_space_on_restore(grid, path) -> dict:
    """The grid's param space as the stored run has it. Tune refuses a restore whose param space has other
    keys than the run started with (tuner.pkl lists them), so a setting this version of kappa-rllib added
    since (e.g. `batches_per_iteration`) is left out: trials made from it take the setting's default, what
    the run's version ran. A stored setting this version no longer has is one clear error."""
    from ray.tune.utils import flatten_dict

    from kappa_rllib.tuning import storage as stores

    space = _param_space(grid)
    stored = stores.on_storage(_stored_param_keys, str(path))
    if stored is None:  # Tune checks nothing then either
        return space
    keys = set(flatten_dict(space))
    gone = sorted(set(stored) - keys)
    if gone:
        raise ValueError(f"{path}: grid {grid.name!r} was started with settings this kappa-rllib does not have "
                         f"({', '.join(gone[:5])}{', ...' if len(gone) > 5 else ''}): resume it with the version "
                         "that started it")
    for key in keys - set(stored):  # added since the run started: the trials keep the default
        *parents, leaf = key.split("/")
        node = space
        for parent in parents:
            node = node[parent]
        del node[leaf]
    return space


def _stored_param_keys(path: str):
    """The param space's keys the stored run at `path` was started with (its tuner.pkl), None if not listed."""
    from ray import cloudpickle
    from ray.train._internal.storage import get_fs_and_path

    fs, fs_path = get_fs_and_path(path, None)
    with fs.open_input_file(f"{fs_path}/tuner.pkl") as f:
        return cloudpickle.loads(f.readall()).get("__flattened_param_space_keys")


def _param_space(grid):
    """The grid's config as the driver hands it to Tune: with compact result rows (config_once.COMPACT), the driver
    giving each row the grid's axes and each trial's last row its whole config."""
    from kappa_rllib.tuning.config_once import compact

    return compact(grid.config)


def _count_trials(grid) -> int:
    """The trials Tune makes of the grid, counted as Tune counts them (its generator's `_total_samples`): every
    grid_search at any depth of the config, times num_samples."""
    from ray.tune.search.variant_generator import _count_variants

    space = grid.config.to_dict() if hasattr(grid.config, "to_dict") else dict(grid.config)
    return _count_variants({"config": space, "num_samples": grid.num_samples}, [])


def check_resume(grids, storage) -> None:
    """ValueError (one line) where a grid of the file now makes another number of trials than its stored run
    under `storage` was started with (a seed, a kappa added or taken away): Tune would go on with the stored
    run's trials and ignore the file's, so an added trial would never run (each --resume saying it is left)
    and a removed one would still run. Nothing is written; the stored runs are read where the storage is
    (`storage.on_storage`)."""
    from kappa_rllib.tuning import storage as stores

    paths = [stores.join(storage, grid.name, resolve=not _ray_client()) for grid in grids]
    for grid, path, stored in zip(grids, paths, stores.on_storage(_stored_totals, paths)):
        now = _count_trials(grid)
        if isinstance(stored, int) and stored != now:
            raise ValueError(f"{path}: grid {grid.name!r} makes {now} trials in the file now, its run "
                             f"there was started with {stored}: a changed grid cannot go on in its folder; put the "
                             "file back as it was, or run the changed grid in another --storage")


def _stored_totals(paths: list[str]) -> list:
    """The number of trials each stored run at `paths` was started with (its search state's `_total_samples`),
    None where there is none or it cannot be read (cut short: repair_state and Tune's restore say so)."""
    import pyarrow.fs
    from ray import cloudpickle
    from ray.train._internal.storage import get_fs_and_path

    totals = []
    for path in paths:
        fs, fs_path = get_fs_and_path(str(path), None)
        states = sorted(info.path for info in fs.get_file_info(pyarrow.fs.FileSelector(fs_path, allow_not_found=True))
                        if info.base_name.startswith("basic-variant-state-") and info.base_name.endswith(".json"))
        stored = None
        if states:
            try:
                with fs.open_input_file(states[-1]) as f:  # Tune's newest, as its restore picks it (by name)
                    stored = cloudpickle.loads(f.readall()).get("_total_samples")
            except Exception:  # noqa: BLE001 - cut short or unreadable: repair_state and Tune's restore say so
                stored = None
        totals.append(stored)
    return totals


def _restorable(path) -> bool:
    """Tune can restore the grid at `path` and it has trials: a grid stopped before it made any (a
    Ctrl-C while the file's grids were starting) holds a Tuner's settings but no trials, and Tune's
    restore of it fails loudly and starts afresh; it is started afresh here instead."""
    from ray import tune

    from kappa_rllib.tuning import storage as stores

    if not tune.Tuner.can_restore(path):
        return False
    if stores.is_uri(path):
        return True
    newest = repair._newest_state(Path(path))
    if newest is None:
        return False
    try:
        return bool(json.loads(newest.read_text()).get("trial_data"))
    except (OSError, ValueError):
        return True  # cut short (a full disk): repair.repair_state has put back a whole copy, or says so


def _prepare_resume(path: str) -> tuple[list[str], bool, bool]:
    """Before a grid's `--resume`, in its (local) folder `path`: the repair (`repair.repair_state`: what was put
    right, a line each), whether Tune can restore it (`_restorable`), and whether it holds trial results while
    Tune cannot (no experiment state to resume them from). A bucket is neither repaired nor looked into."""
    from kappa_rllib.tuning import storage as stores

    local = not stores.is_uri(path)
    repaired = repair.repair_state(Path(path)) if local and Path(path).is_dir() else []
    restorable = _restorable(path)
    return repaired, restorable, (not restorable and local and any(Path(path).glob("*/result.json")))


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
        repaired, restorable, results_only = stores.on_storage(_prepare_resume, path)
        for line in repaired:
            print(f"[tune] {grid.name}: {line}", file=sys.stderr)
    if resume and not restorable and results_only:
        raise ValueError(f"{path}: grid {grid.name!r} has trial results but no Tune state to resume them from "
                         "(experiment_state-*.json): move the folder aside to run the grid afresh")
    if restorable:
        with quiet_unstarted_trials():
            tuner = tune.Tuner.restore(path, trainable=grid.trainable, param_space=_param_space_on_restore(grid, path),
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
        param_space=_param_space(grid),
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
