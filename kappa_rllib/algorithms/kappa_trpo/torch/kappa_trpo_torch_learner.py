"""kappa-TRPO's learner: TRPO with kappa-returns (paper, Algorithms 7 and 8).

    R_j(kappa, V_phi) = sum_t (gamma kappa)^(t-j) [r_t + gamma (1 - kappa) V_phi(s_{t+1})]
    V_theta is fitted to R_j; the policy step uses advantages R_j - V_theta(s_j).
With V_phi = V_theta these advantages are GAE(gamma, lambda = kappa) (paper, Sec. 6).
"""

from __future__ import annotations

import numpy as np

from ray.rllib.core import DEFAULT_MODULE_ID

from kappa_rllib.algorithms.trpo.torch.trpo_torch_learner import TRPOTorchLearner
from kappa_rllib.returns import kappa_returns, plain_returns

VALUE_PHI_MODULE_ID = "kappa_value_phi"


class KappaTRPOTorchLearner(TRPOTorchLearner):
    def value_module_ids(self) -> list[str]:
        if self.config.kappa == 1.0:  # the shaping weight gamma (1 - kappa) is 0
            return [DEFAULT_MODULE_ID]
        return [DEFAULT_MODULE_ID, VALUE_PHI_MODULE_ID]

    def advantages_and_targets(self, chunk, values):
        v_theta = values[DEFAULT_MODULE_ID]
        v_phi = values.get(VALUE_PHI_MODULE_ID, np.zeros_like(v_theta))
        cfg = self.config
        returns = kappa_returns(chunk["rewards"], v_phi, v_theta[-1], chunk["terminated"], cfg.gamma, cfg.kappa)
        out = {"advantages": returns - v_theta[:-1], "value_targets": returns}
        if cfg.kappa_variant == "pi" and cfg.kappa < 1.0:
            # rho_j, for the end-of-iteration V_phi fit; bootstrapped with V_phi, the estimate
            # of the original MDP's value
            out["value_phi_targets"] = plain_returns(chunk["rewards"], v_phi[-1], chunk["terminated"], cfg.gamma)
        return out

    def fit_value_phi(self) -> float:
        """kappa-PI: fit V_phi to rho_j of the iteration's last batch (Alg. 7, lines 12-13)."""
        return self.fit_values(VALUE_PHI_MODULE_ID, self.last_batch["obs"], self.last_batch["value_phi_targets"])

    def copy_value_theta_to_phi(self) -> None:
        """kappa-VI: V_phi <- V_theta (Alg. 8, line 11)."""
        theta = self.module[DEFAULT_MODULE_ID].unwrapped()
        phi = self.module[VALUE_PHI_MODULE_ID].unwrapped()
        phi.encoder.critic_encoder.load_state_dict(theta.encoder.critic_encoder.state_dict())
        phi.vf.load_state_dict(theta.vf.state_dict())

