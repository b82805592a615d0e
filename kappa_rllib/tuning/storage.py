"""Where Tune results live: a local (or NFS-mounted) folder, or a bucket URI such as s3://bucket/prefix.

On a cluster, every node writes its trials' results and checkpoints to Tune's `storage_path`, so it must be
shared: an NFS mount at the same path on every node, or a bucket URI (pyarrow's filesystems, which Tune
uses; credentials come from the nodes' environment, e.g. an instance role). `kappa-rllib report` reads a
bucket by mirroring the small result files (params.json, result.json), never the checkpoints.
"""

from __future__ import annotations

import re
from pathlib import Path

# the URI schemes of pyarrow.fs.FileSystem.from_uri (Tune's storage layer)
SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss", "file")
POPULATION_MARKER = "kappa_population.json"  # a PBT / PB2 population's experiment folder (kappa_rllib.tuning.driver)
RESULT_FILES = ("params.json", "result.json", POPULATION_MARKER)


def is_uri(storage) -> bool:
    return "://" in str(storage)


def check_uri(option: str, uri: str) -> None:
    """The URI's form only (no network call before Ray starts): a known scheme and a bucket/path."""
    match = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*)://(.+)", uri)
    if not match or match.group(1).lower() not in SCHEMES:
        raise ValueError(f"{option} {uri!r}: expected a folder or a bucket URI such as s3://BUCKET/PATH "
                         f"(schemes: {', '.join(SCHEMES)})")


def join(storage, *parts: str) -> str:
    """`storage`/parts: a URI stays a URI, a folder becomes absolute."""
    if is_uri(storage):
        return "/".join([str(storage).rstrip("/"), *parts])
    return str(Path(storage).resolve().joinpath(*parts))


def _filesystem(uri: str):
    import pyarrow.fs

    return pyarrow.fs.FileSystem.from_uri(uri)


def holds_files(path: str) -> bool:
    """Whether the folder (or URI prefix) exists and holds anything."""
    if not is_uri(path):
        folder = Path(path)
        return folder.is_dir() and any(folder.iterdir())
    import pyarrow.fs

    fs, root = _filesystem(path)
    return bool(fs.get_file_info(pyarrow.fs.FileSelector(root, allow_not_found=True)))


def write_text(folder: str, name: str, text: str) -> None:
    """Writes `folder`/`name` (a local folder, made if needed, or a bucket URI prefix)."""
    if not is_uri(folder):
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).write_text(text)
        return
    fs, root = _filesystem(folder)
    fs.create_dir(root, recursive=True)
    with fs.open_output_stream(f"{root.rstrip('/')}/{name}") as out:
        out.write(text.encode())


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
