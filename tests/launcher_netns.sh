#!/usr/bin/env bash
# launcher_netns.sh TIDE_RUN TIDE_PERF - tide-run starting a job on two
# "hosts" with `ip netns exec` standing in for ssh: two network
# namespaces of this machine joined by a veth pair, each running two
# ranks of one 4-rank tide-perf job whose every result is checked.  The
# namespaces are the test's own (10.78.0.0/24, nothing else is reached)
# and are removed on exit.  Needs root and iproute2 (CI has both; without
# them it says so and exits 77, which meson reports as skipped).
set -euo pipefail
run=$1 perf=$2
# 77: meson's "skipped", said with why, where namespaces cannot be made
# (not root, or a container that refuses them); CI runs as root.
[[ $(id -u) == 0 ]] || { echo "launcher_netns: skipped: needs root (ip netns)"; exit 77; }
command -v ip >/dev/null || { echo "launcher_netns: skipped: no iproute2 (ip)"; exit 77; }

ns=(tide-ln0-$$ tide-ln1-$$)
cleanup() { for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null || true; done; }
trap cleanup EXIT

for h in 0 1; do
  ip netns add "${ns[h]}" ||
    { echo "launcher_netns: skipped: this machine refuses network namespaces"; exit 77; }
  ip netns exec "${ns[h]}" ip link set lo up
done
ip link add "tln0-$$" netns "${ns[0]}" type veth peer name "tln1-$$" netns "${ns[1]}"
for h in 0 1; do
  ip netns exec "${ns[h]}" ip addr add "10.78.0.$((h + 1))/24" dev "tln$h-$$"
  ip netns exec "${ns[h]}" ip link set "tln$h-$$" up
done

out=$(timeout 60 "$run" -H "${ns[0]}:2,${ns[1]}:2" --addr 10.78.0.1 --agent "ip netns exec" \
  --bind-to none -- "$perf" -b 8 -e 256K -f 8 -n 3 -w 1 -c 1 2>&1) || {
  echo "$out"; echo "launcher_netns: the job failed" >&2; exit 1; }
echo "$out"
grep -q "^\[0\] # Out of bounds values : 0 OK" <<<"$out" || {
  echo "launcher_netns: rank 0 did not report every result right" >&2; exit 1; }
grep -q "4 ranks" <<<"$out" || { echo "launcher_netns: not one job of 4 ranks" >&2; exit 1; }
echo "launcher_netns: 4 ranks on two namespaced hosts, every result right"
