"""The paper's iteration budget: the one place N_kappa and T_kappa are computed.

Section 4, Eqs. (8) and (9) of Tomar, Efroni & Ghavamzadeh (2020): kappa-PI and kappa-VI contract at
rate xi_kappa = gamma (1 - kappa) / (1 - gamma kappa), and the number of iterations N_kappa is
chosen so that the decaying term xi_kappa ** N_kappa reaches the final-accuracy knob C_FA.
The fixed budget of T environment steps is then split evenly: T_kappa = T / N_kappa.
"""

from __future__ import annotations

import math

__all__ = [
    "contraction_rate",
    "num_iterations",
    "samples_per_iteration",
    "iteration_end",
    "validate_kappa",
    "validate_c_fa",
    "validate_gamma",
]


def validate_kappa(kappa: float) -> float:
    if isinstance(kappa, bool) or not (isinstance(kappa, (int, float)) and 0.0 <= kappa <= 1.0):
        raise ValueError(f"kappa must lie in [0, 1], got {kappa!r}")
    return float(kappa)


def validate_c_fa(c_fa: float) -> float:
    if isinstance(c_fa, bool) or not (isinstance(c_fa, (int, float)) and 0.0 < c_fa < 1.0):
        raise ValueError(f"c_fa must lie in the open interval (0, 1), got {c_fa!r}")
    return float(c_fa)


def validate_gamma(gamma: float) -> float:
    if isinstance(gamma, bool) or not (isinstance(gamma, (int, float)) and 0.0 <= gamma < 1.0):
        raise ValueError(f"gamma must lie in [0, 1), got {gamma!r}")
    return float(gamma)


def contraction_rate(kappa: float, gamma: float) -> float:
    """xi_kappa = gamma (1 - kappa) / (1 - gamma kappa) (paper, Sec. 3)."""
    kappa, gamma = validate_kappa(kappa), validate_gamma(gamma)
    return gamma * (1.0 - kappa) / (1.0 - gamma * kappa)


def num_iterations(kappa: float, c_fa: float, gamma: float) -> int:
    """N_kappa = ceil(log C_FA / log xi_kappa) (paper, Eq. 8), the smallest N with xi**N <= C_FA.

    kappa = 1 gives xi = 0: the first iteration already solves the original MDP, so N = 1.
    gamma = 0 also gives xi = 0 and N = 1.
    """
    c_fa = validate_c_fa(c_fa)
    xi = contraction_rate(kappa, gamma)
    if xi == 0.0:
        return 1
    n = math.ceil(math.log(c_fa) / math.log(xi))
    # Guard against floating-point rounding at an exact power (e.g. xi = 0.5, C_FA = 0.25).
    if n > 1 and xi ** (n - 1) <= c_fa:
        n -= 1
    return max(1, n)


def samples_per_iteration(total_steps: int, num_iterations: int) -> int:
    """T_kappa = floor(T / N_kappa): the base number of env steps per iteration.

    The remainder T - N_kappa * T_kappa is spent by giving one extra step to each of the
    *first* (T mod N_kappa) iterations (see `iteration_end`), so that exactly T steps
    are used in all and no two iterations differ by more than one step.
    """
    if total_steps < 1 or num_iterations < 1:
        raise ValueError(
            f"total_env_steps ({total_steps}) and num_iterations ({num_iterations}) must be >= 1"
        )
    if num_iterations > total_steps:
        raise ValueError(
            f"total_env_steps ({total_steps}) is smaller than N_kappa ({num_iterations}): "
            "each kappa-iteration needs at least one env step"
        )
    return total_steps // num_iterations


def iteration_end(iteration: int, total_steps: int, num_iterations: int) -> int:
    """Env steps done when kappa-iteration `iteration` (0-based) ends its improvement phase.

    Iteration i gets T_kappa steps plus one of the remainder's steps if i < T mod N_kappa;
    `iteration_end(N_kappa - 1, T, N_kappa) == T`. Closed form, so the naive schedule
    (N_kappa = T, T_kappa = 1) costs no memory.
    """
    base = samples_per_iteration(total_steps, num_iterations)
    extra = total_steps - base * num_iterations
    return (iteration + 1) * base + min(iteration + 1, extra)
