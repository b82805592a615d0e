import numpy as np
import pytest

from kappa_rllib.phases import DONE, EVALUATION, IMPROVEMENT, KappaPhaseMachine
from kappa_rllib.replay import UniformReplayBuffer, unpack_array
from kappa_rllib.shaping import shaped_reward, surrogate_td_target


def run_machine(machine, steps_per_call=3, updates_per_step=1):
    """Drives the machine like the algorithm does; returns the (iteration, phase) trace."""
    trace = []
    while not machine.done:
        trace.append((machine.iteration, machine.phase))
        if machine.phase == EVALUATION:
            machine.record_updates(min(2, machine.updates_left_in_phase()))
            if machine.evaluation_complete():
                machine.end_evaluation()
        else:
            n = min(steps_per_call, machine.units_left_in_phase())
            machine.record_units(n)
            machine.record_updates(updates_per_step)
            if machine.improvement_complete():
                machine.end_improvement()
    return trace


def test_pi_machine_walks_the_schedule():
    m = KappaPhaseMachine(total_units=20, num_iterations=3, with_evaluation_phase=True)
    trace = run_machine(m)
    # improvement phases of 7, 7, 6 env steps (remainder to the first), evaluation after
    # all but the last iteration
    phases = [p for i, p in dict.fromkeys(trace)]
    assert phases == [IMPROVEMENT, EVALUATION, IMPROVEMENT, EVALUATION, IMPROVEMENT]
    assert m.units == 20 and m.iteration == 3 and m.phase == DONE


def test_evaluation_gets_as_many_updates_as_improvement():
    m = KappaPhaseMachine(total_units=10, num_iterations=2, with_evaluation_phase=True)
    for _ in range(5):
        m.record_units(1)
        m.record_updates(3)
    assert m.improvement_complete()
    m.end_improvement()
    assert m.phase == EVALUATION and m.updates_left_in_phase() == 15


def test_vi_machine_has_no_evaluation_and_round_trips_state():
    m = KappaPhaseMachine(total_units=9, num_iterations=3, with_evaluation_phase=False)
    m.record_units(4)
    restored = KappaPhaseMachine.from_state(m.get_state())
    assert restored == m
    assert EVALUATION not in {p for _, p in run_machine(restored)}
    assert restored.iteration == 3


def test_a_machine_saved_before_the_fields_said_units_resumes_where_it_was():
    """A checkpoint written before 2026-11-28 holds `total_steps`, `steps`, `phase_steps` and
    `segment_steps`; it restores to the same point of the schedule."""
    m = KappaPhaseMachine(total_units=100, num_iterations=10, with_evaluation_phase=False, unit="batches")
    for _ in range(23):
        m.record_units(1)
        if m.improvement_complete():
            m.end_improvement()
    m.reschedule_after_current(25)
    new_names = {"total_units": "total_steps", "units": "steps", "phase_units": "phase_steps",
                 "segment_units": "segment_steps"}
    old_state = {new_names.get(name, name): value for name, value in m.get_state().items()}
    assert "steps" in old_state and "units" not in old_state
    restored = KappaPhaseMachine.from_state(old_state)
    assert restored == m and (restored.units, restored.phase_units, restored.segment_units) == (23, 3, 30)
    assert iteration_lengths(restored) == [10] + [4] * 16 + [3] * 2


def test_machine_refuses_more_iterations_than_steps():
    with pytest.raises(ValueError, match="smaller than N_kappa"):
        KappaPhaseMachine(total_units=2, num_iterations=3, with_evaluation_phase=False)


def test_shaping_closed_form():
    r, v, d = np.array([1.0, 0.5, -1.0]), np.array([10.0, 2.0, 4.0]), np.array([0.0, 0.0, 1.0])
    gamma, kappa = 0.99, 0.6
    np.testing.assert_allclose(shaped_reward(r, v, d, gamma, kappa), [1 + 0.396 * 10, 0.5 + 0.396 * 2, -1.0])
    boot = np.array([3.0, 1.0, 7.0])
    np.testing.assert_allclose(
        surrogate_td_target(r, v, boot, d, gamma, kappa),
        [1 + 0.396 * 10 + 0.594 * 3, 0.5 + 0.396 * 2 + 0.594 * 1, -1.0],
    )


def test_replay_buffer_wraps_samples_and_restores():
    buf = UniformReplayBuffer(capacity=5, seed=0)
    for start in (0, 3):
        buf.add({"obs": np.arange(start, start + 3, dtype=np.float32)[:, None],
                 "rewards": np.arange(start, start + 3, dtype=np.float32)})
    assert len(buf) == 5
    assert sorted(unpack_array(buf.get_state()["arrays"]["rewards"]).tolist()) == [1, 2, 3, 4, 5]  # 0 overwritten
    clone = UniformReplayBuffer(capacity=5)
    clone.set_state(buf.get_state())
    np.testing.assert_array_equal(clone.sample(64)["rewards"], buf.sample(64)["rewards"])
    assert set(buf.sample(200)["rewards"].tolist()) == {1, 2, 3, 4, 5}


def test_replay_checkpoint_state_is_packed_and_old_states_still_load():
    """A MinAtar-like replay (0/1 float32 channels) checkpoints LZ4-packed, >= 10x below its raw
    size (100k transitions were ~310 MB a checkpoint before), restores exactly, and a state written
    before packing (plain arrays) still loads."""
    import pickle

    rng = np.random.default_rng(0)
    n = 2000
    obs = (rng.random((n + 1, 10, 10, 4)) < 0.05).astype(np.float32)
    batch = {"obs": obs[:-1], "new_obs": obs[1:], "actions": rng.integers(0, 3, n),
             "rewards": (rng.random(n) < 0.1).astype(np.float32), "terminateds": np.zeros(n, bool)}
    buf = UniformReplayBuffer(capacity=n, seed=1)
    buf.add(batch)
    state = buf.get_state()
    raw = sum(v.nbytes for v in batch.values())
    assert len(pickle.dumps(state)) * 10 < raw
    clone = UniformReplayBuffer(capacity=n, seed=1)
    clone.set_state(pickle.loads(pickle.dumps(state)))
    for key, value in buf.transitions().items():
        np.testing.assert_array_equal(clone.transitions()[key], value, err_msg=key)
    old = dict(state, arrays={k: unpack_array(v) for k, v in state["arrays"].items()})
    legacy = UniformReplayBuffer(capacity=n, seed=1)
    legacy.set_state(old)
    for key, value in buf.transitions().items():
        np.testing.assert_array_equal(legacy.transitions()[key], value, err_msg=key)
    np.testing.assert_array_equal(legacy.sample(64)["obs"], buf.sample(64)["obs"])


def iteration_lengths(machine):
    """Units per kappa-iteration, walking the machine one unit at a time."""
    lengths = []
    while not machine.done:
        machine.record_units(1)
        if machine.improvement_complete():
            lengths.append(machine.phase_units)
            machine.end_improvement()
    return lengths


def test_a_new_kappa_re_plans_the_units_after_the_current_iteration():
    """T = 100 in 10 iterations of 10; at unit 23 (iteration 2) a new kappa with N_kappa = 25 over
    all T: iteration 2 keeps its end (30), and the 70 units left get round(70 * 25 / 100) = 18
    iterations of ~T / N = 4 units (16 of 4 and 2 of 3)."""
    m = KappaPhaseMachine(total_units=100, num_iterations=10, with_evaluation_phase=False, unit="batches")
    for _ in range(23):
        m.record_units(1)
        if m.improvement_complete():
            m.end_improvement()
    assert (m.iteration, m.units) == (2, 23)
    assert m.reschedule_after_current(25) == 18
    assert m.num_iterations == 21 and m.units_left_in_phase() == 7
    assert m.report()["batches_per_iteration"] == 3  # the new segment: 70 // 18
    restored = KappaPhaseMachine.from_state(m.get_state())
    assert restored == m
    assert iteration_lengths(m) == [10] + [4] * 16 + [3] * 2  # iteration 2 as planned: 10 units
    assert m.units == 100 and m.iteration == 21 and m.done
    # a second change re-plans again from its own current iteration; the total is still T
    assert iteration_lengths(restored)[:1] == [10] and restored.units == 100


def test_reschedule_keeps_one_unit_per_iteration_and_does_nothing_at_the_end():
    m = KappaPhaseMachine(total_units=12, num_iterations=3, with_evaluation_phase=False)
    m.record_units(1)
    assert m.reschedule_after_current(1000) == 8  # 8 units left after iteration 0: at most 8 iterations
    assert iteration_lengths(m) == [4] + [1] * 8
    m = KappaPhaseMachine(total_units=12, num_iterations=3, with_evaluation_phase=False)
    for _ in range(9):
        m.record_units(1)
        if m.improvement_complete():
            m.end_improvement()
    assert m.iteration == 2 and m.reschedule_after_current(5) == 0  # the last iteration: nothing after it
    assert iteration_lengths(m) == [4] and m.units == 12


@pytest.mark.parametrize("array", [np.zeros((0, 3), np.float32), np.arange(10, dtype=np.int64),
                                   np.array([[True, False], [False, True]]), np.linspace(0, 1, 100),
                                   np.array([{"a": 1}, None], dtype=object)],
                         ids=["empty", "int", "bool", "float", "object"])
def test_pack_array_round_trips_every_column_kind(array, monkeypatch):
    """Any column a replay may hold comes back equal, dtype and shape included, also when its bytes
    span several LZ4 blocks; object columns (no bytes to pack) are kept as they are."""
    import kappa_rllib.replay as replay

    monkeypatch.setattr(replay, "_PACK_CHUNK", 16)  # 16-byte blocks: the float column takes 50
    packed = replay.pack_array(array)
    if array.dtype.hasobject:
        assert packed is array
    else:
        assert len(packed["lz4_blocks"]) == -(-array.nbytes // 16)
    back = unpack_array(packed)
    assert back.dtype == array.dtype and back.shape == array.shape
    assert list(back.ravel()) == list(array.ravel())
