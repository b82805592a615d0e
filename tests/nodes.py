"""Ports for the Ray nodes the cluster tests start on this machine (tests/test_cluster.py, test_images.py)."""

import socket


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
