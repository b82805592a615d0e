"""One driver at a time in a grid's folder.

Two Tune runs of one grid in one folder write the same trials' rows and checkpoints: each trial then runs twice
and ends twice, and `report` counts both. That happens when a `--resume` starts while the run it resumes is still
going, most easily through Ray Client: a client that goes away (Ctrl-C twice, a closed laptop, SIGKILL) leaves
its grids' Tune runs going on the head for Ray's reconnect grace period (RAY_CLIENT_RECONNECT_GRACE_PERIOD,
30 s by default), and a `--resume` typed at once would repair the folder under them and run beside them.

So each grid's Tune run holds an exclusive lock on `<grid folder>/.kappa_rllib_driver.lock` (`flock`, which the
kernel lets go of when the process holding it ends, however it ends) from its start to its end, in the process
that runs Tune's loop (the driver here; through Ray Client, Tune's process on the head). `--resume` first waits
for every grid's folder to be free (up to WAIT_S, saying so) and refuses in one line if one is still held; a
fresh run is refused anyway (the folder holds a run) and names who runs it.

Where the driver runs Tune's loop itself (a local Ray, `ray job submit`) its `--resume` takes the locks as it
finds them free (`take`), before the resume repair touches the folders, and the run's callbacks adopt them
(`acquire` knows the locks this process holds): two `--resume`s typed at once cannot both repair, one waits.
Through Ray Client the check and the repair run in short tasks on the head, which hold nothing after they end:
there the lock is taken as each grid's Tune run starts, and two clients resuming in the same seconds are not
kept apart before it.

A bucket (s3://, gs://, ...) has no lock: one driver at a time there is the user's to keep.
"""

from __future__ import annotations

import errno
import os
import socket
import time
from pathlib import Path

LOCK_FILE = ".kappa_rllib_driver.lock"
# longer than Ray Client's default reconnect grace (30 s): a client that went away has its runs end on the head
WAIT_S = 60.0
POLL_S = 0.5
# `who_holds`'s peek holds a shared lock for a moment: a run's `acquire` refused within this long tries again, so that
# a peek (another driver's --resume waiting, `kappa-rllib tune` checking a fresh folder) never reads as a holder
PEEK_S = 1.0
PEEK_POLL_S = 0.01


class GridBusy(ValueError):
    """A grid's folder is held by another Tune run (one line: the folder and who holds it)."""


def _open(folder: Path) -> int:
    # Tune has made the folder by the time a run starts (tuner.pkl); one that is not there is a path a run stored
    # before names and that moved since (Tune restores a moved folder, with its callbacks, under Ray Client): no
    # lock then, rather than a folder made again at the old path
    return os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)


def _try_lock(fd: int, exclusive: bool) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise


# the folders whose lock this process holds, by real path: {"fd": its descriptor, "adopt": True while it waits
# for the Tune run it was taken for (by `take`, before --resume's repair) to adopt it}
_OUR_LOCKS: dict[str, dict] = {}


def acquire(folder, *, run: bool = False) -> str | None:
    """Takes the folder's lock for this process (kept until `release`); None once held (or where no lock can be
    had: no folder, a file system without locks), else who holds it ("host H, pid P, since T"). `run`: for a
    Tune run's callback, which adopts the lock its driver took for it (`take`); a lock this process holds for
    anything else is held."""
    key = os.path.realpath(folder)
    entry = _OUR_LOCKS.get(key)
    if entry is not None:
        if run and entry["adopt"]:
            entry["adopt"] = False
            return None
        return _who(entry["fd"])
    try:
        fd = _open(Path(folder))
    except OSError:  # no folder (moved), a full disk, a read-only one: unguarded
        return None
    deadline = time.monotonic() + PEEK_S
    try:
        # refused beside a peek: again, until the peek has let go (a run's lock: at once, named)
        while not (held := _try_lock(fd, exclusive=True)) and time.monotonic() < deadline \
                and not _run_holds(Path(folder)):
            time.sleep(PEEK_POLL_S)
    except OSError:  # a file system without locks (ENOLCK: an NFS mount without its lock service)
        os.close(fd)
        return None
    if not held:
        who = _who(fd)
        os.close(fd)
        return who
    stamp = f"host {socket.gethostname()}, pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}"
    try:  # who holds it, for the other driver's message: only words, the lock is the flock
        os.ftruncate(fd, 0)
        os.pwrite(fd, stamp.encode(), 0)
    except OSError:  # a full disk
        pass
    _OUR_LOCKS[key] = {"fd": fd, "adopt": not run}
    return None


def we_hold(folder) -> bool:
    """Whether this process holds the folder's lock."""
    return os.path.realpath(folder) in _OUR_LOCKS


def our_lock_fd(folder) -> int | None:
    entry = _OUR_LOCKS.get(os.path.realpath(folder))
    return None if entry is None else entry["fd"]


def _unadopted(path) -> bool:
    """Whether `take` took the folder's lock and no run has adopted it yet."""
    return _OUR_LOCKS.get(os.path.realpath(path), {}).get("adopt", False)


def release_unadopted(paths) -> None:
    """Lets go of the folders in `paths` that `take` took and no run has adopted (a --resume that stops early)."""
    for path in paths:
        if _unadopted(path):
            release(path)


def release(folder) -> None:
    """Lets go of the folder's lock if this process holds it (the lock goes with the last descriptor)."""
    entry = _OUR_LOCKS.pop(os.path.realpath(folder), None)
    if entry is not None:
        os.close(entry["fd"])


def take(paths: list[str], wait_s: float = 0.0) -> list[str | None]:
    """Takes each folder's lock for this process as it is free, waiting up to `wait_s` for all of them; who
    holds each folder still held then (None for those taken). Let go with `release`."""
    deadline = time.monotonic() + wait_s
    # those this process took for a run that has not adopted them yet (an earlier look of the same --resume)
    taken = set(filter(_unadopted, paths))
    while True:
        held = [None if path in taken else acquire(path) for path in paths]
        taken.update(path for path, who in zip(paths, held) if who is None)
        if not any(held) or time.monotonic() >= deadline:
            return held
        time.sleep(POLL_S)


def _run_holds(folder: Path) -> bool:
    """Whether a run holds the folder's lock (exclusively) rather than a peek (shared): a shared lock is
    granted beside a peek, not beside a run. (A descriptor of its own: flock locks go by open file.)"""
    import fcntl

    fd = os.open(folder / LOCK_FILE, os.O_RDONLY)
    try:
        if _try_lock(fd, exclusive=False):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        return True
    finally:
        os.close(fd)


def _who(fd: int) -> str:
    """What the holder wrote into the lock file: "host H, pid P, since T"."""
    return os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"


def who_holds(folder) -> str | None:
    """Who holds `folder` (a grid's local folder): "host H, pid P, since T" as its holder wrote it, or None
    where no Tune run holds it (or it does not exist)."""
    path = Path(folder) / LOCK_FILE
    if not path.is_file():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            if _try_lock(fd, exclusive=False):  # nobody holds it exclusively: free (ours goes with the close)
                return None
        except OSError:  # a file system without locks: nobody can hold it
            return None
        return _who(fd)
    finally:
        os.close(fd)


def who_holds_each(paths: list[str], wait_s: float = 0.0) -> list[str | None]:
    """`who_holds` of each folder in `paths`, after waiting up to `wait_s` for all of them to be free."""
    deadline = time.monotonic() + wait_s
    while True:
        held = [who_holds(path) for path in paths]
        if not any(held) or time.monotonic() >= deadline:
            return held
        time.sleep(POLL_S)


def busy_message(path, name: str, who: str) -> str:
    return (f"{path}: grid {name!r} is being run by another driver ({who}); wait until it ends or stop it "
            "(through Ray Client, a client that went away leaves its runs going on the head for "
            "RAY_CLIENT_RECONNECT_GRACE_PERIOD, 30 s by default)")


def lock_callback(folder, name: str):
    """A Tune callback holding the grid folder's lock for its Tune run: taken as the run starts (GridBusy,
    one line, where another run holds it), let go as it ends (or with its process).

    Tune ends its callbacks in their order, and one may take long to end (W&B's waits for its logging actors,
    up to 30 minutes): a run that puts its callbacks after this one puts `let_go_last()` last, so that the
    folder is held until every callback has ended, and a waiting `--resume` repairs nothing under a run
    still ending."""
    from ray import tune

    class LetGo(tune.Callback):
        def __init__(self, holding):
            self.holding = holding

        def on_experiment_end(self, trials, **info):
            self.holding.release()

    class HoldFolder(tune.Callback):
        def __init__(self):
            self.held = False
            self.later = False  # let go by the callback `let_go_last` made, not by this one's end

        def let_go_last(self):
            """The callback that lets go of the folder as the run ends: the run's last (Tune pickles both in one
            list, into tuner.pkl and to the head: they stay one pair there)."""
            self.later = True
            return LetGo(self)

        def setup(self, **info):
            self.release()
            who = acquire(folder, run=True)  # (the lock its driver's --resume took for it is adopted)
            if who is not None:
                raise GridBusy(busy_message(folder, name, who))
            # (module functions only: this class is pickled by value to the head under Ray Client, with a copy of
            # any module global its methods name, where the functions go by reference)
            self.held = we_hold(folder)

        @property
        def fd(self):
            return our_lock_fd(folder) if self.held else None

        def on_experiment_end(self, trials, **info):
            if not self.later:
                self.release()

        def release(self):
            if self.held:
                release(folder)
                self.held = False

        def __getstate__(self):  # pickled into tuner.pkl and, through Ray Client, to the head: never a lock
            return {**self.__dict__, "held": False}

        def __del__(self):
            self.release()

    return HoldFolder()


# The names of `we_hold` and `our_lock_fd` before 2026-12-05: a grid's tuner.pkl written then pickles its
# HoldFolder by value, and the module functions it calls by these names, looked up here when it is read back
holds, held_fd = we_hold, our_lock_fd
