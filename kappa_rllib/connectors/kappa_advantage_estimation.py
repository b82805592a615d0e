"""kappa-advantages: the learner connector that replaces RLlib's GeneralAdvantageEstimation.

Any algorithm whose advantages come from a return computation that takes rewards and a discount
(PPO's GAE here) solves the surrogate MDP M_{gamma kappa}(V_phi) (paper, Sec. 3-4) when it is fed

    the shaped reward   r_t(kappa, V_phi) = r_t + gamma (1 - kappa) V_phi(s_{t+1})   (0 past a terminal)
    the discount        gamma * kappa

and its lambda is 1: the advantages are then R_j(kappa, V_phi) - V_theta(s_j), R_j the kappa-return of
kappa-PI/VI-TRPO (paper, Algorithms 7, 8). Two identities the tests check:
  * kappa = 1: the shaping weight is 0 and the discount gamma, so this is RLlib's GAE with lambda = 1,
    element for element (and the PPO loss built on it is stock PPO's);
  * V_phi = V_theta: the advantages are GAE(gamma, lambda = kappa) (paper, Sec. 6).

V_phi(s') is read from a learner-only module (`shaping_module_id`) on the same observations the
batch already holds, with the artificial last timestep RLlib's AddOneTsToEpisodesAndTruncate adds
to every episode chunk providing V_phi(s_n) at the chunk's end. For kappa-PI the connector also
writes the regression target of the evaluated V_phi (`fit_module_id`): the plain return rho_j
(discount gamma, bootstrapped with V_phi itself at chunk ends), into that module's own batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ray.rllib.connectors.common.numpy_to_tensor import NumpyToTensor
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.numpy import convert_to_numpy
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets

from kappa_rllib.shaping import shaped_reward, surrogate_discount


class KappaAdvantageEstimation(ConnectorV2):
    """Advantages and value targets of M_{gamma kappa}(V_phi) for the default module (module docstring).

    `shaping_module_id`: the module whose values enter the shaped reward (None at kappa = 1).
    `fit_module_id`: kappa-PI's evaluated V_phi; gets {obs, value targets rho_j, loss mask}.
    """

    def __init__(self, input_observation_space=None, input_action_space=None, *, gamma: float, kappa: float,
                 shaping_module_id: str | None = None, fit_module_id: str | None = None,
                 module_id: str = DEFAULT_MODULE_ID):
        super().__init__(input_observation_space, input_action_space)
        self.gamma, self.kappa = float(gamma), float(kappa)
        self.shaping_module_id, self.fit_module_id, self.module_id = shaping_module_id, fit_module_id, module_id
        self._to_tensor = None

    def __call__(self, *, rl_module, episodes, batch: dict[str, Any], **kwargs):
        data = batch[self.module_id]
        module = rl_module[self.module_id].unwrapped()  # with several learners: inside the DDP wrapper
        if module.is_stateful():
            raise ValueError("kappa advantages need a stateless module (no LSTM / attention): "
                             "set model_config use_lstm=False")

        def values(module_id):
            return convert_to_numpy(rl_module[module_id].unwrapped().compute_values(data)) if module_id else None

        with torch.no_grad():
            v_theta, v_shaping, v_fit = values(self.module_id), values(self.shaping_module_id), values(self.fit_module_id)
        rewards, terminateds, truncateds = (convert_to_numpy(data[c]) for c in
                                            (Columns.REWARDS, Columns.TERMINATEDS, Columns.TRUNCATEDS))
        targets = surrogate_value_targets(v_theta, rewards, terminateds, truncateds, self.gamma, self.kappa, v_shaping)
        advantages = targets - v_theta
        # Standardised as RLlib's GAE does (over every row of the batch), so kappa = 1 is stock PPO.
        advantages = (advantages - advantages.mean()) / max(1e-4, advantages.std())
        results = {self.module_id: {Postprocessing.ADVANTAGES: advantages, Postprocessing.VALUE_TARGETS: targets}}
        if self.fit_module_id:
            # rho_j (Alg. 7, line 8): the original MDP's return, bootstrapped with the evaluated V_phi
            rho = compute_value_targets(values=v_fit, rewards=rewards, terminateds=terminateds,
                                        truncateds=truncateds, gamma=self.gamma, lambda_=1.0)
            results[self.fit_module_id] = {Postprocessing.VALUE_TARGETS: rho}
        if self._to_tensor is None:
            device = data[Columns.OBS].device if isinstance(data[Columns.OBS], torch.Tensor) else None
            self._to_tensor = NumpyToTensor(as_learner_connector=True, device=device)
        tensors = self._to_tensor(rl_module=rl_module, batch=results, episodes=episodes)
        data.update(tensors[self.module_id])
        if self.fit_module_id:
            batch[self.fit_module_id] = {Columns.OBS: data[Columns.OBS], **tensors[self.fit_module_id]}
            if Columns.LOSS_MASK in data:
                batch[self.fit_module_id][Columns.LOSS_MASK] = data[Columns.LOSS_MASK]
        return batch


def surrogate_value_targets(v_theta, rewards, terminateds, truncateds, gamma: float, kappa: float,
                            v_shaping=None) -> np.ndarray:
    """R_j(kappa, V_phi) per row of an RLlib learner batch (episode chunks, each with its artificial
    last timestep): GAE with lambda = 1 on the shaped rewards and the discount gamma * kappa.
    `v_shaping` holds V_phi on the same rows (None: kappa = 1, no shaping)."""
    if v_shaping is not None and kappa < 1.0:
        # V_phi(s_{t+1}) of row t is row t+1 (the artificial timestep's at a chunk's end); the
        # last row's dummy 0.0 only reaches an artificial timestep, which the loss masks out.
        next_v_phi = np.append(np.asarray(v_shaping)[1:], 0.0)
        rewards = shaped_reward(rewards, next_v_phi, terminateds.astype(np.float32), gamma, kappa)
    return compute_value_targets(values=v_theta, rewards=rewards, terminateds=terminateds, truncateds=truncateds,
                                 gamma=surrogate_discount(gamma, kappa), lambda_=1.0)
