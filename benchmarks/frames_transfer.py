"""What an Atari EnvRunner sends per chunk, and what the driver does with it: frame-stacked segments sent as
stacks against sent as their frames, each once (`send_frames`, replay.frames_of).

A benchmark, not a test. ALE/Breakout-v5 is stepped once (a random policy, the project's Atari preprocessing:
`atari_replay_memory.breakout_chunks`) and cut into chunks of 4 segments of 16 env steps (fewer where an episode
ends), as one EnvRunner call of the Atari preset returns them; then, in alternated rounds, each way replays the
same chunks:

- the runner's side: its segments built (`RawTransitionEnvRunner._close`: the stacks stacked, or the frames
  checked as a chain and taken once) and serialized as Ray serializes a task's return (pickle protocol 5, the
  arrays out of band, each copied once, as into the object store);
- the driver's side: `segment_transitions` and the replay add (`UniformReplayBuffer.add`: the stacks compared in
  three passes and their new frames stored, or the frames stored as they came), into a replay of its own per way,
  LZ4 in host memory or the ring (`--storage`).

Per chunk: the bytes sent, the runner's and the driver's time (medians and ranges over the rounds), and the same transitions
in both replays (asserted).

    python benchmarks/frames_transfer.py [--chunks 150] [--rounds 5] [--storage lz4|ring]
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time

import numpy as np
import torch

from atari_replay_memory import breakout_chunks
from kappa_rllib.env_runner import segment_transitions
from kappa_rllib.replay import FRAMES, UniformReplayBuffer, frames_of

SUB_ENVS, STEPS = 4, 16  # a chunk: 16 env steps of each of 4 sub-envs


def breakout_parts(chunks: int, seed: int = 0) -> list[list[dict]]:
    """Per chunk, its segments' parts as a runner holds them before closing them: the observations s_0 .. s_n (each
    a (84, 84, 4) stack), actions and rewards, and whether the episode ended. The Breakout transitions of
    `atari_replay_memory.breakout_chunks`, cut as a runner cuts them (16 env steps, or fewer at an episode's end),
    SUB_ENVS segments a chunk."""
    parts = []
    for batch, _ in breakout_chunks(chunks * SUB_ENVS * STEPS, STEPS, seed=seed):
        parts.append({"obs": list(batch["obs"]) + [batch["new_obs"][-1]], "actions": list(batch["actions"]),
                      "rewards": list(batch["rewards"]), "terminated": bool(batch["terminateds"][-1])})
    return [parts[i : i + SUB_ENVS] for i in range(0, len(parts), SUB_ENVS)][:chunks]


def runner_side(parts: list[dict], send_frames: bool) -> tuple[list[dict], int]:
    """The chunk's segments as the runner builds them, and the bytes its return carries (pickle 5, the arrays
    out of band and copied once, as Ray puts them into the object store)."""
    segments = []
    for part in parts:
        frames = frames_of(part["obs"]) if send_frames else None
        segments.append({**({FRAMES: frames} if frames is not None else {"obs": np.stack(part["obs"])}),
                         "actions": np.asarray(part["actions"]), "rewards": np.asarray(part["rewards"], np.float32),
                         "terminated": part["terminated"], "truncated": False})
    buffers = []
    header = pickle.dumps(segments, protocol=5, buffer_callback=buffers.append)
    copies = [bytearray(b.raw()) for b in buffers]  # (the copy into the object store)
    return segments, len(header) + sum(len(c) for c in copies)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunks", type=int, default=150)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--storage", default="lz4", choices=("lz4", "ring"),
                   help="the replay's frames: LZ4 in host memory, or the uncompressed ring (here on the CPU)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    chunks = breakout_parts(args.chunks)
    steps = sum(len(part["actions"]) for parts in chunks for part in parts)
    device = torch.device("cpu") if args.storage == "ring" else None
    ways = {"stacks": False, "frames": True}
    runner = {w: [] for w in ways}
    driver = {w: [] for w in ways}
    sent = {}
    for round_ in range(args.rounds):
        replays = {}
        for way in (list(ways) if round_ % 2 == 0 else list(ways)[::-1]):  # alternated: each way first in turn
            replay = UniformReplayBuffer(steps + 1, seed=0, frames_device=device)
            r_time = d_time = 0.0
            total = 0
            for parts in chunks:
                a = time.perf_counter()
                segments, nbytes = runner_side(parts, ways[way])
                b = time.perf_counter()
                replay.add(segment_transitions(segments, frames=True))
                c = time.perf_counter()
                r_time, d_time, total = r_time + b - a, d_time + c - b, total + nbytes
            runner[way].append(r_time / len(chunks))
            driver[way].append(d_time / len(chunks))
            sent[way] = total / steps
            replays[way] = replay
        a, b = replays["stacks"].get_state(), replays["frames"].get_state()
        assert a["arrays"] == b["arrays"] and a["frames"] == b["frames"], "the two ways stored different replays"
    print(f"ALE/Breakout-v5, {len(chunks)} chunks of {SUB_ENVS} x {STEPS} env steps ({steps} env steps), replay "
          f"{args.storage}, {args.rounds} alternated rounds (medians); the same replay both ways (asserted)")
    def ms(times):  # median (range over the rounds)
        return f"{statistics.median(times) * 1e3:.3f} ({min(times) * 1e3:.3f}-{max(times) * 1e3:.3f})"

    print(f"{'':8} {'bytes/env step':>15} {'runner ms/chunk':>22} {'driver ms/chunk':>22}")
    for way in ways:
        print(f"{way:8} {sent[way]:>15,.0f} {ms(runner[way]):>22} {ms(driver[way]):>22}")
    ratio = {k: statistics.median(v["stacks"]) / statistics.median(v["frames"])
             for k, v in (("runner", runner), ("driver", driver))}
    print(f"stacks / frames: bytes {sent['stacks'] / sent['frames']:.2f}x, runner {ratio['runner']:.2f}x, "
          f"driver {ratio['driver']:.2f}x")


if __name__ == "__main__":
    main()
