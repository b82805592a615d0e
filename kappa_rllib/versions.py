"""The library versions a trial ran with, as it reports them (`libraries`), so that a published number names the
simulator and the frameworks behind it: MuJoCo's physics and ALE's emulation change between releases, and the
package pins only ray[rllib] and torch exactly (pyproject.toml).

A trial reports them on the first two rows of each stretch of training (kappa_rllib.tuning.config_once: where
its config is too), from the process that ran it: on a cluster, the worker's, which need not be the driver's.
They go to result.json, not progress.csv (kappa_rllib.tuning.tracking.loggers.RowsCSV).
`report` says which versions its trials ran with (kappa_rllib.report).

`cpu` names the processor (its model and the widest vector instructions it offers): a float sum rounds with the
kernel its CPU runs, so a published trial repeats bit for bit only on the same kind (docs/reliability.md).

"kappa-rllib 0.1.0" names no code: `kappa-rllib commit` is the git commit of the source the process imported,
with "-dirty" where that checkout had uncommitted changes (`source_commit`); it is absent where the package is no
git checkout of its own (a wheel, an image)."""

from __future__ import annotations

import functools
import platform
import subprocess
from importlib import metadata
from pathlib import Path

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
        if name == "kappa-rllib" and source_commit():
            found[COMMIT] = source_commit()
    if cpu():
        found[CPU] = cpu()
    return found


CPU = "cpu"
CPUINFO = Path("/proc/cpuinfo")


@functools.cache
def cpu() -> str | None:
    """"AMD EPYC 9R14 (avx512)": /proc/cpuinfo's model name and the widest of the vector extensions torch and
    MuJoCo's kernels pick from (avx512, avx2, avx, sse4_2; none on an ARM CPU); the platform's processor name where
    there is no /proc/cpuinfo (None where it has none)."""
    try:
        info = CPUINFO.read_text(errors="replace")
    except OSError:
        return platform.processor() or None
    fields = {}
    for line in info.splitlines():
        key, _, value = line.partition(":")
        if not line.strip():
            break  # the first processor's fields are enough
        fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or fields.get("Model") or platform.processor() or "a CPU of unknown model"
    flags = set(fields.get("flags", "").split())
    widest = next((name for flag, name in (("avx512f", "avx512"), ("avx2", "avx2"), ("avx", "avx"),
                                           ("sse4_2", "sse4_2")) if flag in flags), None)
    return f"{model} ({widest})" if widest else model


COMMIT = "kappa-rllib commit"


@functools.cache
def source_commit() -> str | None:
    """The git commit of the checkout this package is imported from, "<sha>-dirty" where its tracked or
    untracked (not ignored) files differ from that commit; None where the package's folder is not the top of
    a git checkout (an installed wheel inside some other repository included) or git is missing."""
    root = Path(__file__).resolve().parents[1]

    def git(*args):
        # --no-optional-locks: `status` would otherwise refresh the index under .git/index.lock, which a commit
        # made in the checkout at the same moment would find taken
        done = subprocess.run(["git", "--no-optional-locks", "-C", str(root), *args], capture_output=True, text=True,
                               timeout=20)
        return done.stdout.strip() if done.returncode == 0 else None

    try:
        top = git("rev-parse", "--show-toplevel")
        if top is None or Path(top).resolve() != root:
            return None
        head, status = git("rev-parse", "HEAD"), git("status", "--porcelain")
    except (OSError, subprocess.SubprocessError):
        return None
    if not head or status is None:
        return None
    return head + ("-dirty" if status else "")


def describe(found: dict) -> str:
    """"python 3.11.7, kappa-rllib 0.1.0, ray 2.60.0, ...": a set of `libraries()` in one line."""
    return ", ".join(f"{name} {version}" for name, version in found.items())
