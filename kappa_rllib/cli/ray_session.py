"""Ray for the verbs that run it: which cluster (--address, $RAY_ADDRESS, or an embedded local
Ray), an early answer when nothing is there, and the start itself."""

from __future__ import annotations

import os
import signal
import socket
import sys

from kappa_rllib.cli.common import UsageError, one_line, positive_int

ADDRESS_HELP = (
    "the Ray cluster to run on: auto (the cluster `ray start` runs on this machine), HOST:6379 (the head's GCS, "
    "from inside the cluster) or ray://HOST:10001 (Ray Client, over grpcio, from outside it); default: "
    "$RAY_ADDRESS if set (as in a `ray job submit` entrypoint), else an embedded local Ray")


def add_ray_options(parser) -> None:
    """--address and --num-cpus, the same on every verb that runs Ray."""
    parser.add_argument("--address", default=None, help=ADDRESS_HELP)
    parser.add_argument("--num-cpus", type=positive_int, default=None,
                        help="CPUs for the embedded local Ray (default: all); ignored with a cluster address")


def resolve_address(args) -> None:
    """No --address: $RAY_ADDRESS if set (a `ray job submit` entrypoint runs with it), else embedded Ray."""
    args.address_option = "--address"
    if getattr(args, "address", None) is None and os.environ.get("RAY_ADDRESS"):
        args.address, args.address_option = os.environ["RAY_ADDRESS"], "RAY_ADDRESS"


def check_address(args) -> None:
    """An unreachable cluster address is answered at once, not by Ray's endless retries."""
    address, option = args.address, args.address_option
    if address in (None, "auto", "local"):
        return
    if address.startswith(("http://", "https://")):
        raise UsageError(f"{option} {address!r} is a dashboard (Jobs API) URL: `ray job submit` takes it (through "
                         "RAY_API_SERVER_ADDRESS); training takes auto, HOST:PORT or ray://HOST:PORT")
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"{option} {address!r}: expected auto, HOST:PORT (e.g. 10.0.0.5:6379) or "
                         "ray://HOST:PORT (Ray Client, e.g. ray://10.0.0.5:10001)")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise UsageError(f"{option} {address}: nothing answers at {host}:{port} ({e.strerror or e}; one TCP "
                         "connection tried, 5 s timeout); is the cluster up (`ray start --head`)?") from None


def check_local_gpus(args) -> None:
    """An embedded Ray only has this machine's GPUs: asking for more would leave every trial pending."""
    if args.address:
        return  # a cluster's GPU nodes may not be up yet (the autoscaler starts them on demand)
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"--gpus-per-trial {args.gpus_per_trial:g}: this machine has no CUDA GPU; run on a "
                         "cluster with GPU nodes (--address, cluster/README.md)")


def start_ray(args, torch_threads: int) -> None:
    """The driver's torch threads, then Ray: embedded, or the cluster at args.address."""
    import ray
    import torch

    torch.set_num_threads(torch_threads)
    try:
        if args.address and args.address.startswith("ray://"):
            connect_ray_client(ray, args.address)
        elif args.address:
            ray.init(address=args.address, log_to_driver=False)
        else:
            # Ray's own processes start with SIGINT ignored, so Ctrl-C reaches only this driver,
            # which then checkpoints with its Ray intact.
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
            finally:
                signal.signal(signal.SIGINT, previous)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as e:
        raise UsageError(f"{args.address_option} {args.address}: could not connect ({one_line(e)})") from None


# The head's Ray Client proxy starts one server process per client, and that start sometimes fails:
# the new process dies within seconds of its fork (a gRPC fork race in the proxy, ray-project/ray#63202,
# ~7% of connects). The client then sees one of these, each a start failure, never a wrong address
# or token; a fresh connect gets a fresh server process.
CLIENT_SERVER_START_FAILURES = (
    "Starting Ray client server failed",  # the proxy saw the process exit
    "in start_specific_server",  # it died while the proxy read its command line (psutil.ZombieProcess)
    "Proxy failed to Connect to backend",  # it died after its start, before the proxy's channel was up
)


def connect_ray_client(ray, address: str, attempts: int = 3) -> None:
    """Ray Client, retrying the proxy's per-client server start (CLIENT_SERVER_START_FAILURES)."""
    for attempt in range(1, attempts + 1):
        try:
            ray.init(address=address, log_to_driver=False)
            return
        except ConnectionError as e:
            if not any(marker in str(e) for marker in CLIENT_SERVER_START_FAILURES) or attempt == attempts:
                raise
            ray.shutdown()
            print(f"[ray] {address}: the cluster's Ray Client server failed to start; retrying "
                  f"({attempt}/{attempts - 1})", file=sys.stderr)
