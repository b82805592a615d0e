"""Which trial failures Tune retries: a lost node many times, an error of the trial's own code once.

`kappa-rllib tune --max-failures N` (default DEFAULT_MAX_FAILURES, -1 unlimited) is Tune's
`FailureConfig(max_failures=N)`: a failed trial restarts from its latest checkpoint, on any node. Tune
counts every failure alike, so on its own a trial with a deterministic bug (a bad setting, an exception
in its code) would restart N times, or forever with -1. RetryPolicy tells the two apart by Ray's error
type (docs/reliability.md, "Faults"):

- the trial's actor died (RayActorError: its node was lost, preempted or killed), or an object it needed
  was lost with its node: infrastructure, retried up to N times;
- anything raised by the trial's own code (a RayTaskError whose cause is not one of the above): retried
  once, for a transient cause (a full disk that was freed, a file system hiccup); if that retry fails
  again before it saves a new checkpoint, the trial stops with its error. Tune decides whether to retry
  (`Trial.should_recover`: failures <= max_failures) before any callback learns the error's type, so the
  retry takes one of the N, given back once the retry checkpoints: a trial with none left (N = 0, or all
  lost nodes) stops at an error of its code without a retry.

A `--resume` that takes up a trial that had ended with an error (its budget spent) gives it this run's
budget, counted from Tune's count of its failures then: running it again is the user's call.
"""

from __future__ import annotations

from pathlib import Path

# A 10M-frame Atari trial runs ~5-8 h on a GPU. Spot/preemptible machines are interrupted at a few to
# ~10% per hour, ~0.5-0.8 losses per trial on average; P(more than 10) is below 1e-9 even at 20%/h
# (Poisson, mean 1.6). Ten keeps every such trial alive and still ends a trial whose nodes keep dying.
DEFAULT_MAX_FAILURES = 10


def is_infrastructure(error: BaseException | None) -> bool:
    """True for a lost actor, node or object (retried up to --max-failures), False for an error raised
    by the trial's own code (retried once)."""
    from ray.exceptions import NodeDiedError, ObjectLostError, RayActorError, RayTaskError

    lost = (RayActorError, NodeDiedError, ObjectLostError)
    if isinstance(error, RayTaskError):
        cause = error.cause if error.cause is not None else error
        return isinstance(cause, lost)
    return isinstance(error, lost)


def failure_line(error: BaseException) -> str:
    """A trial's error in one line: the exception it ends with (Ray's RayTaskError holds the whole
    remote traceback), e.g. `OSError: [Errno 28] No space left on device`."""
    if is_infrastructure(error):  # Ray's text runs to a paragraph: its type and first sentence
        from ray.exceptions import RayTaskError

        cause = error.cause if isinstance(error, RayTaskError) and error.cause is not None else error
        first = " ".join(str(cause).split()).split(". ")[0].rstrip(".")
        return f"{type(cause).__name__}: {first[:200]} (a lost process or node, counted by --max-failures)"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1][:300] if lines else type(error).__name__


def disk_full(error: BaseException) -> bool:
    """ENOSPC anywhere in the error: a checkpoint or result that did not fit on the storage's disk."""
    text = str(error)
    return "No space left on device" in text or "[Errno 28]" in text or "errno 28" in text.lower()


def last_error(trial) -> BaseException | None:
    """The error Tune recorded for the trial's last failure (its pickled error file), or None where that
    file cannot be read: on a full disk Tune's own write of it fails, leaving it empty. None counts as
    an error of the trial's own code (retried once): the careful reading.

    Tune writes the file in the driver's staging folder (`trial.pickled_error_file`, under
    `trial.local_path`) when the trial fails, and copies it to storage later: at `on_trial_recover` the
    storage copy (what `trial.get_pickled_error()` reads) is not there yet. So the staging file first."""
    from ray import cloudpickle

    staged = getattr(trial, "pickled_error_file", None)
    if staged and Path(staged).is_file():
        try:
            with open(staged, "rb") as f:
                return cloudpickle.load(f)
        except Exception:  # noqa: BLE001 - cut short, unpicklable: try the storage copy
            pass
    try:
        return trial.get_pickled_error()
    except Exception:  # EOFError, OSError, an unpicklable remote exception
        return None


STATE_KEY = "kappa_rllib_retry_policy"  # RetryPolicy's saved state, told apart from other callbacks'


def retry_policy(max_failures: int):
    """A Tune callback giving each trial RetryPolicy's budget (built here: Tune is imported lazily)."""
    from ray import tune

    class RetryPolicy(tune.Callback):
        """Sets each trial's `max_failures` after each failure, before Tune's next decision:
        Tune's own count of failures plus what is left of this policy's budget."""

        def __init__(self):
            self.code_errors: dict[str, int] = {}  # trial id -> errors of its own code so far
            self.retrying_code_error: set[str] = set()  # trials whose last failure was their own code's
            self.errored: set[str] = set()  # trials that ended with an error (Tune's ERROR)
            # trial id -> Tune's count of its failures when a --resume took it up after it had ended with an
            # error: its budget counts from there
            self.base: dict[str, int] = {}

        def _budget(self, trial) -> int:
            """Failures (Tune's count) the trial may reach and still be retried: N node losses plus
            every code error it has already been retried for and got past (a new checkpoint since),
            counted from where a --resume took it up after an error (`base`)."""
            if max_failures < 0:
                return -1
            return self.base.get(trial.trial_id, 0) + max_failures + self.code_errors.get(trial.trial_id, 0)

        def on_trial_start(self, iteration, trials, trial, **info):
            # (a trial past its own max_failures is one Tune would not start but for a --resume of its error:
            # so it is told apart where the policy's state predates `errored`, or was lost)
            spent = 0 <= trial.max_failures < trial.run_metadata.num_failures
            if trial.trial_id in self.errored or spent:
                # --resume took up a trial that had ended with an error (its retries used up): running it
                # again is the user's call, with this run's --max-failures from here, and a code error's
                # retry again. Tune's own count of its failures goes on: the budget counts from it.
                self.errored.discard(trial.trial_id)
                self.retrying_code_error.discard(trial.trial_id)
                self.code_errors.pop(trial.trial_id, None)
                self.base[trial.trial_id] = trial.run_metadata.num_failures
            # Tune keeps each trial's max_failures with it (restored trials, and the trials a resumed grid's
            # generator makes from its saved spec) and decides by that value: each trial takes this run's
            # --max-failures as it starts, unless it is retrying an error of its own code
            if trial.trial_id not in self.retrying_code_error:
                trial.max_failures = self._budget(trial)

        def on_trial_error(self, iteration, trials, trial, **info):
            self.errored.add(trial.trial_id)

        def on_trial_recover(self, iteration, trials, trial, **info):
            if is_infrastructure(last_error(trial)):
                self.retrying_code_error.discard(trial.trial_id)
                trial.max_failures = self._budget(trial)
                return
            self.code_errors[trial.trial_id] = self.code_errors.get(trial.trial_id, 0) + 1
            self.retrying_code_error.add(trial.trial_id)
            # one more failure of any kind before the retry's next checkpoint stops the trial
            trial.max_failures = trial.run_metadata.num_failures

        # Kept with Tune's experiment state (callback-states-*.pkl), so `--resume` goes on with each
        # trial's count, as Tune goes on with its own count of failures: a fresh zero would cost a trial
        # past a code error one node loss of its budget.
        def get_state(self):
            if not (self.code_errors or self.retrying_code_error or self.errored or self.base):
                return None
            return {STATE_KEY: {"code_errors": dict(self.code_errors),
                                "retrying_code_error": sorted(self.retrying_code_error),
                                "errored": sorted(self.errored), "base": dict(self.base)}}

        def set_state(self, state):
            mine = state.get(STATE_KEY) if isinstance(state, dict) else None
            if mine:  # Tune hands states back by the callback's index: only this policy's is taken
                self.code_errors = dict(mine["code_errors"])
                self.retrying_code_error = set(mine["retrying_code_error"])
                self.errored = set(mine.get("errored", ()))  # (absent in a state saved before they were kept)
                self.base = dict(mine.get("base", {}))

        def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
            # a new checkpoint after the retry: the error did not come back where it was. A result
            # alone would not do: a full disk fails each save after a few results, and the retries
            # would restore the same checkpoint forever.
            if trial.trial_id in self.retrying_code_error:
                self.retrying_code_error.discard(trial.trial_id)
                trial.max_failures = self._budget(trial)

    return RetryPolicy()
