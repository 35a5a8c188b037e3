#!/usr/bin/env bash
# bench_p2p.sh - tide's point-to-point latency and bandwidth next to raw
# loopback sockets, on 2 local ranks: once with the default settings
# (reactor thread) and once with TIDE_PROGRESS=inline, one table each.
# Builds first if needed; extra arguments go to tide-bench-p2p, e.g.
#
#   tools/bench_p2p.sh --iters 50000 --reps 7
#
# A --json FILE argument is written once per mode as FILE.thread and
# FILE.inline, so the second run does not overwrite the first.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build

args=()
json=""
while (($#)); do
  case $1 in
    --json) json=${2:?--json needs a file}; shift 2 ;;
    --json=*) json=${1#--json=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

run() {
  local mode=$1
  local extra=()
  [[ -n $json ]] && extra=(--json "$json.$mode")
  echo "== TIDE_PROGRESS=$mode"
  TIDE_PROGRESS=$mode build/tools/tide-run -n 2 -- \
    build/tools/tide-bench-p2p "${args[@]+"${args[@]}"}" "${extra[@]+"${extra[@]}"}"
  echo
}

# Default settings: whatever TIDE_PROGRESS the caller has, else thread.
run "${TIDE_PROGRESS:-thread}"
run inline
