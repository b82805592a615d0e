"""The kappa-DQN learner program: what the learners do for a stretch of the schedule, in order, typed.

A program is a list of steps, each one of:
  * `TDUpdates(module_id, num_updates, target_syncs)`: `num_updates` Adam steps of one Q-network
    (Q_theta: the improvement, Alg. 5/6 line 9; Q_phi: kappa-PI's evaluation, Alg. 5 line 16), each on
    the next minibatch, with Q' <- Q after the update counts listed in `target_syncs` (1-based, counted
    within this step);
  * `COPY_THETA_TO_PHI`: kappa-VI's phi <- theta (Alg. 6, line 13) at that point.

The algorithm builds programs (`kappa_dqn.KappaDQN`: a chunk's updates, an evaluation phase, the end of a
kappa-iteration), `split_into_calls` cuts them into fused learner calls of at most
`updates_per_learner_call` gradient steps, and the torch learner runs each call
(`KappaDQNTorchLearner.update(fused_update={"program": call, "minibatch_size": n})`).
Imports neither Ray nor torch.
"""

from __future__ import annotations

from typing import NamedTuple, Union

from kappa_rllib.variant import COPY_THETA_TO_PHI as _COPY_ID


class TDUpdates(NamedTuple):
    """`num_updates` TD updates of `module_id`; Q' <- Q after each update count in `target_syncs`."""

    module_id: str
    num_updates: int
    target_syncs: tuple[int, ...] = ()


class CopyThetaToPhi(NamedTuple):
    """kappa-VI's phi <- theta, into Q_phi and Q'_phi (`KappaDQNLearner.copy_theta_to_phi`). No gradient
    step; its fields read like a TDUpdates' (a marker id, 0 updates, no target copy) so that any step
    unpacks as (module id, updates, target syncs)."""

    module_id: str = _COPY_ID
    num_updates: int = 0
    target_syncs: tuple[int, ...] = ()


COPY_THETA_TO_PHI = CopyThetaToPhi()
Step = Union[TDUpdates, CopyThetaToPhi]


def as_step(item) -> Step:
    """A program step; also takes a plain `(module_id, num_updates, target_syncs)` tuple, with the module
    id `kappa_rllib.variant.COPY_THETA_TO_PHI` for the copy."""
    if isinstance(item, (TDUpdates, CopyThetaToPhi)):
        return item
    module_id, num_updates, target_syncs = item
    if module_id == _COPY_ID:
        return COPY_THETA_TO_PHI
    return TDUpdates(module_id, int(num_updates), tuple(target_syncs))


def num_updates(program) -> int:
    """Gradient steps in a program (each reads one minibatch)."""
    return sum(step.num_updates for step in map(as_step, program) if isinstance(step, TDUpdates))


def split_into_calls(program, max_updates: int) -> list[list[Step]]:
    """The program cut into learner calls of at most `max_updates` gradient steps, in order. A
    `TDUpdates` step cut across calls keeps each of its target copies after the same update (counted
    from the first update of its part); a copy step stays where it is, in the call being filled."""
    calls, call, room = [], [], max_updates
    for step in map(as_step, program):
        if isinstance(step, CopyThetaToPhi):
            call.append(step)
            continue
        done = 0
        while done < step.num_updates:
            n = min(room, step.num_updates - done)
            syncs = tuple(j - done for j in step.target_syncs if done < j <= done + n)
            call.append(TDUpdates(step.module_id, n, syncs))
            done, room = done + n, room - n
            if room == 0:
                calls.append(call)
                call, room = [], max_updates
    if call:
        calls.append(call)
    return calls
