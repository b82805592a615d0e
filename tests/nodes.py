"""Helpers of the tests that start Ray nodes on this machine (test_cluster, test_faults, test_images):
free ports, and the result rows of a grid's trials read while the grid runs."""

import json
import socket
from pathlib import Path


def free_port() -> int:
    """An unused TCP port outside Ray's default worker-port range (10002-19999)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not 10000 <= port < 20000:
            return port


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def trial_rows(grid_dir: Path) -> dict[str, list[dict]]:
    """The result rows of each trial of a Tune grid folder that has reported; a row still being
    written (and a result file still empty) is left for the next look."""
    trials = {}
    for result in sorted(grid_dir.glob("*/result.json")):
        rows = []
        for line in result.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
        if rows:
            trials[result.parent.name] = rows
    return trials
