#!/usr/bin/env bash
# device_wire_auth.sh - what authenticating TCP frames costs on a many-core
# host (issue 33): tide-perf over TCP with TIDE_WIRE_AUTH off, mac and
# encrypt, interleaved rounds, on loopback with 2 and 8 ranks (free cores
# for every progress thread), and across two network namespaces joined
# by links shaped to 10 and 25 Gbit/s (tools/hosts_bench.sh) where the
# host allows namespaces (the 16-core host did not, 2026-11-26).  Run on
# the host as: source .device/on-device.sh; export OUT TL; export -f trun;
# bash tools/device_wire_auth.sh   (a child bash inherits neither the
# function nor TL otherwise); tables under $OUT.
set -uo pipefail
out=${OUT:-/tmp/wire}; mkdir -p "$out"
rounds=${ROUNDS:-3}
{
  echo "host: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  grep -o -m1 -w 'aes\|vaes\|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
} >"$out/facts.txt"

for n in 2 8; do
  for ((r = 0; r < rounds; r++)); do
    for w in off mac encrypt; do
      echo "== ranks $n round $r wire $w"
      TIDE_WIRE_AUTH=$w TIDE_TRANSPORT=tcp trun 60 -n "$n" -- tide-perf --op allreduce \
        -b 64K -e 16M -f 4 -n 10 -w 3 -c 1 2>&1 | grep -v '^\[[1-9]' | grep -v '#  '
    done
  done
done >"$out/loopback.txt" 2>&1

# A tide-perf the script's $build/tools/ layout can find.
mkdir -p /tmp/wb/tools
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$TL" "${TIDE_PERF:-/opt/tide/bin/tide-perf}" >/tmp/wb/tools/tide-perf
chmod +x /tmp/wb/tools/tide-perf
if command -v ip >/dev/null && command -v tc >/dev/null && ip netns add tide-probe 2>/dev/null; then
  ip netns del tide-probe
  for rate in 10gbit 25gbit; do
    TIDE_BUILD=/tmp/wb timeout 200 bash tools/hosts_bench.sh --per-host 1 --rate "$rate" -b 64K \
      -e 16M -f 4 -n 10 --reps "$rounds" --algos "default:off default:mac default:encrypt" \
      >"$out/hosts-$rate.txt" 2>&1
  done
else
  echo "no network namespaces here (ip/tc missing or not permitted)" >"$out/hosts-none.txt"
fi
