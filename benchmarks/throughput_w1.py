"""Workload W1: env steps/s of kappa-DQN on RLlib beside a minimal torch loop.

W1: CartPole-v1, MLP 2x64, batch 32, one gradient update per 4 env steps, uniform replay 50k,
target copy every 500 env steps, learning starts at 1000, 20k env steps. All runs happen in this
one process, one after another, so the figures and their ratios come from the same machine state.

    python benchmarks/throughput_w1.py [--steps 20000] [--algos minimal,stock-dqn,kappa-pi,kappa-vi,kappa-1]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn

W1 = dict(
    hidden=[64, 64], batch=32, env_steps_per_update=4, replay=50_000, target_every=500,
    learning_starts=1000, lr=5e-4, gamma=0.99, epsilon_steps=10_000, epsilon_final=0.02,
)


def minimal_torch_dqn(total_steps: int, seed: int = 0) -> float:
    """The reference: a single-process DQN loop with numpy replay. Returns env steps/s."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = gym.make("CartPole-v1")
    obs_dim, n_actions = env.observation_space.shape[0], env.action_space.n

    def mlp():
        return nn.Sequential(nn.Linear(obs_dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, n_actions))

    q, q_target = mlp(), mlp()
    q_target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=W1["lr"])
    cap = W1["replay"]
    buf_obs, buf_next = np.zeros((cap, obs_dim), np.float32), np.zeros((cap, obs_dim), np.float32)
    buf_a, buf_r, buf_d = np.zeros(cap, np.int64), np.zeros(cap, np.float32), np.zeros(cap, np.float32)
    size = ptr = 0
    obs, _ = env.reset(seed=seed)
    start = time.perf_counter()
    for t in range(total_steps):
        eps = max(W1["epsilon_final"], 1.0 - t / W1["epsilon_steps"] * (1.0 - W1["epsilon_final"]))
        if rng.random() < eps:
            action = int(rng.integers(n_actions))
        else:
            with torch.no_grad():
                action = int(q(torch.as_tensor(obs)).argmax())
        next_obs, reward, terminated, truncated, _ = env.step(action)
        buf_obs[ptr], buf_next[ptr], buf_a[ptr], buf_r[ptr], buf_d[ptr] = obs, next_obs, action, reward, terminated
        ptr, size = (ptr + 1) % cap, min(size + 1, cap)
        obs = next_obs
        if terminated or truncated:
            obs, _ = env.reset()
        if t >= W1["learning_starts"] and t % W1["env_steps_per_update"] == 0:
            idx = rng.integers(0, size, W1["batch"])
            o, n, a = torch.as_tensor(buf_obs[idx]), torch.as_tensor(buf_next[idx]), torch.as_tensor(buf_a[idx])
            r, d = torch.as_tensor(buf_r[idx]), torch.as_tensor(buf_d[idx])
            with torch.no_grad():
                target = r + W1["gamma"] * (1 - d) * q_target(n).max(dim=1).values
            loss = nn.functional.huber_loss(q(o).gather(1, a[:, None]).squeeze(1), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if t % W1["target_every"] == 0:
            q_target.load_state_dict(q.state_dict())
    return total_steps / (time.perf_counter() - start)


def kappa_dqn(variant: str, kappa: float, total_steps: int, seed: int = 0) -> tuple[float, float]:
    """env steps/s of our RLlib algorithm on W1 (build time excluded); also the final return."""
    from kappa_rllib import KappaPIDQNConfig, KappaVIDQNConfig

    config_cls = KappaPIDQNConfig if variant == "pi" else KappaVIDQNConfig
    config = (
        config_cls()
        .environment("CartPole-v1")
        .training(
            kappa=kappa, c_fa=0.05, total_env_steps=total_steps, lr=W1["lr"], gamma=W1["gamma"],
            train_batch_size=W1["batch"], env_steps_per_update=W1["env_steps_per_update"],
            target_network_update_freq=W1["target_every"],
            num_steps_sampled_before_learning_starts=W1["learning_starts"],
            epsilon=[(0, 1.0), (W1["epsilon_steps"], W1["epsilon_final"])],
            replay_buffer_config={"type": "UniformReplayBuffer", "capacity": W1["replay"]},
            env_steps_per_iteration=5000,
        )
        .rl_module(model_config={"fcnet_hiddens": W1["hidden"], "head_fcnet_hiddens": []})
        .env_runners(rollout_fragment_length=W1["env_steps_per_update"])
        .debugging(seed=seed)
    )
    algo = config.build_algo()
    start = time.perf_counter()
    result = {}
    while not result.get("done"):
        result = algo.train()
    rate = total_steps / (time.perf_counter() - start)
    algo.stop()
    return rate, result["env_runners"].get("episode_return_mean", float("nan"))


def stock_rllib_dqn(total_steps: int, seed: int = 0) -> float:
    """env steps/s of RLlib's own DQN on W1 (no double-Q, no dueling, uniform episode replay)."""
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
        .rl_module(model_config={"fcnet_hiddens": W1["hidden"], "head_fcnet_hiddens": []})
        # one sample call of 4 env steps, then one update: one update per 4 env steps
        .env_runners(rollout_fragment_length=W1["env_steps_per_update"])
        .debugging(seed=seed)
    )
    algo = config.build_algo()
    start = time.perf_counter()
    steps = 0
    while steps < total_steps:
        steps = algo.train()["env_runners"]["num_env_steps_sampled_lifetime"]
    rate = steps / (time.perf_counter() - start)
    algo.stop()
    return rate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--algos", default="minimal,stock-dqn,kappa-pi,kappa-vi,kappa-1")
    args = parser.parse_args()
    torch.set_num_threads(1)
    algos = args.algos.split(",")
    rates = {}
    if "minimal" in algos:
        rates["minimal torch loop"] = minimal_torch_dqn(args.steps)
    if any(a.startswith("kappa") or a == "stock-dqn" for a in algos):
        import ray

        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        if "stock-dqn" in algos:
            rates["stock RLlib DQN"] = stock_rllib_dqn(args.steps)
        runs = {"kappa-pi": ("pi", 0.84), "kappa-vi": ("vi", 0.84), "kappa-1": ("pi", 1.0)}
        for name in algos:
            if name in runs:
                rate, ret = kappa_dqn(*runs[name], args.steps)
                rates[f"{name} (RLlib)"] = rate
                print(f"{name}: final episode_return_mean {ret:.1f}")
        ray.shutdown()
    base = rates.get("minimal torch loop")
    print(f"\nW1, {args.steps} env steps, torch threads 1")
    print(f"{'run':<24}{'env steps/s':>12}{'x slower than minimal':>24}")
    for name, rate in rates.items():
        ratio = f"{base / rate:.1f}" if base else "-"
        print(f"{name:<24}{rate:>12.0f}{ratio:>24}")


if __name__ == "__main__":
    main()
