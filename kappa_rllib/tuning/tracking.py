"""`kappa-rllib tune --track`: Tune callbacks logging every trial to W&B and/or MLflow, as `train` logs its
run (kappa_rllib.tracking: the metrics, the config once, env steps as the x-axis).

One file, one store, however many grids run at once (docs/experiments.md, "Tracking"):

* **MLflow.** Every grid's callback logs into the same store (MLFLOW_TRACKING_URI, else
  `<the file's results folder>/mlflow.db`) and the same experiment (the project), each run tagged with
  its `grid` and Tune's `trial_id`, so one `mlflow ui` shows the whole file. Ray's MLflowLoggerCallback
  is not used: it reaches MLflow through the process-global tracking URI, which each grid's `setup`
  would set to its own store while the other grids log (and creates the experiment without a guard,
  so grids setting up at once collide on it). Here each callback holds its own `MlflowClient`, one per
  store and process, its calls under one lock (SQLite takes one writer). A trial that goes on (a retry,
  `--resume`, a new driver) logs into its own run again, found by its tags: one run per trial.
* **W&B.** Ray's logging actor passes `step=training_iteration` to `wandb.log`; that step goes back on a
  rollback (a retry from a checkpoint, `--resume`, a PBT exploit) and W&B drops every row whose step is
  not above the last one. Here W&B keeps its own step (monotone: every row is kept) and the x-axis is
  the env steps (`define_metric`): a rollback shows as the line going back on the env-step axis and
  covering it again. A trial resumed by a new driver goes on in its own W&B run (`resume="allow"`).
  W&B's writer (wandb-core) holds a run's rows in memory until it ends or fills a 32 KiB block, so a
  killed driver's W&B runs keep none of their last rows, often none at all (a 7-byte file), while Tune's
  result.json on storage has them. So a trial that a new driver starts again, or finds ended, first gets
  the rows of its result.json that no local W&B file of its run holds (`KappaWandb`, `replay_rows`): up
  to the checkpoint it goes on from (the later rows it logs again as it reruns them), or all of them.
  Online, W&B's server may hold some of them already (its stream runs ahead of the local file): those
  show twice, at the same env step with the same values. What a run's W&B files hold is cached beside them
  (`HeldCache`, `<results>/wandb/kappa-held/`), so each `--resume` of a file of many ended trials reads a
  trial's result.json and W&B files once, not on every resume (benchmarks/wandb_resume_check.py).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from ray.tune.logger import LoggerCallback, TBXLoggerCallback

from kappa_rllib.tracking import _results_dir, env_steps, metrics, mlflow_params, mlflow_uri, step_key

# tags of each MLflow run: the grid (one experiment holds the file's grids) and Tune's trial id (a trial
# that goes on finds its run by them)
GRID_TAG, TRIAL_TAG = "grid", "trial_id"


def tune_loggers(*, tensorboard: bool = False) -> list:
    """Tune's loggers of a grid's trials: result.json (what `report`, `--resume` and the trackers' repairs
    read) and progress.csv, always; TensorBoard's events only with `tensorboard` (`tune --tensorboard`).

    Tune adds all three to every run unless it is given its own; the TensorBoard one turns each of a row's
    ~300 numbers into a summary record (tensorboardX's `scalar`, a CRC per record) in the driver's one
    process: the largest of Tune's per-report costs (benchmarks/driver_cluster.py). `NoTensorBoard` stands in
    for it when it is off (Tune looks for an instance of its class)."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    return [JsonLoggerCallback(), CSVLoggerCallback(), TBXLoggerCallback() if tensorboard else NoTensorBoard()]


class NoTensorBoard(TBXLoggerCallback):
    """Tune's TensorBoard logger, off: writes nothing (`tune_loggers`)."""

    def log_trial_start(self, trial):
        pass

    def log_trial_result(self, iteration, trial, result):
        pass

    def log_trial_end(self, trial, failed=False):
        pass


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


def _wandb_callback(project_name, group, results_folder, entity_name):
    from ray.air.integrations.wandb import WandbLoggerCallback, _QueueItem, _WandbLoggingActor

    class KappaWandbActor(_WandbLoggingActor):
        """Ray's W&B logging actor (one per trial): metrics as `tracking.metrics()`, against env steps,
        W&B's own step (see the module's docstring); the trial's config was given to `wandb.init` once."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._wandb = _OwnStep(self._wandb)

        def _handle_result(self, result):
            if not getattr(self, "_step_defined", False):  # once, in the actor, after wandb.init
                self._wandb.define_metric(step_key())
                self._wandb.define_metric("*", step_metric=step_key())
                self._step_defined = True
            config_update = {k: result[k] for k in self._to_config if k in result}
            return metrics(result), config_update

    class KappaWandb(WandbLoggerCallback):
        """Ray's W&B callback, with the rows a killed driver's W&B runs lost logged again (the module's
        docstring): once per trial and driver, before the trial's first new row (it starts again) or at
        the first step or the end of the run (it had ended)."""

        _logger_actor_cls = KappaWandbActor

        def _seen(self) -> set:
            if not hasattr(self, "_seen_trials"):  # trial ids this driver has looked at
                self._seen_trials = set()
            return self._seen_trials

        def log_trial_start(self, trial):
            first = trial.trial_id not in self._seen()
            self._seen().add(trial.trial_id)
            super().log_trial_start(trial)
            if first and trial.checkpoint is not None:  # no checkpoint: it starts from scratch, rows and all
                self._queue(trial, missing_rows(Path(self.kwargs["dir"]), trial, _checkpoint_iteration(trial)))

        def _ended(self, trials) -> None:
            for trial in trials:
                if trial.status in ENDED and trial.trial_id not in self._seen():
                    self._seen().add(trial.trial_id)
                    rows = missing_rows(Path(self.kwargs["dir"]), trial)
                    if rows:  # its own W&B run again, these rows, its end
                        super().log_trial_start(trial)
                        self._queue(trial, rows)
                        self._signal_logging_actor_stop(trial)

        def _queue(self, trial, rows) -> None:  # one remote call (Ray's Queue is unbounded: it cannot fail)
            if rows:
                self._trial_queues[trial].put_nowait_batch([(_QueueItem.RESULT, row) for row in rows])

        def on_step_begin(self, iteration, trials, **info):
            if not getattr(self, "_ends_checked", False):
                self._ends_checked = True
                self._ended(trials)

        def on_experiment_end(self, trials, **info):
            if not getattr(self, "_ends_checked", False):  # a run with nothing left to step (all had ended)
                self._ends_checked = True
                self._ended(trials)
            super().on_experiment_end(trials, **info)

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


# ------------------------------------------------------------------------------------------ W&B after a kill
def wandb_records(path: Path):
    """The protobuf records of a W&B run file (`run-ID.wandb`), as far as they are whole: a 7-byte header
    (":W&B", magic, version), then LevelDB's log format (32 KiB blocks; per record a 7-byte header: CRC,
    length, type 1 full / 2 first / 3 middle / 4 last). wandb (0.31) ships no reader of its own in Python."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    if data[:4] != b":W&B":
        return
    i, buf, block = 7, b"", 32768
    while i + 7 <= len(data):
        left = block - i % block
        if left < 7:  # a block's tail too short for a header is padding
            i += left
            continue
        length, kind = int.from_bytes(data[i + 4:i + 6], "little"), data[i + 6]
        if kind == 0:  # zeros to the end of the block
            i += left
            continue
        if i + 7 + length > len(data):  # cut short (a killed writer)
            return
        chunk, i = data[i + 7:i + 7 + length], i + 7 + length
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            try:
                record.ParseFromString(buf)
            except Exception:  # noqa: BLE001 (protobuf's DecodeError): not a whole record
                return
            yield record


def wandb_held(results_folder: Path, run_id: str) -> set[tuple]:
    """(env steps, time_total_s) of each row that W&B's local files of the run `run_id` hold: every run
    folder of that id under `results_folder/wandb` (offline-run-*, or run-* online), one per driver that
    logged it. The time tells a row rerun after a rollback from the one it replaced: the kappa algorithms
    end an iteration at the same env step whichever timeline it is on.

    Reading a 2M-step trial's files takes ~0.2-0.4 s, so what they hold is kept in `HeldCache`, read again
    only where a file of the run changed."""
    return HeldCache(results_folder, run_id).held()


def _read_held(paths: list[Path]) -> set[tuple]:
    """What the W&B run files `paths` hold (`wandb_held`)."""
    key, held = step_key(), set()
    for path in paths:
        try:
            records = list(wandb_records(path))
        except OSError:  # a run folder removed meanwhile: it holds nothing
            continue
        for record in records:
            if record.WhichOneof("record_type") != "history":
                continue
            steps = total = None  # only the two keys looked at: a row has ~75 (a third of the time, not all)
            for item in record.history.item:
                name = item.key or "/".join(item.nested_key)
                if name == key:
                    steps = int(json.loads(item.value_json))
                elif name == "time_total_s":
                    total = float(json.loads(item.value_json))
            if steps is not None:
                held.add((steps, total))
    return held


class HeldCache:
    """What W&B's local files of one run hold (`wandb_held`), kept in `<results>/wandb/kappa-held/<run id>.json`
    with the files' signatures (folder, size, modification time, taken before they are read), and the last row
    of the trial's stored timeline through which a full check found nothing missing (`complete`). Any change to
    the run's files (a driver logged more, a file was cut or removed) makes it read them again. A cache file
    that cannot be read or written is no error: the files are read instead."""

    def __init__(self, results_folder: Path, run_id: str):
        self.folder, self.run_id = Path(results_folder), run_id
        self.path = self.folder / "wandb" / "kappa-held" / f"{run_id}.json"

    def _files(self) -> dict[str, list]:
        files = {}
        for path in self.folder.glob(f"wandb/*run-*-{self.run_id}/run-{self.run_id}.wandb"):
            try:
                stat = path.stat()
            except OSError:  # removed meanwhile
                continue
            files[path.parent.name] = [stat.st_size, stat.st_mtime_ns]
        return dict(sorted(files.items()))

    def _entry(self) -> tuple[dict | None, dict]:
        """The cache's entry where the run's files are as it recorded them (else None), and their signature."""
        files = self._files()
        try:
            entry = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None, files
        return (entry if isinstance(entry, dict) and entry.get("files") == files else None), files

    def _save(self, entry: dict) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.tmp{os.getpid()}")
            tmp.write_text(json.dumps(entry, separators=(",", ":")))
            tmp.replace(self.path)  # whole or not at all: a driver killed mid-write leaves the old entry
        except OSError:
            pass

    def held(self) -> set[tuple]:
        entry, files = self._entry()
        if entry is None:
            held = _read_held([self.folder / "wandb" / name / f"run-{self.run_id}.wandb" for name in files])
            entry = {"files": files, "held": sorted(held, key=lambda k: (k[0], k[1] is None, k[1] or 0.0))}
            self._save(entry)
        return {(steps, seconds) for steps, seconds in entry["held"]}

    def complete(self, last: tuple) -> bool:
        """Whether a full check found W&B holding the trial's stored timeline through its row `last` (env steps,
        time_total_s), with the run's files as they are now."""
        entry, _ = self._entry()
        return entry is not None and entry.get("complete") == list(last)

    def mark_complete(self, last: tuple) -> None:
        entry, _ = self._entry()
        if entry is not None:
            self._save({**entry, "complete": list(last)})


def wandb_steps(results_folder: Path, run_id: str) -> set[int]:
    """The env steps of the rows that W&B's local files of the run `run_id` hold (`wandb_held`)."""
    return {steps for steps, _ in wandb_held(results_folder, run_id)}


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
    """The rows W&B lacks: of `rows` as the trial's last timeline went (a row replaces the rolled-back rows
    of its iteration and after), those at or before iteration `up_to` (None: all) whose (env steps,
    time_total_s) are not in `held` (`wandb_held`)."""
    line = []
    for row in rows:
        while line and line[-1].get("training_iteration", 0) >= row.get("training_iteration", 0):
            line.pop()
        line.append(row)
    return [row for row in line if (up_to is None or row.get("training_iteration", 0) <= up_to)
            and _row_key(row) not in held]


def missing_rows(results_folder: Path, trial, up_to: int | None = None) -> list[dict]:
    """The rows of `trial`'s stored timeline that W&B's local files lack (`replay_rows`), up to iteration `up_to`
    (None: all of them, for a trial that has ended). An ended trial whose last row (Tune's last result: no file
    read) a full check found held before, with W&B's files unchanged since, lacks none: so a `--resume` of a
    file of many finished trials reads neither their result.json nor their W&B files again (`HeldCache`)."""
    cache = HeldCache(results_folder, trial.trial_id)
    last = _last_key(trial) if up_to is None else None
    if last is not None and cache.complete(last):
        return []
    stored = stored_rows(trial)
    rows = replay_rows(stored, cache.held(), up_to)
    if not rows and last is not None and stored and _row_key(stored[-1]) == last:
        cache.mark_complete(last)
    return rows


def _checkpoint_iteration(trial) -> int | None:
    """The training iteration of the checkpoint a trial goes on from."""
    return (trial.latest_checkpoint_result.metrics or {}).get("training_iteration")


def _row_key(row: dict) -> tuple:
    return env_steps(row), _seconds(row.get("time_total_s"))


def _last_key(trial) -> tuple | None:
    last = getattr(trial, "last_result", None)
    return _row_key(last) if last and "time_total_s" in last else None


def _seconds(value) -> float | None:
    return None if value is None else float(value)


# ------------------------------------------------------------------------------------------ MLflow
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


ENDED = ("TERMINATED", "ERROR")  # Tune's statuses of a trial that has ended
MLFLOW_BATCH = 1000  # metrics per `log_batch` call: MLflow's limit (MAX_METRICS_PER_BATCH)
# a run's tag while the stored rows of its trial are being logged into it (MLflowCallback._replay)
REPLAY_TAG, PENDING, DONE_TAG = "kappa_rows_replayed", "pending", "done"


def _row_ms(row: dict) -> int:
    """A stored row's time (Tune's `timestamp`, seconds) in MLflow's milliseconds, else now."""
    import time

    stamp = row.get("timestamp")
    return int((stamp if isinstance(stamp, (int, float)) else time.time()) * 1000)


class MLflowCallback(LoggerCallback):
    """Every trial of a grid as an MLflow run of the file's experiment, tagged with the grid: params
    once, metrics as `tracking.metrics()` in one batch per result, their step the env steps.

    A trial with no run in the store (`--track mlflow` added on a `--resume`, or a driver's store lost) gets
    its stored rows (result.json): a trial that goes on from a checkpoint, those up to it, when it starts; a
    trial that had ended, all of them, in a run ended at once, at the first step (or the end of a run with
    nothing to step). A trial that has a run gets none again: MLflow writes each row before `log_batch`
    returns, so a driver that tracked it lost none of them (unlike W&B's, the module's docstring)."""

    def __init__(self, uri: str, experiment: str, grid: str):
        self.uri, self.experiment, self.grid = uri, experiment, grid
        self._runs: dict = {}  # trial id -> run id
        self._experiment_id = None
        self._ends_checked = False
        self._grid_runs: dict | None = None  # trial id -> run id: the grid's runs, looked up once at the first step

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

    def _search_grid(self) -> dict:
        """{trial id: run} of the grid's runs in the store: one search (paged by MLflow's 1000 a page)."""
        client, lock = _store(self.uri)
        found, token = {}, None
        with lock:
            while True:
                page = client.search_runs([self._experiment_id_now()], filter_string=f"tags.{GRID_TAG} = '{self.grid}'",
                                          max_results=1000, page_token=token)
                for run in page:
                    found.setdefault(run.data.tags.get(TRIAL_TAG), run)
                token = page.token
                if not token:
                    return found

    def on_step_begin(self, iteration, trials, **info):
        if not self._ends_checked:
            self._check_ended(trials)

    def on_experiment_end(self, trials, **info):
        if not self._ends_checked:  # a run with nothing left to step (all had ended): Tune never stepped
            self._check_ended(trials)
        super().on_experiment_end(trials, **info)

    def _check_ended(self, trials) -> None:
        """Once a driver, before any trial starts (the grid's runs, looked up here, serve `log_trial_start` too):
        a trial that ended before a driver was killed, before its end reached MLflow, and that --resume keeps
        as ended (kappa_rllib.tuning.repair) gets its run's end now; an ended trial with no run gets one, with
        all its stored rows (the last timeline), ended at once; one whose run's rows were being logged when a
        driver was stopped (REPLAY_TAG pending) gets them again."""
        self._ends_checked = True
        runs = self._search_grid()
        # a grid's runs are made by its one driver, this callback: a trial not among them has none
        self._grid_runs = {trial_id: (run.info.run_id, run.data.tags.get(REPLAY_TAG)) for trial_id, run in runs.items()}
        client, lock = _store(self.uri)
        for trial in trials:
            if trial.status not in ENDED or trial.trial_id in self._runs:
                continue
            status = "FAILED" if trial.status == "ERROR" else "FINISHED"
            run = runs.get(trial.trial_id)
            if run is None or run.data.tags.get(REPLAY_TAG) == PENDING:
                self._replay(trial, replay_rows(stored_rows(trial), set()), end=status,
                             run_id=None if run is None else run.info.run_id)
            elif run.info.status == "RUNNING":
                with lock:
                    client.set_terminated(run.info.run_id, status=status)

    def _find_run(self, trial) -> tuple[str, str | None] | None:
        """(run id, REPLAY_TAG) of `trial`'s run in the store, else None: from the first step's look at the grid's
        runs, else (no step yet) one search."""
        if self._grid_runs is not None:
            return self._grid_runs.get(trial.trial_id)
        client, lock = _store(self.uri)
        with lock:
            found = client.search_runs(
                [self._experiment_id_now()], max_results=1,
                filter_string=f"tags.{GRID_TAG} = '{self.grid}' and tags.{TRIAL_TAG} = '{trial.trial_id}'")
        return (found[0].info.run_id, found[0].data.tags.get(REPLAY_TAG)) if found else None

    def _replay(self, trial, rows: list[dict], end: str | None = None, run_id: str | None = None) -> None:
        """`rows` (stored rows of a trial that goes on or had ended) into the trial's run `run_id`, or a new one
        (with its params), then its end `end` (None: it runs). The run is tagged REPLAY_TAG pending until the
        last row is in: a driver stopped before then leaves it pending, and the next one logs the rows again
        (MLflow's stores skip a metric logged twice with the same key, value, time and step: `_row_ms`)."""
        from mlflow.entities import Metric, Param

        client, lock = _store(self.uri)
        if run_id is None:
            with lock, _file_lock(self.uri):
                run = client.create_run(self._experiment_id_now(), run_name=str(trial), tags={
                    GRID_TAG: self.grid, TRIAL_TAG: trial.trial_id, "trial_name": str(trial),
                    **({REPLAY_TAG: PENDING} if rows else {})})
                client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in mlflow_params(trial.config).items()])
            run_id = run.info.run_id
        self._runs[trial.trial_id] = run_id
        batch = [Metric(k, float(v), _row_ms(row), env_steps(row))
                 for row in rows for k, v in metrics(row, numbers_only=True).items()]
        for i in range(0, len(batch), MLFLOW_BATCH):  # the lock per call: other grids' trials log between
            with lock:
                client.log_batch(run_id, metrics=batch[i:i + MLFLOW_BATCH])
        with lock:
            if rows:
                client.set_tag(run_id, REPLAY_TAG, DONE_TAG)
            if end is not None:
                client.set_terminated(run_id, status=end)
            else:
                client.update_run(run_id, status="RUNNING")
        if self._grid_runs is not None:
            self._grid_runs[trial.trial_id] = (run_id, DONE_TAG if rows else None)

    def log_trial_start(self, trial):
        client, lock = _store(self.uri)
        if trial.trial_id in self._runs:  # a retry in this run: its run goes on
            with lock:
                client.update_run(self._runs[trial.trial_id], status="RUNNING")
            return
        found = self._find_run(trial)
        if found is not None and found[1] != PENDING:
            # a trial resumed by a new driver: its run from before goes on, with no row logged again: MLflow
            # writes synchronously (a row is in the store when log_batch returns), so a driver with
            # --track mlflow never loses rows (W&B's writer does: KappaWandb logs them again)
            self._runs[trial.trial_id] = found[0]
            with lock:
                client.update_run(found[0], status="RUNNING")
            return
        rows = []
        if getattr(trial, "checkpoint", None) is not None:  # it goes on from a checkpoint, no run: its rows up to it
            rows = replay_rows(stored_rows(trial), set(), _checkpoint_iteration(trial))
        self._replay(trial, rows, run_id=None if found is None else found[0])

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
