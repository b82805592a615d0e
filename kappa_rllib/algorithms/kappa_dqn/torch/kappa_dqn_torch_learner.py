"""The kappa-DQN losses (paper, Appendix A, Algorithms 5 and 6), in torch.

Why the shaping lives in the loss and not in a learner connector: the shaped reward needs
V_phi(s') = Q_phi(s', .) and, for kappa-PI, argmax_a Q'_theta(s', a), i.e. the same forward
pass over s' that the target needs anyway. Done here it costs one extra pass of Q_phi, uses
the networks exactly as they are at this gradient step, and the replay buffer keeps raw rewards.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
from torch import nn

from ray.rllib.algorithms.dqn.dqn_learner import (
    QF_LOSS_KEY,
    QF_MEAN_KEY,
    QF_PREDS,
    QF_TARGET_NEXT_PREDS,
    TD_ERROR_MEAN_KEY,
)
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.torch.torch_learner import TorchLearner

from kappa_rllib.algorithms.kappa_dqn.kappa_dqn_learner import KappaDQNLearner
from kappa_rllib.algorithms.kappa_dqn.torch.gradient_step import (  # noqa: F401  (clip_by_global_norm_: tests)
    STAT_KEYS,
    GraphedTDStep,
    clip_by_global_norm_,
    eager_td_step,
    graph_unsupported_reason,
)
from kappa_rllib.shaping import shaped_reward, surrogate_td_target
from kappa_rllib.algorithms.kappa_dqn.learner_program import CopyThetaToPhi, as_step
from kappa_rllib.variant import PHI_MODULE_ID, V_PHI_AUTHORS

SHAPED_REWARD_MEAN_KEY = "shaped_reward_mean"
V_PHI_MEAN_KEY = "v_phi_next_mean"


def _gather(q: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    return q.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def learning_rewards(config, rewards: torch.Tensor) -> torch.Tensor:
    """The rewards the losses see. RLlib's `clip_rewards`: True = sign(r) (DeepMind's Atari
    clipping), a number c = clip to [-c, c], None/False = raw. The replay buffer and the
    reported episode returns keep the raw game reward."""
    clip = config.clip_rewards
    if clip is True:
        return torch.sign(rewards)
    if clip:
        return torch.clamp(rewards, -float(clip), float(clip))
    return rewards


class KappaDQNTorchLearner(KappaDQNLearner, TorchLearner):
    def build(self) -> None:
        super().build()
        self._graphs = {}  # module id -> GraphedTDStep (gradient_step.py), captured on first use
        self._graph_off = graph_unsupported_reason(self.config, self._device)
        if self._device.type == "cuda":
            # Channels-last conv weights: RLlib's CNN permutes the (N, H, W, C) frames to NCHW as a
            # view, which is channels-last in memory; with weights in the same layout cuDNN runs its
            # NHWC kernels on them directly, with no layout conversion on the device.
            for module_id in self.module.keys():
                self.module[module_id].unwrapped().to(memory_format=torch.channels_last)

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
        for step in map(as_step, fused_update["program"]):
            if isinstance(step, CopyThetaToPhi):
                self.copy_theta_to_phi()
                continue
            if step.module_id not in contexts:
                contexts[step.module_id] = self._step_context(step.module_id)
            end = first_minibatch + step.num_updates
            minibatches = {c: t[first_minibatch * size : end * size] for c, t in tensors.items()}
            self._fused_run(step.module_id, contexts[step.module_id], minibatches, step.num_updates, size,
                            step.target_syncs, *stats.setdefault(step.module_id, ([], [])))
            first_minibatch = end
        means = {}
        for module_id, (step_stats, target_stats) in stats.items():
            k = len(step_stats)
            mine = {key: torch.stack([s[key] for s in step_stats]).mean() for key in step_stats[0]}
            for key in target_stats[0][1]:  # minibatch means, weighted by the updates they served
                mine[key] = sum(n * extra[key] for n, extra in target_stats) / k
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

    def _fused_run(self, module_id, context, tensors, k, size, target_syncs, step_stats, target_stats) -> None:
        """`k` Adam steps of `module_id` on consecutive minibatches of `tensors`, Q' <- Q after the
        update counts in `target_syncs`; appends each step's and each target pass's statistics."""
        config = context[0]
        if self.targets_fixed_between_syncs(module_id, config):  # one target pass per stretch of updates
            ends = sorted({j for j in target_syncs if 0 < j < k} | {k})
        else:  # a target pass before every update
            ends = range(1, k + 1)
        start = 0
        for end in ends:  # updates start..end-1 read the same target networks
            rows = {c: t[start * size : end * size] for c, t in tensors.items()}
            targets, extra = self.td_target(module_id, config, rows)
            target_stats.append((end - start, extra))
            step = None
            for j in range(start, end):
                batch = {c: t[j * size : (j + 1) * size] for c, t in tensors.items()}
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
        page-locked host memory, copied without blocking the host)."""
        out = {}
        for c in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS, Columns.TERMINATEDS):
            t = torch.as_tensor(np.asarray(columns[c]))
            out[c] = t.pin_memory().to(self._device, non_blocking=True) if self._device.type == "cuda" else t
        return out

    @staticmethod
    def targets_fixed_between_syncs(module_id, config) -> bool:
        """Whether a TD target reads only networks that stay fixed between two target copies of
        `module_id`: all but the authors' V_phi, which reads the online Q_theta being trained."""
        return not (module_id == DEFAULT_MODULE_ID and config.kappa_plan.uses_v_phi
                    and config.v_phi_source == V_PHI_AUTHORS)

    @torch.no_grad()
    def td_target(self, module_id, config, batch):
        """(TD target of `module_id`, its statistics) for a batch of transitions."""
        module = self.module[module_id].unwrapped()
        fwd_out = {QF_TARGET_NEXT_PREDS: module.forward_target({Columns.OBS: batch[Columns.NEXT_OBS]})[QF_PREDS]}
        if module_id == DEFAULT_MODULE_ID:
            return self.improvement_target(config, batch, fwd_out)
        if module_id == PHI_MODULE_ID:
            return self.evaluation_target(config, batch, fwd_out), {}
        raise ValueError(f"kappa-DQN has no module {module_id!r}")

    # ----- the losses
    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        loss, stats = self.loss_and_stats(module_id, config, batch, fwd_out)
        self.metrics.log_dict(stats, key=module_id, window=1)
        return loss

    def loss_and_stats(self, module_id, config, batch, fwd_out):
        """The Huber (or MSE) TD loss of `module_id` and its detached statistics."""
        if module_id == DEFAULT_MODULE_ID:
            target, extra = self.improvement_target(config, batch, fwd_out)
        elif module_id == PHI_MODULE_ID:
            target, extra = self.evaluation_target(config, batch, fwd_out), {}
        else:
            raise ValueError(f"kappa-DQN has no module {module_id!r}")
        loss, stats = self.td_loss(config, fwd_out[QF_PREDS], batch[Columns.ACTIONS], target)
        return loss, {**stats, **extra}

    @staticmethod
    def td_loss(config, q_preds, actions, target):
        """Huber (or MSE) between Q(s, a) and the (detached) target, and its statistics."""
        q_selected = _gather(q_preds, actions)
        loss_fn = nn.functional.huber_loss if config.td_error_loss_fn == "huber" else nn.functional.mse_loss
        loss = loss_fn(q_selected, target.detach())
        stats = {
            QF_LOSS_KEY: loss.detach(),
            QF_MEAN_KEY: q_selected.detach().mean(),
            TD_ERROR_MEAN_KEY: (q_selected.detach() - target).abs().mean(),
        }
        return loss, stats

    @torch.no_grad()
    def improvement_target(self, config, batch, fwd_out):
        """Q_theta target: r(kappa, V_phi) + gamma kappa max_a Q'_theta(s', a) (Alg. 5/6, l. 9)."""
        q_target_next = fwd_out[QF_TARGET_NEXT_PREDS]  # Q'_theta(s', .)
        rewards, terminateds = learning_rewards(config, batch[Columns.REWARDS]), batch[Columns.TERMINATEDS].float()
        if config.kappa_plan.uses_v_phi:
            v_phi_next = self.v_phi(config, batch[Columns.NEXT_OBS], q_target_next)
        else:  # gamma (1 - kappa) = 0: no shaping term, and no need to evaluate V_phi
            v_phi_next = torch.zeros_like(rewards)
        target = surrogate_td_target(
            rewards,
            v_phi_next,
            q_target_next.max(dim=-1).values,
            terminateds,
            config.gamma,
            config.kappa,
        )
        shaped = shaped_reward(rewards, v_phi_next, terminateds, config.gamma, config.kappa)
        return target, {SHAPED_REWARD_MEAN_KEY: shaped.mean(), V_PHI_MEAN_KEY: v_phi_next.mean()}

    def v_phi(self, config, next_obs, q_target_theta_next):
        """V_phi(s'), `v_phi_source="paper"`: kappa-PI: Q_phi(s', argmax_a Q'_theta(s', a))
        (Alg. 5, line 10); kappa-VI: max_a Q_phi(s', a) (Alg. 6, line 10).
        `v_phi_source="authors"` (their code, both variants): the target Q'_phi(s', .) at the
        online Q_theta's greedy action (their epsilon-greedy exploration of a' is not copied)."""
        phi = self.module[PHI_MODULE_ID].unwrapped()
        if config.v_phi_source == V_PHI_AUTHORS:
            q_phi_next = phi.forward_target({Columns.OBS: next_obs})[QF_PREDS]
            q_theta_next = self.module[DEFAULT_MODULE_ID].unwrapped().compute_q_values({Columns.OBS: next_obs})
            return _gather(q_phi_next, q_theta_next[QF_PREDS].argmax(dim=-1))
        q_phi_next = phi.compute_q_values({Columns.OBS: next_obs})[QF_PREDS]
        if config.kappa_plan.evaluates_phi:  # Q_phi evaluates pi_i = argmax_a Q'_theta
            return _gather(q_phi_next, q_target_theta_next.argmax(dim=-1))
        return q_phi_next.max(dim=-1).values

    @torch.no_grad()
    def evaluation_target(self, config, batch, fwd_out):
        """Q_phi target, off-policy TD(0) for pi_i = argmax_a Q'_theta (Alg. 5, line 16):
        r + gamma Q'_phi(s', pi_i(s'))."""
        theta = self.module[DEFAULT_MODULE_ID].unwrapped()
        q_target_theta_next = theta.forward_target({Columns.OBS: batch[Columns.NEXT_OBS]})[QF_PREDS]
        pi_next = q_target_theta_next.argmax(dim=-1)
        q_target_phi_next = _gather(fwd_out[QF_TARGET_NEXT_PREDS], pi_next)
        terminateds = batch[Columns.TERMINATEDS].float()
        return learning_rewards(config, batch[Columns.REWARDS]) + config.gamma * (1.0 - terminateds) * q_target_phi_next
