"""Framework-agnostic part of the kappa-DQN learner: the networks and their copies.

The learner holds a MultiRLModule with two Q-networks, each a DQN module with a target net:
  * DEFAULT_MODULE_ID: Q_theta (and Q'_theta), which solves the surrogate MDP and acts;
  * PHI_MODULE_ID: Q_phi (and Q'_phi), the evaluation network behind V_phi. It is
    `learner_only`: it never leaves the learners, so EnvRunners only see Q_theta.
Target copies and the kappa-VI copy theta -> phi are triggered by the algorithm (it owns the
schedule and the counters, which are checkpointed with it) through `foreach_learner`.
"""

from __future__ import annotations

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.utils import update_target_network
from ray.rllib.core.rl_module.apis import QNetAPI, TargetNetworkAPI

from kappa_rllib.variant import PHI_MODULE_ID


class KappaDQNLearner(Learner):
    def build(self) -> None:
        super().build()
        self.module.foreach_module(
            lambda mid, mod: (
                mod.make_target_networks() if isinstance(mod, TargetNetworkAPI) else None
            )
        )

    def sync_target_network(self, module_id: str) -> None:
        """Q' <- Q for one module (tau = 1 is the paper's hard copy)."""
        tau = self.config.get_config_for_module(module_id).tau
        for main_net, target_net in self.module[module_id].unwrapped().get_target_network_pairs():
            update_target_network(main_net=main_net, target_net=target_net, tau=tau)

    def copy_theta_to_phi(self) -> None:
        """kappa-VI-DQN (Algorithm 6, line 13): phi <- theta at the end of an iteration, into Q_phi
        and its target Q'_phi alike. The paper's V_phi reads Q_phi; the authors' V_phi reads Q'_phi
        (`v_phi_source="authors"`): in their kappa-VI code (deepq_kvi/build_graph.py,
        `update_target_phi`) the network behind V_phi *is* a target copy of the online Q_theta,
        refreshed at each iteration's end. Q_phi never trains in kappa-VI, so both stay equal."""
        theta = self.module[DEFAULT_MODULE_ID].unwrapped().get_target_network_pairs()
        phi = self.module[PHI_MODULE_ID].unwrapped().get_target_network_pairs()
        for (theta_net, _), (phi_net, phi_target) in zip(theta, phi):
            state = theta_net.state_dict()
            phi_net.load_state_dict(state)
            phi_target.load_state_dict(state)

    @classmethod
    def rl_module_required_apis(cls) -> list[type]:
        return [QNetAPI, TargetNetworkAPI]
