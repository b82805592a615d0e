"""Committed per-environment settings, applied on top of an algorithm's defaults.

A preset is a YAML file with optional sections `environment`, `training`, `rl_module`,
`env_runners`, each passed as keyword arguments to the config method of that name.
"""

from __future__ import annotations

from pathlib import Path

import yaml

PRESET_DIR = Path(__file__).parent
SECTIONS = ("environment", "training", "rl_module", "env_runners")


def preset_for(env_id: str, family: str = "dqn") -> Path | None:
    """The packaged preset of an algorithm family ("dqn" or "trpo") for an env, if any.

    The TRPO family has none: its defaults are the paper's Table 4 (MuJoCo) already.
    """
    if family == "dqn" and env_id.startswith("ALE/"):
        return PRESET_DIR / "dqn_atari.yaml"
    if family == "dqn" and env_id.startswith("MinAtar/"):
        return PRESET_DIR / "dqn_minatar.yaml"
    if family == "dqn" and env_id.startswith("CartPole-"):
        return PRESET_DIR / "dqn_cartpole.yaml"
    return None


def load(path) -> dict:
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    unknown = set(data) - set(SECTIONS)
    if unknown:
        raise ValueError(f"{path}: unknown section(s) {sorted(unknown)}")
    return data


def apply(config, preset: dict):
    """Applies a loaded preset to an AlgorithmConfig; returns the config."""
    for section in SECTIONS:
        if preset.get(section):
            getattr(config, section)(**preset[section])
    return config
