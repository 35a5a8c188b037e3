#!/usr/bin/env bash
# demo.sh - the quick start's first command: install what is missing,
# build, and run tide's main job on 4 local ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
echo "demo: FSDP training on 4 ranks (tide-run): full_shard, checked step by step against one process"
exec build/tools/tide-run -n 4 -- build/tools/tide-fsdp-train --strategy full_shard --prefetch 2 --steps 10 --check
