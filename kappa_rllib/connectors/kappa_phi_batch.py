"""kappa-PI-APPO's V_phi batch: the policy's rows, also under V_phi's module id.

kappa-PI's evaluated V_phi (`PHI_MODULE_ID`) learns on every batch (kappa_rllib.algorithms.
kappa_appo.torch). Giving it its own batch, not a second forward inside the policy's loss, makes
RLlib run its forward pass through the module's own wrapper, so with several learners torch DDP
averages V_phi's gradients as it does the policy's. The rows are shared, not copied.
"""

from __future__ import annotations

from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from kappa_rllib.variant import PHI_MODULE_ID

# What V_phi's V-trace targets read (importance weights: actions and the behaviour log-probs).
PHI_COLUMNS = (Columns.OBS, Columns.ACTIONS, Columns.ACTION_LOGP, Columns.REWARDS, Columns.TERMINATEDS,
               Columns.TRUNCATEDS, Columns.LOSS_MASK)


class KappaPhiBatch(ConnectorV2):
    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        policy_rows = batch[DEFAULT_MODULE_ID]
        batch[PHI_MODULE_ID] = {c: policy_rows[c] for c in PHI_COLUMNS if c in policy_rows}
        return batch
