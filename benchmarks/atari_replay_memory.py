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


def breakout_chunks(transitions: int, chunk: int, split_at_episode_end: bool = True, seed: int = 0):
    """Real ALE/Breakout-v5 transitions (random policy, the project's Atari preprocessing) as replay batches of
    `chunk` transitions, as an EnvRunner returns them (cut where an episode ends too, with
    `split_at_episode_end`), until `transitions` are given; yields (batch, whether an episode ended in it)."""
    env = make_env("ALE/Breakout-v5")
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    part, given, ended = [], 0, False
    while given < transitions:
        action = int(rng.integers(env.action_space.n))
        nxt, reward, terminated, truncated, _ = env.step(action)
        part.append((obs, nxt, action, reward, terminated))
        obs = nxt
        if terminated or truncated:
            obs, _ = env.reset()
            ended = True
        if len(part) == chunk or (split_at_episode_end and (terminated or truncated)):
            yield {
                "obs": np.stack([c[0] for c in part]), "new_obs": np.stack([c[1] for c in part]),
                "actions": np.array([c[2] for c in part]), "rewards": np.array([c[3] for c in part], np.float32),
                "terminateds": np.array([c[4] for c in part], np.float32),
            }, ended
            given += len(part)
            part, ended = [], False


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transitions", type=int, default=100_000)
    args = p.parse_args(argv)
    buf = UniformReplayBuffer(args.transitions, seed=0)
    added, started, episodes = 0, time.time(), 1
    for batch, ended in breakout_chunks(args.transitions, 4):
        buf.add(batch)
        added += len(batch["rewards"])
        episodes += ended
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
