"""`--resume`'s repair of a grid stored in a bucket (s3://, gs://, ...): the same repair as a folder's
(kappa_rllib.tuning.repair), run on a working copy of the grid's folder, then written back.

A killed driver leaves the same things beside a bucket as beside a folder: its staging folders on this node, with
rows it never copied onto storage (a finished trial's `done` among them), and trial folders Tune's saved state does
not know. Left alone, a finished trial runs again and a resumed one's rows have a gap. So, before Tune restores the
grid:

1. the grid's folder is copied into a local working copy: Tune's state files and each trial's small files whole
   (result.json, progress.csv, params); each checkpoint's manifest whole and its other files as empty (sparse)
   files of their stored sizes, enough for `checkpoints.check` to tell a whole checkpoint from a cut one without
   downloading it; `.kappa_orphans/` not at all;
2. the checkpoints Tune's newest state names are pointed at the working copy (`_map_checkpoints`);
3. `repair.repair_state` runs on the working copy, as on any folder;
4. where it changed something, the checkpoints are pointed back at the bucket, and the working copy's changes are
   written back: the files it changed or made uploaded (the rows merged from staging first), what it moved into
   `.kappa_orphans/` moved there in the bucket (copied, then deleted), Tune's newest experiment state uploaded, what
   it deleted deleted. A checkpoint's files are only ever moved, never uploaded from the working copy. The staging
   folders whose rows it merged are deleted only after that (`staging.deletions_deferred`): a repair cut short
   loses no row, and the next --resume merges them again.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from kappa_rllib import checkpoints
from kappa_rllib.tuning import staging
from kappa_rllib.tuning.staging import ORPHANS


def repair(uri: str) -> list[str]:
    """The repair of the grid at bucket `uri` (what was put right, a line each; [] where nothing was)."""
    import pyarrow.fs
    from ray.train._internal.storage import get_fs_and_path

    from kappa_rllib.tuning import repair as folder_repair

    fs, root = get_fs_and_path(uri, None)
    root = root.rstrip("/")
    infos = fs.get_file_info(pyarrow.fs.FileSelector(root, recursive=True, allow_not_found=True))
    files = [info for info in infos if info.type == pyarrow.fs.FileType.File]
    if not files:
        return []
    with tempfile.TemporaryDirectory(prefix="kappa-bucket-repair-") as tmp:
        work = Path(tmp).resolve() / Path(root).name  # the grid's own name: staging folders are found by it
        work.mkdir()
        before = _download(fs, root, files, work)
        state = folder_repair._newest_state(work)
        if state is not None:
            try:
                _map_checkpoints(state, lambda path, filesystem: _to_local(path, filesystem, fs, root, work))
            except Exception as e:  # noqa: BLE001 - a state this code cannot read: Tune restores it as it is
                return [f"could not check which checkpoint each trial resumes from ({type(e).__name__}: {e}); "
                        "the bucket is left as it was"]
        # the staging folders whose rows the repair merges stay on this node until the bucket has those rows
        with staging.deletions_deferred():
            said = folder_repair.repair_state(work)
            if not said:
                return []
            state = folder_repair._newest_state(work)
            if state is not None:
                _map_checkpoints(state, lambda path, filesystem: _to_bucket(path, filesystem, fs, root, work))
            _write_back(fs, root, work, before, state)
    return said


def _is_payload(rel: str) -> bool:
    """A checkpoint's file other than its manifest: kept as an empty file of its size in the working copy."""
    parts = rel.split("/")
    return any(p.startswith(checkpoints.PREFIX) for p in parts[:-1]) and parts[-1] != checkpoints.MANIFEST


def _download(fs, root: str, files, work: Path) -> dict[str, str | None]:
    """The working copy; returns {path relative to the grid's folder: its bytes' digest, or None for a payload}."""
    before = {}
    for info in files:
        rel = info.path[len(root) + 1:]
        if not rel or rel.split("/")[0] == ORPHANS:
            continue
        local = work / rel
        local.parent.mkdir(parents=True, exist_ok=True)
        if _is_payload(rel):
            with open(local, "wb") as f:
                f.truncate(info.size)  # sparse: no bytes on disk, its size for checkpoints.check
            before[rel] = None
            continue
        with fs.open_input_stream(info.path) as f:
            data = f.readall()
        local.write_bytes(data)
        before[rel] = _digest(data)
    return before


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _to_local(path: str, filesystem, fs, root: str, work: Path):
    if filesystem is not None and filesystem.type_name != fs.type_name:
        return None
    if path == root or path.startswith(root + "/"):
        return str(work / path[len(root) + 1:]), None
    return None


def _to_bucket(path: str, filesystem, fs, root: str, work: Path):
    if filesystem is not None and filesystem.type_name != "local":
        return None
    try:
        rel = Path(path).resolve().relative_to(work)
    except ValueError:
        return None
    return f"{root}/{rel.as_posix()}", fs


def _map_checkpoints(state_file: Path, where) -> None:
    """Rewrites, in the experiment state `state_file`, the checkpoint of each result each trial's checkpoint manager
    holds as `where(path, filesystem)` says ((path, filesystem), or None: left as it is)."""
    import json

    from ray.train import Checkpoint
    from ray.tune.experiment.trial import Trial

    state = json.loads(state_file.read_text())
    for row in state.get("trial_data", []):
        trial = Trial.from_json_state(row[0], stub=True)
        trial.restore_run_metadata(row[1])
        manager = trial.run_metadata.checkpoint_manager
        results = [*manager._checkpoint_results, manager._latest_checkpoint_result]
        changed = False
        for result in {id(r): r for r in results if r is not None and r.checkpoint is not None}.values():
            moved = where(result.checkpoint.path, result.checkpoint.filesystem)
            if moved is not None:
                result.checkpoint = Checkpoint(moved[0], filesystem=moved[1])
                changed = True
        if changed:
            trial.run_metadata._cached_json = None
            row[1] = trial.run_metadata.get_json_state()
    tmp = state_file.with_name(state_file.name + ".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(state_file)


def _write_back(fs, root: str, work: Path, before: dict, state: Path | None) -> None:
    """The working copy's changes onto the bucket: changed and new files (the rows merged from staging first),
    then moves into ORPHANS, then Tune's newest experiment state, then deletions. Cut short anywhere, the bucket
    holds whole files, and the next --resume repairs it again (staged rows are merged only past storage's)."""
    now = {p.relative_to(work).as_posix(): p for p in work.rglob("*") if p.is_file()}
    gone = [rel for rel in before if rel not in now]
    moved = [rel for rel in gone if f"{ORPHANS}/{rel}" in now]
    last = state.relative_to(work).as_posix() if state is not None else None
    changed = [rel for rel, path in now.items()
               if rel.split("/")[0] != ORPHANS and not _is_payload(rel) and not rel.endswith(".tmp")
               and before.get(rel) != _digest(path.read_bytes())]

    def upload(rel: str) -> None:
        with fs.open_output_stream(f"{root}/{rel}") as f:
            f.write(now[rel].read_bytes())

    for rel in changed:
        if rel != last:
            upload(rel)
    for rel in moved:  # server-side copies: a checkpoint's files never pass through here
        fs.copy_file(f"{root}/{rel}", f"{root}/{ORPHANS}/{rel}")
    if last in changed:
        upload(last)
    for rel in gone:
        fs.delete_file(f"{root}/{rel}")
    _drop_emptied_folders(fs, root, gone)
    shutil.rmtree(work, ignore_errors=True)


def _drop_emptied_folders(fs, root: str, gone: list[str]) -> None:
    """The folders (S3's empty "directory" markers) that held only files deleted here: gone too, deepest first, so
    that a moved trial folder leaves no empty folder of its name in the grid."""
    import pyarrow.fs

    folders = {"/".join(rel.split("/")[:depth]) for rel in gone for depth in range(1, rel.count("/") + 1)}
    for folder in sorted(folders, key=lambda f: -f.count("/")):
        path = f"{root}/{folder}"
        left = fs.get_file_info(pyarrow.fs.FileSelector(path, recursive=True, allow_not_found=True))
        if not any(info.type == pyarrow.fs.FileType.File for info in left):
            fs.delete_dir(path)
