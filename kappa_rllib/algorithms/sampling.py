"""Sampling and weight syncs shared by every algorithm here (kappa or not)."""

from __future__ import annotations

from dataclasses import dataclass, field

import ray
from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, WEIGHTS_SEQ_NO


def sample_env_steps(algorithm, num_steps: int, global_env_steps: int | None = None) -> list[dict]:
    """Samples exactly `num_steps` env steps with exploration; returns the EnvRunners' segments
    (`kappa_rllib.env_runner`).

    With n remote EnvRunners the steps are split as evenly as possible (the first
    num_steps mod n runners take one more). `global_env_steps` (env steps sampled so far, all
    runners) sets the epsilon schedule's t. EnvRunner metrics go into `env_runners/...`.
    """
    group = algorithm.env_runner_group
    start = 0 if global_env_steps is None else global_env_steps
    if group.num_remote_workers() == 0:
        results = [_sample_one(group.local_env_runner, num_steps, start)]
    else:
        ids, funcs = _remote_shares(algorithm, num_steps, start)
        results = group.foreach_env_runner(funcs, remote_worker_ids=ids, local_env_runner=False)
    return _segments_and_metrics(algorithm, results)


def _segments_and_metrics(algorithm, results) -> list[dict]:
    """The runners' (segments, metrics) pairs: metrics into `env_runners/...`, segments returned."""
    algorithm.metrics.aggregate([m for _, m in results], key=ENV_RUNNER_RESULTS)
    return [seg for segs, _ in results for seg in segs]


_ASYNC_TAG = "kappa_rllib_sample"


@dataclass
class SamplingState:
    """What these functions keep on an algorithm between calls (`algorithm.sampling_state`)."""

    weights_version: int = 0  # of the acting weights; 0: those every EnvRunner was built with
    weights_state: dict | None = None  # the acting module's state, read from the learners once per version
    weights_ref: "ray.ObjectRef | None" = None  # that state in the object store, put once per version
    env_runner_pids: dict = field(default_factory=dict)  # remote EnvRunner index -> its process id
    env_runner_restarts: int = 0  # process changes seen (report_runtime)


def sampling_state(algorithm) -> SamplingState:
    """The algorithm's SamplingState, made on first use (RLlib's Algorithm.setup knows nothing of it)."""
    state = getattr(algorithm, "sampling_state", None)
    if state is None:
        state = algorithm.sampling_state = SamplingState()
    return state


def _remote_shares(algorithm, num_steps: int, start: int):
    """Each healthy remote EnvRunner's share of `num_steps` and the call that samples it. The
    call carries the acting weights (a reference, put once per version), so a runner always
    acts with the weights of the request it serves: no separate weight sync can be dropped or
    overtaken while a sampling request is in flight."""
    group = algorithm.env_runner_group
    ids = list(group.healthy_worker_ids())  # a restarting runner's share goes to the others
    if not ids:
        raise RuntimeError("no healthy EnvRunner to sample from")
    base, extra = divmod(num_steps, len(ids))
    shares = [base + (i < extra) for i in range(len(ids))]
    offsets = [start + sum(shares[:i]) for i in range(len(ids))]
    version, ref = _acting_weights(algorithm)
    return ids, [lambda er, n=n, o=o: _sample_with_weights(er, n, o, version, ref) for n, o in zip(shares, offsets)]


def _acting_weights(algorithm) -> tuple[int, "ray.ObjectRef | None"]:
    """(version, object ref) of the acting module's weights; version 0 (no ref) = the weights
    every EnvRunner was built with. The learner's state is read and put once per version."""
    state = sampling_state(algorithm)
    if state.weights_version and state.weights_ref is None:
        state.weights_ref = ray.put(state.weights_state)
    return state.weights_version, state.weights_ref


def _acting_state(algorithm) -> dict:
    """The acting (inference-only) module's state from the learners, as `EnvRunner.set_state`
    takes it (what RLlib's `EnvRunnerGroup.sync_weights` sends)."""
    state = algorithm.learner_group.get_state(
        components=[f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}/{DEFAULT_MODULE_ID}"], inference_only=True,
    )[COMPONENT_LEARNER]
    return {k: v for k, v in state.items() if k in (COMPONENT_RL_MODULE, WEIGHTS_SEQ_NO)}


def _sample_with_weights(env_runner, num_steps: int, global_env_steps: int, version: int, ref):
    if version and getattr(env_runner, "_kappa_weights_version", 0) != version:
        env_runner.set_state(ray.get(ref))
        env_runner._kappa_weights_version = version
    return _sample_one(env_runner, num_steps, global_env_steps)


def submit_env_steps(algorithm, num_steps: int, global_env_steps: int) -> bool:
    """Starts sampling `num_steps` env steps on the remote EnvRunners and returns at once (the
    runners keep their current weights for it); `collect_env_steps` waits for the segments.

    Returns False, with nothing left in flight, when RLlib did not send every runner its share (a
    runner found unhealthy as the call went out, or at its limit of requests in flight): collecting
    the others would give a short batch, so the caller samples the steps again, synchronously."""
    group = algorithm.env_runner_group
    ids, funcs = _remote_shares(algorithm, num_steps, global_env_steps)
    sent = group.foreach_env_runner_async(funcs, tag=_ASYNC_TAG, remote_worker_ids=ids)
    if sent != len(ids):
        drop_env_steps(algorithm)
        return False
    return True


def collect_env_steps(algorithm) -> list[dict]:
    """The segments of the sampling started by `submit_env_steps` (waits for all runners)."""
    ready = algorithm.env_runner_group.fetch_ready_async_reqs(tags=_ASYNC_TAG, timeout_seconds=None)
    return _segments_and_metrics(algorithm, [r for _, r in ready])


def drop_env_steps(algorithm) -> None:
    """Waits for the sampling started by `submit_env_steps` and discards it, metrics included."""
    algorithm.env_runner_group.fetch_ready_async_reqs(tags=_ASYNC_TAG, timeout_seconds=None)


def _sample_one(env_runner, num_steps: int, global_env_steps: int):
    if num_steps == 0:
        return [], env_runner.get_metrics()
    return env_runner.sample(num_timesteps=num_steps, explore=True, global_env_steps=global_env_steps), \
        env_runner.get_metrics()


def sync_env_runner_weights(algorithm) -> None:
    """Call after the learner changed the acting module: the local EnvRunner takes the new
    (inference-only) weights now; remote EnvRunners take them with their next sampling request
    (`_remote_shares`), one object-store put for all of them."""
    state = sampling_state(algorithm)
    state.weights_version += 1
    state.weights_state = _acting_state(algorithm)  # read from the learners once
    state.weights_ref = None
    local = algorithm.env_runner_group.local_env_runner
    if local is not None:
        local.set_state(state.weights_state)


def _process_id(env_runner):
    import os

    return env_runner.worker_index, os.getpid(), ray.get_runtime_context().get_node_id()


def report_runtime(algorithm, result: dict) -> None:
    """Where and how the run is running: adds `node_id`, `env_runner_restarts`, `healthy_env_runners`
    and `env_runner_node_ids` (the Ray nodes of the remote EnvRunners, comma-separated) to a result.

    `node_id` is the Ray node this algorithm (a Tune trial's actor, or the driver) runs on: with several
    nodes on one host, Tune's `hostname`/`node_ip` cannot tell them apart.

    A killed remote EnvRunner is often restarted by Ray itself (actor restarts) before RLlib's
    health probe notices, so restarts are counted here as changes of a runner's process id.
    """
    group = algorithm.env_runner_group
    state = sampling_state(algorithm)
    seen, restarts = state.env_runner_pids, state.env_runner_restarts
    healthy, nodes = 0, set()
    if group is not None and group.num_remote_env_runners() > 0:
        for index, pid, node_id in group.foreach_env_runner(_process_id, local_env_runner=False):
            healthy += 1
            if index in seen and seen[index] != pid:
                restarts += 1
            seen[index] = pid
            nodes.add(node_id)
    state.env_runner_restarts = restarts
    result["node_id"] = ray.get_runtime_context().get_node_id()
    result["env_runner_restarts"] = restarts
    result["healthy_env_runners"] = healthy
    result["env_runner_node_ids"] = ",".join(sorted(nodes))
