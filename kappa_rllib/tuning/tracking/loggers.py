"""Tune's file loggers of a grid's trials (`tune_loggers`): result.json and progress.csv always, TensorBoard's
events only when asked for."""

from __future__ import annotations

from ray.tune.logger import TBXLoggerCallback


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
