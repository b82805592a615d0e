import numpy as np
import pytest


def random_mdp(num_states: int, num_actions: int, seed: int):
    """A random finite MDP: dense transition rows from a Dirichlet, rewards in [-1, 1]."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(num_states), size=(num_states, num_actions))
    R = rng.uniform(-1.0, 1.0, size=(num_states, num_actions))
    return P, R


@pytest.fixture(scope="module")
def ray_local():
    """An embedded Ray with 2 CPUs for one test module, shut down afterwards."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
