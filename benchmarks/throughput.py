"""Throughput of the project's algorithms beside minimal single-process torch loops, in one run.

A benchmark, not a test: every figure of one table comes from the same process and machine state,
so compare ratios within a table, not figures across runs.

    python benchmarks/throughput.py                       # W1 and W2
    python benchmarks/throughput.py --workload w1 --steps 20000
    python benchmarks/throughput.py --workload w2 --env-runners 1,2,4
    python benchmarks/throughput.py --workload w3 --steps 30000 --env-runners 0,1
    python benchmarks/throughput.py --workload atari --steps 2000 --env-runners 0,2
    python benchmarks/throughput.py --workload atari --steps 50000 --env-runners 2,4 --device cuda --torch-threads 4
    python benchmarks/throughput.py --workload packing --steps 10000 --env-runners 2 --trials-per-gpu 1,2,4 --device cuda

W1: CartPole-v1, 2x64 MLP, batch 32, one update per 4 env steps, replay 50k, target copy every 500
    env steps, learning starts at 1000, epsilon 1 -> 0.02 over 10k steps, kappa 0.84, C_FA 0.05.
    Minimal loops: DQN, kappa-PI-DQN (Algorithm 5: improvement phases, then as many TD(0) updates of
    Q_phi as the improvement made), kappa-VI-DQN (Algorithm 6: phi <- theta per iteration).
W3: MinAtar/Breakout-v1 with the MinAtar preset (kappa_rllib/presets/dqn_minatar.yaml: one 3x3 conv of
    16 filters, 128 units, batch 32, one update per 4 env steps, replay 100k, target copy every 1000
    env steps, learning starts at 5000, Adam 2.5e-4), `--steps` env steps in all, the learning start
    included. Minimal single-env loops for DQN, kappa-PI and kappa-VI as in W1.
W2: Hopper-v5, the paper's TRPO (1024 steps per iteration, CG 10, damping 0.1, max KL 0.01, value
    fit 5 epochs x 128, entropy 0.01), one warm-up iteration, then `--iterations` timed ones.
Atari: kappa = 1 and kappa-PI-DQN on ALE/Breakout-v5 with the Atari preset (the paper's settings,
    Nature CNN, 100k replay) and `--env-runners N` remote EnvRunners, the learner on `--device`
    (cpu or cuda), beside minimal single-env loops on the same device; `--steps` env steps after
    learning starts (10k, excluded from the rate; `--fill-replay`: 100k, so the replay is full).
W3 and Atari also time the kappa = 1 run's learner alone after its run (fused learner calls on its own
    replay, nothing sampled): the rate no sampling layout can beat, only a faster gradient step.
Packing: `kappa-rllib tune --gpus-per-trial 1/N`'s layout: N kappa-PI-DQN trials of the Atari run above
    (seeds 0..N-1, `--env-runners` remote EnvRunners each) at once through Tune, each trial's learner
    on 1/N of the GPU (`--device cuda`; on cpu the same trials without a GPU share); per trial its env
    steps/s after learning starts, and their sum, the aggregate. `--profile`: torch.profiler over a
    few training iterations of the last Atari row's learner (where the driver's time goes, per op).
Each row: env steps/s, the ratio to the minimal loop of the same algorithm, the peak memory of the
whole process tree (driver, Ray's own processes, workers) while that row ran, as proportional set
size (PSS: pages shared between processes, e.g. torch's libraries, count once).
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from kappa_rllib.schedule import iteration_end, num_iterations

W1 = dict(hidden=64, batch=32, env_steps_per_update=4, replay=50_000, target_every=500, learning_starts=1000,
          lr=5e-4, gamma=0.99, epsilon_steps=10_000, epsilon_final=0.02, kappa=0.84, c_fa=0.05)


# ----------------------------------------------------------------- memory of the process tree
def _memory_bytes(pid: int) -> int:
    """Proportional set size (shared pages split between the processes that map them, so a
    library loaded by every Ray worker counts once over the tree), else RSS."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _tree_memory_bytes(root: int) -> int:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += _memory_bytes(pid)
        todo.extend(children.get(pid, []))
    return total


class PeakRSS:
    """Samples the memory (PSS) of this process and all its descendants every 0.2 s."""

    def __enter__(self):
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_memory_bytes(os.getpid()))
            self._stop.wait(0.2)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _tree_memory_bytes(os.getpid()))


class Rows(list):
    """A workload's rows, each also printed when measured: a run cut short still shows what it got."""

    def append(self, row) -> None:
        super().append(row)
        print(f"measured: {row[0]}: {row[1]:.0f} env steps/s" + (f" ({row[4]})" if len(row) > 4 else ""), flush=True)


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
            env_steps_per_iteration=5120,
        )
        .rl_module(model_config={"fcnet_hiddens": [W1["hidden"]] * 2, "head_fcnet_hiddens": []})
        .env_runners(rollout_fragment_length=W1["env_steps_per_update"])
        .debugging(seed=seed)
    )


def run_to_done(config, learner_alone_calls: int = 0) -> tuple[float, dict]:
    """(env steps/s, last result) of a run to its end; with `learner_alone_calls`, the result also
    holds `learner_alone_rate` (see `learner_alone_rate()`; timed after the run, on its own replay)."""
    algo = config.build_algo()
    start, result = time.perf_counter(), {}
    while not result.get("done"):
        result = algo.train()
    rate = result["kappa"]["env_steps"] / (time.perf_counter() - start)
    if learner_alone_calls:
        result["learner_alone_rate"] = learner_alone_rate(algo, learner_alone_calls)
    algo.stop()
    return rate, result


def learner_alone_rate(algo, calls: int) -> float:
    """The env steps/s a kappa = 1 run's learner alone sustains: `calls` fused learner calls of
    `updates_per_learner_call` Q_theta updates each (replay sampling included), on the run's own
    replay, with nothing sampled. That is the ceiling of any sampling layout (overlap, more
    EnvRunners): only a faster gradient step lifts it."""
    from ray.rllib.core import DEFAULT_MODULE_ID

    cfg = algo.config
    k, size = cfg.updates_per_learner_call, cfg.total_train_batch_size
    algo._learner_call([(DEFAULT_MODULE_ID, k, [])], size)  # warm-up
    start = time.perf_counter()
    for _ in range(calls):
        algo._learner_call([(DEFAULT_MODULE_ID, k, [])], size)
    return calls * k * cfg.env_steps_per_update / (time.perf_counter() - start)


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


def workload_w1(steps: int) -> list[tuple]:
    rows = Rows()
    for name, variant in [("DQN", None), ("kappa-PI-DQN", "pi"), ("kappa-VI-DQN", "vi")]:
        with PeakRSS() as mem:
            rate = minimal_dqn_loop(steps, variant)
        rows.append((f"minimal {name} loop", rate, name, mem.peak))
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


# ----------------------------------------------------------------- W3: MinAtar Breakout, the MinAtar preset
def preset_config(variant: str, kappa: float, env_id: str, total_steps: int, seed: int = 0, runners: int = 0):
    """kappa-PI/VI-DQN with the project's preset for `env_id` (what `kappa-rllib train` runs)."""
    from kappa_rllib import KappaPIDQNConfig, KappaVIDQNConfig, presets

    config = presets.apply((KappaPIDQNConfig if variant == "pi" else KappaVIDQNConfig)(),
                           presets.load(presets.preset_for(env_id, "dqn")))
    return (config.environment(env_id).training(kappa=kappa, total_env_steps=total_steps)
            .env_runners(num_env_runners=runners).debugging(seed=seed))


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


# ----------------------------------------------------------------- W2: TRPO on Hopper
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


def rllib_rate(config, iterations: int, runners: int) -> float:
    config = config.environment("Hopper-v5").env_runners(num_env_runners=runners).debugging(seed=0)
    algo = config.build_algo()
    algo.train()  # warm-up
    before = algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"))
    start = time.perf_counter()
    for _ in range(iterations):
        result = algo.train()
    steps = result["env_runners"]["num_env_steps_sampled_lifetime"] - before
    rate = steps / (time.perf_counter() - start)
    algo.stop()
    return rate


def workload_w2(iterations: int, env_runners: list[int]) -> list[tuple]:
    from ray.rllib.algorithms.ppo import PPOConfig

    from kappa_rllib import KappaPITRPOConfig, KappaVITRPOConfig, TRPOConfig

    rows = Rows()
    with PeakRSS() as mem:
        rate = minimal_trpo_loop(iterations)
    rows.append(("minimal TRPO loop", rate, "TRPO", mem.peak))
    raw = raw_env_step_rate()
    rows.append(("gymnasium Hopper-v5 env.step alone, one process", raw, "TRPO", mem.peak, "the env's own rate"))
    kappa = dict(kappa=0.84, c_fa=0.2, total_env_steps=2_000_000)
    runs = [("TRPO", TRPOConfig()), ("kappa-PI-TRPO", KappaPITRPOConfig().training(**kappa)),
            ("kappa-VI-TRPO", KappaVITRPOConfig().training(**kappa)),
            ("stock RLlib PPO", PPOConfig().training(train_batch_size_per_learner=1024))]
    for name, config in runs:
        for runners in (env_runners if "PPO" not in name else [0]):
            with PeakRSS() as mem:
                rate = rllib_rate(config.copy(copy_frozen=False), iterations, runners)
            label = f"kappa-rllib {name}" if "PPO" not in name else name
            rows.append((f"{label}, {runners} remote EnvRunner(s)", rate, "TRPO", mem.peak))
    return rows


# ----------------------------------------------------------------- Atari
def workload_atari(steps: int, fill_replay: bool, env_runners: list[int], device: str,
                   algos: tuple = ("dqn", "kappa-pi")) -> list[tuple]:
    """kappa = 1 and kappa-PI-DQN (`algos`) on Breakout with the Atari preset beside the minimal
    single-env loops, env steps/s over `steps` env steps after learning starts."""
    start_steps = ATARI["replay"] if fill_replay else ATARI["learning_starts"]
    w = dict(ATARI, learning_starts=start_steps)
    rows = Rows()
    pairs = [(name, variant, kappa) for name, variant, kappa, algo in
             [("DQN", None, 1.0, "dqn"), ("kappa-PI-DQN", "pi", ATARI["kappa"], "kappa-pi")] if algo in algos]
    for name, variant, _ in pairs:
        with PeakRSS() as mem:
            rate = minimal_dqn_loop(start_steps + steps, variant, w=w, device=device, timed_from=start_steps)
        rows.append((f"minimal {name} loop ({device})", rate, name, mem.peak))
    for runners in env_runners:
        for name, kappa in [("kappa = 1 (DQN)" if k == 1.0 else n, k) for n, _, k in pairs]:
            config = preset_config("pi", kappa, ATARI["env"], start_steps + steps, runners=runners).training(
                num_steps_sampled_before_learning_starts=start_steps, env_steps_per_iteration=1024)
            if device.startswith("cuda"):
                config.learners(num_gpus_per_learner=1)
            with PeakRSS() as mem:
                algo = config.build_algo()
                result, started = {}, None
                while not result.get("done"):
                    result = algo.train()
                    if started is None and result["kappa"]["env_steps"] >= start_steps:
                        started, at = time.perf_counter(), result["kappa"]["env_steps"]
                rate = (result["kappa"]["env_steps"] - at) / (time.perf_counter() - started)
                ceiling = kappa == 1.0 and runners == env_runners[0]
                alone = learner_alone_rate(algo, 5) if ceiling else None
                algo.stop()
            rows.append((f"kappa-rllib {name}, {runners} remote EnvRunner(s), learner on {device}", rate,
                         "DQN" if kappa == 1.0 else name, mem.peak,
                         f"policy lag <= {result['kappa']['max_policy_lag_env_steps']} env steps"))
            if ceiling:
                rows.append((f"kappa-rllib {name}, its learner alone on {device} (nothing sampled)", alone, "DQN",
                             mem.peak, "the ceiling of any sampling layout"))
    return rows


def workload_packing(steps: int, trials_per_gpu: list[int], runners: int, device: str) -> list[tuple]:
    """N kappa-PI-DQN Atari trials at once through Tune (`kappa-rllib tune --gpus-per-trial 1/N`),
    per N: the aggregate env steps/s after learning starts and the slowest trial's rate."""
    import tempfile

    from ray import tune

    from kappa_rllib import experiments

    start_steps = ATARI["learning_starts"]
    rows = Rows()
    for n in trials_per_gpu:
        config = preset_config("pi", ATARI["kappa"], ATARI["env"], start_steps + steps, runners=runners).training(
            num_steps_sampled_before_learning_starts=start_steps, env_steps_per_iteration=1024,
        ).debugging(seed=tune.grid_search(list(range(n))))
        grid = experiments.Grid(f"packing_{n}", config)
        if device.startswith("cuda"):
            experiments.request_gpus([grid], 1.0 / n)
        with tempfile.TemporaryDirectory() as storage, PeakRSS() as mem:
            result_grid = experiments.run([grid], storage, verbose=0)[grid.name]
            rates = []
            for r in result_grid:
                if r.error is not None:
                    raise RuntimeError(f"packing trial failed: {r.error}")
                df = r.metrics_dataframe
                learning = df[df["kappa/env_steps"] >= start_steps]
                first, last = learning.iloc[0], learning.iloc[-1]
                rates.append((last["kappa/env_steps"] - first["kappa/env_steps"])
                             / (last["time_total_s"] - first["time_total_s"]))
        share = f"{1 / n:g} GPU" if device.startswith("cuda") else "cpu"
        rows.append((f"{n} kappa-PI-DQN trial(s) at once, {share} + {runners} EnvRunner(s) each", sum(rates),
                     "kappa-PI-DQN", mem.peak, f"aggregate; slowest trial {min(rates):.0f}/s"))
    return rows


def workload_graphs(device: str, updates: int = 64, calls: int = 5) -> list[tuple]:
    """kappa-PI-DQN's learner alone on Atari-shaped minibatches (the Atari preset's Nature CNN,
    batch 32, uint8 frames), eager and as CUDA graphs: per gradient step, the host's kernel
    launches (CUDA runtime launch calls, graph launches included, counted by torch.profiler) and
    the wall time of a fused call of `updates` steps (one target pass, as in an improvement phase).
    Rows are gradient steps/s."""
    from torch.profiler import ProfilerActivity, profile

    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.learner.training_data import TrainingData
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    from kappa_rllib.envs import make_env

    rng = np.random.default_rng(0)
    n = updates * 32
    frames = lambda: rng.integers(0, 256, size=(n, 84, 84, 4), dtype=np.uint8)  # noqa: E731
    batch = MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch({
        "obs": frames(), "new_obs": frames(), "actions": rng.integers(0, 4, size=n),
        "rewards": rng.choice([0.0, 1.0], size=n).astype(np.float32), "terminateds": np.zeros(n, np.float32),
    })}, env_steps=n)
    program = {"runs": [(DEFAULT_MODULE_ID, updates, [])], "minibatch_size": 32}
    rows = Rows()
    for graphs in (False, True):
        config = preset_config("pi", ATARI["kappa"], ATARI["env"], 10_000_000).training(cuda_graphs=graphs)
        if device.startswith("cuda"):
            config.learners(num_gpus_per_learner=1)
        learner = config.build_learner(env=make_env(ATARI["env"]))
        call = lambda: learner.update(training_data=TrainingData(batch=batch), fused_update=program)  # noqa: E731
        call()  # capture (graphs) and warm-up
        sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        sync()
        rate = calls * updates / (time.perf_counter() - start)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
        with profile(activities=activities) as prof:
            call()
            sync()
        launches = sum(e.count for e in prof.key_averages()
                       if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx",
                                    "cudaGraphLaunch", "cudaMemcpyAsync"))
        layout = sum(e.count for e in prof.key_averages() if "nchwToNhwc" in e.key or "nhwcToNchw" in e.key)
        label = "CUDA graph" if graphs else "eager"
        rows.append((f"kappa-PI-DQN learner alone, {label}, {device} (gradient steps/s)", rate, "graphs", 0,
                     f"{launches / updates:.1f} launches per step; {layout} layout conversions in {updates} steps; "
                     f"graph off: {learner._graph_off}"))
        del learner
    return rows


def profile_atari(device: str, runners: int, iterations: int = 3) -> None:
    """torch.profiler over `iterations` training iterations of kappa-PI-DQN on Atari (learning
    already started), printed as the ops that take the most device (or CPU) time."""
    from torch.profiler import ProfilerActivity, profile

    start_steps = ATARI["learning_starts"]
    config = preset_config("pi", ATARI["kappa"], ATARI["env"], 10_000_000, runners=runners).training(
        num_steps_sampled_before_learning_starts=start_steps, env_steps_per_iteration=1024)
    cuda = device.startswith("cuda")
    if cuda:
        config.learners(num_gpus_per_learner=1)
    algo = config.build_algo()
    while algo.train()["kappa"]["env_steps"] < start_steps + 2048:
        pass
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(iterations):
            algo.train()
        if cuda:
            torch.cuda.synchronize()
    algo.stop()
    key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=25))
    if cuda:
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="w1,w2", help="comma-separated: w1, w2, w3, atari, graphs, packing")
    p.add_argument("--steps", type=int, default=20_000, help="env steps (W1; Atari: after learning starts)")
    p.add_argument("--iterations", type=int, default=20, help="timed TRPO iterations (W2)")
    p.add_argument("--env-runners", default="0",
                   help="remote EnvRunner counts: W2's TRPO scaling rows, W3's and Atari's kappa-DQN rows")
    p.add_argument("--fill-replay", action="store_true",
                   help="Atari: start learning only when the 100k replay is full (peak memory), not at 10k")
    p.add_argument("--device", default="cpu", help="Atari: where the learners (and the minimal loops) run: cpu or cuda")
    p.add_argument("--atari-algos", default="dqn,kappa-pi", help="Atari: which of dqn, kappa-pi to run")
    p.add_argument("--trials-per-gpu", default="1,2,4", help="packing: trial counts N, each on 1/N GPU")
    p.add_argument("--profile", action="store_true", help="Atari: torch.profiler table of a kappa-PI-DQN run")
    p.add_argument("--torch-threads", type=int, default=1, help="torch threads of the driver (the learner)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    import ray

    runners = [int(n) for n in args.env_runners.split(",")]
    workloads = args.workload.split(",")
    cpus = max(runners) + 1
    if "packing" in workloads:
        cpus = max(cpus, max(int(n) for n in args.trials_per_gpu.split(",")) * (max(runners) + 1))
    ray.init(address="local", num_cpus=max(2, cpus), include_dashboard=False, log_to_driver=False)
    rows = []
    if "w1" in workloads:
        rows += [("W1",)] + workload_w1(args.steps)
    if "w3" in workloads:
        rows += [("W3",)] + workload_w3(args.steps, [int(n) for n in args.env_runners.split(",")])
    if "w2" in workloads:
        rows += [("W2",)] + workload_w2(args.iterations, [int(n) for n in args.env_runners.split(",")])
    if "atari" in workloads:
        rows += [("Atari",)] + workload_atari(args.steps, args.fill_replay,
                                              [int(n) for n in args.env_runners.split(",")], args.device,
                                              tuple(args.atari_algos.split(",")))
    if "graphs" in workloads:
        rows += [("CUDA graphs (Atari, the learner alone)",)] + workload_graphs(args.device)
    if "packing" in workloads:
        rows += [("Packing (Atari, kappa-PI-DQN)",)] + workload_packing(
            args.steps, [int(n) for n in args.trials_per_gpu.split(",")], max(runners), args.device)
    ray.shutdown()
    minimal = {r[2]: r[1] for r in rows if len(r) > 1 and r[0].startswith("minimal")}
    raw_env = {r[2]: r[1] for r in rows if len(r) > 1 and r[0].startswith("gymnasium")}
    print(f"\n{'run':<72}{'env steps/s':>12}{'vs minimal':>12}{'vs env.step':>12}{'peak PSS':>11}  notes")
    for row in rows:
        if len(row) == 1:
            print(f"-- {row[0]}")
            continue
        name, rate, base, peak = row[:4]
        ratio = f"{rate / minimal[base]:.2f}" if base in minimal else "-"
        to_env = f"{rate / raw_env[base]:.2f}" if base in raw_env else "-"
        print(f"{name:<72}{rate:>12.0f}{ratio:>12}{to_env:>12}{peak / 2**30:>9.2f} G  {row[4] if len(row) > 4 else ''}")
    if args.profile:  # after the table, so that a failure here loses none of it
        ray.init(address="local", num_cpus=max(2, max(runners) + 1), include_dashboard=False, log_to_driver=False)
        profile_atari(args.device, max(runners))
        ray.shutdown()


if __name__ == "__main__":
    main()
