#!/usr/bin/env bash
# demo.sh - the quick start's first command: install what is missing,
# build, and run tide's main job on 4 local ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
echo "demo: starting 4 ranks on this machine with tide-run"
exec build/tools/tide-run -n 4 -- build/tools/tide-ring-demo
