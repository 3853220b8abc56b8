#!/usr/bin/env bash
# Builds the pinned tool binaries of hack/tools/go.mod into bin/.
# Idempotent: a binary is rebuilt only when it is missing or when the module
# version it was built from (recorded in bin/.stamps/<name>) differs from the pin.
# Usage: hack/tools/build.sh [BIN_DIR] [tool ...]   (default: every tool)
#        hack/tools/build.sh BIN_DIR --except tool ...   (every tool but those)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin=$(mkdir -p "${1:-$here/../../bin}" && cd "${1:-$here/../../bin}" && pwd)
shift || true
stamps="$bin/.stamps"
mkdir -p "$stamps"

# Without these the Kubernetes binaries report v0.0.0-master, and clients that
# parse the server version (helm's kubeVersion check among them) refuse to work.
kube_version=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
kube_minor=${kube_version#v*.}
kube_minor=${kube_minor%%.*}
kube_ldflags="-X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kube_minor} -X k8s.io/component-base/version.gitTreeState=clean"
# helm assumes this Kubernetes version when it renders without a cluster
# (`helm template`, `helm lint`; GitOps tools do); unset it is v1.20.0 and our
# charts' kubeVersion refuses it. helm's Makefile sets the same variables.
helm_ldflags="-X helm.sh/helm/v3/internal/version.version={version} -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${kube_minor} -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${kube_minor}"

# The same for a Kubernetes module of its own ({version} and {minor} filled
# in from its pin).
kube_ldflags_of_pin="-X k8s.io/component-base/version.gitVersion={version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor={minor} -X k8s.io/component-base/version.gitTreeState=clean"

# name (a path under bin/)|package|module whose version is the pin|extra ldflags ({version} = that version, {minor} its minor)|module directory (under hack/tools; empty: hack/tools)|files of that module copied into bin/<name>-files/ (a glob; empty: none)
tools=(
  "etcd|go.etcd.io/etcd/server/v3|go.etcd.io/etcd/server/v3|||"
  "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|k8s.io/kubernetes|$kube_ldflags||"
  "kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|k8s.io/kubernetes|$kube_ldflags||"
  "kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler|k8s.io/kubernetes|$kube_ldflags||"
  "kubectl|k8s.io/kubernetes/cmd/kubectl|k8s.io/kubernetes|$kube_ldflags||"
  "kubelet|k8s.io/kubernetes/cmd/kubelet|k8s.io/kubernetes|$kube_ldflags||"
  "kube-proxy|k8s.io/kubernetes/cmd/kube-proxy|k8s.io/kubernetes|$kube_ldflags||"
  "kwok|sigs.k8s.io/kwok/cmd/kwok|sigs.k8s.io/kwok|||"
  "controller-gen|sigs.k8s.io/controller-tools/cmd/controller-gen|sigs.k8s.io/controller-tools|||"
  "helm|helm.sh/helm/v3/cmd/helm|helm.sh/helm/v3|$helm_ldflags||"
  "helm4|helm.sh/helm/v4/cmd/helm|helm.sh/helm/v4|-X helm.sh/helm/v4/internal/version.version={version}|helm4|"
  "registry|.|github.com/distribution/distribution/v3|-X github.com/distribution/distribution/v3/version.version={version}|registry|"
  "coredns|.|github.com/coredns/coredns||coredns|"
  "kueue|sigs.k8s.io/kueue/cmd/kueue|sigs.k8s.io/kueue|-X sigs.k8s.io/kueue/pkg/version.GitVersion={version}|kueue|config/components/crd/bases/*.yaml"
  # The oldest minor the charts claim, for the mixed-minor e2e tests.
  "kubernetes-1.32/kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|k8s.io/kubernetes|$kube_ldflags_of_pin|kubernetes-1.32|"
  "kubernetes-1.32/kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|k8s.io/kubernetes|$kube_ldflags_of_pin|kubernetes-1.32|"
  "kubernetes-1.32/kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler|k8s.io/kubernetes|$kube_ldflags_of_pin|kubernetes-1.32|"
)

wanted=("$@")
if [ "${1:-}" = --except ]; then
  shift
  wanted=()
  for entry in "${tools[@]}"; do
    name=${entry%%|*}
    if [[ " $* " != *" $name "* ]]; then wanted+=("$name"); fi
  done
fi
selected=()
for entry in "${tools[@]}"; do
  name=${entry%%|*}
  if [ ${#wanted[@]} -eq 0 ] || [[ " ${wanted[*]} " == *" $name "* ]]; then
    selected+=("$entry")
  fi
done

todo=()
for entry in "${selected[@]}"; do
  IFS='|' read -r name pkg mod ldflags dir files <<<"$entry"
  version=$(cd "$here/$dir" && go list -m -f '{{.Version}}' "$mod")
  ldflags=${ldflags//\{version\}/$version}
  minor=${version#v*.}
  ldflags=${ldflags//\{minor\}/${minor%%.*}}
  # The module's godebug lines change the binary too.
  stamp="$mod@$version $(go env GOVERSION) $(printf '%s%s' "$ldflags" "$(grep '^godebug' "$here/$dir/go.mod" || true)" | sha256sum | cut -c1-12)"
  if [ -x "$bin/$name" ] && [ "$(cat "$stamps/$name" 2>/dev/null)" = "$stamp" ] && { [ -z "$files" ] || [ -d "$bin/$name-files" ]; }; then
    continue
  fi
  todo+=("$name|$pkg|$stamp|$ldflags|$dir|$files")
done

[ ${#todo[@]} -eq 0 ] && exit 0
echo "tools: building ${#todo[@]} pinned binaries into $bin (a cold build takes about half an hour on 2 cores, the two Kubernetes minors most of it; later runs reuse the Go build cache)"
i=0
for entry in "${todo[@]}"; do
  IFS='|' read -r name pkg stamp ldflags dir files <<<"$entry"
  i=$((i + 1))
  start=$(date +%s)
  printf 'tools: [%d/%d] %-24s %s ... ' "$i" "${#todo[@]}" "$name" "${stamp%% *}"
  mkdir -p "$(dirname "$bin/$name")" "$(dirname "$stamps/$name")"
  rm -f "$stamps/$name"
  # Print the elapsed time every 30s, so a cold build never looks stuck.
  (cd "$here/$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$bin/$name.tmp" "$pkg") &
  build=$!
  waited=0
  while kill -0 "$build" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if [ $((waited % 30)) -eq 0 ]; then printf '%ds ' "$waited"; fi
  done
  wait "$build"
  mv "$bin/$name.tmp" "$bin/$name"
  if [ -n "$files" ]; then
    # Files of the same module version the binary needs (Kueue's CRDs).
    rm -rf "$bin/$name-files"
    mkdir -p "$bin/$name-files"
    # $files is a glob: left unquoted to expand.
    # shellcheck disable=SC2086
    cp "$(cd "$here/$dir" && go list -m -f '{{.Dir}}' "${stamp%%@*}")"/$files "$bin/$name-files/"
    chmod -R u+w "$bin/$name-files"
  fi
  printf '%s\n' "$stamp" >"$stamps/$name"
  echo "done in $(( $(date +%s) - start ))s"
done
