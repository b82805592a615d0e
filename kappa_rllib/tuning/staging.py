"""What a killed driver leaves beside Tune's saved state in a grid's folder, put right by `--resume`'s repair
(kappa_rllib.tuning.repair, which calls these for each trial and each grid folder):

* its staging folders on this node (`drop_stale_staging`): the rows it wrote but never copied onto storage,
  merged into storage (all of a finished trial's, else up to the checkpoint the trial resumes from), then deleted;
* trial folders the saved state does not know (`set_aside_orphans`): moved to `ORPHANS`, so that a grid holds
  each trial once.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from kappa_rllib.tuning.rows import _count_rows, _finished, merge_staged_rows

ORPHANS = ".kappa_orphans"  # where `_set_aside_orphans` moves trial folders the state does not know
_DEFERRED: list | None = None  # staging folders to delete once `deletions_deferred`'s block has ended


@contextlib.contextmanager
def deletions_deferred():
    """The staging folders this module would delete, deleted only when the block ends without an error: a bucket's
    repair (kappa_rllib.tuning.bucket) merges staged rows into a working copy, so they stay on this node until that
    copy is written back, and a repair cut short merges them again on the next --resume."""
    global _DEFERRED
    outer, _DEFERRED = _DEFERRED, []
    try:
        yield
        for path in _DEFERRED:
            shutil.rmtree(path, ignore_errors=True)
    finally:
        _DEFERRED = outer


def _delete(path) -> None:
    if _DEFERRED is not None:
        _DEFERRED.append(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def set_aside_orphans(folder, trials) -> list[str]:
    """Moves the trial folders of `folder` that Tune's saved state does not hold as a trial's folder into
    `folder/.kappa_orphans/`, and deletes what killed drivers staged of them on this node, where Tune will make
    the trial again; returns a line each.

    Tune saves its state at most every ~10 s (longer where a save is slow), while a new trial's folder reaches
    storage with its first checkpoint (and a cluster still up copies the killed driver's staging of it at the
    first sync). A driver killed in between leaves a trial folder its state does not know: either a trial the
    state lacks, which the resumed search makes again, or one the state holds as not yet started (PENDING, no
    folder), which Tune starts afresh; either way under a new folder name, so the grid would hold it twice (one
    seed counted twice by `report`). Set aside, out of `report`'s reach (kappa_rllib.report.load skips the
    folder), the trial runs once more from its start: the work lost is what it did since the state's last save.

    A folder of a trial that the state lacks but Tune's search state has already made (the two states saved at
    different moments) is left where it is, with a line: Tune will not run that trial again (`_made_by_search`)."""

    from kappa_rllib.tuning import repair

    in_state = {trial.trial_id: repair._dir_name(trial) for trial, _ in trials}
    named = {name for name in in_state.values() if name}
    said, aside = [], folder / ORPHANS
    own = next((trial for trial, _ in trials), None)
    for path in sorted(folder.iterdir()):
        if not path.is_dir() or path.name.startswith(".") or path.name in named or not _is_trial_folder(path):
            continue
        trial_id = next((tid for tid in in_state if f"_{tid}_" in path.name), None)
        if trial_id is None:  # a trial the state lacks
            made = _made_by_search(folder, path.name)
            if made is not False:
                said.append(f"{path.name}: a trial folder Tune's saved state does not know, "
                            + ("and its search has made that trial already: Tune will not run it; left in place"
                               if made else "and the search state cannot be read: left in place"))
                continue
        aside.mkdir(exist_ok=True)
        target = aside / path.name
        if target.exists():
            shutil.rmtree(target)
        path.rename(target)
        for staged in _staged_copies(own, folder.name, path.name):
            _delete(staged)
        said.append(f"{path.name}: a trial folder Tune's saved state does not know (made after its last save, "
                    f"then the driver was killed) moved to {ORPHANS}/: the trial runs again from its start")
    return said


def _is_trial_folder(path: Path) -> bool:
    return (path / "params.json").exists() or (path / "result.json").exists() or any(path.glob("checkpoint_*"))


def _made_by_search(folder, name: str) -> bool | None:
    """Whether the trial of folder `name` (`<trainable>_<trial id>_<tag>...`) has been made by Tune's search as its
    newest saved state has it: a trial id is `<prefix><index, 5 digits>`, made while the index is below the count
    of its variant iterator. None where that state cannot be read."""
    import re

    from ray import cloudpickle

    from kappa_rllib.tuning import repair

    search = repair._newest(folder, repair.TUNE_STATES[1][0])
    if search is None:
        return None
    try:
        state = cloudpickle.loads(search.read_bytes())
        iterators = [(str(it.uuid_prefix), int(it.counter)) for it in state["_iterators"]]
    except Exception:  # noqa: BLE001 - another searcher, or a state cut short
        return None
    for prefix, counter in iterators:
        match = re.search(f"_{re.escape(prefix)}(\\d{{5}})_", name)
        if match:
            return int(match.group(1)) < counter
    return False


def drop_stale_staging(trial, trial_dir) -> str | None:
    """Merges the staging folders that killed drivers left on this node for an unfinished `trial` (its files as
    such a driver wrote them before copying them onto `trial_dir`, the storage) into storage, then deletes them;
    returns what it did, for the user, or None.

    Tune keeps a trial's staging folder under `<Ray session>/artifacts/<the run's start time>/...`. Two ways a
    resume meets a killed driver's folder again:

    * on a cluster still up (through Ray Client, or `ray job submit`), in the same Ray session: its first sync would
      copy that folder's rows, written after the last copy, onto storage whole, past the checkpoint the trial
      resumes from (a row twice, `done` twice);
    * on a machine whose Ray was stopped with the driver (a laptop's `kappa-rllib tune`, killed), in an older
      session folder beside this one: the rows since Tune's last copy onto storage are only there, while the
      checkpoints went straight to storage. Left there, the trial would resume from a checkpoint its stored rows
      do not reach.

    Tune writes a trial's row (its loggers' `on_trial_result`) before it asks for that iteration's checkpoint, so
    a killed driver's staged rows reach each checkpoint storage holds. So the rows are merged here, where they are
    known: all of them for a trial whose staged rows end in `done` (it finished; storage may hold none of its rows
    yet, then its params too), else those up to its newest whole checkpoint, the one it resumes from (`_repoint`,
    next, finds its rows reach it); each folder is merged oldest first, then deleted, and the resume goes on from
    storage (Tune copies storage's rows back into staging as the trial starts). Needs Ray (the session); runs
    where the driver does."""

    import ray

    from kappa_rllib.tuning import repair

    if not ray.is_initialized():
        return None
    said, finished_any = [], False
    for staging in _staging_folders(trial, trial_dir):
        finished = _finished(staging / "result.json")
        whole = repair._whole_checkpoints(trial_dir)
        upto = float("inf") if finished else (whole[-1][0] if whole else 0)
        merged = merge_staged_rows(staging, trial_dir, upto)
        rows_there, rows_kept = _count_rows(staging / "result.json"), _count_rows(trial_dir / "result.json")
        _delete(staging)
        if merged:
            said.append(f"{merged} row(s) the killed driver wrote but never copied onto storage merged into it "
                        f"({'the trial finished' if finished else f'up to its checkpoint at iteration {upto}'})")
        if rows_there > rows_kept:
            said.append(f"{rows_there - rows_kept} row(s) past its checkpoint dropped: the trial makes them again")
        if staging.exists() and _DEFERRED is None:
            said.append(f"the killed driver's staging folder {staging} could not be deleted: its rows may reach "
                        "storage")
        finished_any = finished_any or finished
        if finished_any:
            break  # its rows are whole in storage: an older folder has nothing to add
    return "; ".join(said) or None


def _staging_folders(trial, trial_dir) -> list[Path]:
    """The staging folders of `trial` on this node, oldest first: its own in this Ray session (`trial.local_path`)
    and the same trial's in the other sessions of this node's Ray temp folder (`_staged_copies`); never storage or
    a folder inside it."""
    try:
        own = Path(trial.local_path).resolve()
    except Exception:  # noqa: BLE001 - a state without the trial's storage settings: nothing to look at
        return []
    found = {own} if own.is_dir() else set()
    found.update(_staged_copies(trial, own.parent.parent.name, own.name))
    stored = trial_dir.resolve()
    found = [p for p in found if p != stored and stored not in p.parents]

    def age(path: Path) -> float:
        try:
            return (path / "result.json").stat().st_mtime
        except OSError:
            return path.stat().st_mtime if path.exists() else 0.0

    return sorted(found, key=lambda p: (age(p), p != own))


def _staged_copies(trial, grid: str, name: str) -> set[Path]:
    """The folders `<temp>/session_*/artifacts/<a run's start time>/<grid>/driver_artifacts/<name>` on this node,
    `<temp>` the Ray temp folder `trial`'s staging path (`trial.local_path`, `<temp>/<session>/artifacts/<start
    time>/<grid>/driver_artifacts/<its folder>`) is in; session_latest (a link) is not followed."""
    try:
        own = Path(trial.local_path).resolve()
    except Exception:  # noqa: BLE001 - a state without the trial's storage settings: nothing to look at
        return set()
    parts = own.parts
    if len(parts) < 7 or parts[-5] != "artifacts" or parts[-2] != "driver_artifacts":
        return set()
    try:
        return {p.resolve() for p in own.parents[5].glob(f"session_*/artifacts/*/{grid}/driver_artifacts/{name}")
                if not p.parents[4].is_symlink() and p.is_dir()}
    except OSError:
        return set()
