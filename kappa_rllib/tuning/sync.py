"""How the driver's files reach a grid's folder: whole, and only those that changed.

Tune's driver writes its files (the experiment state, the search and callback states, each trial's
params.json, result.json, progress.csv and TensorBoard events) in a staging folder on the driver and,
every few seconds, copies that whole folder onto the grid's storage folder in a background thread
(`ray.train._internal.storage._upload_to_fs_path`, through pyarrow's `copy_files`). Three things go wrong:

* the copy writes each file in place, so a driver SIGKILLed (or a disk filled) during a copy leaves the
  file cut short in storage; when that is Tune's experiment state and no whole copy of it was ever kept
  (the grid's first seconds), `--resume` cannot go on (kappa_rllib.tuning.repair);
* Tune may rewrite a staging file (its next state snapshot, a trial's next row) while the copy reads it,
  so even without a kill a copy can land cut short;
* every file is copied at every sync, changed or not: a 2M-step trial's result.json is ~33 MB.

`whole_uploads` replaces that copy, for a local (or NFS-mounted) storage folder, with one that copies a
file only when its size or modification time differ from the storage copy's, into a temporary name beside
it (`<name>.kappa-tmp`), and renames it into place only if the staging file did not change while it was
read (else the next sync takes it). A storage file is so always some whole version of the staging file.
Bucket URIs keep Tune's copy (an object store's upload is already all-or-nothing). ray[rllib] is pinned
exactly; tests/test_seams.py checks the hook.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil

_MODULE, _NAME = "ray.train._internal.storage", "_upload_to_fs_path"
TMP_SUFFIX = ".kappa-tmp"


def _excluded(relative: str, is_dir: bool, exclude) -> bool:
    # as Tune's `_ExcludingLocalFilesystem._should_exclude`: a pattern matches the path relative to the
    # uploaded folder, a folder also as "<path>/"
    candidates = [relative, relative + "/"] if is_dir else [relative]
    return any(fnmatch.fnmatch(c, pattern) for pattern in exclude for c in candidates)


def copy_if_changed(source: str, target: str) -> bool:
    """Copies `source` onto `target` whole (a temporary copy renamed into place) unless `target` already has
    its size and modification time; returns whether it copied. A `source` that changes while it is read is
    not copied (the next sync takes it)."""
    before = os.stat(source)
    try:
        have = os.stat(target)
        if have.st_size == before.st_size and have.st_mtime_ns == before.st_mtime_ns:
            return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = target + TMP_SUFFIX
    try:
        shutil.copyfile(source, tmp)
        after = os.stat(source)
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            os.unlink(tmp)
            return False
        os.utime(tmp, ns=(before.st_atime_ns, before.st_mtime_ns))  # what the next sync compares
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def upload_folder(local_path: str, target: str, exclude=None) -> int:
    """Every file under `local_path` (less `exclude`'s patterns) onto `target` by `copy_if_changed`;
    returns how many were copied."""
    copied = 0
    for root, dirs, files in os.walk(local_path):
        relative_root = os.path.relpath(root, local_path)
        relative_root = "" if relative_root == "." else relative_root
        if exclude:
            dirs[:] = [d for d in dirs if not _excluded(os.path.join(relative_root, d), True, exclude)]
        for name in files:
            relative = os.path.join(relative_root, name)
            if name.endswith(TMP_SUFFIX) or (exclude and _excluded(relative, False, exclude)):
                continue
            try:
                copied += copy_if_changed(os.path.join(root, name), os.path.join(target, relative))
            except FileNotFoundError:  # deleted from staging while the folder was walked
                continue
    return copied


@contextlib.contextmanager
def whole_uploads():
    """While open, Tune's uploads of a folder onto a local filesystem go through `upload_folder`."""
    import importlib

    import pyarrow.fs

    module = importlib.import_module(_MODULE)
    original = getattr(module, _NAME)

    def _upload_to_fs_path(local_path, fs, fs_path, exclude=None):
        if not isinstance(fs, pyarrow.fs.LocalFileSystem) or not os.path.isdir(local_path):
            return original(local_path, fs, fs_path, exclude)
        upload_folder(local_path, fs_path, exclude)
        return None

    setattr(module, _NAME, _upload_to_fs_path)
    try:
        yield
    finally:
        setattr(module, _NAME, original)
