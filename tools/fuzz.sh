#!/usr/bin/env bash
# fuzz.sh - fuzz every parser of bytes from the network (tests/fuzz/
# fuzz_wire.c) and tide-doctor's reader of dump files (tests/fuzz/
# fuzz_doctor.c) with clang's libFuzzer under AddressSanitizer + UBSan.
#
#   tools/fuzz.sh [SECONDS]   replay tests/fuzz/regressions/, then fuzz the
#                             wire for SECONDS (default 60) from
#                             tests/fuzz/corpus/wire/ and the dumps for a
#                             third of that from tests/fuzz/corpus/doctor/;
#                             fails, printing the input's path, on a crash
#   tools/fuzz.sh seeds       rewrite tests/fuzz/corpus/wire/ (make_corpus.c)
#
# Everything it writes goes to build-fuzz/: the binaries, the corpus the
# fuzzer grows (kept between runs, so long runs build on short ones, never
# committed), the log, and crashing inputs.  As root it installs clang and
# its fuzzer runtime with apt-get when missing; otherwise it prints the
# command and stops.
set -euo pipefail
cd "$(dirname "$0")/.."

arg=${1:-60}
if [[ $arg != seeds && ! $arg =~ ^[0-9]+$ ]]; then
  echo "usage: tools/fuzz.sh [SECONDS | seeds]" >&2
  exit 2
fi

tools/packages.sh fuzz clang libclang-rt-14-dev libsodium-dev libssl-dev pkg-config

out=build-fuzz
mkdir -p "$out/corpus" "$out/crashes"

# The parsers and what they need to link: no sockets are opened, no ring.
wire_sources=(engine/frame.c transports/match.c transports/rendezvous/handshake.c
              transports/rendezvous/sockaddr.c transports/rendezvous/bootstrap.c
              transports/rendezvous/congestion.c transports/rendezvous/wire_keys.c
              transports/tcp/wire_auth.c engine/log.c)
cflags=(-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Iinclude -I.
        -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
        -Wno-unused-parameter -Werror)
read -ra sodium <<<"$(pkg-config --cflags --libs libsodium libcrypto)"

echo "fuzz: building $out/fuzz_wire"
clang "${cflags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  tests/fuzz/fuzz_wire.c "${wire_sources[@]}" "${sodium[@]}" -o "$out/fuzz_wire"
echo "fuzz: building $out/fuzz_doctor"
clang "${cflags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  tests/fuzz/fuzz_doctor.c tools/doctor/doctor_dump.c -o "$out/fuzz_doctor"
# Built every run so the seed generator cannot rot unnoticed.
clang "${cflags[@]}" tests/fuzz/make_corpus.c engine/frame.c transports/rendezvous/handshake.c \
  transports/rendezvous/sockaddr.c "${sodium[@]}" -o "$out/make_corpus"

if [[ $arg == seeds ]]; then
  rm -rf tests/fuzz/corpus/wire
  mkdir -p tests/fuzz/corpus/wire
  "$out/make_corpus" tests/fuzz/corpus/wire
  echo "fuzz: wrote $(ls tests/fuzz/corpus/wire | wc -l) seeds to tests/fuzz/corpus/wire"
  exit 0
fi

log=$out/fuzz.log
# From the first sign of trouble on, or the end of the log.
show_failure() {
  awk '/invariant broken|==[0-9]+==ERROR|runtime error|ERROR: libFuzzer/ {p = 1} p' "$log" |
    head -n 60 | grep . || tail -n 40 "$log"
}
# Crash inputs found and fixed earlier: each must now pass.
shopt -s nullglob
regressions=(tests/fuzz/regressions/*)
if ((${#regressions[@]})); then
  echo "fuzz: replaying ${#regressions[@]} regression inputs"
  if ! "$out/fuzz_wire" -artifact_prefix="$out/crashes/" "${regressions[@]}" >"$log" 2>&1; then
    show_failure
    echo "fuzz: a regression input crashes again (see above)" >&2
    exit 1
  fi
fi

# fuzz TARGET SECONDS: run build-fuzz/fuzz_TARGET from its corpus.
fuzz() {
  local target=$1 secs=$2
  mkdir -p "$out/corpus/$target"
  echo "fuzz: fuzzing $target for $secs s from tests/fuzz/corpus/$target (log: $log)"
  rm -f "$out"/crashes/*
  if ! "$out/fuzz_$target" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$out/crashes/" "$out/corpus/$target" "tests/fuzz/corpus/$target" \
      >"$log" 2>&1; then
    show_failure
    for f in "$out"/crashes/*; do
      echo "fuzz: crash input: $f   (replay: $out/fuzz_$target $f)" >&2
    done
    echo "fuzz: once fixed, keep the input in tests/fuzz/regressions/" >&2
    exit 1
  fi
  grep -E '^#[0-9]+[[:space:]]+DONE' "$log" || true
}

fuzz wire "$arg"
fuzz doctor $(((arg + 2) / 3))
echo "fuzz: no crash"
