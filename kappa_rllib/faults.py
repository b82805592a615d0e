"""Which trial failures Tune retries: a lost node many times, an error of the trial's own code once.

`kappa-rllib tune --max-failures N` (default DEFAULT_MAX_FAILURES, -1 unlimited) is Tune's
`FailureConfig(max_failures=N)`: a failed trial restarts from its latest checkpoint, on any node. Tune
counts every failure alike, so on its own a trial with a deterministic bug (a bad setting, an exception
in its code) would restart N times, or forever with -1. RetryPolicy tells the two apart by Ray's error
type (docs/reliability.md, "Faults"):

- the trial's actor died (RayActorError: its node was lost, preempted or killed), or an object it needed
  was lost with its node: infrastructure, retried up to N times;
- anything raised by the trial's own code (a RayTaskError whose cause is not one of the above): retried
  once, for a transient cause (a full disk that was freed, a file system hiccup); if that retry fails
  again before it saves a new checkpoint, the trial stops with its error.
"""

from __future__ import annotations

from pathlib import Path

# A 10M-frame Atari trial runs ~5-8 h on a GPU. Spot/preemptible machines are interrupted at a few to
# ~10% per hour, ~0.5-0.8 losses per trial on average; P(more than 10) is below 1e-9 even at 20%/h
# (Poisson, mean 1.6). Ten keeps every such trial alive and still ends a trial whose nodes keep dying.
DEFAULT_MAX_FAILURES = 10


def is_infrastructure(error: BaseException | None) -> bool:
    """True for a lost actor, node or object (retried up to --max-failures), False for an error raised
    by the trial's own code (retried once)."""
    from ray.exceptions import NodeDiedError, ObjectLostError, RayActorError, RayTaskError

    lost = (RayActorError, NodeDiedError, ObjectLostError)
    if isinstance(error, RayTaskError):
        cause = error.cause if error.cause is not None else error
        return isinstance(cause, lost)
    return isinstance(error, lost)


def failure_line(error: BaseException) -> str:
    """A trial's error in one line: the exception it ends with (Ray's RayTaskError holds the whole
    remote traceback), e.g. `OSError: [Errno 28] No space left on device`."""
    if is_infrastructure(error):  # Ray's text runs to a paragraph: its type and first sentence
        from ray.exceptions import RayTaskError

        cause = error.cause if isinstance(error, RayTaskError) and error.cause is not None else error
        first = " ".join(str(cause).split()).split(". ")[0].rstrip(".")
        return f"{type(cause).__name__}: {first[:200]} (a lost process or node, counted by --max-failures)"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1][:300] if lines else type(error).__name__


def disk_full(error: BaseException) -> bool:
    """ENOSPC anywhere in the error: a checkpoint or result that did not fit on the storage's disk."""
    text = str(error)
    return "No space left on device" in text or "[Errno 28]" in text or "errno 28" in text.lower()


def last_error(trial) -> BaseException | None:
    """The error Tune recorded for the trial's last failure (its pickled error file), or None where that
    file cannot be read: on a full disk Tune's own write of it fails, leaving it empty. None counts as
    an error of the trial's own code (retried once): the careful reading.

    Tune writes the file in the driver's staging folder (`trial.pickled_error_file`, under
    `trial.local_path`) when the trial fails, and copies it to storage later: at `on_trial_recover` the
    storage copy (what `trial.get_pickled_error()` reads) is not there yet. So the staging file first."""
    from ray import cloudpickle

    staged = getattr(trial, "pickled_error_file", None)
    if staged and Path(staged).is_file():
        try:
            with open(staged, "rb") as f:
                return cloudpickle.load(f)
        except Exception:  # noqa: BLE001 - cut short, unpicklable: try the storage copy
            pass
    try:
        return trial.get_pickled_error()
    except Exception:  # EOFError, OSError, an unpicklable remote exception
        return None


STATE_KEY = "kappa_rllib_retry_policy"  # RetryPolicy's saved state, told apart from other callbacks'


def retry_policy(max_failures: int):
    """A Tune callback giving each trial RetryPolicy's budget (built here: Tune is imported lazily)."""
    from ray import tune

    class RetryPolicy(tune.Callback):
        """Sets each trial's `max_failures` after each failure, before Tune's next decision:
        Tune's own count of failures plus what is left of this policy's budget."""

        def __init__(self):
            self.code_errors: dict[str, int] = {}  # trial id -> errors of its own code so far
            self.retrying_code_error: set[str] = set()  # trials whose last failure was their own code's

        def _budget(self, trial) -> int:
            """Failures (Tune's count) the trial may reach and still be retried: N node losses plus
            every code error it has already been retried for and got past (a new checkpoint since)."""
            return -1 if max_failures < 0 else max_failures + self.code_errors.get(trial.trial_id, 0)

        def on_trial_recover(self, iteration, trials, trial, **info):
            if is_infrastructure(last_error(trial)):
                self.retrying_code_error.discard(trial.trial_id)
                trial.max_failures = self._budget(trial)
                return
            self.code_errors[trial.trial_id] = self.code_errors.get(trial.trial_id, 0) + 1
            self.retrying_code_error.add(trial.trial_id)
            # one more failure of any kind before the retry's next checkpoint stops the trial
            trial.max_failures = trial.run_metadata.num_failures

        # Kept with Tune's experiment state (callback-states-*.pkl), so `--resume` goes on with each
        # trial's count, as Tune goes on with its own count of failures: a fresh zero would cost a trial
        # past a code error one node loss of its budget.
        def get_state(self):
            if not (self.code_errors or self.retrying_code_error):
                return None
            return {STATE_KEY: {"code_errors": dict(self.code_errors),
                                "retrying_code_error": sorted(self.retrying_code_error)}}

        def set_state(self, state):
            mine = state.get(STATE_KEY) if isinstance(state, dict) else None
            if mine:  # Tune hands states back by the callback's index: only this policy's is taken
                self.code_errors = dict(mine["code_errors"])
                self.retrying_code_error = set(mine["retrying_code_error"])

        def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
            # a new checkpoint after the retry: the error did not come back where it was. A result
            # alone would not do: a full disk fails each save after a few results, and the retries
            # would restore the same checkpoint forever.
            if trial.trial_id in self.retrying_code_error:
                self.retrying_code_error.discard(trial.trial_id)
                trial.max_failures = self._budget(trial)

    return RetryPolicy()


# --- Tune's experiment state on a disk that fills ------------------------------------------------
# Tune writes its own state in a staging folder and copies it onto the grid's folder in place: the
# experiment state (experiment_state-<session>.json: each trial's status and checkpoints) and the search
# algorithm's (basic-variant-state-<session>.json, a pickle: which trials it has made). A full disk cuts
# either short, and then `Tuner.restore` cannot read it: it logs "Failed to restore the run state" and
# *starts the grid afresh* beside the old trials. So a callback keeps the last whole copy of each (written
# aside, then renamed into place), and `--resume` puts back whichever the disk cut short.


def _parses(data) -> bool:
    import json

    try:
        json.loads(data)
        return True
    except ValueError:
        return False


def _unpickles(data: bytes) -> bool:
    from ray import cloudpickle

    try:
        cloudpickle.loads(data)
        return True
    except Exception:  # noqa: BLE001 - cut short: UnpicklingError, EOFError, ValueError, ...
        return False


# (Tune's file pattern (newest = last by name, as Tune picks it), the whole copy kept, its check, and
# whether Tune cannot resume without it): the experiment state, the search state, and the callbacks'
# state (RetryPolicy's counts: without them the retry budgets start afresh, which is no reason to stop)
TUNE_STATES = (("experiment_state-*.json", ".kappa_rllib_experiment_state.json", _parses, True),
               ("basic-variant-state-*.json", ".kappa_rllib_search_state.pkl", _unpickles, True),
               ("callback-states-*.pkl", ".kappa_rllib_callback_states.pkl", _unpickles, False))
STATE_BACKUP = TUNE_STATES[0][1]


def _newest(folder, pattern):
    states = sorted(folder.glob(pattern))
    return states[-1] if states else None


def _newest_state(folder):
    return _newest(folder, TUNE_STATES[0][0])


def state_backup(folder):
    """A Tune callback keeping a whole copy of each of Tune's newest state files (TUNE_STATES) in the grid's
    (local) folder: the file's name, a newline, its bytes."""
    import os

    from ray import tune

    class TuneStateBackup(tune.Callback):
        def __init__(self):
            self.seen = {}

        def on_step_end(self, iteration, trials, **info):
            for pattern, backup, whole, _ in TUNE_STATES:
                newest = _newest(folder, pattern)
                if newest is None:
                    continue
                stat = newest.stat()
                if (newest.name, stat.st_mtime_ns, stat.st_size) == self.seen.get(pattern):
                    continue
                self.seen[pattern] = (newest.name, stat.st_mtime_ns, stat.st_size)
                data = newest.read_bytes()
                if not whole(data):
                    continue  # being copied, or cut short: the last whole copy stays
                tmp = folder / (backup + ".tmp")
                try:
                    tmp.write_bytes(newest.name.encode() + b"\n" + data)
                    os.replace(tmp, folder / backup)
                except OSError:  # a full disk: the previous copy stays whole
                    tmp.unlink(missing_ok=True)

    return TuneStateBackup()


def repair_state(folder) -> list[str]:
    """Before `--resume`, what a full disk may have left in a grid's folder, put right (docs/reliability.md,
    "Faults"); returns what was done, one line each, for the user:

    1. Tune's newest experiment state or search state cut short: replaced by its last whole copy
       (TUNE_STATES); ValueError (one line) if there is none, rather than let Tune start the grid afresh;
    2. each trial's result.json rows cut short, wherever they are, dropped (`_drop_bad_rows`), and a row cut
       short at the end of its progress.csv, so the resumed rows start on a line of their own;
    3. each unfinished trial pointed at its newest whole checkpoint: the state (or its whole copy) may have
       been written before the trial's last checkpoint, and name one that was deleted since, or an older one.
    """
    done = _put_back_states(folder)
    for trial_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        if _finished(trial_dir / "result.json"):
            continue  # Tune never runs a finished trial again: its rows stay as they are
        dropped = _drop_bad_rows(trial_dir / "result.json")
        if dropped:
            done.append(f"{trial_dir.name}/result.json: {dropped} row(s) cut short dropped")
        if _cut_partial_line(trial_dir / "progress.csv", results=trial_dir / "result.json"):
            done.append(f"{trial_dir.name}/progress.csv: a row cut short dropped")
    try:
        done += _point_trials_at_newest_checkpoints(folder)
    except Exception as e:  # an experiment state this code cannot read: Tune restores it as it is
        done.append(f"could not check which checkpoint each trial resumes from ({type(e).__name__}: {e})")
    return done


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
    import json

    if not path.is_file() or path.stat().st_size == 0:
        return False
    try:
        row = json.loads(_last_line(path))
    except ValueError:
        return False
    return isinstance(row, dict) and row.get("done") is True


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


def _point_trials_at_newest_checkpoints(folder) -> list[str]:
    """Rewrites the newest experiment state so that every unfinished trial restores from the newest whole
    checkpoint in its own folder (`kappa_rllib.checkpoints.latest`), where the state names one that is
    missing, not whole, or older. Tune's own objects read and write the state (the pinned Ray's layout)."""
    import json

    from ray.train import Checkpoint
    from ray.train._internal.session import _TrainingResult
    from ray.tune.experiment.trial import Trial

    from kappa_rllib import checkpoints

    newest = _newest_state(folder)
    if newest is None:
        return []
    state = json.loads(newest.read_text())
    done = []
    for row in state.get("trial_data", []):
        trial = Trial.from_json_state(row[0], stub=True)
        if trial.status == Trial.TERMINATED:
            continue
        trial.restore_run_metadata(row[1])
        manager = trial.run_metadata.checkpoint_manager
        named = manager.latest_checkpoint_result.checkpoint.path if manager.latest_checkpoint_result else None
        trial_dirs = sorted(folder.glob(f"*_{trial.trial_id}_*"))
        try:
            found = checkpoints.latest(trial_dirs[0]) if trial_dirs else None
        except checkpoints.CheckpointError:
            found = None
        if found is None or (named is not None and Path(named).resolve() == found):
            continue
        own = named is not None and Path(named).resolve().parent == found.parent
        try:
            usable = named is not None and checkpoints.check(named) is not None
        except checkpoints.CheckpointError:
            usable = False
        if usable and not (own and Path(named).name < found.name):
            continue  # a whole checkpoint of its own that is not older, or another trial's (PBT's exploit)
        manifest = checkpoints.check(found)
        iteration = manifest.get("training_iteration", 0)
        metrics = {"training_iteration": iteration}  # what Trainable.restore reads back: the iteration and the clock
        if "time_total_s" in manifest:  # (checkpoints written before the manifest carried it: the clock restarts)
            metrics["time_total_s"] = manifest["time_total_s"]
        result = _TrainingResult(checkpoint=Checkpoint(str(found)), metrics=metrics)
        manager._checkpoint_results = [r for r in manager._checkpoint_results
                                       if r.checkpoint is not None and Path(r.checkpoint.path).exists()]
        manager._checkpoint_results.append(result)
        manager._latest_checkpoint_result = result
        trial.run_metadata._cached_json = None
        row[1] = trial.run_metadata.get_json_state()
        done.append(f"{trial_dirs[0].name}: resumes from {found.name} (iteration {iteration}), its newest whole "
                    f"checkpoint (the state named {Path(named).name if named else 'none'})")
    if done:
        tmp = newest.with_name(newest.name + ".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(newest)
    return done


def _put_back_states(folder) -> list[str]:
    done = []
    for pattern, backup, whole, required in TUNE_STATES:
        newest = _newest(folder, pattern)
        if newest is None or whole(newest.read_bytes()):
            continue
        kept = folder / backup
        name, _, data = kept.read_bytes().partition(b"\n") if kept.is_file() else (b"", b"", b"")
        if not whole(data) and not required:
            newest.unlink()
            done.append(f"{newest.name} was cut short (a full disk?) and no whole copy was kept: dropped "
                        "(the retry budgets of --max-failures start afresh)")
            continue
        if not whole(data):
            raise ValueError(f"{newest} is cut short (its disk filled while Tune wrote it) and no whole copy of "
                             f"it was kept: Tune cannot resume this grid; every trial's checkpoints are intact "
                             f"under {folder}/*/checkpoint_*")
        newest.write_bytes(data)
        done.append(f"{newest.name} was cut short (a full disk?): resuming from its last whole copy "
                    f"({name.decode(errors='replace')})")
    return done
