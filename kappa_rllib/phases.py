"""The kappa phase machine: which kappa-iteration and phase an algorithm is in.

One kappa-iteration i = 0..N_kappa-1 (paper, Algorithms 5-8) is

* an *improvement* phase of T_kappa units that solves the surrogate MDP
  M_{gamma kappa}(V_phi) (DQN or TRPO on the shaped reward), then
* for kappa-PI-DQN only, an *evaluation* phase of off-policy TD(0) gradient steps on the
  replay buffer (as many as the improvement phase made), with no env steps.

After the last iteration the machine is `done`.

The machine counts *units*, named by its `unit` field: env steps for kappa-DQN, sample batches for the
TRPO family and kappa-PPO/APPO (one policy step each). Its fields say `units`, never `steps`, so that
`phases.units` does not read as env steps where it counts batches. Its whole state is a small dict that the
algorithm checkpoints, so a restored run resumes at the same iteration, phase and step.

Adaptive kappa (`reschedule_after_current`): when kappa or C_FA change mid-run (Tune's PBT / PB2
restore a member with mutated settings), the current iteration keeps its planned end and the units
left after it are split anew, into the new N_kappa's share of them. The schedule is then a
*segment* starting at `segment_units` units and iteration `segment_iteration`; before any change
both are 0 and the machine is the plain one.
"""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass

from kappa_rllib.schedule import iteration_end, samples_per_iteration

IMPROVEMENT = "improvement"
EVALUATION = "evaluation"
DONE = "done"


@dataclass
class KappaPhaseMachine:
    total_units: int  # T, in `unit`s: env steps (kappa-DQN) or sample batches (kappa-TRPO)
    num_iterations: int
    with_evaluation_phase: bool
    unit: str = "env_steps"
    iteration: int = 0
    phase: str = IMPROVEMENT
    units: int = 0  # units done, all iterations
    phase_units: int = 0  # units done in the current improvement phase
    phase_updates: int = 0  # gradient updates in the current phase
    improvement_updates: int = 0  # updates the last improvement phase made (evaluation budget)
    segment_units: int = 0  # where the current schedule segment starts (after a reschedule)
    segment_iteration: int = 0

    def __post_init__(self):
        samples_per_iteration(self.total_units, self.num_iterations)  # validates both

    def _segment(self) -> tuple[int, int]:
        """(units, iterations) of the current schedule segment."""
        return self.total_units - self.segment_units, self.num_iterations - self.segment_iteration

    def _iteration_end(self, iteration: int) -> int:
        if iteration < self.segment_iteration:  # the iteration a reschedule let finish: it ends the old plan
            return self.segment_units
        units, iterations = self._segment()
        return self.segment_units + iteration_end(iteration - self.segment_iteration, units, iterations)

    def reschedule_after_current(self, num_iterations: int) -> int:
        """After the current iteration, split the units left into the share of a schedule of
        `num_iterations` (a new kappa's N_kappa over all T) that they make up: round(left * N / T)
        iterations, at least 1 and at most one per unit, so an iteration keeps the new kappa's
        length T / N. Returns the iterations after the current one (0: none left to plan)."""
        if self.done:
            return 0
        current_end = self._iteration_end(self.iteration)
        left = self.total_units - current_end
        if left <= 0:
            return 0
        after = max(1, min(left, round(left * num_iterations / self.total_units)))
        self.segment_units, self.segment_iteration = current_end, self.iteration + 1
        self.num_iterations = self.iteration + 1 + after
        return after

    def iterations_ended_by(self, units: int) -> int:
        """How many kappa-iterations of this plan end at or before `units` (0..num_iterations):
        where a learner that only sees unit counts (kappa-APPO's) stands in the schedule."""
        return bisect.bisect_right(range(self.num_iterations), units, key=self._iteration_end)

    @property
    def done(self) -> bool:
        return self.phase == DONE

    def units_left_in_phase(self) -> int:
        """Units until the current improvement phase ends (0 outside that phase)."""
        if self.phase != IMPROVEMENT:
            return 0
        return max(0, self._iteration_end(self.iteration) - self.units)

    def units_in_next_improvement(self) -> int:
        """In an evaluation phase: the units of the improvement phase that follows it (the next iteration's)."""
        if self.phase != EVALUATION:
            raise RuntimeError(f"the {self.phase} phase is followed by no improvement phase known now")
        return self._iteration_end(self.iteration + 1) - self.units

    def updates_left_in_phase(self) -> int:
        """Evaluation-phase gradient steps still to do (0 outside that phase)."""
        if self.phase != EVALUATION:
            return 0
        return max(0, self.improvement_updates - self.phase_updates)

    def record_units(self, n: int) -> None:
        self.units += n
        self.phase_units += n

    def record_updates(self, n: int) -> None:
        self.phase_updates += n

    def improvement_complete(self) -> bool:
        return self.phase == IMPROVEMENT and self.units_left_in_phase() == 0

    def evaluation_complete(self) -> bool:
        return self.phase == EVALUATION and self.updates_left_in_phase() == 0

    def end_improvement(self) -> None:
        """Leave the improvement phase: to evaluation (kappa-PI) or the next iteration."""
        assert self.improvement_complete()
        self.improvement_updates = self.phase_updates
        last = self.iteration == self.num_iterations - 1
        if self.with_evaluation_phase and self.improvement_updates > 0 and not last:
            self._enter(EVALUATION)
        else:
            self._next_iteration()

    def end_evaluation(self) -> None:
        assert self.evaluation_complete()
        self._next_iteration()

    def _next_iteration(self) -> None:
        self.iteration += 1
        self._enter(IMPROVEMENT if self.iteration < self.num_iterations else DONE)

    def _enter(self, phase: str) -> None:
        self.phase = phase
        self.phase_units = 0
        self.phase_updates = 0

    def report(self) -> dict:
        """The `kappa/...` entries of a training result."""
        return {
            "iteration": self.iteration,
            "num_iterations": self.num_iterations,
            "phase": self.phase,
            f"phase_{self.unit}": self.phase_units,
            "phase_updates": self.phase_updates,
            self.unit: self.units,
            f"{self.unit}_per_iteration": samples_per_iteration(*self._segment()),
        }

    def get_state(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> "KappaPhaseMachine":
        """The machine from `get_state()`, also from a checkpoint saved before the fields said
        `units` (2026-11-28: `total_steps`, `steps`, `phase_steps`, `segment_steps`)."""
        return cls(**{_OLD_FIELDS.get(name, name): value for name, value in state.items()})


# the fields' names before 2026-11-28 -> their names now (checkpoints keep the old ones)
_OLD_FIELDS = {"total_steps": "total_units", "steps": "units", "phase_steps": "phase_units",
               "segment_steps": "segment_units"}
