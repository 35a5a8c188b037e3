#!/usr/bin/env bash
# hosts_bench.sh - all-reduce across two "hosts" made of network
# namespaces on this machine: flat algorithms against the hierarchical
# one (docs/algorithms.md, "Hierarchical all-reduce across hosts").
#
# Two namespaces, each a host of --per-host ranks, joined through a
# bridge namespace by veth pairs whose egress is shaped to --rate with
# tbf (the kernel here has no netem).  Ranks in one namespace share
# memory (the same machine and namespace: one host to tide), ranks in
# the other reach them over TCP through the bridge.  Needs root and
# iproute2; the namespaces are removed on exit.
#
#   tools/hosts_bench.sh [--rate 10gbit] [--per-host 2] [-b 64K] [-e 64M]
#                        [-f 4] [-n 20] [--reps 5] [--algos "rabenseifner ring hier"]
#
# An entry of --algos may name the frames' protection after a colon
# (TIDE_WIRE_AUTH; the default is auto, a MAC, since every run has a
# token): --algos "ring:off ring:mac ring:encrypt" measures what
# authenticating the data plane costs on a shaped link.  "default" lets
# tide choose the algorithm.
#
# Runs every algorithm over every size, --reps rounds with the
# algorithms interleaved (a shared machine drifts: a block of runs per
# algorithm would compare moments, not algorithms), then prints the
# median time per size for each and the hierarchical one's ratio to the
# best flat one.  Rank 0's tables are kept in the directory it names.
set -euo pipefail
cd "$(dirname "$0")/.."

rate=10gbit per_host=2 minb=64K maxb=64M factor=4 iters=20 reps=5
algos="rabenseifner ring hier"
build=${TIDE_BUILD:-build}
while (($#)); do
  case $1 in
    --rate) rate=$2; shift ;;
    --per-host) per_host=$2; shift ;;
    -b) minb=$2; shift ;;
    -e) maxb=$2; shift ;;
    -f) factor=$2; shift ;;
    -n) iters=$2; shift ;;
    --reps) reps=$2; shift ;;
    --algos) algos=$2; shift ;;
    *) echo "hosts_bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ $(id -u) == 0 ]] || { echo "hosts_bench: needs root (ip netns, tc)" >&2; exit 2; }
command -v ip >/dev/null && command -v tc >/dev/null ||
  { echo "hosts_bench: needs iproute2 (ip, tc)" >&2; exit 2; }

ns=(tide-hb0 tide-hb1)
bridge=tide-hbbr
out=$(mktemp -d /tmp/hosts_bench.XXXXXX)
cleanup() {
  for n in "${ns[@]}" "$bridge"; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
cleanup

ip netns add "$bridge"
ip netns exec "$bridge" ip link add hbbr type bridge
ip netns exec "$bridge" ip link set hbbr up
for h in 0 1; do
  ip netns add "${ns[h]}"
  ip link add "hb$h" type veth peer name "hbp$h"
  ip link set "hb$h" netns "${ns[h]}"
  ip link set "hbp$h" netns "$bridge"
  ip netns exec "$bridge" ip link set "hbp$h" master hbbr
  ip netns exec "$bridge" ip link set "hbp$h" up
  ip netns exec "$bridge" tc qdisc add dev "hbp$h" root tbf rate "$rate" burst 4mb latency 50ms
  ip netns exec "${ns[h]}" ip addr add "10.77.0.$((h + 1))/24" dev "hb$h"
  ip netns exec "${ns[h]}" ip link set "hb$h" up
  ip netns exec "${ns[h]}" ip link set lo up
  ip netns exec "${ns[h]}" tc qdisc add dev "hb$h" root tbf rate "$rate" burst 4mb latency 50ms
done

n=$((2 * per_host))
port=29700
# One run of tide-perf on every rank; rank 0's table in $out/$algo.$rep.txt.
run() {
  local algo=$1 rep=$2 pids=() r
  local name=${algo%%:*} wire=auto force=()
  [[ $algo == *:* ]] && wire=${algo#*:}
  [[ $name == default ]] || force=(-a "$name")
  port=$((port + 1))
  for ((r = 0; r < n; r++)); do
    local h=$((r / per_host))
    ip netns exec "${ns[h]}" env RANK=$r WORLD_SIZE=$n MASTER_ADDR=10.77.0.1 \
      MASTER_PORT=$port TIDE_JOB_TOKEN=hosts-bench-$port OMP_NUM_THREADS=1 \
      TIDE_WIRE_AUTH="$wire" \
      "$build/tools/tide-perf" -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w 3 -c 1 \
      "${force[@]}" >"$out/$algo.rank$r.txt" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  cp "$out/$algo.rank0.txt" "$out/$algo.$rep.txt"
  if ((failed)); then
    echo "hosts_bench: a rank of the $algo run failed:" >&2
    cat "$out/$algo".rank*.txt >&2
    exit 1
  fi
}

echo "hosts_bench: $n ranks, 2 hosts of $per_host, links shaped to $rate, $reps rounds;" \
  "tables in $out"
for ((rep = 0; rep < reps; rep++)); do
  for a in $algos; do run "$a" "$rep"; done
done

# Summary: the median out-of-place time of each algorithm per size, and
# each one's ratio to the first.
python3 - "$out" "$reps" $algos <<'EOF'
import sys, statistics
out, reps, algos = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
times = {}
for a in algos:
    for rep in range(reps):
        for line in open(f"{out}/{a}.{rep}.txt"):
            f = line.split()
            if len(f) > 6 and f[0].isdigit():
                times.setdefault(int(f[0]), {}).setdefault(a, []).append(float(f[5]))
print("median us\nsize (B) " + "".join(f"{a:>20}" for a in algos) + "   hier / best flat"
      + "".join(f"   {a} / {algos[0]}" for a in algos[1:]))
for size in sorted(times):
    row = {a: statistics.median(v) for a, v in times[size].items()}
    flat = [row[a] for a in algos if a != "hier" and a in row]
    ratio = f"{row['hier'] / min(flat):.2f}" if "hier" in row and flat else "-"
    rel = "".join(f"{row[a] / row[algos[0]]:>{len(a) + len(algos[0]) + 6}.2f}" for a in algos[1:])
    print(f"{size:>9}" + "".join(f"{row.get(a, float('nan')):>20.1f}" for a in algos) + f"   {ratio:>17}" + rel)
EOF
