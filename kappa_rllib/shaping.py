"""The kappa-shaped reward and the surrogate discount: the one place both are computed.

Paper, Sec. 3: the surrogate MDP M_{gamma kappa}(V) has discount gamma*kappa and reward

    r_t(kappa, V) = r_t + gamma (1 - kappa) V(s_{t+1}).

V(s_{t+1}) is 0 when s_{t+1} is terminal; a time-limit truncation is not terminal, so the
value is bootstrapped there (docs/paper-settings.md, "The schedule"). Works on torch tensors and numpy arrays.
"""

from __future__ import annotations


def shaped_reward(rewards, next_values, terminateds, gamma: float, kappa: float):
    """r + gamma (1 - kappa) V(s') (1 - terminated)."""
    return rewards + gamma * (1.0 - kappa) * next_values * (1.0 - terminateds)


def surrogate_discount(gamma: float, kappa: float) -> float:
    """The discount gamma*kappa of the surrogate MDP."""
    return gamma * kappa


def surrogate_td_target(rewards, next_values, next_bootstrap, terminateds, gamma, kappa, *, shaped=None):
    """One-step target of the surrogate MDP (Algorithms 5 and 6, the Q_theta loss):

    r(kappa, V_phi) + gamma kappa max_a Q'_theta(s', a), both terms zero past a terminal.
    kappa = 1 gives r + gamma max_a Q'_theta(s', a): DQN's target exactly. `shaped`: the shaped
    reward r(kappa, V_phi) where the caller has it already (it is not computed again).
    """
    if shaped is None:
        shaped = shaped_reward(rewards, next_values, terminateds, gamma, kappa)
    return shaped + surrogate_discount(gamma, kappa) * next_bootstrap * (1.0 - terminateds)
