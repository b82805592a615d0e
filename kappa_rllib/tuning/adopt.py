"""Trials a killed driver made after Tune last saved its state, adopted into that state by `--resume`'s repair
(kappa_rllib.tuning.repair), so that a resumed grid runs each trial once and goes on from what its folder holds.

Tune saves two files at most every ~10 s: the experiment state (each trial it knows, its status, its folder, its
checkpoints) and the search state (how many trials its generator has made). A trial's folder reaches storage
earlier, with its first checkpoint (on a cluster still up, the killed driver's staging reaches it too). So a
driver killed in between leaves, by trial:

* **started after the save** (the state holds it PENDING, without a folder): its folder is named in the state;
* **made and started after the save** (the state lacks it; the search state, saved after the experiment state,
  or before it, may or may not have made it): the trial is made again as Tune's generator made it (the same
  id, config, tag: `_replay_class`, Tune's own iterator on the stored search space), its folder named in the state,
  and the search state moved past it, so Tune does not make it a second time;
* **made, never started, lost**: a trial the search state has made that the experiment state lacks, with no
  folder, is added to the state as Tune made it (PENDING): else Tune would never run it.

The repair then treats an adopted trial as any other (`repair._repoint`): finished if its rows end in `done`,
else resumed from its newest whole checkpoint its rows reach, its staged rows merged. A folder that cannot be
matched to the trial the search makes with its id (another search space, a searcher other than Tune's grid
generator) is left to `staging.set_aside_orphans`: the trial runs again from its start.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_NAME = re.compile(r"_([0-9a-f]{5}_)(\d{5})_")  # `<trainable>_<env>_<uuid prefix><index>_<tag>_<date>`


def adopt_orphans(folder: Path, state: dict, trials: list):
    """Adopts into `state` (the newest experiment state, parsed; `trials` its (Trial, row) pairs, both appended
    to) the trials of the module's docstring; returns (a line each for the user, a function writing the newest
    search state with its generator moved on, or None). The caller writes `state` back first, then calls it: a
    search moved past trials that the stored experiment state lacks would never run them."""
    from kappa_rllib.tuning import repair, staging

    in_state = {trial.trial_id: (trial, row) for trial, row in trials}
    named = {repair._dir_name(trial) for trial, _ in trials} - {None}
    folders = {}  # trial id -> its folder, for trial folders the state does not name
    for path in sorted(folder.iterdir()):
        if path.is_dir() and not path.name.startswith(".") and path.name not in named \
                and staging._is_trial_folder(path):
            match = _NAME.search(path.name)
            if match:
                folders.setdefault(match.group(1) + match.group(2), path)
    said = []
    for trial_id, path in sorted(folders.items()):
        trial, row = in_state.get(trial_id, (None, None))
        if trial is not None and repair._dir_name(trial) is None:  # PENDING in the state, started after it
            row[0] = _row_json(trial, path.name)
            said.append(f"{path.name}: started after Tune last saved its state (then the driver was killed): "
                        "adopted, it goes on from what its folder holds")
    missing = {tid: path for tid, path in folders.items() if tid not in in_state}
    known = {tid: trial.status for tid, (trial, _) in in_state.items()}
    made_said, write_search = _made_again(folder, state, trials, missing, known)
    return said + made_said, write_search


def _row_json(trial, name: str | None = None) -> str:
    """`trial`'s row[0] in the experiment state, its folder `name` where it has one."""
    if trial.placement_group_factory is None:  # Tune's restore requires one; its add_trial computes the
        trial.create_placement_group_factory()  # trial's own from its trainable (a stub's here is a placeholder)
    if name:
        trial.relative_logdir = name
        trial.storage.trial_dir_name = name
        trial.invalidate_json_state()
    data = json.loads(trial.get_json_state()[0])
    data["stub"] = False  # the repair reads trials as stubs; Tune restores them as real trials
    return json.dumps(data, indent=2)


def _made_again(folder: Path, state: dict, trials: list, missing: dict, known: dict):
    """The trials the experiment state lacks, made again by replaying the search state's generator: those with a
    folder in `missing` (trial id -> folder), and those the search has made that have none; the search moved past
    every trial added, and past those the experiment state holds (`known`: trial id -> status) that it has not
    made (a search state older than the experiment state: a full disk cut the newer one short). Returns (lines,
    a function writing the search state, or None)."""
    from ray import cloudpickle

    from kappa_rllib.tuning import repair

    search_file = repair._newest(folder, repair.TUNE_STATES[1][0])
    if search_file is None:
        return [], None
    try:
        search = cloudpickle.loads(search_file.read_bytes())
        iterators = list(search["_iterators"])
    except Exception:  # noqa: BLE001 - another searcher, or a state cut short: set aside instead
        return [], None
    said, moved, start, additions = [], False, 0, []
    for iterator in iterators:
        if start is None or iterator.lazy_eval or iterator.num_points_to_evaluate:
            start = None  # where this generator starts counting is not known: this one and later ones left alone
            continue
        first, start = start, start + _count(iterator)
        prefix, counter = iterator.uuid_prefix, iterator.counter
        ours = {int(tid[len(prefix):]): path for tid, path in missing.items() if tid.startswith(prefix)}
        lost = [i for i in range(first, counter) if f"{prefix}{i:05d}" not in known]
        ahead = [int(tid[len(prefix):]) for tid in known if tid.startswith(prefix) and int(tid[len(prefix):]) >= counter]
        if not ours and not lost and not ahead:
            continue
        replay = _replay(uuid_prefix=prefix, num_samples=iterator.num_samples,
                         unresolved_spec=iterator.unresolved_spec,
                         constant_grid_search=iterator.constant_grid_search, start=first,
                         random_state=iterator.random_state)
        made = {}
        try:
            while replay.counter <= max([*ours, *lost, *ahead]):
                trial = next(replay)
                made[int(trial.trial_id[len(prefix):])] = trial
        except StopIteration:
            pass
        if any(i not in made or not _is_its_folder(made[i], path) for i, path in ours.items()):
            continue  # the stored search space makes other trials: none of this generator's adopted
        for index, trial in sorted(made.items()):
            if trial.trial_id in known:
                continue
            path = ours.get(index)
            additions.append((trial, [_row_json(trial, path.name if path else None),
                                      trial.run_metadata.get_json_state()]))
            said.append(f"{path.name}: made after Tune last saved its state (then the driver was killed): adopted, "
                        "it goes on from what its folder holds" if path else
                        f"trial {trial.trial_id} ({trial.experiment_tag}): made by Tune's search after its state was "
                        "last saved, never started: added to the state, it runs from its start")
        if ahead:
            said.append(f"Tune's search state is older than its experiment state: its generator moved past the "
                        f"{len(ahead)} trial(s) the experiment state holds that it had not made (else made twice)")
        if replay.counter > counter:  # the generator moves past what was made here, as Tune's own would have
            iterator.counter, iterator.variants = replay.counter, replay.variants
            iterator.num_samples_left, iterator.points_to_evaluate = replay.num_samples_left, []
            live = search.get("_live_trials")  # (Tune's next_trial holds each trial it makes live until it ends)
            if isinstance(live, set):
                live.update(trial.trial_id for index, trial in made.items() if index >= counter
                            and known.get(trial.trial_id, "PENDING") in ("PENDING", "RUNNING", "PAUSED"))
            moved = True
    for trial, row in additions:  # (all of them or, where one could not be made, none)
        state.setdefault("trial_data", []).append(row)
        trials.append((trial, row))
    if not moved:
        return said, None

    def write_search():
        tmp = search_file.with_name(search_file.name + ".tmp")
        tmp.write_bytes(cloudpickle.dumps(search))
        tmp.replace(search_file)

    return said, write_search


def _count(iterator) -> int:
    from ray.tune.search.variant_generator import _count_variants

    return _count_variants(iterator.unresolved_spec, [])


def _is_its_folder(trial, path: Path) -> bool:
    """Whether `path` is the folder Tune names for `trial` (Trial._generate_dirname: its name and tag cut to
    TUNE_MAX_LEN_IDENTIFIER, then the date it started, and a suffix where that folder existed)."""
    import os

    if trial.custom_dirname:
        return path.name == trial.custom_dirname
    stem = f"{trial}_{trial.experiment_tag}"[:int(os.environ.get("TUNE_MAX_LEN_IDENTIFIER", "130"))]
    stem = re.sub(r'[/()<>:"\\|?*]', "_", stem)
    return bool(re.fullmatch(re.escape(stem) + r"_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d(_[0-9a-f]{4})?", path.name))


def _replay_class():
    from ray.tune.experiment.config_parser import _create_trial_from_spec
    from ray.tune.search.basic_variant import _TrialIterator
    from ray.tune.search.variant_generator import _flatten_resolved_vars, format_vars

    class Replay(_TrialIterator):
        """Tune's generator of a grid's trials (its `__next__`: the same order, ids, tags and configs), making
        each trial as a stub: the trainable need not be registered in the process that repairs the folder
        (Tune computes a restored trial's resources from its trainable when it adds it)."""

        def create_trial(self, resolved_vars, spec):  # _TrialIterator.create_trial of the pinned Ray, stub=True
            trial_id = f"{self.uuid_prefix}{self.counter:05d}"
            experiment_tag = str(self.counter)
            if resolved_vars:
                experiment_tag += f"_{format_vars(resolved_vars)}"
            self.counter += 1
            return _create_trial_from_spec(spec, self.parser, evaluated_params=_flatten_resolved_vars(resolved_vars),
                                           trial_id=trial_id, experiment_tag=experiment_tag, stub=True)

    return Replay


def _replay(**kwargs):  # (the class is made where Ray is imported)
    return _replay_class()(**kwargs)
