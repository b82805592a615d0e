"""The acting weights in shared memory (kappa_rllib.algorithms.shared_weights): what a runner on the learner's node
reads is the state written, bit for bit; a slot is never read torn; the file goes away with its driver; and runs
whose runners read it train exactly as runs whose runners take the object store's copy."""

import os

import numpy as np
import pytest

from kappa_rllib.algorithms import shared_weights
from kappa_rllib.algorithms.shared_weights import SharedWeights, SharedWeightsGone, read

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm (shared weights are Linux's)")


def state(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"rl_module": {"default_policy": {
        "encoder.weight": rng.standard_normal((16, 4, 3, 3)).astype(np.float32),
        "encoder.bias": rng.standard_normal(7).astype(np.float32),  # (not a multiple of the alignment)
        "head.weight": rng.standard_normal((3, 128)).astype(np.float32),
        "steps": np.array([seed, -seed], np.int64),
        "mask": rng.integers(0, 2, 5).astype(bool),
        "scalar": np.float64(seed) / 3,  # (a numpy scalar: kept as it is)
    }}, "weights_seq_no": 0}


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return type(a) is type(b) and a == b


@pytest.fixture
def board():
    made = SharedWeights.create(state(0), "node-a")
    yield made
    made.close()


def test_a_runner_reads_the_state_written_bit_for_bit_as_arrays_of_its_own(board):
    handle = board.write(1, state(1))
    got = read(handle, "node-a")
    assert same(got, state(1))
    got["rl_module"]["default_policy"]["encoder.weight"][0, 0, 0, 0] = 99.0  # a copy, not a view of the file
    assert same(read(handle, "node-a"), state(1))


def test_the_slots_alternate_and_a_rewritten_slot_is_refused_not_read_torn(board):
    first, second = board.write(1, state(1)), board.write(2, state(2))
    assert (first.slot, second.slot) == (0, 1)
    assert same(read(first, "node-a"), state(1)) and same(read(second, "node-a"), state(2))  # both held
    third = board.write(3, state(3))  # into version 1's slot
    assert third.slot == 0 and same(read(third, "node-a"), state(3))
    with pytest.raises(SharedWeightsGone, match="held versions 3 and 3, the request named 1"):
        read(first, "node-a")


def test_a_runner_on_another_node_or_after_the_close_is_refused(board):
    handle = board.write(1, state(1))
    with pytest.raises(SharedWeightsGone, match="on node node-a, this runner is on node-b"):
        read(handle, "node-b")
    board.close()
    assert not os.path.exists(handle.path)
    with pytest.raises(SharedWeightsGone, match="cannot be read"):
        read(handle, "node-a")


def test_a_state_laid_out_otherwise_is_not_written(board):
    other = state(1)
    other["rl_module"]["default_policy"]["head.weight"] = np.zeros((4, 128), np.float32)
    assert board.write(1, other) is None


def test_files_of_dead_drivers_are_removed_and_a_live_ones_kept(tmp_path, monkeypatch):
    """A driver killed before its close leaves its file; the next one on the node removes it, and only files made
    in its own PID namespace (a container sharing /dev/shm sees others' files, not their pids)."""
    import subprocess
    import sys

    monkeypatch.setattr(shared_weights, "SHM_DIR", str(tmp_path))
    namespace = shared_weights._pid_namespace()
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    orphan = tmp_path / f"{shared_weights.PREFIX}{dead}_{namespace}_abc"
    live = tmp_path / f"{shared_weights.PREFIX}{os.getppid()}_{namespace}_def"
    other_namespace = tmp_path / f"{shared_weights.PREFIX}{dead}_1_ghi"
    odd = [tmp_path / f"{shared_weights.PREFIX}{10 ** 30}_{namespace}_x", tmp_path / f"{shared_weights.PREFIX}x_y_z",
           tmp_path / "someone_elses"]
    for path in (orphan, live, other_namespace, *odd):
        path.write_bytes(b"x")
    made = SharedWeights.create(state(0), "n")
    assert not orphan.exists() and live.exists() and other_namespace.exists() and all(p.exists() for p in odd)
    assert os.path.dirname(made.path) == str(tmp_path)
    made.close()
    assert not os.path.exists(made.path)


def test_empty_and_scalar_leaves_travel_with_the_handle(board):
    with_empty = state(1)
    with_empty["rl_module"]["extra"] = {}
    other = SharedWeights.create(with_empty, "node-a")
    try:
        assert same(read(other.write(1, with_empty), "node-a"), with_empty)
    finally:
        other.close()


def test_where_shared_memory_cannot_serve_there_is_none_and_no_file_left(tmp_path, monkeypatch):
    monkeypatch.setattr(shared_weights, "SHM_DIR", str(tmp_path))
    monkeypatch.setenv("KAPPA_RLLIB_SHARED_WEIGHTS", "0")
    assert SharedWeights.create(state(0), "n") is None
    monkeypatch.delenv("KAPPA_RLLIB_SHARED_WEIGHTS")

    def full(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    assert SharedWeights.create(state(0), "n") is None and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(shared_weights, "SHM_DIR", str(tmp_path / "missing"))
    assert SharedWeights.create(state(0), "n") is None


# ------------------------------------------------------------------ in runs, with remote EnvRunners


def _run(monkeypatch, shared: bool, config_cls):
    import ray

    from test_kappa_dqn_run import final_counts, module_weights, short_config, train_to_done
    from kappa_rllib.algorithms import sampling
    from kappa_rllib.variant import PHI_MODULE_ID

    monkeypatch.setenv("KAPPA_RLLIB_SHARED_WEIGHTS", "1" if shared else "0")
    algo = (short_config(config_cls).env_runners(num_env_runners=2)
            .training(env_steps_per_runner_call=24).build_algo())
    puts, put = [], ray.put

    def counting(value, *args, **kwargs):
        if value is algo.sampler.weights_state:
            puts.append(algo.sampler.weights_version)
        return put(value, *args, **kwargs)

    monkeypatch.setattr(sampling.ray, "put", counting)
    result = train_to_done(algo)
    monkeypatch.setattr(sampling.ray, "put", put)
    counts = final_counts(algo, result)
    weights = {m: module_weights(algo, m) for m in ("default_policy", PHI_MODULE_ID)}
    path = algo.sampler._shared.path if algo.sampler._shared else None
    algo.stop()
    assert path is None or not os.path.exists(path)  # removed at the stop
    return counts, weights, puts, algo.sampler.weights_version


def test_runners_reading_shared_memory_train_exactly_as_runners_taking_the_object_stores_copy(ray_local,
                                                                                            monkeypatch):
    """kappa-PI-DQN with 2 remote EnvRunners on the learner's node, to T: with the weights in shared memory the
    same counts, target copies, replay size and the same Q_theta and Q_phi to the bit as through the object
    store; and no version is put in the object store but the first (sent before the runners' node is known)."""
    from kappa_rllib import KappaPIDQNConfig

    (counts, weights, puts, versions), (counts_ref, weights_ref, puts_ref, versions_ref) = (
        _run(monkeypatch, True, KappaPIDQNConfig), _run(monkeypatch, False, KappaPIDQNConfig))
    assert counts == counts_ref and versions == versions_ref > 20
    assert same(weights, weights_ref)
    # (a version no request carries, as one made at the end of a phase, is never put nor written)
    assert puts == [1] and len(puts_ref) > versions_ref // 2


def test_a_runner_that_cannot_read_the_file_is_sampled_again_by_reference_and_takes_the_reference_from_then_on(
        monkeypatch):
    """A runner the driver believes on its node may not be (restarted elsewhere between two requests, a /dev/shm of
    its own): its request reads nothing and answers so, its share is sampled again (by reference, here by both
    runners), and from then on it takes the object store's copy, whatever node it reports."""
    from types import SimpleNamespace

    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from kappa_rllib.algorithms import sampling
    from kappa_rllib.algorithms.shared_weights import Handle

    class Runner:
        def __init__(self, index, node):
            self.worker_index, self.node, self.weights_version, self.took = index, node, 0, []

        def act_with(self, version, weights):  # (as RawTransitionEnvRunner's: loads a version it does not act with)
            if version != self.weights_version:
                self.took.append(weights if isinstance(weights, str) else weights["rl_module"]["p"].tolist())
                self.weights_version = version

        def sample(self, num_timesteps, explore, global_env_steps):
            return [{"actions": [self.worker_index] * num_timesteps}]

        def get_metrics(self):
            return {}

    runners = {1: Runner(1, "a"), 2: Runner(2, "b")}  # runner 2 moved to node b; the driver still thinks a
    sent = []

    def run(funcs, kwargs, ids):
        sent.append([(i, type(k["weights"]).__name__) for k, i in zip(kwargs, ids)])
        return [(i, f(runners[i], **k)) for f, k, i in zip(funcs, kwargs, ids)]

    group = SimpleNamespace(num_remote_workers=lambda: 2, healthy_worker_ids=lambda: [1, 2],
                            foreach_env_runner=lambda funcs, kwargs, remote_worker_ids, local_env_runner: [
                                r for _, r in run(funcs, kwargs, remote_worker_ids)])
    monkeypatch.setattr(sampling, "_process_id", lambda er: (er.worker_index, 100 + er.worker_index, er.node))
    monkeypatch.setattr(sampling.ray, "put", lambda value: "ref")
    sampler = sampling.Sampler(SimpleNamespace(env_runner_group=group, metrics=MetricsLogger()), on_policy=True)
    sampler._node_id, sampler._runner_nodes = "a", {1: "a", 2: "a"}
    sampler.weights_version = 1
    sampler.weights_state = {"rl_module": {"p": np.arange(4, dtype=np.float32)}, "weights_seq_no": 0}
    try:
        segments = sampler.sample(10, global_env_steps=0)
        assert sorted(a for s in segments for a in s["actions"]) == [1] * 8 + [2] * 2  # 5 + 5, then 5 split 3 + 2
        assert sent[0] == [(1, "Handle"), (2, "Handle")] and sent[1] == [(1, "Handle"), (2, "str")]
        assert runners[1].took == [[0.0, 1.0, 2.0, 3.0]] and runners[2].took == ["ref"]
        assert sampler.runtime.resampled_env_steps == 5 and sampler._object_store_only == {2}
        sampler._runner_nodes[2] = "a"  # it reports this node again: it still takes the reference
        sampler.weights_version, sampler.weights_state = 2, {"rl_module": {"p": np.ones(4, np.float32)},
                                                             "weights_seq_no": 0}
        sampler._weights_ref = sampler._handle = None
        sampler.sample(4, global_env_steps=10)
        assert sent[2] == [(1, "Handle"), (2, "str")] and runners[1].took[-1] == [1.0] * 4
    finally:
        sampler.close()
