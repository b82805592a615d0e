import numpy as np
import pytest

from conftest import random_mdp
from kappa_rllib.dp import (
    evaluate_policy,
    kappa_policy_iteration,
    kappa_value_iteration,
    shaped_reward,
    solve_mdp,
)
from kappa_rllib.schedule import contraction_rate

GAMMA = 0.9


def classic_policy_iteration(P, R, gamma, n):
    """Textbook PI from pi_0 = 0: evaluate, then act greedily on R + gamma P V."""
    S = P.shape[0]
    pi = np.zeros(S, dtype=int)
    values = []
    for _ in range(n + 1):
        V = np.linalg.solve(np.eye(S) - gamma * P[np.arange(S), pi], R[np.arange(S), pi])
        values.append(V)
        pi = (R + gamma * P @ V).argmax(axis=1)
    return np.stack(values)


def classic_value_iteration(P, R, gamma, n):
    V, values = np.zeros(P.shape[0]), [np.zeros(P.shape[0])]
    for _ in range(n):
        V = (R + gamma * P @ V).max(axis=1)
        values.append(V)
    return np.stack(values)


def brute_force_optimum(P, R, gamma):
    """V* by iterating the Bellman optimality operator to convergence (independent of PI)."""
    V = np.zeros(P.shape[0])
    for _ in range(5000):
        V = (R + gamma * P @ V).max(axis=1)
    return V


@pytest.mark.parametrize("seed", range(4))
def test_kappa_zero_is_classic_pi_and_vi(seed):
    P, R = random_mdp(6, 3, seed)
    _, v_pi = kappa_policy_iteration(P, R, GAMMA, 0.0, 5)
    _, v_vi = kappa_value_iteration(P, R, GAMMA, 0.0, 5)
    np.testing.assert_allclose(v_pi, classic_policy_iteration(P, R, GAMMA, 5), atol=1e-9)
    np.testing.assert_allclose(v_vi, classic_value_iteration(P, R, GAMMA, 5), atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_kappa_one_reaches_optimum_in_one_iteration(seed):
    P, R = random_mdp(7, 3, seed)
    v_star = brute_force_optimum(P, R, GAMMA)
    pi, v_pi = kappa_policy_iteration(P, R, GAMMA, 1.0, 1)
    _, v_vi = kappa_value_iteration(P, R, GAMMA, 1.0, 1)
    np.testing.assert_allclose(v_pi[1], v_star, atol=1e-6)
    np.testing.assert_allclose(v_vi[1], v_star, atol=1e-6)
    np.testing.assert_allclose(evaluate_policy(P, R, GAMMA, pi), v_star, atol=1e-6)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kappa", [0.0, 0.3, 0.7, 0.95])
def test_kappa_vi_contracts_at_rate_xi(seed, kappa):
    P, R = random_mdp(8, 3, seed)
    v_star = brute_force_optimum(P, R, GAMMA)
    _, values = kappa_value_iteration(P, R, GAMMA, kappa, 8)
    xi = contraction_rate(kappa, GAMMA)
    errors = np.abs(values - v_star).max(axis=1)
    assert np.all(errors[1:] <= xi * errors[:-1] + 1e-9)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kappa", [0.2, 0.6, 0.9])
def test_kappa_pi_improves_monotonically_and_converges(seed, kappa):
    P, R = random_mdp(8, 4, seed)
    v_star = brute_force_optimum(P, R, GAMMA)
    _, values = kappa_policy_iteration(P, R, GAMMA, kappa, 30)
    assert np.all(np.diff(values, axis=0) >= -1e-9)  # V^{pi_{i+1}} >= V^{pi_i}
    xi = contraction_rate(kappa, GAMMA)
    errors = np.abs(values - v_star).max(axis=1)
    assert np.all(errors[1:] <= xi * errors[:-1] + 1e-9)  # ||V* - V^{pi_{i+1}}|| <= xi ||V* - V^{pi_i}||
    np.testing.assert_allclose(values[-1], v_star, atol=1e-6)


def test_surrogate_is_solved_exactly():
    """The kappa-greedy step equals brute-force value iteration on M_{gamma kappa}(V)."""
    P, R = random_mdp(5, 3, 11)
    kappa, V = 0.6, np.linspace(-1, 1, 5)
    r_shaped = shaped_reward(P, R, GAMMA, kappa, V)
    np.testing.assert_allclose(r_shaped, R + GAMMA * 0.4 * np.einsum("sat,t->sa", P, V), atol=1e-12)
    _, v_vi = kappa_value_iteration(P, R, GAMMA, kappa, 1)
    # one kappa-VI step from V_0 = 0 solves M_{gamma kappa}(0): brute force on R with discount gamma*kappa
    np.testing.assert_allclose(v_vi[1], brute_force_optimum(P, R, GAMMA * kappa), atol=1e-9)
    policy, v_opt = solve_mdp(P, r_shaped, GAMMA * kappa)
    np.testing.assert_allclose(v_opt, brute_force_optimum(P, r_shaped, GAMMA * kappa), atol=1e-9)


def test_bad_mdp_is_refused():
    P, R = random_mdp(3, 2, 0)
    with pytest.raises(ValueError, match="probability distribution"):
        kappa_value_iteration(P * 2, R, GAMMA, 0.5, 1)
    with pytest.raises(ValueError, match="kappa must lie"):
        kappa_policy_iteration(P, R, GAMMA, 1.5, 1)
