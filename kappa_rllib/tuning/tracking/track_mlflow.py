"""`tune --track mlflow`: every trial of a file's grids as a run of one MLflow store, one experiment.

Every grid's callback logs into the same store (MLFLOW_TRACKING_URI, else `<the file's results folder>/mlflow.db`)
and the same experiment (the project), each run tagged with its `grid`, Tune's `trial_id` and the grid's storage
key (kappa_rllib.tuning.tracking.replay: a run belongs to its storage), so one `mlflow ui` shows the whole file
and a store shared by several files keeps their runs apart. Ray's MLflowLoggerCallback is not used: it reaches
MLflow through the process-global tracking URI, which each grid's `setup` would set to its own store while the
other grids log (and creates the experiment without a guard, so grids setting up at once collide on it). Here
each callback holds its own `MlflowClient`, one per store and process, its calls under one lock (SQLite takes
one writer). A trial that goes on (a retry, `--resume`, a new driver) logs into its own run again: one run per
trial. Each new driver gives a run the stored rows it lacks (`RowReplay`, as W&B's callback does): what the run
holds is its `time_total_s` history, keyed by env steps.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from ray.tune.logger import LoggerCallback

from kappa_rllib.tracking import env_steps, metrics, mlflow_params
from kappa_rllib.tuning.tracking.replay import RowReplay, last_key, replay_rows, storage_key, stored_rows

# tags of each MLflow run: the grid (one experiment holds the file's grids), Tune's trial id and the grid's
# storage key (a trial that goes on finds its run by them); a run made before runs had storage keys has none
GRID_TAG, TRIAL_TAG, STORAGE_TAG = "grid", "trial_id", "kappa_storage"
# the last stored row (`row_key`, as JSON) through which a full check found an ended trial's run whole: the next
# driver reads neither its result.json nor its history again (W&B's HeldCache, for MLflow)
COMPLETE_TAG = "kappa_rows_complete"
MLFLOW_BATCH = 1000  # metrics per `log_batch` call: MLflow's limit (MAX_METRICS_PER_BATCH)
HELD_KEY = "time_total_s"  # logged last of each stored row: a row whose HELD_KEY is in the store is whole

_STORES: dict = {}  # tracking URI -> (MlflowClient, lock): one client and one writer per store and process
_STORES_LOCK = threading.Lock()


def _store(uri: str):
    with _STORES_LOCK:
        if uri not in _STORES:
            from mlflow import MlflowClient

            _STORES[uri] = (MlflowClient(tracking_uri=uri), threading.RLock())
        return _STORES[uri]


def _file_lock(uri: str):
    """A lock file beside a SQLite store, for processes that share it (Ray Client runs a process per grid
    on the head); a no-op for other stores."""
    import contextlib

    if not uri.startswith("sqlite:///"):
        return contextlib.nullcontext()
    from filelock import FileLock

    return FileLock(uri.removeprefix("sqlite:///") + ".lock", timeout=120)


def _row_ms(row: dict) -> int:
    """A stored row's time (Tune's `timestamp`, seconds) in MLflow's milliseconds, else now."""
    import time

    stamp = row.get("timestamp")
    return int((stamp if isinstance(stamp, (int, float)) else time.time()) * 1000)


@dataclass
class _Run:
    """A trial's run in the store, as this driver knows it."""

    run_id: str
    status: str = "RUNNING"
    storage: str | None = None
    complete: str | None = None
    made_here: bool = False  # made by this driver: it holds what this driver logged, nothing more

    @classmethod
    def of(cls, run) -> "_Run":
        tags = run.data.tags
        return cls(run.info.run_id, run.info.status, tags.get(STORAGE_TAG), tags.get(COMPLETE_TAG))


class MLflowCallback(RowReplay, LoggerCallback):
    """Every trial of a grid as an MLflow run of the file's experiment, tagged with the grid and its storage:
    params once, metrics as `tracking.metrics()` in one batch per result, their step the env steps; the stored
    rows a run lacks, once a driver (`RowReplay`): a trial that goes on from a checkpoint, those up to it, when it
    starts; a trial that had ended, all of them, then its run's end, at the first step (or the end of a run with
    nothing to step)."""

    def __init__(self, uri: str, experiment: str, grid: str):
        self.uri, self.experiment, self.grid = uri, experiment, grid
        self._runs: dict = {}  # trial id -> run id: the trials this driver has started or ended
        self._known: dict = {}  # trial id -> _Run: this driver's look at each trial's run
        self._experiment_id = None
        self._grid_runs: dict | None = None  # trial id -> [_Run]: the grid's runs, looked up once at the first step

    def __getstate__(self):  # Tune pickles its callbacks with the run (tuner.pkl): settings only
        return {"uri": self.uri, "experiment": self.experiment, "grid": self.grid}

    def __setstate__(self, state):
        self.__init__(state["uri"], state["experiment"], state["grid"])

    def setup(self, *args, **kwargs):
        self._experiment_id = self._experiment()

    def _experiment(self) -> str:
        from mlflow.exceptions import MlflowException

        client, lock = _store(self.uri)
        with lock, _file_lock(self.uri):
            found = client.get_experiment_by_name(self.experiment)
            if found is not None:
                return found.experiment_id
            try:
                return client.create_experiment(self.experiment)
            except MlflowException:  # made meanwhile by another process on the store
                return client.get_experiment_by_name(self.experiment).experiment_id

    def _experiment_id_now(self) -> str:
        if self._experiment_id is None:
            self._experiment_id = self._experiment()
        return self._experiment_id

    def _search(self, filter_string: str, max_results: int = 1000) -> dict:
        """{trial id: [_Run]} of the runs `filter_string` finds (paged by MLflow's 1000 a page)."""
        client, lock = _store(self.uri)
        found, token = {}, None
        with lock:
            while True:
                page = client.search_runs([self._experiment_id_now()], filter_string=filter_string,
                                          max_results=max_results, page_token=token)
                for run in page:
                    found.setdefault(run.data.tags.get(TRIAL_TAG), []).append(_Run.of(run))
                token = page.token
                if not token:
                    return found

    def before_ended(self, trials) -> None:
        # one search for the grid's runs (every storage's: a grid name recurs across files), for the first step
        # and for log_trial_start after it
        self._grid_runs = self._search(f"tags.{GRID_TAG} = '{self.grid}'")

    def _find_run(self, trial) -> _Run | None:
        """`trial`'s run in the store, else None: the one tagged with its storage key; else one made before runs
        had storage keys (no such tag), which is taken for this storage (tagged) as it is found. Another storage's
        run of the same grid name and trial id is not `trial`'s."""
        if trial.trial_id in self._known:
            return self._known[trial.trial_id]
        if self._grid_runs is not None:
            candidates = self._grid_runs.get(trial.trial_id, [])
        else:  # no step yet: one search
            candidates = self._search(f"tags.{GRID_TAG} = '{self.grid}' and tags.{TRIAL_TAG} = '{trial.trial_id}'",
                                      max_results=100).get(trial.trial_id, [])
        key = storage_key(trial)
        run = next((r for r in candidates if r.storage == key), None)
        if run is None and key is not None:
            run = next((r for r in candidates if r.storage is None), None)
            if run is not None:  # a run from before storage keys: this storage's from now on
                client, lock = _store(self.uri)
                with lock:
                    client.set_tag(run.run_id, STORAGE_TAG, key)
                run.storage = key
        if run is not None:
            self._known[trial.trial_id] = run
        return run

    def _new_run(self, trial) -> _Run:
        from mlflow.entities import Param

        client, lock = _store(self.uri)
        key = storage_key(trial)
        with lock, _file_lock(self.uri):
            made = client.create_run(self._experiment_id_now(), run_name=str(trial), tags={
                GRID_TAG: self.grid, TRIAL_TAG: trial.trial_id, "trial_name": str(trial),
                **({STORAGE_TAG: key} if key is not None else {})})
            client.log_batch(made.info.run_id, params=[Param(k, v) for k, v in mlflow_params(trial.config).items()])
        run = self._known[trial.trial_id] = _Run(made.info.run_id, storage=key, made_here=True)
        return run

    def _held(self, run: _Run) -> set[tuple]:
        """The `row_key`s of the rows `run` holds: its HELD_KEY history (step: the env steps)."""
        if run.made_here:
            return set()
        client, lock = _store(self.uri)
        with lock:
            history = client.get_metric_history(run.run_id, HELD_KEY)
        return {(int(m.step), float(m.value)) for m in history}

    def lacking(self, trial, up_to):
        run = self._find_run(trial)
        last = last_key(trial) if up_to is None else None
        if run is not None and last is not None and run.complete == json.dumps(list(last)):
            return []
        return replay_rows(stored_rows(trial), set() if run is None else self._held(run), up_to)

    def log_rows(self, trial, rows) -> None:
        """`rows` into `trial`'s run, in batches of MLFLOW_BATCH, each row's HELD_KEY last: a driver stopped
        mid-way leaves a row without it, which the next one logs again (MLflow's stores skip a metric logged twice
        with the same key, value, time and step: `_row_ms`)."""
        from mlflow.entities import Metric

        client, lock = _store(self.uri)
        run_id = self._runs[trial.trial_id]
        batch = []
        for row in rows:
            values = metrics(row, numbers_only=True)
            held = values.pop(HELD_KEY, None)
            values.update({} if held is None else {HELD_KEY: held})
            batch += [Metric(k, float(v), _row_ms(row), env_steps(row)) for k, v in values.items()]
        for i in range(0, len(batch), MLFLOW_BATCH):  # the lock per call: other grids' trials log between
            with lock:
                client.log_batch(run_id, metrics=batch[i:i + MLFLOW_BATCH])

    def log_ended(self, trial, rows) -> None:
        """An ended trial's lacking `rows` into its run (made if it has none), then the run's end, and the run
        marked whole through its last row."""
        run = self._find_run(trial) or self._new_run(trial)
        self._runs[trial.trial_id] = run.run_id
        if rows:
            self.log_rows(trial, rows)
        client, lock = _store(self.uri)
        with lock:
            if rows or run.made_here or run.status == "RUNNING":
                client.set_terminated(run.run_id, status="FAILED" if trial.status == "ERROR" else "FINISHED")
            last = last_key(trial)
            if last is not None and run.complete != json.dumps(list(last)):
                run.complete = json.dumps(list(last))
                client.set_tag(run.run_id, COMPLETE_TAG, run.complete)

    def log_trial_start(self, trial):
        client, lock = _store(self.uri)
        if trial.trial_id in self._runs:  # a retry in this run: its run goes on
            with lock:
                client.update_run(self._runs[trial.trial_id], status="RUNNING")
            return
        run = self._find_run(trial)
        if run is None:
            run = self._new_run(trial)
        else:
            with lock:
                client.update_run(run.run_id, status="RUNNING")
        self._runs[trial.trial_id] = run.run_id
        self.replay_on_start(trial)  # from a checkpoint: the rows up to it that the run lacks

    def log_trial_result(self, iteration, trial, result):
        import time

        from mlflow.entities import Metric

        if trial.trial_id not in self._runs:
            self.log_trial_start(trial)
        client, lock = _store(self.uri)
        stamp, step = int(time.time() * 1000), env_steps(result)
        batch = [Metric(k, float(v), stamp, step) for k, v in metrics(result, numbers_only=True).items()]
        with lock:
            client.log_batch(self._runs[trial.trial_id], metrics=batch)

    def log_trial_end(self, trial, failed: bool = False):
        run_id = self._runs.get(trial.trial_id)
        if run_id is None:
            return
        client, lock = _store(self.uri)
        with lock:
            client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")
