"""What every verb shares: the one-line usage error, argument types, the algorithm names."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DQN_FAMILY = ("kappa-pi-dqn", "kappa-vi-dqn", "dqn")
TRPO_FAMILY = ("kappa-pi-trpo", "kappa-vi-trpo", "trpo", "gae")
PPO_FAMILY = ("kappa-pi-ppo", "kappa-vi-ppo", "ppo")
APPO_FAMILY = ("kappa-pi-appo", "kappa-vi-appo", "appo")
ALGORITHMS = DQN_FAMILY + TRPO_FAMILY + PPO_FAMILY + APPO_FAMILY
KAPPA_ALGORITHMS = ("kappa-pi-dqn", "kappa-vi-dqn", "kappa-pi-trpo", "kappa-vi-trpo", "kappa-pi-ppo", "kappa-vi-ppo",
                    "kappa-pi-appo", "kappa-vi-appo")
# The baselines that are a kappa algorithm at kappa = 1 (exactly DQN, PPO with lambda = 1, APPO).
KAPPA_ONE = ("dqn", "ppo", "appo")


def family(algo: str) -> str:
    if algo in DQN_FAMILY:
        return "dqn"
    return "ppo" if algo in PPO_FAMILY else "appo" if algo in APPO_FAMILY else "trpo"
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # stopped by SIGINT / SIGTERM (after writing a checkpoint)


class UsageError(Exception):
    """A bad argument or setting: reported as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage + error; we print one line
        raise UsageError(message)


def one_line(e: Exception) -> str:
    return " ".join(str(e).split())


def error(message) -> int:
    print(f"kappa-rllib: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def number(name):
    def parse(text):
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{name} must be a number, got {text!r}") from None

    return parse


def int_at_least(minimum: int, what: str):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


positive_int = int_at_least(1, "a positive integer")
non_negative_int = int_at_least(0, "an integer >= 0")


def gpu_share(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GPUs >= 0, got {text!r}") from None
    if not value >= 0 or (value > 1 and not value.is_integer()):
        raise argparse.ArgumentTypeError(f"expected a number of GPUs: a share in [0, 1] or a whole number, got {text!r}")
    return value


def check_output(option: str, folder) -> None:
    """The output folder can be created and written, checked before Ray starts."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{option} {str(folder)!r}: cannot create the folder ({e.strerror or e})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {str(folder)!r}: the folder is not writable")


def bare_track(argv: list[str]) -> list[str]:
    """`argv` with a bare `--track` made explicit (`--track wandb`) where the next word is not its value:
    CleanRL's `--track` sits anywhere, e.g. before `tune`'s FILE or `train file CONFIG.py`, which argparse
    would take as the back-end. The next word is a file if it is `file`, holds a `/` or a `.`, or exists;
    any other word stays the value (a wrong one gets tracking.parse's one line)."""
    import os

    out = []
    for i, word in enumerate(argv):
        out.append(word)
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if word == "--track" and nxt is not None and not nxt.startswith("-") and (
                nxt == "file" or "/" in nxt or "." in nxt or os.path.exists(nxt)):
            out.append("wandb")
    return out


def add_track_options(parser) -> None:
    """`--track [wandb|mlflow[,...]]`, `--track-project` and `--wandb-entity` (kappa_rllib.tracking)."""
    parser.add_argument("--track", nargs="?", const="wandb", default=None, metavar="wandb|mlflow",
                        help="also log each run to Weights & Biases (a bare --track) and/or MLflow (--track mlflow, "
                             "--track wandb,mlflow; needs pip install 'kappa-rllib[track]'): the config once, the "
                             "metrics against env steps. W&B: WANDB_MODE=offline logs without an account. MLflow: "
                             "MLFLOW_TRACKING_URI, else a SQLite store in the results folder (<results>/mlflow.db); "
                             "a file store (file:PATH) needs MLFLOW_ALLOW_FILE_STORE=true, MLflow 3's opt-in")
    parser.add_argument("--track-project", default=None,
                        help="the W&B project and MLflow experiment (default: WANDB_PROJECT, else kappa-rllib)")
    parser.add_argument("--wandb-entity", default=None,
                        help="the W&B entity, a team or user (default: WANDB_ENTITY, else the account's default)")


def check_track(args) -> None:
    """`args.track` parsed into a list of back-ends whose packages are installed and whose store can work
    (ValueError, one line; nothing imported, nothing written)."""
    from kappa_rllib import tracking

    args.track = tracking.parse(args.track) if getattr(args, "track", None) else []
    args.track_project = getattr(args, "track_project", None)
    args.wandb_entity = tracking.entity(getattr(args, "wandb_entity", None))
    tracking.check_installed(args.track)
    tracking.check_store(args.track)
