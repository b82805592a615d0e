"""The acting weights in shared memory, for the remote EnvRunners on the learner's own node.

Every sampling request carries the acting weights (`kappa_rllib.algorithms.sampling`), and with one runner they
change every chunk. Through Ray's object store each new version costs the driver a `ray.put` (~1 ms for MinAtar's
0.5 MB on the 2-core machine, whatever the size: the object's create, seal and pin), in series with its gradient
steps. A runner on the driver's node reads them instead from a file in `/dev/shm` that the driver writes (one
copy, ~20 us for 0.5 MB); runners on other nodes take the object-store reference as before.

Layout: two slots, each a header (the version it holds, -1 while written) and the weights' arrays end to end
(`Layout`: each array's place, dtype and shape; the state's other leaves travel with the request). The Sampler writes
a version when it sends the first request that acts with it, and it sends requests only when none is in flight:
no runner reads while a slot is written, and the two slots alternate besides. A request carries the version and
slot it acts with (`Handle`); the reader checks the slot's header before and after its copy, and a mismatch
(which the one request in flight rules out) raises `SharedWeightsGone` rather than act with torn weights.

The file is reserved in full at creation (`posix_fallocate`: a full `/dev/shm` is an OSError then, never a crash
on a later write), removed by `close` (the Sampler's, at the algorithm's stop) or when the driver process exits;
files left by a killed process are removed by the next `SharedWeights` on that node (in the same PID namespace). Where `/dev/shm` is missing
(macOS) or cannot hold the file, or `KAPPA_RLLIB_SHARED_WEIGHTS=0` is set, the Sampler uses the object store.
"""

from __future__ import annotations

import atexit
import mmap
import os
import uuid
import weakref
from dataclasses import dataclass

import numpy as np

SHM_DIR = "/dev/shm"
PREFIX = "kappa_rllib_weights_"
HEADER = 64  # bytes before a slot's arrays: the version (int64), the rest alignment
ALIGN = 64


class SharedWeightsGone(RuntimeError):
    """A runner could not read the version its request named: another node, the file gone, or the slot rewritten."""


def enabled() -> bool:
    return os.environ.get("KAPPA_RLLIB_SHARED_WEIGHTS", "1") != "0" and os.path.isdir(SHM_DIR)


@dataclass(frozen=True)
class Layout:
    """Where each array of a state lives in a slot: (path, dtype, shape, offset) each; `others`: the paths of the
    state's other leaves (which travel in the `Handle`); `nbytes`: a slot's size, header included."""

    arrays: tuple
    others: tuple
    nbytes: int

    @classmethod
    def of(cls, state: dict) -> "Layout":
        arrays, others, offset = [], [], HEADER
        for path, leaf in _leaves(state):
            if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "biuf":
                arrays.append((path, leaf.dtype.str, leaf.shape, offset))
                offset += -(-leaf.nbytes // ALIGN) * ALIGN
            else:
                others.append(path)
        return cls(tuple(arrays), tuple(others), offset)


@dataclass(frozen=True)
class Handle:
    """What a request carries instead of an object-store reference: the file, its node, the layout, the version
    and slot to read, and the state's leaves that are no arrays, (path, value) each."""

    path: str
    node_id: str
    layout: Layout
    version: int
    slot: int
    others: tuple = ()


class SharedWeights:
    """The driver's side: a file of two slots in `/dev/shm` on this node (`create`, else None), written at each
    new version (`write`), removed by `close`."""

    def __init__(self, path: str, node_id: str, layout: Layout, fd: int):
        self.path, self.node_id, self.layout = path, node_id, layout
        self._map = mmap.mmap(fd, 2 * layout.nbytes)
        os.close(fd)
        self._headers = [np.ndarray((1,), np.int64, self._map, slot * layout.nbytes) for slot in (0, 1)]
        for header in self._headers:
            header[0] = -1
        self._last_slot = 1  # the slot of the last version written (the first goes into slot 0)
        self._closer = weakref.finalize(self, _remove, path, self._map)
        atexit.register(self._closer)

    @classmethod
    def create(cls, state: dict, node_id: str) -> "SharedWeights | None":
        """A file for states laid out as `state`, or None where shared memory cannot serve (see the module)."""
        if not enabled():
            return None
        _remove_orphans()
        layout = Layout.of(state)
        path = os.path.join(SHM_DIR, f"{PREFIX}{os.getpid()}_{_pid_namespace()}_{uuid.uuid4().hex[:12]}")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        except OSError:
            return None
        try:
            os.posix_fallocate(fd, 0, 2 * layout.nbytes)  # reserved now: a full /dev/shm fails here, not on a write
            return cls(path, node_id, layout, fd)
        except (OSError, ValueError):
            os.close(fd)
            _remove(path, None)
            return None

    def write(self, version: int, state: dict) -> Handle | None:
        """Writes `state` as `version` into the slot the last version written does not live in; the handle a
        request carries, or None if the state's layout changed (the caller then uses the object store). The Sampler
        writes a version when it sends the first request acting with it, when no request is in flight: no runner
        reads then, and one still reading the last version (none should) reads the other slot."""
        if Layout.of(state) != self.layout:
            return None
        slot = 1 - self._last_slot
        base = slot * self.layout.nbytes
        self._headers[slot][0] = -1
        leaves = dict(_leaves(state))
        for path, dtype, shape, offset in self.layout.arrays:
            np.ndarray(shape, dtype, self._map, base + offset)[...] = leaves[path]
        self._headers[slot][0] = version
        self._last_slot = slot
        return Handle(self.path, self.node_id, self.layout, version, slot,
                      tuple((path, leaves[path]) for path in self.layout.others))

    def close(self) -> None:
        self._headers = []  # (views of the mapping: it closes only without them)
        self._closer()


def read(handle: Handle, node_id: str) -> dict:
    """The state a handle names, copied out of the file (a runner on `node_id`); SharedWeightsGone if this node
    is not the file's, the file is gone, or the slot does not hold the handle's version from start to end."""
    if node_id != handle.node_id:
        raise SharedWeightsGone(f"the acting weights are in shared memory on node {handle.node_id}, "
                                f"this runner is on {node_id}")
    layout, base = handle.layout, handle.slot * handle.layout.nbytes
    try:
        with open(handle.path, "rb") as f, mmap.mmap(f.fileno(), 2 * layout.nbytes, access=mmap.ACCESS_READ) as m:
            header = np.ndarray((1,), np.int64, m, base)
            before = int(header[0])
            arrays = [(path, np.ndarray(shape, dtype, m, base + offset).copy())
                      for path, dtype, shape, offset in layout.arrays]
            after = int(header[0])
            del header
    except (OSError, ValueError, BufferError) as e:
        raise SharedWeightsGone(f"the acting weights' file {handle.path} cannot be read: {e}") from e
    if not before == after == handle.version:
        raise SharedWeightsGone(f"the acting weights' slot held versions {before} and {after}, the request "
                                f"named {handle.version}")
    state: dict = {}
    for path, value in list(handle.others) + arrays:
        node = state
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return state


def _leaves(state: dict, prefix: tuple = ()):
    for key, value in state.items():
        if isinstance(value, dict) and value:  # (an empty one is a leaf: it travels in the handle)
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def _remove(path: str, mapped) -> None:
    if mapped is not None:
        try:
            mapped.close()
        except BufferError:  # an array still views it: the mapping goes with the process
            pass
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _pid_namespace() -> str:
    """This process's PID namespace (a container's own), so that a sweep judges only pids it can see."""
    try:
        return os.readlink("/proc/self/ns/pid").split("[")[-1].rstrip("]")
    except OSError:
        return "0"


def _remove_orphans() -> None:
    """Files of processes no longer alive on this node (a driver killed before its `close`): only those made in
    this PID namespace (containers sharing /dev/shm see each other's files, not each other's pids)."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    namespace = _pid_namespace()
    for name in names:
        if not name.startswith(PREFIX):
            continue
        parts = name[len(PREFIX):].split("_")
        if len(parts) != 3 or parts[1] != namespace:
            continue
        try:
            os.kill(int(parts[0]), 0)
        except ProcessLookupError:
            _remove(os.path.join(SHM_DIR, name), None)
        except (ValueError, OverflowError, PermissionError):
            pass
