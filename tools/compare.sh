#!/usr/bin/env bash
# compare.sh - tide beside Open MPI 4.1 (over TCP and over its shared-memory
# transport) and Gloo (torch.distributed), measured in one run on this
# machine: on a shared machine only a ratio taken at the same moment means
# anything.
#
#   tools/compare.sh [--quick] [--ranks LIST] [--placement bound|unbound]
#                    [--out DIR] [--build DIR]
#
#   --ranks LIST   comma-separated world sizes, each 2 to 64, at most 8 of
#                  them (default 2,4), e.g. --ranks 2,8,16; the anchors
#                  below are 2-rank runs and are left out without a 2
#   --placement bound|unbound
#                  where every system's ranks run (default bound); the
#                  choice, the launchers' options and the CPUs each rank
#                  got go into DIR/raw/run.json and the report's header.
#                  bound: tide and Gloo through tide-run's default
#                  (--bind-to auto: with C cores for n ranks, two cores a
#                  rank, its compute's and its progress thread's, when
#                  C >= 2n; one when C >= n; unbound when C < n; see
#                  tools/launcher/bind.h), Open MPI alike: --map-by slot:PE=2
#                  --bind-to core when C >= 2n, --bind-to core when
#                  C >= n, else --bind-to none (the log says so).  C
#                  counts the physical cores we may run on, as tide-run
#                  and Open MPI do (not nproc's hardware threads).
#                  unbound: tide-run --bind-to none, mpirun --bind-to none.
#
# Measures tide three times: over TCP on its io_uring reactor and on epoll
# (TIDE_REACTOR, the reactor tide falls back to in containers), beside
# Open MPI over TCP, and over shared memory (TIDE_TRANSPORT=shm, what
# ranks on one host use by default) beside Open MPI's vader; then its
# peers:
# allreduce, allgather, reduce_scatter and broadcast (float32 sum,
# 8 B to 64 MiB by factors of 4, at each world size of --ranks; the
# 2-rank allreduce also at the anchor sizes of issue 3, 64 KiB, 1 MiB and
# 16 MiB, which those factors step over) with tide-perf and its
# twins tools/mpi_coll_bench.c and tools/gloo_bench.py; tide's
# torch.distributed backend beside Gloo (gloo_bench.py --backend tide,
# allreduce) and DDP training's step time on each (tools/ddp_demo.py);
# the overlap of a
# nonblocking allreduce with busy and sleeping compute (tide-overlap, the
# same method for MPI_Iallreduce and Gloo's async all_reduce); and the raw
# loopback limits (tools/bench/loopback_limits.c).  Then tools/compare_report.py
# prints the side-by-side tables and writes DIR/compare.json, table.md and
# compare.png (DIR defaults to BUILD/compare, BUILD to build).  About 14
# minutes on 2 cores with --ranks 2,4, longer with more or larger worlds;
# --quick runs a few sizes only, to check the pipeline.
#
# Installs what is missing with apt-get when run as root (Open MPI,
# python3-torch, python3-matplotlib, and tide's own build dependencies).
#
# Fairness: the systems take turns band by band (a band is a range of
# sizes with its own iteration count, fewer for large sizes), so a noisy
# neighbour hurts all of them alike, and the whole schedule runs twice.  Each system runs with its defaults,
# except that Open MPI is pinned to pml ob1 (its choice here anyway) so
# that the btl named is the one used: where UCX finds a device, pml ucx
# would take over and bypass it; and every system runs under the same
# --placement.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
out=
build=build
ranks_list=2,4
placement=bound
while (($#)); do
  case $1 in
    --quick) quick=1; shift ;;
    --ranks) ranks_list=${2:?--ranks needs a list, e.g. 2,8,16}; shift 2 ;;
    --placement) placement=${2:?--placement needs bound or unbound}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

out=${out:-$build/compare}

case $placement in
  bound|unbound) ;;
  *) echo "compare: --placement is bound or unbound, not '$placement'" >&2; exit 2 ;;
esac
# The world sizes, in the order given, once each.  loopback-limits
# measures at most 8 rings of at most 64 processes.
if [[ ! $ranks_list =~ ^[0-9]+(,[0-9]+)*$ ]]; then
  echo "compare: --ranks takes comma-separated numbers, e.g. 2,8,16, not '$ranks_list'" >&2
  exit 2
fi
worlds=()
for n in ${ranks_list//,/ }; do
  n=$((10#$n))
  if ((n < 2 || n > 64)); then
    echo "compare: --ranks: $n ranks is outside 2 to 64" >&2
    exit 2
  fi
  [[ " ${worlds[*]} " == *" $n "* ]] || worlds+=("$n")
done
if ((${#worlds[@]} > 8)); then
  echo "compare: --ranks: at most 8 world sizes, not ${#worlds[@]}" >&2
  exit 2
fi
has_two=0 # the anchors are 2-rank runs
[[ " ${worlds[*]} " == *" 2 "* ]] && has_two=1

# Debian's python3, which has python3-torch (a pyenv or venv python may not).
py=/usr/bin/python3

# ------------------------------------------------------------------ setup

tools/packages.sh compare openmpi-bin libopenmpi-dev python3-torch python3-matplotlib \
  python3-numpy python3-sklearn

tools/setup.sh "$build"
mpicc -std=c11 -D_GNU_SOURCE -O2 tools/mpi_coll_bench.c -o "$build/tools/mpi-coll-bench" -lm

raw=$out/raw
logs=$out/log
rm -rf "$raw" "$logs"
mkdir -p "$raw" "$logs"

# ---------------------------------------------------------------- schedule

# Bands: "first last factor iterations warmup".  Iterations shrink with
# size so that every band costs about the same and the run stays short,
# but every size is timed for milliseconds, not a fraction of one
# scheduler slice: with 4 ranks on 2 cores a single preemption then
# decides the figure (200 calls of an 8-byte broadcast, ~2 ms, swung
# 0.6x-1.3x between runs; 2000 calls now, ~20 ms).
# The whole schedule runs twice (passes) and the report keeps each
# system's faster pass: a neighbour's burst only ever slows a run down.
# The world sizes (worlds) come from --ranks.
if ((quick)); then
  passes=1
  bands=("8 8K 32 20 3" "1M 1M 2 5 1")
  anchor_bands=("64K 1M 16 20 3")
  overlap_band="1M 1M 2 5 1"
  loopback=(--mib 16 --reps 3 --iters 3000)
  ddp_epochs=2
else
  passes=2
  bands=("8 2K 4 2000 200" "8K 32K 4 500 50" "128K 512K 4 100 10" "2M 2M 2 30 3"
         "8M 32M 4 10 2" "64M 64M 2 5 1")
  anchor_bands=("64K 1M 16 200 20" "16M 16M 2 10 2")
  overlap_band="64K 16M 4 15 3"
  loopback=(--mib 64 --reps 5 --iters 20000)
  ddp_epochs=8
fi
all_ops=(allreduce allgather reduce_scatter broadcast)
ops=("${all_ops[@]}") # what bench runs

# ---------------------------------------------------------------- placement

# shellcheck source=tools/placement.sh
source tools/placement.sh
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
cores=$(count_cores)
((cores > 0)) || cores=$cpus

# tide's and Gloo's ranks (and torch-tide's, DDP's) start under tide-run,
# which places them itself (tools/launcher/bind.h); bound is its default.
tide_bind=()
[[ $placement == unbound ]] && tide_bind=(--bind-to none)
tide_run=("$build/tools/tide-run" "${tide_bind[@]}")
tide_run_opts=${tide_bind[*]:-(default --bind-to auto)}


echo "compare: placement $placement, $cores cores ($cpus hardware threads):" \
  "tide-run $tide_run_opts"
for n in "${worlds[@]}"; do
  ompi_binding "$n" "$cores" "$placement"
  echo "compare: $n ranks: mpirun ${ompi_bind[*]}"
  if [[ $placement == bound ]] && ((cores < n)); then
    echo "compare: $n ranks on $cores cores: too few to bind; Open MPI runs --bind-to none," \
      "and tide-run leaves them unbound too"
  fi
done

# The Python package from this tree, on this build's library.
tide_py=(env "PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
  "TIDE_LIBRARY=$(cd "$build" && pwd)/libtide.so")
mpirun_base=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1)
ompi_tcp=(--mca btl tcp,self --mca btl_tcp_if_include 127.0.0.1/8)
ompi_sm=(--mca btl vader,self)

failed=()
# step NAME COMMAND...: runs it with a deadline, output to the log; a
# failure is reported and the run goes on, so one bad system does not
# cost the others' figures.
step() {
  local name=$1
  shift
  printf '[%4ds] %s\n' "$SECONDS" "$name"
  if ! timeout 300 "$@" >"$logs/$name.log" 2>&1; then
    echo "compare: $name failed; see $logs/$name.log" >&2
    failed+=("$name")
  fi
}

load1() { cut -d' ' -f1 /proc/loadavg; }

# rank_cpus LAUNCH...: the CPUs each rank that LAUNCH starts gets (and the
# progress CPUs tide-run tells it), as a JSON array in rank order; [] if
# the probe fails.  Milliseconds for tide-run, a second for mpirun.
rank_cpus() {
  # shellcheck disable=SC2016 # the ranks' shell expands these
  { timeout 60 "$@" sh -c 'echo "${OMPI_COMM_WORLD_RANK:-$RANK}" \
      "$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)" \
      "${TIDE_PROGRESS_CPUS:-}"' 2>/dev/null || true; } | sort -n |
    awk 'BEGIN { printf "[" }
         NF >= 2 { printf "%s{\"rank\": %d, \"cpus\": \"%s\"", n++ ? ", " : "", $1, $2
                   if (NF > 2) printf ", \"progress\": \"%s\"", $3
                   printf "}" }
         END { print "]" }'
}

# What each launcher was told, and what each rank got, per world size.
mpirun_opts='' masks=''
for n in "${worlds[@]}"; do
  ompi_binding "$n" "$cores" "$placement"
  mpirun_opts+="${mpirun_opts:+, }\"$n\": \"${ompi_bind[*]}\""
  masks+="${masks:+,
   }\"$n\": {\"tide-run\": $(rank_cpus "${tide_run[@]}" -n "$n" --no-prefix --),
         \"mpirun\": $(rank_cpus "${mpirun_base[@]}" "${ompi_bind[@]}" -np "$n")}"
done
machine="$cores cores"
((cpus == cores)) || machine+=" ($cpus hardware threads)"

cat >"$raw/run.json" <<EOF
{"date": "$(date -u +%F)", "machine": "$machine, Linux $(uname -r), loopback TCP",
 "ompi_version": "$(mpirun --version 2>/dev/null | sed -n 's/.*Open MPI) //p' | head -1)",
 "torch_version": "$($py -c 'import torch; print(torch.__version__)')",
 "quick": $([[ $quick == 1 ]] && echo true || echo false), "load1_before": $(load1),
 "ranks": [$(IFS=,; echo "${worlds[*]}")], "placement": "$placement",
 "launch": {"tide-run": {"systems": ["tide", "tide-epoll", "tide-shm", "gloo", "torch-tide", "ddp"],
                         "options": "$tide_run_opts"},
            "mpirun": {"systems": ["ompi-tcp", "ompi-sm"], "options": {$mpirun_opts}}},
 "rank_cpus": {$masks}}
EOF

# ------------------------------------------------------------------- runs

# tide's systems differ in their reactor and transport; the records say
# which ran.  Over TCP like for like: Gloo and Open MPI authenticate
# nothing after connecting, so tide's frames go without their MACs
# (TIDE_WIRE_AUTH=off); what the MACs cost is tools/hosts_bench.sh's
# and tools/device_wire_auth.sh's to measure (README, "Security").
tide_env() {
  case $1 in
    tide) echo TIDE_REACTOR=io_uring TIDE_TRANSPORT=tcp TIDE_WIRE_AUTH=off ;;
    tide-epoll) echo TIDE_REACTOR=epoll TIDE_TRANSPORT=tcp TIDE_WIRE_AUTH=off ;;
    tide-shm) echo TIDE_REACTOR=io_uring TIDE_TRANSPORT=shm ;;
  esac
}

# One system on one band of sizes: SYSTEM RANKS PASS, with sweep=(...) set.
# Open MPI and Gloo take all the collectives in one launch; tide-perf
# takes one per launch (its startup is milliseconds).
bench() {
  local sys=$1 n=$2 tag="p$3-n$2-$4"
  local oplist
  oplist=$(IFS=,; echo "${ops[*]}")
  case $sys in
    tide|tide-epoll|tide-shm)
      for op in "${ops[@]}"; do
        # shellcheck disable=SC2046 # tide_env's words are separate variables
        step "$sys-$op-$tag" env $(tide_env "$sys") "${tide_run[@]}" -n "$n" -- \
          "$build/tools/tide-perf" --op "$op" "${sweep[@]}" -c 1 --json "$raw/$sys-$op-$tag.json"
      done ;;
    ompi-tcp|ompi-sm)
      local -n mca=ompi_${sys#ompi-}
      ompi_binding "$n" "$cores" "$placement"
      step "$sys-$tag" "${mpirun_base[@]}" "${mca[@]}" "${ompi_bind[@]}" -np "$n" \
        "$build/tools/mpi-coll-bench" --tool "$sys" --op "$oplist" "${sweep[@]}" \
        --json "$raw/$sys-$tag.json" ;;
    gloo)
      step "gloo-$tag" "${tide_run[@]}" -n "$n" -- "$py" tools/gloo_bench.py --op "$oplist" \
        "${sweep[@]}" --json "$raw/gloo-$tag.json" ;;
    torch-tide) # tide's torch.distributed backend, beside Gloo's all_reduce
      step "torch-tide-$tag" "${tide_py[@]}" "${tide_run[@]}" -n "$n" -- "$py" \
        tools/gloo_bench.py --backend tide --op allreduce "${sweep[@]}" \
        --json "$raw/torch-tide-$tag.json" ;;
  esac
}

# The overlap test of one system: SYSTEM RANKS PASS COMPUTE.
overlap() {
  local sys=$1 n=$2 compute=$4 tag="p$3-overlap-$4-n$2"
  case $sys in
    tide|tide-epoll|tide-shm)
      # shellcheck disable=SC2046
      step "$sys-$tag" env $(tide_env "$sys") "${tide_run[@]}" -n "$n" -- \
        "$build/tools/tide-overlap" --op allreduce "${sweep[@]}" --compute "$compute" \
        --json "$raw/$sys-$tag.json" ;;
    ompi-tcp|ompi-sm)
      local -n mca=ompi_${sys#ompi-}
      ompi_binding "$n" "$cores" "$placement"
      step "$sys-$tag" "${mpirun_base[@]}" "${mca[@]}" "${ompi_bind[@]}" -np "$n" \
        "$build/tools/mpi-coll-bench" --tool "$sys" --overlap --compute "$compute" "${sweep[@]}" \
        --json "$raw/$sys-$tag.json" ;;
    gloo)
      step "gloo-$tag" "${tide_run[@]}" -n "$n" -- "$py" tools/gloo_bench.py --overlap \
        --compute "$compute" "${sweep[@]}" --json "$raw/gloo-$tag.json" ;;
  esac
}

systems=(tide tide-epoll tide-shm ompi-tcp ompi-sm gloo)
rings=()
for n in "${worlds[@]}"; do
  rings+=(--ring "$n")
done
for pass in $(seq "$passes"); do
  step "loopback-limits-p$pass" "$build/tools/loopback-limits" "${loopback[@]}" "${rings[@]}" \
    --json "$raw/loopback-p$pass.json"
  for n in "${worlds[@]}"; do
    for band in "${bands[@]}"; do
      read -r b e f iters warm <<<"$band"
      sweep=(-b "$b" -e "$e" -f "$f" -n "$iters" -w "$warm")
      for sys in "${systems[@]}" torch-tide; do
        bench "$sys" "$n" "$pass" "$b-$e"
      done
    done
  done
  ops=(allreduce)
  for band in "${anchor_bands[@]}"; do
    ((has_two)) || break
    read -r b e f iters warm <<<"$band"
    sweep=(-b "$b" -e "$e" -f "$f" -n "$iters" -w "$warm")
    for sys in "${systems[@]}"; do
      bench "$sys" 2 "$pass" "anchor-$b-$e"
    done
  done
  ops=("${all_ops[@]}")
  read -r b e f iters warm <<<"$overlap_band"
  sweep=(-b "$b" -e "$e" -f "$f" -n "$iters" -w "$warm")
  for n in "${worlds[@]}"; do
    for compute in busy sleep; do
      for sys in "${systems[@]}"; do
        overlap "$sys" "$n" "$pass" "$compute"
      done
    done
  done
  # DDP training step time (tools/ddp_demo.py), the backends alternating.
  for n in "${worlds[@]}"; do
    for backend in gloo tide; do
      step "ddp-$backend-p$pass-n$n" "${tide_py[@]}" "${tide_run[@]}" -n "$n" -- "$py" \
        tools/ddp_demo.py --backend "$backend" --epochs "$ddp_epochs" \
        --json "$raw/ddp-$backend-p$pass-n$n.json"
    done
  done
done

# A step that failed may have left a partial file; the report reads only
# whole ones.
for f in "$raw"/*.json; do
  $py -c 'import json, sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null || rm -f "$f"
done
printf '{"seconds": %d, "load1_after": %s}\n' "$SECONDS" "$(load1)" >"$raw/run-end.json"

echo
$py tools/compare_report.py "$out"
if ((${#failed[@]})); then
  echo "compare: failed steps: ${failed[*]}" >&2
  exit 1
fi
