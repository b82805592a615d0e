"""Sampling and weight syncs shared by every algorithm here (kappa or not)."""

from __future__ import annotations

import math

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS


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
    """The acting module's (inference-only) weights to every EnvRunner."""
    algorithm.env_runner_group.sync_weights(
        from_worker_or_learner_group=algorithm.learner_group,
        policies=[DEFAULT_MODULE_ID],
        inference_only=True,
    )
