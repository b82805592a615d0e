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
