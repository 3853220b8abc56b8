#!/usr/bin/env bash
# Regenerates deepcopy code and CRD manifests from api/ (into OUT_DIR when set,
# for hack/verify.sh), and copies each CRD into the chart that installs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT_DIR:-$root}
mkdir -p "$out/api/v1alpha1/crds" "$out/charts/jobferry-manager/crds" "$out/charts/jobferry-worker/crds"
if [ "$out" != "$root" ]; then cp api/v1alpha1/*.go "$out/api/v1alpha1/"; fi
bin/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/... output:object:dir="$out/api/v1alpha1"
bin/controller-gen crd paths=./api/... output:crd:dir="$out/api/v1alpha1/crds"
cp "$out/api/v1alpha1/crds/jobferry.dev_workerclusters.yaml" "$out/charts/jobferry-manager/crds/"
cp "$out/api/v1alpha1/crds/jobferry.dev_clustercapacities.yaml" "$out/charts/jobferry-worker/crds/"
