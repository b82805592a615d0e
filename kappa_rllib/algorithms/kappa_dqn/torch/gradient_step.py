"""One kappa-DQN gradient step, eager or as a replayed CUDA graph.

On a GPU the fused update (kappa_dqn_torch_learner.KappaDQNTorchLearner._fused_run) is bound by
the host: a Nature-CNN step is ~78 kernel launches (forward, Huber loss, backward, global-norm
clip, fused Adam), each a few microseconds of Python and driver time, against ~0.6 ms of GPU work.
A CUDA graph records those launches once and replays them with one call (PyTorch's "whole network
capture"): per step the host then copies the minibatch into static input buffers (three
device-to-device copies), replays, and copies the step's statistics out.

What stays outside the graph, at the same update counts as the eager path: the batched target
pass of each stretch between target copies (one large forward for many minibatches, already
cheap per step), the target copies Q' <- Q, kappa-VI's phi <- theta and kappa-PI's phase switches.
The graph reads the parameters and Adam's state in place, so those copies are seen by the next
replay.

Settings the graph cannot hold, which take the eager step (`graph_unsupported_reason`): a learner
on the CPU; an lr schedule (the fused kernel's lr is a constant recorded at capture);
`grad_clip_by` other than "global_norm" (RLlib's per-tensor clipping); more than one learner
(DDP's all-reduce in the backward); `cuda_graphs=False`.
"""

from __future__ import annotations

import torch

from ray.rllib.algorithms.dqn.dqn_learner import QF_LOSS_KEY, QF_MEAN_KEY, QF_PREDS, TD_ERROR_MEAN_KEY
from ray.rllib.core.columns import Columns
from ray.rllib.utils.torch_utils import clip_gradients

STAT_KEYS = (QF_LOSS_KEY, QF_MEAN_KEY, TD_ERROR_MEAN_KEY)  # what `td_loss` reports per step


def graph_unsupported_reason(config, device: torch.device) -> str | None:
    """Why the gradient step of this learner runs eagerly, or None if it can be a CUDA graph."""
    if not getattr(config, "cuda_graphs", False):
        return "cuda_graphs=False"
    if device.type != "cuda":
        return "the learner is on the CPU"
    if isinstance(config.lr, (list, tuple)):
        return "an lr schedule"
    if config.grad_clip is not None and config.grad_clip_by != "global_norm":
        return f"grad_clip_by={config.grad_clip_by!r}"
    if config.num_learners > 1:
        return "more than one learner (DDP)"
    return None


def clip_by_global_norm_(grads: list, grad_clip: float) -> None:
    """RLlib's `clip_gradients(..., grad_clip_by="global_norm")`, same formula, in three foreach
    kernels instead of a Python loop over the tensors (one of the hot spots of a small network's
    update), and with no host sync (so a CUDA graph can hold it):
    g <- g * min(1, clip / max(||g||_global + 1e-6, clip))."""
    norms = torch.stack(torch._foreach_norm(grads)).nan_to_num(neginf=-10e8, posinf=10e8)
    total = torch.linalg.vector_norm(norms).nan_to_num(neginf=-10e8, posinf=10e8)
    coeff = torch.clamp(grad_clip / torch.clamp(total + 1e-6, min=grad_clip), max=1.0)
    torch._foreach_mul_(grads, coeff)


def td_step_ops(learner, context, obs, actions, target) -> torch.Tensor:
    """Forward, TD loss, backward, gradient clipping, Adam on one minibatch, from zeroed (or
    absent) gradients; returns the step's (loss, mean Q, mean |TD error|) on the device.
    With global-norm clipping there is no host sync in these ops: a CUDA graph can record them."""
    config, module, optimizer, params, global_norm_clip = context
    q = module.compute_q_values({Columns.OBS: obs})[QF_PREDS]
    loss, stats = learner.td_loss(config, q, actions, target)
    loss.backward()
    if global_norm_clip:
        clip_by_global_norm_([p.grad for p in params if p.grad is not None], config.grad_clip)
    elif config.grad_clip is not None:
        grads = {i: p.grad for i, p in enumerate(params) if p.grad is not None}
        clip_gradients(grads, grad_clip=config.grad_clip, grad_clip_by=config.grad_clip_by)
        for i, grad in grads.items():  # "value" clipping returns new tensors
            params[i].grad = grad
    optimizer.step()
    return torch.stack([stats[key] for key in STAT_KEYS])


def eager_td_step(learner, context, obs, actions, target) -> torch.Tensor:
    """One gradient step without a graph (any device, any setting)."""
    context[2].zero_grad(set_to_none=True)
    return td_step_ops(learner, context, obs, actions, target)


class GraphedTDStep:
    """A captured gradient step of one module for minibatches shaped like the example's.

    Capture does not change any state: the warm-up steps that CUDA graphs need (cuBLAS/cuDNN
    workspaces, autograd's buffers) run on a side stream from a snapshot of the parameters and of
    Adam's state, which is put back in place afterwards. Adam's state must exist before capture
    (a lazily made state would be zero-filled inside the graph, on every replay), so an empty one is
    made by the warm-up and reset to Adam's initial values (step 0, zero moments)."""

    def __init__(self, learner, context, obs, actions, target, warmup_steps: int = 2):
        optimizer, params = context[2], context[3]
        self.lr = [group["lr"] for group in optimizer.param_groups]
        self.inputs = (obs.clone(), actions.clone(), target.clone())  # the static buffers
        had_state = bool(optimizer.state)
        saved_params = [p.detach().clone() for p in params]
        saved_state = {p: {k: v.clone() if torch.is_tensor(v) else v for k, v in s.items()}
                       for p, s in optimizer.state.items()}

        def body():
            return td_step_ops(learner, context, *self.inputs)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup_steps):
                optimizer.zero_grad(set_to_none=True)
                body()
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():  # undo the warm-up, in place (the graph keeps these addresses)
            for p, saved in zip(params, saved_params):
                p.copy_(saved)
            for p, state in optimizer.state.items():
                for key, value in state.items():
                    if not torch.is_tensor(value):
                        continue
                    if had_state:
                        value.copy_(saved_state[p][key])
                    else:
                        value.zero_()  # Adam's initial state: step 0, zero moments
        optimizer.zero_grad(set_to_none=True)  # the graph allocates (and then owns) the gradients
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: with `learner_thread` the capture runs on the learner thread while the driver thread goes on
        # with CUDA work of its own (a replay ring on the GPU: pinned copies of new frames, gathers); the default
        # ("global") mode would refuse those calls, or invalidate the capture, for as long as it runs
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.stats = body()

    def still_valid(self, optimizer) -> bool:
        """False once the lr moved (the graph holds the lr of its capture)."""
        return [group["lr"] for group in optimizer.param_groups] == self.lr

    def __call__(self, obs, actions, target) -> torch.Tensor:
        """One gradient step on this minibatch; its (loss, mean Q, mean |TD error|), on the device."""
        for buffer, value in zip(self.inputs, (obs, actions, target)):
            buffer.copy_(value)
        self.graph.replay()
        return self.stats.clone()


