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
  again before it reports a result, the trial stops with its error.
"""

from __future__ import annotations

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
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1][:300] if lines else type(error).__name__


def disk_full(error: BaseException) -> bool:
    """ENOSPC anywhere in the error: a checkpoint or result that did not fit on the storage's disk."""
    text = str(error)
    return "No space left on device" in text or "[Errno 28]" in text or "errno 28" in text.lower()


def retry_policy(max_failures: int):
    """A Tune callback giving each trial RetryPolicy's budget (built here: Tune is imported lazily)."""
    from ray import tune

    class RetryPolicy(tune.Callback):
        """Sets each trial's `max_failures` after each failure, before Tune's next decision:
        Tune's own count of failures plus what is left of this policy's budget."""

        def __init__(self):
            self.code_errors: dict[str, int] = {}  # trial id -> errors of its own code so far
            self.retrying_code_error: set[str] = set()  # trials whose last failure was their own code's

        def _budget(self, trial) -> int:
            """Failures (Tune's count) the trial may reach and still be retried: N node losses plus
            every code error it has already been retried for."""
            return -1 if max_failures < 0 else max_failures + self.code_errors.get(trial.trial_id, 0)

        def on_trial_recover(self, iteration, trials, trial, **info):
            if is_infrastructure(trial.get_pickled_error()):
                self.retrying_code_error.discard(trial.trial_id)
                trial.max_failures = self._budget(trial)
                return
            self.code_errors[trial.trial_id] = self.code_errors.get(trial.trial_id, 0) + 1
            self.retrying_code_error.add(trial.trial_id)
            # one more failure of any kind before the retry's first result stops the trial
            trial.max_failures = trial.run_metadata.num_failures

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if trial.trial_id in self.retrying_code_error:  # the retry got past the error
                self.retrying_code_error.discard(trial.trial_id)
                trial.max_failures = self._budget(trial)

    return RetryPolicy()
