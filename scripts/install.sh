#!/bin/bash
# Installs poolscope under a prefix:
#   PREFIX/bin/poolscope                   the command
#   PREFIX/lib/libpoolscope.so             the preload library, found by the command as ../lib/
#   PREFIX/lib/poolscope/demo_workload     the demo `poolscope compare` runs when given no command
# Put PREFIX/bin on PATH and the commands poolscope suggests work as printed.
#
# usage: scripts/install.sh PREFIX
#          builds //tools:poolscope with -c opt (the library and the demo come with it), then installs
#        scripts/install.sh --files POOLSCOPE LIBPOOLSCOPE DEMO_WORKLOAD PREFIX
#          installs files already built, without Bazel
set -euo pipefail
usage() { echo "usage: scripts/install.sh PREFIX | scripts/install.sh --files POOLSCOPE LIBPOOLSCOPE DEMO_WORKLOAD PREFIX" >&2; exit 2; }

# The layout: the one place that says where each file goes (tools/locate.h searches it).
install_files() {  # install_files POOLSCOPE LIBPOOLSCOPE DEMO_WORKLOAD PREFIX
  local f
  for f in "$1" "$2" "$3"; do
    [ -f "$f" ] || { echo "scripts/install.sh: $f: no such file" >&2; exit 2; }
  done
  mkdir -p "$4/bin" "$4/lib/poolscope"
  install -m 755 "$1" "$4/bin/poolscope"
  install -m 644 "$2" "$4/lib/libpoolscope.so"
  install -m 755 "$3" "$4/lib/poolscope/demo_workload"
  echo "installed $4/bin/poolscope, $4/lib/libpoolscope.so, $4/lib/poolscope/demo_workload"
}

if [ $# -eq 5 ] && [ "$1" = --files ]; then
  install_files "$2" "$3" "$4" "$5"
  exit 0
fi
[ $# -eq 1 ] && [ -n "$1" ] && [ "${1#-}" = "$1" ] || usage
prefix=$1
case $prefix in /*) ;; *) prefix=$PWD/$prefix ;; esac
cd "$(dirname "$0")/.."
# --symlink_prefix=/ leaves bazel-bin and the other convenience links as they were.
bazel build -c opt --symlink_prefix=/ //tools:poolscope
bin=$(bazel info -c opt bazel-bin)
install_files "$bin/tools/poolscope" "$bin/interpose/libpoolscope.so" "$bin/tools/demo_workload" "$prefix"
