"""Returns and advantages of one trajectory chunk: kappa-returns, plain returns, GAE.

A chunk is n consecutive steps of one episode: rewards r_0..r_{n-1} and n+1 observations
s_0..s_n. If the episode terminated at s_n, nothing is bootstrapped there; otherwise (a
time-limit truncation, or the end of the sample batch) the value of s_n is
bootstrapped (docs/paper-settings.md, "The schedule").

kappa-PI/VI-TRPO (paper, Algorithms 7 and 8):
    R_j(kappa, V_phi) = sum_t (gamma kappa)^(t-j) r_t(kappa, V_phi) [+ (gamma kappa)^(n-j) V_theta(s_n)]
    rho_j             = sum_t gamma^(t-j) r_t                        [+ gamma^(n-j) V(s_n)]
V_theta estimates the surrogate MDP's value, so it bootstraps R; the plain return bootstraps
with the value net that estimates the original MDP's value.
"""

from __future__ import annotations

import numpy as np

from kappa_rllib.shaping import shaped_reward, surrogate_discount


def discounted_sums(x: np.ndarray, discount: float, bootstrap: float) -> np.ndarray:
    """y_t = x_t + discount * y_{t+1} with y_n = bootstrap, for t = n-1..0."""
    out = np.empty(len(x), dtype=np.float64)
    running = float(bootstrap)
    for t in range(len(x) - 1, -1, -1):
        running = float(x[t]) + discount * running
        out[t] = running
    return out


def _terminal_mask(n: int, terminated: bool) -> np.ndarray:
    mask = np.zeros(n)
    mask[-1] = float(terminated)
    return mask


def kappa_returns(rewards, v_phi, v_theta_last, terminated, gamma, kappa) -> np.ndarray:
    """R_j(kappa, V_phi) for j = 0..n-1. `v_phi` holds V_phi(s_0..s_n) (n+1 values)."""
    rewards, v_phi = np.asarray(rewards, np.float64), np.asarray(v_phi, np.float64)
    n = len(rewards)
    shaped = shaped_reward(rewards, v_phi[1:], _terminal_mask(n, terminated), gamma, kappa)
    bootstrap = 0.0 if terminated else float(v_theta_last)
    return discounted_sums(shaped, surrogate_discount(gamma, kappa), bootstrap)


def plain_returns(rewards, v_last, terminated, gamma) -> np.ndarray:
    """rho_j = sum_t gamma^(t-j) r_t, bootstrapped with V(s_n) unless terminated."""
    return discounted_sums(np.asarray(rewards, np.float64), gamma, 0.0 if terminated else float(v_last))


def gae_advantages(rewards, values, terminated, gamma, lam) -> np.ndarray:
    """GAE(gamma, lambda) (Schulman et al. 2016). `values` holds V(s_0..s_n) (n+1 values)."""
    rewards, values = np.asarray(rewards, np.float64), np.asarray(values, np.float64).copy()
    if terminated:
        values[-1] = 0.0
    deltas = rewards + gamma * values[1:] - values[:-1]
    return discounted_sums(deltas, gamma * lam, 0.0)
