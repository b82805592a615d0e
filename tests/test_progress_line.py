"""`kappa-rllib train`'s terminal line: in an iteration in which no episode ended RLlib reports no
return (nan); the line shows the last known windowed return instead, as SB3's ep_rew_mean does."""

import math

from kappa_rllib.runs import _progress_line


def row(ret):
    return {"env_steps": 1024, "episode_return_mean": ret, "kappa_iteration": 1, "kappa_num_iterations": 4,
            "kappa_phase": "evaluation", "env_steps_per_s": 500.0}


def test_an_iteration_without_an_ended_episode_shows_the_last_known_return():
    line = _progress_line("kappa-pi-trpo", row(math.nan), 2048, last_return=123.45)
    assert "return    123.5" in line and "nan" not in line


def test_before_the_first_episode_the_return_is_a_dash_and_a_new_return_wins():
    assert "return        -" in _progress_line("kappa-pi-trpo", row(math.nan), 2048)
    assert "nan" not in _progress_line("kappa-pi-trpo", row(math.nan), 2048, last_return=None)
    assert "return     50.0" in _progress_line("kappa-pi-trpo", row(50.0), 2048, last_return=123.45)
