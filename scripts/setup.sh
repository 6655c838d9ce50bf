#!/usr/bin/env bash
# Installs every Debian package poolscope needs to build, test and compare against its peers.
# Idempotent: packages already present are left alone. Needs root (or sudo).
set -euo pipefail

packages=(
  # build
  g++ bazel-bootstrap bazel-rules-java bazel-rules-proto bazel-platforms
  libabsl-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  libdw-dev valgrind
  # real processes the tests preload into (make: a real process tree; gdb: `poolscope attach`)
  python3 perl sqlite3 git procps make gdb
  # peers: profilers and allocators poolscope is compared with and stacked on
  heaptrack hyperfine libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0
  # the HTML report is rendered in a real browser by a test
  chromium
  # hardening: libFuzzer targets (fuzz/), readelf for the exported-symbols test, unshare for mounts
  clang-14 libclang-rt-14-dev binutils util-linux
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all packages present" >&2
