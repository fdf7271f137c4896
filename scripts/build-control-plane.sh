#!/usr/bin/env bash
# Build kube-apiserver, kube-scheduler and kubectl v1.20.2 from Debian's `kubernetes` source package
# with Debian's Go, into a cache directory outside the repository. Reused when present; a cache
# without some of them (e.g. one built before kubectl was added) builds only those; one built without one of
# scripts/control-plane-patches/*.patch (its bin/PATCHES) builds all again.
# Also installs etcd-server and openssl from Debian. Prints progress. ~6 min cold on 2 cores
# (kube-apiserver + kube-scheduler); kubectl adds about 1.5 min (97 s alone, cold, on 2 cores).
set -euo pipefail

CACHE="${OPSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/opsched}"
BIN="$CACHE/k8s-v1.20.2/bin"
log() { printf '[control-plane] %s\n' "$*" >&2; }
COMMANDS=(kube-apiserver kube-scheduler kubectl)
# our patches to the source (scripts/control-plane-patches/*.patch); binaries built without one of them are rebuilt
PATCH_DIR="$(cd "$(dirname "$0")" && pwd)/control-plane-patches"
PATCHES="$(cd "$PATCH_DIR" && ls -1 *.patch | sort)"
missing=()
if [ "$(cat "$BIN/PATCHES" 2>/dev/null)" != "$PATCHES" ]; then
  missing=("${COMMANDS[@]}")
else
  for cmd in "${COMMANDS[@]}"; do [ -x "$BIN/$cmd" ] || missing+=("$cmd"); done
fi

need_apt=()
command -v go >/dev/null 2>&1 || [ -x /usr/lib/go/bin/go ] || need_apt+=(golang-go)
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
if [ "${#missing[@]}" -gt 0 ]; then
  command -v dpkg-source >/dev/null 2>&1 || need_apt+=(dpkg-dev)
  command -v rsync >/dev/null 2>&1 || need_apt+=(rsync)
  command -v jq >/dev/null 2>&1 || need_apt+=(jq)
  command -v patch >/dev/null 2>&1 || need_apt+=(patch)
fi

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
apt_update_done=0
apt_update() {
  [ "$apt_update_done" = 1 ] && return 0
  log "apt-get update"
  $SUDO apt-get update -qq || log "apt-get update reported errors (ignored: unreachable extra sources)"
  apt_update_done=1
}
if [ "${#need_apt[@]}" -gt 0 ]; then
  apt_update
  log "apt-get install ${need_apt[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ "${#missing[@]}" -eq 0 ]; then
  log "reusing $BIN"
  echo "$BIN"
  exit 0
fi

SRC_LIST=/etc/apt/sources.list.d/opsched-debian-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  log "adding a deb-src entry"
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $SUDO tee "$SRC_LIST" >/dev/null
  apt_update_done=0
fi
apt_update

WORK="$CACHE/build"
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK"
log "apt-get source kubernetes (34 MB)"
apt-get source -qq kubernetes >/dev/null 2>&1 || apt-get source kubernetes
TREE="$(find "$WORK" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)"
for p in $PATCHES; do log "patch $p"; patch -s -p1 -d "$TREE" < "$PATCH_DIR/$p"; done
mkdir -p gopath/src/k8s.io && ln -s "$TREE" gopath/src/k8s.io/kubernetes
export PATH="/usr/lib/go/bin:$PATH"
export GOPATH="$WORK/gopath" CGO_ENABLED=0 GOPROXY=off GOFLAGS=-mod=vendor GO111MODULE=off \
  KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_MAJOR=1 KUBE_GIT_MINOR=20 KUBE_GIT_TREE_STATE=clean
unset GOFLAGS
cd gopath/src/k8s.io/kubernetes
what=(); for cmd in "${missing[@]}"; do what+=("cmd/$cmd"); done
log "building ${missing[*]} with $(go version) (about 6 minutes cold for all)"
start=$(date +%s)
( while sleep 30; do log "still building... $(( $(date +%s) - start ))s"; done ) &
ticker=$!
trap 'kill $ticker 2>/dev/null || true' EXIT
make WHAT="${what[*]}" >"$WORK/build.log" 2>&1 || { tail -n 50 "$WORK/build.log" >&2; exit 1; }
kill $ticker 2>/dev/null || true
mkdir -p "$BIN"
for cmd in "${missing[@]}"; do  # one rename each: a control plane running from $BIN keeps its binaries
  cp "_output/bin/$cmd" "$BIN/.$cmd.tmp" && mv "$BIN/.$cmd.tmp" "$BIN/$cmd"
done
printf '%s\n' "$PATCHES" > "$BIN/PATCHES"
cd "$CACHE"; rm -rf "$WORK"
log "built in $(( $(date +%s) - start ))s -> $BIN"
"$BIN/kube-apiserver" --version >&2
echo "$BIN"
