"""Exact tabular kappa-PI and kappa-VI (paper, Algorithms 1 and 2): the ground truth.

A finite MDP is given as transition probabilities ``P[s, a, s']`` and expected rewards
``R[s, a]``. Both algorithms repeatedly solve the surrogate MDP M_{gamma kappa}(V) of the
paper's Sec. 3: same dynamics, discount gamma*kappa and shaped reward

    r(kappa, V)(s, a) = R[s, a] + gamma (1 - kappa) sum_s' P[s, a, s'] V(s').

The surrogate is solved exactly by policy iteration with linear solves, so these functions
are the oracle that the learning algorithms' tests compare against.
"""

from __future__ import annotations

import numpy as np

from kappa_rllib.schedule import validate_gamma, validate_kappa

__all__ = [
    "evaluate_policy",
    "solve_mdp",
    "shaped_reward",
    "kappa_policy_iteration",
    "kappa_value_iteration",
]


def _check_mdp(P: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    P, R = np.asarray(P, dtype=np.float64), np.asarray(R, dtype=np.float64)
    if P.ndim != 3 or P.shape[0] != P.shape[2] or R.shape != P.shape[:2]:
        raise ValueError(f"expected P[s, a, s'] and R[s, a], got shapes {P.shape} and {R.shape}")
    if not np.allclose(P.sum(axis=2), 1.0, atol=1e-8) or (P < 0).any():
        raise ValueError("each P[s, a, :] must be a probability distribution")
    return P, R


def evaluate_policy(P, R, discount: float, policy) -> np.ndarray:
    """V^pi = (I - discount P_pi)^-1 R_pi.

    `policy` is deterministic (an array of actions, shape (S,)) or stochastic (action
    probabilities, shape (S, A)).
    """
    P, R = _check_mdp(P, R)
    policy = np.asarray(policy)
    if policy.ndim == 1:
        policy = np.eye(P.shape[1])[policy.astype(np.int64)]
    P_pi, R_pi = np.einsum("sa,sat->st", policy, P), (policy * R).sum(axis=1)
    return np.linalg.solve(np.eye(P.shape[0]) - discount * P_pi, R_pi)


def solve_mdp(P, R, discount: float, max_iterations: int = 10_000) -> tuple[np.ndarray, np.ndarray]:
    """Optimal (policy, values) of a discounted MDP by exact policy iteration (Howard).

    A policy's action changes only on a strict improvement (beyond round-off), so the
    iteration cannot cycle between equally good actions and stops at an exact optimum.
    """
    P, R = _check_mdp(P, R)
    policy = np.zeros(P.shape[0], dtype=np.int64)
    states = np.arange(P.shape[0])
    for _ in range(max_iterations):
        values = evaluate_policy(P, R, discount, policy)
        q = R + discount * P @ values
        current = q[states, policy]
        best = q.argmax(axis=1)
        improves = q[states, best] > current + 1e-12 * max(1.0, np.abs(current).max())
        if not improves.any():
            return policy, values
        policy = np.where(improves, best, policy)
    raise RuntimeError("policy iteration did not converge")


def shaped_reward(P, R, gamma: float, kappa: float, values) -> np.ndarray:
    """r(kappa, V)(s, a) = R(s, a) + gamma (1 - kappa) E[V(s')] (paper, Sec. 3)."""
    P, R = _check_mdp(P, R)
    return R + gamma * (1.0 - kappa) * P @ np.asarray(values, dtype=np.float64)


def _solve_surrogate(P, R, gamma, kappa, values):
    """The kappa-greedy policy w.r.t. V and the optimal value of M_{gamma kappa}(V)."""
    return solve_mdp(P, shaped_reward(P, R, gamma, kappa, values), gamma * kappa)


def kappa_policy_iteration(P, R, gamma: float, kappa: float, num_iterations: int):
    """kappa-PI (Algorithm 1) from pi_0 = action 0 everywhere.

    Returns (pi_N, values) with values[i] = V^{pi_i}, i = 0..num_iterations, shape (N+1, S).
    """
    gamma, kappa = validate_gamma(gamma), validate_kappa(kappa)
    P, R = _check_mdp(P, R)
    policy = np.zeros(P.shape[0], dtype=np.int64)
    values = [evaluate_policy(P, R, gamma, policy)]
    for _ in range(num_iterations):
        policy, _ = _solve_surrogate(P, R, gamma, kappa, values[-1])
        values.append(evaluate_policy(P, R, gamma, policy))
    return policy, np.stack(values)


def kappa_value_iteration(P, R, gamma: float, kappa: float, num_iterations: int):
    """kappa-VI (Algorithm 2) from V_0 = 0.

    Returns (pi_N, values) with values[i] = V_i, i = 0..num_iterations, and pi_N the
    kappa-greedy policy w.r.t. V_N (Algorithm 2, line 5).
    """
    gamma, kappa = validate_gamma(gamma), validate_kappa(kappa)
    P, R = _check_mdp(P, R)
    values = [np.zeros(P.shape[0])]
    for _ in range(num_iterations):
        values.append(_solve_surrogate(P, R, gamma, kappa, values[-1])[1])
    policy, _ = _solve_surrogate(P, R, gamma, kappa, values[-1])
    return policy, np.stack(values)
