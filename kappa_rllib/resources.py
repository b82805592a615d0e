"""What a run asks of Ray (CPUs, GPUs) and whether the Ray it runs on has it: one answer for `train` and `tune`.

A run (an RLlib Algorithm: a `train` run, each `tune` trial) asks Ray for its placement group:
the main process, its remote EnvRunners and learners, with their CPUs and GPUs (RLlib's own
`Algorithm.default_resource_request`). On an embedded local Ray, a run that asks for more than the machine has
would wait forever: `check_embedded` refuses it in one line before Ray starts. On a cluster (`--address`,
which may add nodes on demand) it is not refused; `WaitNotice` (train, while its EnvRunners start) and
`tuning.progress.ResourceWait` (tune, while none of the file's trials runs) print a line about every minute
while it waits, naming what it asks for and what the cluster has free.
"""

from __future__ import annotations

import sys
import threading
import time

WAIT_NOTICE_S = 60.0  # a line about every minute while a run or trials wait for resources


def asks(config, *, in_driver: bool = False) -> dict:
    """{resource: amount} one run of `config` asks Ray for (RLlib's placement group, all bundles). With
    `in_driver` (`train`: the algorithm is built in the driver's own process, not as a Ray actor), the main
    process's CPUs are not Ray's to give: only its GPUs (the local learner's) and the other bundles count."""
    request = config.algo_class.default_resource_request(config)
    bundles = [dict(b) for b in (getattr(request, "bundles", None) or [])]
    if in_driver and bundles:
        bundles[0].pop("CPU", None)
    total: dict = {}
    for bundle in bundles:
        for k, v in bundle.items():
            total[k] = total.get(k, 0.0) + float(v)
    return {k: v for k, v in total.items() if v}


def describe(resources: dict) -> str:
    """{"CPU": 41.0, "GPU": 0.5} -> "41 CPUs, 0.5 GPUs"; other resources by name."""
    parts = []
    for key in sorted(resources, key=lambda k: (k not in ("CPU", "GPU"), k)):
        value = resources[key]
        name = {"CPU": "CPU", "GPU": "GPU"}.get(key, key)
        parts.append(f"{value:g} {name}{'s' if value != 1 and key in ('CPU', 'GPU') else ''}")
    return ", ".join(parts) or "nothing"


def shortfall(need: dict, have: dict) -> dict:
    """What `need` asks for beyond `have` (per resource); empty when it fits."""
    return {k: v for k, v in need.items() if v > have.get(k, 0.0) + 1e-9}


def check_embedded(label: str, config, num_cpus: int | None, *, lower: str = "lower --num-env-runners",
                   in_driver: bool = False) -> None:
    """ValueError (one line) when one run of `config` cannot fit an embedded local Ray of `num_cpus` CPUs
    (None: this machine's) and this machine's GPUs; `lower` says how to ask for less; `in_driver`: as `asks`."""
    import os

    need = asks(config, in_driver=in_driver)
    have = {"CPU": float(num_cpus or os.cpu_count() or 1), "GPU": float(_local_gpus() if need.get("GPU") else 0)}
    short = shortfall({k: v for k, v in need.items() if k in ("CPU", "GPU")}, have)
    if short:
        have = {k: v for k, v in have.items() if k == "CPU" or k in need}
        runners = config.num_env_runners
        raise ValueError(
            f"{label} asks for {describe(need)} ({'' if in_driver else 'its main process, '}{runners} remote "
            f"EnvRunner{'s' * (runners != 1)}"
            f"{' and its learners' if config.num_learners else ''}) but this embedded Ray has {describe(have)}"
            f"{' (--num-cpus)' if num_cpus else ''}: {lower}, or run on a cluster (--address)")
    check_replay_fits_gpu(label, config, trials=not in_driver)


def replay_ring_on_gpu(config) -> int:
    """Bytes of GPU memory one run's replay ring takes (kappa-DQN's `replay_frames_on_device` resolved to a local
    GPU learner, on an env of image stacks: `replay.FrameStore`); 0 where the frames stay in host memory."""
    setting = getattr(config, "replay_frames_on_device", False)
    if setting is False or config.num_learners or not config.num_gpus_per_learner or not isinstance(config.env, str):
        return 0
    import numpy as np

    from kappa_rllib.envs import spaces_of
    from kappa_rllib.replay import FrameStore, UniformReplayBuffer

    space = spaces_of(config.env, config.env_config)[0]
    shape, dtype = getattr(space, "shape", None), getattr(space, "dtype", None)
    if shape is None or not FrameStore.applies_to(np.zeros((1,) + tuple(shape), dtype)):
        return 0
    capacity = config.replay_buffer_config.get("capacity")
    return UniformReplayBuffer.frame_ring_size(capacity) * int(np.prod(shape[:-1]))


def check_replay_fits_gpu(label: str, config, *, trials: bool = True) -> None:
    """ValueError (one line) when the replay rings of the runs sharing a GPU (with `trials`, Tune's: 1 /
    `num_gpus_per_learner` of them; else one run) need more than its free memory (the first GPU's, as `nvidia-smi`
    reads it: no CUDA context is made in this process). Nothing without a local GPU or `nvidia-smi` (the ring's own
    check says so when it is made, on the learner's GPU)."""
    need = replay_ring_on_gpu(config)
    free = _gpu_free_bytes() if need and _local_gpus() else None
    if free is None:
        return
    import math

    sharing = max(1, math.floor(1 / config.num_gpus_per_learner + 1e-9)) if trials else 1
    if need * sharing > free:
        runs = f"{sharing} runs sharing a GPU ({config.num_gpus_per_learner:g} each)" if sharing > 1 else "one run"
        raise ValueError(
            f"{label}: the replay's frame ring needs {need / 2**30:.2f} GiB of GPU memory a run, "
            f"{need * sharing / 2**30:.2f} GiB for {runs}, and the GPU has {free / 2**30:.2f} GiB free: lower "
            f"replay_buffer_config['capacity'] or set replay_frames_on_device=False (frames LZ4-compressed in host "
            f"memory)")


def _gpu_free_bytes() -> int | None:
    """The first GPU's free memory in bytes, from `nvidia-smi` (None where it cannot be read)."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=20)
        return int(out.stdout.split()[0]) * 2**20 if out.returncode == 0 else None
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def _local_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no torch CUDA: no GPUs
        return 0


def cluster_line(need: dict) -> str:
    """"the cluster has 2 CPUs free (of 2)", for what `need` names."""
    import ray

    free, total = ray.available_resources(), ray.cluster_resources()
    keys = [k for k in need] or ["CPU"]
    return "the cluster has " + ", ".join(f"{free.get(k, 0.0):g} {k} free (of {total.get(k, 0.0):g})" for k in keys)


class WaitNotice:
    """While open, prints a line every `interval_s` (a `train` run building its EnvRunners, which waits for
    its placement group): what the run asks for and what the cluster has free."""

    def __init__(self, label: str, need: dict, interval_s: float = WAIT_NOTICE_S, out=None):
        self.label, self.need, self.interval_s = label, need, interval_s
        self.out = out or sys.stderr
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kappa-rllib-wait-notice", daemon=True)
        self.lines = 0

    def _run(self):
        started = time.monotonic()
        while not self.stopped.wait(self.interval_s):
            try:
                if not _actors_waiting(self.need):
                    continue  # slow to build, not waiting for resources
                line = cluster_line(self.need)
            except Exception as e:  # noqa: BLE001 - the notice must not end the run
                line = f"the cluster's resources cannot be read ({type(e).__name__})"
            waited = time.monotonic() - started
            print(f"[{self.label}] waiting {waited:.0f} s for resources: the run asks for {describe(self.need)}; "
                  f"{line}", file=self.out, flush=True)
            self.lines += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.thread.join(timeout=5)
        return False


def _actors_waiting(need: dict) -> bool:
    """Some actor of the cluster waits to be placed (Ray's state API, with the cluster's dashboard); without
    that API, whether the cluster lacks what the run asks for."""
    import ray

    try:
        from ray.util.state import list_actors

        return bool(list_actors(filters=[("state", "=", "PENDING_CREATION")], limit=1, raise_on_missing_output=False))
    except Exception:  # noqa: BLE001 - no dashboard: the resources' view
        return bool(shortfall(need, ray.available_resources()))
