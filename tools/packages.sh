#!/usr/bin/env bash
# packages.sh - make sure Debian packages are installed: the one place
# setup.sh, fuzz.sh and compare.sh get what they need from.
#
#   tools/packages.sh WHO PACKAGE...
#
# As root it installs what is missing with apt-get; otherwise it prints
# the exact command to run and fails.  WHO prefixes its messages.
set -euo pipefail

who=$1
shift
missing=()
for p in "$@"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
((${#missing[@]})) || exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "$who: missing packages: ${missing[*]}" >&2
  echo "$who: run:  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "$who: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
