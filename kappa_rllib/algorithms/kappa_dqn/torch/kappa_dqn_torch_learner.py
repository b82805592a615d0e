"""The kappa-DQN losses (paper, Appendix A, Algorithms 5 and 6), in torch.

Why the shaping lives in the loss and not in a learner connector: the shaped reward needs
V_phi(s') = Q_phi(s', .) and, for kappa-PI, argmax_a Q'_theta(s', a), i.e. the same forward
pass over s' that the target needs anyway. Done here it costs one extra pass of Q_phi, uses
the networks exactly as they are at this gradient step, and the replay buffer keeps raw rewards.
"""

from __future__ import annotations

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
from kappa_rllib.algorithms.kappa_dqn.torch.fused_update import FusedUpdateMixin
from kappa_rllib.shaping import shaped_reward, surrogate_td_target
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


class KappaDQNTorchLearner(FusedUpdateMixin, KappaDQNLearner, TorchLearner):
    """The kappa-DQN losses and targets; the fused update engine is FusedUpdateMixin (fused_update.py)."""

    def build(self) -> None:
        super().build()
        if self._device.type == "cuda":
            # Channels-last conv weights: RLlib's CNN permutes the (N, H, W, C) frames to NCHW as a
            # view, which is channels-last in memory; with weights in the same layout cuDNN runs its
            # NHWC kernels on them directly, with no layout conversion on the device.
            for module_id in self.module.keys():
                self.module[module_id].unwrapped().to(memory_format=torch.channels_last)

    @staticmethod
    def targets_fixed_between_syncs(module_id, config) -> bool:
        """Whether a TD target reads only networks that stay fixed between two target copies of
        `module_id`: all but the authors' V_phi, which reads the online Q_theta being trained."""
        return not (module_id == DEFAULT_MODULE_ID and config.kappa_plan.uses_v_phi
                    and config.v_phi_source == V_PHI_AUTHORS)

    @torch.no_grad()
    def td_target(self, module_id, config, batch):
        """(TD target of `module_id`, its statistics) for a batch of transitions (the fused update)."""
        module = self.module[module_id].unwrapped()
        fwd_out = {QF_TARGET_NEXT_PREDS: module.forward_target({Columns.OBS: batch[Columns.NEXT_OBS]})[QF_PREDS]}
        return self.target_and_stats(module_id, config, batch, fwd_out)

    def target_and_stats(self, module_id, config, batch, fwd_out):
        """The one dispatch by module: Q_theta's improvement target, or Q_phi's evaluation target."""
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
        target, extra = self.target_and_stats(module_id, config, batch, fwd_out)
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
        shaped = shaped_reward(rewards, v_phi_next, terminateds, config.gamma, config.kappa)
        target = surrogate_td_target(rewards, v_phi_next, q_target_next.max(dim=-1).values, terminateds,
                                     config.gamma, config.kappa, shaped=shaped)
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
