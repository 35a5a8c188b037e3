#!/usr/bin/env bash
# compare_allreduce.sh - tide's allreduce against Open MPI over TCP, side
# by side in one run (the only kind of figure that means anything on a
# shared machine): 2 and 4 ranks, 8 B to 32 MiB, each system run twice,
# interleaved.  Prints one table of microseconds per call and Open MPI's
# time divided by tide's.  Needs openmpi-bin and libopenmpi-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v mpicc >/dev/null; then
    echo "compare_allreduce: needs Open MPI: apt-get install -y openmpi-bin libopenmpi-dev" >&2
    exit 1
fi
[ -x build/tools/tide-allreduce-sweep ] || tools/setup.sh build
ninja -C build >/dev/null
mpicc -O2 tools/mpi_allreduce_sweep.c -o build/tools/mpi-allreduce-sweep
out=$(mktemp -d)
for n in 2 4; do
    for run in 1 2; do
        mpirun --allow-run-as-root --oversubscribe -np "$n" --mca btl tcp,self \
            build/tools/mpi-allreduce-sweep >"$out/mpi.$n.$run"
        build/tools/tide-run -n "$n" -- build/tools/tide-allreduce-sweep |
            sed -n 's/^\[0\] //p' >"$out/tide.$n.$run"
    done
done
for n in 2 4; do
    echo "== $n ranks: float32 sum allreduce, us per call (two runs each) =="
    printf "%10s %22s %22s %8s  %s\n" bytes "tide" "Open MPI (tcp)" "ratio" "tide algorithm"
    paste "$out/tide.$n.1" "$out/tide.$n.2" "$out/mpi.$n.1" "$out/mpi.$n.2" |
        awk '{ tmin = $2 < $5 ? $2 : $5; tmax = $2 < $5 ? $5 : $2;
               mmin = $8 < $11 ? $8 : $11; mmax = $8 < $11 ? $11 : $8;
               printf "%10s %10.1f-%-11.1f %10.1f-%-11.1f %7.2fx  %s\n",
                      $1, tmin, tmax, mmin, mmax, (mmin + mmax) / (tmin + tmax), $3 }'
done
rm -rf "$out"
