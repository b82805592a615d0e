"""The kappa-DQN learner program (kappa_rllib/algorithms/kappa_dqn/learner_program.py): typed steps and
their split into fused learner calls, against hand-worked programs."""

import pytest

from kappa_rllib.algorithms.kappa_dqn.learner_program import (
    COPY_THETA_TO_PHI,
    TDUpdates,
    num_updates,
    split_into_calls,
)

THETA, PHI = "default_policy", "kappa_phi"


def test_a_program_is_cut_into_calls_keeping_each_target_copy_after_its_update():
    # 10 theta updates with copies after the 3rd and the 9th, phi <- theta, 5 phi updates (copy after the 5th)
    program = [TDUpdates(THETA, 10, (3, 9)), COPY_THETA_TO_PHI, TDUpdates(PHI, 5, (5,))]
    assert split_into_calls(program, 4) == [
        [TDUpdates(THETA, 4, (3,))],
        [TDUpdates(THETA, 4, ())],
        [TDUpdates(THETA, 2, (1,)), COPY_THETA_TO_PHI, TDUpdates(PHI, 2, ())],
        [TDUpdates(PHI, 3, (3,))],
    ]
    assert split_into_calls(program, 64) == [program]
    assert [num_updates(call) for call in split_into_calls(program, 4)] == [4, 4, 4, 3]


def test_a_copy_alone_is_a_call_and_empty_steps_vanish():
    assert split_into_calls([COPY_THETA_TO_PHI], 8) == [[COPY_THETA_TO_PHI]]
    assert split_into_calls([TDUpdates(THETA, 0, ())], 8) == []
    assert split_into_calls([TDUpdates(THETA, 8, (8,)), COPY_THETA_TO_PHI], 8) == [
        [TDUpdates(THETA, 8, (8,))], [COPY_THETA_TO_PHI]]


def test_a_program_holds_typed_steps_only():
    assert num_updates([TDUpdates(THETA, 3, ()), COPY_THETA_TO_PHI, TDUpdates(PHI, 2, (2,))]) == 5
    with pytest.raises(TypeError, match=r"must be a TDUpdates or COPY_THETA_TO_PHI .*got \('default_policy', 3"):
        split_into_calls([(THETA, 3, [1, 3])], 8)


def test_num_updates_refuses_an_untyped_step():
    """A plain tuple once counted as 0 updates: a learner call "of 0 updates" trained nothing and copied
    theta into phi (the benchmark's learner-alone ceiling timed an empty loop)."""
    assert num_updates([TDUpdates(THETA, 4), COPY_THETA_TO_PHI, TDUpdates(PHI, 2)]) == 6
    with pytest.raises(TypeError, match="must be a TDUpdates or COPY_THETA_TO_PHI"):
        num_updates([(THETA, 4, [])])


def test_the_benchmarks_learner_alone_ceiling_makes_real_updates(ray_local):
    """benchmarks/throughput_parts/common.py's `learner_alone_rate` (the ceiling the throughput benchmark prints):
    each of its calls makes `updates_per_learner_call` Adam steps of Q_theta and leaves Q_phi as it was; a call
    without a gradient step copies theta into phi only where its program holds COPY_THETA_TO_PHI."""
    import sys
    from pathlib import Path

    import numpy as np

    from kappa_rllib import KappaVIDQNConfig

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from throughput_parts.common import learner_alone_rate

    algo = (KappaVIDQNConfig().environment("CartPole-v1")
            .training(kappa=0.9, c_fa=0.5, total_env_steps=4000, env_steps_per_iteration=500,
                      num_steps_sampled_before_learning_starts=200).debugging(seed=0).build_algo())
    try:
        algo.train()  # a replay to sample from

        def weights(module_id):
            state = algo.learner_group.get_state()["learner"]["rl_module"][module_id]
            return {k: np.asarray(v) for k, v in state.items()}

        def adam_steps():
            optim = algo.learner_group._learner.get_optimizer(THETA, "default_optimizer")
            return max(int(s["step"]) for s in optim.state.values())

        theta, phi, steps = weights(THETA), weights(PHI), adam_steps()
        assert learner_alone_rate(algo, 3) > 0
        assert adam_steps() == steps + 4 * algo.config.updates_per_learner_call  # the warm-up call and 3 timed
        assert any(not np.array_equal(theta[k], v) for k, v in weights(THETA).items())
        assert all(np.array_equal(phi[k], v) for k, v in weights(PHI).items())
        algo._learner_call([], 32)  # no step at all: nothing happens
        assert all(np.array_equal(phi[k], v) for k, v in weights(PHI).items())
        algo._learner_call([COPY_THETA_TO_PHI], 32)  # Q_phi and Q'_phi <- Q_theta (not Q'_theta)
        online = {k: v for k, v in weights(THETA).items() if "target" not in k}
        copied = weights(PHI)
        assert online and all(np.array_equal(copied[k], v) for k, v in online.items())
    finally:
        algo.stop()
