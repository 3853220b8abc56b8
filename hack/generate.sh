#!/usr/bin/env bash
# Regenerates deepcopy code and CRD manifests from api/ (into OUT_DIR when set,
# for hack/verify.sh), and copies each CRD into the chart that installs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT_DIR:-$root}
mkdir -p "$out/api/v1alpha1/crds" "$out/charts/jobferry-manager/crds" "$out/charts/jobferry-worker/crds" "$out/charts/jobferry-manager/files" "$out/charts/jobferry-worker/files"
if [ "$out" != "$root" ]; then cp api/v1alpha1/*.go "$out/api/v1alpha1/"; fi
bin/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/v1alpha1/... output:object:dir="$out/api/v1alpha1"
bin/controller-gen crd paths=./api/v1alpha1/... output:crd:dir="$out/api/v1alpha1/crds"
cp "$out/api/v1alpha1/crds/jobferry.dev_workerclusters.yaml" "$out/charts/jobferry-manager/crds/"
cp "$out/api/v1alpha1/crds/jobferry.dev_clustercapacities.yaml" "$out/charts/jobferry-worker/crds/"
# RBAC from the +kubebuilder:rbac markers, one file per role, read by the
# charts' RBAC templates (which set the names and namespaces).
rbac() { # package, role name, output file
  local tmp
  tmp=$(mktemp -d)
  bin/controller-gen rbac:roleName="$2" paths="$1" output:rbac:dir="$tmp"
  mv "$tmp/role.yaml" "$3"
  rm -rf "$tmp"
}
rbac ./worker jobferry-worker-capacity "$out/charts/jobferry-worker/files/rbac-capacity.yaml"
rbac ./worker/jobcontroller jobferry-worker-job-controller "$out/charts/jobferry-worker/files/rbac-job-controller.yaml"
rbac ./cmd/worker jobferry-worker-leader-election "$out/charts/jobferry-worker/files/rbac-leader-election.yaml"
# What the manager reads on a worker to serve the inspection API (the
# worker chart's managerIdentity.allowInspection).
rbac ./manager/inspection/workerread jobferry-worker-inspection "$out/charts/jobferry-worker/files/rbac-inspection.yaml"
# The Kueue rules are the manager chart's only with kueue.enabled: every
# other package of the manager goes into the manager's role, but what the
# manager reads on workers.
manager_pkgs=$(go list ./manager/... | grep -v -e '/manager/queue$' -e '/manager/inspection/workerread$' -e '/manager/uninstall$' | sed 's|^github.com/jobferry/jobferry/|./|' | paste -sd';')
rbac "$manager_pkgs" jobferry-manager "$out/charts/jobferry-manager/files/rbac-manager.yaml"
rbac ./manager/queue jobferry-manager-kueue "$out/charts/jobferry-manager/files/rbac-kueue.yaml"
rbac ./cmd/manager jobferry-manager-namespace "$out/charts/jobferry-manager/files/rbac-namespace.yaml"
# The uninstall check's own ServiceAccount (uninstallCheck.enabled): it lists.
rbac ./manager/uninstall jobferry-manager-uninstall-check "$out/charts/jobferry-manager/files/rbac-uninstall-check.yaml"
# The metrics reference, from the collectors the binaries register.
mkdir -p "$out/docs/reference"
go run ./hack/metricsdoc --out "$out/docs/reference/metrics.md"
# The API reference, from the CRDs above; the names reference (labels,
# annotations, Event reasons, conditions), from the constants that define
# them; the kubectl plugin's, from its commands' help.
go run ./hack/apidoc --crds "$out/api/v1alpha1/crds" --out "$out/docs/reference/api.md"
go run ./hack/namesdoc --out "$out/docs/reference/names.md"
go test ./cmd/kubectl-jobferry -run '^TestCommandReferenceIsCurrent$' -count=1 -args -reference-out="$out/docs/reference/kubectl-jobferry.md" >/dev/null
# The Job fields placement checks a worker's version for.
go run ./hack/versionsdoc --out "$out/docs/reference/versioned-fields.md"
# The Grafana dashboards the manager chart ships, from internal/dashboards.
go run ./hack/dashboards --out "$out/charts/jobferry-manager/dashboards"
# The admission policies: jobferry's state on Jobs (manager chart), the
# manager's rights on a worker's namespaces (worker chart).
go run ./hack/statepolicy --root "$out"
