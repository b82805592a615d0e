"""kappa-PPO's learner: RLlib's PPOTorchLearner with kappa-advantages (paper, Algorithms 7, 8).

The only change to PPO is in the learner connector pipeline: RLlib's GeneralAdvantageEstimation
is replaced by KappaAdvantageEstimation (kappa_rllib.connectors), so PPO's clipped loss trains the
policy on R_j(kappa, V_phi) - V_theta(s_j) and V_theta on R_j. Which network is V_phi:
  * kappa-PI: the snapshot `PHI_SHAPING_MODULE_ID` of the evaluated V_phi (`PHI_MODULE_ID`), which
    regresses on the plain returns rho_j on every batch (the authors' TRPO code) with PPO's value
    loss; the snapshot is refreshed when a kappa-iteration ends (`end_kappa_iteration`);
  * kappa-VI: `PHI_MODULE_ID`, set to V_theta when a kappa-iteration ends (Alg. 8, line 11).
At kappa = 1 V_phi is never read: the connector is RLlib's GAE with lambda = 1 and this is PPO.
"""

from __future__ import annotations

import torch

from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.connectors.learner import GeneralAdvantageEstimation
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from kappa_rllib.algorithms.actor_critic import PHI_VF_LOSS, KappaValueLearnerMixin
from kappa_rllib.connectors.kappa_advantage_estimation import KappaAdvantageEstimation
from kappa_rllib.variant import PHI_MODULE_ID


class KappaPPOTorchLearner(KappaValueLearnerMixin, PPOTorchLearner):
    def build(self) -> None:
        super().build()
        self._build_kappa()
        if self._learner_connector is not None and self.config.add_default_connectors_to_learner_pipeline:
            self._learner_connector.remove(GeneralAdvantageEstimation)
            self._learner_connector.append(KappaAdvantageEstimation(
                gamma=self.config.gamma, kappa=self.config.kappa,
                shaping_module_id=self.shaping_module_id if self.plan.uses_v_phi else None,
                fit_module_id=PHI_MODULE_ID if self.plan.evaluates_phi else None,
            ))

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        if module_id != PHI_MODULE_ID:
            return super().compute_loss_for_module(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)
        # kappa-PI's V_phi: PPO's value loss (same clip and weight as V_theta's) on rho_j.
        module = self.module[module_id].unwrapped()
        values = module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
        loss = torch.clamp(torch.pow(values - batch[Postprocessing.VALUE_TARGETS], 2.0), 0, config.vf_clip_param)
        if Columns.LOSS_MASK in batch:
            mask = batch[Columns.LOSS_MASK]
            loss = torch.sum(loss[mask]) / torch.sum(mask)
        else:
            loss = torch.mean(loss)
        self.metrics.log_value((module_id, PHI_VF_LOSS), loss.detach(), window=1)
        # + 0 x the policy head's output: with several learners, torch DDP needs every parameter of
        # the module it wraps in the backward graph (V_phi's policy head is never trained).
        return config.vf_loss_coeff * loss + 0.0 * fwd_out[Columns.ACTION_DIST_INPUTS].sum()
