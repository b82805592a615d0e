"""Tune's console output under `kappa-rllib tune`: its older engine where our compact table replaces it,
and its harmless warning about a resumed grid's pending trials filtered out."""

from __future__ import annotations

import contextlib
import logging
import os


class UnstartedTrialsFilter(logging.Filter):
    """Drops Tune's "Failed to fetch metrics for N trial(s)" warning when every trial it names has
    no result file yet: the pending trials of a resumed or interrupted grid, not an error. Any
    other fetch failure (a corrupt progress.csv, ...) is still printed."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith("Failed to fetch metrics"):
            return True
        failures = message.splitlines()[1:]
        return not (failures and all("FileNotFoundError" in line and "were not found" in line for line in failures))


@contextlib.contextmanager
def quiet_unstarted_trials():
    tune_logger = logging.getLogger("ray.tune.analysis.experiment_analysis")
    quiet = UnstartedTrialsFilter()
    tune_logger.addFilter(quiet)
    try:
        yield
    finally:
        tune_logger.removeFilter(quiet)


@contextlib.contextmanager
def tune_output(new_engine: bool):
    """Tune's newer output engine prints a heading box per experiment even when silent; with our own
    compact table we run Tune's older one (RAY_AIR_NEW_OUTPUT=0), which is silent at verbose 0."""
    before = os.environ.get("RAY_AIR_NEW_OUTPUT")
    if not new_engine:
        os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RAY_AIR_NEW_OUTPUT", None)
        else:
            os.environ["RAY_AIR_NEW_OUTPUT"] = before
