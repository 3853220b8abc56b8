#!/usr/bin/env bash
# Runs `go test -v` for one test layer, keeps the full output in
# _output/test-<layer>.log, and ends with a "<layer>: N passed, N failed" line.
set -uo pipefail
layer=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/_output"
log="$root/_output/test-$layer.log"
start=$(date +%s)
go test -v "$@" 2>&1 | tee "$log" | grep -E '^(\s*--- |ok |FAIL|panic:|\s+\S+_test\.go:[0-9]+:)'
rc=${PIPESTATUS[0]}
passed=$(grep -cE '^\s*--- PASS' "$log")
failed=$(grep -cE '^\s*--- FAIL' "$log")
skipped=$(grep -cE '^\s*--- SKIP' "$log")
echo "$layer: took $(( $(date +%s) - start ))s, full log in ${log#$root/}"
echo "$layer: $passed passed, $failed failed, $skipped skipped"
exit "$rc"
