"""The outer loop that Algorithms 5-8 share, with the phase machine in results and checkpoints.

    for i = 0 .. N_kappa - 1:                                   (paper, Algorithms 5-8, line 3)
        improvement: solve M_{gamma kappa}(V_phi) for T_kappa units  -> `_improvement_step`
        kappa-PI-DQN: evaluate the improved policy (TD(0) on Q_phi)  -> `_evaluation_step`
        close the iteration (kappa-VI: phi <- theta; ...)            -> `_end_improvement`

`KappaLoopMixin.training_step` walks `kappa_rllib.phases.KappaPhaseMachine` and calls the hooks;
each family (kappa-DQN, kappa-TRPO) only says what one improvement step, one evaluation step and
the end of an improvement phase are. What a variant does with V_phi is `config.kappa_plan`
(`kappa_rllib.variant`).

Adaptive kappa: restored from a checkpoint with other kappa / C_FA settings (Tune's PBT and PB2 do
exactly that when they exploit and explore), an algorithm keeps the current kappa-iteration's
planned end and re-plans the env steps (or batches) left after it with the new N_kappa
(`KappaPhaseMachine.reschedule_after_current`); the learners, built from the new config, shape
with the new kappa from the first step. Each change is logged and kept in `kappa/changes`, and
every result carries the kappa and C_FA in force (`kappa/kappa`, `kappa/c_fa`).
"""

from __future__ import annotations

import logging

from ray.rllib.utils.metrics import TIMERS

from kappa_rllib.phases import EVALUATION, KappaPhaseMachine

logger = logging.getLogger(__name__)
KAPPA_ITERATION_END_TIMER = "kappa_iteration_end_timer"  # result["timers"]: closing the kappa-iterations


class KappaLoopMixin:
    """Mixed in before an RLlib `Algorithm`: `training_step`, `result["kappa"]`, `done`, and the
    checkpointed kappa state (`self.phases`, `self.counters`, plus `_extra_kappa_state`)."""

    phases: KappaPhaseMachine
    counters: dict
    kappa_changes: list  # the kappa / C_FA changes adopted so far (adaptive kappa), oldest first

    def setup(self, config) -> None:
        self.kappa_changes = []
        super().setup(config)

    # ----- hooks of a family
    def _units_per_training_step(self) -> int:
        """Schedule units (env steps or batches) one `Algorithm.train()` call covers at most."""
        raise NotImplementedError

    def _improvement_step(self, max_units: int) -> int:
        """Progress the improvement phase by up to `max_units` units (>= 1) and return how many it did.
        The loop calls it only while the phase has units left. A family whose unit is a batch (kappa-TRPO,
        kappa-PPO) does one batch and returns 1; the loop calls it again while the `train()` call has
        units left (kappa-TRPO's `batches_per_iteration`). kappa-DQN stops at the phase's end; kappa-APPO
        may return 0 (no batch finished yet) or pass the end (one round brought several batches)."""
        raise NotImplementedError

    def _evaluation_step(self, units_left: int) -> None:
        """Progress the evaluation phase (only families whose phase machine has one). `units_left`: the units this
        `train()` call has left (an evaluation uses none), which the next improvement phase's first step gets."""
        raise NotImplementedError

    def _end_improvement(self) -> None:
        """Work that closes a kappa-iteration's improvement phase (before the phase machine moves on).
        By default every learner's `end_kappa_iteration` (kappa-TRPO, kappa-PPO: kappa-PI's V_phi
        snapshot, kappa-VI's phi <- theta, on all learners at once so they hold one V_phi); kappa-DQN
        runs a learner program instead, and kappa-APPO's learners close iterations themselves."""
        if self.config.kappa_plan.uses_v_phi:
            self.learner_group.foreach_learner(lambda learner: learner.end_kappa_iteration())

    # ----- the loop
    def training_step(self) -> None:
        self._check_not_done()
        budget, used = self._units_per_training_step(), 0
        # An improvement phase whose units are all in (kappa-APPO: one sampling round may bring the
        # batches of several iterations) closes in this call even when the budget is used up, so the
        # call that brings unit T also ends the schedule.
        while not self.phases.done and (used < budget or self.phases.improvement_complete()):
            if self.phases.phase == EVALUATION:
                self._evaluation_step(budget - used)
                if self.phases.evaluation_complete():
                    self.phases.end_evaluation()
            else:
                if not self.phases.improvement_complete():
                    used += self._improvement_step(budget - used)
                if self.phases.improvement_complete():
                    with self.metrics.log_time((TIMERS, KAPPA_ITERATION_END_TIMER)):
                        self._end_improvement()
                    self.phases.end_improvement()

    @property
    def schedule_done(self) -> bool:
        """Every kappa-iteration of the schedule is over: the run reports `done` (checkpoint manifests record it)."""
        return self.phases.done

    def _check_not_done(self) -> None:
        if self.phases.done:
            raise RuntimeError(
                f"the kappa schedule is complete: all total_env_steps={self.config.total_env_steps} "
                "were used; build a new algorithm (or raise total_env_steps) to train further"
            )

    # ----- results and checkpoints
    def step(self):
        result = super().step()
        result["kappa"] = {"variant": self.config.kappa_variant, **self.phases.report(), **self.counters,
                           **self._settings(), "changes": len(self.kappa_changes)}
        if self.phases.done:
            result["done"] = True  # Tune stops the trial when the schedule is used up
        return result

    def get_state(self, components=None, *, not_components=None, **kwargs):
        state = super().get_state(components, not_components=not_components, **kwargs)
        state["kappa"] = {
            "phases": self.phases.get_state(),
            "counters": dict(self.counters),
            "settings": self._settings(),
            "changes": list(self.kappa_changes),
            **self._extra_kappa_state(),
        }
        return state

    def _settings(self) -> dict:
        return {"kappa": float(self.config.kappa), "c_fa": float(self.config.c_fa),
                "naive_schedule": bool(self.config.naive_schedule)}

    def set_state(self, state) -> None:
        super().set_state(state)
        if "kappa" in state:
            self.phases = KappaPhaseMachine.from_state(state["kappa"]["phases"])
            self.counters = dict(state["kappa"]["counters"])
            self.kappa_changes = list(state["kappa"].get("changes", []))
            self._set_extra_kappa_state(state["kappa"])
            saved = state["kappa"].get("settings")
            if saved is not None and saved != self._settings():
                self._adopt_settings(saved)
            # the acting weights are renewed by SamplerMixin.set_state (below this in the MRO)

    def _adopt_settings(self, saved: dict) -> None:
        """Restored with other kappa / C_FA settings: re-plan the rest of the schedule (module docstring)."""
        new = self._settings()
        n_all = self.config.schedule_length if new["naive_schedule"] else self.config.num_kappa_iterations
        before = self.phases.num_iterations
        after = self.phases.reschedule_after_current(n_all)
        change = {self.phases.unit: self.phases.units, "iteration": self.phases.iteration,
                  "from": saved, "to": new, "iterations_after_current": after}
        self.kappa_changes.append(change)
        logger.warning(
            "kappa-rllib: kappa %s -> %s, C_FA %s -> %s at %s %d (kappa-iteration %d): %d kappa-iterations "
            "planned after this one (was %d in all, now %d)", saved["kappa"], new["kappa"], saved["c_fa"],
            new["c_fa"], self.phases.unit, self.phases.units, self.phases.iteration, after, before,
            self.phases.num_iterations)

    def _extra_kappa_state(self) -> dict:
        return {}

    def _set_extra_kappa_state(self, state: dict) -> None:
        pass
