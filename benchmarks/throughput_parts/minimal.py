"""Minimal single-process torch loops, the baselines of every ratio: DQN and kappa-PI/VI-DQN (W1, W3,
Atari), TRPO (W2), and raw `env.step` rates."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from kappa_rllib.schedule import iteration_end, num_iterations


W1 = dict(hidden=64, batch=32, env_steps_per_update=4, replay=50_000, target_every=500, learning_starts=1000,
          lr=5e-4, gamma=0.99, epsilon_steps=10_000, epsilon_final=0.02, kappa=0.84, c_fa=0.05)


# ----------------------------------------------------------------- minimal single-env DQN loops
def _mlp_net(obs_shape, n_act):
    h = W1["hidden"]
    return nn.Sequential(nn.Linear(obs_shape[0], h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, n_act))


def _minatar_net(obs_shape, n_act):
    """The MinAtar paper's network (Young & Tian 2019), channels first: one 3x3 conv of 16, 128 units."""
    h, w, c = obs_shape
    return nn.Sequential(nn.Conv2d(c, 16, 3), nn.ReLU(), nn.Flatten(),
                         nn.Linear(16 * (h - 2) * (w - 2), 128), nn.ReLU(), nn.Linear(128, n_act))


def _nature_net(obs_shape, n_act):
    """The Nature-DQN network on uint8 84x84x4 frames (scaled inside), channels first."""
    class Nature(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(), nn.Conv2d(64, 64, 3, 1),
                nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, n_act))

        def forward(self, x):
            return self.net(x.float() / 255.0)
    return Nature()


W3 = dict(env="MinAtar/Breakout-v1", net=_minatar_net, channels_first=True, batch=32, env_steps_per_update=4,
          replay=100_000, target_every=1000, learning_starts=5000, lr=2.5e-4, gamma=0.99, epsilon_steps=100_000,
          epsilon_final=0.1, kappa=0.84, c_fa=0.05)
W1.update(env="CartPole-v1", net=_mlp_net, channels_first=False)
ATARI = dict(env="ALE/Breakout-v5", net=_nature_net, channels_first=True, batch=32, env_steps_per_update=4,
             replay=100_000, target_every=1000, learning_starts=10_000, lr=1e-4, gamma=0.99,
             epsilon_steps=1_000_000, epsilon_final=0.1, kappa=0.84, c_fa=0.05)


def minimal_dqn_loop(total_steps: int, variant: str | None, seed: int = 0, w: dict = W1, device: str = "cpu",
                     timed_from: int = 0) -> float:
    """Single-process, single-env DQN (variant None), kappa-PI-DQN ("pi") or kappa-VI-DQN ("vi"),
    CleanRL-style: numpy replay, one forward per env step, one update per `env_steps_per_update`.
    Returns env steps/s over the steps after `timed_from`."""
    from kappa_rllib.envs import make_env

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = make_env(w["env"])
    obs_shape, n_act = env.observation_space.shape, env.action_space.n
    dev = torch.device(device)

    def net():
        return w["net"](obs_shape, n_act).to(dev)

    def prep(x):  # replay rows -> network input on the device
        x = torch.as_tensor(x).to(dev, non_blocking=True)
        return x.permute(0, 3, 1, 2) if w["channels_first"] else x

    q, q_t = net(), net()
    q_t.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=w["lr"])
    kappa, gamma = (1.0 if variant is None else w["kappa"]), w["gamma"]
    if variant is not None:
        phi, phi_t = net(), net()
        phi_t.load_state_dict(phi.state_dict())
        opt_phi = torch.optim.Adam(phi.parameters(), lr=w["lr"])
    n_iter = num_iterations(kappa, w["c_fa"], gamma)
    cap, obs_dtype = w["replay"], env.observation_space.dtype
    b_o, b_n = np.zeros((cap,) + obs_shape, obs_dtype), np.zeros((cap,) + obs_shape, obs_dtype)
    b_a, b_r, b_d = np.zeros(cap, np.int64), np.zeros(cap, np.float32), np.zeros(cap, np.float32)
    size = ptr = 0

    def sample():
        idx = rng.integers(0, size, w["batch"])
        return (prep(b_o[idx]), prep(b_n[idx]), torch.as_tensor(b_a[idx]).to(dev),
                torch.as_tensor(b_r[idx]).to(dev), torch.as_tensor(b_d[idx]).to(dev))

    def step(net_, optimizer, o, a, target):
        loss = nn.functional.huber_loss(net_(o).gather(1, a[:, None]).squeeze(1), target)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(net_.parameters(), 10.0)
        optimizer.step()

    obs, _ = env.reset(seed=seed)
    start = time.perf_counter()
    t = 0
    for i in range(n_iter):
        updates = 0
        while t < iteration_end(i, total_steps, n_iter):  # improvement phase
            if t == timed_from:
                start = time.perf_counter()
            eps = max(w["epsilon_final"], 1.0 - t / w["epsilon_steps"] * (1.0 - w["epsilon_final"]))
            if rng.random() < eps:
                action = int(rng.integers(n_act))
            else:
                with torch.no_grad():
                    action = int(q(prep(obs[None])).argmax())
            nxt, reward, term, trunc, _ = env.step(action)
            b_o[ptr], b_n[ptr], b_a[ptr], b_r[ptr], b_d[ptr] = obs, nxt, action, reward, term
            ptr, size = (ptr + 1) % cap, min(size + 1, cap)
            obs = nxt if not (term or trunc) else env.reset()[0]
            t += 1
            if t >= w["learning_starts"] and t % w["env_steps_per_update"] == 0:
                o, n, a, r, d = sample()
                with torch.no_grad():
                    q_next = q_t(n)
                    v_phi = 0.0
                    if variant == "pi":
                        v_phi = phi(n).gather(1, q_next.argmax(1, keepdim=True)).squeeze(1)
                    elif variant == "vi":
                        v_phi = phi(n).max(1).values
                    target = r + gamma * (1 - kappa) * (1 - d) * v_phi + gamma * kappa * (1 - d) * q_next.max(1).values
                step(q, opt, o, a, target)
                updates += 1
            if t % w["target_every"] == 0:
                q_t.load_state_dict(q.state_dict())
        if variant == "vi":
            phi.load_state_dict(q.state_dict())
        elif variant == "pi" and i < n_iter - 1:  # evaluation phase: as many phi updates
            for u in range(updates):
                o, n, a, r, d = sample()
                with torch.no_grad():
                    pi_next = q_t(n).argmax(1, keepdim=True)
                    target = r + gamma * (1 - d) * phi_t(n).gather(1, pi_next).squeeze(1)
                step(phi, opt_phi, o, a, target)
                if (u + 1) % (w["target_every"] // w["env_steps_per_update"]) == 0:
                    phi_t.load_state_dict(phi.state_dict())
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (total_steps - timed_from) / (time.perf_counter() - start)


def minimal_trpo_loop(iterations: int, seed: int = 0) -> float:
    """Single-process TRPO on Hopper-v5 with the paper's settings; env steps/s after one warm-up
    iteration."""
    from kappa_rllib.algorithms.trpo.torch.natural_gradient import (
        backtracking_line_search, conjugate_gradient, flat_grad)
    from kappa_rllib.returns import gae_advantages, plain_returns

    torch.manual_seed(seed)
    env = gym.make("Hopper-v5")
    od, ad = env.observation_space.shape[0], env.action_space.shape[0]
    pi = nn.Sequential(nn.Linear(od, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, ad))
    log_std = nn.Parameter(torch.zeros(ad))
    vf = nn.Sequential(nn.Linear(od, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    vf_opt = torch.optim.Adam(vf.parameters(), lr=1e-3)
    params = list(pi.parameters()) + [log_std]
    low, high = env.action_space.low, env.action_space.high
    obs, _ = env.reset(seed=seed)

    def dist(o):
        return torch.distributions.Normal(pi(o), log_std.exp())

    def one_iteration():
        nonlocal obs
        chunks, cur = [], {"obs": [obs], "act": [], "rew": []}
        for _ in range(1024):
            with torch.no_grad():
                a = dist(torch.as_tensor(obs, dtype=torch.float32)).sample().numpy()
            nxt, r, term, trunc, _ = env.step(np.clip(low + (a + 1) * (high - low) / 2, low, high))
            cur["act"].append(a)
            cur["rew"].append(r)
            cur["obs"].append(nxt)
            obs = nxt
            if term or trunc:
                chunks.append((cur, term))
                obs, _ = env.reset()
                cur = {"obs": [obs], "act": [], "rew": []}
        if cur["act"]:
            chunks.append((cur, False))
        o_all, a_all, adv_all, ret_all = [], [], [], []
        for c, term in chunks:
            o = torch.as_tensor(np.array(c["obs"]), dtype=torch.float32)
            with torch.no_grad():
                v = vf(o).squeeze(1).numpy().astype(np.float64)
            adv_all.append(gae_advantages(c["rew"], v, term, 0.99, 1.0))
            ret_all.append(plain_returns(c["rew"], v[-1], term, 0.99))
            o_all.append(o[:-1])
            a_all.append(torch.as_tensor(np.array(c["act"])))
        o, a = torch.cat(o_all), torch.cat(a_all)
        adv = torch.as_tensor(np.concatenate(adv_all), dtype=torch.float32)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        with torch.no_grad():
            old = dist(o)
            old_logp = old.log_prob(a).sum(-1)

        def surr_kl():
            d = dist(o)
            s = (torch.exp(d.log_prob(a).sum(-1) - old_logp) * adv).mean() + 0.01 * d.entropy().sum(-1).mean()
            return s, torch.distributions.kl_divergence(old, d).sum(-1).mean()

        s, _ = surr_kl()
        g = flat_grad(s, params)

        def fvp(v):
            _, kl = surr_kl()
            gk = flat_grad(kl, params, create_graph=True)
            return flat_grad(gk @ v, params) + 0.1 * v

        x = conjugate_gradient(fvp, g, 10)
        step = torch.sqrt(2 * 0.01 / (x @ fvp(x) + 1e-12)) * x

        def evaluate():
            with torch.no_grad():
                s2, kl2 = surr_kl()
            return s2.item(), kl2.item()

        backtracking_line_search(params, step, evaluate, s.item(), 0.01, 10)
        ret = torch.as_tensor(np.concatenate(ret_all), dtype=torch.float32)
        gen = np.random.default_rng(seed)
        for _ in range(5):
            perm = torch.as_tensor(gen.permutation(len(o)))
            for k in range(0, len(o), 128):
                idx = perm[k : k + 128]
                loss = ((vf(o[idx]).squeeze(1) - ret[idx]) ** 2).mean()
                vf_opt.zero_grad()
                loss.backward()
                vf_opt.step()

    one_iteration()  # warm-up
    start = time.perf_counter()
    for _ in range(iterations):
        one_iteration()
    return 1024 * iterations / (time.perf_counter() - start)


def raw_env_step_rate(env_id: str = "Hopper-v5", steps: int = 20_000, seed: int = 0) -> float:
    """gymnasium's own `env.step` alone (random actions drawn beforehand, resets included), one
    process: the rate one core of env stepping could feed."""
    env = gym.make(env_id)
    env.reset(seed=seed)
    actions = [env.action_space.sample() for _ in range(1000)]
    start = time.perf_counter()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(actions[i % 1000])
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)
