"""A uniform replay buffer of raw, unshaped transitions (s, a, r, s', terminated).

The paper's DQN uses uniform replay (no prioritisation). Transitions are stored flat in
preallocated numpy arrays: adding is one slice copy, sampling one fancy-index gather, and
the whole buffer (arrays, RNG) is plain state that a checkpoint can carry. Frame-stacked
image observations (Atari) are stored one frame at a time (`FrameStore`): ~8x less memory
than two full stacks per transition; in host memory each frame LZ4-compressed (~100x less),
or, on the learner's device, an uncompressed uint8 ring the minibatches are gathered from
there (no decompression, no host-to-device copy of stacks; see `FrameStore`).
Rewards are stored unshaped: the learner shapes them with the current V_phi at update time.
"""

from __future__ import annotations

import heapq

import lz4.block
import numpy as np
from ray.rllib.core.columns import Columns

OBS, ACTIONS, REWARDS, NEXT_OBS, TERMINATEDS, EPS_ID = (
    Columns.OBS, Columns.ACTIONS, Columns.REWARDS, Columns.NEXT_OBS, Columns.TERMINATEDS, Columns.EPS_ID
)
# A segment's (`kappa_rllib.env_runner`) observations as frames, each once: an EnvRunner sends these instead of its
# stacks where every stack is the one before shifted by one new frame (a frame-stacked env's episode: Atari), and
# the replay stores them without building the stacks (`UniformReplayBuffer._store_frame_segments`).
FRAMES = "frames"


def frames_of(stacks: list) -> np.ndarray | None:
    """The frames of consecutive uint8 (H, W, depth) stacks, each frame once, (n + depth, H, W): stack t is
    frames[t : t + depth], channels last (`frame_stacks`). None unless every stack is the one before it shifted by
    one frame (the check is exact: a chain that passes it is rebuilt bit for bit)."""
    first = stacks[0]
    if not (isinstance(first, np.ndarray) and first.dtype == np.uint8 and first.ndim == 3 and first.shape[-1] > 1):
        return None
    if len(stacks) > 1 and not np.array_equal(np.moveaxis(stacks[1], -1, 0)[:-1], np.moveaxis(first, -1, 0)[1:]):
        return None  # (images whose channels are no frame stack: known at the first pair)
    planes = np.stack([np.moveaxis(s, -1, 0) for s in stacks])  # (n + 1, depth, H, W)
    if planes.dtype != np.uint8 or not (planes[1:, :-1] == planes[:-1, 1:]).all():
        return None
    return np.concatenate([planes[0], planes[1:, -1]])


def frame_stacks(frames: np.ndarray, depth: int) -> np.ndarray:
    """`frames_of`'s inverse as a read-only view, no copy: (len(frames) - depth + 1, H, W, depth)."""
    return np.lib.stride_tricks.sliding_window_view(frames, depth, axis=0)


class FrameStore:
    """Stacked image observations stored one frame at a time (Atari: 84x84x4 uint8 stacks).

    Consecutive stacks of a frame-stacked env share 3 of their 4 frames, and a transition's
    next observation is the following transition's observation: storing every frame once
    instead of two full stacks per transition cuts replay memory ~8x (100k Atari transitions:
    ~0.7 GB instead of 5.6 GB), as SB3's `optimize_memory_usage` and Dopamine's circular
    buffer do. Exactness does not rest on that assumption: each stack is checked against the
    stack whose frames it would reuse and written whole when it does not match, and a
    transition whose frames the ring overwrote is dropped (`UniformReplayBuffer._drop_overwritten`),
    so a sampled stack is always byte for byte the stack that was added.

    Frames live in a ring of `capacity` frames addressed by global ids (ever increasing); a stack
    is 4 ids. Two storages of
    the ring, the same ids, samples and checkpoints (tested equal):
    * `device=None`: in host memory, each frame LZ4-compressed (Atari frames: ~17x smaller, ~4 us
      to compress, ~7 us to decompress), so the paper's 100k-transition buffer holds ~45 MB of
      frames; sampling decompresses each distinct frame of a minibatch once.
    * `device` a torch device (the learner's): one uncompressed uint8 tensor of
      (capacity, H, W) there (~0.78 GB for 100k Atari transitions). An add copies only its new
      frames, in one host-to-device copy; a draw is one gather on the device from index arrays,
      so a GPU learner's minibatches never cross the bus and nothing is decompressed.
      Checkpoints still hold LZ4 frames (the same state as the host storage's).
    """

    RECENT = 64  # chunk-end stacks remembered, so a continuing episode chunk reuses its frames

    def __init__(self, capacity: int, frame_shape: tuple, depth: int, device=None):
        self.capacity, self.depth = int(capacity), int(depth)
        self.frame_shape = tuple(int(n) for n in frame_shape)
        self._frame_bytes = int(np.prod(self.frame_shape))
        self.device = device
        if device is None:
            self.frames: list[bytes | None] = [None] * self.capacity  # LZ4 blocks
        else:
            import torch

            need = self.capacity * self._frame_bytes
            # free: the device's, plus what torch's allocator holds unused (a ring replaced on a restore lands there)
            free = 0 if torch.device(device).type != "cuda" else (
                torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device)
                - torch.cuda.memory_allocated(device))
            if torch.device(device).type == "cuda" and need > free:
                raise MemoryError(
                    f"the replay's frame ring needs {need / 2**30:.2f} GiB on {device}, {free / 2**30:.2f} GiB is "
                    f"free: lower replay_buffer_config['capacity'] or set replay_frames_on_device=False (frames "
                    f"LZ4-compressed in host memory)")
            self.frames = torch.zeros((self.capacity,) + self.frame_shape, dtype=torch.uint8, device=device)
        self._pending: list[np.ndarray] = []  # device storage: frames written since the last flush
        self.written = 0  # frames written, all time (the next global id)
        self._prev: tuple[np.ndarray, np.ndarray] | None = None  # (stack, ids) of the last stack
        self._recent: dict[bytes, np.ndarray] = {}

    @staticmethod
    def applies_to(array: np.ndarray) -> bool:
        """uint8 stacks of 2-D frames, channels last (what kappa_rllib.envs makes for Atari)."""
        return array.dtype == np.uint8 and array.ndim == 4 and array.shape[-1] > 1

    @property
    def nbytes(self) -> int:
        """Bytes held by the stored frames (compressed in host memory; the whole ring on a device)."""
        if self.device is not None:
            return self.frames.numel()
        return sum(len(b) for b in self.frames if b is not None)

    def _write(self, frame: np.ndarray) -> int:
        if self.device is None:
            self.frames[self.written % self.capacity] = lz4.block.compress(
                np.ascontiguousarray(frame).tobytes(), store_size=False)
        else:
            self._pending.append(frame)  # (copied to the device in one go: `flush`)
        self.written += 1
        return self.written - 1

    def flush(self) -> None:
        """Device storage: the frames written since the last flush, copied into the ring in one
        host-to-device copy (pinned, not blocking the host, on a GPU)."""
        if not self._pending:
            return
        import torch

        pending, self._pending = self._pending[-self.capacity :], []  # (older ones are overwritten anyway)
        first = self.written - len(pending)
        slots = torch.from_numpy(np.arange(first, self.written) % self.capacity)
        frames = torch.from_numpy(np.stack(pending))
        if self.frames.device.type == "cuda":
            slots = slots.pin_memory().to(self.frames.device, non_blocking=True)
            frames = frames.pin_memory().to(self.frames.device, non_blocking=True)
        self.frames.index_copy_(0, slots, frames)  # (distinct slots: at most `capacity` consecutive ids)

    def _frame(self, frame_id: int) -> np.ndarray:
        raw = lz4.block.decompress(self.frames[frame_id % self.capacity], uncompressed_size=self._frame_bytes)
        return np.frombuffer(raw, np.uint8).reshape(self.frame_shape)

    def _gather(self, ids: np.ndarray):
        """Stacks for an (..., depth) array of ids: (..., H, W, depth), a numpy array in host
        memory, a tensor on the device of a device storage (the same strides either way: the
        frames of a stack adjacent, the stack axis moved last)."""
        ids = np.asarray(ids)
        if self.device is not None:
            import torch

            self.flush()
            index = torch.from_numpy(ids.reshape(-1) % self.capacity)
            if self.frames.device.type == "cuda":
                index = index.pin_memory().to(self.frames.device, non_blocking=True)
            # (index_select: ~8x faster than `frames[index]` on a CPU, measured on Atari frames)
            gathered = torch.index_select(self.frames, 0, index)
            return torch.movedim(gathered.reshape(ids.shape + self.frame_shape), -3, -1)
        unique, inverse = np.unique(ids.reshape(-1), return_inverse=True)
        decoded = np.stack([self._frame(int(u)) for u in unique])
        return np.moveaxis(decoded[inverse].reshape(ids.shape + self.frame_shape), -3, -1)

    def _alive(self, ids: np.ndarray) -> bool:
        return ids.min() >= self.written - self.capacity

    def alive_after(self, ids: np.ndarray, frames: int) -> bool:
        """Whether `ids` stay alive while `frames` more frames are written, and each of those while the rest are
        (a stack's ids rise, so a chain whose first stack is alive stays so; this also checks the ring's size)."""
        return ids.min() >= self.written + frames - self.capacity and self.capacity > self.depth + frames

    def write_frames(self, frames: np.ndarray) -> np.ndarray:
        """Writes frames (n, H, W) in order, as n `_write` calls; their ids."""
        first = self.written
        if self.device is None:
            for frame in frames:
                self._write(frame)
        else:
            self._pending.extend(frames)  # (copied to the device in one go: `flush`)
            self.written += len(frames)
        return np.arange(first, self.written, dtype=np.int64)

    def follow(self, stack: np.ndarray, ids: np.ndarray) -> None:
        """`stack` (ids `ids`) is the last stack given: the next is compared with it (what `add_stack` notes)."""
        self._prev = (stack, ids)

    def add_stack(self, stack: np.ndarray, equal: bool | None = None, shifted: bool | None = None) -> np.ndarray:
        """The ids of `stack`, writing only the frames not already stored. `equal` / `shifted`: whether `stack`
        equals the last stack added / is it shifted by one frame, where the caller compared them already (in one
        pass over a batch: `UniformReplayBuffer._store_frames`); None: compared here."""
        if self._prev is not None and self._alive(self._prev[1]):
            prev, prev_ids = self._prev
            if np.array_equal(stack, prev) if equal is None else equal:
                return prev_ids
            if np.array_equal(stack[..., :-1], prev[..., 1:]) if shifted is None else shifted:  # one new frame
                ids = np.append(prev_ids[1:], self._write(stack[..., -1]))
                self._prev = (stack, ids)
                return ids
        # a remembered chunk end: its ids hold exactly these bytes (`remember` keeps only ids `add_stack` gave
        # for them, and a live id's frame never changes), so they are reused without reading the frames back
        ids = self._recent.get(stack.tobytes())
        if ids is None or not self._alive(ids):
            ids = np.array([self._write(stack[..., k]) for k in range(self.depth)], np.int64)
        self._prev = (stack, ids)
        return ids

    def remember(self, stack: np.ndarray, ids: np.ndarray) -> None:
        """Keeps a chunk's last stack findable (EnvRunners return episodes in chunks)."""
        self._recent[stack.tobytes()] = ids
        while len(self._recent) > self.RECENT:
            self._recent.pop(next(iter(self._recent)))

    def get_state(self, oldest_id: int) -> dict:
        """The live frames, LZ4-compressed (whatever the storage), oldest first."""
        if self.device is None:
            frames = [self.frames[i % self.capacity] for i in range(oldest_id, self.written)]
        else:
            frames = []
            for first in range(oldest_id, self.written, 8192):  # (pieces: a bounded extra on the device)
                ids = np.arange(first, min(first + 8192, self.written))[:, None]
                held = self._gather(ids)[..., 0].cpu().numpy()  # (n, H, W)
                frames += [lz4.block.compress(np.ascontiguousarray(f).tobytes(), store_size=False) for f in held]
        return {"frames": frames, "first_id": oldest_id, "written": self.written}

    def set_state(self, state: dict) -> None:
        self._pending = []
        if self.device is None:
            for i, frame in zip(range(state["first_id"], state["written"]), state["frames"]):
                self.frames[i % self.capacity] = frame
            self.written = state["written"]
        else:
            self.written = state["first_id"]
            for frame in state["frames"]:  # (written through the ring in one copy: `flush`)
                raw = lz4.block.decompress(frame, uncompressed_size=self._frame_bytes)
                self._write(np.frombuffer(raw, np.uint8).reshape(self.frame_shape))
            self.flush()
            self.written = state["written"]
        self._prev, self._recent = None, {}


def stacks_of_frame_segments(batch: dict, depth: int | None = None) -> dict[str, np.ndarray]:
    """A batch with `FRAMES` as one with obs and next obs stacks (`segment_transitions`' columns, same order)."""
    segments = batch[FRAMES]
    if depth is None:  # (n + depth frames for n transitions)
        depth = len(segments[0]) - int(np.sum(np.asarray(batch[EPS_ID]) == batch[EPS_ID][0]))
    stacks = [frame_stacks(frames, depth) for frames in segments]
    out = {OBS: np.concatenate([s[:-1] for s in stacks]), NEXT_OBS: np.concatenate([s[1:] for s in stacks])}
    out.update((k, v) for k, v in batch.items() if k != FRAMES)
    return out


_PACK_CHUNK = 1 << 28  # bytes per LZ4 block (lz4.block takes < 2 GiB per call)


def pack_array(array: np.ndarray) -> dict:
    """An array as LZ4 blocks, for checkpoints: a replay's observations are mostly repeated
    bytes (MinAtar's 0/1 float32 channels: 47x smaller on Breakout, 20x on SpaceInvaders, measured),
    and a checkpoint is written often."""
    if array.dtype.hasobject:  # Python objects have no bytes to pack: pickled as they are
        return array
    raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)  # the column's bytes, not a copy
    blocks = [lz4.block.compress(raw[i : i + _PACK_CHUNK]) for i in range(0, len(raw), _PACK_CHUNK)]
    return {"lz4_blocks": blocks, "dtype": array.dtype.str, "shape": array.shape}


def unpack_array(packed) -> np.ndarray:
    """`pack_array`'s inverse; a plain array (a checkpoint written before packing) passes through."""
    if isinstance(packed, np.ndarray):
        return packed
    raw = b"".join(lz4.block.decompress(b) for b in packed["lz4_blocks"])
    return np.frombuffer(raw, dtype=np.dtype(packed["dtype"])).reshape(packed["shape"]).copy()


class UniformReplayBuffer:
    """Uniform replay of raw transitions; image stacks go through a `FrameStore`."""

    FRAME_SLACK = 1.1  # frame ring size / transition capacity: room for episode starts (~1.01 used)

    def __init__(self, capacity: int, seed: int | None = None, frames_device=None):
        """`frames_device`: None keeps image frames LZ4-compressed in host memory; a torch device
        keeps them in an uncompressed ring there, and `sample` returns their stacks as tensors on
        it (`FrameStore`). Other observations and columns are numpy arrays in host memory."""
        if capacity < 1:
            raise ValueError(f"replay_buffer_config['capacity'] must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.frames_device = frames_device
        self._arrays: dict[str, np.ndarray] | None = None
        self._frames: FrameStore | None = None
        self._next = 0
        self._size = 0
        self._init_frame_order()
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._size

    @classmethod
    def frame_ring_size(cls, capacity: int) -> int:
        """Frames the `FrameStore` of a `capacity`-transition buffer holds (its slack: episode starts, chunk ends)."""
        return int(capacity * cls.FRAME_SLACK) + 4 * FrameStore.RECENT

    @property
    def compact(self) -> bool:
        """Whether observations are stored frame by frame."""
        return self._frames is not None

    def _allocate(self, batch: dict[str, np.ndarray], compact: bool | None = None) -> None:
        if compact is None:
            compact = FrameStore.applies_to(batch[OBS])
        shapes = {k: (v.shape[1:], v.dtype) for k, v in batch.items()}
        if compact:
            (h, w, depth), _ = shapes.pop(OBS)
            shapes.pop(NEXT_OBS)
            shapes[OBS + "_ids"] = shapes[NEXT_OBS + "_ids"] = ((depth,), np.int64)
            frames = self.frame_ring_size(self.capacity)
            self._frames = FrameStore(frames, (h, w), depth, device=self.frames_device)
        self._arrays = {k: np.zeros((self.capacity,) + shape, dtype=dtype) for k, (shape, dtype) in shapes.items()}

    def add(self, batch: dict[str, np.ndarray]) -> None:
        """Adds n transitions given as arrays with a leading axis of length n."""
        n = len(batch[REWARDS])
        if n == 0:
            return
        if FRAMES in batch and (self._arrays is None or self._frames is None or n > self.capacity):
            batch = stacks_of_frame_segments(batch, self._frames.depth if self._frames else None)
        if self._arrays is None:
            self._allocate(batch)
        if n > self.capacity:  # only the newest `capacity` transitions survive
            batch = {k: v[-self.capacity :] for k, v in batch.items()}
            n = self.capacity
        if FRAMES in batch:
            batch = self._store_frame_segments(batch)
        elif self._frames is not None:
            batch = self._store_frames(batch)
        idx = (self._next + np.arange(n)) % self.capacity
        for k, v in batch.items():
            self._arrays[k][idx] = v
        self._next = (self._next + n) % self.capacity
        self._size = min(self._size + n, self.capacity)
        if self._frames is not None:
            self._note_frame_order(batch[OBS + "_ids"], batch[NEXT_OBS + "_ids"])
        self._drop_overwritten()
        if self._frames is not None:
            self._frames.flush()

    def _store_frames(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The batch with its image stacks replaced by frame ids. The stacks are compared in three passes over the
        batch (numpy, not a call per stack): each obs with the previous transition's next obs (`goes_on`), and each
        next obs with its obs (`same`, `shifted`); `FrameStore.add_stack` takes those answers, since the last stack
        it was given holds exactly those bytes (the previous next obs, or this obs)."""
        store, obs, next_obs = self._frames, batch[OBS], batch[NEXT_OBS]
        axes = tuple(range(1, obs.ndim))
        goes_on = np.zeros(len(obs), bool)
        goes_on[1:] = (obs[1:] == next_obs[:-1]).all(axis=axes)
        same = (next_obs == obs).all(axis=axes)
        shifted = (next_obs[..., :-1] == obs[..., 1:]).all(axis=axes)
        obs_ids, next_ids = [], []
        for t in range(len(obs)):
            obs_ids.append(store.add_stack(obs[t], equal=bool(goes_on[t]) if t else None))
            next_ids.append(store.add_stack(next_obs[t], equal=bool(same[t]), shifted=bool(shifted[t])))
            if t + 1 == len(obs) or not goes_on[t + 1]:  # a chunk ends
                store.remember(next_obs[t], next_ids[-1])
        out = {k: v for k, v in batch.items() if k not in (OBS, NEXT_OBS)}
        out[OBS + "_ids"], out[NEXT_OBS + "_ids"] = np.stack(obs_ids), np.stack(next_ids)
        return out

    def _store_frame_segments(self, batch: dict) -> dict[str, np.ndarray]:
        """`_store_frames` for a batch whose observations came as frames (`FRAMES`: per segment, in the rows'
        order), without building its stacks: `FrameStore.add_stack` gets the same calls in the same order with
        the same answers, so the frame ids, frames and rows are those `_store_frames` gives the stacks. Inside a
        segment each stack is the one before shifted by one frame (what `frames_of` checked), and equal to it only
        where its depth + 1 frames are all equal: one compare per frame instead of three per stack. A segment with
        no equal stacks is stored at once, its answers known: after its first stack, one new frame a step."""
        store, depth = self._frames, self._frames.depth
        obs_ids, next_ids = [], []
        last = None  # (stack, ids) of the previous segment's last next obs
        for frames in batch[FRAMES]:
            stacks = frame_stacks(frames, depth)
            equal_frames = (frames[1:] == frames[:-1]).reshape(len(frames) - 1, -1).all(axis=1)
            same = np.lib.stride_tricks.sliding_window_view(equal_frames, depth).all(axis=1)  # s_{t+1} == s_t
            if last is None:
                goes_on = None  # the batch's first obs: `add_stack` compares it with the last stack it was given
            else:
                goes_on = bool(np.array_equal(stacks[0], last[0]))
                if not goes_on:  # a chunk ends
                    store.remember(*last)
            m = len(stacks) - 1
            first = store.add_stack(stacks[0], equal=goes_on)
            if not same.any() and store.alive_after(first, m):
                # the common case at once: each next stack shifts in one new frame, and every id stays alive
                # while the segment's m frames are written, so `add_stack`'s answers are known: stack t's ids
                # are ids[t : t + depth] of the first stack's ids followed by the new ones
                ids = np.concatenate([first, store.write_frames(frames[depth:])])
                window = np.lib.stride_tricks.sliding_window_view(ids, depth)
                obs_ids.extend(window[:-1])
                next_ids.extend(window[1:])
                store.follow(stacks[-1], window[-1])
            else:
                for t in range(m):
                    obs_ids.append(first if t == 0 else store.add_stack(stacks[t], equal=True))
                    next_ids.append(store.add_stack(stacks[t + 1], equal=bool(same[t]), shifted=True))
            last = (stacks[-1], next_ids[-1])
        store.remember(*last)
        out = {k: v for k, v in batch.items() if k != FRAMES}
        out[OBS + "_ids"], out[NEXT_OBS + "_ids"] = np.stack(obs_ids), np.stack(next_ids)
        return out

    def _oldest(self) -> int:
        return (self._next - self._size) % self.capacity

    # ----- which transitions' frames the ring overwrote
    # A transition's frames are alive while its oldest frame id is (`FrameStore._alive`). Transitions mostly come
    # with ever larger ids, so that dropping the oldest transitions while theirs are dead keeps every stored
    # transition's frames alive. Not always: a sub-env's chunk continuing after other sub-envs' segments reuses
    # the ids remembered at its chunk end (`FrameStore.remember`), older than theirs. Such a transition (its oldest
    # id below the largest oldest id added before it) is noted in a heap by its oldest id; once that id is
    # overwritten, it goes with every transition older than it, instead of staying in the buffer with frames that
    # are no longer its own (in the presets' runs this never happens: a chunk's frames are far fewer than the
    # ring's slack of 0.1 x capacity + 256 frames).
    def _init_frame_order(self) -> None:
        self._added = 0  # transitions added, all time (a transition's index: its count before it)
        self._watermark = -1  # the largest oldest-frame id of any transition added
        self._out_of_order: list[tuple[int, int]] = []  # heap of (oldest frame id, index) of such transitions

    def _note_frame_order(self, obs_ids: np.ndarray, next_ids: np.ndarray) -> None:
        oldest = np.minimum(obs_ids.min(axis=1), next_ids.min(axis=1))
        before = np.maximum.accumulate(np.concatenate([[self._watermark], oldest]))[:-1]
        for k in np.flatnonzero(oldest < before):
            heapq.heappush(self._out_of_order, (int(oldest[k]), self._added + int(k)))
        self._watermark = max(self._watermark, int(oldest.max()))
        self._added += len(oldest)
        if len(self._out_of_order) > 2 * self.capacity + 64:  # (entries of transitions gone already: pruned)
            first = self._added - self._size  # (the oldest stored transition's index: `add` counted this batch in)
            self._out_of_order = [entry for entry in self._out_of_order if entry[1] >= first]
            heapq.heapify(self._out_of_order)

    def _drop_overwritten(self) -> None:
        """Forgets the oldest transitions while any stored transition's frames were overwritten (rare: only when
        stacks share no frames, e.g. many interleaved episode chunks; see `_init_frame_order`)."""
        if self._frames is None:
            return
        limit = self._frames.written - self._frames.capacity
        while self._out_of_order and self._out_of_order[0][0] < limit:
            _, index = heapq.heappop(self._out_of_order)
            if index >= self._added - self._size:  # still stored: it goes, and every transition older than it
                self._size = self._added - index - 1
        obs_ids, next_ids = self._arrays[OBS + "_ids"], self._arrays[NEXT_OBS + "_ids"]
        while self._size and min(obs_ids[self._oldest()].min(), next_ids[self._oldest()].min()) < limit:
            self._size -= 1

    def sample(self, n: int) -> dict:
        """n transitions drawn uniformly with replacement (image stacks on `frames_device`, if set)."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return self._rows(self._rng.integers(0, self._size, size=n))

    def transitions(self) -> dict[str, np.ndarray]:
        """All stored transitions, oldest first, observations as full stacks, all numpy arrays in host
        memory (for tests/inspection)."""
        if not self._size:
            return {}
        rows = self._rows(np.arange(self._size))
        return {k: v if isinstance(v, np.ndarray) else v.cpu().numpy() for k, v in rows.items()}

    def _rows(self, positions: np.ndarray) -> dict:
        """Transitions at `positions` (0 = oldest); image stacks rebuilt from their frames, obs and
        next obs in one pass (they share most frames, each is decompressed once)."""
        idx = (self._oldest() + positions) % self.capacity
        out = {k: v[idx] for k, v in self._arrays.items()}
        if self._frames is not None:
            both = self._frames._gather(np.stack([out.pop(OBS + "_ids"), out.pop(NEXT_OBS + "_ids")]))
            out[OBS], out[NEXT_OBS] = both[0], both[1]
        return out

    def get_state(self) -> dict:
        """Plain state for checkpoints: the live transitions, oldest first, in the stored
        (compact, for image stacks) form, each column LZ4-packed (`pack_array`)."""
        arrays, frames = None, None
        if self._arrays is not None:
            idx = (self._oldest() + np.arange(self._size)) % self.capacity
            arrays = {k: v[idx] for k, v in self._arrays.items()}
            if self._frames is not None:
                oldest = self._frames.written
                if self._size:
                    oldest = int(min(arrays[OBS + "_ids"].min(), arrays[NEXT_OBS + "_ids"].min()))
                frames = self._frames.get_state(oldest)
                frames["frame_shape"], frames["depth"] = self._frames.frame_shape, self._frames.depth
            arrays = {k: pack_array(v) for k, v in arrays.items()}
        return {
            "capacity": self.capacity,
            "arrays": arrays,
            "frames": frames,
            "size": self._size,
            "rng": self._rng.bit_generator.state,
        }

    def set_state(self, state: dict) -> None:
        if state["capacity"] != self.capacity:
            raise ValueError(
                f"checkpointed replay capacity {state['capacity']} != configured {self.capacity}"
            )
        self._arrays, self._frames = None, None
        arrays, frames = state["arrays"], state.get("frames")
        self._size = state["size"]
        self._next = self._size % self.capacity
        if arrays is not None:
            arrays = {k: unpack_array(v) for k, v in arrays.items()}
            if frames is not None:
                h, w = frames["frame_shape"]
                dummy = {OBS: np.zeros((1, h, w, frames["depth"]), np.uint8)}
                dummy[NEXT_OBS] = dummy[OBS]
                dummy.update({k: v[:1] for k, v in arrays.items() if not k.endswith("_ids")})
                self._allocate(dummy, compact=True)
                self._frames.set_state(frames)
            else:
                self._allocate(arrays, compact=False)
            for k, v in arrays.items():
                self._arrays[k][: len(v)] = v
        self._init_frame_order()
        if self._frames is not None and self._size:  # (the stored transitions, oldest first, as if added now)
            self._note_frame_order(self._arrays[OBS + "_ids"][: self._size], self._arrays[NEXT_OBS + "_ids"][: self._size])
        else:
            self._added = self._size
        self._rng.bit_generator.state = state["rng"]
