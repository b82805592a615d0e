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
