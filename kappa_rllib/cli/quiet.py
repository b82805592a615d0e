"""RLlib's and Ray's known-harmless warnings, hidden in the command line's output.

Each is matched by the logger that emits it and a piece of its message, never by level or
globally: any other warning, from the same loggers included, still comes through. `--verbose`
installs none of these filters.
"""

from __future__ import annotations

import logging

# (logger, a piece of the message, why it is harmless here)
KNOWN_HARMLESS = [
    ("ray.rllib.algorithms.algorithm_config", "on the new API stack!",
     "every algorithm here runs on the new API stack by design; RLlib says so on every validate()"),
    ("ray._common.deprecation", "RLModule(config=[RLModuleConfig object])",
     "raised by RLlib's own RLModule constructor, not by our modules"),
    ("ray.tune.utils.util", "Install gputil for GPU system monitoring",
     "Tune's optional GPU-utilisation logger; training uses GPUs without it"),
    ("ray._private.authentication.authentication_token_setup", "Token authentication is enabled",
     "Ray's notice that its local cluster uses a token; nothing to do"),
    ("ray.tune.tune", "Wrote the latest version of all result files",
     "Tune's note after every grid; the compact table already says where the results are"),
    ("ray.client_builder", "Passing the following kwargs to ray.init() on the server",
     "Ray Client's note of the init settings it forwards at every connect (--address ray://)"),
    ("ray.util.client.logsclient", "SIGTERM handler is not set because current thread",
     "the head's Ray Client server, forwarded at every connect: it starts Ray in a thread of its own"),
]


class _DropKnown(logging.Filter):
    def __init__(self, pieces: list[str]):
        super().__init__()
        self.pieces = pieces

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(piece in message for piece in self.pieces)


_installed: dict[str, _DropKnown] = {}


def hide_known_warnings() -> None:
    """Adds one filter to each logger of KNOWN_HARMLESS (idempotent)."""
    by_logger: dict[str, list[str]] = {}
    for name, piece, _ in KNOWN_HARMLESS:
        by_logger.setdefault(name, []).append(piece)
    for name, pieces in by_logger.items():
        if name not in _installed:
            _installed[name] = _DropKnown(pieces)
            logging.getLogger(name).addFilter(_installed[name])


def show_all_warnings() -> None:
    """Removes the filters (`--verbose`)."""
    for name, log_filter in _installed.items():
        logging.getLogger(name).removeFilter(log_filter)
    _installed.clear()
