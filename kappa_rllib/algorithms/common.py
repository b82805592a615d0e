"""What every kappa algorithm shares: exact-count sampling, and the phase machine in results
and checkpoints."""

from __future__ import annotations

import math

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS

from kappa_rllib.phases import KappaPhaseMachine


def sample_env_steps(algorithm, num_steps: int):
    """Samples about `num_steps` env steps with exploration; exactly that many from one EnvRunner.

    With n remote EnvRunners each samples ceil(num_steps / n) steps. EnvRunner metrics go into
    the algorithm's `env_runners/...` results.
    """
    group = algorithm.env_runner_group
    num_remote = group.num_remote_workers()
    per_runner = math.ceil(num_steps / max(1, num_remote))
    results = group.foreach_env_runner(
        lambda er: (er.sample(num_timesteps=per_runner, explore=True), er.get_metrics()),
        local_env_runner=num_remote == 0,
    )
    algorithm.metrics.aggregate([m for _, m in results], key=ENV_RUNNER_RESULTS)
    return [ep for eps, _ in results for ep in eps]


def sync_env_runner_weights(algorithm) -> None:
    algorithm.env_runner_group.sync_weights(
        from_worker_or_learner_group=algorithm.learner_group,
        policies=[DEFAULT_MODULE_ID],
        inference_only=True,
    )


class KappaStateMixin:
    """Adds `result["kappa"]` and `done`, and checkpoints `self.phases` and `self.counters`.

    Subclasses may add more checkpointed state through `_extra_kappa_state` /
    `_set_extra_kappa_state` (kappa-DQN: the replay buffer).
    """

    phases: KappaPhaseMachine
    counters: dict

    def step(self):
        result = super().step()
        result["kappa"] = {**self.phases.report(), **self.counters}
        if self.phases.done:
            result["done"] = True  # Tune stops the trial when the schedule is used up
        return result

    def get_state(self, components=None, *, not_components=None, **kwargs):
        state = super().get_state(components, not_components=not_components, **kwargs)
        state["kappa"] = {
            "phases": self.phases.get_state(),
            "counters": dict(self.counters),
            **self._extra_kappa_state(),
        }
        return state

    def set_state(self, state) -> None:
        super().set_state(state)
        if "kappa" in state:
            self.phases = KappaPhaseMachine.from_state(state["kappa"]["phases"])
            self.counters = dict(state["kappa"]["counters"])
            self._set_extra_kappa_state(state["kappa"])
            sync_env_runner_weights(self)

    def _extra_kappa_state(self) -> dict:
        return {}

    def _set_extra_kappa_state(self, state: dict) -> None:
        pass

    def _check_not_done(self) -> None:
        if self.phases.done:
            raise RuntimeError(
                f"the kappa schedule is complete: all total_env_steps={self.config.total_env_steps} "
                "were used; build a new algorithm (or raise total_env_steps) to train further"
            )
