"""W1 (CartPole) and W3 (MinAtar Breakout): kappa-rllib's DQN family beside the minimal loops and stock
RLlib DQN."""

from __future__ import annotations

import time

from throughput_parts.common import PeakRSS, Rows, preset_config, run_to_done
from throughput_parts.minimal import W1, W3, minimal_dqn_loop


# ----------------------------------------------------------------- the project's and RLlib's W1 runs
def w1_config(variant: str, kappa: float, total_steps: int, seed: int = 0):
    from kappa_rllib import KappaPIDQNConfig, KappaVIDQNConfig

    return (
        (KappaPIDQNConfig if variant == "pi" else KappaVIDQNConfig)()
        .environment("CartPole-v1")
        .training(
            kappa=kappa, c_fa=W1["c_fa"], total_env_steps=total_steps, lr=W1["lr"], gamma=W1["gamma"],
            train_batch_size=W1["batch"], env_steps_per_update=W1["env_steps_per_update"],
            target_network_update_freq=W1["target_every"],
            num_steps_sampled_before_learning_starts=W1["learning_starts"],
            epsilon=[(0, 1.0), (W1["epsilon_steps"], W1["epsilon_final"])],
            replay_buffer_config={"type": "UniformReplayBuffer", "capacity": W1["replay"]},
            env_steps_per_iteration=5120, env_steps_per_fragment=W1["env_steps_per_update"],
        )
        .rl_module(model_config={"fcnet_hiddens": [W1["hidden"]] * 2, "head_fcnet_hiddens": []})
        .debugging(seed=seed)
    )


def stock_rllib_dqn(total_steps: int, seed: int = 0) -> float:
    from ray.rllib.algorithms.dqn import DQNConfig

    config = (
        DQNConfig()
        .environment("CartPole-v1")
        .training(
            lr=W1["lr"], gamma=W1["gamma"], train_batch_size=W1["batch"], double_q=False, dueling=False,
            target_network_update_freq=W1["target_every"],
            num_steps_sampled_before_learning_starts=W1["learning_starts"],
            epsilon=[(0, 1.0), (W1["epsilon_steps"], W1["epsilon_final"])],
            replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": W1["replay"]},
        )
        .rl_module(model_config={"fcnet_hiddens": [W1["hidden"]] * 2, "head_fcnet_hiddens": []})
        .env_runners(rollout_fragment_length=W1["env_steps_per_update"])  # one update per 4 env steps
        .debugging(seed=seed)
    )
    algo = config.build_algo()
    start, steps = time.perf_counter(), 0
    while steps < total_steps:
        steps = algo.train()["env_runners"]["num_env_steps_sampled_lifetime"]
    rate = steps / (time.perf_counter() - start)
    algo.stop()
    return rate


def workload_w1(steps: int, stock: bool = True) -> list[tuple]:
    rows = Rows()
    for name, variant in [("DQN", None), ("kappa-PI-DQN", "pi"), ("kappa-VI-DQN", "vi")]:
        with PeakRSS() as mem:
            rate = minimal_dqn_loop(steps, variant)
        rows.append((f"minimal {name} loop", rate, name, mem.peak))
    if stock:
        with PeakRSS() as mem:
            rate = stock_rllib_dqn(steps)
        rows.append(("stock RLlib DQN", rate, "DQN", mem.peak))
    for name, variant, kappa in [("kappa = 1 (DQN)", "pi", 1.0), ("kappa-PI-DQN", "pi", W1["kappa"]),
                                 ("kappa-VI-DQN", "vi", W1["kappa"])]:
        with PeakRSS() as mem:
            rate, result = run_to_done(w1_config(variant, kappa, steps))
        base = "DQN" if kappa == 1.0 else name
        rows.append((f"kappa-rllib {name}", rate, base, mem.peak,
                     f"return {result['env_runners'].get('episode_return_mean', float('nan')):.0f}, "
                     f"policy lag <= {result['kappa']['max_policy_lag_env_steps']} env steps"))
    return rows


def workload_w3(steps: int, env_runners: list[int]) -> list[tuple]:
    rows = Rows()
    for name, variant in [("DQN", None), ("kappa-PI-DQN", "pi"), ("kappa-VI-DQN", "vi")]:
        with PeakRSS() as mem:
            rate = minimal_dqn_loop(steps, variant, w=W3)
        rows.append((f"minimal {name} loop", rate, name, mem.peak))
    for runners in env_runners:
        for name, variant, kappa in [("kappa = 1 (DQN)", "pi", 1.0), ("kappa-PI-DQN", "pi", W3["kappa"]),
                                     ("kappa-VI-DQN", "vi", W3["kappa"])]:
            ceiling = kappa == 1.0 and runners == env_runners[0]
            with PeakRSS() as mem:
                rate, result = run_to_done(preset_config(variant, kappa, W3["env"], steps, runners=runners),
                                           learner_alone_calls=20 if ceiling else 0)
            base = "DQN" if kappa == 1.0 else name
            rows.append((f"kappa-rllib {name}, {runners} remote EnvRunner(s)", rate, base, mem.peak,
                         f"policy lag <= {result['kappa']['max_policy_lag_env_steps']} env steps"))
            if ceiling:
                rows.append((f"kappa-rllib {name}, its learner alone (nothing sampled)", result["learner_alone_rate"],
                             base, mem.peak, "the ceiling of any sampling layout"))
    return rows
