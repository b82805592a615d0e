"""A griffe extension (mkdocstrings' API pages): each config's `.training(...)` parameter shows its real default.

The configs' `.training(...)` take `None` (or RLlib's `NotProvided`) for "not given", as RLlib's do, so the API
pages read "Default None" for every setting. The real default is what the config class sets in `__init__`: this
extension builds each config class that defines `training` (importing the package, as a reader's Python would)
and writes the attribute's value in the parameter's place. The kappa settings' mixin has one default per
algorithm family (`kappa_rllib.defaults`): it shows them as a dict by family.
"""

from __future__ import annotations

import importlib

import griffe

NOT_GIVEN = ("None", "NotProvided")


def _family_defaults(name: str) -> str | None:
    """`name`'s default in `kappa_rllib.defaults`: "0.84" where every family has it, else one value per family as a
    Python dict, `{'DQN': 0.05, 'TRPO': 0.2, ...}` (a signature's default stays a Python expression, which
    mkdocstrings formats to the column)."""
    from kappa_rllib import defaults

    families = {f: getattr(defaults, f) for f in ("DQN", "TRPO", "PPO", "APPO")}
    if not all(name in row for row in families.values()):
        return None
    values = {family: row[name] for family, row in families.items()}
    return repr(next(iter(values.values()))) if len(set(values.values())) == 1 else repr(values)


def _classes(module: griffe.Module):
    for member in module.members.values():
        if member.is_alias:
            continue
        if member.is_module:
            yield from _classes(member)
        elif member.is_class:
            yield member


class RealDefaults(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        if pkg.name != "kappa_rllib":
            return
        for cls in _classes(pkg):
            training = cls.members.get("training")
            if training is None or training.is_alias or not training.is_function:
                continue
            if cls.name == "KappaConfigMixin":  # one default per family
                values = {p.name: _family_defaults(p.name) for p in training.parameters}
                values["naive_schedule"] = "False"
            else:
                config = getattr(importlib.import_module(cls.module.path), cls.name)()
                values = {p.name: repr(getattr(config, p.name)) for p in training.parameters
                          if p.name not in ("self", "kwargs") and hasattr(config, p.name)}
            for parameter in training.parameters:
                if str(parameter.default) in NOT_GIVEN and values.get(parameter.name) is not None:
                    parameter.default = values[parameter.name]
