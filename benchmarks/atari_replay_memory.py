"""Memory of the paper's 100k-transition Atari replay, compact (frame by frame) vs full stacks.

Fills `UniformReplayBuffer(100_000)` with real ALE/Breakout-v5 transitions (random policy, the
project's Atari preprocessing, chunks of 4 steps as the EnvRunner returns them) and prints the
bytes it holds, the process's peak RSS, the frames written per transition, and the size the
same transitions take stored as two full 84x84x4 stacks each. A benchmark, not a test.

    python benchmarks/atari_replay_memory.py [--transitions 100000]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from kappa_rllib.envs import make_env
from kappa_rllib.replay import UniformReplayBuffer


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transitions", type=int, default=100_000)
    args = p.parse_args(argv)
    env = make_env("ALE/Breakout-v5")
    rng = np.random.default_rng(0)
    buf = UniformReplayBuffer(args.transitions, seed=0)
    obs, _ = env.reset(seed=0)
    chunk, added, started, episodes = [], 0, time.time(), 1
    while added < args.transitions:
        action = int(rng.integers(env.action_space.n))
        nxt, reward, terminated, truncated, _ = env.step(action)
        chunk.append((obs, nxt, action, reward, terminated))
        obs = nxt
        if terminated or truncated:
            obs, _ = env.reset()
            episodes += 1
        if len(chunk) == 4 or terminated or truncated:
            buf.add({
                "obs": np.stack([c[0] for c in chunk]), "new_obs": np.stack([c[1] for c in chunk]),
                "actions": np.array([c[2] for c in chunk]), "rewards": np.array([c[3] for c in chunk], np.float32),
                "terminateds": np.array([c[4] for c in chunk], np.float32),
            })
            added += len(chunk)
            chunk = []
    elapsed = time.time() - started
    held = buf._frames.nbytes + 8 * buf._frames.capacity + sum(a.nbytes for a in buf._arrays.values())
    full = len(buf) * 2 * 84 * 84 * 4 + sum(a.nbytes for k, a in buf._arrays.items() if not k.endswith("_ids"))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"transitions {len(buf):,} from {episodes} Breakout games in {elapsed:.0f} s")
    print(f"frames written per transition: {buf._frames.written / added:.3f}")
    print(f"compact replay: {held / 2**20:.0f} MiB held; full stacks would take {full / 2**30:.2f} GiB "
          f"({full / held:.0f}x)")
    print(f"peak RSS of this process (env + buffer): {peak_mb / 1024:.2f} GiB")


if __name__ == "__main__":
    main()
