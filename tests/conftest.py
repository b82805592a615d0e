import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest


def random_mdp(num_states: int, num_actions: int, seed: int):
    """A random finite MDP: dense transition rows from a Dirichlet, rewards in [-1, 1]."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(num_states), size=(num_states, num_actions))
    R = rng.uniform(-1.0, 1.0, size=(num_states, num_actions))
    return P, R


@pytest.fixture(scope="module")
def ray_local():
    """An embedded Ray with 2 CPUs for one test module, shut down afterwards."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


def s3_filesystem(endpoint: str, **options):
    """pyarrow's S3 filesystem on moto's server at `endpoint` (`s3_endpoint`), as the tests read the bucket."""
    import pyarrow.fs

    return pyarrow.fs.S3FileSystem(endpoint_override=endpoint, access_key="test", secret_key="test",
                                   region="us-east-1", **options)


@pytest.fixture
def s3_endpoint():
    """moto's S3 server on a loopback port, with the bucket `kappa-seams`: http://127.0.0.1:PORT."""
    from nodes import free_port, listening

    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 30
        while not listening(port):
            assert time.time() < deadline and server.poll() is None, "moto's S3 server did not start"
            time.sleep(0.2)
        endpoint = f"http://127.0.0.1:{port}"
        s3_filesystem(endpoint, allow_bucket_creation=True).create_dir("kappa-seams")
        yield endpoint
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
