#!/usr/bin/env bash
# Build the kappa-rllib image with docker or podman, whichever is installed (docker/README.md).
#
#   docker/build.sh [cpu|gpu] [--debian-base | --base IMAGE] [--tag TAG] [--engine docker|podman]
#
#   cpu|gpu        the flavour (default cpu); the tag is kappa-rllib:<version>-ray<Ray version>-<flavour>
#   --base IMAGE   any base with Python 3.11, pip and a non-root user `ray` (default: Ray's own image,
#                  rayproject/ray:<Ray version>-py311-<flavour>)
#   --debian-base  a local Debian bookworm base, for machines that cannot pull Ray's images: made once
#                  with debootstrap (root) and kept as localhost/kappa-debian-base:bookworm
#   --tag TAG      another tag
#
# pip inside the build uses the host's pip sources (pip's configuration and PIP_* variables): a local
# wheel folder or index and a proxy's CA bundle are mounted read-only into the build (podman) and
# named by build arguments, never kept in the image. The CPU flavour takes torch's CPU wheel (a local
# one if the host has it, else PyTorch's CPU index); the GPU flavour takes PyPI's CUDA wheel.
set -euo pipefail
cd "$(dirname "$0")/.."

flavour=cpu base="" debian_base=0 tag="" engine="${KAPPA_ENGINE:-}"
while [ $# -gt 0 ]; do
    case "$1" in
        cpu|gpu) flavour="$1" ;;
        --base) base="$2"; shift ;;
        --debian-base) debian_base=1 ;;
        --tag) tag="$2"; shift ;;
        --engine) engine="$2"; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "docker/build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$engine" ]; then
    if command -v podman > /dev/null; then engine=podman
    elif command -v docker > /dev/null && docker info > /dev/null 2>&1; then engine=docker
    else echo "docker/build.sh: no container engine: install podman or docker (docker/README.md)" >&2; exit 1
    fi
fi

# One build at a time on this machine: a second waits, then takes the first one's layers from the cache.
if command -v flock > /dev/null; then
    exec 9> "${TMPDIR:-/tmp}/kappa-rllib-build.lock"
    flock 9
fi

version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
ray_version=$(sed -n 's/.*"ray\[rllib\]==\([0-9.]*\)".*/\1/p' pyproject.toml | head -1)
image="kappa-rllib:${version}-ray${ray_version}-${flavour}"

if [ "$debian_base" = 1 ]; then
    base=localhost/kappa-debian-base:bookworm
    if ! $engine image exists "$base" 2> /dev/null && ! $engine image inspect "$base" > /dev/null 2>&1; then
        command -v debootstrap > /dev/null || { echo "docker/build.sh: --debian-base needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
        rootfs=$(mktemp -d /var/tmp/kappa-rootfs.XXXXXX)
        trap 'rm -rf "$rootfs"' EXIT
        echo "[build] debootstrap bookworm (minbase, python3, venv, pip) -> $rootfs"
        debootstrap --variant=minbase --include=python3,python3-venv,python3-pip bookworm "$rootfs" \
            "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" > "$rootfs.log" 2>&1 \
            || { tail -20 "$rootfs.log" >&2; echo "docker/build.sh: debootstrap failed (log: $rootfs.log)" >&2; exit 1; }
        rm -f "$rootfs.log"
        tar -C "$rootfs" -c . | $engine import - localhost/kappa-debian-rootfs:bookworm > /dev/null
        $engine build --network host -f docker/Dockerfile.debian-base -t "$base" docker
        $engine rmi localhost/kappa-debian-rootfs:bookworm > /dev/null || true
    fi
fi

# The host's pip sources, as build arguments plus read-only mounts (pip_passthrough below).
mapfile -t pip_args < <(python3 - "$engine" "$flavour" <<'PY'
import glob, os, shlex, subprocess, sys
engine, flavour = sys.argv[1:]
config = {}
out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
for line in out.splitlines():  # global.find-links='/opt/wheels' or :env:.cert='...'
    key, _, value = line.partition("=")
    config[key.split(".", 1)[-1]] = value.strip("'\"")
for key in ("index-url", "extra-index-url", "find-links", "cert", "trusted-host"):
    env = os.environ.get("PIP_" + key.upper().replace("-", "_"))
    if env:
        config[key] = env
mounts, args = [], []
def keep(key, sources):
    """A URL as is; a folder or file:// URL on this machine mounted at the same path (podman only)."""
    kept = []
    for source in sources:
        path = source.removeprefix("file://")
        if source.startswith(("http://", "https://")) or not os.path.exists(path):
            kept.append(source)
        elif engine == "podman":
            # a local index's pages link to files beside it (../../files/...): mount its parent
            mounts.append(os.path.dirname(path.rstrip("/")) if os.path.basename(path.rstrip("/")) == "simple" else path)
            kept.append(source)
        else:
            print(f"[build] docker cannot mount {path} into a build: pip's {key} there is left out", file=sys.stderr)
    if kept:
        args.append(f"PIP_{key.upper().replace('-', '_')}={' '.join(kept)}")
torch_wheels = [p for s in config.get("find-links", "").split() for p in glob.glob(os.path.join(s, "torch-*+cpu*.whl"))]
if flavour == "gpu":  # PyPI's torch is the CUDA build; a local +cpu wheel would win the version tie
    config.pop("find-links", None)
keep("index-url", config.get("index-url", "").split())
extra = config.get("extra-index-url", "").split()
if flavour == "cpu" and not (torch_wheels and engine == "podman"):
    extra.append("https://download.pytorch.org/whl/cpu")
keep("extra-index-url", extra)
keep("find-links", config.get("find-links", "").split())
keep("trusted-host", config.get("trusted-host", "").split())
cert = config.get("cert")
if cert and os.path.exists(cert):
    if engine == "podman":
        print(f"--volume={cert}:/run/kappa-build/ca.pem:ro")
        args.append("PIP_CERT=/run/kappa-build/ca.pem")
    else:
        print(f"[build] docker: pip's cert {cert} is not passed into the build", file=sys.stderr)
for path in dict.fromkeys(mounts):
    print(f"--volume={path}:{path}:ro")
for arg in args:
    print(f"--build-arg={arg}")
PY
)

base_arg=()
[ -n "$base" ] && base_arg=("--build-arg=BASE_IMAGE=$base")
tags=(-t "$image")
[ -n "$tag" ] && tags+=(-t "$tag")
echo "[build] $engine build $image from ${base:-rayproject/ray:${ray_version}-py311-${flavour}}"
start=$SECONDS
$engine build --network host -f docker/Dockerfile --build-arg "FLAVOUR=$flavour" "${base_arg[@]}" \
    "${pip_args[@]}" "${tags[@]}" .
echo "[build] $image built in $((SECONDS - start)) s"
