"""A trial's rows (result.json, progress.csv) as a full disk or a killed driver leaves them, read and put
right for `--resume` (kappa_rllib.tuning.repair): rows cut short dropped wherever they are, a partial last
CSV line cut, the last whole row found reading only the file's tail."""

from __future__ import annotations

from pathlib import Path

def _parses(data) -> bool:
    import json

    try:
        json.loads(data)
        return True
    except ValueError:
        return False


def _drop_bad_rows(path) -> int:
    """Rewrite result.json without the rows that are cut short; returns how many were dropped.

    A row cut short is not only ever the file's last: the driver writes rows to a staging copy that Tune
    copies onto storage, and when a trial restarts within the run (a retry) Tune first copies the storage
    file back, cut short by the full disk, and appends the next row onto its partial last line. So a bad
    line can sit mid-file, a partial row with a whole one after it: the whole one is kept (`_whole_tail`).
    Every line is parsed (~0.3 s for a 2M-step trial's 33 MB); the file is rewritten (a copy, then renamed
    into place) only when something is wrong."""
    import os

    if not path.is_file():
        return 0
    with open(path, "rb") as f:
        fixes = {index: (line, _whole_tail(line)) for index, line in enumerate(f)
                 if not (line.endswith(b"\n") and _parses(line))}
    if not fixes:
        return 0
    # a row lost: a bad line without a whole row, or one whose whole row was appended onto a partial one
    # (not a whole row that only lacked its newline)
    dropped = sum(1 for line, tail in fixes.values() if tail is None or tail != line.rstrip(b"\n") + b"\n")
    fixes = {index: tail for index, (_, tail) in fixes.items()}
    tmp = path.with_name(path.name + ".tmp")
    with open(path, "rb") as f, open(tmp, "wb") as out:
        for index, line in enumerate(f):
            fixed = fixes.get(index, line)
            if fixed is not None:
                out.write(fixed)
    os.replace(tmp, path)
    return dropped


def _whole_tail(line: bytes) -> bytes | None:
    """The whole result row a bad line ends with, with its newline: the line itself where only its
    newline is missing (the disk filled between the row and its newline), or a whole row appended onto
    a partial one; None if it holds no whole row."""
    import json

    text = line.decode(errors="replace").rstrip("\n")
    decoder = json.JSONDecoder()
    start = text.find('{"')
    while start != -1:
        try:
            row, end = decoder.raw_decode(text, start)
            if end == len(text) and isinstance(row, dict) and "training_iteration" in row:
                return (text[start:] + "\n").encode()
        except ValueError:
            pass
        start = text.find('{"', start + 1)
    return None


def _last_line(path, block: int = 1 << 20) -> bytes:
    """The file's last line (without its newline), reading back from its end a block at a time."""
    with open(path, "rb") as f:
        end = f.seek(0, 2)
        tail = b""
        while end > 0:
            start = max(0, end - block)
            f.seek(start)
            tail = f.read(end - start) + tail
            stripped = tail.rstrip(b"\n")
            if b"\n" in stripped or start == 0:
                return stripped.rsplit(b"\n", 1)[-1]
            end = start
    return b""


def _finished(path) -> bool:
    """True when the trial's last result row is whole and says `done`: a finished trial."""
    return (_last_row(path) or {}).get("done") is True


def _count_rows(path) -> int:
    """Whole lines of a (repaired) result.json: its rows."""
    if not path.is_file():
        return 0
    with open(path, "rb") as f:
        return sum(1 for line in f if line.endswith(b"\n"))


def _cut_partial_line(path, block: int = 1 << 16, results=None) -> bool:
    """Truncate `path` (a trial's progress.csv) after its last newline, if it ends in a partial line.
    Reads only the file's tail (a long trial's progress.csv runs to megabytes) unless it must count rows.

    A last line without its newline may still be a whole row: the disk filled between the row and its
    newline. With `results` (the trial's repaired result.json, a row for each CSV row), a last line that
    has the header's number of fields and brings the CSV's rows to result.json's count is kept, and its
    newline added."""
    if not path.is_file() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as f:
        f.seek(-1, 2)
        if f.read(1) == b"\n":
            return False
    if results is not None and Path(results).is_file() and _whole_csv_row(path, results):
        with open(path, "ab") as f:
            f.write(b"\n")
        return False
    with open(path, "r+b") as f:
        end = f.seek(0, 2)
        start = end
        while start > 0:  # back through the file to its last newline
            start = max(0, start - block)
            f.seek(start)
            newline = f.read(end - start).rfind(b"\n")
            if newline >= 0:
                f.truncate(start + newline + 1)
                return True
            end = start
        f.truncate(0)  # one partial line and nothing before it
    return True


def _whole_csv_row(path, results) -> bool:
    """True when `path` ends without a newline in a line that is a whole CSV row: as many fields as the
    header, the CSV's rows (header aside) as many as `results`' (result.json's), and its last field the
    value of that column in result.json's last row (a row cut inside its last field has the right number
    of fields, not the right value)."""
    import csv
    import json

    with open(path, "rb") as f:
        data = f.read()
    if data.endswith(b"\n"):
        return False
    lines = data.decode(errors="replace").split("\n")
    if len(lines) < 2 or len(lines) - 1 != _count_rows(results):
        return False
    header, last = next(csv.reader([lines[0]])), next(csv.reader([lines[-1]]), [])
    if len(last) != len(header):
        return False
    try:
        row = json.loads(_last_line(results))
    except ValueError:
        return False
    value = row
    for part in header[-1].split("/"):  # Tune's CSV flattens nested results with "/"
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return last[-1] == str(value)


def _last_row(path) -> dict | None:
    """The trial's last whole result row (result.json, repaired), or None."""
    import json

    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        row = json.loads(_last_line(path))
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def merge_staged_rows(staging, trial_dir, upto: float) -> int:
    """Appends to `trial_dir`'s result.json the rows `staging`'s result.json holds after storage's (Tune copies the
    staged file onto storage whole, so storage's rows are a prefix of the staged ones), up to the row of
    iteration `upto` (inf: all of them), and the matching rows of progress.csv where its header is the staged one's;
    copies the trial's params.json / params.pkl where storage has none. Returns the result.json rows added; 0 where
    storage's rows are no prefix of the staged ones (nothing is merged then). Each file is replaced whole (a
    temporary file renamed over it)."""
    import csv
    import io
    import json
    import os
    import shutil
    from pathlib import Path

    staging, trial_dir = Path(staging), Path(trial_dir)

    def lines(path: Path) -> list[bytes]:
        try:
            return [line for line in path.read_bytes().splitlines() if line.strip()]
        except OSError:
            return []

    def replace(path: Path, data: bytes) -> None:
        tmp = path.with_name(path.name + ".kappa-merge")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    kept, staged = lines(trial_dir / "result.json"), [line for line in lines(staging / "result.json") if _parses(line)]
    extra = []
    if staged[: len(kept)] == kept:  # by position: a stretch after a rollback repeats earlier iterations
        for line in staged[len(kept):]:
            iteration = json.loads(line).get("training_iteration", 0)
            if iteration > upto:  # the resume makes it again
                break
            extra.append(line)
    if extra:
        trial_dir.mkdir(parents=True, exist_ok=True)  # (none on storage yet: a bucket's first checkpoint cut short)
        replace(trial_dir / "result.json", b"".join(line + b"\n" for line in kept + extra))
        csv_staged, csv_kept = lines(staging / "progress.csv"), lines(trial_dir / "progress.csv")
        if csv_staged and (not csv_kept or csv_kept[0] == csv_staged[0]) and csv_staged[: len(csv_kept)] == csv_kept:
            rows = list(csv.reader(io.StringIO(b"\n".join(csv_staged).decode(errors="replace"))))
            if len(rows) == len(csv_staged):  # one record a line (no field spans lines)
                # its rows follow result.json's one for one (tracking.loggers keeps both whole), by position
                if csv_kept:
                    base, more = csv_kept, csv_staged[len(csv_kept): len(csv_kept) + len(extra)]
                else:  # storage has none yet: the header, the rows storage's result.json has, then the merged
                    base, more = csv_staged[:1], csv_staged[1: 1 + len(kept) + len(extra)]
                replace(trial_dir / "progress.csv", b"".join(line + b"\n" for line in base + more))
    for name in ("params.json", "params.pkl"):  # (no folder: nothing merged, and Tune starts the trial afresh)
        if trial_dir.is_dir() and (staging / name).is_file() and not (trial_dir / name).exists():
            shutil.copyfile(staging / name, trial_dir / name)
    return len(extra)
