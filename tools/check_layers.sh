#!/usr/bin/env bash
# check_layers.sh - fail when a source file includes across a layer
# boundary (docs/architecture.md, "Layers and the include rules").
# tools/test.sh runs it first.
#
#   engine/        its own headers, tide.h, and the transport interface at
#                  the top of transports/ -- no transports/<name>/, no
#                  collectives/, fsdp/ or tools/
#   collectives/   its own, engine/, tide.h, the transport interface -- no
#                  transports/<name>/ (they see the network only through
#                  transports/transport.h)
#   transports/<name>/  its own folder, the top of transports/, engine/,
#                  tide.h -- not another transport, not collectives/
#   transports/*.c the interface; registry.c alone may name transports
#   fsdp/, tools/  the public API only (tide.h, fsdp's tide_fsdp.h) and
#                  their own headers
#   tide_sim.h     the simulator's public header: transports/sim/, tools/
#                  and tests/ only
#   <liburing.h>   engine/reactor_uring.c only: what is io_uring-specific
#                  stays in the io_uring backend
set -euo pipefail
cd "$(dirname "$0")/.."

bad=0
complain() {
  echo "check_layers: $1: includes $2 ($3)" >&2
  bad=1
}

# allowed FILE HEADER: 0 when FILE may include the quoted HEADER.
allowed() {
  local file=$1 h=$2 dir
  dir=$(dirname "$file")
  case "$h" in tide.h) return 0 ;; esac
  # The simulator's public header: its transport, the tools and the tests.
  if [[ $h == tide_sim.h ]]; then
    [[ $file == transports/sim/* || $file == tools/* || $file == tests/* ]] && return 0
    return 1
  fi
  case "$file" in
    engine/*)
      [[ $h == engine/* ]] && return 0
      [[ $h == transports/* && $h != transports/*/* ]] && return 0
      return 1 ;;
    collectives/*)
      [[ $h == collectives/* || $h == engine/* ]] && return 0
      [[ $h == transports/* && $h != transports/*/* ]] && return 0
      return 1 ;;
    transports/registry.c)
      [[ $h == transports/* || $h == engine/* ]] && return 0
      return 1 ;;
    transports/*/*)
      [[ $h == "$dir"/* || $h == engine/* ]] && return 0
      [[ $h == transports/* && $h != transports/*/* ]] && return 0
      return 1 ;;
    transports/*)
      [[ $h == engine/* ]] && return 0
      [[ $h == transports/* && $h != transports/*/* ]] && return 0
      return 1 ;;
    fsdp/*)
      [[ $h == fsdp/* || $h == tide_fsdp.h ]] && return 0
      return 1 ;;
    tools/*)
      [[ $h != */* || $h == tools/* ]] && return 0
      return 1 ;;
  esac
  return 0
}

why_for() {
  case "$1" in
    engine/*) echo "the engine names no transport and no collective" ;;
    collectives/*) echo "collectives reach the network only through transports/transport.h" ;;
    transports/*) echo "a transport knows the engine and the transport interface, not other transports or collectives" ;;
    *) echo "only the public API (tide.h, tide_fsdp.h)" ;;
  esac
}

while IFS= read -r file; do
  while IFS= read -r h; do
    allowed "$file" "$h" || complain "$file" "\"$h\"" "$(why_for "$file")"
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
  if [[ $file != engine/reactor_uring.c ]] && grep -q '^[[:space:]]*#[[:space:]]*include[[:space:]]*<liburing' "$file"; then
    complain "$file" "<liburing.h>" "io_uring belongs to engine/reactor_uring.c"
  fi
done < <(find engine collectives transports fsdp tools -name '*.[ch]' | sort)

if ((bad)); then
  echo "check_layers: see docs/architecture.md, \"Layers and the include rules\"" >&2
  exit 1
fi
echo "check_layers: every include keeps to its layer"
