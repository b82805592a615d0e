"""`kappa-rllib evaluate`: the greedy policy of a saved algorithm, per-episode raw returns, videos."""

from __future__ import annotations

import os
from pathlib import Path

from kappa_rllib.cli.common import UsageError, check_output, non_negative_int, one_line, positive_int
from kappa_rllib.cli.ray_session import add_ray_options, check_address, start_ray


def add_parser(sub) -> None:
    evaluate = sub.add_parser(
        "evaluate", help="run the greedy policy of a saved algorithm and print per-episode raw returns",
        description="Restores a checkpoint (a checkpoint folder or a `train` run folder: its newest complete "
                    "checkpoint), runs N episodes with the greedy policy (argmax Q for kappa-DQN, the mean "
                    "action or argmax for TRPO and PPO) and prints each episode's raw return and their mean.",
        epilog="example: kappa-rllib evaluate results/<run folder> --episodes 10 --render rgb_array --video videos/")
    evaluate.add_argument("checkpoint", help="a checkpoint folder or a `kappa-rllib train` run folder")
    evaluate.add_argument("--episodes", type=positive_int, default=10, help="episodes to run (default 10)")
    evaluate.add_argument("--seed", type=non_negative_int, default=0, help="episode i resets with seed + i")
    evaluate.add_argument("--render", choices=["rgb_array"], default=None, help="render frames (for --video)")
    evaluate.add_argument("--video", default=None, help="write one MP4 per episode into this folder (needs --render)")
    add_ray_options(evaluate)


def main(args) -> int:
    """Greedy episodes of a restored algorithm, raw returns."""
    from kappa_rllib import checkpoints, envs

    try:
        if args.video and not args.render:
            raise UsageError("--video needs --render rgb_array")
        checkpoint = checkpoints.latest(args.checkpoint)
        if args.video:
            check_output("--video", args.video)
        check_address(args)
    except checkpoints.CheckpointError as e:
        raise UsageError(one_line(e)) from None  # the message names the path
    if args.render:
        os.environ.setdefault("MUJOCO_GL", "egl")  # MuJoCo renders headless
    import numpy as np
    from ray.rllib.algorithms.algorithm import Algorithm

    start_ray(args, torch_threads=1)
    algorithm = Algorithm.from_checkpoint(str(checkpoint))
    try:
        env_id = str(algorithm.config.env).removeprefix("kappa_rllib:")
        env_config = dict(algorithm.config.env_config or {})
        if args.render:
            env_config["render_mode"] = args.render
        env = envs.make_env(env_id, env_config)
        act = _greedy_policy(algorithm, env)
        print(f"[evaluate] {checkpoint} ({algo_label(checkpoint, algorithm)}, on {env_id}), {args.episodes} greedy "
              "episodes")
        returns = []
        for episode in range(args.episodes):
            obs, _ = env.reset(seed=args.seed + episode)
            total, length, frames, done = 0.0, 0, [], False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(act(obs))
                total, length, done = total + float(reward), length + 1, terminated or truncated
                if args.render:
                    frames.append(env.render())
            returns.append(total)
            line = f"episode {episode}: return {total:.1f} ({length} steps)"
            if args.video:
                line += f", video {write_video(frames, Path(args.video) / f'episode_{episode:03d}.mp4')}"
            print(line)
        env.close()
    finally:
        algorithm.stop()
    r = np.asarray(returns)
    print(f"[evaluate] mean return {r.mean():.1f} +- {r.std():.1f} (std) over {len(r)} episodes; "
          f"min {r.min():.1f}, max {r.max():.1f}")
    return 0


def algo_label(checkpoint, algorithm) -> str:
    """The algorithm the run used, as `train --algo` names it, and its kappa (or lambda): the `algo` its
    run folder's run.json records (`train`), else read off the restored class and config (a Tune trial's
    checkpoint): the DQN, PPO and APPO baselines are kappa-PI-DQN/PPO/APPO at kappa = 1, gae is TRPO with
    lambda < 1."""
    from kappa_rllib import runs
    from kappa_rllib.cli.common import KAPPA_ONE, family
    from kappa_rllib.cli.settings import ALGO_NAMES

    config, algo = algorithm.config, None
    checkpoint = Path(checkpoint)
    for folder in (checkpoint.parent, checkpoint.parent.parent):  # RUN/checkpoint_N, RUN/checkpoints/checkpoint_N
        try:
            algo = runs.read_meta(folder).get("algo")
        except runs.RunError:
            continue
        break
    if algo is None:
        algo = ALGO_NAMES.get(type(algorithm).__name__)
        if algo is None:
            return type(algorithm).__name__
        if algo.startswith("kappa-pi-") and family(algo) in KAPPA_ONE and getattr(config, "kappa", None) == 1.0:
            algo = family(algo)
        elif algo == "trpo" and getattr(config, "lambda_", 1.0) < 1.0:
            algo = "gae"
    if algo in KAPPA_ONE:
        return f"{algo}, kappa = 1"
    if algo.startswith("kappa-"):
        return f"{algo}, kappa {getattr(config, 'kappa', '?')}"
    return f"{algo}, lambda {getattr(config, 'lambda_', 1.0)}"


def _greedy_policy(algorithm, env):
    """obs -> the restored policy's deterministic env action (argmax Q, argmax pi, or the mean)."""
    from kappa_rllib.env_runner import greedy_action

    runner = algorithm.env_runner  # the local EnvRunner: the restored policy's weights
    if hasattr(runner, "_act"):  # the raw-transition EnvRunner (kappa-DQN, TRPO)
        return lambda obs: runner._act([obs], explore=False, t=0)[1][0]
    module = algorithm.get_module()
    return lambda obs: greedy_action(module, obs, env.action_space, algorithm.config)


def write_video(frames, path: Path, fps: int = 30) -> Path:
    import cv2

    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    for frame in frames:
        writer.write(cv2.cvtColor(frame.astype("uint8"), cv2.COLOR_RGB2BGR))
    writer.release()
    return path
