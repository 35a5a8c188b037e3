#!/usr/bin/env bash
# setup.sh - make sure this Debian machine has what tide builds with, and
# configure the build directory.  Used by demo.sh and test.sh.
#
#   tools/setup.sh [BUILD_DIR [MESON_OPTIONS...]]
#
# As root it installs what is missing with apt-get; otherwise it prints
# the exact command to run and stops.
set -euo pipefail

packages=(meson ninja-build pkg-config gcc liburing-dev libcmocka-dev libsodium-dev libopenblas-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run:  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

build=${1:-build}
shift || true
cd "$(dirname "$0")/.."
if [[ ! -f "$build/build.ninja" ]]; then
  meson setup "$build" -Dwerror=true "$@" >/dev/null
fi
ninja -C "$build" >/dev/null
