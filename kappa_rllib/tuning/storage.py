"""Where Tune results live: a local (or NFS-mounted) folder (`file:///PATH` is one too), or a bucket URI such
as s3://bucket/prefix.

On a cluster, every node writes its trials' results and checkpoints to Tune's `storage_path`, so it must be
shared: an NFS mount at the same path on every node, or a bucket URI (pyarrow's filesystems, which Tune
uses; credentials come from the nodes' environment, e.g. an instance role). `kappa-rllib report` reads a
bucket by mirroring the small result files (params.json, result.json), never the checkpoints.

Under Ray Client (`--address ray://`) the storage is a path on the cluster, which the client may not see at
all: every check and write the driver makes there runs on the node where Tune's run runs (`on_storage`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# the URI schemes of pyarrow.fs.FileSystem.from_uri (Tune's storage layer)
SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss", "file")
POPULATION_MARKER = "kappa_population.json"  # a PBT / PB2 population's experiment folder (kappa_rllib.tuning.driver)
RESULT_FILES = ("params.json", "result.json", POPULATION_MARKER)
TMP_SUFFIX = ".kappa-tmp"  # a file's copy in storage while it is written (kappa_rllib.tuning.sync; --resume deletes it)
_FILE = re.compile(r"file://(localhost)?(?=/)", re.IGNORECASE)


def is_uri(storage) -> bool:
    """A bucket URI (s3://, gs://, ...); `file:///PATH` is a local folder, not one."""
    return "://" in str(storage) and not _FILE.match(str(storage))


def local_path(storage) -> str:
    """`storage` with a `file://` (or `file://localhost`) scheme taken off: the folder it names; anything
    else as it is."""
    return _FILE.sub("", str(storage), count=1)


def check_not_mistyped(option: str, storage: str) -> None:
    """A folder that starts like a URI of a known scheme with one slash or none (`s3:/bucket/x`, `file:/data`,
    `gs:bucket`): refused in one line, rather than written to the relative folder `./s3:/bucket/x`."""
    match = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):(/?)(?!/)", str(storage))
    if match and match.group(1).lower() in SCHEMES:
        raise ValueError(f"{option} {storage!r} looks like a mistyped URI: write {match.group(1)}://... (two "
                         "slashes; file:///PATH for a folder), or ./" + str(storage) + " for a folder of that name")


def check_uri(option: str, uri: str) -> None:
    """The URI's form only (no network call before Ray starts): a known scheme and a bucket/path."""
    match = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*)://(.+)", uri)
    if not match or match.group(1).lower() not in SCHEMES:
        raise ValueError(f"{option} {uri!r}: expected a folder or a bucket URI such as s3://BUCKET/PATH "
                         f"(schemes: {', '.join(SCHEMES)})")
    if match.group(1).lower() == "file" and not _FILE.match(uri):
        raise ValueError(f"{option} {uri!r}: a file URI names an absolute folder, file:///PATH (three slashes), "
                         "or give the folder itself")


def join(storage, *parts: str, resolve: bool = True) -> str:
    """`storage`/parts: a URI stays a URI, a folder (`file://` one too) becomes absolute (`resolve`: this
    machine's links followed; not for a path on a cluster this process does not see)."""
    if is_uri(storage):
        return "/".join([str(storage).rstrip("/"), *parts])
    folder = Path(local_path(storage))
    folder = folder.resolve() if resolve else Path(os.path.abspath(folder))
    return str(folder.joinpath(*parts))


def on_storage(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` where the storage is: under Ray Client, in a zero-CPU task on the node the client
    is served from (the head, where Tune runs each grid's driver: `ray.tune.Tuner`, `_force_on_current_node`),
    since `--storage` names a path there; here otherwise. An error `fn` raises is raised here as it was."""
    import ray

    if not ray.util.client.ray.is_connected():
        return fn(*args, **kwargs)
    from ray.air.util.node import _force_on_current_node

    task = _force_on_current_node(ray.remote(num_cpus=0, max_retries=0)(fn))
    try:
        return ray.get(task.remote(*args, **kwargs))
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, (ValueError, OSError)):
            raise cause from None
        # anything else (e.g. a kappa-rllib the head cannot import): one line naming where, not a remote traceback
        what = cause if isinstance(cause, BaseException) else e
        raise OSError(f"on the cluster's head: {type(what).__name__}: {' '.join(str(what).split())[:300]}") from None


def _filesystem(uri: str):
    import pyarrow.fs

    return pyarrow.fs.FileSystem.from_uri(uri)


def holds_files(path: str) -> bool:
    """Whether the folder (or URI prefix) exists and holds anything (a lock file alone, left by a --resume that
    refused before its run started, is nothing: kappa_rllib.tuning.busy)."""
    if not is_uri(path):
        from kappa_rllib.tuning.busy import LOCK_FILE

        folder = Path(local_path(path))
        return folder.is_dir() and any(f.name != LOCK_FILE for f in folder.iterdir())
    import pyarrow.fs

    fs, root = _filesystem(path)
    return bool(fs.get_file_info(pyarrow.fs.FileSelector(root, allow_not_found=True)))


def write_text(folder: str, name: str, text: str) -> None:
    """Writes `folder`/`name` (a local folder, made if needed, or a bucket URI prefix)."""
    if not is_uri(folder):
        Path(local_path(folder)).mkdir(parents=True, exist_ok=True)
        (Path(local_path(folder)) / name).write_text(text)
        return
    fs, root = _filesystem(folder)
    fs.create_dir(root, recursive=True)
    with fs.open_output_stream(f"{root.rstrip('/')}/{name}") as out:
        out.write(text.encode())


def result_files(folder: str, names: list[str] | None = None):
    """The result files (RESULT_FILES) under the local folder `folder`: [(path relative to it, size)], or with
    `names` (such paths), {name: its bytes}."""
    root = Path(local_path(folder))
    if names is not None:
        return {name: (root / name).read_bytes() for name in names}
    return [(str(p.relative_to(root)), p.stat().st_size) for p in sorted(root.rglob("*"))
            if p.name in RESULT_FILES and p.is_file()]


MIRROR_BATCH_BYTES = 64 << 20  # a 2M-step trial's result.json is ~33 MB: a few trials' files a transfer


def mirror_from_cluster(folder: str, local: Path) -> Path:
    """Under Ray Client: the result files under `folder`, a path on the cluster which this machine may not see,
    read on the head (`on_storage`, MIRROR_BATCH_BYTES at a time) and written to the same relative paths under
    `local`, which is made afresh (what an earlier copy left there, e.g. of a grid moved aside, would be counted
    again). OSError (one line) where Ray cannot bring them (the head's or the object store's memory)."""
    import shutil

    import ray

    try:
        listed = on_storage(result_files, folder)
        if not any(name.endswith("result.json") for name, _ in listed):
            raise ValueError(f"{folder} (on the cluster): no trial results found (no params.json + result.json)")
        fresh = local.with_name(local.name + TMP_SUFFIX)
        shutil.rmtree(fresh, ignore_errors=True)
        batch, size = [], 0
        for i, (name, nbytes) in enumerate(listed):
            batch.append(name)
            size += nbytes
            if size >= MIRROR_BATCH_BYTES or i == len(listed) - 1:
                for relative, data in on_storage(result_files, folder, batch).items():
                    (fresh / relative).parent.mkdir(parents=True, exist_ok=True)
                    (fresh / relative).write_bytes(data)
                batch, size = [], 0
    except ray.exceptions.RayError as e:
        raise OSError(f"copying the result files of {folder} from the cluster failed ({type(e).__name__}: "
                      f"{' '.join(str(e).split())[:300]})") from None
    shutil.rmtree(local, ignore_errors=True)
    fresh.rename(local)
    return local


def mirror_results(uri: str, local: Path) -> Path:
    """Copies every params.json/result.json under `uri` to the same relative paths under `local`."""
    import pyarrow.fs

    fs, root = _filesystem(uri)
    found = 0
    for info in fs.get_file_info(pyarrow.fs.FileSelector(root, recursive=True, allow_not_found=True)):
        if info.type != pyarrow.fs.FileType.File or info.base_name not in RESULT_FILES:
            continue
        target = local / Path(info.path).relative_to(root.rstrip("/") or "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        with fs.open_input_stream(info.path) as src:
            target.write_bytes(src.read())
        found += 1
    if not found:
        raise ValueError(f"{uri}: no trial results found (no params.json + result.json)")
    return local
