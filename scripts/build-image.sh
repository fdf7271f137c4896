#!/usr/bin/env bash
# opsched's image, built without a container engine and without pulling a base image: the root filesystem from
# Debian's packages (debootstrap: bookworm's python3, the same CPython 3.11 line the tests run), the Python packages
# of deploy/constraints.txt (wheels only, exactly those pins), the project's source compiled ahead; packed as an OCI
# image layout by umoci, with the same user, working directory, environment and command as deploy/Dockerfile.
#
#   scripts/build-image.sh OUT [TAG]   an OCI image layout in OUT (TAG: the project's version); prints its digest
#   scripts/build-image.sh --base      only the Debian root filesystem with the wheels, cached (scripts/setup runs it)
#
# The Debian part with the wheels installed and compiled is cached in ~/.cache/opsched (about a minute and 60 MB of
# packages the first time; again when deploy/constraints.txt changes), as a layer cache would; the project's
# code, its compiling and the packing are done again each time. Push it with skopeo: `skopeo copy oci:OUT:TAG docker://registry.example.com/opsched:TAG`
# (docs/deploying.md, "The image"). Needs root (debootstrap, chroot) and Debian's debootstrap and umoci.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${OPSCHED_CACHE:-$HOME/.cache/opsched}"
SUITE=bookworm
MIRROR="${OPSCHED_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=python3,python-is-python3,ca-certificates   # CPython; `python` as the Deployments call it; TLS roots
BASE="$CACHE/image-base-$SUITE-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar"
# the base with the pinned wheels installed and compiled: again only when deploy/constraints.txt changes
DEPS="$CACHE/image-deps-$SUITE-$({ echo "$PACKAGES"; cat deploy/constraints.txt; } | sha256sum | cut -c1-12).tar"
USER_ID=65532   # the Deployments' runAsUser and runAsGroup (deploy/base/30-*.yaml)

say() { echo "[build-image] $*" >&2; }

base() {
  [ -s "$BASE" ] && return 0
  command -v debootstrap >/dev/null || { say "needs Debian's debootstrap (apt-get install debootstrap)"; exit 2; }
  local root; root=$(mktemp -d); chmod 755 "$root"
  say "debootstrap $SUITE ($PACKAGES) from $MIRROR"
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; exit 1; }
  # what a runtime image never reads: package lists and caches, documentation, translations
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old "$root"/var/log/* \
         "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
  mkdir -p "$CACHE"
  tar -C "$root" --numeric-owner -cf "$BASE.partial" . && mv "$BASE.partial" "$BASE"
  rm -rf "$root" "$root.log"
  say "base cached in $BASE"
}

deps() {
  [ -s "$DEPS" ] && return 0
  base
  local root; root=$(mktemp -d)
  tar -C "$root" -xf "$BASE"
  chmod 755 "$root"   # the image's / (mktemp makes directories 0700: its user could reach nothing)
  say "the pinned wheels of deploy/constraints.txt"
  # --no-deps: nothing unpinned comes along; wheels only: nothing is compiled. The interpreter that chooses the
  # wheels is this machine's CPython 3.11 on the same Debian release and architecture as the image's.
  python3 -m pip install --disable-pip-version-check -q --no-deps --only-binary=:all: --no-compile \
    --target "$root/opt/opsched/site-packages" -r deploy/constraints.txt 2>&1 \
    | { grep -v -e "^WARNING: Running pip as" -e "is ignored: it is neither a file nor a directory" || true; } >&2
  rm -rf "$root/opt/opsched/site-packages/bin"   # console scripts with this machine's interpreter path: unused
  PYTHONPATH=/opt/opsched/site-packages check_requirements "$root"
  chroot "$root" /usr/bin/python3 -m compileall -q /opt/opsched/site-packages >/dev/null   # read-only at run time
  tar -C "$root" --numeric-owner -cf "$DEPS.partial" . && mv "$DEPS.partial" "$DEPS"
  rm -rf "$root"
  say "base and wheels cached in $DEPS"
}

check_requirements() {
  # pip check's rule, in the image's own Python: every requirement of every installed package is installed, in range
  chroot "$1" /usr/bin/python3 - <<'PY'
import importlib.metadata as md
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

have = {canonicalize_name(d.metadata["Name"]): d.version for d in md.distributions()}
broken = []
for dist in md.distributions():
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        version = have.get(canonicalize_name(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            broken.append(f"{dist.metadata['Name']} needs {req}, has {version or 'nothing'}")
sys.exit("\n".join(broken)) if broken else print(f"{len(have)} packages, every requirement met", file=sys.stderr)
PY
}

if [ "${1:-}" = "--base" ]; then deps; exit 0; fi
OUT="${1:?usage: scripts/build-image.sh OUT [TAG] | --base}"
TAG="${2:-$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')}"
command -v umoci >/dev/null || { say "needs Debian's umoci (apt-get install umoci)"; exit 2; }
deps
ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT" "$ROOT.layer.tar"' EXIT
tar -C "$ROOT" -xf "$DEPS"

say "the project's packages, as source on PYTHONPATH"
mkdir -p "$ROOT/app"
tar --exclude=__pycache__ --exclude='*.pyc' -cf - proto rules bus services opsched | tar -C "$ROOT/app" -xf -
export PYTHONPATH=/app:/opt/opsched/site-packages
# compiled ahead: the pods' root filesystem is read-only
chroot "$ROOT" /usr/bin/python3 -m compileall -q /app >/dev/null
chroot "$ROOT" /usr/bin/python3 -c "import opsched.services.runtime.runner"   # it imports in the image

say "packing $OUT:$TAG (umoci)"
rm -rf "$OUT"
umoci init --layout "$OUT"
umoci new --image "$OUT:$TAG"
# one layer, made by tar: every entry as it is in $ROOT, / included (umoci insert would give / its own mode)
tar -C "$ROOT" --numeric-owner --sort=name -cf "$ROOT.layer.tar" .
umoci raw add-layer --image "$OUT:$TAG" --history.created_by "scripts/build-image.sh" "$ROOT.layer.tar"
rm -f "$ROOT.layer.tar"
umoci config --image "$OUT:$TAG" \
  --config.user "$USER_ID:$USER_ID" --config.workingdir /app \
  --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.env PYTHONPATH="$PYTHONPATH" \
  --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 \
  --config.cmd python --config.cmd -m --config.cmd opsched.services.admission \
  --config.label org.opencontainers.image.title=opsched --config.label org.opencontainers.image.version="$TAG" \
  --history.created_by "umoci config (user, env, command)"
umoci gc --layout "$OUT"
digest=$(umoci stat --image "$OUT:$TAG" --json >/dev/null 2>&1; python3 -c '
import json, sys
index = json.load(open(sys.argv[1] + "/index.json"))
print(next(m["digest"] for m in index["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == sys.argv[2]))' "$OUT" "$TAG")
say "built $OUT:$TAG ($digest)"
echo "$digest"
