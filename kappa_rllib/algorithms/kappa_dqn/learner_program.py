"""The kappa-DQN learner program: what the learners do for a stretch of the schedule, in order, typed.

A program is a list of steps, each one of:
  * `TDUpdates(module_id, num_updates, target_syncs)`: `num_updates` Adam steps of one Q-network
    (Q_theta: the improvement, Alg. 5/6 line 9; Q_phi: kappa-PI's evaluation, Alg. 5 line 16), each on
    the next minibatch, with Q' <- Q after the update counts listed in `target_syncs` (1-based, counted
    within this step);
  * `COPY_THETA_TO_PHI` (the one `CopyThetaToPhi`): kappa-VI's phi <- theta (Alg. 6, line 13) at that point.
A program holds these typed steps only (`check_program` refuses anything else, plain tuples included).

The algorithm builds programs (`kappa_dqn.KappaDQN`: a chunk's updates, an evaluation phase, the end of a
kappa-iteration), `split_into_calls` cuts them into fused learner calls of at most
`updates_per_learner_call` gradient steps, and the torch learner runs each call
(`KappaDQNTorchLearner.update(fused_update={"program": call, "minibatch_size": n})`).
Imports neither Ray nor torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Union


class TDUpdates(NamedTuple):
    """`num_updates` TD updates of `module_id`; Q' <- Q after each update count in `target_syncs`."""

    module_id: str
    num_updates: int
    target_syncs: tuple[int, ...] = ()


@dataclass(frozen=True)
class CopyThetaToPhi:
    """kappa-VI's phi <- theta, into Q_phi and Q'_phi (`KappaDQNLearner.copy_theta_to_phi`): no gradient
    step, no minibatch."""


COPY_THETA_TO_PHI = CopyThetaToPhi()
Step = Union[TDUpdates, CopyThetaToPhi]


def check_program(program) -> list[Step]:
    """The program as a list, each step checked to be a typed step (one line naming a stray one)."""
    program = list(program)
    for step in program:
        if not isinstance(step, (TDUpdates, CopyThetaToPhi)):
            raise TypeError(f"a learner program step must be a TDUpdates or COPY_THETA_TO_PHI "
                            f"(kappa_dqn/learner_program.py), got {step!r}")
    return program


def num_updates(program) -> int:
    """Gradient steps in a program (each reads one minibatch); TypeError for a step that is not typed (a plain
    tuple counted as 0 updates would make a learner call that trains nothing)."""
    return sum(step.num_updates for step in check_program(program) if isinstance(step, TDUpdates))


def split_into_calls(program, max_updates: int) -> list[list[Step]]:
    """The program cut into learner calls of at most `max_updates` gradient steps, in order. A
    `TDUpdates` step cut across calls keeps each of its target copies after the same update (counted
    from the first update of its part); a copy step stays where it is, in the call being filled."""
    calls, call, room = [], [], max_updates
    for step in check_program(program):
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
