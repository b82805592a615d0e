"""What every throughput workload shares: peak memory of a process tree (PSS), the table rows, and
timing a kappa-rllib run to its end (and its learner alone)."""

from __future__ import annotations

import os
import threading
import time



# ----------------------------------------------------------------- memory of the process tree
def _memory_bytes(pid: int) -> int:
    """Proportional set size (shared pages split between the processes that map them, so a
    library loaded by every Ray worker counts once over the tree), else RSS."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _tree_memory_bytes(root: int) -> int:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += _memory_bytes(pid)
        todo.extend(children.get(pid, []))
    return total


class PeakRSS:
    """Samples the memory (PSS) of this process and all its descendants every 0.2 s."""

    def __enter__(self):
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_memory_bytes(os.getpid()))
            self._stop.wait(0.2)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _tree_memory_bytes(os.getpid()))


class Rows(list):
    """A workload's rows, each also printed when measured: a run cut short still shows what it got."""

    def append(self, row) -> None:
        super().append(row)
        print(f"measured: {row[0]}: {row[1]:.0f} env steps/s" + (f" ({row[4]})" if len(row) > 4 else ""), flush=True)


def run_to_done(config, learner_alone_calls: int = 0) -> tuple[float, dict]:
    """(env steps/s, last result) of a run to its end; with `learner_alone_calls`, the result also
    holds `learner_alone_rate` (see `learner_alone_rate()`; timed after the run, on its own replay)."""
    algo = config.build_algo()
    start, result = time.perf_counter(), {}
    while not result.get("done"):
        result = algo.train()
    rate = result["kappa"]["env_steps"] / (time.perf_counter() - start)
    if learner_alone_calls:
        result["learner_alone_rate"] = learner_alone_rate(algo, learner_alone_calls)
    algo.stop()
    return rate, result


def learner_alone_rate(algo, calls: int, evaluation: bool = False) -> float:
    """The env steps/s a kappa = 1 run's learner alone sustains: `calls` fused learner calls of
    `updates_per_learner_call` Q_theta updates each (replay sampling included), on the run's own
    replay, with nothing sampled. That is the ceiling of any sampling layout (overlap, more
    EnvRunners): only a faster gradient step lifts it. `evaluation`: kappa-PI's, whose evaluation
    phases make as many Q_phi updates as its improvement phases made Q_theta updates: each call is
    followed by one of as many Q_phi updates, and the two are credited with one call's env steps."""
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID

    from kappa_rllib.algorithms.kappa_dqn.learner_program import TDUpdates
    from kappa_rllib.variant import PHI_MODULE_ID

    cfg = algo.config
    k, size = cfg.updates_per_learner_call, cfg.total_train_batch_size
    # typed: a plain tuple is refused (it once counted as 0 updates)
    programs = [[TDUpdates(DEFAULT_MODULE_ID, k)]] + ([[TDUpdates(PHI_MODULE_ID, k)]] if evaluation else [])
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for program in programs:  # warm-up
        algo._learner_call(program, size)
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        for program in programs:
            algo._learner_call(program, size)
    sync()  # the clock stops once the GPU's queued gradient steps are done
    return calls * k * cfg.env_steps_per_update / (time.perf_counter() - start)


def preset_config(variant: str, kappa: float, env_id: str, total_steps: int, seed: int = 0, runners: int = 0):
    """kappa-PI/VI-DQN with the project's preset for `env_id` (what `kappa-rllib train` runs)."""
    from kappa_rllib import KappaPIDQNConfig, KappaVIDQNConfig, presets

    config = presets.apply((KappaPIDQNConfig if variant == "pi" else KappaVIDQNConfig)(),
                           presets.load(presets.preset_for(env_id, "dqn")))
    return (config.environment(env_id).training(kappa=kappa, total_env_steps=total_steps)
            .env_runners(num_env_runners=runners).debugging(seed=seed))
