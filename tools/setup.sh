#!/usr/bin/env bash
# setup.sh - make sure this Debian machine has what tide builds with, and
# configure the build directory.  Used by demo.sh and test.sh.
#
#   tools/setup.sh [BUILD_DIR [MESON_OPTIONS...]]
#
# As root it installs what is missing with apt-get; otherwise it prints
# the exact command to run and stops.
set -euo pipefail

"$(dirname "$0")/packages.sh" setup meson ninja-build pkg-config gcc liburing-dev libcmocka-dev \
  libsodium-dev libssl-dev libopenblas-dev help2man iproute2

build=${1:-build}
shift || true
cd "$(dirname "$0")/.."
if [[ ! -f "$build/build.ninja" ]]; then
  meson setup "$build" -Dwerror=true "$@" >/dev/null
fi
ninja -C "$build" >/dev/null
