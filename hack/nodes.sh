#!/usr/bin/env bash
# Installs what a real node needs beside the kubelet and kube-proxy that
# hack/tools builds: containerd, runc and the CNI plugins from Debian 12's
# packages, pinned by version and sha256 and unpacked into BIN_DIR/nodes/ (no
# system package installed, no service started), and Debian's static busybox,
# from which the busybox image of the real-node tests is built. kube-proxy
# runs iptables and conntrack: those are installed as system packages
# (apt-get) when missing.
#
# containerd 1.6 (Debian 12's) runs the kubelet v1.36 pins; kubelet v1.37
# will want containerd 2, which builds from the module proxy (~190 CPU-s).
# Usage: hack/nodes.sh [BIN_DIR]
set -euo pipefail

# package|version|sha256|path of the .deb under the Debian pool
debs=(
  "containerd|1.6.20~ds1-1+deb12u3|8669d264eeb0fcdb4a0b1ba436ab88ec5dafde4a66e1278ec279d830db4c2216|c/containerd/containerd_1.6.20~ds1-1+deb12u3_amd64.deb"
  "runc|1.1.5+ds1-1+deb12u1|a00351f8c0318de0b424ecf5cd0fdb69880a89f3511cae4f6fff7de3e57881c5|r/runc/runc_1.1.5+ds1-1+deb12u1_amd64.deb"
  "containernetworking-plugins|1.1.1+ds1-3+b5|4cac8143474d1249b19f7b0e80b8d0daaa6dfdaa8bd514bc468d38d4a108099f|g/golang-github-containernetworking-plugins/containernetworking-plugins_1.1.1+ds1-3+b5_amd64.deb"
  "busybox-static|1:1.35.0-4+deb12u1+b1|3d3fdbe91d4660c873e14b092c213fe81c1da6362daa236eb25d0171eb108744|b/busybox/busybox-static_1.35.0-4+deb12u1+b1_amd64.deb"
)
# The pool keeps a file while it is Debian 12's current version; the
# snapshot keeps it for good.
mirrors=(
  "http://deb.debian.org/debian/pool/main"
  "http://deb.debian.org/debian-security/pool/updates/main"
  "https://snapshot.debian.org/archive/debian/20260601T000000Z/pool/main"
)

here=$(cd "$(dirname "$0")" && pwd)
bin=$(mkdir -p "${1:-$here/../bin}" && cd "${1:-$here/../bin}" && pwd)
nodes="$bin/nodes"
stamp="$bin/.stamps/nodes"
mkdir -p "$bin/.stamps"
# Everything the result is made of: the pins, this script, the image
# builder, the kubernetes module whose pause.c is compiled.
want=$( { printf '%s\n' "${debs[@]}"; cat "$0" "$here"/images/*.go; grep -h 'k8s.io/kubernetes ' "$here/tools/go.mod"; } | sha256sum | cut -c1-12)

missing_tools=()
for tool in iptables iptables-restore ip6tables conntrack; do
  command -v "$tool" >/dev/null || missing_tools+=("$tool")
done
if [ ${#missing_tools[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    # Real nodes need root anyway: the tests on them say so when they run.
    echo "nodes: kube-proxy needs ${missing_tools[*]}: install Debian's iptables and conntrack packages as root; real nodes need root" >&2
    exit 0
  fi
  echo "nodes: installing Debian's iptables and conntrack (kube-proxy runs them)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iptables conntrack >/dev/null
fi

if [ -x "$nodes/bin/containerd" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
  echo "nodes: only the amd64 packages are pinned" >&2
  exit 1
fi

# shellcheck source=hack/fetch-deb.sh
. "$here/fetch-deb.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for entry in "${debs[@]}"; do
  IFS='|' read -r pkg version sha256 path <<<"$entry"
  deb="$tmp/${path##*/}"
  fetch_deb "nodes: $pkg $version" "$sha256" "$deb" "${mirrors[@]/%//$path}"
  dpkg-deb -x "$deb" "$tmp/root"
done
rm -rf "$nodes"
mkdir -p "$nodes/bin" "$nodes/cni" "$nodes/images"
install -m 0755 "$tmp/root/usr/bin/containerd" "$tmp/root/usr/bin/containerd-shim-runc-v2" "$tmp/root/usr/bin/ctr" \
  "$tmp/root/usr/sbin/runc" "$tmp/root/bin/busybox" "$nodes/bin/"
install -m 0755 "$tmp/root/usr/lib/cni/bridge" "$tmp/root/usr/lib/cni/host-local" "$tmp/root/usr/lib/cni/loopback" "$nodes/cni/"
# The pod sandbox's image: kubernetes' pause.c (of the pinned kubernetes
# module), static; then the pause and busybox images, as OCI archives
# each node's containerd imports (no registry here).
kube_dir=$(cd "$here/tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
pause_tag=$(sed -n 's/^TAG ?= *//p' "$kube_dir/build/pause/Makefile")
gcc -static -O2 -DVERSION="v$pause_tag-jobferry" -o "$nodes/bin/pause" "$kube_dir/build/pause/linux/pause.c"
(cd "$here/.." && go run ./hack/images --node-images "$nodes/bin" --out "$nodes/images")
echo "$want" >"$stamp"
echo "nodes: installed containerd, runc, the CNI plugins, busybox (Debian 12's, pinned) and the pause ($pause_tag, of the pinned kubernetes) and busybox images into $nodes"
