"""A policy module's action-distribution inputs as a plain chain of layers, when it is one.

RLlib's default actor for vector observations (`DefaultPPOTorchRLModule` with an MLP encoder:
`encoder.actor_encoder.net.mlp` then `pi.net.mlp`, Linear layers with tanh or ReLU between them)
computes z(s) = W_L f(... f(W_1 s + b_1) ...) + b_L, and, with `free_log_std`, appends a
state-independent log-std parameter (a diagonal Gaussian's inputs are [mean, log_std]). For
such small networks most of the cost of RLlib's forward pass is Python dispatch, not arithmetic.
Two consumers use the chain instead:

  * `NumpyActor` (the EnvRunner's acting path): z(s) in numpy for a handful of observations,
    then the action sampled from the same distribution RLlib's `TorchDiagGaussian` /
    `TorchCategorical` would build from z, with its log-probability;
  * `MLPJacobian` (TRPO's learner): the products J v and J^T u of the Jacobian of z over a batch
    with respect to the policy parameters, in closed form (one forward-mode and one reverse-mode
    sweep of the chain), for the Fisher-vector products of the natural gradient.

`policy_chain(module)` returns None for anything else (CNN encoders, LSTMs, layer norm, a clipped
state-dependent log-std, other distributions); callers then use RLlib's own forward pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical, TorchDiagGaussian
from ray.rllib.core.models.torch.encoder import TorchMLPEncoder
from ray.rllib.core.models.torch.heads import TorchFreeLogStdMLPHead, TorchMLPHead

_ACTIVATIONS = {nn.Tanh: "tanh", nn.ReLU: "relu", nn.Identity: None}
GAUSSIAN, CATEGORICAL = "gaussian", "categorical"
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass
class PolicyChain:
    """z(s): `layers` in order, each an `nn.Linear` or an activation name ("tanh", "relu");
    `log_std` the free log-std parameter appended to the output (None: no such part);
    `log_std_clip` RLlib's clamp of it to [-c, c] (None: not clipped); `dist` GAUSSIAN or CATEGORICAL."""

    layers: list
    log_std: nn.Parameter | None
    log_std_clip: float | None
    dist: str


def policy_chain(module, dist_cls=None) -> PolicyChain | None:
    """The chain of `module`'s action-distribution inputs, or None if it is not a plain MLP actor
    with a diagonal Gaussian or categorical distribution (see the module docstring)."""
    encoder = getattr(getattr(module, "encoder", None), "actor_encoder", None)
    head = getattr(module, "pi", None)
    if not isinstance(encoder, TorchMLPEncoder) or not isinstance(head, (TorchMLPHead, TorchFreeLogStdMLPHead)):
        return None
    if isinstance(head, TorchMLPHead) and head.clip_log_std:  # a state-dependent, clamped log-std
        return None
    dist_cls = dist_cls or module.get_train_action_dist_cls()
    # RLlib's classes exactly: a subclass may draw otherwise (softmax(z / T) with a temperature, ...)
    if dist_cls is TorchDiagGaussian:
        dist = GAUSSIAN
    elif dist_cls is TorchCategorical:
        dist = CATEGORICAL
    else:
        return None
    layers = []
    for part in (*encoder.net.mlp, *head.net.mlp):
        if isinstance(part, nn.Linear):
            layers.append(part)
        elif type(part) in _ACTIVATIONS:
            if _ACTIVATIONS[type(part)] is not None:
                layers.append(_ACTIVATIONS[type(part)])
        else:
            return None
    free = isinstance(head, TorchFreeLogStdMLPHead)
    if free != (dist == GAUSSIAN):  # a state-dependent Gaussian log-std (or a stray one): RLlib's path
        return None
    clip = float(head.log_std_clip_param_const.item()) if free and head.clip_log_std else None
    return PolicyChain(layers, head.log_std if free else None, clip, dist)


# ----------------------------------------------------------------- acting (EnvRunner)
class NumpyActor:
    """A policy chain in numpy, for a few observations at a time: the arrays are views of the
    module's parameters (no copy), so in-place weight loads (RLlib's `set_state`) show through;
    rebuild it if the parameter tensors themselves are replaced."""

    def __init__(self, chain: PolicyChain):
        self.layers = [(l.weight.detach().numpy().T, l.bias.detach().numpy()) if isinstance(l, nn.Linear) else l
                       for l in chain.layers]
        self.dist = chain.dist
        self.log_std_param = chain.log_std.detach().numpy() if chain.log_std is not None else None
        self.log_std_clip = chain.log_std_clip

    @classmethod
    def of(cls, module, dist_cls) -> "NumpyActor | None":
        """The module's actor in numpy, or None where it is not a plain chain on the CPU."""
        chain = policy_chain(module, dist_cls)
        if chain is None or any(p.device.type != "cpu" or p.dtype != torch.float32 for p in module.parameters()):
            return None
        return cls(chain)

    def dist_inputs(self, obs: np.ndarray) -> np.ndarray:
        """z(s) for a batch of observations (float32): the mean (Gaussian) or the logits."""
        x = obs
        for layer in self.layers:
            if layer == "tanh":
                x = np.tanh(x)
            elif layer == "relu":
                x = np.maximum(x, 0.0)
            else:
                weight_t, bias = layer
                x = x @ weight_t + bias
        return x

    def act(self, obs: np.ndarray, rng: np.random.Generator, explore: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """(actions, their log-probabilities under the policy, or None if not `explore`).

        explore: a draw from N(mean, exp(log_std)^2) per dimension, or from softmax(logits);
        otherwise the mean or the argmax (RLlib's `to_deterministic`)."""
        z = self.dist_inputs(obs)
        if self.dist == GAUSSIAN:
            if not explore:
                return z, None
            log_std = self.log_std_param
            if self.log_std_clip is not None:
                log_std = np.clip(log_std, -self.log_std_clip, self.log_std_clip)
            noise = rng.standard_normal(z.shape, dtype=np.float32)
            actions = z + np.exp(log_std) * noise
            logp = -(0.5 * np.square(noise) + log_std + _HALF_LOG_2PI).sum(-1)
            return actions, logp.astype(np.float32)
        if not explore:
            return z.argmax(-1), None
        logits = z - z.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        # inverse-CDF draw; the last bin takes any round-off above the final cumulative sum
        cdf = np.cumsum(np.exp(log_probs), -1)
        u = rng.random((len(z), 1)) * cdf[:, -1:]
        actions = np.minimum((cdf <= u).sum(-1), z.shape[-1] - 1)
        return actions, log_probs[np.arange(len(z)), actions].astype(np.float32)


# ----------------------------------------------------------------- Jacobian products (learner)
class MLPJacobian:
    """J = dz/dtheta of a policy chain over a batch `obs`, at the current parameters, as two
    closed-form products (no autograd graph):

        J v    forward-mode: dz_l = dh_{l-1} W_l^T + h_{l-1} dW_l^T + db_l, dh_l = f'(z_l) * dz_l
        J^T u  reverse-mode: the usual backward sweep with the same cached activations

    `params` fixes the flat-vector order (the learner's policy parameter list); every parameter
    of the chain must be in it. The log-std part of z is the same parameter for every row."""

    def __init__(self, chain: PolicyChain, params: list[torch.Tensor], obs: torch.Tensor):
        self.chain = chain
        self.sizes = [p.numel() for p in params]
        self.offsets = np.cumsum([0] + self.sizes)
        slot = {id(p): i for i, p in enumerate(params)}
        self.linear_slots = [(slot[id(l.weight)], slot[id(l.bias)]) for l in chain.layers if isinstance(l, nn.Linear)]
        self.log_std_slot = slot[id(chain.log_std)] if chain.log_std is not None else None
        with torch.no_grad():
            # inputs of each Linear layer and the activation derivative after it (None: no activation)
            self.inputs, self.derivs = [], []
            x = obs
            for i, layer in enumerate(chain.layers):
                if isinstance(layer, nn.Linear):
                    self.inputs.append(x)
                    x = torch.addmm(layer.bias, x, layer.weight.t())
                    self.derivs.append(None)
                elif layer == "tanh":
                    x = torch.tanh(x)
                    self.derivs[-1] = 1.0 - x * x
                else:  # relu
                    self.derivs[-1] = (x > 0).to(x.dtype)
                    x = torch.relu(x)
            self.mean = x
            self.log_std_mask = None
            if chain.log_std is not None and chain.log_std_clip is not None:  # clamp's gradient
                c = chain.log_std_clip
                self.log_std_mask = ((chain.log_std >= -c) & (chain.log_std <= c)).to(x.dtype)
        self.weights = [l.weight.detach() for l in chain.layers if isinstance(l, nn.Linear)]

    def _piece(self, v: torch.Tensor, slot: int, like: torch.Tensor) -> torch.Tensor:
        return v[self.offsets[slot] : self.offsets[slot + 1]].view_as(like)

    def jvp(self, v: torch.Tensor) -> torch.Tensor:
        """J v: the change of z (rows x outputs) along the flat parameter direction `v`."""
        dx = None
        for (w_slot, b_slot), weight, x, deriv in zip(self.linear_slots, self.weights, self.inputs, self.derivs):
            d_weight, d_bias = self._piece(v, w_slot, weight), v[self.offsets[b_slot] : self.offsets[b_slot + 1]]
            dz = torch.addmm(d_bias, x, d_weight.t())
            if dx is not None:
                dz = dz.addmm_(dx, weight.t())
            dx = dz if deriv is None else dz.mul_(deriv)
        if self.log_std_slot is None:
            return dx
        d_log_std = v[self.offsets[self.log_std_slot] : self.offsets[self.log_std_slot + 1]]
        if self.log_std_mask is not None:
            d_log_std = d_log_std * self.log_std_mask
        return torch.cat([dx, d_log_std.expand_as(dx)], dim=-1)

    def vjp(self, u: torch.Tensor) -> torch.Tensor:
        """J^T u: the flat parameter vector sum_rows u_row . dz_row/dtheta."""
        out = u.new_zeros(int(self.offsets[-1]))
        if self.log_std_slot is not None:
            u, u_log_std = u.chunk(2, dim=-1)
            g = u_log_std.sum(0)
            if self.log_std_mask is not None:
                g = g * self.log_std_mask
            out[self.offsets[self.log_std_slot] : self.offsets[self.log_std_slot + 1]] = g
        g = u
        for (w_slot, b_slot), weight, x, deriv in reversed(list(zip(self.linear_slots, self.weights, self.inputs,
                                                                    self.derivs))):
            if deriv is not None:
                g = g * deriv
            out[self.offsets[w_slot] : self.offsets[w_slot + 1]] = (g.t() @ x).reshape(-1)
            out[self.offsets[b_slot] : self.offsets[b_slot + 1]] = g.sum(0)
            g = g @ weight
        return out
