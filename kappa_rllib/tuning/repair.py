"""What a full disk or a killed driver leaves in a grid's folder, and what `--resume` puts right.

Tune writes its own state in a staging folder and copies it onto the grid's folder in place: the
experiment state (experiment_state-<session>.json: each trial's status and checkpoints) and the search
algorithm's (basic-variant-state-<session>.json, a pickle: which trials it has made). A full disk cuts
either short, and then `Tuner.restore` cannot read it: it logs "Failed to restore the run state" and
*starts the grid afresh* beside the old trials. So a callback keeps the last whole copy of each (written
aside, then renamed into place), and `--resume` puts back whichever the disk cut short (`repair_state`).
"""

from __future__ import annotations

from pathlib import Path

from kappa_rllib.tuning import adopt, staging
from kappa_rllib.tuning.rows import (
    _cut_partial_line,
    _drop_bad_rows,
    _finished,
    _last_row,
    _parses,
)
from kappa_rllib.tuning.storage import POPULATION_MARKER, TMP_SUFFIX


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
BACKUP_EVERY_S = 1.0  # state_backup's look at the grid's folder


def _newest(folder, pattern):
    states = sorted(folder.glob(pattern))
    return states[-1] if states else None


def _newest_state(folder):
    return _newest(folder, TUNE_STATES[0][0])


def state_backup(folder):
    """A Tune callback keeping a whole copy of each of Tune's newest state files (TUNE_STATES) in the grid's
    (local) folder: the file's name, a newline, its bytes."""
    import os
    import time

    from ray import tune

    class TuneStateBackup(tune.Callback):
        def __init__(self):
            self.seen, self.looked = {}, 0.0

        def on_step_end(self, iteration, trials, **info):
            # Tune saves its state at most every ~10 s; a look per controller step (many a second) globs the
            # grid's folder, a folder per trial: once a second is enough
            now = time.monotonic()
            if now - self.looked < BACKUP_EVERY_S:
                return
            self.looked = now
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
       been written before the trial's last checkpoint, and name one that was deleted since, or an older one;
    4. each unfinished trial's staging folder that a killed driver left on a cluster still up merged into storage
       and deleted (`staging.drop_stale_staging`): its rows never copied onto storage are kept (all of a trial that
       finished, else up to the checkpoint it resumes from), and none reaches storage twice.

    (The copies a killed driver's upload left half-made, `<name>.kappa-tmp` (`storage.TMP_SUFFIX`, written by
    kappa_rllib.tuning.sync), are deleted: the file beside each is whole.)
    """
    for partial in [*folder.glob("*" + TMP_SUFFIX), *folder.glob("*/*" + TMP_SUFFIX)]:
        partial.unlink(missing_ok=True)
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


def _point_trials_at_newest_checkpoints(folder) -> list[str]:
    """Rewrites the newest experiment state so that every trial it does not know as finished goes on where
    its own folder says it can (Tune's own objects read and write the state: the pinned Ray's layout).

    Tune saves its state at most every ~10 s and copies a trial's rows (result.json) onto storage with it,
    while the trial writes each checkpoint straight to storage. So a driver killed, or a disk that filled,
    can leave a state that names an older checkpoint, or one deleted since (two are kept), or calls RUNNING a
    trial that finished. Each such trial, by what its folder holds:

    * its last whole row says `done`: it finished; the state says so (TERMINATED, that row its last result,
      its newest whole checkpoint its own), and Tune does not run it again;
    * else it resumes from its newest whole checkpoint that its rows reach (iteration <= its last row's), so
      the resumed rows follow on from the kept ones, and never from its final one (`done` in the manifest: the
      schedule is used up, the algorithm cannot train on); where its rows reach none (rows lost with a driver
      whose staging folder is gone, `staging.drop_stale_staging`), it starts over (`_start_over`): its rows are
      then those of its new timeline, never one with a gap;
    * a checkpoint of another trial (a PBT / PB2 exploit) that is whole stays as the state names it, and so
      does any whole one a population member's state names (its iterations go back at an exploit);
    * a trial kept as finished leaves the search state's live set too (`_forget_live`);
    * a trial a killed driver made or started after the state was saved is adopted into it first
      (kappa_rllib.tuning.adopt), and goes on as the others; a trial folder that cannot be adopted is set aside
      (`staging.set_aside_orphans`).
    """
    import json

    from ray.tune.experiment.trial import Trial

    newest = _newest_state(folder)
    if newest is None:
        return []
    state = json.loads(newest.read_text())
    population = (folder / POPULATION_MARKER).is_file()
    done, kept_finished = [], set()
    trials = [(Trial.from_json_state(row[0], stub=True), row) for row in state.get("trial_data", [])]
    write_search = None
    try:  # trials a killed driver made or started after this state was saved: named in it (kappa_rllib.tuning.adopt)
        adopted, write_search = adopt.adopt_orphans(folder, state, trials)
        done += adopted
    except Exception as e:  # noqa: BLE001 - a state this code cannot read: such folders are set aside, next
        done.append(f"could not adopt the trial folders Tune's saved state does not know ({type(e).__name__}: {e})")
    done += staging.set_aside_orphans(folder, trials)
    for trial, row in trials:
        if trial.status == Trial.TERMINATED:
            continue
        trial.restore_run_metadata(row[1])
        name = _dir_name(trial)
        if not name:  # never started as the state has it (PENDING): Tune runs it afresh, in a folder of its own
            continue
        # (a trial whose folder storage lacks, on a bucket where a killed driver cut its first checkpoint's upload
        # short: its staged rows make the folder where it finished)
        stale = staging.drop_stale_staging(trial, folder / name)
        if stale:
            done.append(f"{name}: {stale}")
        trial_dirs = [folder / name] if (folder / name).is_dir() else []
        if not trial_dirs:
            continue
        line = _repoint(trial, row, trial_dirs[0], population=population)
        if json.loads(row[0]).get("status") == Trial.TERMINATED:
            kept_finished.add(trial.trial_id)
        if line:
            trial.run_metadata._cached_json = None
            row[1] = trial.run_metadata.get_json_state()
            done.append(f"{trial_dirs[0].name}: {line}")
    if done:
        tmp = newest.with_name(newest.name + ".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(newest)
        if write_search is not None:  # after the experiment state: the search moved past trials it now holds
            write_search()
        _forget_live(folder, kept_finished)
    return done


def _dir_name(trial) -> str | None:
    """The trial's folder name in the grid's folder, as its state stores it (None where it cannot be read)."""
    try:
        return trial.storage.trial_dir_name or None
    except Exception:  # noqa: BLE001 - a state without the trial's storage settings
        return None


def _forget_live(folder, ended: set) -> None:
    """The trials `ended` out of the search state's live set. Tune saves which trials its generator has
    live with the experiment state; one kept as finished here would stay live in it for good (Tune never
    tells the generator of a trial restored as ended), and the file's shared cap would count it forever."""
    from ray import cloudpickle

    search = _newest(folder, TUNE_STATES[1][0])
    if search is None or not ended:
        return
    state = cloudpickle.loads(search.read_bytes())
    live = state.get("_live_trials") if isinstance(state, dict) else None
    if not live or not (live & ended):
        return
    state["_live_trials"] = set(live) - ended
    tmp = search.with_name(search.name + ".tmp")
    tmp.write_bytes(cloudpickle.dumps(state))
    tmp.replace(search)


def _whole_checkpoints(trial_dir) -> list[tuple[int, Path, dict]]:
    """(iteration, path, manifest) of each whole checkpoint in the trial's folder, oldest first."""
    from kappa_rllib import checkpoints

    found = []
    for path in sorted(trial_dir.glob(f"{checkpoints.PREFIX}*")):
        try:
            manifest = checkpoints.check(path)
        except checkpoints.CheckpointError:
            continue
        found.append((int(manifest.get("training_iteration", 0)), path.resolve(), manifest))
    return sorted(found, key=lambda c: (c[0], c[1].name))


def _repoint(trial, row, trial_dir, population: bool = False) -> str | None:
    """Points `trial` (restored from `row` of the state, whose row[0] it may rewrite) as
    `_point_trials_at_newest_checkpoints` says; returns what was done, or None."""
    from kappa_rllib import checkpoints

    manager = trial.run_metadata.checkpoint_manager
    named = manager.latest_checkpoint_result.checkpoint.path if manager.latest_checkpoint_result else None
    # checkpoints the state lists that are gone (deleted past num_to_keep since it was saved): Tune would try to
    # delete them again and fail (FileNotFoundError in its checkpoint manager)
    kept = [r for r in manager._checkpoint_results if r.checkpoint is not None and Path(r.checkpoint.path).exists()]
    pruned = len(kept) != len(manager._checkpoint_results)
    manager._checkpoint_results = kept
    named_path = Path(named).resolve() if named else None
    whole = _whole_checkpoints(trial_dir)
    last = _last_row(trial_dir / "result.json")
    if last is not None and last.get("done") is True:  # it finished after the state was saved
        _keep_finished(trial, row, manager, whole, last)
        return (f"finished at iteration {last.get('training_iteration')} after Tune last saved its state: kept "
                "as finished")
    # Tune's choice stands on a whole checkpoint of another trial (a PBT / PB2 exploit), or any whole one a
    # population member's state names (its iterations go back at an exploit)
    if named_path is not None and (population or named_path.parent != trial_dir.resolve()):
        try:
            checkpoints.check(named_path)
            return _pruned(pruned)
        except checkpoints.CheckpointError:
            pass
    reached = int(last.get("training_iteration", 0)) if last is not None else 0
    usable = [c for c in whole if not c[2].get("done")]
    within = [c for c in usable if c[0] <= reached]
    if usable and not within:  # its rows end before its first checkpoint: resumed there, rows would be missing
        return _start_over(manager, trial_dir, whole, reached)
    choice = within[-1] if within else None
    if choice is None:
        if whole:  # only its final checkpoint is left, and the rows that led to it were never saved
            _keep_finished(trial, row, manager, whole, {**(last or {}), "done": True})
            return (f"its schedule ended (checkpoint {whole[-1][1].name}) but its rows after iteration {reached} "
                    "were lost with the driver: kept as finished, those rows missing")
        return _pruned(pruned)
    if named_path == choice[1]:
        return _pruned(pruned)
    _point_at(manager, choice)
    return (f"resumes from {choice[1].name} (iteration {choice[0]}), its newest whole checkpoint its rows reach "
            f"(the state named {named_path.name if named_path else 'none'})")


def _start_over(manager, trial_dir, whole, reached: int) -> str:
    """The trial starts again from its first iteration: its stored rows end at iteration `reached`, before its
    first whole checkpoint (the rows in between were lost with a driver whose staging folder is gone too: a new
    cluster). Resumed from that checkpoint, its rows would miss those iterations; started over, without a
    checkpoint, Tune's loggers begin its rows afresh (storage's copy is replaced at the first sync), so storage
    holds iterations 1..T once each. The checkpoints past its rows and its rows, of the timeline it leaves, are
    moved to `.kappa_orphans/<its folder>/` (a later resume must not pick one up; kept, since a staging folder the
    repair could not read may have held the rows that reach them), and Tune's list of them emptied."""
    import shutil

    past = [path for iteration, path, _ in whole if iteration > reached]
    aside = trial_dir.parent / staging.ORPHANS / trial_dir.name
    aside.mkdir(parents=True, exist_ok=True)
    # its rows too: the new timeline's replace them (Tune's loggers start afresh without a checkpoint), and a
    # kill before Tune's first copy of those must not find the old rows in storage, spliced to new checkpoints
    for path in [*past, trial_dir / "result.json", trial_dir / "progress.csv"]:
        if path.exists():
            target = aside / path.name
            if target.is_dir():
                shutil.rmtree(target)
            path.rename(target)
    manager._checkpoint_results = []
    manager._latest_checkpoint_result = None
    return (f"its stored rows end at iteration {reached}, before its first whole checkpoint (the rows after were "
            f"lost with the driver): it starts over from iteration 1; its {len(past)} checkpoint(s) past its rows "
            f"and its rows moved to {staging.ORPHANS}/{trial_dir.name}/")


def _keep_finished(trial, row, manager, whole, last_result: dict) -> None:
    """The trial as finished in the state: TERMINATED (row[0]), `last_result` its last result, its newest whole
    checkpoint (of `whole`, if any) its latest."""
    import json

    if whole:
        _point_at(manager, whole[-1])
    # its last row carries no config (kappa_rllib.tuning.config_once): Tune reads Result.config from here
    trial.run_metadata.last_result = {**last_result, "config": last_result.get("config", trial.config)}
    trial_state = json.loads(row[0])
    trial_state["status"] = "TERMINATED"
    row[0] = json.dumps(trial_state, indent=2)


def _pruned(pruned: bool) -> str | None:
    return "checkpoints the state listed that are gone dropped from its list" if pruned else None


def _point_at(manager, checkpoint) -> None:
    """The trial's checkpoint manager with `checkpoint` ((iteration, path, manifest)) as its latest."""
    from ray.train import Checkpoint
    from ray.train._internal.session import _TrainingResult

    iteration, path, manifest = checkpoint
    metrics = {"training_iteration": iteration}  # what Trainable.restore reads back: the iteration and the clock
    if "time_total_s" in manifest:  # (checkpoints written before the manifest carried it: the clock restarts)
        metrics["time_total_s"] = manifest["time_total_s"]
    result = _TrainingResult(checkpoint=Checkpoint(str(path)), metrics=metrics)
    manager._checkpoint_results = [r for r in manager._checkpoint_results if Path(r.checkpoint.path).resolve() != path]
    manager._checkpoint_results.append(result)
    manager._latest_checkpoint_result = result


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
