"""The frame-deduplicating replay of Atari stacks: every sampled stack is exactly the stack the
env returned, across episode boundaries, chunked adds and buffer wrap-around; checkpoints. Each in
both storages of the frames (`FrameStore`): LZ4 in host memory, and the uncompressed ring on a
device (the CPU here; the GPU too where there is one), which give the same samples and states."""

import numpy as np
import pytest
import torch

from kappa_rllib.replay import FrameStore, UniformReplayBuffer

H, W, DEPTH = 6, 5, 4
# where the frames live: None = LZ4 in host memory, else the ring on that device
STORAGES = [None, torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
storages = pytest.mark.parametrize("storage", STORAGES, ids=lambda d: "lz4" if d is None else f"ring-{d}")


def frame_stacked_stream(num_steps, seed, episode_len=(3, 40)):
    """Transitions of a frame-stacked env (gymnasium's FrameStackObservation: a reset fills the
    stack with the first frame), as (obs, next_obs, reward, terminated) with unique rewards."""
    rng = np.random.default_rng(seed)
    out, t = [], 0
    while t < num_steps:
        length = int(rng.integers(*episode_len))
        stack = np.repeat(rng.integers(0, 256, (H, W, 1), dtype=np.uint8), DEPTH, axis=-1)
        for step in range(length):
            nxt = np.concatenate([stack[..., 1:], rng.integers(0, 256, (H, W, 1), dtype=np.uint8)], axis=-1)
            out.append((stack, nxt, float(t), float(step == length - 1)))
            stack, t = nxt, t + 1
            if t == num_steps:
                break
    return out


def add_in_chunks(buf, stream, seed, max_chunk=9):
    rng = np.random.default_rng(seed)
    i = 0
    while i < len(stream):
        part = stream[i : i + int(rng.integers(1, max_chunk))]
        buf.add({
            "obs": np.stack([p[0] for p in part]), "new_obs": np.stack([p[1] for p in part]),
            "actions": np.zeros(len(part), np.int64), "rewards": np.array([p[2] for p in part], np.float32),
            "terminateds": np.array([p[3] for p in part], np.float32),
        })
        i += len(part)


def check_exact(buf, stream):
    by_reward = {p[2]: p for p in stream}
    stored = buf.transitions()
    for obs, nxt, r in zip(stored["obs"], stored["new_obs"], stored["rewards"]):
        np.testing.assert_array_equal(obs, by_reward[float(r)][0])
        np.testing.assert_array_equal(nxt, by_reward[float(r)][1])
    batch = buf.sample(256)
    for obs, nxt, r in zip(batch["obs"], batch["new_obs"], batch["rewards"]):
        np.testing.assert_array_equal(obs, by_reward[float(r)][0])
        np.testing.assert_array_equal(nxt, by_reward[float(r)][1])
    return stored


@storages
@pytest.mark.parametrize("seed", [0, 1])
def test_stacks_are_exact_across_episodes_chunks_and_wraparound(seed, storage):
    buf = UniformReplayBuffer(capacity=200, seed=seed, frames_device=storage)
    stream = frame_stacked_stream(1000, seed)  # wraps the buffer 5 times
    add_in_chunks(buf, stream, seed)
    assert buf.compact and len(buf) == 200
    stored = check_exact(buf, stream)
    np.testing.assert_array_equal(stored["rewards"], [p[2] for p in stream[-200:]])  # the newest 200, in order
    # one frame per step plus a whole stack at each episode start: far below 2 x 4 frames per step
    episodes = sum(p[3] for p in stream) + 1
    assert buf._frames.written <= len(stream) + DEPTH * episodes


@storages
def test_stacks_that_share_no_frames_are_stored_whole_and_stay_exact(storage):
    rng = np.random.default_rng(3)
    stream = [(rng.integers(0, 256, (H, W, DEPTH), dtype=np.uint8), rng.integers(0, 256, (H, W, DEPTH), dtype=np.uint8),
               float(t), 0.0) for t in range(300)]
    buf = UniformReplayBuffer(capacity=100, seed=0, frames_device=storage)
    add_in_chunks(buf, stream, 0)
    assert 0 < len(buf) <= 100  # transitions whose frames were overwritten are dropped, never corrupted
    check_exact(buf, stream)


@storages
def test_checkpoint_round_trip_keeps_the_compact_form_and_the_samples(storage):
    stream = frame_stacked_stream(500, 5)
    buf = UniformReplayBuffer(capacity=300, seed=7, frames_device=storage)
    add_in_chunks(buf, stream, 5)
    state = buf.get_state()
    assert "obs" not in state["arrays"] and tuple(state["frames"]["frame_shape"]) == (H, W)
    assert all(isinstance(f, bytes) for f in state["frames"]["frames"])  # compressed frames
    assert len(state["frames"]["frames"]) < 2 * 300  # about one frame per transition
    restored = UniformReplayBuffer(capacity=300, seed=0, frames_device=storage)
    restored.set_state(state)
    for key, value in buf.transitions().items():
        np.testing.assert_array_equal(restored.transitions()[key], value)
    a, b = buf.sample(64), restored.sample(64)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    # and both go on identically
    more = frame_stacked_stream(150, 6)
    for target in (buf, restored):
        add_in_chunks(target, more, 6)
    check_exact(restored, stream + more)
    for key, value in buf.transitions().items():
        np.testing.assert_array_equal(restored.transitions()[key], value)


def test_vector_observations_are_stored_as_they_are():
    buf = UniformReplayBuffer(capacity=10, seed=0)
    buf.add({"obs": np.ones((3, 4), np.float32), "new_obs": np.ones((3, 4), np.float32),
             "rewards": np.arange(3, dtype=np.float32)})
    assert not buf.compact and buf.sample(5)["obs"].shape == (5, 4)


def _host(batch: dict) -> dict:
    return {k: v if isinstance(v, np.ndarray) else v.cpu().numpy() for k, v in batch.items()}


@pytest.mark.parametrize("ring", STORAGES[1:], ids=str)
def test_the_device_ring_draws_what_the_lz4_store_draws_and_their_checkpoints_are_interchangeable(ring):
    """The same adds and seed: byte-identical minibatches (same rows, same stack layout: the ring's tensors
    have the strides of the host path's arrays, so a learner computes on them exactly as before), the same
    checkpoint state (LZ4 frames) from both, and each storage restored from the other's state draws on as the
    original does."""
    stream = frame_stacked_stream(900, 11)
    host = UniformReplayBuffer(capacity=250, seed=3)
    dev = UniformReplayBuffer(capacity=250, seed=3, frames_device=ring)
    for buf in (host, dev):
        add_in_chunks(buf, stream[:600], 11)
    for _ in range(3):
        a, b = host.sample(96), dev.sample(96)
        assert torch.is_tensor(b["obs"]) and b["obs"].device.type == ring.type and isinstance(b["rewards"], np.ndarray)
        # (uint8: strides in bytes are strides in elements)
        assert b["obs"].shape == a["obs"].shape and b["obs"].stride() == a["obs"].strides
        for key, value in _host(b).items():
            np.testing.assert_array_equal(value, a[key])
    state_h, state_d = host.get_state(), dev.get_state()
    assert state_h["frames"]["frames"] == state_d["frames"]["frames"] and state_h["rng"] == state_d["rng"]
    from_dev = UniformReplayBuffer(capacity=250, frames_device=None)
    from_dev.set_state(state_d)
    from_host = UniformReplayBuffer(capacity=250, frames_device=ring)
    from_host.set_state(state_h)
    for buf in (host, dev, from_dev, from_host):
        add_in_chunks(buf, stream[600:], 12)  # going on past the restore, wrapping the ring
    draws = [_host(buf.sample(128)) for buf in (host, dev, from_dev, from_host)]
    for other in draws[1:]:
        for key, value in draws[0].items():
            np.testing.assert_array_equal(other[key], value)
    # memory: the ring holds capacity x frame bytes whatever is stored; the LZ4 store far less for these
    assert dev._frames.nbytes == dev._frames.capacity * H * W


def test_a_gpu_ring_that_does_not_fit_says_so_before_allocating(monkeypatch):
    """A ring larger than the GPU's free memory: one line naming the settings that fix it (not CUDA's
    out-of-memory traceback mid-run)."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (400 * 2**20, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 150 * 2**20)  # 100 MiB of it unused
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 50 * 2**20)
    with pytest.raises(MemoryError, match=r"needs 0\.72 GiB on cuda, 0\.49 GiB is free: lower "
                                          r"replay_buffer_config\['capacity'\] or set replay_frames_on_device=False"):
        FrameStore(110_256, (84, 84), 4, device=torch.device("cuda"))


class _Env:
    """A frame-stacked env that never ends: each step shifts in one new frame, unique to this env and step."""

    def __init__(self, env_id: int):
        self.id, self.t = env_id, 0
        self.stack = np.stack([self._frame() for _ in range(DEPTH)], axis=-1)

    def _frame(self) -> np.ndarray:
        self.t += 1
        frame = np.zeros((H, W), np.uint8)
        frame[0, :3] = self.id, self.t % 256, self.t // 256
        return frame

    def segment(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        obs, nxt = [], []
        for _ in range(n):
            obs.append(self.stack)
            self.stack = np.concatenate([self.stack[..., 1:], self._frame()[..., None]], axis=-1)
            nxt.append(self.stack)
        return np.stack(obs), np.stack(nxt)


def _add_chunk(buf, segments, added):
    """One chunk: the envs' segments one after another, as `segment_transitions` concatenates them."""
    obs = np.concatenate([s[0] for s in segments])
    nxt = np.concatenate([s[1] for s in segments])
    rewards = np.arange(len(added), len(added) + len(obs), dtype=np.float32)  # a transition's number
    buf.add({"obs": obs, "new_obs": nxt, "actions": np.zeros(len(obs), np.int64), "rewards": rewards,
             "terminateds": np.zeros(len(obs), np.float32)})
    added += list(zip(obs, nxt))


def _check_rows(buf, added):
    got = buf.transitions()
    for o, n, r in zip(got["obs"], got["new_obs"], got["rewards"]):
        np.testing.assert_array_equal(o, added[int(r)][0])
        np.testing.assert_array_equal(n, added[int(r)][1])


@storages
def test_a_chunk_that_goes_on_from_frames_the_ring_overwrote_is_dropped_not_kept_with_other_frames(storage):
    """An env whose chunk end is remembered, then goes on after more transitions than the frame ring's slack: its
    next transition reuses the remembered ids, older than every frame written since. Once the ring overwrites
    them, that transition goes with every older one. It used to stay in the buffer, its stacks made of other
    envs' frames (a row of `transitions()` differed from what was added), in both storages."""
    buf = UniformReplayBuffer(capacity=1000, seed=0, frames_device=storage)
    a, b, added = _Env(1), _Env(2), []
    _add_chunk(buf, [a.segment(1)], added)  # A's chunk end remembered
    _add_chunk(buf, [b.segment(800)], added)  # 800 fresh frames of B
    _add_chunk(buf, [a.segment(1)], added)  # A goes on: its obs reuses the remembered (now old) ids
    _add_chunk(buf, [b.segment(560)], added)  # the ring (1,356 frames) overwrites them
    _check_rows(buf, added)
    assert len(buf) == 560  # A's second transition and everything before it dropped
    assert buf.transitions()["rewards"][0] == 802  # the oldest kept: B's first transition after it


@storages
def test_interleaved_sub_envs_keep_the_whole_capacity_and_exact_stacks(storage):
    """The presets' case: 4 sub-envs' segments of 16 steps a chunk, each sub-env going on from its chunk end
    (ids older than the other sub-envs' newest): every transition noted out of order, none dropped for it (its
    frames outlive it), the buffer full at capacity, every row exact, across a checkpoint too."""
    envs, added = [_Env(k) for k in range(4)], []
    buf = UniformReplayBuffer(capacity=400, seed=0, frames_device=storage)
    for _ in range(20):  # 1,280 transitions: the buffer wraps three times
        _add_chunk(buf, [env.segment(16) for env in envs], added)
    assert len(buf) == 400 and buf._out_of_order  # out of order, yet kept
    _check_rows(buf, added)
    restored = UniformReplayBuffer(capacity=400, seed=0, frames_device=storage)
    restored.set_state(buf.get_state())
    chunks = [[env.segment(16) for env in envs] for _ in range(10)]
    more = list(added)
    for chunk in chunks:
        _add_chunk(buf, chunk, added)
        _add_chunk(restored, chunk, more)
    assert len(buf) == len(restored) == 400
    _check_rows(restored, more)
    for key, value in buf.transitions().items():
        np.testing.assert_array_equal(restored.transitions()[key], value)


class _StackByStack(UniformReplayBuffer):
    """The replay as it compared stacks before: each stack against the last one, one call at a time."""

    def _store_frames(self, batch):
        store, obs, next_obs = self._frames, batch["obs"], batch["new_obs"]
        obs_ids, next_ids = [], []
        for t in range(len(obs)):
            obs_ids.append(store.add_stack(obs[t]))
            next_ids.append(store.add_stack(next_obs[t]))
            if t + 1 == len(obs) or not np.array_equal(obs[t + 1], next_obs[t]):
                store.remember(next_obs[t], next_ids[-1])
        out = {k: v for k, v in batch.items() if k not in ("obs", "new_obs")}
        out["obs_ids"], out["new_obs_ids"] = np.stack(obs_ids), np.stack(next_ids)
        return out


@pytest.mark.parametrize("seed", range(6))
def test_comparing_a_batchs_stacks_in_one_pass_stores_what_comparing_them_one_by_one_stores(seed):
    """`_store_frames` compares a batch's stacks in three numpy passes and hands the answers to `add_stack`: the
    same frame ids, frames written and stored rows as comparing each stack as it comes, after every add, on
    interleaved envs whose frames repeat (equal stacks, equal frames), resets and non-shifted stacks."""
    rng = np.random.default_rng(seed)
    envs = [np.repeat(rng.integers(0, 3, (H, W, 1), dtype=np.uint8), DEPTH, -1) for _ in range(3)]
    capacity = int(rng.choice([50, 300]))
    fast, slow = UniformReplayBuffer(capacity, seed=seed), _StackByStack(capacity, seed=seed)
    for _ in range(60):
        chunk = []
        for _ in range(int(rng.integers(1, 4))):  # a chunk: a few envs' segments
            e = int(rng.integers(3))
            for _ in range(int(rng.integers(1, 10))):
                frame = envs[e][..., -1:] if rng.random() < 0.3 else rng.integers(0, 3, (H, W, 1), dtype=np.uint8)
                nxt = np.concatenate([envs[e][..., 1:], frame], -1)
                if rng.random() < 0.05:  # a reset: a stack that is no shift of the last
                    nxt = np.repeat(rng.integers(0, 3, (H, W, 1), dtype=np.uint8), DEPTH, -1)
                chunk.append((envs[e], nxt))
                envs[e] = nxt
        batch = {"obs": np.stack([c[0] for c in chunk]), "new_obs": np.stack([c[1] for c in chunk]),
                 "actions": np.zeros(len(chunk), np.int64), "rewards": np.arange(len(chunk), dtype=np.float32),
                 "terminateds": np.zeros(len(chunk), np.float32)}
        fast.add(batch)
        slow.add(batch)
        a, b = fast.get_state(), slow.get_state()
        assert a["arrays"] == b["arrays"] and a["frames"] == b["frames"] and a["size"] == b["size"]


def _frame_segments(rng, envs, count):
    """`count` EnvRunner segments of interleaved envs (each a shift chain of a few steps, a reset now and then
    starting the next), as stacks; frames from {0, 1, 2}, so that equal frames and equal stacks come often."""
    segments = []
    for _ in range(count):
        e = int(rng.integers(len(envs)))
        if rng.random() < 0.15:  # the env was reset: its next segment starts from a fresh stack
            envs[e] = np.repeat(rng.integers(0, 3, (H, W, 1), dtype=np.uint8), DEPTH, -1)
        stacks = [envs[e]]
        for _ in range(int(rng.integers(1, 12))):
            frame = stacks[-1][..., -1:] if rng.random() < 0.3 else rng.integers(0, 3, (H, W, 1), dtype=np.uint8)
            stacks.append(np.concatenate([stacks[-1][..., 1:], frame], -1))
        envs[e] = stacks[-1]
        n = len(stacks) - 1
        segments.append({"obs": np.stack(stacks), "actions": rng.integers(0, 4, n), "rewards":
                         rng.random(n).astype(np.float32), "terminated": False, "truncated": False})
    return segments


@storages
@pytest.mark.parametrize("seed", range(4))
def test_segments_sent_as_frames_store_what_their_stacks_store(seed, storage, monkeypatch):
    """An EnvRunner sends a frame-stacked segment's frames, each once (`frames_of`: a quarter of the bytes), and
    the replay stores them without building the stacks (`_store_frame_segments`): after every chunk, the same
    frame ids, frames, rows and draws as the stacks' path, with resets, repeated frames, equal stacks, chunks
    going on from a chunk end, a batch with a segment that is no chain (sent as stacks: the batch takes the
    stacks' path), the ring wrapping, and a checkpoint restored into either path."""
    from kappa_rllib.env_runner import segment_stacks, segment_transitions
    from kappa_rllib.replay import FRAMES, frames_of

    at_once = []  # segments stored at once (no equal stacks in them: `FrameStore.write_frames`)
    write_frames = FrameStore.write_frames
    monkeypatch.setattr(FrameStore, "write_frames", lambda self, frames: at_once.append(len(frames))
                        or write_frames(self, frames))
    rng = np.random.default_rng(seed)
    envs = [np.repeat(rng.integers(0, 3, (H, W, 1), dtype=np.uint8), DEPTH, -1) for _ in range(3)]
    capacity = int(rng.choice([40, 300]))
    stacks_path = UniformReplayBuffer(capacity, seed=seed, frames_device=storage)
    frames_path = UniformReplayBuffer(capacity, seed=seed, frames_device=storage)
    sent_as_frames = 0
    for chunk in range(50):
        segments = _frame_segments(rng, envs, int(rng.integers(1, 5)))
        packed = []
        for s in segments:
            frames = frames_of(list(s["obs"]))
            assert frames is not None and frames.shape == (len(s["obs"]) + DEPTH - 1, H, W)
            packed.append({FRAMES: frames, **{k: v for k, v in s.items() if k != "obs"}})
            np.testing.assert_array_equal(segment_stacks(packed[-1]), s["obs"])  # rebuilt bit for bit
        if chunk % 7 == 3:  # one segment that is no chain: sent as its stacks
            broken = segments[0]["obs"].copy()
            broken[-1, ..., 0] ^= 1
            assert frames_of(list(broken)) is None
            segments[0] = packed[0] = {**segments[0], "obs": broken}
            packed[0].pop(FRAMES, None)
        columns = segment_transitions(packed, frames=True)
        assert (FRAMES in columns) == (chunk % 7 != 3)
        sent_as_frames += FRAMES in columns
        stacks_path.add(segment_transitions(segments))
        frames_path.add(columns)
        a, b = stacks_path.get_state(), frames_path.get_state()
        assert a["arrays"] == b["arrays"] and a["frames"] == b["frames"] and a["size"] == b["size"]
    assert sent_as_frames > 40 and len(frames_path) == capacity
    assert len(at_once) > 10  # the at-once store taken (the add_stack loop where a segment has equal stacks)
    drawn = frames_path.sample(64)
    for key, value in stacks_path.sample(64).items():
        np.testing.assert_array_equal(np.asarray(drawn[key].cpu() if hasattr(drawn[key], "cpu") else drawn[key]),
                                      np.asarray(value.cpu() if hasattr(value, "cpu") else value))
    # a checkpoint of either path restored, then a chunk of each kind: the same again
    restored = [UniformReplayBuffer(capacity, seed=seed, frames_device=storage) for _ in range(2)]
    restored[0].set_state(stacks_path.get_state())
    restored[1].set_state(frames_path.get_state())
    more = _frame_segments(rng, envs, 4)
    packed = [{FRAMES: frames_of(list(s["obs"])), **{k: v for k, v in s.items() if k != "obs"}} for s in more]
    restored[0].add(segment_transitions(more))
    restored[1].add(segment_transitions(packed, frames=True))
    a, b = restored[0].get_state(), restored[1].get_state()
    assert a["arrays"] == b["arrays"] and a["frames"] == b["frames"] and len(restored[1]) == capacity


def test_frames_of_sends_only_chains_of_uint8_frame_stacks():
    """What is not a chain of uint8 stacks shifting by one frame goes as it is: vector observations, float images,
    single-channel images, and stacks whose frames do not shift."""
    from kappa_rllib.replay import frame_stacks, frames_of

    rng = np.random.default_rng(0)
    assert frames_of([rng.random(17), rng.random(17)]) is None
    assert frames_of([rng.random((H, W, DEPTH)).astype(np.float32)] * 2) is None
    assert frames_of([rng.integers(0, 256, (H, W, 1), dtype=np.uint8)] * 2) is None
    assert frames_of([3, 4]) is None  # (observations that are no arrays)
    u8 = rng.integers(0, 256, (H, W, DEPTH), dtype=np.uint8)
    shifted = np.concatenate([u8[..., 1:], u8[..., :1]], -1)
    assert frames_of([u8, shifted]) is not None
    assert frames_of([u8, shifted.astype(np.float64)]) is None  # a chain, but a later stack of another dtype
    a = rng.integers(0, 256, (H, W, DEPTH), dtype=np.uint8)
    assert frames_of([a, rng.integers(0, 256, (H, W, DEPTH), dtype=np.uint8)]) is None
    b = np.concatenate([a[..., 1:], rng.integers(0, 256, (H, W, 1), dtype=np.uint8)], -1)
    frames = frames_of([a, b])
    assert frames.shape == (DEPTH + 1, H, W) and frames.nbytes * 2 == np.stack([a, b]).nbytes * (DEPTH + 1) / DEPTH
    np.testing.assert_array_equal(frame_stacks(frames, DEPTH), np.stack([a, b]))
    np.testing.assert_array_equal(frame_stacks(frames_of([a]), DEPTH), a[None])  # a lone stack: its own frames


@storages
def test_a_segment_going_on_from_frames_the_ring_overwrote_is_stored_as_its_stacks_store_it(storage):
    """The frames path stores a chain segment at once (its first stack through `add_stack`, then one new frame a
    step: `FrameStore.write_frames`). A sub-env going on from a chunk end remembered before the ring overwrote
    its ids: its first stack is written whole again, the rest one frame a step, exactly what the stacks store."""
    from kappa_rllib.env_runner import segment_transitions
    from kappa_rllib.replay import FRAMES, frames_of

    rng = np.random.default_rng(0)

    def segment(stack, n):
        stacks = [stack]
        for _ in range(n):
            stacks.append(np.concatenate([stacks[-1][..., 1:], rng.integers(0, 256, (H, W, 1), dtype=np.uint8)], -1))
        return {"obs": np.stack(stacks), "actions": np.zeros(n, np.int64), "rewards": rng.random(n).astype(np.float32),
                "terminated": False, "truncated": False}

    def packed(seg):
        return {FRAMES: frames_of(list(seg["obs"])), **{k: v for k, v in seg.items() if k != "obs"}}

    a, b = (np.repeat(rng.integers(0, 256, (H, W, 1), dtype=np.uint8), DEPTH, -1) for _ in range(2))
    stacks_path = UniformReplayBuffer(10, seed=0, frames_device=storage)  # a ring of 267 frames
    frames_path = UniformReplayBuffer(10, seed=0, frames_device=storage)
    chunks = [[segment(a, 1)]]  # A's chunk end remembered
    for _ in range(26):  # then 264 frames of B, 10 transitions a chunk (the buffer's capacity)
        chunks.append([segment(b, 10)])
        b = chunks[-1][0]["obs"][-1]
    chunks.append([segment(chunks[0][0]["obs"][-1], 10)])  # A goes on: its remembered ids overwritten
    for chunk in chunks:
        before = frames_path._frames.written if frames_path.compact else 0
        stacks_path.add(segment_transitions(chunk))
        frames_path.add(segment_transitions([packed(s) for s in chunk], frames=True))
        x, y = stacks_path.get_state(), frames_path.get_state()
        assert x["arrays"] == y["arrays"] and x["frames"] == y["frames"] and x["size"] == y["size"]
    assert frames_path._frames.written - before == DEPTH + 10  # A's first stack whole again, then a frame a step
