#!/bin/sh
# What docker/Dockerfile needs from its base image, checked at build time with one line each
# (docker/README.md): Python 3.11 as `python`, pip, and a non-root user `ray` in the group `users`.
base="$1"
fail() { echo "kappa-rllib image: the base image $base $1 (docker/README.md, 'Base images')" >&2; exit 1; }
command -v python > /dev/null 2>&1 || fail "has no \`python\` on PATH"
version=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$version" = "3.11" ] || fail "has Python $version; the project's pins need 3.11"
python -m pip --version > /dev/null 2>&1 || fail "has no pip for its python"
id -u ray > /dev/null 2>&1 || fail "has no user \`ray\`"
[ "$(id -u ray)" != "0" ] || fail "has \`ray\` as root (uid 0); it must be a non-root user"
getent group users > /dev/null 2>&1 || fail "has no group \`users\`"
exit 0
