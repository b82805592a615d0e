"""TRPO's learner (Schulman et al. 2015): a natural-gradient policy step and separate value fits.

One `update` call per sample batch:

  1. returns and advantages per trajectory chunk (`advantages_and_targets`; GAE(gamma, lambda)
     here, the kappa-returns in the kappa-TRPO learner), values from the current V nets;
  2. the policy step: g = grad of the surrogate (+ entropy bonus), x = CG(F, g) on Fisher-vector
     products (KL Hessian + damping), step sqrt(2 max_kl / x.Fx) x, backtracking line search;
  3. the value net fitted to its targets with Adam (epochs x minibatches), no shared layers.

The policy has no optimizer: only value parameters are registered with Adam.
"""

from __future__ import annotations

import numpy as np
import torch

from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import ENTROPY_KEY, VF_LOSS_KEY
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.models.base import ENCODER_OUT
from ray.rllib.core.rl_module.apis import ValueFunctionAPI

from kappa_rllib.algorithms.trpo.torch.natural_gradient import (
    backtracking_line_search,
    conjugate_gradient,
    fisher_vector_product,
    flat_grad,
)
from kappa_rllib.env_runner import split_segments
from kappa_rllib.mlp_policy import MLPJacobian, policy_chain
from kappa_rllib.returns import gae_advantages, plain_returns

VALUE_OPTIMIZER = "value"


def policy_parameters(module) -> list[torch.nn.Parameter]:
    return list(module.encoder.actor_encoder.parameters()) + list(module.pi.parameters())


def actor_dist_inputs(module, obs: torch.Tensor) -> torch.Tensor:
    """The policy's action-distribution inputs for `obs`, through the actor alone where the module
    has a separate one (RLlib's `forward_train` also runs the critic encoder, unused here)."""
    encoder = getattr(module.encoder, "actor_encoder", None)
    if encoder is None:
        return module.forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    return module.pi(encoder({Columns.OBS: obs})[ENCODER_OUT])


def value_parameters(module) -> list[torch.nn.Parameter]:
    """The parameters V(s) depends on: the critic encoder and the value head (with a shared
    encoder, as RLlib's PPO default vf_share_layers=True builds, the shared encoder)."""
    encoder = getattr(module.encoder, "critic_encoder", None) or module.encoder.encoder
    return list(encoder.parameters()) + list(module.vf.parameters())


@torch.no_grad()
def orthogonal_init(module) -> None:
    """The authors' initialisation (OpenAI baselines' `ortho_init`, their `MlpPolicy`): every linear layer's
    weights orthogonal with gain sqrt(2) and biases 0, then the policy head's output layer with gain 0.01 and
    the value head's output layer with gain 1.0. The free log-std (a parameter, no layer) keeps its 0."""
    def linears(part):
        return [m for m in part.modules() if isinstance(m, torch.nn.Linear)]

    for layer in linears(module):
        torch.nn.init.orthogonal_(layer.weight, gain=2 ** 0.5)
        torch.nn.init.zeros_(layer.bias)
    for head, gain in ((getattr(module, "pi", None), 0.01), (getattr(module, "vf", None), 1.0)):
        if head is not None and linears(head):
            torch.nn.init.orthogonal_(linears(head)[-1].weight, gain=gain)


@torch.no_grad()
def copy_value_net(source, target) -> None:
    """target's value net (critic encoder + head) <- source's; the policy part is untouched."""
    for src, dst in zip(value_parameters(source), value_parameters(target)):
        dst.copy_(src)


class TRPOTorchLearner(TorchLearner):
    def build(self) -> None:
        super().build()
        self._rng = np.random.default_rng(self.config.seed)
        self._deferred_value_work = None  # (batch data, update kwargs) between the two calls of an overlapped update
        if self.config.orthogonal_init:  # before any copy of the value net (kappa's V_phi) is taken
            for module_id in self.module.keys():
                orthogonal_init(self.module[module_id].unwrapped())

    def episode_ends(self, chunk: dict) -> bool:
        """Whether nothing is bootstrapped after the chunk's last step: a termination, or (with
        `truncation_as_terminal`, the authors' gym 0.14 semantics) a time-limit truncation too."""
        return bool(chunk["terminated"] or (self.config.truncation_as_terminal and chunk.get("truncated", False)))

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        module = self.module[module_id].unwrapped()
        params = value_parameters(module)
        self.register_optimizer(
            module_id=module_id,
            optimizer_name=VALUE_OPTIMIZER,
            # torch's fused Adam kernel: the same update rule, without a Python loop over tensors
            optimizer=torch.optim.Adam(params, fused=True),
            params=params,
            lr_or_lr_schedule=config.vf_lr,
        )

    @classmethod
    def rl_module_required_apis(cls) -> list[type]:
        return [ValueFunctionAPI]

    # ----- one TRPO iteration
    def update(self, *, training_data=None, timesteps=None, defer_value_fits=False, **kwargs):
        """One sample batch: targets, the policy step, the value fits, then `after_value_fit`.

        Keyword arguments of `LearnerGroup.update(...)` reach `value_targets` and `after_value_fit`,
        so data and flags for this batch travel with the call. With `defer_value_fits` the call
        ends after the policy step and the value work waits for `deferred_value_fits()`, which the
        algorithm calls next in the same iteration (TRPO._trpo_iteration: the EnvRunners sample
        with the new policy meanwhile).
        """
        training_data.solve_refs()
        data = self.build_train_data(split_segments(training_data.batch.policy_batches[DEFAULT_MODULE_ID]))
        if defer_value_fits:
            self.policy_step(data)
            self._deferred_value_work = (data, kwargs)
        else:
            self.train_on(data, **kwargs)
        return self.metrics.reduce()

    def deferred_value_fits(self) -> dict:
        """The value work of the batch whose update deferred it; returns the learner's metrics."""
        (data, kwargs), self._deferred_value_work = self._deferred_value_work, None
        self.value_fits(data, **kwargs)
        return self.metrics.reduce()

    def train_on(self, data: dict, **kwargs) -> None:
        """One TRPO iteration on a built batch: the policy step, then `value_fits`."""
        self.policy_step(data)
        self.value_fits(data, **kwargs)

    def value_fits(self, data: dict, **kwargs) -> None:
        """The value nets' fits on a batch (`value_targets`), then `after_value_fit`."""
        self.fit_values(self.value_targets(data, **kwargs), data[Columns.OBS])
        self.after_value_fit(data, **kwargs)

    def value_targets(self, data: dict, **kwargs) -> dict[str, torch.Tensor]:
        """The value nets fitted on this batch, each with its targets. TRPO: V to its returns."""
        return {DEFAULT_MODULE_ID: data[Columns.VALUE_TARGETS]}

    def after_value_fit(self, data: dict, **kwargs) -> None:
        """Hook for more work on the same batch after the fits (kappa-TRPO: closing a
        kappa-iteration). TRPO: nothing."""

    def value_module_ids(self) -> list[str]:
        """Modules whose value function `advantages_and_targets` reads."""
        return [DEFAULT_MODULE_ID]

    def _tensor(self, array, dtype=None) -> torch.Tensor:
        """A numpy array on this learner's device (CPU, or its GPU with `num_gpus_per_learner`)."""
        return torch.as_tensor(array, dtype=dtype, device=self._device)

    @torch.no_grad()
    def chunk_values(self, chunks) -> list[dict]:
        """V(s_0..s_n) of each chunk, for every module in `value_module_ids()`, in one pass each."""
        all_obs = self._tensor(np.concatenate([c[Columns.OBS] for c in chunks]))
        bounds = np.cumsum([0] + [len(c[Columns.OBS]) for c in chunks])
        per_module = {
            mid: self.module[mid].unwrapped().compute_values({Columns.OBS: all_obs}).cpu().numpy().astype(np.float64)
            for mid in dict.fromkeys(self.value_module_ids())
        }
        return [{mid: v[bounds[i] : bounds[i + 1]] for mid, v in per_module.items()} for i in range(len(chunks))]

    def advantages_and_targets(self, chunk: dict, values: dict) -> dict:
        """Per-step arrays of one chunk: at least `Columns.ADVANTAGES` and `Columns.VALUE_TARGETS`.

        TRPO / GAE baseline: GAE(gamma, lambda) advantages; the value net is fitted to the
        discounted return sum_t gamma^t r_t (the paper's GAE baseline, not the lambda-return).
        """
        v = values[DEFAULT_MODULE_ID]
        cfg, ends = self.config, self.episode_ends(chunk)
        return {
            Columns.ADVANTAGES: gae_advantages(chunk[Columns.REWARDS], v, ends, cfg.gamma, cfg.lambda_),
            Columns.VALUE_TARGETS: plain_returns(chunk[Columns.REWARDS], v[-1], ends, cfg.gamma),
        }

    def build_train_data(self, chunks) -> dict:
        """The flat batch: obs, actions and the concatenated `advantages_and_targets` arrays."""
        per_chunk = [self.advantages_and_targets(c, v) for c, v in zip(chunks, self.chunk_values(chunks))]
        data = {
            Columns.OBS: self._tensor(np.concatenate([c[Columns.OBS][:-1] for c in chunks])),
            Columns.ACTIONS: self._tensor(np.concatenate([c[Columns.ACTIONS] for c in chunks])),
        }
        for key in per_chunk[0]:
            data[key] = self._tensor(np.concatenate([p[key] for p in per_chunk]), dtype=torch.float32)
        return data

    # ----- the natural-gradient policy step
    def policy_step(self, data: dict) -> dict:
        cfg = self.config
        module = self.module[DEFAULT_MODULE_ID].unwrapped()
        params = policy_parameters(module)
        dist_cls = module.get_train_action_dist_cls()
        obs, actions = data[Columns.OBS], data[Columns.ACTIONS]
        adv = data[Columns.ADVANTAGES]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)

        with torch.no_grad():
            old_inputs = actor_dist_inputs(module, obs)
            old_dist = dist_cls.from_logits(old_inputs)
            old_logp = old_dist.logp(actions)

        def surrogate_kl_entropy(rows=slice(None)):
            o, a = obs[rows], actions[rows]
            dist = dist_cls.from_logits(actor_dist_inputs(module, o))
            entropy = dist.entropy().mean()
            surrogate = (torch.exp(dist.logp(a) - old_logp[rows]) * adv[rows]).mean() + cfg.entropy_coeff * entropy
            old = old_dist if rows == slice(None) else dist_cls.from_logits(old_inputs[rows])
            return surrogate, old.kl(dist).mean(), entropy

        surrogate, _, entropy = surrogate_kl_entropy()
        g = flat_grad(surrogate, params)
        # Fisher-vector products on every `fvp_subsample`-th sample (1: all; the authors' code: 5),
        # in closed form where the policy allows (natural_gradient.fisher_vector_product)
        fvp_rows = slice(None, None, cfg.fvp_subsample) if cfg.fvp_subsample > 1 else slice(None)
        chain = policy_chain(module, dist_cls)
        fvp = fisher_vector_product(
            params, old_inputs[fvp_rows], dist_cls, cfg.cg_damping,
            jacobian=MLPJacobian(chain, params, obs[fvp_rows]) if chain is not None else None,
            dist_inputs=lambda: actor_dist_inputs(module, obs[fvp_rows]),
            mean_kl=lambda: surrogate_kl_entropy(fvp_rows)[1],
        )

        step_dir = conjugate_gradient(fvp, g, cfg.cg_iters)
        shs = step_dir @ fvp(step_dir)  # x^T F x
        full_step = torch.sqrt(2 * cfg.max_kl / (shs + 1e-12)) * step_dir

        def evaluate():
            with torch.no_grad():
                s, kl, _ = surrogate_kl_entropy()
            return s.item(), kl.item()

        search = backtracking_line_search(
            params, full_step, evaluate, surrogate.item(), cfg.max_kl * cfg.kl_accept_factor, cfg.line_search_steps
        )
        stats = {
            "mean_kl": search["kl"],
            "line_search_steps": search["line_search_steps"],
            "step_accepted": float(search["accepted"]),
            "surrogate_improvement": search["surrogate"] - surrogate.item(),
            "expected_improvement": (g @ full_step).item(),
            ENTROPY_KEY: entropy.item(),
        }
        self.metrics.log_dict(stats, key=DEFAULT_MODULE_ID, window=1)
        return stats

    # ----- value fitting
    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        """Value loss: mean squared error of V(s) against `VALUE_TARGETS` (the only gradient loss)."""
        values = self.module[module_id].unwrapped().compute_values({Columns.OBS: batch[Columns.OBS]})
        return torch.mean((values - batch[Columns.VALUE_TARGETS]) ** 2)

    def fit_values(self, targets: dict[str, torch.Tensor], obs: torch.Tensor) -> dict[str, float]:
        """Adam on each value net in `targets` (module id -> its regression targets on `obs`):
        `vf_epochs` passes of the same shuffled minibatches of `vf_minibatch_size` for all of them.

        The nets share no parameter, so one backward pass of the summed losses gives each net
        exactly the gradient of its own loss: fitting V_theta and V_phi together is fitting each
        alone on these minibatches, at one autograd call per minibatch instead of one per net.
        Returns (and logs) each net's mean loss over the last epoch."""
        cfg = self.config
        ids = list(targets)
        modules = [self.module[mid].unwrapped() for mid in ids]
        optimizers = [self.get_optimizer(mid, VALUE_OPTIMIZER) for mid in ids]
        for _ in range(cfg.vf_epochs):
            perm = self._tensor(self._rng.permutation(len(obs)))
            epoch_losses = []
            for start in range(0, len(obs), cfg.vf_minibatch_size):
                idx = perm[start : start + cfg.vf_minibatch_size]
                batch = {Columns.OBS: obs[idx]}
                losses = torch.stack([
                    self.compute_loss_for_module(
                        module_id=mid, config=cfg, fwd_out={},
                        batch={**batch, Columns.VALUE_TARGETS: targets[mid][idx]},
                    )
                    for mid, module in zip(ids, modules)
                ])
                for optimizer in optimizers:
                    optimizer.zero_grad()
                losses.sum().backward()
                for optimizer in optimizers:
                    optimizer.step()
                epoch_losses.append(losses.detach())
        means = dict(zip(ids, torch.stack(epoch_losses).mean(0).tolist()))  # one read, after the fits
        for mid, loss in means.items():
            self.metrics.log_value((mid, VF_LOSS_KEY), loss, window=1)
        return means
