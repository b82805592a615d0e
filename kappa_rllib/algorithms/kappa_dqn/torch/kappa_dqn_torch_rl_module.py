"""RLlib's DQN module, taking raw uint8 image frames.

Atari observations stay uint8 (84x84x4) from the env through the replay buffer (which stores
each frame once, see kappa_rllib.replay) and are scaled to [0, 1] floats only inside the
network, for Q, Q' and the learner-only Q_phi alike.
"""

from __future__ import annotations

import torch

from ray.rllib.algorithms.dqn.torch.default_dqn_torch_rl_module import DefaultDQNTorchRLModule
from ray.rllib.core.columns import Columns


class KappaDQNTorchRLModule(DefaultDQNTorchRLModule):
    def _qf_forward_helper(self, batch, encoder, head):
        obs = batch[Columns.OBS]
        if obs.dtype == torch.uint8:
            batch = {**batch, Columns.OBS: obs.float() / 255.0}
        return super()._qf_forward_helper(batch, encoder, head)
