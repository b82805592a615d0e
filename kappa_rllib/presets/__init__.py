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
    """The packaged preset of an algorithm family ("dqn", "trpo", "ppo" or "appo") for an env, if any.

    The TRPO family has none: its defaults are the paper's Table 4 (MuJoCo) already.
    """
    if family == "dqn" and env_id.startswith("ALE/"):
        return PRESET_DIR / "dqn_atari.yaml"
    if family == "dqn" and env_id.startswith("MinAtar/"):
        return PRESET_DIR / "dqn_minatar.yaml"
    if family == "dqn" and env_id.startswith("CartPole-"):
        return PRESET_DIR / "dqn_cartpole.yaml"
    if family == "ppo" and env_id.startswith("CartPole-"):
        return PRESET_DIR / "ppo_cartpole.yaml"
    if family == "appo" and env_id.startswith("CartPole-"):
        return PRESET_DIR / "appo_cartpole.yaml"
    return None


def load(path) -> dict:
    """A preset file's sections; a one-line ValueError naming the file (and the line or the key)
    for a missing file, a folder, bad YAML, or a layout other than {section: {setting: value}}."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"--config {str(path)!r} is a folder; give a YAML file")
    if not path.is_file():
        raise ValueError(f"--config {str(path)!r} does not exist")
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ValueError(f"--config {str(path)!r}: not valid YAML{at}: {problem}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--config {str(path)!r}: cannot be read ({e})") from None
    data = data or {}
    if not isinstance(data, dict):
        raise ValueError(f"--config {str(path)!r}: the top level must be a mapping of sections "
                         f"({', '.join(SECTIONS)}), got a {type(data).__name__}")
    unknown = set(data) - set(SECTIONS)
    if unknown:
        raise ValueError(f"--config {str(path)!r}: unknown section(s) {sorted(map(str, unknown))}; "
                         f"allowed: {', '.join(SECTIONS)}")
    for section, settings in data.items():
        if settings is not None and not isinstance(settings, dict):
            raise ValueError(f"--config {str(path)!r}: section {section!r} must be a mapping of settings, "
                             f"got {settings!r}")
    return data


def apply(config, preset: dict):
    """Applies a loaded preset to an AlgorithmConfig; returns the config."""
    for section in SECTIONS:
        if preset.get(section):
            try:
                getattr(config, section)(**preset[section])
            except TypeError as e:  # an unknown setting name
                raise ValueError(f"preset section {section!r}: {e}") from None
    return config
