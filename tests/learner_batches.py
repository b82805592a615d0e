"""Fixed episodes and the batches a learner's connector pipeline makes of them (the kappa-PPO and
kappa-APPO exactness tests compare learners on exactly these)."""

import copy

from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner


def sample_episodes(config, num_timesteps: int):
    """Episodes of an untrained policy: several terminated, and a last one still running (a chunk
    that the connector pipeline truncates)."""
    runner = SingleAgentEnvRunner(config=config)
    episodes = runner.sample(num_timesteps=num_timesteps)
    runner.stop()
    assert any(e.is_terminated for e in episodes) and not episodes[-1].is_done
    return episodes


def learner_batch(learner, episodes):
    """The learner connector pipeline's batch (RLlib's AddOneTsToEpisodesAndTruncate ... NumpyToTensor,
    with GAE or the kappa connectors in between)."""
    return learner._learner_connector(rl_module=learner.module, batch={}, episodes=copy.deepcopy(episodes),
                                      shared_data={}, metrics=learner.metrics)
