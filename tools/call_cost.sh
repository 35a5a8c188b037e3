#!/usr/bin/env bash
# call_cost.sh - what one blocking collective costs each rank in
# instructions, loads and stores, for tide and Open MPI's vader, counted
# by callgrind: a figure that does not move with the machine's noise.
#
#   tools/call_cost.sh [--op OP] [--bytes N] [--build DIR] [--no-mpi]
#
# OP is tide-perf's (default broadcast), N the vector's bytes (default 8);
# 2 ranks, tide over shared memory (boards for the small sizes) and Open
# MPI with pml ob1, btl self,vader, both bound as tide-run binds.
#
# Why: this 2-core VM runs twice as fast in some hours as in others, and
# the small-message gap to vader is a matter of 0.1 us a call (docs/
# small-messages.md), so an A/B of timings needs many interleaved
# rounds.  Instructions and stores a call settle the question of whether
# a change made a call cheaper at once; the timings then say whether
# that mattered.  Stores count because of the store buffer: a call that
# stores to a line its peer holds stalls once its later stores (tide's
# root, 2026-11-28: about 355 a call) fill the buffer behind that one.
#
# Method: each rank in turn runs under callgrind (--cache-sim=yes for
# the loads and stores; the calling thread's counts only, not those of
# tide's progress thread or Open MPI's helpers) at two iteration counts, and a call costs the
# difference over the difference in calls, so that start-up and the
# measured rank's warm-up cancel out.  The rank under callgrind runs
# some fifty times slower than its peer, which is therefore always on
# time: the figures are a call's own work, without waiting.
#
# Needs valgrind (installed with apt-get when run as root) and, for the
# vader rows, Open MPI (mpicc builds tools/mpi_coll_bench.c as
# compare.sh does).  About 20 seconds on the 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."

op=broadcast bytes=8 build=build mpi=1
while (($#)); do
  case $1 in
    --op) op=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --no-mpi) mpi=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "call_cost: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

tools/packages.sh call_cost valgrind
[[ -x $build/tools/tide-perf && -x $build/tools/tide-run ]] ||
  { echo "call_cost: no $build/tools/tide-perf: build first (ninja -C $build)" >&2; exit 1; }
few=4000 many=12000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The wrapper a launcher starts for every rank: callgrind for the rank
# named CC_RANK (tide-run's RANK, mpirun's OMPI_COMM_WORLD_RANK), the
# program itself for the others.
cat >"$work/wrap.sh" <<'EOF'
#!/usr/bin/env bash
if [[ ${RANK:-${OMPI_COMM_WORLD_RANK:-}} == "$CC_RANK" ]]; then
  exec valgrind -q --tool=callgrind --cache-sim=yes --separate-threads=yes \
    --callgrind-out-file="$CC_OUT" "$@"
fi
exec "$@"
EOF
chmod +x "$work/wrap.sh"

# totals FILE: "instructions loads stores" of a callgrind profile.
totals() {
  callgrind_annotate --show=Ir,Dr,Dw "$1" 2>/dev/null |
    awk '/PROGRAM TOTALS/ { gsub(",", ""); print $1, $3, $5; exit }'
}

# tide-perf times each collective with a TIDE_IN_PLACE form out of place
# and then in place (tools/common/bench_common.c, colls[].inplace): two
# calls an iteration.  mpi-coll-bench makes one.
case $op in
  allreduce | allgather | reduce_scatter | reduce) tide_calls=2 ;;
  *) tide_calls=1 ;;
esac

# row SYSTEM RANK CALLS LAUNCH...: run LAUNCH (whose ranks start through
# the wrapper, with -n ITERS appended, CALLS collectives an iteration) at
# both counts and print the row.
row() {
  local system=$1 rank=$2 calls=$3 n
  shift 3
  for n in $few $many; do
    CC_RANK=$rank CC_OUT="$work/$system.$rank.$n" timeout 600 "$@" -n "$n" -w 100 \
      >"$work/$system.$rank.$n.log" 2>&1 ||
      { echo "call_cost: $system rank $rank failed:" >&2; tail -5 "$work/$system.$rank.$n.log" >&2; exit 1; }
  done
  read -r i1 l1 s1 < <(totals "$work/$system.$rank.$few-01")
  read -r i2 l2 s2 < <(totals "$work/$system.$rank.$many-01")
  awk -v s="$system" -v r="$rank" -v d=$(((many - few) * calls)) -v i=$((i2 - i1)) -v l=$((l2 - l1)) \
    -v w=$((s2 - s1)) 'BEGIN {
      printf "%-6s %4d %13.0f %7.0f %7.0f%s\n", s, r, i / d, l / d, w / d,
        i < 0 ? "  (the shorter run did more: it waited; run again)" : "" }'
}

echo "call_cost: $op of $bytes B, 2 ranks, per call (callgrind; $many calls less $few)"
printf '%-6s %4s %13s %7s %7s\n' system rank instructions loads stores
for rank in 0 1; do
  TIDE_TRANSPORT=shm row tide "$rank" "$tide_calls" "$build/tools/tide-run" -n 2 -- "$work/wrap.sh" \
    "$build/tools/tide-perf" --op "$op" -b "$bytes" -e "$bytes"
done
((mpi)) || exit 0
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  echo "call_cost: no Open MPI (openmpi-bin, libopenmpi-dev): tide's rows only" >&2
  exit 0
fi
mpicc -std=c11 -D_GNU_SOURCE -O2 tools/mpi_coll_bench.c -o "$work/mpi-coll-bench" -lm
for rank in 0 1; do
  row vader "$rank" 1 mpirun --allow-run-as-root -np 2 --bind-to core --mca pml ob1 \
    --mca btl self,vader -x CC_RANK -x CC_OUT "$work/wrap.sh" "$work/mpi-coll-bench" \
    --tool sm --op "$op" -b "$bytes" -e "$bytes"
done
