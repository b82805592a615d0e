"""The library versions a trial ran with, as it reports them (`libraries`), so that a published number names the
simulator and the frameworks behind it: MuJoCo's physics and ALE's emulation change between releases, and the
package pins only ray[rllib] and torch exactly (pyproject.toml).

A trial reports them on the first two rows of each stretch of training (kappa_rllib.tuning.config_once: where
its config is too), from the process that ran it: on a cluster, the worker's, which need not be the driver's.
They go to result.json, not progress.csv (kappa_rllib.tuning.tracking.loggers.RowsCSV).
`report` says which versions its trials ran with (kappa_rllib.report)."""

from __future__ import annotations

import functools
import platform
from importlib import metadata

KEY = "versions"  # the result rows' key
# the distributions whose versions make a number what it is: this package, the engine, the learner, the
# environments and their simulators
DISTRIBUTIONS = ("kappa-rllib", "ray", "torch", "numpy", "gymnasium", "mujoco", "ale-py", "minatar")


@functools.cache
def libraries() -> dict[str, str]:
    """{"python": ..., distribution: version, ...} of this process, the installed ones of DISTRIBUTIONS."""
    found = {"python": platform.python_version()}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def describe(found: dict) -> str:
    """"python 3.11.7, kappa-rllib 0.1.0, ray 2.60.0, ...": a set of `libraries()` in one line."""
    return ", ".join(f"{name} {version}" for name, version in found.items())
