"""The second-order pieces of TRPO (Schulman et al. 2015, Appendix C): conjugate gradient on
Fisher-vector products, and flat views of a parameter list."""

from __future__ import annotations

from typing import Callable, Sequence

import torch


def conjugate_gradient(
    matvec: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, iterations: int = 10, tol: float = 1e-10
) -> torch.Tensor:
    """Approximately solves A x = b for symmetric positive definite A given only x -> A x."""
    x = torch.zeros_like(b)
    r = b.clone()  # residual b - A x at x = 0
    p = r.clone()
    rr = r @ r
    for _ in range(iterations):
        if rr <= tol:
            break
        Ap = matvec(p)
        alpha = rr / (p @ Ap)
        x += alpha * p
        r -= alpha * Ap
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def flat_grad(y: torch.Tensor, params: Sequence[torch.Tensor], **kwargs) -> torch.Tensor:
    grads = torch.autograd.grad(y, params, **kwargs)
    return torch.cat([g.reshape(-1) for g in grads])


def get_flat(params: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([p.data.reshape(-1) for p in params])


def set_flat(params: Sequence[torch.Tensor], flat: torch.Tensor) -> None:
    offset = 0
    for p in params:
        n = p.numel()
        p.data.copy_(flat[offset : offset + n].view_as(p))
        offset += n


def backtracking_line_search(
    params: Sequence[torch.Tensor],
    full_step: torch.Tensor,
    evaluate: Callable[[], tuple[float, float]],
    surrogate_before: float,
    max_kl: float,
    max_backtracks: int = 10,
) -> dict:
    """Tries theta_old + 0.5**k * full_step for k = 0, 1, ...; keeps the first step whose
    mean KL is <= max_kl and whose surrogate improved. If none does, restores theta_old.

    `evaluate()` returns (surrogate, mean KL from the old policy) at the current parameters.
    """
    old = get_flat(params)
    for k in range(max_backtracks):
        set_flat(params, old + 0.5**k * full_step)
        surrogate, kl = evaluate()
        if kl <= max_kl and surrogate > surrogate_before:
            return {"accepted": True, "line_search_steps": k + 1, "surrogate": surrogate, "kl": kl}
    set_flat(params, old)
    return {"accepted": False, "line_search_steps": max_backtracks, "surrogate": surrogate_before, "kl": 0.0}


# ----------------------------------------------------------------- Fisher-vector products
def kl_input_hessian(dist_cls, old_inputs: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """u -> H u row by row, H the Hessian of KL(p_old || p_z) in the distribution inputs z, at
    z = z_old (`old_inputs`); None for a distribution without a closed form here (anything but RLlib's
    TorchDiagGaussian and TorchCategorical themselves).

    The KL's gradient in z is 0 at z = z_old, so the Hessian of the mean KL in the parameters is
    exactly the Gauss-Newton matrix (1/N) J^T H J, J = dz/dtheta (Martens 2020, Sec. 9):
      diagonal Gaussian, z = [mean, log_std]: H = diag(exp(-2 log_std), 2)
      categorical, z = logits:                H = diag(p) - p p^T,  p = softmax(z)
    """
    from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical, TorchDiagGaussian

    # RLlib's classes exactly: a subclass may map z to the distribution otherwise (a temperature, a
    # squashing), for which H below is wrong; it takes the autograd routes
    if dist_cls is TorchDiagGaussian:
        _, log_std = old_inputs.chunk(2, dim=-1)
        h = torch.cat([torch.exp(-2.0 * log_std), torch.full_like(log_std, 2.0)], dim=-1)
        return lambda u: h * u
    if dist_cls is TorchCategorical:
        p = torch.softmax(old_inputs, dim=-1)
        return lambda u: p * (u - (p * u).sum(-1, keepdim=True))
    return None


def fisher_vector_product(
    params: Sequence[torch.Tensor],
    old_inputs: torch.Tensor,
    dist_cls,
    damping: float,
    *,
    jacobian=None,
    dist_inputs: Callable[[], torch.Tensor] | None = None,
    mean_kl: Callable[[], torch.Tensor] | None = None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """v -> (F + damping I) v, F the Hessian of the mean KL(pi_old || pi_theta) at theta_old over
    the rows of `old_inputs` (the old policy's distribution inputs).

    The cheapest of three exact routes that applies:
      1. `jacobian` (an `MLPJacobian` of the same rows) and a closed-form H: F v = J^T H J v / N,
         both products in closed form, no autograd at all;
      2. `dist_inputs()` (z of the rows, with a graph) and a closed-form H: the same product with
         autograd: J v by the double-vjp trick, J^T u by one backward through the retained graph;
      3. `mean_kl()` (with a graph): double backprop of the KL, the textbook route.
    """
    n = len(old_inputs)
    hessian = kl_input_hessian(dist_cls, old_inputs)
    if hessian is not None and jacobian is not None:
        return lambda v: jacobian.vjp(hessian(jacobian.jvp(v))) / n + damping * v
    if hessian is not None and dist_inputs is not None:
        z = dist_inputs()
        dummy = torch.zeros_like(z, requires_grad=True)
        # J^T dummy with a graph: its gradient in `dummy` along v is J v (the double-vjp trick)
        jt_dummy = torch.cat([g.reshape(-1) for g in torch.autograd.grad(z, params, dummy, create_graph=True)])

        def gauss_newton(v):
            jv = torch.autograd.grad(jt_dummy @ v, dummy, retain_graph=True)[0]
            return flat_grad(z, params, grad_outputs=hessian(jv), retain_graph=True) / n + damping * v

        return gauss_newton

    def double_backprop(v):
        grad_kl = flat_grad(mean_kl(), params, create_graph=True)
        return flat_grad(grad_kl @ v, params) + damping * v

    return double_backprop
