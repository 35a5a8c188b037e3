#!/usr/bin/env bash
# device_compare.sh - tide beside Open MPI's vader and Gloo on a bare
# many-core host (16 cores in mind), bound and unbound, in about 8 minutes.
#
#   source .device/on-device.sh; OUT=DIR bash tools/device_compare.sh
#
# Run from the project's root on the host that .device/ was packed for
# (../shared/device/bundle.sh).  It measures, in this order:
#   (e) placement: the CPUs each rank gets from tide-run bound (its default
#       --bind-to auto), tide-run --bind-to none and mpirun bound, at every
#       world size below; and one tide-perf run at 8 ranks, bound and
#       unbound, with TIDE_LOG_LEVEL=2 for tide-run's and libtide's
#       placement lines;
#   (a) tide-overlap, allreduce 256 KiB to 64 MiB by factors of 4, compute
#       busy and sleep, 2 and 8 ranks, bound and --bind-to none;
#   (h) 8 ranks with each rank's progress thread N CPUs away from its
#       caller ("apart") against tide-run's neighbouring pair: busy
#       overlap, tide-perf allreduce 256 KiB-4 MiB, tide-fsdp-train;
#   (c) tide-perf over shared memory (TIDE_TRANSPORT=shm) against
#       mpi-coll-bench on vader (MB), allreduce, allgather, reduce_scatter,
#       broadcast, 8 B to 32 KiB by factors of 8 and 256 KiB to 16 MiB by
#       4 (and EXTRA_OPS, alltoall, reduce, gather and scatter, 8 B to
#       32 KiB only, forced onto boards; TIDE_BOARDS=0 gives their message
#       algorithms), 2, 8 and 16 ranks (the small band at 8 and 16 also with
#       TIDE_BOARDS=0, and at every size with TIDE_BOARD_DIRECT=0: blocking
#       calls through a request), both bound: tide-run's default, and mpirun
#       --map-by slot:PE=2 --bind-to core with two cores a rank (what
#       tide-run gives: compute and progress thread), --bind-to core with
#       one, --bind-to none with fewer cores than ranks;
#   (f) the 2-rank allreduce from 512 B to 64 KiB by factors of 2, over
#       shared memory bound and unbound and over TCP (issue 32's 4 KiB step);
#   (d) tide-fsdp-train (its defaults) at 8 ranks, bound and unbound, and
#       bound with --compute sleep and with --prefetch 2;
#   (g) the torch there (2.x): tests/python's rank_c10d.py (the
#       ProcessGroup contract), rank_torch.py and rank_fsdp.py (FSDP,
#       fully_shard and DDP against one process), 2 ranks, on tide and on
#       Gloo alike;
#   (p) tide-perf reduce, allgather and alltoall, 2 and 8 ranks, 1-16 MiB,
#       with TIDE_SHM_CMA=auto against 1 (single copies above 1 MiB);
#   (q) streaming stores (TIDE_STREAMING_STORES=0 against 1): broadcast
#       and scatter 16-64 KiB at 2, 8 and 16 ranks, reduce and alltoall
#       1-4 MiB at 2;
#   (b) Gloo's overlap (gloo_bench.py --overlap) as in (a);
#   (r) REPEATS - 1 more runs (default REPEATS=1: none) of the bound
#       busy overlap at each world size of (a), with tide-overlap's
#       --interleave pass, and of the bound FSDP run, since single points
#       of those moved a lot between runs.
# Overlap runs OVERLAP_ITERS calls a size (default 100; GLOO_ITERS, 30,
# for Gloo's): at ten a size, one descheduled virtual CPU moved a 256 KiB
# point from 98 % to 0 %.  The facts begin with a probe of which CPUs
# slow each other down (SMT siblings a VM may not show): CPU 0 spins
# alone, then beside each other CPU in turn.
# Gloo and the repeats last: the first to go if time runs short.
#
# Writes under $OUT: summary.txt (the tables, plain text), progress.log,
# and results.tar.gz with raw/*.json (the tools' records) and log/*.log
# (each step's output): one file, since the device tool brings back only
# so many files.  Each
# step has a deadline; a failed one is listed in the summary and the run
# goes on.  The whole stays within BUDGET seconds (default 450; the summary
# takes a second more): a step that would start with less than 15 s left
# is skipped, and the summary says so.
#
# Needs what .device/on-device.sh defines (trun, mrun, MB, PYTOOLS, tide's
# tools on PATH): it sources DEVICE_DIR/on-device.sh (default .device)
# itself unless trun and mrun are functions already and MB and PYTOOLS are
# set (export -f trun mrun; export MB PYTOOLS), which is how to point it at
# another build.  PY is the Python with torch (default python3).
# QUICK=1 runs tiny sizes and counts, to check the script on a small
# machine; OVERLAP_RANKS, GLOO_RANKS, PERF_RANKS and FSDP_RANKS
# (space-separated; empty: none) replace the world sizes; SKIP names
# sections to leave out (letters, space-separated: SKIP="b f g").
# Each step's log has /proc/stat from before and after it beside it
# (log/NAME.stat0, .stat1): the summary gives the CPU time stolen from
# each virtual CPU during the bound overlap sweeps (a VM's host running
# something else on that CPU's core), beside each rank's exposure.

if ! declare -F trun >/dev/null || ! declare -F mrun >/dev/null ||
  [[ -z ${MB:-} || -z ${PYTOOLS:-} ]]; then
  # shellcheck source=/dev/null # made by bundle.sh
  source "${DEVICE_DIR:-.device}/on-device.sh" ||
    { echo "device_compare: cannot source ${DEVICE_DIR:-.device}/on-device.sh" >&2; exit 2; }
fi
set -uo pipefail # not -e: a failed step is logged and the run goes on

: "${OUT:?device_compare: set OUT to the directory for the results}"
PY=${PY:-python3}
BUDGET=${BUDGET:-450}
QUICK=${QUICK:-0}
read -ra overlap_ranks <<<"${OVERLAP_RANKS-2 8}"
read -ra gloo_ranks <<<"${GLOO_RANKS-2 8}"
read -ra perf_ranks <<<"${PERF_RANKS-2 8 16}"
read -ra fsdp_ranks <<<"${FSDP_RANKS-8}"

if ((QUICK)); then
  overlap_sweep=(-b 64K -e 256K -f 4 -n 3 -w 1)
  perf_bands=("8 512 8 20 2" "256K 256K 4 3 1")
  fsdp_args=(--steps 3 --layers 2 --width 256)
else
  overlap_sweep=(-b 256K -e 64M -f 4 -n "${OVERLAP_ITERS:-100}" -w 5)
  perf_bands=("8 64K 8 1000 100" "256K 16M 4 20 3")
  fsdp_args=()
fi
all_ops=allreduce,allgather,reduce_scatter,broadcast
# Measured in the small band only (the boards' range): whether boards
# should take them from 3 ranks on (select.c keeps them to 2 ranks).
extra_ops=${EXTRA_OPS-alltoall,reduce,gather,scatter}

raw=$OUT/raw
logs=$OUT/log
mkdir -p "$raw" "$logs" || exit 2
: >"$OUT/progress.log"
: >"$OUT/failed.txt"

# step NAME SECONDS LAUNCH ARGS...: LAUNCH (trun or mrun, which take the
# deadline first) with the deadline cut to what the budget has left;
# output to log/NAME.log.  Variables set before "step" reach the ranks.
step() {
  local name=$1 secs=$2 left=$((BUDGET - SECONDS)) rc=0
  shift 2
  if ((left < 15)); then
    echo "$name skipped: time budget spent" | tee -a "$OUT/progress.log" "$OUT/failed.txt"
    return
  fi
  ((secs > left)) && secs=$left
  printf '[%3ds] %s\n' "$SECONDS" "$name" | tee -a "$OUT/progress.log"
  cp /proc/stat "$logs/$name.stat0" 2>/dev/null
  "$1" "$secs" "${@:2}" >"$logs/$name.log" 2>&1 || rc=$?
  cp /proc/stat "$logs/$name.stat1" 2>/dev/null
  if ((rc == 124 || rc == 137)); then
    echo "$name timed out after $secs s" | tee -a "$OUT/failed.txt"
  elif ((rc)); then
    echo "$name failed (exit $rc); see log/$name.log" | tee -a "$OUT/failed.txt"
  fi
}

# side_by_side VAR "VALUES" TAG N OP ARGS...: tide-perf --op OP ARGS on N
# ranks over shared memory once with each of VALUES in the setting VAR,
# a step each, named TAG-OP-nN-VALUE (its records in raw/, as .json).
side_by_side() {
  local var=$1 values=$2 tag=$3 n=$4 op=$5 v name
  shift 5
  for v in $values; do
    name=$tag-$op-n$n-$v
    (export "$var=$v" TIDE_TRANSPORT=shm
     step "$name" 60 trun -n "$n" -- tide-perf --op "$op" "$@" --json "$raw/$name.json")
  done
}

# wanted LETTER: whether section LETTER runs (SKIP above).
wanted() {
  [[ " ${SKIP:-} " != *" $1 "* ]]
}

# shellcheck source=tools/placement.sh
source "$(dirname "${BASH_SOURCE[0]}")/placement.sh"
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
cores=$(count_cores)
((cores > 0)) || cores=$cpus


# A spin of 0.3 s on CPU $1 (and on $2 at once, if given): CPU $1's count.
spin_on() {
  local code='import time
t = time.perf_counter(); n = 0
while time.perf_counter() - t < 0.3: n += 1
print(n)'
  if [[ -n ${2:-} ]]; then
    taskset -c "$2" "$PY" -c "$code" >/dev/null &
  fi
  taskset -c "$1" "$PY" -c "$code"
  wait
}

# CPU 0's spin beside each other CPU against alone, in %: well under 100
# where the two share a core's pipelines (or the VM's host runs both on
# one), whatever the topology files say.
smt_probe() {
  ((QUICK)) && return
  local alone c line="spin on CPU 0 beside CPU k, % of alone:"
  alone=$(spin_on 0)
  for ((c = 1; c < cpus; c++)); do
    line+=" $c:$((100 * $(spin_on 0 "$c") / (alone > 0 ? alone : 1)))"
  done
  echo "$line"
}

# tide-run's options for a placement.
place_opts() {
  [[ $1 == unbound ]] && echo --bind-to none
}

{
  echo "date $(date -u '+%F %T') UTC; $cores cores, $cpus hardware threads; Linux $(uname -r)"
  echo "cpu $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "python $($PY -c 'import sys, torch; print(sys.version.split()[0], torch.__version__)' \
    2>&1 | tail -1)"
  echo "Open MPI $(mrun 30 --version 2>&1 | sed -n 's/.*(Open MPI) //p' | head -1)"
  echo "quick $QUICK; budget $BUDGET s; load $(cut -d' ' -f1-3 /proc/loadavg)"
  for n in "${perf_ranks[@]}"; do
    ompi_binding "$n" "$cores"
    echo "mpirun bound, $n ranks: ${ompi_bind[*]}"
  done
  # Which CPUs share a core or a cache: a VM may hide SMT siblings.
  for c in /sys/devices/system/cpu/cpu[0-9]*; do
    printf '%s siblings %s core %s package %s l2 %s; ' "${c##*/}" \
      "$(cat "$c/topology/thread_siblings_list" 2>/dev/null)" \
      "$(cat "$c/topology/core_id" 2>/dev/null)" \
      "$(cat "$c/topology/physical_package_id" 2>/dev/null)" \
      "$(cat "$c/cache/index2/shared_cpu_list" 2>/dev/null)"
  done | fold -w 200
  echo
  smt_probe
} >"$OUT/facts.txt"
cat "$OUT/facts.txt"

# ------------------------------------------------ (e) placement, once each

# shellcheck disable=SC2016 # the ranks' shell expands these
probe=(sh -c 'echo "${OMPI_COMM_WORLD_RANK:-$RANK}" \
  "$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)" "${TIDE_PROGRESS_CPUS:-}"')
mapfile -t probe_ranks < <(printf '%s\n' "${perf_ranks[@]}" "${overlap_ranks[@]}" | sort -nu)
for n in "${probe_ranks[@]}"; do
  step "probe-tide-bound-n$n" 30 trun -n "$n" --no-prefix -- "${probe[@]}"
  step "probe-tide-unbound-n$n" 30 trun -n "$n" --no-prefix --bind-to none -- "${probe[@]}"
  ompi_binding "$n" "$cores"
  step "probe-ompi-bound-n$n" 30 mrun -np "$n" "${ompi_bind[@]}" --report-bindings "${probe[@]}"
done
for place in bound unbound; do
  # shellcheck disable=SC2046 # place_opts gives separate words
  TIDE_LOG_LEVEL=2 step "loglevel-tide-perf-$place-n8" 60 trun -n 8 $(place_opts $place) -- \
    tide-perf --op allreduce -b 1M -e 1M -n 5 -w 1
done

# --------------------------------------------------- (a) tide-overlap
if wanted a; then
  for n in "${overlap_ranks[@]}"; do
    for place in bound unbound; do
      for compute in busy sleep; do
        name=overlap-tide-$place-$compute-n$n
        # shellcheck disable=SC2046
        step "$name" 60 trun -n "$n" $(place_opts $place) -- tide-overlap --op allreduce \
          "${overlap_sweep[@]}" --compute "$compute" --json "$raw/$name.json"
      done
    done
  done
fi

# ---------------------- (h) where the progress thread sits: beside or apart
# tide-run's binding gives rank r the CPUs 2r and 2r+1 (compute on 2r,
# progress on 2r+1); unbound, libtide puts the callers on the low half
# and the progress threads on the high half.  The first run here hid
# far less bound at 8 ranks (256 KiB busy: 16 % against 98 %; pure time
# 462 against 183 us).  "apart": each rank masked to r and r+N by hand,
# so its progress thread runs on r+N (libtide's own choice: the mask's
# highest CPU).  If apart beats bound, neighbouring CPUs share something
# (a core's pipelines, a cache) that the topology lines above may not say.
# shellcheck disable=SC2016 # the rank's shell expands these
if wanted h; then
  apart=(sh -c 'exec taskset -c "$RANK,$((RANK + WORLD_SIZE))" "$@"' apart)
  for n in 8; do
    ((2 * n <= cpus)) || continue
    name=overlap-tide-apart-busy-n$n
    step "$name" 60 trun -n "$n" --bind-to none -- "${apart[@]}" tide-overlap --op allreduce \
      "${overlap_sweep[@]}" --compute busy --json "$raw/$name.json"
    for place in bound apart; do
      name=pure-tide-$place-n$n
      opts=()
      cmd=()
      [[ $place == apart ]] && opts=(--bind-to none) && cmd=("${apart[@]}")
      TIDE_TRANSPORT=shm step "$name" 60 trun -n "$n" "${opts[@]}" -- "${cmd[@]}" tide-perf \
        --op allreduce -b 256K -e 4M -f 4 -n 50 -w 5 --json "$raw/$name.json"
    done
    step "fsdp-apart-n$n" 120 trun -n "$n" --bind-to none -- "${apart[@]}" tide-fsdp-train \
      "${fsdp_args[@]}"
  done
fi

# ------------------------------------- (c) tide-perf against Open MPI's vader
if wanted c; then
  # versus N BAND OPS TAG [TIDE-PERF ARGS]: tide-perf for each of OPS over
  # BAND ("b e f iters warm") at N ranks, then mpi-coll-bench for them all
  # (its record named perf-ompiTAG-...), in round $round.
  versus() {
    local n=$1 ops=$3 tag=$4 b e f iters warm op name
    read -r b e f iters warm <<<"$2"
    local sweep=(-b "$b" -e "$e" -f "$f" -n "$iters" -w "$warm")
    for op in ${ops//,/ }; do
      name=perf-tide-$op-n$n-$b-$e-r$round
      TIDE_TRANSPORT=shm step "$name" 60 trun -n "$n" -- tide-perf --op "$op" "${sweep[@]}" \
        "${@:5}" -c 1 --json "$raw/$name.json"
    done
    name=perf-ompi$tag-n$n-$b-$e-r$round
    step "$name" 90 mrun -np "$n" "${ompi_bind[@]}" "$MB" --tool ompi-sm --op "$ops" \
      "${sweep[@]}" --json "$raw/$name.json"
  }
  # Band by band the two take turns, so a noisy moment hurts both alike,
  # ROUNDS times (default 2); the summary keeps each point's best round.
  rounds=${ROUNDS:-2}
  for ((round = 1; round <= rounds; round++)); do
    for n in "${perf_ranks[@]}"; do
      ompi_binding "$n" "$cores"
      for band in "${perf_bands[@]}"; do
        versus "$n" "$band" "$all_ops" ""
      done
      # Forced onto boards, which select.c gives the rooted ones on 2
      # ranks only; TIDE_BOARDS=0 below runs their message algorithms.
      [[ -z $extra_ops ]] || versus "$n" "${perf_bands[0]}" "$extra_ops" -extra -a board
    done
    # The small band again without boards (TIDE_BOARDS=0), where they run:
    # what they bring at 8 and 16 ranks; and with boards but without the
    # direct path of blocking calls (TIDE_BOARD_DIRECT=0): what it brings.
    read -r b e f iters warm <<<"${perf_bands[0]}"
    for n in "${perf_ranks[@]}"; do
      for op in ${all_ops//,/ }; do
        name=nodirect-tide-$op-n$n-$b-$e-r$round
        TIDE_BOARD_DIRECT=0 TIDE_TRANSPORT=shm step "$name" 60 trun -n "$n" -- tide-perf \
          --op "$op" -b "$b" -e "$e" -f "$f" -n "$iters" -w "$warm" -c 1 --json "$raw/$name.json"
      done
      ((n > 2)) || continue
      for op in ${all_ops//,/ } ${extra_ops//,/ }; do
        name=noboard-tide-$op-n$n-$b-$e-r$round
        TIDE_BOARDS=0 TIDE_TRANSPORT=shm step "$name" 60 trun -n "$n" -- tide-perf --op "$op" \
          -b "$b" -e "$e" -f "$f" -n "$iters" -w "$warm" -c 1 --json "$raw/$name.json"
      done
    done
  done
fi

# -------------------------- (f) issue 32's 4 KiB step: 2 ranks, 512 B-64 KiB
# A 2-rank 4 KiB allreduce took longer than a 32 KiB one on the 16-core
# host (8.2 against 7.9 us; unbound 9.7 against 8.5), and not on the
# 2-core machine (3.2-3.4 against 9.3-9.8): every size in between, so
# the step shows where it starts, bound and unbound, and over TCP.
if wanted f; then
  step_iters=2000
  ((QUICK)) && step_iters=50
  for how in shm-bound shm-unbound tcp-bound; do
    name=step4k-$how
    opts=()
    [[ $how == *unbound ]] && opts=(--bind-to none)
    TIDE_TRANSPORT=${how%-*} step "$name" 60 trun -n 2 "${opts[@]}" -- tide-perf --op allreduce \
      -b 512 -e 64K -f 2 -n "$step_iters" -w 200 --json "$raw/$name.json"
  done
fi

# ------------------------------------------------------ (d) FSDP training
if wanted d; then
  # Bound and unbound with BLAS compute; then bound with sleeping compute
  # (no memory traffic of its own: what the communication alone leaves
  # exposed) and with prefetch 2.
  for n in "${fsdp_ranks[@]}"; do
    for how in bound unbound bound-sleep bound-prefetch2; do
      extra=()
      [[ $how == *sleep ]] && extra=(--compute sleep)
      [[ $how == *prefetch2 ]] && extra=(--prefetch 2)
      # shellcheck disable=SC2046
      step "fsdp-$how-n$n" 120 trun -n "$n" $(place_opts "${how%%-*}") -- tide-fsdp-train \
        "${fsdp_args[@]}" "${extra[@]}"
    done
  done
fi

# --------------------------------------------------- (g) torch 2 contract
if wanted g; then
  # The rank programs find rankcases.py beside them; tide's package comes
  # from on-device.sh's PYTHONPATH.
  torch_path=$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/python" && pwd)
  for program in rank_c10d rank_fsdp rank_torch; do
    for backend in tide gloo; do
      [[ $program == rank_torch && $backend == gloo ]] && continue # tide's own API
      args=("$backend")
      [[ $program == rank_torch ]] && args=()
      PYTHONPATH=$torch_path:${PYTHONPATH:-} step "torch-$program-$backend" 90 trun -n 2 -- \
        "$PY" "$torch_path/$program.py" "${args[@]}"
    done
  done
fi

# ------------------------------- (p) single copies above 1 MiB a message
# TIDE_SHM_CMA=auto pulls a message below 1 MiB only (SHM_CMA_AUTO_MAX):
# the rings beat a pulled 2- and 8-rank reduce from 1 MiB on this host
# (2026-11-26), while on the 2-core VM (2026-11-29) uncapped pulls won
# 1.5-5x at 1-8 MiB for reduce, all-gather and all-to-all.  Both ways,
# side by side, 2 and 8 ranks, 1 to 16 MiB.
if wanted p; then
  pull_iters=20
  ((QUICK)) && pull_iters=2
  for n in 2 8; do
    for op in reduce allgather alltoall; do
      side_by_side TIDE_SHM_CMA "auto 1" pull "$n" "$op" -b 1M -e 16M -f 4 -n "$pull_iters" -w 3
    done
  done
fi

# ------------------------------------------------- (q) streaming stores
# A board's root (broadcast, scatter) writes its part of 16 KiB or more
# with streaming stores on any number of ranks, and a pair alone on its
# host its ring pieces of 16 KiB or more (collectives/board.c,
# around_caches; transports/shm/shm_peer.h): measured on the 2-core VM
# only.  TIDE_STREAMING_STORES=0 against the default, side by side.
if wanted q; then
  nt_iters=200
  ((QUICK)) && nt_iters=5
  for n in 2 8 16; do
    for op in broadcast scatter; do
      side_by_side TIDE_STREAMING_STORES "0 1" nt "$n" "$op" -b 16K -e 64K -f 2 -n "$nt_iters" -w 20
    done
  done
  for op in reduce alltoall; do
    side_by_side TIDE_STREAMING_STORES "0 1" nt 2 "$op" -b 1M -e 4M -f 2 -n 20 -w 3
  done
fi

# ------------------------------------------------------- (b) Gloo's overlap
if wanted b; then
  for n in "${gloo_ranks[@]}"; do
    for place in bound unbound; do
      for compute in busy sleep; do
        name=overlap-gloo-$place-$compute-n$n
        # shellcheck disable=SC2046
        step "$name" 120 trun -n "$n" $(place_opts $place) -- "$PY" "$PYTOOLS/gloo_bench.py" \
          --overlap --compute "$compute" "${overlap_sweep[@]}" -n "${GLOO_ITERS:-30}" \
          --json "$raw/$name.json"
      done
    done
  done
fi

# ------------------------------------------ (r) repeats of the noisy ones

for ((k = 2; k <= ${REPEATS:-1}; k++)); do
  for n in "${overlap_ranks[@]}"; do
    name=repeat$k-overlap-tide-bound-busy-n$n
    step "$name" 90 trun -n "$n" -- tide-overlap --op allreduce "${overlap_sweep[@]}" \
      --compute busy --interleave --json "$raw/$name.json"
  done
  for n in "${fsdp_ranks[@]}"; do
    step "repeat$k-fsdp-bound-n$n" 120 trun -n "$n" -- tide-fsdp-train "${fsdp_args[@]}"
  done
done

# ---------------------------------------------------------------- summary

echo "seconds $SECONDS" >>"$OUT/facts.txt"
"$PY" - "$OUT" >"$OUT/summary.txt" 2>"$logs/summary.log" <<'PYEOF'
"""Reads OUT's raw/*.json and logs, prints the tables of summary.txt."""
import glob
import json
import os
import re
import sys

out = sys.argv[1]


def records(name):
    try:
        with open(os.path.join(out, "raw", name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return []


def log_lines(name):
    try:
        with open(os.path.join(out, "log", name + ".log"), errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def size_text(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def num(v, fmt="{:.1f}"):
    return "n/a" if v is None else fmt.format(v)


def table(head, body):
    if not body:
        return "(no results)"
    widths = [max(len(c) for c in col) for col in zip(head, *body)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
    return "\n".join([line(head)] + [line(r) for r in body])


def worlds(pattern):
    got = set()
    for path in glob.glob(os.path.join(out, "raw", pattern)) + \
            glob.glob(os.path.join(out, "log", pattern.replace(".json", ".log"))):
        m = re.search(r"-n(\d+)[-.]", os.path.basename(path))
        if m:
            got.add(int(m.group(1)))
    return sorted(got)


def section(title, body):
    print(f"\n== {title} ==\n{body}")


with open(os.path.join(out, "facts.txt")) as f:
    print("device_compare.sh on this host\n" + f.read().rstrip())
with open(os.path.join(out, "failed.txt")) as f:
    failed = f.read().strip()
print("failed or skipped steps:", "none" if not failed else "\n  " + failed.replace("\n", "\n  "))

# (e) placement
lines = []
for n in sorted(set(worlds("probe-*.json"))):
    for launch in ("tide-bound", "tide-unbound", "ompi-bound"):
        ranks = []
        for line in log_lines(f"probe-{launch}-n{n}"):
            m = re.match(r"^(\d+) (\S+)(?: (\S+))?\s*$", line)
            if m:
                ranks.append((int(m.group(1)), m.group(2), m.group(3)))
        ranks.sort()
        if not ranks:
            text = "no answer (see log/probe-...)"
        elif len({(c, p) for _, c, p in ranks}) == 1:
            text = f"every rank {ranks[0][1]}" + (f"/{ranks[0][2]}" if ranks[0][2] else "")
        else:
            text = ", ".join(f"r{r} {c}" + (f"/{p}" if p else "") for r, c, p in ranks)
        lines.append(f"{launch:12} {n:2} ranks: {text}")
section("(e) the CPUs each rank got (cpus/progress CPUs)", "\n".join(lines))
placement = []
for place in ("bound", "unbound"):
    said = {}  # each rank's line once, with the ranks that said it
    for line in log_lines(f"loglevel-tide-perf-{place}-n8"):
        m = re.match(r"^\[(\d+)\] tide\[rank \d+\] (.*)$", line)
        rank, text = (int(m.group(1)), m.group(2)) if m else (None, line)
        if re.search(r"tide-run:|progress|placement|CPU|core", text) and not text.startswith("#"):
            text = re.sub(r"\bCPUs? [\d,-]+", "CPU N", text) if rank is not None else text
            said.setdefault(text, []).append(rank)
    got = [(f"ranks {','.join(str(r) for r in sorted(rs))}: " if rs[0] is not None else "") + t
           for t, rs in said.items()]
    placement.append(f"-- {place} (8 ranks):\n" + "\n".join(got[:24] or ["(none)"]))
section("(e) placement lines at TIDE_LOG_LEVEL=2 (a rank's own CPUs shown as N)",
        "\n".join(placement))

# (a) and (b) overlap
def worst_rank(r):
    by = (r or {}).get("t_exposed_median_by_rank_us")
    if not by:
        return "n/a"
    k = max(range(len(by)), key=lambda i: by[i])
    return f"r{k} {by[k]:.1f}"


body = []
for system in ("tide", "gloo"):
    for compute in ("busy", "sleep"):
        for n in worlds(f"overlap-{system}-*-{compute}-n*.json"):
            got = {p: {r["bytes"]: r for r in records(f"overlap-{system}-{p}-{compute}-n{n}.json")}
                   for p in ("bound", "unbound")}
            for nbytes in sorted(set(got["bound"]) | set(got["unbound"])):
                b, u = got["bound"].get(nbytes), got["unbound"].get(nbytes)
                body.append([system, compute, str(n), size_text(nbytes),
                             num(b and b["overlap_pct"]), num(b and b.get("overlap_median_pct")),
                             num(u and u["overlap_pct"]), num(u and u.get("overlap_median_pct")),
                             num(b and b["t_pure_us"], "{:.0f}"),
                             num(u and u["t_pure_us"], "{:.0f}"), worst_rank(b)])
section("(a, b) overlap of a nonblocking allreduce with compute, % hidden (OSU method: means; "
        "med: from each rank's medians over the calls; worst: the rank whose median call "
        "exposed most, bound, and its µs)",
        table(["system", "compute", "ranks", "size", "bound %", "bound med %", "unbound %",
               "unbound med %", "t_pure bound µs", "t_pure unbound µs", "worst bound"], body))

# (c) tide over shared memory against Open MPI's vader, both bound
tide, ompi, noboard, nodirect = {}, {}, {}, {}
for path in glob.glob(os.path.join(out, "raw", "perf-*.json")) + \
        glob.glob(os.path.join(out, "raw", "no*-*.json")):
    for r in records(os.path.basename(path)):
        if r.get("inplace") or "time_us" not in r or not r.get("bytes"):
            continue
        key = (r["op"], r["ranks"], r["bytes"])
        base = os.path.basename(path)
        into = noboard if base.startswith("noboard-") else \
            nodirect if base.startswith("nodirect-") else \
            ompi if r["tool"] == "ompi-sm" else tide
        if key not in into or r["time_us"] < into[key]["time_us"]:
            into[key] = r  # each point's best round
body = []
ops = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "reduce", "gather",
       "scatter")
for key in sorted(set(tide) | set(ompi),
                  key=lambda k: (ops.index(k[0]) if k[0] in ops else 9,) + k[1:]):
    t, o = tide.get(key), ompi.get(key)
    body.append([key[0], str(key[1]), size_text(key[2]), num(t and t["time_us"], "{:.2f}"),
                 num(o and o["time_us"], "{:.2f}"),
                 num(o["time_us"] / t["time_us"] if t and o else None, "{:.2f}"),
                 num(t and t["busbw_gbps"], "{:.2f}"), num(o and o["busbw_gbps"], "{:.2f}"),
                 (t or {}).get("algo", "n/a"),
                 num(noboard[key]["time_us"] if key in noboard else None, "{:.2f}"),
                 num(nodirect[key]["time_us"] if key in nodirect else None, "{:.2f}")])
section("(c) tide shm (tide-run) against Open MPI vader (mpirun), both bound, float32 sum, "
        "out of place: µs per call, each point's best of the rounds; "
        "x = Open MPI time / tide time",
        table(["op", "ranks", "size", "tide µs", "Open MPI µs", "x Open MPI", "tide busbw GB/s",
               "Open MPI busbw GB/s", "tide algo", "TIDE_BOARDS=0 µs",
               "TIDE_BOARD_DIRECT=0 µs"], body))

# (h) beside or apart
body = []
for place in ("bound", "apart", "unbound"):
    for r in records(f"overlap-tide-{place}-busy-n8.json"):
        body.append(["overlap busy %", place, size_text(r["bytes"]), num(r["overlap_pct"]),
                     num(r["t_pure_us"], "{:.0f}")])
for place in ("bound", "apart"):
    for r in records(f"pure-tide-{place}-n8.json"):
        if not r.get("inplace"):
            body.append(["tide-perf allreduce µs", place, size_text(r["bytes"]),
                         num(r["time_us"], "{:.1f}"), ""])
section("(h) 8 ranks: progress thread beside the caller (bound: CPUs 2r, 2r+1), apart "
        "(r, r+8) or unbound", table(["what", "placement", "size", "value", "t_pure µs"], body))

# (d) FSDP: the headline lines, not the per-step ones
lines = []
for n in worlds("fsdp-*.json"):
    for place in ("bound", "unbound", "bound-sleep", "bound-prefetch2", "apart"):
        got = [re.sub(r"^\[0\] ", "", l) for l in log_lines(f"fsdp-{place}-n{n}")
               if l.startswith("[0] ") and not re.match(r"^\[0\] step +\d+ ", l)]
        lines.append(f"-- {place}, {n} ranks:\n" + "\n".join(got or ["(no output)"]))
section("(d) tide-fsdp-train", "\n".join(lines))
# (r) the repeats, beside (a)'s and (d)'s first runs
body, lines = [], []
for path in sorted(glob.glob(os.path.join(out, "raw", "repeat*-overlap-*.json"))):
    m = re.match(r"repeat(\d+)-overlap-tide-bound-busy-n(\d+)\.json", os.path.basename(path))
    for r in records(os.path.basename(path)) if m else []:
        body.append([m.group(2), m.group(1), size_text(r["bytes"]), num(r["overlap_pct"]),
                     num(r.get("overlap_median_pct")), num(r.get("overlap_alt_pct")),
                     num(r["t_pure_us"], "{:.0f}")])
for path in sorted(glob.glob(os.path.join(out, "log", "repeat*-fsdp-*.log"))):
    name = os.path.basename(path)[:-4]
    got = [re.sub(r"^\[0\] ", "", l) for l in log_lines(name)
           if "hidden behind" in l or "on the critical path" in l]
    lines.append(f"{name}: " + ("\n   ".join(got) if got else "(no headline)"))
section("(r) repeats: bound busy overlap (run k of REPEATS) and FSDP bound",
        table(["ranks", "run", "size", "bound %", "bound med %", "in turn med %", "t_pure µs"],
              body) + "\n" +
        "\n".join(lines))
# (s) steal: each virtual CPU's time taken by the VM's host during the
# bound busy overlap sweeps, beside each rank's median exposure at each
# size (tide-run binds rank r to CPUs 2r and 2r+1)
def cpu_ticks(path):
    got = {}
    try:
        with open(path) as f:
            for l in f:
                w = l.split()
                if re.fullmatch(r"cpu\d+", w[0]):
                    got[int(w[0][3:])] = [int(v) for v in w[1:]]
    except OSError:
        pass
    return got


lines = []
for path in sorted(glob.glob(os.path.join(out, "raw", "*overlap-tide-bound-busy-n*.json"))):
    name = os.path.basename(path)[:-5]
    a, b = (cpu_ticks(os.path.join(out, "log", f"{name}.stat{k}")) for k in (0, 1))
    # /proc/stat: user nice system idle iowait irq softirq steal ...
    steal = {c: b[c][7] - a[c][7] for c in a if c in b and len(a[c]) > 7}
    stolen = ", ".join(f"{c}:{t}" for c, t in sorted(steal.items()) if t) or "none"
    lines.append(f"{name}: stolen ticks (1/100 s) by CPU: {stolen}")
    for r in records(name + ".json"):
        by = r.get("t_exposed_median_by_rank_us") or []
        lines.append(f"   {size_text(r['bytes']):>7} med {num(r.get('overlap_median_pct'))} %, "
                     "each rank's median exposed µs: " + " ".join(f"{x:.0f}" for x in by))
section("(s) time stolen from each CPU during the bound busy overlap sweeps, and each rank's "
        "median exposure (all alike: the operation ran slow; one apart: that rank fell behind)",
        "\n".join(lines) or "(no sweeps)")
# (f) the 4 KiB step: time by size, one column per way of running
cols = ("shm-bound", "shm-unbound", "tcp-bound")
by = {c: {r["bytes"]: r["time_us"] for r in records(f"step4k-{c}.json") if not r.get("inplace")}
      for c in cols}
sizes = sorted(set().union(*(d.keys() for d in by.values())))
section("(f) 2-rank allreduce, 512 B to 64 KiB (issue 32's 4 KiB step): µs, out of place",
        table(["size"] + [f"{c} µs" for c in cols],
              [[size_text(b)] + [num(by[c].get(b), "{:.2f}") for c in cols] for b in sizes]))
# (p) single copies above 1 MiB: auto against TIDE_SHM_CMA=1
body = []
for n in (2, 8):
    for op in ("reduce", "allgather", "alltoall"):
        by = {cma: {r["bytes"]: r["time_us"] for r in records(f"pull-{op}-n{n}-{cma}.json")
                    if not r.get("inplace")} for cma in ("auto", "1")}
        for b in sorted(set(by["auto"]) | set(by["1"])):
            a, one = by["auto"].get(b), by["1"].get(b)
            body.append([op, str(n), size_text(b), num(a), num(one),
                         num(a / one if a and one else None, "{:.2f}")])
section("(p) single copies from 1 MiB a message: TIDE_SHM_CMA=auto (rings from 1 MiB) "
        "against 1 (pulled at every size), µs, out of place",
        table(["op", "ranks", "size", "auto µs", "cma=1 µs", "auto / cma=1"], body))
# (q) streaming stores: off against on
body = []
for op, ranks in (("broadcast", (2, 8, 16)), ("scatter", (2, 8, 16)), ("reduce", (2,)),
                  ("alltoall", (2,))):
    for n in ranks:
        by = {nt: {r["bytes"]: r["time_us"] for r in records(f"nt-{op}-n{n}-{nt}.json")
                   if not r.get("inplace")} for nt in (0, 1)}
        for b in sorted(set(by[0]) | set(by[1])):
            off, on = by[0].get(b), by[1].get(b)
            body.append([op, str(n), size_text(b), num(off, "{:.2f}"), num(on, "{:.2f}"),
                         num(off / on if off and on else None, "{:.2f}")])
section("(q) streaming stores: TIDE_STREAMING_STORES=0 against the default, µs, out of place",
        table(["op", "ranks", "size", "off µs", "on µs", "off / on"], body))
# (g) torch 2: each program's verdicts on rank 0, and a failure's account
lines = []
for path in sorted(glob.glob(os.path.join(out, "log", "torch-*.log"))):
    name = os.path.basename(path)[:-4]
    got = log_lines(name)
    said = [re.sub(r"^\[0\] ", "", l) for l in got
            if re.match(r"^\[0\] (ok|FAIL|skip|torch) ", l)]
    lines.append(f"-- {name}:\n" + "\n".join(said or ["(no verdicts)"]))
    if any(l.startswith("FAIL") for l in said) or not said:
        lines.append("   its last lines:\n" + "\n".join("   " + l for l in got[-25:]))
section("(g) torch there: the ProcessGroup contract, FSDP, DDP (2 ranks)", "\n".join(lines))
print("\nraw records in raw/, every step's output in log/")
PYEOF
rc=$?
((rc == 0)) || echo "device_compare: the summary failed ($rc); see $logs/summary.log" |
  tee -a "$OUT/summary.txt"
tar czf "$OUT/results.tar.gz" -C "$OUT" raw log facts.txt failed.txt && rm -rf "$raw" "$logs"
echo "device_compare: $SECONDS s; $OUT/summary.txt"
