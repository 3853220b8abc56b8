# Sourced by the scripts installing pinned Debian packages (prometheus.sh,
# nodes.sh).
#
# fetch_deb LABEL SHA256 DEST URL...: downloads the first URL that answers
# into DEST and checks its sha256; on failure prints why (prefixed with
# LABEL) and exits.
fetch_deb() {
  local label=$1 sha256=$2 dest=$3 fetched= url
  shift 3
  for url in "$@"; do
    if curl -fsSL --retry 3 -o "$dest" "$url"; then
      fetched=$url
      break
    fi
  done
  if [ -z "$fetched" ]; then
    echo "$label: could not download ${dest##*/} from $*" >&2
    exit 1
  fi
  if ! echo "$sha256  $dest" | sha256sum -c --quiet; then
    echo "$label: $fetched does not have the pinned sha256 $sha256" >&2
    exit 1
  fi
}
