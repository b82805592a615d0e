"""Runs a published trial again from its own files and compares what it reports, iteration by iteration.

A trial folder written by `kappa-rllib tune` (or its slimmed copy under `docs/results/*/trials/`) holds the
trial's whole config (`params.json`) and its result rows (`result.json`). `repeat(trial, iterations)` builds the
algorithm the folder names (Tune's trial folders start with the trainable's name) from that config and trains it
for `iterations` iterations in this process, with one torch thread and no remote EnvRunner where the trial had
none, as a Tune trial of one CPU runs. Each iteration's episode returns are compared with the published row's,
bit for bit (floats as JSON wrote them).

What is exact: the same code (the trial's `kappa-rllib commit`), the same library versions (constraints.txt) and
the same kind of CPU. Another CPU or BLAS build may round a matrix product differently, and the runs part from
the first policy update on (docs/reliability.md, "Regenerating a published trial").

    kappa-rllib repeat docs/results/kvi_ablation/trials/hopper_vi_today/KappaVITRPO_Hopper-v5_..._seed=0_... \\
        --iterations 20
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

# params.json keys that are no setting of the algorithm: Tune's, and what the project's driver adds
_NOT_SETTINGS = {"__trial_info__", "compact_result_rows"}


@dataclasses.dataclass
class Repeat:
    """The outcome of `repeat`: the published and the repeated episode returns of each iteration compared."""

    trial: str
    algorithm: str
    iterations: int  # compared
    first_difference: int | None  # the first iteration whose episode returns differ (1-based), None if none
    published: list  # per iteration: the published row's episode returns
    repeated: list  # per iteration: this run's
    cpus: tuple = (None, None)  # the CPU the trial ran on, as its rows record it (None where they do not), and this

    def machines(self) -> str:
        """Where each ran, as far as the trial's rows say: "published on X, repeated on Y"."""
        published, here = self.cpus
        return (f"published on {published or 'a CPU its rows do not record'}, repeated on {here or 'an unknown CPU'}"
                + (" (the same kind)" if published and published == here else ""))

    @property
    def identical(self) -> bool:
        return self.first_difference is None


def trial_files(trial) -> tuple[Path, dict, list[dict]]:
    """(folder, params, result rows) of a trial folder; ValueError (one line) if it is not one."""
    trial = Path(trial)
    params_file, result_file = trial / "params.json", trial / "result.json"
    for f in (params_file, result_file):
        if not f.is_file():
            raise ValueError(f"{trial}: no {f.name}: not a trial folder written by kappa-rllib tune")
    rows = [json.loads(line) for line in result_file.read_text().splitlines() if line.strip()]
    return trial, json.loads(params_file.read_text()), rows


def algorithm_class(trial: Path):
    """The Algorithm a Tune trial folder names ("KappaVITRPO_Hopper-v5_...": the trainable's registered name)."""
    from kappa_rllib.algorithms import by_name

    name = trial.name.split("_", 1)[0]
    if name not in by_name():
        raise ValueError(f"{trial}: the folder names {name!r}, which is no algorithm of kappa-rllib")
    return by_name()[name]


def config_of(trial: Path, params: dict):
    """The trial's config: the algorithm's defaults updated with every setting params.json holds (what Tune handed
    the trial), except objects JSON could only write as text ("<class ...>", a module spec's repr), which keep the
    algorithm's own."""
    from kappa_rllib import envs

    config = algorithm_class(trial).get_default_config()
    defaults = config.to_dict()
    settings = {key: _as_saved(value, defaults.get(key)) for key, value in params.items() if key not in _NOT_SETTINGS}
    if isinstance(settings.get("env"), str):  # `kappa_rllib:ALE/...`, `kappa_rllib:MinAtar/...`: registered with Tune
        settings["env"] = envs.rllib_env_name(settings["env"])  # in this process, as `.environment()` does
    return config.update_from_dict(settings)


def _as_saved(value, default):
    """`value` as params.json has it, with each object JSON wrote as its repr (a str where the default is no str
    and not None: a class, a function, a module spec) put back to the default's, nested dicts included."""
    if isinstance(value, str) and default is not None and not isinstance(default, str):
        return default
    if isinstance(value, dict) and isinstance(default, dict):
        return {k: _as_saved(v, default.get(k)) for k, v in value.items()}
    return value


def episode_returns(row: dict) -> list:
    """The row's episode returns, as `report` reads them (RLlib writes an iteration's one episode as the number)."""
    from kappa_rllib.report.load import row_episode_returns

    return row_episode_returns(row)


def check(trial, iterations: int) -> tuple[Path, dict, list[dict]]:
    """`trial_files`, with the algorithm it names and the iterations asked for checked: ValueError (one line)."""
    trial, params, rows = trial_files(trial)
    algorithm_class(trial)
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    first = _first_stretch(rows)
    if len(first) < iterations:
        raise ValueError(f"{trial}: its rows hold iterations 1-{len(first)} in one stretch, fewer than the "
                         f"{iterations} asked for")
    if not any(episode_returns(r) for r in first[:iterations]):
        raise ValueError(f"{trial}: no episode ended in its first {iterations} iterations, so there is nothing to "
                         "compare: ask for more --iterations")
    return trial, params, first


def _first_stretch(rows: list[dict]) -> list[dict]:
    """The rows of iterations 1, 2, ... in order, up to the first row that is not the next one (a resume from a
    checkpoint reports earlier iterations again: what follows is another stretch)."""
    first = []
    for row in rows:
        if row.get("training_iteration") != len(first) + 1:
            break
        first.append(row)
    return first


def repeat(trial, iterations: int, torch_threads: int = 1) -> Repeat:
    """Trains the trial's algorithm again for `iterations` iterations and compares each one's episode returns."""
    import torch

    trial, params, rows = check(trial, iterations)
    published = [episode_returns(r) for r in rows[:iterations]]
    torch.set_num_threads(torch_threads)
    algo = config_of(trial, params).build_algo()
    repeated, first = [], None
    try:
        for i in range(iterations):
            repeated.append(episode_returns(algo.train()))
            if first is None and repeated[-1] != published[i]:
                first = i + 1
    finally:
        algo.stop()
    from kappa_rllib import versions

    recorded = next((r[versions.KEY] for r in rows if isinstance(r.get(versions.KEY), dict)), {})
    return Repeat(str(trial), type(algo).__name__, iterations, first, published, repeated,
                  cpus=(recorded.get(versions.CPU), versions.cpu()))
