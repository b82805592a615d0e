"""Train-until helpers for the learning tests (tests/test_learning.py, tests/test_kappa_ppo.py)."""

import torch


def steps_to_reach(config, threshold: float, max_env_steps: int):
    """Trains until `env_runners/episode_return_mean` >= threshold or max_env_steps are used;
    returns (env steps when reached or None, the returns seen)."""
    torch.set_num_threads(1)
    algo = config.build_algo()
    returns = []
    try:
        while True:
            result = algo.train()
            runners = result["env_runners"]
            steps = runners["num_env_steps_sampled_lifetime"]
            returns.append(round(float(runners.get("episode_return_mean", float("nan"))), 1))
            if returns[-1] >= threshold:
                return steps, returns
            if steps >= max_env_steps or result.get("done"):
                return None, returns
    finally:
        algo.stop()
        print(f"{type(config).__name__} on {config.env}: episode_return_mean per iteration {returns}")
