"""A kappa-DQN Atari chunk's replay work, per storage of the frames: LZ4 in host memory against the uncompressed
ring on the learner's device (`replay_frames_on_device`, replay.FrameStore).

A benchmark, not a test. Two replays of the paper's capacity are filled with the same real ALE/Breakout-v5
transitions (a random policy, the Atari preprocessing, chunks of 64 env steps as one EnvRunner call returns them);
then, in alternated rounds, each draws a chunk's minibatches the way the learner receives them (16 gradient steps x
32 transitions, obs and next obs stacks): the LZ4 store decompresses and stacks in host memory, then (on a GPU)
pins and copies the stacks to the device, as `_fused_batch_tensors` does; the ring gathers on the device. A timer
around GPU work synchronizes before it stops. Also per chunk: the replay add (LZ4: compress each new frame; ring:
one copy of the new frames), and the memory each storage holds.

    python benchmarks/replay_draw.py [--transitions 100000] [--device cpu|cuda] [--rounds 5] [--base REV]

`--base REV` adds a third replay: the LZ4 store of `kappa_rllib/replay.py` as it was at git revision REV (loaded
from `git show`), fed the same chunks in the same loop, so its add and draw are measured side by side with today's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from atari_replay_memory import breakout_chunks
from kappa_rllib.replay import UniformReplayBuffer

CHUNK = 64  # env steps per chunk (the Atari preset's env_steps_per_runner_call)
DRAW = 16 * 32  # a chunk's minibatches: one update of 32 per 4 env steps


def to_learner(batch: dict, device: torch.device) -> dict:
    """The stacks as the learner takes them (`FusedUpdateMixin._fused_batch_tensors`): host arrays pinned and
    copied without blocking the host on a GPU; tensors already on the device as they are."""
    out = {}
    for key in ("obs", "new_obs"):
        t = batch[key] if torch.is_tensor(batch[key]) else torch.as_tensor(batch[key])
        if t.device.type == "cpu" and device.type == "cuda":
            t = t.pin_memory().to(device, non_blocking=True)
        out[key] = t
    return out


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def replay_at(rev: str):
    """`kappa_rllib/replay.py` as it was at git revision `rev`, as a module of its own."""
    import importlib.util
    import subprocess
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(["git", "-C", str(root), "show", f"{rev}:kappa_rllib/replay.py"], check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "replay_at_base.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("replay_at_base", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transitions", type=int, default=100_000, help="the replay's capacity, filled")
    p.add_argument("--device", default="cpu", help="the learner's device: cpu or cuda")
    p.add_argument("--rounds", type=int, default=5, help="alternated rounds (each storage once a round)")
    p.add_argument("--draws", type=int, default=20, help="chunk draws a round")
    p.add_argument("--base", help="also the LZ4 store of kappa_rllib/replay.py at this git revision")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    device = torch.device(args.device)
    buffers = {"LZ4 frames in host memory": UniformReplayBuffer(args.transitions, seed=0),
               f"ring on the learner's device ({device.type})": UniformReplayBuffer(args.transitions, seed=0,
                                                                                   frames_device=device)}
    if args.base:
        buffers[f"LZ4 frames, the code at {args.base}"] = replay_at(args.base).UniformReplayBuffer(args.transitions,
                                                                                                  seed=0)
    add_ms = {name: [] for name in buffers}
    added, started = 0, time.perf_counter()
    for batch, _ in breakout_chunks(args.transitions, CHUNK, split_at_episode_end=False):
        for name, buf in buffers.items():  # (each replay adds the same chunk, timed)
            t = time.perf_counter()
            buf.add(batch)
            synchronize(device)
            add_ms[name].append(1e3 * (time.perf_counter() - t))
        added += CHUNK
    print(f"filled {added:,} transitions of Breakout in {time.perf_counter() - started:.0f} s; "
          f"{args.rounds} alternated rounds of {args.draws} chunk draws ({DRAW} transitions each)")
    draw_ms = {name: [] for name in buffers}
    for _ in range(args.rounds):
        for name, buf in buffers.items():
            synchronize(device)
            t = time.perf_counter()
            for _ in range(args.draws):
                to_learner(buf.sample(DRAW), device)
            synchronize(device)
            draw_ms[name].append(1e3 * (time.perf_counter() - t) / args.draws)
    first = next(iter(buffers))
    print(f"{'storage':<40} {'draw ms/chunk':>14} {'add ms/chunk':>13} {'frames held':>12}  draw vs LZ4")
    for name, buf in buffers.items():
        draw, add = statistics.median(draw_ms[name]), statistics.median(add_ms[name])
        held = buf._frames.nbytes / 2**20
        print(f"{name:<40} {draw:>14.2f} {add:>13.2f} {held:>9.0f} MiB  "
              f"{statistics.median(draw_ms[first]) / draw:>5.2f}x faster "
              f"(rounds {min(draw_ms[name]):.2f}-{max(draw_ms[name]):.2f})")


if __name__ == "__main__":
    main()
