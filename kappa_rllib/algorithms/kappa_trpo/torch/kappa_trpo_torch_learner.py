"""kappa-TRPO's learner: TRPO with kappa-returns (paper, Algorithms 7 and 8).

    R_j(kappa, V_phi) = sum_t (gamma kappa)^(t-j) [r_t + gamma (1 - kappa) V_phi(s_{t+1})]
    V_theta is fitted to R_j; the policy step uses advantages R_j - V_theta(s_j).
With V_phi = V_theta these advantages are GAE(gamma, lambda = kappa) (paper, Sec. 6).

Which network is "V_phi" in R_j (docs/paper-settings.md, "V_phi in kappa-PI-TRPO"):

  * kappa-PI: `PHI_SHAPING_MODULE_ID`, a frozen snapshot of the trained V_phi
    (`PHI_MODULE_ID`). V_phi is fitted to the plain returns rho_j on every batch (the authors'
    code; `phi_fit="every_batch"`) or only on an iteration's last batch (Alg. 7 read literally;
    `phi_fit="iteration_end"`); the snapshot is refreshed from it when a kappa-iteration ends.
    rho_j bootstraps with V_phi at a time-limit truncation and the batch end, or (`phi_target=
    "authors"`) stops at a truncation and bootstraps the batch end with the snapshot.
  * kappa-VI: `PHI_MODULE_ID`, set to V_theta when a kappa-iteration ends (Alg. 8, line 11).

The algorithm says whether V_phi is fitted on a batch through the update call's `fit_phi`
(`KappaPlan.fits_phi_on_batch`), so that batch's data never has to outlive the call, and closes a
kappa-iteration with `end_kappa_iteration` (the shared loop's `_end_improvement`).
"""

from __future__ import annotations

import numpy as np

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from kappa_rllib.algorithms.trpo.torch.trpo_torch_learner import TRPOTorchLearner, copy_value_net
from kappa_rllib.returns import kappa_returns, plain_returns
from kappa_rllib.variant import PHI_MODULE_ID, PHI_SHAPING_MODULE_ID

# The plain return rho_j (Alg. 7, line 8), V_phi's regression target; no RLlib column exists for it.
PHI_VALUE_TARGETS = "kappa_phi_value_targets"
PHI_SHAPING_VALUES = "kappa_phi_shaping_values"  # V_phi_shaping(s_j), computed with the targets


class KappaTRPOTorchLearner(TRPOTorchLearner):
    def build(self) -> None:
        super().build()
        self.plan = self.config.kappa_plan
        if self.plan.evaluates_phi:  # the first iteration shapes with V_phi's initial weights
            self._refresh_phi_snapshot()

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        # V_theta always trains; V_phi only where it is evaluated (kappa-PI). The kappa-VI copy
        # and the kappa-PI snapshot only ever receive weights: no optimizer.
        if module_id == DEFAULT_MODULE_ID or (module_id == PHI_MODULE_ID and config.kappa_plan.evaluates_phi):
            super().configure_optimizers_for_module(module_id, config)

    @property
    def shaping_module_id(self) -> str:
        """The network whose values enter the shaped reward r + gamma (1 - kappa) V_phi(s')."""
        return PHI_SHAPING_MODULE_ID if self.plan.evaluates_phi else PHI_MODULE_ID

    def value_module_ids(self) -> list[str]:
        if not self.plan.uses_v_phi:  # the shaping weight gamma (1 - kappa) is 0
            return [DEFAULT_MODULE_ID]
        ids = [DEFAULT_MODULE_ID, self.shaping_module_id]
        if self.plan.evaluates_phi:
            ids.append(self.plan.rho_bootstrap_module)  # bootstraps rho_j at truncations and the batch end
        return ids

    def advantages_and_targets(self, chunk, values):
        v_theta = values[DEFAULT_MODULE_ID]
        v_shaping = values.get(self.shaping_module_id, np.zeros_like(v_theta))
        # `ends`: a termination, or a truncation too with truncation_as_terminal (the authors' gym 0.14 `done`
        # zeroes both V_theta's bootstrap and the shaping term V_phi(s_n) there)
        cfg, rewards, ends = self.config, chunk[Columns.REWARDS], self.episode_ends(chunk)
        returns = kappa_returns(rewards, v_shaping, v_theta[-1], ends, cfg.gamma, cfg.kappa)
        out = {Columns.ADVANTAGES: returns - v_theta[:-1], Columns.VALUE_TARGETS: returns}
        if self.plan.evaluates_phi:
            # rho_j bootstraps with the trained V_phi, the current estimate of the original MDP's value;
            # phi_target="authors": not at a truncation, and with the shaping snapshot at the batch end
            ends = ends or (self.plan.rho_ends_at_truncation and chunk.get("truncated", False))
            out[PHI_VALUE_TARGETS] = plain_returns(rewards, values[self.plan.rho_bootstrap_module][-1], ends,
                                                   cfg.gamma)
            out[PHI_SHAPING_VALUES] = v_shaping[:-1]  # for the metric below, not recomputed
        return out

    def value_targets(self, data: dict, *, fit_phi: bool = False, **kwargs) -> dict:
        """V_theta to R_j; with `fit_phi` (kappa-PI: `KappaPlan.fits_phi_on_batch`) V_phi to rho_j
        (Alg. 7, line 13), in the same fit."""
        targets = super().value_targets(data)
        if fit_phi:
            targets[PHI_MODULE_ID] = data[PHI_VALUE_TARGETS]
        return targets

    def after_value_fit(self, data: dict, **kwargs) -> None:
        if self.plan.evaluates_phi:
            # how well the shaping network tracks the plain returns (too small: shaping ~ r)
            self.metrics.log_dict(
                {"rho_mean": data[PHI_VALUE_TARGETS].mean().item(),
                 "v_phi_shaping_mean": data[PHI_SHAPING_VALUES].mean().item()},
                key=PHI_MODULE_ID, window=1,
            )

    def end_kappa_iteration(self) -> None:
        """What closes a kappa-iteration: kappa-PI's V_phi snapshot, kappa-VI's phi <- theta."""
        if self.plan.evaluates_phi:
            self._refresh_phi_snapshot()
        elif self.plan.copies_theta_to_phi:
            self.copy_value_theta_to_phi()

    def _refresh_phi_snapshot(self) -> None:
        """V_phi_shaping <- V_phi: the next kappa-iteration's surrogate MDP is fixed."""
        copy_value_net(self.module[PHI_MODULE_ID].unwrapped(), self.module[PHI_SHAPING_MODULE_ID].unwrapped())

    def copy_value_theta_to_phi(self) -> None:
        """kappa-VI: V_phi <- V_theta (Alg. 8, line 11)."""
        copy_value_net(self.module[DEFAULT_MODULE_ID].unwrapped(), self.module[PHI_MODULE_ID].unwrapped())
