"""kappa-DQN on a real two-node local Ray cluster: a remote EnvRunner and a remote Learner.

Checks that nothing assumes one process: sampling happens in an actor, Q_theta/Q_phi live in a
learner actor, the target copies and the kappa-VI phi <- theta copy reach it via foreach_learner,
and the checkpointed state round-trips through remote components.
"""

import numpy as np
import pytest
import ray
from ray._common.utils import reset_ray_address
from ray.cluster_utils import Cluster

from ray.rllib.core import DEFAULT_MODULE_ID

from kappa_rllib import KappaVIDQN, KappaVIDQNConfig
from kappa_rllib.variant import PHI_MODULE_ID

# one Ray cluster of its own at a time under pytest -n (pyproject.toml)
pytestmark = pytest.mark.xdist_group("clusters")


@pytest.fixture(scope="module")
def two_node_cluster():
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    # Cluster() writes its address to /tmp/ray/ray_current_cluster, where any plain ray.init() (or
    # an auto-init) on this machine would find it: tests running beside this one (pytest -n) must not
    # join this cluster. This module connects by address.
    reset_ray_address()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_kappa_vi_dqn_with_remote_env_runner_and_learner(two_node_cluster, tmp_path):
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    config = (
        KappaVIDQNConfig()
        .environment("CartPole-v1")
        .training(
            kappa=0.9, c_fa=0.3, total_env_steps=1000, env_steps_per_iteration=500,
            num_steps_sampled_before_learning_starts=100, target_network_update_freq=100,
            replay_buffer_config={"type": "UniformReplayBuffer", "capacity": 2000}, env_steps_per_fragment=8,
        )
        .rl_module(model_config={"fcnet_hiddens": [16], "head_fcnet_hiddens": []})
        .env_runners(num_env_runners=1, num_cpus_per_env_runner=1)
        .learners(num_learners=1, num_cpus_per_learner=1)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    assert not algo.learner_group.is_local and algo.env_runner_group.num_remote_workers() == 1
    results = [algo.train(), algo.train()]
    assert [r["kappa"]["env_steps"] for r in results] == [500, 1000]
    assert results[-1]["done"] and results[-1]["kappa"]["iteration"] == 13
    weights = algo.learner_group.get_weights(module_ids=[DEFAULT_MODULE_ID, PHI_MODULE_ID])
    theta, phi = weights[DEFAULT_MODULE_ID], weights[PHI_MODULE_ID]
    main_keys = [k for k in theta if not k.startswith("_target")]
    assert main_keys and all(np.array_equal(theta[k], phi[k]) for k in main_keys)  # phi <- theta, remotely
    path = algo.save_to_path(str(tmp_path / "ckpt"))
    algo.stop()
    restored = KappaVIDQN.from_checkpoint(path)
    assert restored.phases.done and restored.counters["theta_updates"] == results[-1]["kappa"]["theta_updates"]
    restored.stop()
