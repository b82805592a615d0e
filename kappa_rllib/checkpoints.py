"""Checkpoints: a manifest that lets a checkpoint be checked before anything in it is unpickled,
atomic periodic saves that keep the last K, and finding the newest good one of a run.

Every checkpoint an algorithm of this package writes (`save_to_path`: the CLI, Tune, the Python
API) ends with `kappa_rllib_checkpoint.json`, written last: the package, the algorithm class, the
training iteration and env steps, and the size of every file. `check` refuses, in one line, a
path that is missing, a folder without that manifest (not one of this package's checkpoints, or
one whose save was cut short), a manifest of another package or class, and a file whose size
differs (truncated or replaced) - all before any pickle is opened. Checkpoints are pickles:
load only checkpoints you trust.

`save_atomic` writes into a hidden temporary folder and renames it into place, so a crash mid-save
leaves the previous checkpoint the newest complete one.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

MANIFEST = "kappa_rllib_checkpoint.json"
PACKAGE = "kappa-rllib"
FORMAT = 1
PREFIX = "checkpoint_"
_TMP = ".tmp_"


class CheckpointError(ValueError):
    """A path that is not a complete checkpoint of this package (one-line message)."""


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != MANIFEST}


def write_manifest(path, algorithm) -> None:
    """Records what `path` holds; called last by the algorithms' `save_to_path`."""
    path = Path(path)
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    env_steps = algorithm.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
    manifest = {
        "package": PACKAGE,
        "format": FORMAT,
        "algorithm": type(algorithm).__name__,
        "training_iteration": int(getattr(algorithm, "iteration", 0) or 0),
        # Tune's clock at the save: a resume that kappa_rllib.tuning.repair points at this checkpoint restores it
        # (Trainable.restore reads time_total_s from the checkpoint's metrics; without it the clock restarts at 0)
        "time_total_s": float(getattr(algorithm, "_time_total", 0.0) or 0.0),
        "env_steps": int(env_steps),
        # the schedule used up at the save (the trial's last checkpoint): a resume never restores it to train on
        # (kappa_rllib.tuning.repair)
        "done": bool(getattr(algorithm, "schedule_done", False)),
        "files": _files(path),
    }
    tmp = path / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(tmp, path / MANIFEST)


def check(path) -> dict:
    """The manifest of a complete checkpoint of this package at `path`; CheckpointError otherwise.
    Opens no pickle."""
    path = Path(path).expanduser()
    if not path.exists():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {str(path)!r} is a file; a checkpoint is a folder")
    manifest_file = path / MANIFEST
    if not manifest_file.is_file():
        raise CheckpointError(f"{str(path)!r} is not a kappa-rllib checkpoint (no {MANIFEST}: another "
                              "program's checkpoint, or a save that did not finish)")
    try:
        manifest = json.loads(manifest_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{str(path)!r}: unreadable {MANIFEST} ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("package") != PACKAGE or "files" not in manifest:
        raise CheckpointError(f"{str(path)!r}: {MANIFEST} is not kappa-rllib's")
    if manifest.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r}: checkpoint format {manifest.get('format')!r}, this version reads {FORMAT}")
    for name, size in manifest["files"].items():
        f = path / name
        if not f.is_file():
            raise CheckpointError(f"{str(path)!r}: {name} is missing")
        if f.stat().st_size != size:
            raise CheckpointError(f"{str(path)!r}: {name} has {f.stat().st_size} bytes, the save wrote {size} "
                                  "(truncated or replaced)")
    return manifest


def save_atomic(algorithm, folder, keep: int = 2) -> Path:
    """`algorithm.save_to_path` into `folder`/checkpoint_<iteration>, atomically (temporary folder,
    then rename); keeps the newest `keep` checkpoints. Returns the checkpoint's path."""
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{PREFIX}{int(algorithm.iteration):06d}"
    tmp = folder / f"{_TMP}{final.name}_{uuid.uuid4().hex[:8]}"
    algorithm.save_to_path(str(tmp))
    check(tmp)  # the manifest is written last: the save is complete
    if final.exists():
        old = folder / f"{_TMP}old_{uuid.uuid4().hex[:8]}"
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)
    for stale in [p for p in folder.iterdir() if p.name.startswith(_TMP)]:
        shutil.rmtree(stale, ignore_errors=True)  # what a crash mid-save left behind
    kept = sorted(p for p in folder.iterdir() if p.name.startswith(PREFIX))
    for old in kept[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest(path) -> Path:
    """A checkpoint to resume from: `path` itself if it is one, else the newest complete
    checkpoint under `path` (a run folder: `path`/checkpoints/checkpoint_*, or `path`/checkpoint_*);
    CheckpointError if there is none."""
    given = str(path)
    path = Path(path).expanduser().resolve()
    if (path / MANIFEST).is_file():
        check(path)
        return path
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint or run folder at {given}" if not path.exists() else
                              f"{given} is a file, not a checkpoint or run folder")
    candidates = sorted((p for folder in (path / "checkpoints", path) if folder.is_dir()
                         for p in folder.iterdir() if p.name.startswith(PREFIX)), reverse=True)
    problems = []
    for candidate in candidates:
        try:
            check(candidate)
            return candidate
        except CheckpointError as e:
            problems.append(str(e))
    detail = f" ({len(problems)} incomplete: {problems[0]})" if problems else ""
    raise CheckpointError(f"no complete kappa-rllib checkpoint under {str(path)!r}{detail}")


def load(path):
    """The algorithm restored from a checked checkpoint (`path` may be relative, or a run folder)."""
    from ray.rllib.algorithms.algorithm import Algorithm

    checkpoint = latest(path)
    return Algorithm.from_checkpoint(str(checkpoint))


class ManifestMixin:
    """Mixed into this package's Algorithms: every `save_to_path` ends with the manifest, and every restore of a
    whole algorithm from a local folder checks it first (`check`):

    * `KappaPIDQN.from_checkpoint(path)` (the class's own) checks before anything in the folder is unpickled;
    * `Algorithm.from_checkpoint(path)` (RLlib's base class) unpickles RLlib's `class_and_ctor_args.pkl` to learn
      the class, then the check runs in `restore_from_path`, before any state file is opened;
    * `algo.restore_from_path(path)` and Tune's restores (`Algorithm.load_checkpoint`) check likewise.

    A component restore (`restore_from_path(path, component=...)`, e.g. one module's weights) and a bucket URI are
    not checked: the manifest describes a whole local checkpoint."""

    def save_to_path(self, path=None, *args, **kwargs):
        path = super().save_to_path(path, *args, **kwargs)
        write_manifest(path, self)
        return path

    @classmethod
    def from_checkpoint(cls, path, filesystem=None, *args, **kwargs):
        if _local(path, filesystem):
            check(path)
        return super().from_checkpoint(path, filesystem, *args, **kwargs)

    def restore_from_path(self, path, *args, **kwargs):
        if kwargs.get("component") is None and not args and _local(path, kwargs.get("filesystem")):
            check(path)
        return super().restore_from_path(path, *args, **kwargs)


def _local(path, filesystem=None) -> bool:
    """A path on this machine's disk: a str or PathLike without a URI scheme, read without a filesystem or
    through pyarrow's local one (what RLlib's `from_checkpoint` hands `restore_from_path` for a local path)."""
    if filesystem is not None and type(filesystem).__name__ != "LocalFileSystem":
        return False
    return isinstance(path, (str, os.PathLike)) and "://" not in str(path) and os.path.isdir(path)
