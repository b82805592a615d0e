"""W&B's local run files read back (wandb ships no reader in Python): the records of a run file
(`wandb_records`), the rows a run's files hold (`wandb_held`, `wandb_steps`), and `HeldCache`, which keeps
what they hold beside them so that a `--resume` reads a run's files again only where one changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kappa_rllib.tracking import step_key


def wandb_records(path: Path):
    """The protobuf records of a W&B run file (`run-ID.wandb`), as far as they are whole: a 7-byte header
    (":W&B", magic, version), then LevelDB's log format (32 KiB blocks; per record a 7-byte header: CRC,
    length, type 1 full / 2 first / 3 middle / 4 last). wandb (0.31) ships no reader of its own in Python."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    if data[:4] != b":W&B":
        return
    i, buf, block = 7, b"", 32768
    while i + 7 <= len(data):
        left = block - i % block
        if left < 7:  # a block's tail too short for a header is padding
            i += left
            continue
        length, kind = int.from_bytes(data[i + 4:i + 6], "little"), data[i + 6]
        if kind == 0:  # zeros to the end of the block
            i += left
            continue
        if i + 7 + length > len(data):  # cut short (a killed writer)
            return
        chunk, i = data[i + 7:i + 7 + length], i + 7 + length
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            try:
                record.ParseFromString(buf)
            except Exception:  # noqa: BLE001 (protobuf's DecodeError): not a whole record
                return
            yield record


def wandb_held(results_folder: Path, run_id: str) -> set[tuple]:
    """(env steps, time_total_s) of each row that W&B's local files of the run `run_id` hold: every run
    folder of that id under `results_folder/wandb` (offline-run-*, or run-* online), one per driver that
    logged it. The time tells a row rerun after a rollback from the one it replaced: the kappa algorithms
    end an iteration at the same env step whichever timeline it is on.

    Reading a 2M-step trial's files takes ~0.2-0.4 s, so what they hold is kept in `HeldCache`, read again
    only where a file of the run changed."""
    return HeldCache(results_folder, run_id).held()


def _read_held(paths: list[Path]) -> set[tuple]:
    """What the W&B run files `paths` hold (`wandb_held`)."""
    key, held = step_key(), set()
    for path in paths:
        try:
            records = list(wandb_records(path))
        except OSError:  # a run folder removed meanwhile: it holds nothing
            continue
        for record in records:
            if record.WhichOneof("record_type") != "history":
                continue
            steps = total = None  # only the two keys looked at: a row has ~75 (a third of the time, not all)
            for item in record.history.item:
                name = item.key or "/".join(item.nested_key)
                if name == key:
                    steps = int(json.loads(item.value_json))
                elif name == "time_total_s":
                    total = float(json.loads(item.value_json))
            if steps is not None:
                held.add((steps, total))
    return held


class HeldCache:
    """What W&B's local files of one run hold (`wandb_held`), kept in `<results>/wandb/kappa-held/<run id>.json`
    with the files' signatures (folder, size, modification time, taken before they are read), and the last row
    of the trial's stored timeline through which a full check found nothing missing (`complete`). Any change to
    the run's files (a driver logged more, a file was cut or removed) makes it read them again. A cache file
    that cannot be read or written is no error: the files are read instead."""

    def __init__(self, results_folder: Path, run_id: str):
        self.folder, self.run_id = Path(results_folder), run_id
        self.path = self.folder / "wandb" / "kappa-held" / f"{run_id}.json"

    def _files(self) -> dict[str, list]:
        files = {}
        for path in self.folder.glob(f"wandb/*run-*-{self.run_id}/run-{self.run_id}.wandb"):
            try:
                stat = path.stat()
            except OSError:  # removed meanwhile
                continue
            files[path.parent.name] = [stat.st_size, stat.st_mtime_ns]
        return dict(sorted(files.items()))

    def _entry(self) -> tuple[dict | None, dict]:
        """The cache's entry where the run's files are as it recorded them (else None), and their signature."""
        files = self._files()
        try:
            entry = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None, files
        return (entry if isinstance(entry, dict) and entry.get("files") == files else None), files

    def _save(self, entry: dict) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.tmp{os.getpid()}")
            tmp.write_text(json.dumps(entry, separators=(",", ":")))
            tmp.replace(self.path)  # whole or not at all: a driver killed mid-write leaves the old entry
        except OSError:
            pass

    def held(self) -> set[tuple]:
        entry, files = self._entry()
        if entry is None:
            held = _read_held([self.folder / "wandb" / name / f"run-{self.run_id}.wandb" for name in files])
            entry = {"files": files, "held": sorted(held, key=lambda k: (k[0], k[1] is None, k[1] or 0.0))}
            self._save(entry)
        return {(steps, seconds) for steps, seconds in entry["held"]}

    def complete(self, last: tuple) -> bool:
        """Whether a full check found W&B holding the trial's stored timeline through its row `last` (env steps,
        time_total_s), with the run's files as they are now."""
        entry, _ = self._entry()
        return entry is not None and entry.get("complete") == list(last)

    def mark_complete(self, last: tuple) -> None:
        entry, _ = self._entry()
        if entry is not None:
            self._save({**entry, "complete": list(last)})


def wandb_steps(results_folder: Path, run_id: str) -> set[int]:
    """The env steps of the rows that W&B's local files of the run `run_id` hold (`wandb_held`)."""
    return {steps for steps, _ in wandb_held(results_folder, run_id)}
