"""Before a grid file's Tune runs start (kappa_rllib.tuning.driver): a fresh run's folders hold no run, a resumed
run's grids make the trials their stored runs were started with, no other driver runs them (the lock wait,
kappa_rllib.tuning.busy), and each folder is repaired and restorable (`prepare_resume`). Every look at a folder
runs where the storage is (`storage.on_storage`: on the head under Ray Client).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kappa_rllib.tuning import busy, repair


def _ray_client() -> bool:
    import ray

    return ray.util.client.ray.is_connected()


def _holding(paths: list[str]) -> list[tuple[bool, str | None]]:
    """Whether each folder holds anything, and who runs a grid in it now (kappa_rllib.tuning.busy), if anyone."""
    from kappa_rllib.tuning import storage as stores

    return [(stores.holds_files(path), None if stores.is_uri(path) else busy.who_holds(stores.local_path(path)))
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
    # Ray Client the look is a task on the head that can hold nothing past its end (busy.who_holds_each)
    look = busy.who_holds_each if client else busy.take
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


def param_space_on_restore(grid, path) -> dict:
    """The grid's param space as the stored run has it. Tune refuses a restore whose param space has other
    keys than the run started with (tuner.pkl lists them), so a setting this version of kappa-rllib added
    since (e.g. `batches_per_iteration`) is left out: trials made from it take the setting's default, what
    the run's version ran. A stored setting this version no longer has is one clear error."""
    from ray.tune.utils import flatten_dict

    from kappa_rllib.tuning import storage as stores

    space = param_space(grid)
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


def param_space(grid):
    """The grid's config as the driver hands it to Tune: with compact result rows (config_once.COMPACT), the driver
    giving each row the grid's axes and each trial's last row its whole config."""
    from kappa_rllib.tuning.config_once import compact

    return compact(grid.config)


def count_trials(grid) -> int:
    """The trials Tune makes of the grid, counted as Tune counts them (its generator's `_total_samples`): every
    grid_search at any depth of the config, times num_samples."""
    from ray.tune.search.variant_generator import _count_variants

    space = grid.config.to_dict() if hasattr(grid.config, "to_dict") else dict(grid.config)
    return _count_variants({"config": space, "num_samples": grid.num_samples}, [])


_CHANGED = ("a changed grid cannot go on in its folder; put the file (and --seeds) back as it was, or run the "
            "changed grid in another --storage")


def check_resume(grids, storage) -> None:
    """ValueError (one line) where a grid of the file now makes other trials than its stored run under `storage`
    was started with: another number (a seed, a kappa added or taken away), or another value on an axis (seeds
    5-9 where 0-4 ran: `--seeds`). Tune would go on with the stored run's trials and ignore the file's, so an
    added trial would never run (each --resume saying it is left) and a removed one would still run. Nothing is
    written; the stored runs are read where the storage is (`storage.on_storage`)."""
    from kappa_rllib.tuning import storage as stores

    paths = [stores.join(storage, grid.name, resolve=not _ray_client()) for grid in grids]
    for grid, path, (stored, axes) in zip(grids, paths, stores.on_storage(_stored_runs, paths)):
        now = count_trials(grid)
        if isinstance(stored, int) and stored != now:
            raise ValueError(f"{path}: grid {grid.name!r} makes {now} trials in the file now, its run "
                             f"there was started with {stored}: {_CHANGED}")
        for axis, values in grid.axes().items():
            if axis in axes and list(axes[axis]) != list(values):
                raise ValueError(f"{path}: grid {grid.name!r} has {axis} {list(values)} in the file now, its run "
                                 f"there was started with {list(axes[axis])}: {_CHANGED}")


def _stored_runs(paths: list[str]) -> list[tuple]:
    """(the number of trials, {axis: its values}) each stored run at `paths` was started with (its search state's
    `_total_samples`, and the grid_search axes of its config), (None, {}) where there is none or it cannot be read
    (cut short: repair_state and Tune's restore say so)."""
    import pyarrow.fs
    from ray import cloudpickle
    from ray.train._internal.storage import get_fs_and_path

    runs = []
    for path in paths:
        fs, fs_path = get_fs_and_path(str(path), None)
        states = sorted(info.path for info in fs.get_file_info(pyarrow.fs.FileSelector(fs_path, allow_not_found=True))
                        if info.base_name.startswith("basic-variant-state-") and info.base_name.endswith(".json"))
        stored, axes = None, {}
        if states:
            try:
                with fs.open_input_file(states[-1]) as f:  # Tune's newest, as its restore picks it (by name)
                    state = cloudpickle.loads(f.readall())
                stored = state.get("_total_samples")
                for iterator in state.get("_iterators", []):
                    config = iterator.unresolved_spec.get("config", {})
                    axes.update({k: v["grid_search"] for k, v in config.items()
                                 if isinstance(v, dict) and set(v) == {"grid_search"}})
            except Exception:  # noqa: BLE001 - cut short or unreadable: repair_state and Tune's restore say so
                stored = None
        runs.append((stored, axes))
    return runs


def restorable(path) -> bool:
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


def prepare_resume(path: str) -> tuple[list[str], bool, bool]:
    """Before a grid's `--resume`, in its (local) folder `path`: the repair (`repair.repair_state`: what was put
    right, a line each), whether Tune can restore it (`restorable`), and whether it holds trial results while
    Tune cannot (no experiment state to resume them from). A bucket's grid is repaired through a working copy
    (kappa_rllib.tuning.bucket)."""
    from kappa_rllib.tuning import bucket
    from kappa_rllib.tuning import storage as stores

    local = not stores.is_uri(path)
    if local:
        repaired = repair.repair_state(Path(path)) if Path(path).is_dir() else []
    else:
        repaired = bucket.repair(path)
    can_restore = restorable(path)
    return repaired, can_restore, (not can_restore and local and any(Path(path).glob("*/result.json")))
