#!/usr/bin/env bash
# Builds the tools only later e2e tests use (the Makefile's E2E_LATE_TOOLS:
# CoreDNS for real nodes, the oldest Kubernetes minor) in the background, one
# after another and at the lowest CPU priority, while the first e2e tests
# run: those leave a core idle much of the time, and a cold build of these
# tools is about 8.5 minutes of both cores. A test that needs one of them
# waits until it is built (localcluster's checkBinaries reads the markers
# below).
#
# Usage: hack/tools/build-late.sh start BIN_DIR tool ...   (returns at once)
#        hack/tools/build-late.sh stop BIN_DIR             (stops a build still running, forgets its markers)
#
# BIN_DIR/.pending/ holds a marker per tool not built yet (its name with / as
# __), pid (the background build's process group) and, when a build failed,
# failed (the tool's name); the build's output goes to BIN_DIR/.late-build.log,
# which stays after stop.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
action=$1
bin=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
pending="$bin/.pending"
log="$bin/.late-build.log"

case "$action" in
start)
  "$0" stop "$bin"
  rm -rf "$pending"
  mkdir -p "$pending"
  for tool in "$@"; do : >"$pending/${tool//\//__}"; done
  # setsid: a process group of its own, which stop ends whole.
  setsid nice -n 19 bash -c '
    pending=$1 here=$2 bin=$3
    shift 3
    echo $$ >"$pending/pid"
    for tool in "$@"; do
      if ! "$here/build.sh" "$bin" "$tool"; then
        echo "$tool" >"$pending/failed"
        exit 1
      fi
      rm -f "$pending/${tool//\//__}"
    done
  ' late-tools "$pending" "$here" "$bin" "$@" >"$log" 2>&1 </dev/null &
  echo "tools: building $* in the background (log: ${log#"$PWD"/})"
  ;;
stop)
  if pid=$(cat "$pending/pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; then
    kill -- "-$pid" 2>/dev/null || true
  fi
  # No markers left to wait on: a tool the build did not reach is simply
  # missing, and `make tools` builds it.
  rm -rf "$pending"
  ;;
*)
  echo "usage: $0 start|stop BIN_DIR [tool ...]" >&2
  exit 2
  ;;
esac
