"""The frame-deduplicating replay of Atari stacks: every sampled stack is exactly the stack the
env returned, across episode boundaries, chunked adds and buffer wrap-around; checkpoints."""

import numpy as np
import pytest

from kappa_rllib.replay import UniformReplayBuffer

H, W, DEPTH = 6, 5, 4


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


@pytest.mark.parametrize("seed", [0, 1])
def test_stacks_are_exact_across_episodes_chunks_and_wraparound(seed):
    buf = UniformReplayBuffer(capacity=200, seed=seed)
    stream = frame_stacked_stream(1000, seed)  # wraps the buffer 5 times
    add_in_chunks(buf, stream, seed)
    assert buf.compact and len(buf) == 200
    stored = check_exact(buf, stream)
    np.testing.assert_array_equal(stored["rewards"], [p[2] for p in stream[-200:]])  # the newest 200, in order
    # one frame per step plus a whole stack at each episode start: far below 2 x 4 frames per step
    episodes = sum(p[3] for p in stream) + 1
    assert buf._frames.written <= len(stream) + DEPTH * episodes


def test_stacks_that_share_no_frames_are_stored_whole_and_stay_exact():
    rng = np.random.default_rng(3)
    stream = [(rng.integers(0, 256, (H, W, DEPTH), dtype=np.uint8), rng.integers(0, 256, (H, W, DEPTH), dtype=np.uint8),
               float(t), 0.0) for t in range(300)]
    buf = UniformReplayBuffer(capacity=100, seed=0)
    add_in_chunks(buf, stream, 0)
    assert 0 < len(buf) <= 100  # transitions whose frames were overwritten are dropped, never corrupted
    check_exact(buf, stream)


def test_checkpoint_round_trip_keeps_the_compact_form_and_the_samples():
    stream = frame_stacked_stream(500, 5)
    buf = UniformReplayBuffer(capacity=300, seed=7)
    add_in_chunks(buf, stream, 5)
    state = buf.get_state()
    assert "obs" not in state["arrays"] and tuple(state["frames"]["frame_shape"]) == (H, W)
    assert all(isinstance(f, bytes) for f in state["frames"]["frames"])  # compressed frames
    assert len(state["frames"]["frames"]) < 2 * 300  # about one frame per transition
    restored = UniformReplayBuffer(capacity=300, seed=0)
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
