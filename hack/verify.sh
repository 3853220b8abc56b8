#!/usr/bin/env bash
# Fails when generated files are stale, or gofmt or go vet complain.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
OUT_DIR=$tmp hack/generate.sh
stale=0
for f in api/v1alpha1/zz_generated.deepcopy.go api/v1alpha1/crds/*.yaml charts/jobferry-manager/crds/*.yaml charts/jobferry-worker/crds/*.yaml charts/*/files/rbac-*.yaml charts/jobferry-manager/files/state-policy.yaml charts/jobferry-worker/files/namespace-policy.yaml charts/jobferry-worker/files/jobs-policy.yaml docs/reference/metrics.md docs/reference/versioned-fields.md docs/reference/api.md docs/reference/names.md docs/reference/kubectl-jobferry.md charts/jobferry-manager/dashboards/*.json; do
  if ! diff -q "$f" "$tmp/$f" >/dev/null 2>&1; then
    echo "verify: $f is stale: run 'make generate'"; stale=1
  fi
done
unformatted=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*'))
if [ -n "$unformatted" ]; then echo "verify: gofmt would change:"; echo "$unformatted"; stale=1; fi
go vet ./... || stale=1
for tags in integration e2e; do go vet -tags "$tags" ./... || stale=1; done
[ "$stale" -eq 0 ] && echo "verify: generated files up to date, gofmt and go vet clean"
exit "$stale"
