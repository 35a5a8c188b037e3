#!/usr/bin/env bash
# c10d_upstream.sh - PyTorch's own c10d tests for Gloo, run on Gloo and
# then with every Gloo group swapped for tide's (issue 34): a table of
# each test's result on both, and exit status 1 if any test that passes
# on Gloo fails on tide.  Not part of CI: it downloads the source package
# of the installed torch (Debian's python3-torch: source package pytorch)
# through apt with a private list of deb-src lines, so the system's own
# apt configuration is left alone.  Nothing of it is committed.
#
#   tools/c10d_upstream.sh [-k PATTERN] [TEST_FILE...]
#   TIDE_C10D_BACKENDS=tide tools/c10d_upstream.sh   # tide again, Gloo's last results kept
#
# TEST_FILE defaults to test_c10d_gloo.py and test_c10d_object_collectives.py
# (under test/distributed of the source).  Needs root (apt-get update with
# a private list directory), the network, and a built libtide (TIDE_BUILD,
# default build).  Work, the source and the logs go to TIDE_C10D_DIR
# (default /tmp/tide-c10d-upstream): RESULTS/FILE.BACKEND.log holds each
# failure's traceback.  A full run takes about half an hour on 2 cores
# (every test starts 4 rank processes that import torch).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pattern=()
if [[ ${1:-} == -k ]]; then pattern=(-k "$2"); shift 2; fi
files=("$@")
((${#files[@]})) || files=(test_c10d_gloo.py test_c10d_object_collectives.py)
python=/usr/bin/python3
build=${TIDE_BUILD:-build}
work=${TIDE_C10D_DIR:-/tmp/tide-c10d-upstream}
[[ -f $build/libtide.so ]] || { echo "c10d_upstream: no $build/libtide.so: build it first" >&2; exit 1; }
mkdir -p "$work/lists/partial"

# The source of the torch that is installed, once.
version=$(dpkg-query -W -f '${Version}' python3-torch)
upstream=${version#*:}
upstream=${upstream%-*}
tarball="$work/pytorch_${upstream}.orig.tar.xz"
if [[ ! -f $tarball ]]; then
  . /etc/os-release
  echo "deb-src http://deb.debian.org/debian $VERSION_CODENAME main" >"$work/sources.list"
  apt=(apt-get -o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
       -o "Dir::State::Lists=$work/lists")
  "${apt[@]}" update >"$work/apt.log" 2>&1
  # Only the upstream tarball is needed: the tests are upstream's, so a
  # Debian diff that fails to download (some mirrors answer 404) is no matter.
  (cd "$work" && "${apt[@]}" source --download-only "pytorch=$version" >>"$work/apt.log" 2>&1) ||
    true
  [[ -f $tarball ]] || { echo "c10d_upstream: could not fetch $tarball (see $work/apt.log)" >&2
                         exit 1; }
fi
# (head closes the pipe early: tar's SIGPIPE is no failure.)
top=$(set +o pipefail; tar -tJf "$tarball" | head -1 | cut -d/ -f1)
src="$work/$top"
[[ -d $src/test/distributed ]] || tar -xJf "$tarball" -C "$work" "$top/test/distributed"

export PYTHONPATH="$root/python" TIDE_LIBRARY="$root/$build/libtide.so"
export TIDE_LOG_LEVEL=${TIDE_LOG_LEVEL:-0} PYTHONWARNINGS=ignore
results="$work/results"
mkdir -p "$results"
for f in "${files[@]}"; do
  for backend in ${TIDE_C10D_BACKENDS:-gloo tide}; do
    echo "c10d_upstream: $f on $backend" >&2
    (cd "$work" && TIDE_C10D_BACKEND=$backend timeout 3600 "$python" "$root/tools/c10d_upstream.py" \
       "$src/test/distributed/$f" "${pattern[@]}" 2>"$results/${f%.py}.$backend.log") |
      grep '^RESULT ' | awk '{print $3, $2}' | sort >"$results/${f%.py}.$backend" || true
  done
done

# The table, and what tide must still answer as Gloo does.
status=0
printf '%-100s %-5s %-5s\n' test gloo tide
for f in "${files[@]}"; do
  touch "$results/${f%.py}.gloo" "$results/${f%.py}.tide"  # a backend not run yet: no results
  # With -k, the tests it picked only (each backend's file holds its last run).
  if ((${#pattern[@]})); then sides=(-a 2); else sides=(-a 1 -a 2); fi
  join "${sides[@]}" -e none -o 0,1.2,2.2 "$results/${f%.py}.gloo" "$results/${f%.py}.tide" \
    >"$results/${f%.py}.both"
  while read -r name gloo tide; do
    printf '%-100s %-5s %-5s\n' "$name" "$gloo" "$tide"
    if [[ $gloo == pass && $tide != pass ]]; then status=1; fi
  done <"$results/${f%.py}.both"
done
for b in gloo tide; do
  all=$(for f in "${files[@]}"; do cat "$results/${f%.py}.$b"; done)
  printf '%s: %s passed, %s failed, %s skipped\n' "$b" \
    "$(grep -c ' pass$' <<<"$all" || true)" "$(grep -c ' fail$' <<<"$all" || true)" \
    "$(grep -c ' skip$' <<<"$all" || true)"
done
both=$(for f in "${files[@]}"; do cat "$results/${f%.py}.both"; done)
echo "passing on Gloo and failing on tide: $(awk '$2 == "pass" && $3 != "pass"' <<<"$both" | wc -l)"
exit $status
