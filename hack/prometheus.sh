#!/usr/bin/env bash
# Installs prometheus and promtool from Debian 12's prometheus package into
# BIN_DIR (default bin/), for the tests that evaluate jobferry's alert rules
# and dashboard queries. Pinned by version and sha256; fetched once (a stamp
# records the version). Debian's package is a prebuilt static-enough binary
# (libc only): building Prometheus from the module proxy would add minutes to
# every cold tool build for the same PromQL engine.
# Usage: hack/prometheus.sh [BIN_DIR]
set -euo pipefail

version=2.42.0+ds-5+b6
sha256=3b0e0255b059a7696bd4a139a4a4eb24d71df067936a61ece5093559cbc7991c
deb="prometheus_${version}_amd64.deb"
# The pool keeps the file while Debian 12 is supported; the snapshot keeps
# it for good.
urls=(
  "http://deb.debian.org/debian/pool/main/p/prometheus/$deb"
  "https://snapshot.debian.org/archive/debian/20250520T000000Z/pool/main/p/prometheus/$deb"
)

here=$(cd "$(dirname "$0")" && pwd)
bin=$(mkdir -p "${1:-$here/../bin}" && cd "${1:-$here/../bin}" && pwd)
stamp="$bin/.stamps/prometheus"
mkdir -p "$bin/.stamps"
if [ -x "$bin/prometheus" ] && [ -x "$bin/promtool" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
  echo "prometheus: only the amd64 package is pinned; install prometheus and promtool $version into $bin yourself" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=hack/fetch-deb.sh
. "$here/fetch-deb.sh"
fetch_deb prometheus "$sha256" "$tmp/$deb" "${urls[@]}"
dpkg-deb -x "$tmp/$deb" "$tmp/root"
install -m 0755 "$tmp/root/usr/bin/prometheus" "$tmp/root/usr/bin/promtool" "$bin/"
echo "$version" >"$stamp"
echo "prometheus: installed prometheus and promtool $version (Debian) into $bin"
