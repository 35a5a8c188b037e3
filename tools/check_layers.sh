#!/usr/bin/env bash
# check_layers.sh - fail when a source file includes across a layer
# boundary (docs/architecture.md, "Layers and the include rules"), and,
# given a build directory, when an object file calls across one: each
# library object's undefined symbols against what the other layers'
# objects define, so a call or an extern declaration cannot slip past
# the include rules.  tools/test.sh runs it first (includes) and again
# after building (symbols).
#
#   tools/check_layers.sh [BUILD_DIR]
#
# Includes, quoted or in angle brackets:
#   engine/        its own headers and tide.h -- nothing of transports/,
#                  collectives/, fsdp/ or tools/: the interface it drives
#                  (transport.h, frame.h, msgq.h, board.h) is its own
#   collectives/   its own, engine/, tide.h -- nothing of transports/
#                  (they see the network only through engine/transport.h)
#   transports/<name>/  its own folder, the top of transports/ (helpers
#                  the transports share), transports/rendezvous/ (how
#                  ranks find and trust each other), engine/, tide.h --
#                  not another transport, not collectives/
#   transports/*.c shared helpers; registry.c alone may name transports
#   fsdp/, tools/  the public API only (tide.h, fsdp's tide_fsdp.h) and
#                  their own headers
#   tide_sim.h     the simulator's public header: transports/sim/, tools/
#                  and tests/ only
#   <liburing.h>   engine/reactor_uring.c only: what is io_uring-specific
#                  stays in the io_uring backend
#
# Symbols (libtide's objects in BUILD_DIR):
#   engine/        its own, and transports/registry.c's (the one place
#                  that opens a transport); nothing of collectives/ or of
#                  a named transport
#   collectives/   its own and engine/'s
#   transports/<name>/  its own, engine/'s, the top of transports/ and
#                  transports/rendezvous/'s
#   transports/*.c engine/'s and each other's; registry.c any transport's
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
      return 1 ;;
    collectives/*)
      [[ $h == collectives/* || $h == engine/* ]] && return 0
      return 1 ;;
    transports/registry.c)
      [[ $h == transports/* || $h == engine/* ]] && return 0
      return 1 ;;
    transports/*/*)
      [[ $h == "$dir"/* || $h == engine/* || $h == transports/rendezvous/* ]] && return 0
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
    collectives/*) echo "collectives reach the network only through engine/transport.h" ;;
    transports/*) echo "a transport knows the engine and the transport interface, not other transports or collectives" ;;
    *) echo "only the public API (tide.h, tide_fsdp.h)" ;;
  esac
}

while IFS= read -r file; do
  while IFS= read -r h; do
    allowed "$file" "$h" || complain "$file" "\"$h\"" "$(why_for "$file")"
  done < <(sed -n -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
               -e 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<\(\(engine\|collectives\|transports\|fsdp\|tools\)\/[^>]*\)>.*/\1/p' "$file")
  if [[ $file != engine/reactor_uring.c ]] && grep -q '^[[:space:]]*#[[:space:]]*include[[:space:]]*<liburing' "$file"; then
    complain "$file" "<liburing.h>" "io_uring belongs to engine/reactor_uring.c"
  fi
done < <(find engine collectives transports fsdp tools -name '*.[ch]' | sort)

# ---- symbols ----

# The layer of a source path: engine, collectives, transports (the top
# of transports/), transports/<name>, or "" (not the library's).
layer_of() {
  case "$1" in
    engine/*) echo engine ;;
    collectives/*) echo collectives ;;
    transports/*/*) echo "transports/$(cut -d/ -f2 <<<"$1")" ;;
    transports/*) echo transports ;;
  esac
}

# symbol_allowed USER_LAYER USER_FILE DEFINER_LAYER DEFINER_FILE
symbol_allowed() {
  local ul=$1 uf=$2 dl=$3 df=$4
  [[ $ul == "$dl" ]] && return 0
  case "$ul" in
    engine) [[ $df == transports/registry.c ]] ;;
    collectives) [[ $dl == engine ]] ;;
    transports/*) [[ $dl == engine || $dl == transports || $dl == transports/rendezvous ]] ;;
    transports)
      [[ $dl == engine || ($uf == transports/registry.c && $dl == transports/*) ]] ;;
    *) return 0 ;;
  esac
}

check_symbols() {
  local objdir=$1 defs uses
  defs=$(mktemp) uses=$(mktemp)
  # Meson names an object after its source, slashes as underscores.
  while IFS= read -r src; do
    local obj="$objdir/${src//\//_}.o" l
    [[ -f $obj ]] || continue
    l=$(layer_of "$src")
    nm --defined-only -g "$obj" | awk -v l="$l" -v f="$src" 'NF == 3 {print $3, l, f}' >>"$defs"
    nm -u "$obj" | awk -v l="$l" -v f="$src" '{print $2, l, f}' >>"$uses"
  done < <(find engine collectives transports -name '*.c' | sort)
  if [[ ! -s $defs ]]; then
    echo "check_layers: no library objects under $objdir: build first" >&2
    rm -f "$defs" "$uses"
    return 1
  fi
  local n=0
  while read -r sym ul uf dl df; do
    n=$((n + 1))
    symbol_allowed "$ul" "$uf" "$dl" "$df" && continue
    echo "check_layers: $uf: calls $sym, defined in $df ($(why_for "$uf"))" >&2
    bad=1
  done < <(LC_ALL=C join <(LC_ALL=C sort -k1,1 "$uses") <(LC_ALL=C sort -k1,1 "$defs"))
  rm -f "$defs" "$uses"
  echo "check_layers: $n calls between library objects checked"
}

if (($# > 0)); then
  objdir=$(find "$1" -maxdepth 1 -type d -name 'libtide.so.*.p' | head -1)
  [[ -n $objdir ]] || objdir=$(find "$1" -maxdepth 1 -type d -name 'libtide.a.p' | head -1)
  if [[ -z $objdir ]]; then
    echo "check_layers: $1 holds no libtide objects: build first" >&2
    exit 2
  fi
  check_symbols "$objdir"
fi

if ((bad)); then
  echo "check_layers: see docs/architecture.md, \"Layers and the include rules\"" >&2
  exit 1
fi
if (($# > 0)); then
  echo "check_layers: every include and every call keeps to its layer"
else
  echo "check_layers: every include keeps to its layer"
fi
