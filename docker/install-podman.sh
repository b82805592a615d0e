#!/usr/bin/env bash
# A container engine for tests/test_images.py where none is installed (CI runs it, as root, on Debian):
# podman, runc and debootstrap from Debian's packages, and the two podman settings this kind of machine
# needs (docker/podman.conf). Does nothing where docker or podman already runs, except the settings.
set -euo pipefail
if ! command -v podman > /dev/null && ! { command -v docker > /dev/null && docker info > /dev/null 2>&1; }; then
    echo "[engine] installing podman, runc and debootstrap (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap > /dev/null
fi
command -v debootstrap > /dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap > /dev/null
if command -v podman > /dev/null; then
    mkdir -p /etc/containers/containers.conf.d
    cp "$(dirname "$0")/podman.conf" /etc/containers/containers.conf.d/50-kappa-rllib.conf
fi
