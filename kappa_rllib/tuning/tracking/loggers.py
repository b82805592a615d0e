"""Tune's file loggers of a grid's trials (`tune_loggers`): result.json and progress.csv always, TensorBoard's
events only when asked for; neither rows file ever goes back to the storage's older copy within a run."""

from __future__ import annotations

from pathlib import Path

from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback

from kappa_rllib.versions import KEY as VERSIONS


def tune_loggers(*, tensorboard: bool = False) -> list:
    """Tune's loggers of a grid's trials: result.json (what `report`, `--resume` and the trackers' repairs
    read) and progress.csv, always; TensorBoard's events only with `tensorboard` (`tune --tensorboard`).

    Tune adds all three to every run unless it is given its own; the TensorBoard one turns each of a row's
    ~300 numbers into a summary record (tensorboardX's `scalar`, a CRC per record) in the driver's one
    process: the largest of Tune's per-report costs (benchmarks/driver_cluster.py). `NoTensorBoard` stands in
    for it when it is off (Tune looks for an instance of its class)."""
    return [RowsJson(), RowsCSV(), TBXLoggerCallback() if tensorboard else NoTensorBoard()]


class _KeepsStagedRows:
    """A rows logger that takes storage's copy of a trial's rows file into staging only where staging has fewer
    bytes of it (none: a trial started by this driver for the first time, a `--resume`).

    Tune's loggers copy storage's result.json (the JSON logger at every start of a trial, the CSV one after an
    error) over the driver's staging file, which is what storage copies from. Within one run, storage's copy is
    the staging file as it was at the last sync (every few seconds, kappa_rllib.tuning.sync): a trial that starts
    again in the same run (a PBT / PB2 member paused for another's exploit, or exploited; a retry after an
    error) lost its rows written since that sync, and storage got the shortened file at the next one. The rows
    a restart from an older checkpoint writes again are the report's to read as a rollback
    (kappa_rllib.report.load). A `--resume` starts from storage's copy: its driver's staging folder is new, or,
    on a cluster still up, the killed driver's, which `--resume` deletes first for a local or NFS folder
    (kappa_rllib.tuning.staging.drop_stale_staging; for a bucket, Tune's first sync has already copied it up,
    before any trial starts, as without this class). Through Ray Client, a grid started by a kappa-rllib before
    this class keeps the loggers it was started with (Tune restores them from its tuner.pkl)."""

    def _restore_from_remote(self, file_name: str, trial) -> None:
        local = Path(trial.local_path, file_name)
        try:
            have = local.stat().st_size
        except OSError:
            have = 0
        if have > 0 and trial.checkpoint:
            import pyarrow.fs

            remote = Path(trial.storage.trial_fs_path, file_name).as_posix()
            try:
                info = trial.storage.storage_filesystem.get_file_info(remote)
            except Exception:  # noqa: BLE001 - Tune's own copy says what went wrong
                info = None
            if info is not None and (info.type == pyarrow.fs.FileType.NotFound or info.size <= have):
                return  # staging holds every row storage has, and those written since its last copy
        super()._restore_from_remote(file_name, trial)


class RowsJson(_KeepsStagedRows, JsonLoggerCallback):
    """Tune's result.json logger (`_KeepsStagedRows`)."""


class RowsCSV(_KeepsStagedRows, CSVLoggerCallback):
    """Tune's progress.csv logger (`_KeepsStagedRows`), without the library versions (kappa_rllib.versions) a
    stretch's first rows carry: the file's columns are its first row's, and Tune names those of a later stretch
    (a retry, a `--resume`) after that stretch's first row, under the same header. So their columns would come
    and go with the stretches (a resumed trial that began before they were reported, a node without one of the
    libraries); they are in result.json."""

    def log_trial_result(self, iteration, trial, result):
        if VERSIONS in result:
            result = {k: v for k, v in result.items() if k != VERSIONS}
        super().log_trial_result(iteration, trial, result)


class NoTensorBoard(TBXLoggerCallback):
    """Tune's TensorBoard logger, off: writes nothing (`tune_loggers`)."""

    def log_trial_start(self, trial):
        pass

    def log_trial_result(self, iteration, trial, result):
        pass

    def log_trial_end(self, trial, failed=False):
        pass
