#!/usr/bin/env bash
# test.sh - the quick start's second command: install what is missing,
# build, run the whole test suite, then run it again under
# AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh build
echo "test: plain build"
meson test -C build --print-errorlogs --num-processes 1

tools/setup.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
echo "test: AddressSanitizer + UndefinedBehaviorSanitizer build"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs --num-processes 1 --timeout-multiplier 3

echo "test: parser fuzzing (libFuzzer, 60 s)"
tools/fuzz.sh 60
