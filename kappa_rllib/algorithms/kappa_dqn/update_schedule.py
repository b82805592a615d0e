"""kappa-DQN's update schedule: which learner program (learner_program.py) a stretch of env steps pays
for, kept in the phase machine and the counters (both checkpointed with the algorithm).

  * Q_theta: one update per `env_steps_per_update` env steps after learning starts, counted per
    fragment of `env_steps_per_fragment` env steps; Q'_theta <- Q_theta every
    `target_network_update_freq` env steps (`_theta_schedule`);
  * the end of a kappa-iteration: kappa-VI's phi <- theta (`_iteration_end_program`, Alg. 6 l. 13);
  * kappa-PI's evaluation phase: as many Q_phi updates as the improvement made, Q'_phi copied after as
    many updates as Q'_theta gets between its copies (`_evaluation_program`, `_phi_schedule`, Alg. 5 l. 16);
  * the naive schedule (T_kappa = 1 env step): one chunk spans iterations, its program walks them in
    order (`_chunk_program`).
"""

from __future__ import annotations

from ray.rllib.core import DEFAULT_MODULE_ID

from kappa_rllib.algorithms.kappa_dqn.learner_program import COPY_THETA_TO_PHI, Step, TDUpdates
from kappa_rllib.phases import EVALUATION
from kappa_rllib.variant import PHI_MODULE_ID


class UpdateScheduleMixin:
    """Mixed into KappaDQN: reads `self.config`, `self.phases` and `self.counters`."""

    def _spans_iterations(self) -> bool:
        """Whether one chunk spans kappa-iterations: the naive schedule's T_kappa = 1 env step
        would otherwise cost an EnvRunner call and up to two learner calls per env step."""
        return bool(self.config.naive_schedule)

    def _chunk_bound(self) -> int:
        """Env steps the next chunk may take: to the end of the improvement phase, or of the
        schedule when chunks span iterations."""
        if self._spans_iterations():
            return self.phases.total_units - self.phases.units
        return self.phases.units_left_in_phase()

    def _chunk_program(self, steps: int) -> list[Step]:
        """Records a chunk of `steps` env steps in the phase machine and returns the learner
        program it pays for (learner_program.py), in order. Within one improvement phase that is
        its Q_theta updates; a chunk that spans iterations walks them as `training_step` would one
        env step at a time: each iteration's Q_theta updates, then its end (`_iteration_end_program`)
        and, for kappa-PI, its evaluation phase (`_evaluation_program`)."""
        if steps > self._chunk_bound():  # more than the phase (or schedule) holds: it would never be recorded
            raise RuntimeError(f"a chunk of {steps} env steps runs past the {self.phases.phase} phase's "
                               f"{self._chunk_bound()} env steps left (kappa-iteration {self.phases.iteration}): "
                               "chunks are cut at _chunk_bound()")
        program = []
        while steps > 0:
            in_phase = min(steps, self.phases.units_left_in_phase())
            steps -= in_phase
            updates, syncs = self._theta_schedule(in_phase)
            if updates:
                program.append(TDUpdates(DEFAULT_MODULE_ID, updates, tuple(syncs)))
                self.counters["theta_updates"] += updates
                self.phases.record_updates(updates)
            if self._spans_iterations() and self.phases.improvement_complete():  # the iteration ends here
                program += self._iteration_end_program()
                self.phases.end_improvement()
                if self.phases.phase == EVALUATION:
                    program += self._evaluation_program(self.phases.updates_left_in_phase())
                    self.phases.end_evaluation()
        return program

    def _theta_schedule(self, steps: int) -> tuple[int, list[int]]:
        """Records `steps` env steps fragment by fragment; returns the Q_theta updates they pay
        for (one per env_steps_per_update after learning starts) and after which of those
        updates Q'_theta <- Q_theta is due (every target_network_update_freq env steps)."""
        cfg, counters = self.config, self.counters
        num_updates, syncs = 0, []
        while steps > 0:
            fragment = min(cfg.env_steps_per_fragment, steps)
            steps -= fragment
            self.phases.record_units(fragment)
            if self.phases.units < cfg.num_steps_sampled_before_learning_starts:
                continue
            counters["pending_update_env_steps"] += fragment
            due = counters["pending_update_env_steps"] // cfg.env_steps_per_update
            if due:
                counters["pending_update_env_steps"] -= due * cfg.env_steps_per_update
                num_updates += due
                if self.phases.units - counters["last_theta_target_sync"] >= cfg.target_network_update_freq:
                    syncs.append(num_updates)
                    counters["last_theta_target_sync"] = self.phases.units
        return num_updates, syncs

    def _iteration_end_program(self) -> list[Step]:
        """What closes a kappa-iteration's improvement phase in the learners, the one place for the
        one-step loop (`_end_improvement`) and the naive schedule's chunks (`_chunk_program`):
        kappa-VI's phi <- theta (Algorithm 6, line 13); nothing for kappa-PI, whose evaluation phase
        follows, nor at kappa = 1, where V_phi is never read."""
        return [COPY_THETA_TO_PHI] if self.config.kappa_plan.copies_theta_to_phi else []

    def _evaluation_program(self, updates: int) -> list[TDUpdates]:
        """`updates` Q_phi TD(0) updates of kappa-PI's evaluation phase (Algorithm 5, line 16), with
        Q'_phi <- Q_phi after every `_phi_target_period()` phi updates; recorded in the phase machine."""
        self.phases.record_updates(updates)
        return [TDUpdates(PHI_MODULE_ID, updates, tuple(self._phi_schedule(updates)))]

    def _phi_schedule(self, num_updates: int) -> list[int]:
        """Counts `num_updates` Q_phi updates; returns after which of them Q'_phi <- Q_phi is due
        (every `_phi_target_period()` phi updates, counted over the whole run)."""
        counters, period = self.counters, self._phi_target_period()
        done_since_sync = counters["phi_updates"] - counters["phi_updates_at_last_target_sync"]
        syncs = list(range(period - done_since_sync, num_updates + 1, period))
        counters["phi_updates"] += num_updates
        if syncs:
            counters["phi_updates_at_last_target_sync"] = counters["phi_updates"] - (num_updates - syncs[-1])
        return syncs

    def _phi_target_period(self) -> int:
        """Q'_phi is copied after as many updates as Q'_theta gets between its copies."""
        return max(1, self.config.target_network_update_freq // self.config.env_steps_per_update)
