import math

import numpy as np
import pytest

from kappa_rllib.schedule import (
    contraction_rate,
    iteration_end,
    num_iterations,
    samples_per_iteration,
)


def test_contraction_rate_closed_form():
    assert contraction_rate(0.5, 0.99) == pytest.approx(0.99 * 0.5 / (1 - 0.495), abs=1e-12)
    assert contraction_rate(0.0, 0.9) == pytest.approx(0.9)  # kappa = 0: classic PI/VI rate
    assert contraction_rate(1.0, 0.99) == 0.0


def test_paper_example_c_fa_0_1():
    # Paper Sec. 4: N(0.99) ~ 4 and N(0.5) ~ 115 for C_FA = 0.1, gamma = 0.99.
    # The exact values are 3.30 and 115.13; ceil is the rule guaranteeing xi**N <= C_FA.
    assert math.log(0.1) / math.log(contraction_rate(0.5, 0.99)) == pytest.approx(115.13, abs=0.01)
    assert num_iterations(0.99, 0.1, 0.99) == 4
    assert num_iterations(0.5, 0.1, 0.99) == 116
    assert num_iterations(1.0, 0.1, 0.99) == 1


@pytest.mark.parametrize("seed", range(5))
def test_num_iterations_is_smallest_n_reaching_c_fa(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        kappa, c_fa, gamma = rng.uniform(0, 0.999), rng.uniform(1e-4, 0.99), rng.uniform(0.5, 0.999)
        xi, n = contraction_rate(kappa, gamma), num_iterations(kappa, c_fa, gamma)
        assert xi**n <= c_fa * (1 + 1e-6)
        assert n == 1 or xi ** (n - 1) > c_fa


def test_exact_power_is_not_rounded_up():
    # gamma (1 - kappa) / (1 - gamma kappa) = 0.5 with gamma = 0.5, kappa = 0: 0.5**2 = 0.25.
    assert num_iterations(0.0, 0.25, 0.5) == 2


def test_samples_per_iteration_and_remainder():
    assert samples_per_iteration(10_000_000, 4) == 2_500_000
    assert samples_per_iteration(10, 3) == 3
    # The remainder (10 mod 3 = 1) goes to the first iteration: 4, 3, 3.
    assert [iteration_end(i, 10, 3) for i in range(3)] == [4, 7, 10]
    ends = [iteration_end(i, 1003, 7) for i in range(7)]
    assert ends[-1] == 1003 and np.diff([0] + ends).tolist() == [144] * 2 + [143] * 5


def test_naive_schedule_one_step_per_iteration():
    assert samples_per_iteration(1000, 1000) == 1
    assert [iteration_end(i, 1000, 1000) for i in (0, 1, 999)] == [1, 2, 1000]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: num_iterations(1.5, 0.1, 0.99), "kappa must lie in"),
        (lambda: num_iterations(-0.1, 0.1, 0.99), "kappa must lie in"),
        (lambda: num_iterations(0.5, 0.0, 0.99), "c_fa must lie in"),
        (lambda: num_iterations(0.5, 1.0, 0.99), "c_fa must lie in"),
        (lambda: num_iterations(0.5, 0.1, 1.0), "gamma must lie in"),
        (lambda: samples_per_iteration(3, 4), "smaller than N_kappa"),
    ],
)
def test_bad_settings_raise_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
