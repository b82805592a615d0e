"""How the driver's files reach a grid's folder: whole, and only those that changed.

Tune's driver writes its files (the experiment state, the search and callback states, each trial's
params.json, result.json, progress.csv and TensorBoard events) in a staging folder on the driver and,
every few seconds, copies that whole folder onto the grid's storage folder in a background thread
(`ray.train._internal.storage._upload_to_fs_path`, called by name from Tune's `_FilesystemSyncer`,
through pyarrow's `copy_files`). Three things go wrong with that copy:

* it writes each file in place, so a driver SIGKILLed during a copy (or a disk that fills) leaves the
  file cut short in storage; when that is Tune's experiment state and no whole copy of it was ever kept
  (the grid's first seconds), `--resume` cannot go on (kappa_rllib.tuning.repair);
* Tune rewrites a staging file in place (`open(..., "w")`: its next state snapshot) or appends to it (a
  trial's next row) while the copy may be reading it;
* it copies every file at every sync, changed or not: a 2M-step trial's result.json is ~33 MB.

`install` replaces that copy, for a local (or NFS-mounted) storage folder, with `upload_folder`:

* a file is copied only when its size or modification time differ from its storage copy's (a file
  modified within the last 2 s is copied again at the next sync, whatever its stamp says: a rewrite of
  the same size within one timestamp tick would otherwise look unchanged, git's "racily clean" rule);
* into a temporary file beside it (`*.kappa-tmp`), renamed into place only when it is whole: a staging
  file that changed while it was read is not taken, except the rows files (result.json, progress.csv),
  which are only ever appended to: the bytes it had when the copy began are taken, up to their last
  newline; Tune's state files are taken only if they parse (`repair.TUNE_STATES`' checks);
* one file that cannot be copied (a full disk) does not keep the others from theirs: the first error is
  raised after every file was tried;
* a rows file never goes back to fewer rows (a prefix of its storage copy: Tune copying that copy back into
  staging on a resume or a retry, read half-way);
* the `.kappa_rllib_*` backups `repair.state_backup` writes straight into the grid's folder are left alone
  (Tune's restore brings stale copies of them into staging), and so are Tune's temporaries of its atomic
  saves (`.<id>-tmp-<name>`).

So a storage file is always some whole version of the staging file, after a kill as after a full disk.
(A power cut is another matter: nothing is fsynced.) Bucket URIs, and any filesystem but pyarrow's
`LocalFileSystem`, keep Tune's copy (an object store's upload is already all-or-nothing).

It is installed for the life of the process, from a callback's `setup` (`WholeUploads`), so that it runs
where Tune's controller runs: the driver, or under Ray Client (`--address ray://`) the head's process that
Tune starts for the run. ray[rllib] is pinned exactly; tests/test_seams.py checks the hook.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import stat
import tempfile
import threading
import time

from ray.tune import Callback

from kappa_rllib.tuning.repair import TUNE_STATES
from kappa_rllib.tuning.storage import TMP_SUFFIX

_MODULE, _NAME = "ray.train._internal.storage", "_upload_to_fs_path"
ROWS_FILES = ("result.json", "progress.csv")  # append-only: a prefix up to a newline is an earlier version
BACKUP_PREFIX = ".kappa_rllib_"  # repair.state_backup's copies, written straight to storage
RACY_NS = 2_000_000_000  # modified this recently: copied again at the next sync
TUNE_TMP = re.compile(r"\..+-tmp-.+")  # Tune's own temporaries of its atomic saves (.<uuid>-tmp-<name>)
_LOCK = threading.Lock()


def _excluded(relative: str, is_dir: bool, exclude) -> bool:
    # as Tune's `_ExcludingLocalFilesystem._should_exclude`: a pattern matches the path relative to the
    # uploaded folder, a folder also as "<path>/"
    candidates = [relative, relative + "/"] if is_dir else [relative]
    return any(fnmatch.fnmatch(c, pattern) for pattern in exclude for c in candidates)


def _whole_state(name: str, data: bytes) -> bool:
    """False for one of Tune's state files (repair.TUNE_STATES) that does not parse: a snapshot read
    while Tune rewrote it."""
    for pattern, _, whole, _ in TUNE_STATES:
        if fnmatch.fnmatch(name, pattern):
            return whole(data)
    return True


def copy_if_changed(source: str, target: str) -> bool:
    """Copies `source` onto `target` whole (a temporary file beside it, renamed into place) unless `target`
    already has its size and modification time; returns whether it copied (the module's docstring says
    which version of a file that changes meanwhile is taken)."""
    before = os.stat(source)
    try:
        have = os.stat(target)
        if have.st_size == before.st_size and have.st_mtime_ns == before.st_mtime_ns:
            return False
    except FileNotFoundError:
        have = None
    folder, name = os.path.split(target)
    os.makedirs(folder, exist_ok=True)
    with open(source, "rb") as src:
        data = _read(src, before.st_size)  # the bytes it had when the copy began
        after = os.fstat(src.fileno())
    changed = (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns)
    if name in ROWS_FILES:
        if changed and (after.st_size < before.st_size or len(data) < before.st_size):
            return False  # cut, not appended to: the next sync takes it
        data = data[:data.rfind(b"\n") + 1]  # whole rows only (a row half-flushed waits)
        if have is not None and len(data) <= have.st_size and _starts_with(target, data):
            # a prefix of what storage holds: Tune copying the storage file back into staging (a resume, a
            # retry) as this sync reads it; never put fewer rows over more. The same rows: only the stamp
            if len(data) == have.st_size == before.st_size:
                with contextlib.suppress(OSError):
                    os.utime(target, ns=(before.st_atime_ns, _stamp(before)))
            return False
    elif changed or not _whole_state(name, data):
        return False
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + name + ".", suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as out:
            _write(out, data)
        stamp = _stamp(before) if len(data) == before.st_size else before.st_mtime_ns
        with contextlib.suppress(OSError):  # (mkstemp makes it 0600; a filesystem without modes refuses)
            os.chmod(tmp, stat.S_IMODE(before.st_mode))
        with contextlib.suppress(OSError):  # without it the file is copied again at the next sync
            os.utime(tmp, ns=(before.st_atime_ns, stamp))  # what the next sync compares
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def _read(src, size: int) -> bytes:
    return src.read(size)


def _write(out, data: bytes) -> None:
    out.write(data)


def _stamp(before) -> int:
    """The stamp a whole copy gets: the source's, or 1 ns before it where the source was modified within
    RACY_NS (racily clean: the next sync copies it again)."""
    stamp = before.st_mtime_ns
    return stamp - 1 if time.time_ns() - stamp < RACY_NS else stamp


def _starts_with(path: str, data: bytes) -> bool:
    with open(path, "rb") as f:
        return f.read(len(data)) == data


def upload_folder(local_path: str, target: str, exclude=None) -> int:
    """Every file under `local_path` (less `exclude`'s patterns and the `.kappa_rllib_*` backups) onto
    `target` by `copy_if_changed`; returns how many were copied. A file that fails (OSError) does not stop
    the others: the first error is raised once every file was tried."""
    copied, first_error = 0, None
    for root, dirs, files in os.walk(local_path):
        relative_root = os.path.relpath(root, local_path)
        relative_root = "" if relative_root == "." else relative_root
        if exclude:
            dirs[:] = [d for d in dirs if not _excluded(os.path.join(relative_root, d), True, exclude)]
        for name in files:
            relative = os.path.join(relative_root, name)
            if (name.endswith(TMP_SUFFIX) or name.startswith(BACKUP_PREFIX) or TUNE_TMP.fullmatch(name)
                    or (exclude and _excluded(relative, False, exclude))):
                continue
            try:
                copied += copy_if_changed(os.path.join(root, name), os.path.join(target, relative))
            except FileNotFoundError:  # deleted from staging while the folder was walked
                continue
            except OSError as e:  # a full disk: the other files still get their turn
                first_error = first_error or e
    if first_error is not None:
        raise first_error
    return copied


def install() -> None:
    """Tune's uploads of a folder onto a local filesystem go through `upload_folder` from now on, in this
    process (idempotent)."""
    import importlib

    import pyarrow.fs

    module = importlib.import_module(_MODULE)
    with _LOCK:
        original = getattr(module, _NAME)
        if getattr(original, "_kappa_whole_uploads", False):
            return

        def _upload_to_fs_path(local_path, fs, fs_path, exclude=None):
            if not isinstance(fs, pyarrow.fs.LocalFileSystem) or not os.path.isdir(local_path):
                return original(local_path, fs, fs_path, exclude)
            upload_folder(local_path, fs_path, exclude)
            return None

        _upload_to_fs_path._kappa_whole_uploads = True
        _upload_to_fs_path._tunes_own = original
        setattr(module, _NAME, _upload_to_fs_path)


def installed() -> bool:
    import importlib

    return getattr(getattr(importlib.import_module(_MODULE), _NAME), "_kappa_whole_uploads", False)


class WholeUploads(Callback):
    """A Tune callback installing `upload_folder` where the run's controller runs (its `setup`), before
    Tune's first sync."""

    def setup(self, **info):
        install()
