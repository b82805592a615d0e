"""The fused update engine of the kappa-DQN learner: a learner program's gradient steps in one call.

Why it is fast: the batch becomes tensors on the learner's device once; within a TDUpdates step, the
targets of every minibatch between two target copies are computed in one batched pass (when they read
only networks that do not change between copies: `targets_fixed_between_syncs`), so each gradient step
runs one forward and one backward of the trained network; torch's fused Adam updates all parameters in
one kernel; on a GPU each gradient step is a replayed CUDA graph (gradient_step.py); statistics stay on
the device and are read once per call. The learner supplies the maths: `td_target(module_id, config,
batch)` and `targets_fixed_between_syncs(module_id, config)` (kappa_dqn_torch_learner.py), and the
copies `sync_target_network` / `copy_theta_to_phi` (kappa_dqn_learner.py).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from ray.rllib.core.columns import Columns

from kappa_rllib.algorithms.kappa_dqn.learner_program import CopyThetaToPhi, check_program
from kappa_rllib.algorithms.kappa_dqn.torch.gradient_step import (
    STAT_KEYS,
    GraphedTDStep,
    eager_td_step,
    graph_unsupported_reason,
)


class FusedUpdateMixin:
    """Mixed into the kappa-DQN TorchLearner before RLlib's `TorchLearner`."""

    def build(self) -> None:
        super().build()
        self._graphs = {}  # module id -> GraphedTDStep (gradient_step.py), captured on first use
        self._graph_off = graph_unsupported_reason(self.config, self._device)

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        """RLlib's Adam (lr from `config.lr`, a schedule allowed), as torch's fused kernel: one
        kernel for all parameters instead of a Python loop over them (same update rule); on a GPU
        `capturable`, its step count on the device, so a CUDA graph can hold it."""
        params = self.get_parameters(self._module[module_id])
        optimizer = torch.optim.Adam(params, fused=True, capturable=self._device.type == "cuda")
        self.register_optimizer(module_id=module_id, optimizer=optimizer, params=params, lr_or_lr_schedule=config.lr)

    def set_state(self, state) -> None:
        super().set_state(state)
        self._graphs = {}  # the optimizer state may be new tensors: capture again

    def _gradient_step(self, module_id, context, obs, actions, target):
        """The callable that runs one gradient step of `module_id`: its CUDA graph where the
        settings allow (captured on first use, again when the lr or the minibatch shape moves),
        else the eager step."""
        if self._graph_off is not None:
            return partial(eager_td_step, self, context)
        graph = self._graphs.get(module_id)
        shapes = (obs.shape, obs.dtype, actions.shape, actions.dtype, target.shape)
        if graph is None or graph.shapes != shapes or not graph.still_valid(context[2]):
            graph = self._graphs[module_id] = GraphedTDStep(self, context, obs, actions, target)
            graph.shapes = shapes
        return graph

    # ----- the fused update: a learner program's gradient steps in one call
    def update(self, *, training_data=None, timesteps=None, fused_update=None, **kwargs):
        """With `fused_update={"program": [step, ...], "minibatch_size": n}` (learner_program.py): the
        steps in order, each `TDUpdates(module_id, num_updates, target_syncs)` that many Adam steps of
        `module_id` on the batch's next minibatches of n transitions in a tight loop, with Q' <- Q
        after the update counts in `target_syncs`; `COPY_THETA_TO_PHI` is kappa-VI's phi <- theta at
        that point. Gives the same parameters as RLlib's minibatch loop called step by step (tested);
        without `fused_update`, RLlib's own `Learner.update`.

        Why it is fast: the batch becomes tensors on the learner's device once; within a run, the
        targets of every minibatch between two target copies are computed in one batched pass
        (they read only networks that do not change within the run between copies: Q'_theta,
        Q'_phi and, in a run of Q_theta updates, Q_phi), so each gradient step runs one forward
        and one backward of the trained network; statistics stay on the device and are read once
        per call. Several runs in one call (the naive schedule alternates Q_theta and Q_phi
        updates every few env steps) cost one call instead of one per run.
        """
        if fused_update is None:
            return super().update(training_data=training_data, timesteps=timesteps, **kwargs)
        training_data.solve_refs()
        size = fused_update["minibatch_size"]
        (columns,) = training_data.batch.policy_batches.values()
        tensors = self._fused_batch_tensors(columns)
        stats = {}  # module id -> (per-update stats, (updates, target stats) per target pass)
        contexts = {}  # module id -> what its gradient steps need, set up once per call
        first_minibatch = 0  # of the next step
        for step in check_program(fused_update["program"]):
            if isinstance(step, CopyThetaToPhi):
                self.copy_theta_to_phi()
                continue
            if step.module_id not in contexts:
                contexts[step.module_id] = self._step_context(step.module_id)
            end = first_minibatch + step.num_updates
            minibatches = {column: t[first_minibatch * size : end * size] for column, t in tensors.items()}
            self._fused_run(step.module_id, contexts[step.module_id], minibatches, step.num_updates, size,
                            step.target_syncs, *stats.setdefault(step.module_id, ([], [])))
            first_minibatch = end
        means = {}
        for module_id, (step_stats, target_stats) in stats.items():
            updates = len(step_stats)
            mine = {key: torch.stack([s[key] for s in step_stats]).mean() for key in step_stats[0]}
            for key in target_stats[0][1]:  # minibatch means, weighted by the updates they served
                mine[key] = sum(n * extra[key] for n, extra in target_stats) / updates
            means.update({(module_id, key): value for key, value in mine.items()})
        if means:
            values = torch.stack(list(means.values())).tolist()  # one device->host copy
            for module_id, (step_stats, _) in stats.items():
                self.metrics.log_dict({**{key: v for (mid, key), v in zip(means, values) if mid == module_id},
                                       "num_updates": len(step_stats)}, key=module_id, window=1)
        # As RLlib's `Learner.update` does after its minibatch loop: an lr schedule moves to the
        # env step count of this call (it applies from the next call on), and the lr is logged.
        self.after_gradient_based_update(timesteps=timesteps or {})
        return self.metrics.reduce()

    def _step_context(self, module_id) -> tuple:
        """(config, module in train mode, optimizer, its parameters, global-norm clipping?) of a module:
        set up once per call (RLlib's forward_train re-walks the module tree every step)."""
        config = self.config.get_config_for_module(module_id)
        module = self.module[module_id].unwrapped()
        module.train()
        optimizer = self.get_optimizer(module_id)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        return config, module, optimizer, params, config.grad_clip is not None and config.grad_clip_by == "global_norm"

    def _fused_run(self, module_id, context, tensors, num_updates, size, target_syncs, step_stats,
                   target_stats) -> None:
        """`num_updates` Adam steps of `module_id` on consecutive minibatches of `tensors`, Q' <- Q after the
        update counts in `target_syncs`; appends each step's and each target pass's statistics."""
        config = context[0]
        if self.targets_fixed_between_syncs(module_id, config):  # one target pass per stretch of updates
            ends = sorted({j for j in target_syncs if 0 < j < num_updates} | {num_updates})
        else:  # a target pass before every update
            ends = range(1, num_updates + 1)
        start = 0
        for end in ends:  # updates start..end-1 read the same target networks
            rows = {column: t[start * size : end * size] for column, t in tensors.items()}
            targets, extra = self.td_target(module_id, config, rows)
            target_stats.append((end - start, extra))
            step = None
            for j in range(start, end):
                batch = {column: t[j * size : (j + 1) * size] for column, t in tensors.items()}
                target = targets[(j - start) * size : (j - start + 1) * size]
                if step is None:
                    step = self._gradient_step(module_id, context, batch[Columns.OBS], batch[Columns.ACTIONS], target)
                stats = step(batch[Columns.OBS], batch[Columns.ACTIONS], target)
                step_stats.append(dict(zip(STAT_KEYS, stats)))
            if end in target_syncs:
                self.sync_target_network(module_id)
            start = end

    def _fused_batch_tensors(self, columns) -> dict:
        """The columns a TD update reads, as tensors on the learner's CPU or GPU (on a GPU through
        page-locked host memory, copied without blocking the host). A column already a tensor on the
        learner's device (image stacks gathered from a replay ring there: `replay_frames_on_device`)
        is taken as it is."""
        out = {}
        for column in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS, Columns.TERMINATEDS):
            t = columns[column]
            t = t if torch.is_tensor(t) else torch.as_tensor(np.asarray(t))
            if t.device.type == "cpu" and self._device.type == "cuda":
                t = t.pin_memory().to(self._device, non_blocking=True)
            out[column] = t
        return out
