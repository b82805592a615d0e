"""Sampling and weight syncs: one `Sampler` per algorithm (kappa or not), which owns them.

The Sampler keeps the acting weights (a version number, the inference-only module state read from the
learners once per version, and how the runners get it, made once per version when a request first needs
it: written into a shared-memory file for the runners on this node, `shared_weights`, put in the object
store for the others), the batch in flight (sampled ahead while the learner works: `InFlight`, at most
one), and what `report_runtime` tracks of the remote EnvRunners' processes (`RuntimeCounters`). Every
sampling request carries the version of the acting weights and the weights (a handle or a reference); the
EnvRunner loads them if it does not act with them yet (`RawTransitionEnvRunner.act_with`) and returns, with
its segments, the version it acted with. So:

* **on-policy at run time**: `collect` (and `sample`) compare the versions the runners acted with to
  the current one. For TRPO and kappa-TRPO (`on_policy`) any lag is an error (`OffPolicyBatch`): the batch
  would not have been sampled by the policy it updates. kappa-DQN samples one chunk ahead by design;
  its lag (versions) is reported as `env_runners/acting_weights_lag` (the largest in the iteration).
* **one batch in flight**: `submit` records it (`InFlight`: env steps and the version it acts with),
  `collect` or `drop` ends it; a restore (`restore`) drops it, then syncs the restored weights.
* **exactly the steps asked for**: a runner lost while it samples (a killed process, a lost node) is
  dropped by RLlib's group without an error, so its share would be missing; `sample` and `collect` sample
  each lost share again, now, at its own t, from the runners that answer (`RuntimeCounters.resampled_env_steps`).

kappa-PPO and kappa-APPO sample through RLlib's own loop: their Sampler only reports where they run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import ray
from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, WEIGHTS_SEQ_NO

from kappa_rllib.algorithms.shared_weights import Handle, SharedWeights, SharedWeightsGone
from kappa_rllib.algorithms.shared_weights import read as read_shared

ACTING_WEIGHTS_LAG = "acting_weights_lag"  # env_runners/...: versions behind the learner (kappa-DQN)
OBS_AS_UINT8 = "obs_as_uint8"  # a remote segment's float32 observations, every one a whole number 0..255, sent as uint8


@dataclass(frozen=True)
class InFlight:
    """A batch being sampled ahead: its env steps, and the version of the acting weights it carries."""

    num_steps: int
    weights_version: int
    shares: tuple = ()  # (runner index, env steps, t of its first step) of each runner's share


@dataclass
class RuntimeCounters:
    """What `report_runtime` keeps between steps."""

    env_runner_pids: dict = field(default_factory=dict)  # remote EnvRunner index -> its process id
    env_runner_restarts: int = 0  # process changes seen
    healthy_env_runners: int = 0  # remote EnvRunners that answered the last request
    env_runner_node_ids: str = ""  # their Ray nodes
    resampled_env_steps: int = 0  # env steps sampled again because a runner was lost mid-request


class OffPolicyBatch(RuntimeError):
    """An on-policy family collected env steps acted with weights other than its current ones."""


class Sampler:
    TAG = "kappa_rllib_sample"  # RLlib's tag of our async sampling requests

    def __init__(self, algorithm, *, on_policy: bool):
        self.algorithm = algorithm
        self.on_policy = on_policy
        self.weights_version = 0  # of the acting weights; 0: none synced yet (SamplerMixin.setup syncs once)
        self.weights_state: dict | None = None  # the acting module's state, read from the learners
        self._weights_ref: ray.ObjectRef | None = None  # that state in the object store, put when a request needs it
        self._shared: SharedWeights | None | bool = False  # the file runners on this node read (False: not made yet)
        self._handle: Handle | None = None  # the current version in it, written when a request needs it
        self._runner_nodes: dict[int, str] = {}  # remote EnvRunner index -> its Ray node, from its last answer
        self._object_store_only: set[int] = set()  # runners that could not read the file once: the reference from then on
        self._node_id: str | None = None  # this process's Ray node
        self._local_version = 0  # the version the local EnvRunner holds (`refresh_local`)
        self.in_flight: InFlight | None = None
        self.runtime = RuntimeCounters()

    # ----- the acting weights
    def sync(self) -> None:
        """Call after the learner changed the acting module: remote EnvRunners take the new (inference-only)
        weights with their next sampling request (`_weights_for`: one write to shared memory for those on this node,
        one object-store put for the others, each made once a version). The local EnvRunner takes
        them now where it samples (no remote runners); beside remote runners it has no env and samples nothing, so
        it takes them when read (`refresh_local`, through `Algorithm.env_runner`), not every chunk: its
        load_state_dict was 11% of the driver's time per chunk in W3's pipeline with nothing learnt."""
        self.weights_version += 1
        self.weights_state = _acting_state(self.algorithm)  # read from the learners once
        self._weights_ref = self._handle = None
        group = self.algorithm.env_runner_group
        if group.local_env_runner is not None and not group.num_remote_workers():
            self.refresh_local()

    def refresh_local(self) -> None:
        """The local EnvRunner takes the acting weights, unless it has them already."""
        local = self.algorithm.env_runner_group.local_env_runner
        if local is not None and self.weights_state is not None and self._local_version != self.weights_version:
            local.set_state(self.weights_state)
            self._local_version = self.weights_version

    def _weights_for(self, index: int):
        """What a request to remote runner `index` carries of the current acting weights: a shared-memory handle
        where the runner runs on this node (`kappa_rllib.algorithms.shared_weights`: no object-store put, ~1 ms of
        the driver's time a version), else the object-store reference; each made once a version, when first
        needed. A runner that once could not read the file (restarted on another node, a /dev/shm of its own)
        takes the reference from then on. None before the first sync."""
        if not self.weights_version:
            return None
        node = self._runner_nodes.get(index)
        if (self._shared is not None and index not in self._object_store_only and self.weights_state is not None
                and node is not None and node == self._this_node()):
            if self._shared is False:  # made when a runner is first known to be on this node
                self._shared = SharedWeights.create(self.weights_state, self._node_id)
            if self._shared and self._handle is None:
                self._handle = self._shared.write(self.weights_version, self.weights_state)
            if self._shared and self._handle is not None:
                return self._handle
        if self._weights_ref is None:
            self._weights_ref = ray.put(self.weights_state)
        return self._weights_ref

    def _this_node(self) -> str | None:
        """This process's Ray node; None under Ray Client, whose driver is on no node of the cluster."""
        if self._node_id is None and not ray.util.client.ray.is_connected():
            self._node_id = ray.get_runtime_context().get_node_id()
        return self._node_id

    def close(self) -> None:
        """Removes the shared-memory file, if any (the algorithm's stop)."""
        if self._shared:
            self._shared.close()
        self._shared, self._handle = False, None

    # ----- sampling
    def sample(self, num_steps: int, global_env_steps: int = 0) -> list[dict]:
        """Exactly `num_steps` env steps with exploration, now; returns the EnvRunners' segments
        (`kappa_rllib.env_runner`). With n remote EnvRunners the steps are split as evenly as possible
        (the first num_steps mod n runners take one more). `global_env_steps` (env steps sampled so
        far, all runners) sets the epsilon schedule's t. EnvRunner metrics go into `env_runners/...`."""
        if self.in_flight is not None:
            raise RuntimeError(f"a batch of {self.in_flight.num_steps} env steps is in flight: collect or drop it first")
        return self._exactly(*self._sample_now(num_steps, global_env_steps), num_steps)

    def _sample_now(self, num_steps: int, global_env_steps: int) -> tuple[list[dict], list[tuple[int, int]]]:
        """(segments, the (env steps, t) of each share whose runner did not answer)."""
        group = self.algorithm.env_runner_group
        if group.num_remote_workers() == 0:
            results = [_sample_one(group.local_env_runner, num_steps, global_env_steps) + (self.weights_version, None)]
            return self._segments(results), []
        shares, funcs, kwargs = self._remote_shares(num_steps, global_env_steps)
        results = group.foreach_env_runner(funcs, kwargs=kwargs, remote_worker_ids=[i for i, _, _ in shares],
                                           local_env_runner=False)
        return self._segments(results), self._lost(shares, results)

    def _exactly(self, segments: list[dict], lost: list[tuple[int, int]], num_steps: int) -> list[dict]:
        """`segments` with every `lost` share sampled again. RLlib's group drops the answer of a runner lost
        mid-request (a killed process, a lost node: `restart_failed_env_runners`) without an error, so each
        such share (its env steps and its own t on the epsilon schedule) is sampled again, now, from the
        runners that answer. Anything but exactly `num_steps` env steps in the end is an error."""
        lost, empty = list(lost), 0
        while lost:
            n, start = lost.pop(0)
            more, more_lost = self._sample_now(n, start)
            got = _env_steps(more)
            empty = 0 if got else empty + 1
            if empty == 3:
                raise RuntimeError(f"no EnvRunner answered: {_env_steps(segments)} of the {num_steps} env steps "
                                   "asked for, 3 requests in a row lost")
            self.runtime.resampled_env_steps += got
            segments, lost = segments + more, lost + more_lost
        if _env_steps(segments) != num_steps:
            raise RuntimeError(f"the EnvRunners returned {_env_steps(segments)} env steps for a request of {num_steps}")
        return segments

    def submit(self, num_steps: int, global_env_steps: int) -> bool:
        """Starts sampling `num_steps` env steps on the remote EnvRunners with the current acting
        weights and returns at once; `collect` waits for the segments.

        Returns False, with nothing left in flight, when RLlib did not send every runner its share (a
        runner found unhealthy as the call went out, or at its limit of requests in flight): collecting
        the others would give a short batch, so the caller samples the steps again with `sample`."""
        if self.in_flight is not None:
            raise RuntimeError(f"a batch of {self.in_flight.num_steps} env steps is already in flight")
        shares, funcs, kwargs = self._remote_shares(num_steps, global_env_steps)
        sent = self.algorithm.env_runner_group.foreach_env_runner_async(
            funcs, tag=self.TAG, kwargs=kwargs, remote_worker_ids=[i for i, _, _ in shares])
        self.in_flight = InFlight(num_steps, self.weights_version, shares)
        if sent != len(shares):
            self.drop()
            return False
        return True

    def collect(self) -> list[dict]:
        """The segments of the batch in flight (waits for every runner; a share lost with its runner is
        sampled again now, with the current weights)."""
        if self.in_flight is None:
            raise RuntimeError("no batch in flight to collect")
        ready = self.algorithm.env_runner_group.fetch_ready_async_reqs(tags=self.TAG, timeout_seconds=None)
        batch, self.in_flight = self.in_flight, None
        results = [r for _, r in ready]
        return self._exactly(self._segments(results), self._lost(batch.shares, results), batch.num_steps)

    def drop(self) -> None:
        """Waits for the batch in flight, if any, and discards it, metrics included."""
        if self.in_flight is not None:
            self.algorithm.env_runner_group.fetch_ready_async_reqs(tags=self.TAG, timeout_seconds=None)
            self.in_flight = None

    def restore(self) -> None:
        """After the algorithm's state was replaced (a checkpoint, a PBT exploit): a batch in flight was
        sampled by the replaced weights (dropped, unread); the acting weights the next request carries
        (and a restarted runner loads) are the restored ones."""
        self.drop()
        self.sync()

    def _remote_shares(self, num_steps: int, start: int):
        """Each healthy remote EnvRunner's share, (runner index, env steps, t of its first step), and the
        calls that sample them (a function and its keyword arguments each). A call carries the acting weights,
        so a runner acts with the weights of the request it serves: no separate weight sync can be dropped or
        overtaken while a request is in flight. Their reference goes as a top-level argument, which Ray resolves
        before the call runs (the runner is handed the weights, from its node's object store): a reference
        inside the function would be borrowed by the runner, which Ray tracks for every call (0.6 against 0.3 ms
        of the driver's time a request, docs/measured.md)."""
        ids = list(self.algorithm.env_runner_group.healthy_worker_ids())  # a restarting runner's share goes to the others
        if not ids:
            raise RuntimeError("no healthy EnvRunner to sample from")
        base, extra = divmod(num_steps, len(ids))
        shares = [base + (i < extra) for i in range(len(ids))]
        offsets = [start + sum(shares[:i]) for i in range(len(ids))]
        kwargs = [{"num_steps": n, "global_env_steps": o, "version": self.weights_version,
                   "weights": self._weights_for(i)} for i, n, o in zip(ids, shares, offsets)]
        return list(zip(ids, shares, offsets)), [_sample_with_weights] * len(ids), kwargs

    def _segments(self, results) -> list[dict]:
        """The runners' (segments, metrics, version acted with, (index, pid, node) of a remote runner):
        metrics into `env_runners/...`, the versions checked (module docstring), where the remote runners
        run noted (`report_runtime`), the segments returned."""
        unread = [where[0] for segs, _, _, where in results if segs is None]  # the file unread: sampled nothing
        self._object_store_only.update(unread)
        self._note_runners([where for _, _, _, where in results if where is not None])
        results = [r for r in results if r[0] is not None]
        self.algorithm.metrics.aggregate([m for _, m, _, _ in results], key=ENV_RUNNER_RESULTS)
        if results:
            lag = self.weights_version - min(v for _, _, v, _ in results)
            if self.on_policy and lag:
                raise OffPolicyBatch(f"env steps acted with weights {lag} version(s) behind the learner's "
                                     f"(version {self.weights_version}): an on-policy batch must be sampled by "
                                     "the policy it updates")
            if not self.on_policy:
                # reduce="max" starts afresh every iteration: the iteration's largest lag
                self.algorithm.metrics.log_value((ENV_RUNNER_RESULTS, ACTING_WEIGHTS_LAG), lag, reduce="max")
        return [_widened(seg) for segs, _, _, _ in results for seg in segs]

    def _lost(self, shares, results) -> list[tuple[int, int]]:
        """(env steps, t) of each share whose runner is not among those that answered (their `where`). A lost
        runner's node is forgotten: restarted, it may run elsewhere, and takes the object-store reference until
        it answers again."""
        answered = {where[0] for segs, _, _, where in results if where is not None and segs is not None}
        for index, _, _ in shares:
            if index not in answered:
                self._runner_nodes.pop(index, None)
        return [(n, start) for index, n, start in shares if index not in answered and n > 0]

    def _note_runners(self, seen) -> None:
        """(index, pid, node) of the remote runners that answered: a changed pid is a restart."""
        runtime = self.runtime
        for index, pid, node in seen:
            if index in runtime.env_runner_pids and runtime.env_runner_pids[index] != pid:
                runtime.env_runner_restarts += 1
            runtime.env_runner_pids[index] = pid
            self._runner_nodes[index] = node
        if seen:
            runtime.healthy_env_runners = len(seen)
            runtime.env_runner_node_ids = ",".join(sorted({node for _, _, node in seen}))

    # ----- where the run runs
    def report_runtime(self, result: dict) -> None:
        """Adds `node_id`, `env_runner_restarts`, `healthy_env_runners` and `env_runner_node_ids` (the Ray
        nodes of the remote EnvRunners, comma-separated) to a result.

        `node_id` is the Ray node this algorithm (a Tune trial's actor, or the driver) runs on: with several
        nodes on one host, Tune's `hostname`/`node_ip` cannot tell them apart. A killed remote EnvRunner is
        often restarted by Ray itself (actor restarts) before RLlib's health probe notices, so restarts are
        counted here as changes of a runner's process id.

        Where the Sampler samples (kappa-DQN, TRPO, kappa-TRPO), every sampling request's answer says where
        its runner runs, so the report asks nothing: an EnvRunner serves one call at a time, and a question
        sent while it samples a batch ahead would hold Tune's reporting and checkpointing until the batch
        is done. kappa-PPO and kappa-APPO (RLlib's sampling) ask the runners once a step."""
        group = self.algorithm.env_runner_group
        runtime = self.runtime
        if not self.algorithm.samples_raw and group is not None and group.num_remote_env_runners() > 0:
            self._note_runners(group.foreach_env_runner(_process_id, local_env_runner=False))
        result["node_id"] = ray.get_runtime_context().get_node_id()
        result["env_runner_restarts"] = runtime.env_runner_restarts
        result["healthy_env_runners"] = runtime.healthy_env_runners
        result["env_runner_node_ids"] = runtime.env_runner_node_ids
        result["resampled_env_steps"] = runtime.resampled_env_steps


class SamplerMixin:
    """Mixed in before an RLlib `Algorithm`: `self.sampler`, made at setup; `step()` reports where the run
    runs (once a step); a restore drops a batch in flight and renews the acting weights.
    `samples_raw`: the family samples through the Sampler (kappa-DQN, TRPO, kappa-TRPO); kappa-PPO and
    kappa-APPO sample through RLlib's own loop, whose `set_state` syncs the weights itself.
    `on_policy`: a batch must be sampled by the weights it updates (checked at every collect)."""

    samples_raw = True
    on_policy = True

    def cleanup(self) -> None:
        super().cleanup()
        if getattr(self, "sampler", None) is not None:
            self.sampler.close()  # the acting weights' shared-memory file, once the runners are stopped

    def setup(self, config) -> None:
        self.sampler = Sampler(self, on_policy=self.on_policy)
        super().setup(config)
        if self.samples_raw:  # version 1: the learner's initial weights, which every request then carries
            self.sampler.sync()  # (a runner, fresh or restarted by Ray, is built with weights of its own)

    def step(self):
        result = super().step()
        self.sampler.report_runtime(result)
        return result

    @property
    def env_runner(self):
        """RLlib's local EnvRunner (`Algorithm.env_runner`), holding the acting weights: beside remote runners it
        samples nothing and takes them only when read (`Sampler.refresh_local`), here, as RLlib's own reads
        (`get_state`, checkpoints) and a user's `algo.env_runner.module` do."""
        local = super().env_runner
        sampler = getattr(self, "sampler", None)
        if local is not None and sampler is not None and self.samples_raw:
            sampler.refresh_local()
        return local

    def restore_env_runners(self, env_runner_group):
        """RLlib brings back an unhealthy EnvRunner with the local EnvRunner's state, its module included
        (`Algorithm.restore_env_runners` reads `env_runner_group.local_env_runner` itself, not `env_runner`): the
        local runner takes the newest acting weights first wherever a remote runner is unhealthy."""
        if (self.samples_raw and getattr(self, "sampler", None) is not None
                and env_runner_group is self.env_runner_group
                and env_runner_group.num_healthy_remote_workers() < env_runner_group.num_remote_workers()):
            self.sampler.refresh_local()
        return super().restore_env_runners(env_runner_group)

    def evaluate(self, parallel_train_future=None):
        """RLlib's `evaluate()`. Without an `.evaluation(...)` config RLlib has no evaluation EnvRunners and
        evaluates on the training EnvRunner, which here samples raw transitions for the learner (and with remote
        runners has no env): so an evaluation EnvRunner of its own is made on the first call, in this process,
        from RLlib's evaluation config (its defaults: `evaluation_duration` 10 episodes, the training envs'
        settings), and kept for later calls. Training is untouched: its runners, envs and counters are not read."""
        if (self.eval_env_runner_group is None and not self.config.custom_evaluation_function
                and getattr(self, "evaluation_dataset", None) is None):
            from ray.rllib.env.env_runner_group import EnvRunnerGroup

            _, env_creator = self._get_env_id_and_creator(self.evaluation_config.env, self.evaluation_config)
            self.eval_env_runner_group = EnvRunnerGroup(
                env_creator=env_creator, validate_env=None,
                default_policy_class=self.get_default_policy_class(self.config), config=self.evaluation_config,
                logdir=self.logdir, tune_trial_id=self.trial_id, local_env_runner=True,
                pg_offset=self.config.num_env_runners)
        return super().evaluate(parallel_train_future)

    def set_state(self, state) -> None:
        if self.samples_raw:
            self.sampler.drop()  # sampled by the weights being replaced: dropped, unread
        super().set_state(state)
        if self.samples_raw:
            self.sampler.sync()

    def restore_from_path(self, path, *args, **kwargs) -> None:
        """A component restore (`component="learner_group/learner/rl_module/default_policy"`, RLlib's way to
        load a trained module) replaces the learner's weights without `set_state`: the acting weights are
        renewed here too, so every runner (a restarted one included) then acts with the loaded ones."""
        if self.samples_raw:
            self.sampler.drop()
        super().restore_from_path(path, *args, **kwargs)
        if self.samples_raw:
            self.sampler.sync()


def _env_steps(segments: list[dict]) -> int:
    return sum(len(seg["actions"]) for seg in segments)


def _acting_state(algorithm) -> dict:
    """The acting (inference-only) module's state from the learners, as `EnvRunner.set_state`
    takes it (what RLlib's `EnvRunnerGroup.sync_weights` sends)."""
    state = algorithm.learner_group.get_state(
        components=[f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}/{DEFAULT_MODULE_ID}"], inference_only=True,
    )[COMPONENT_LEARNER]
    module = state[COMPONENT_RL_MODULE]
    learner = getattr(algorithm.learner_group, "_learner", None)
    if learner is not None and getattr(learner.device, "type", "cpu") == "cpu":
        # a local CPU learner's state is views of its parameters, which a learner thread may update while the
        # state is still written or put for a request (a GPU's, or a remote learner's, is a copy already)
        module = _copied(module)
    # WEIGHTS_SEQ_NO 0: RLlib's EnvRunner.set_state then always loads the weights (it skips a number not
    # newer than its own, as after a restore to earlier weights); the Sampler's version says which they are
    return {COMPONENT_RL_MODULE: module, WEIGHTS_SEQ_NO: 0}


def _copied(state):
    if isinstance(state, dict):
        return {k: _copied(v) for k, v in state.items()}
    return state.copy() if isinstance(state, np.ndarray) else state


def _sample_with_weights(env_runner, num_steps: int, global_env_steps: int, version: int, weights):
    where = _process_id(env_runner)
    if isinstance(weights, Handle) and version != env_runner.weights_version:
        try:
            weights = read_shared(weights, where[2])
        except SharedWeightsGone:  # (restarted on another node, a /dev/shm of its own): sampled again, by reference
            return None, {}, env_runner.weights_version, where
    env_runner.act_with(version, weights)
    segments, metrics = _sample_one(env_runner, num_steps, global_env_steps)
    return [_narrowed(seg) for seg in segments], metrics, env_runner.weights_version, where


def _narrowed(segment: dict) -> dict:
    """A remote segment as it travels: float32 observations that are all whole numbers in 0..255 (MinAtar's 0/1
    channels) as uint8, a quarter of the bytes, which `_widened` turns back into the same float32 array bit for
    bit (the round trip is checked on the bits: -0.0, NaN or 0.5 anywhere sends the array as it is). A chunk's
    answer then fits Ray's inline return (100 KB) instead of a put into the object store: MinAtar's 64-step
    chunk, 126 KB as float32, is 33 KB (docs/measured.md, W3's pipeline)."""
    obs = segment.get(Columns.OBS)
    if not isinstance(obs, np.ndarray) or obs.dtype != np.float32 or obs.size == 0:
        return segment
    if not (_whole(obs[:1]) and _whole(obs)):  # (MuJoCo's observations fail at the first row)
        return segment
    small = obs.astype(np.uint8)
    segment = dict(segment)
    del segment[Columns.OBS]
    segment[OBS_AS_UINT8] = small
    return segment


def _whole(obs: np.ndarray) -> bool:
    """Whether float32 `obs` survive the trip through uint8 bit for bit (NaN, -0.0 or out of range: no)."""
    with np.errstate(invalid="ignore"):
        return np.array_equal(obs.astype(np.uint8).astype(np.float32).view(np.uint32), obs.view(np.uint32))


def _widened(segment: dict) -> dict:
    """The segment `_narrowed` sent, with its float32 observations."""
    if OBS_AS_UINT8 in segment:
        segment = dict(segment)
        segment[Columns.OBS] = segment.pop(OBS_AS_UINT8).astype(np.float32)
    return segment


def _sample_one(env_runner, num_steps: int, global_env_steps: int) -> tuple:
    if num_steps == 0:
        return [], env_runner.get_metrics()
    return env_runner.sample(num_timesteps=num_steps, explore=True, global_env_steps=global_env_steps), \
        env_runner.get_metrics()


def _process_id(env_runner):
    return env_runner.worker_index, os.getpid(), ray.get_runtime_context().get_node_id()
