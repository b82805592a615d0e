"""Several Tune grids run at once from one driver, so a grid file fills the cluster it runs on.

Each grid keeps its own `Tuner` (its folder under `--storage`, its resume state, its stop rule, its
scheduler: a PBT or PB2 population keeps its own), and every `Tuner.fit()` runs in a thread of this
driver. Their trials then queue for the same cluster: each grid's Tune controller asks Ray for a
placement group per pending trial, and Ray starts whichever request fits as CPUs free up. Why this and
not one Tune run (docs/experiments.md, "A file's grids run together"): Tune's `tune.run` takes several
`Experiment`s but gives them the first one's folder, stopper, checkpoint settings and a single
scheduler, and `Tuner` takes one; a population needs a scheduler of its own, and `--resume` restores
each grid from its own folder.

Two things Tune does per run that must be shared across the grids, and how:

* **Ctrl-C.** Tune stops a run when SIGINT arrives (it checkpoints its state and returns; `--resume`
  goes on from there), but it installs that handler only in the main thread (`ray.tune.tune.
  _setup_signal_catching`). `interrupt_on_signal` installs the handler here and hands every grid's
  run the same event (ray[rllib] is pinned exactly; `tests/test_experiments.py` checks the hook).
* **`--max-concurrent`.** Tune's cap is per run (its variant generator makes no new trial while N are
  live). `SharedCap` counts the live trials of every grid's generator together, and `capped_actor_starts`
  holds back the actors of trials a resumed grid brings back, which no generator makes.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
import weakref

from ray.tune import Callback
from ray.tune.search.basic_variant import BasicVariantGenerator

# Tune's per-run SIGINT hook, which `interrupt_on_signal` replaces while the grids run
_TUNE_MODULE, _TUNE_HOOK = "ray.tune.tune", "_setup_signal_catching"


class SharedCap:
    """At most `limit` trials live (made and not yet finished) over every grid's generator; 0: no cap.
    Once `stop` is set, every grid's generator says it is finished: Tune otherwise waits (up to 600 s,
    deaf to Ctrl-C) for a trial from a generator the cap holds back, whose live trials, stopped by the
    interrupt, never end."""

    def __init__(self, limit: int | None, stop: threading.Event | None = None):
        self.limit = limit or 0
        self.stop = stop or threading.Event()
        self.lock = threading.Lock()
        self.generators: weakref.WeakSet = weakref.WeakSet()

        self.controllers: weakref.WeakSet = weakref.WeakSet()  # every grid's TuneController, as it adds actors

    def live(self) -> int:
        return sum(len(g._live_trials) for g in list(self.generators))  # Tune's own count of each grid's

    def holding(self) -> int:
        """Trials with an actor (asked for or running) over every grid's controller."""
        return sum(len(c._trial_to_actor) for c in list(self.controllers))


# generator -> its SharedCap: kept off the generator, whose whole __dict__ Tune saves as its state
_CAPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class CappedVariantGenerator(BasicVariantGenerator):
    """Tune's grid generator, making a trial only while the file's live trials are under the shared cap."""

    def __init__(self, cap: SharedCap, **kwargs):
        super().__init__(**kwargs)
        self.attach(cap)

    def attach(self, cap: SharedCap) -> None:
        _CAPS[self] = cap
        cap.generators.add(self)

    def set_state(self, state):  # a restored grid: this run's cap, not the one saved with its state
        super().set_state(state)
        self.max_concurrent = 0

    def is_finished(self) -> bool:  # stopped: no more trials this run (the saved state still has them)
        cap = _CAPS.get(self)
        return super().is_finished() or (cap is not None and cap.stop.is_set())

    def next_trial(self):
        cap = _CAPS.get(self)
        if cap is None or not cap.limit:
            return super().next_trial()
        with cap.lock:
            if cap.live() >= cap.limit:
                return None
            return super().next_trial()


@contextlib.contextmanager
def capped_actor_starts():
    """While open, a Tune controller whose generator is capped (CappedVariantGenerator) starts a trial's
    actor only while the file's trials holding actors are under the cap. The generator's cap holds back new
    trials only; the trials a resumed grid brings back (unfinished ones, errored ones Tune queues again with
    `add_trial`) never pass through it. Tune starts actors in `TuneController._maybe_add_actors`: one for the
    scheduler's choice if it has none, then pending trials while its pending actors are under
    `_max_pending_trials`, which counts the scheduler's; that bound is lowered here, for the call, to what
    the cap leaves (ray[rllib] is pinned exactly; tests/test_seams.py checks the peak)."""
    from ray.tune.execution.tune_controller import TuneController

    original = TuneController._maybe_add_actors

    def _maybe_add_actors(controller):
        cap = _CAPS.get(controller._search_alg)
        if cap is None or not cap.limit:
            return original(controller)
        with cap.lock:
            cap.controllers.add(controller)
            free = cap.limit - cap.holding()
            if free <= 0:
                return None
            bound = controller._max_pending_trials
            # the scheduler's choice (one new actor at most) counts among the pending actors that bound the
            # pending trials' starts after it
            controller._max_pending_trials = min(bound, controller._actor_manager.num_pending_actors + free)
            try:
                return original(controller)
            finally:
                controller._max_pending_trials = bound

    if getattr(original, "_kappa_capped", False):  # already in place (a run inside a run): one hook
        yield
        return
    _maybe_add_actors._kappa_capped = True
    TuneController._maybe_add_actors = _maybe_add_actors
    try:
        yield
    finally:
        TuneController._maybe_add_actors = original


@contextlib.contextmanager
def interrupt_on_signal(event: threading.Event, *, install: bool = True):
    """While open, every Tune run started in this process stops (checkpointing its state, as on
    Ctrl-C) when `event` is set, and with `install`, SIGINT and SIGUSR1 set it (a second SIGINT
    then acts as Python's default: KeyboardInterrupt)."""
    import importlib

    tune_module = importlib.import_module(_TUNE_MODULE)
    hook = getattr(tune_module, _TUNE_HOOK)
    installed = {}

    def on_signal(sig, frame):
        event.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    if install and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGUSR1):
            installed[sig] = signal.signal(sig, on_signal)
    setattr(tune_module, _TUNE_HOOK, lambda: event)
    try:
        yield event
    finally:
        setattr(tune_module, _TUNE_HOOK, hook)
        for sig, before in installed.items():
            signal.signal(sig, before)


class Started(Callback):
    """Set once the grid's Tune run has set up (Tune calls `setup` after it has registered the trainable
    and built its controller): `fit_together` starts the next grid then, since Tune's registry of
    trainables is not safe to write from two threads at once."""

    def __init__(self):
        self.event = threading.Event()

    def __getstate__(self):  # Tune pickles its callbacks with the run's settings
        return {}

    def __setstate__(self, state):
        self.event = threading.Event()

    def setup(self, **info):
        self.event.set()


def fit_together(jobs, *, stop: threading.Event, poll=None, poll_s: float = 1.0, stagger: bool = True) -> dict:
    """Runs `fit()` of every (name, tuner, started) in `jobs` at once, each in its own thread, started
    one after another: with `stagger`, the next once `started` (the grid's `Started` callback) is set or
    its thread has ended (without it, e.g. with Ray Client, where each grid's Tune run is a process of
    its own on the head, at once). Returns {name: ResultGrid} of the grids that ran, in the order given:
    once `stop` is set no further grid starts (`--resume` starts it). `poll()` runs in the calling thread
    every `poll_s` seconds while they run (the progress view; an error there is printed, not raised). An
    exception in one grid's `fit()`, or in this thread, sets `stop`, so the other grids checkpoint and
    return; it is raised once all have (a grid's as GridRaised, naming the grid)."""
    results, errors = {}, {}

    def fit(name, tuner):
        try:
            results[name] = tuner.fit()
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread below
            errors[name] = e
            stop.set()

    def wait(until) -> None:
        while not until():
            time.sleep(poll_s / 10)
            if poll is not None:
                try:
                    poll()
                except Exception as e:  # noqa: BLE001 - the view must not end the grids
                    print(f"[tune] progress view: {type(e).__name__}: {e}")

    threads = []
    try:
        for name, tuner, started in jobs:
            if stop.is_set():
                break  # stopped before this grid began: --resume starts it
            thread = threading.Thread(target=fit, args=(name, tuner), name=f"tune-{name}", daemon=True)
            thread.start()
            threads.append(thread)
            if stagger:
                wait(lambda: started.event.is_set() or not thread.is_alive() or stop.is_set())
    finally:
        if sys.exc_info()[0] is not None:
            stop.set()  # this thread failed (a KeyboardInterrupt, ...): let every grid save its state
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=poll_s)
                if poll is not None and not stop.is_set():
                    try:
                        poll()
                    except Exception as e:  # noqa: BLE001
                        print(f"[tune] progress view: {type(e).__name__}: {e}")
    if errors:
        name, error = next(iter(errors.items()))
        if isinstance(error, Exception):
            raise GridRaised(name, error, [t.name.removeprefix("tune-") for t in threads]) from error
        raise error  # KeyboardInterrupt, SystemExit: as they are
    return {name: results[name] for name, _, _ in jobs if name in results}


class GridRaised(Exception):
    """The first grid whose `fit()` raised: its name, its error, the grids that had started (the others
    were stopped; the grids after them never began)."""

    def __init__(self, name: str, error: Exception, started: list[str] = ()):
        super().__init__(f"{name}: {type(error).__name__}: {error}")
        self.name, self.error, self.started = name, error, list(started)
