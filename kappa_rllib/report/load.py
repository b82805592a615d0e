"""Loading what Tune wrote: every trial folder with `params.json` and `result.json` becomes a `Run`;
the paper's own numbers from `kappa_rllib/data/paper_tables.csv`."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from kappa_rllib.report.data import Run
from kappa_rllib.variant import PHI_OPTION_DEFAULTS
from kappa_rllib.tuning.staging import ORPHANS
from kappa_rllib.versions import KEY as VERSIONS


PAPER_TABLES = Path(__file__).resolve().parents[1] / "data" / "paper_tables.csv"
_ENV_PREFIX = "kappa_rllib:"


def load_runs(root) -> list[Run]:
    """Every trial under `root` (any depth) with a params.json and a result.json; not those `--resume` set aside
    as made twice (kappa_rllib.tuning.staging.ORPHANS)."""
    runs = []
    for result_file in sorted(Path(root).rglob("result.json")):
        if ORPHANS in result_file.relative_to(root).parts:
            continue
        params_file = result_file.with_name("params.json")
        if not params_file.is_file():
            continue
        run = _load_run(params_file, result_file)
        if run is not None:
            runs.append(run)
    return runs


def _load_run(params_file: Path, result_file: Path) -> Run | None:
    params = json.loads(params_file.read_text())
    population = _population(result_file.parent.parent)
    rows = _rows(result_file, population is not None)
    if not rows:
        return None
    episode_returns, episode_steps, steps, curve, kappas, variant, evaluated = [], [], [], [], [], "plain", []
    timelines, last_timeline, versions = [], 0, []
    for i, row in enumerate(rows):
        if isinstance(row.get(VERSIONS), dict) and row[VERSIONS] not in versions:
            versions.append(row[VERSIONS])
        if row.get(_NEW_TIMELINE):
            timelines.append(i)
            last_timeline = len(episode_returns)
        evaluated.append(row.get("evaluation", {}).get("env_runners", {}).get("episode_return_mean", float("nan")))
        kappas.append(row.get("kappa", {}).get("kappa", float("nan")))
        runners = row.get("env_runners", {})
        finished = row_episode_returns(row)
        episode_returns.extend(finished)
        count = runners.get("num_env_steps_sampled_lifetime", row.get("num_env_steps_sampled_lifetime"))
        steps.append(count or 0)
        # a row that reports episodes has sampled env steps: no count (or RLlib's 0 for one it lacks) is unknown
        episode_steps.extend([count or math.nan] * len(finished))
        curve.append(runners.get("episode_return_mean", float("nan")))
        variant = {"pi": "kappa-pi", "vi": "kappa-vi"}.get(row.get("kappa", {}).get("variant"), variant)
    family = ("trpo" if "max_kl" in params else "appo" if "vtrace" in params else "ppo" if "clip_param" in params
              else "dqn")
    is_kappa = variant != "plain"
    ablations = []
    if variant == "kappa-pi":  # kappa-PI-TRPO's V_phi ablations (kappa_rllib.variant), each apart from the default
        ablations = [f"{k}={params[k]}" for k, default in PHI_OPTION_DEFAULTS.items() if params.get(k, default) != default]
    ablations += [f"{k}={params[k]}" for k, default in AUTHORS_DEFAULTS.get(family, {}).items()
                  if params.get(k, default) != default]
    sampling = _sampling(params, family)
    options = ablations + ([sampling] if sampling else [])
    variant += f" ({', '.join(options)})" if options else ""
    lambda_ = None if is_kappa else float(params.get("lambda", params.get("lambda_", 1.0)))
    return Run(
        path=str(result_file.parent),
        env=_task(params),
        family=family,
        variant=variant,
        kappa=float(params["kappa"]) if is_kappa else 1.0,
        c_fa=float(params["c_fa"]) if is_kappa else None,
        naive=bool(params.get("naive_schedule", False)) if is_kappa else False,
        gamma=float(params.get("gamma", 0.99)),
        lambda_=lambda_,
        seed=int(params.get("seed") or 0),
        seed_given=params.get("seed") is not None,
        episode_returns=[float(r) for r in episode_returns],
        episode_steps=np.asarray(episode_steps, dtype=float),
        steps=np.asarray(steps, dtype=float),
        curve=np.asarray(curve, dtype=float),
        eval_curve=np.asarray(evaluated, dtype=float) if np.isfinite(evaluated).any() else None,
        env_steps=int(steps[-1]) if steps else 0,
        done=bool(rows[-1].get("done", False)),
        kappa_path=np.asarray(kappas, dtype=float),
        population=population,
        timelines=tuple(timelines),
        last_timeline=last_timeline,
        sampling=sampling,
        versions=tuple(versions),
    )


# The TRPO family's sampling layout (RawSamplingMixin.set_raw_sampling_defaults in
# kappa_rllib/algorithms/config_mixins.py; tests/test_report.py checks they agree): a trial sampled otherwise
# is kept apart from the default cells. A trial whose params.json lacks a key (older ones) ran the default.
SAMPLING_DEFAULTS = {"trpo": {"num_envs_per_env_runner": 4}}
# The TRPO family's switches to the authors' code (TRPOConfig, KappaTRPOConfig; docs/paper-settings.md): a trial
# with any of them set is its own cell, "kappa-vi (truncation_as_terminal=True)", never averaged with the defaults.
AUTHORS_DEFAULTS = {"trpo": {"truncation_as_terminal": False, "orthogonal_init": False,
                             "copy_phi_after_first_batch": False, "kl_accept_factor": 1.0, "fvp_subsample": 1}}


def _sampling(params: dict, family: str) -> str:
    """The trial's non-default sampling settings as "key=value, ..." ("" for the default layout)."""
    defaults = SAMPLING_DEFAULTS.get(family, {})
    return ", ".join(f"{k}={params[k]}" for k, default in defaults.items() if params.get(k, default) != default)


def _task(params: dict) -> str:
    """The env id, with the env's keyword arguments where a trial gave any (`env_config`): the same id
    made otherwise (Ant-v5 without contact forces) is another task, never averaged into the id's cells."""
    env = str(params.get("env", "?")).removeprefix(_ENV_PREFIX)
    kwargs = params.get("env_config") or {}
    return f"{env} ({', '.join(f'{k}={v}' for k, v in sorted(kwargs.items()))})" if kwargs else env


_NEW_TIMELINE = "_kappa_rllib_new_timeline"  # set by _rows on the first row after a PBT / PB2 exploit
_CLOCK_TOL = 1e-4  # s: a stretch's origin clock is a difference of two float sums of the same increments


def _rows(result_file: Path, population: bool) -> list[dict]:
    """The result rows of a trial's timeline as it went: a trial resumed from a checkpoint older than
    its last result (`tune --resume` after a Ctrl-C or a crash, a retry after a failure) reports those
    iterations again, and the resumed ones replace the rows (and episodes) of the timeline that was
    rolled back. A PBT / PB2 member that goes on from another member's checkpoint (an exploit) keeps its
    rows before it (its episodes are its own, report/adaptive.py); later rollbacks stop there unless they
    go back to a checkpoint of its own from before, and the first row since is marked _NEW_TIMELINE."""
    rows, starts, stretch, since, seen = [], [], None, 0, []  # seen: origins gone on from in this timeline
    saved = None  # its checkpoints' (iteration, clock), read once a population member needs them
    config = None  # the config of the last row that carried one
    for line in result_file.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a row cut short: by a kill mid-write, or a full disk (then resumed rows follow)
        # A trial reports its whole config on a stretch's first two rows, when it changes and on its last row, and its
        # axes on the others (kappa_rllib.tuning.config_once): a row has the last whole one's, with its own axes.
        if isinstance(row.get("config"), dict):
            config = row["config"] = _merged(config, row["config"]) if config is not None else row["config"]
        elif config is not None:
            row["config"] = config
        origin = _origin(row)
        timeline = starts[-1] if starts else 0
        new = origin is not None and stretch is not None and _new_stretch(origin, row, stretch, since, rows[-1])
        if new:
            own = _own_row(origin, rows) if population else None
            if own is not None:  # its own checkpoint, its row still here (maybe before an exploit): back to it
                del rows[own + 1:]
                starts, seen = [s for s in starts if s <= own], []
            else:
                if population and saved is None:
                    saved = _checkpoint_clocks(result_file.parent)
                if population and _another_members(origin, row, rows[timeline:], seen, saved):
                    starts.append(len(rows))
                    seen = []
                else:  # the rows after its checkpoint, the stretch's first rows here or not
                    while len(rows) > timeline and rows[-1].get("training_iteration", -math.inf) > origin[0]:
                        rows.pop()
        if origin is not None and (new or stretch is None):
            seen.append(origin)
        stretch, since = (origin, row["iterations_since_restore"]) if origin is not None else (None, 0)
        timeline = starts[-1] if starts else 0
        while len(rows) > timeline and (row.get("training_iteration", math.inf)
                                        <= rows[-1].get("training_iteration", -math.inf)):
            rows.pop()
        rows.append(row)
    for start in starts:  # (a later exploit may start at the same row, once a rollback emptied a timeline)
        if start < len(rows):
            rows[start][_NEW_TIMELINE] = True
    return rows


def _merged(config: dict, over: dict) -> dict:
    """`config` with `over`'s settings, nested ones merged: a row's axes over the last whole config (a whole config
    over it gives that config); `config` itself where `over` changes nothing (the rows between share it)."""
    if all(k in config and _equal(config[k], v) for k, v in over.items()):
        return config
    out = dict(config)
    for key, value in over.items():
        old = out.get(key)
        out[key] = _merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - no bool (arrays): taken as changed
        return False


def _origin(row: dict) -> tuple[int, float] | None:
    """(iteration, Tune's clock) of the checkpoint the row's stretch of training went on from, (0, 0.0) for a
    start from scratch: Tune's Trainable restores both from the checkpoint and counts `iterations_since_restore`
    and `time_since_restore` from there, on every row. None for a row without those counters as numbers."""
    counts = row.get("training_iteration"), row.get("iterations_since_restore")
    clocks = row.get("time_total_s"), row.get("time_since_restore")
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        return None
    if not all(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) for c in clocks):
        return None
    return counts[0] - counts[1], float(clocks[0]) - float(clocks[1])


def _new_stretch(origin, row: dict, stretch, since: int, last: dict) -> bool:
    """Whether `row` starts a new stretch, restored or restarted (from another checkpoint, or from the same one
    again, its first rows lost or not), after the stretch whose last row is `last`; a row written twice does not."""
    if not _same(origin, stretch) or row["iterations_since_restore"] < since:
        return True
    return row["iterations_since_restore"] == since and row["time_total_s"] != last.get("time_total_s")


def _same(a: tuple[int, float], b: tuple[int, float]) -> bool:
    return a[0] == b[0] and math.isclose(a[1], b[1], rel_tol=1e-9, abs_tol=_CLOCK_TOL)


def _own_row(origin: tuple[int, float], rows: list[dict]) -> int | None:
    """The index of the trial's own row that `origin` is the checkpoint of (its iteration, its clock), if any."""
    for i in range(len(rows) - 1, -1, -1):
        r = rows[i]
        if r.get("training_iteration") == origin[0]:
            total = r.get("time_total_s")
            if isinstance(total, (int, float)) and _same((origin[0], float(total)), origin):
                return i
    return None


def _checkpoint_clocks(trial: Path) -> list[tuple[int, float]]:
    """(iteration, Tune's clock) of each of the trial's own checkpoints whose manifest records them."""
    from kappa_rllib.checkpoints import MANIFEST

    out = []
    for manifest in trial.glob(f"checkpoint_*/{MANIFEST}"):
        try:
            m = json.loads(manifest.read_text())
            out.append((int(m["training_iteration"]), float(m["time_total_s"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def _another_members(origin: tuple[int, float], row: dict, timeline: list[dict], seen: list, saved: list) -> bool:
    """Whether a PBT / PB2 member's new stretch, whose checkpoint is not one of its rows, went on from another
    member's checkpoint (an exploit), not from its own (a resume, a retry). Its own: a start from scratch, a
    checkpoint without Tune's clock (kappa-rllib's --resume repair wrote none before checkpoints carried it),
    one of its own checkpoints whose row Tune lost (its manifest records the clock), and a checkpoint this
    timeline went on from before with the same config (a resume before the member's first checkpoint of its
    own; also, indistinguishably, a second exploit of the same donor checkpoint that PBT's explore left as it
    was). Tune's pbt_global.txt cannot tell these apart: it logs decisions, some never applied, with the last
    results' iterations, not the checkpoints'."""
    iteration, clock = origin
    if iteration <= 0 or math.isclose(clock, 0.0, abs_tol=_CLOCK_TOL):
        return False
    if any(_same(origin, own) for own in saved):
        return False
    if any(_same(origin, before) for before in seen):
        return bool(timeline) and row.get("config") != timeline[-1].get("config")  # PBT's explore moved it
    return True


def _population(experiment: Path) -> str | None:
    """The population a trial folder's experiment is (its name), if it is one: `kappa-rllib tune`
    marks it (kappa_rllib.tuning.storage.POPULATION_MARKER); Tune's PBT / PB2 also log pbt_global.txt
    there once they have moved a member (other tools' populations)."""
    from kappa_rllib.tuning.storage import POPULATION_MARKER

    if (experiment / POPULATION_MARKER).is_file() or (experiment / "pbt_global.txt").is_file():
        return experiment.name
    return None


def load_paper_tables() -> dict:
    """{(env, row, column): (mean, ci, param, bold)} from the paper's Tables 1 and 2."""
    out = {}
    with open(PAPER_TABLES) as f:
        for r in csv.DictReader(f):
            out[(r["env"], r["row"], r["column"])] = (float(r["mean"]), float(r["ci"]), float(r["param"]), r["bold"] == "1")
    return out


def row_episode_returns(row: dict) -> list:
    """A result row's episode returns (RLlib unwraps a one-item series to the item: one episode, the number)."""
    found = row.get("env_runners", {}).get("episode_returns", [])
    return list(found) if isinstance(found, (list, tuple)) else [found]
