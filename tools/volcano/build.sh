#!/usr/bin/env bash
# Build Volcano's scheduler and controller manager (one released version) into the binary cache
# and copy the CRDs of the same version next to them. Idempotent: exits at once when built.
#
# Source of the release, first that works:
#   1. the Go module proxy: `go mod download -json volcano.sh/volcano@$VOLCANO_VERSION`
#   2. a git checkout/mirror of github.com/volcano-sh/volcano holding the tag ($VOLCANO_GIT)
# The module zip lacks staging/src/volcano.sh/apis (a nested module), and the proxy here refuses
# volcano.sh/apis, so that directory comes from the same tag of the git repository.
# We build inside the release tree so that Volcano's own go.mod replace lines (every k8s.io
# staging module pinned to one Kubernetes release) apply; a wrapper module would have to copy them.
set -euo pipefail
V=${VOLCANO_VERSION:-v1.15.1}
BIN=${GANGSTORM_BIN_DIR:-$HOME/.cache/gangstorm/bin}
CACHE=$(dirname "$BIN")
SRC=$CACHE/src/volcano-$V
CRD=$CACHE/volcano-$V/crd
STAMP=$BIN/.volcano-$V.built
JOBS=${GO_BUILD_JOBS:-2}
VOLCANO_GIT=${VOLCANO_GIT:-/work/.mirror/volcano-sh+volcano/repo}

if [[ -f $STAMP && -x $BIN/vc-scheduler && -x $BIN/vc-controller-manager && -f $CRD/scheduling.volcano.sh_queues.yaml ]]; then
  exit 0
fi
command -v go >/dev/null || { echo "volcano-bins: go is not installed (need Go >= 1.25)" >&2; exit 1; }
mkdir -p "$BIN" "$CACHE/src" "$CRD"

if [[ ! -f $SRC/go.mod ]]; then
  dir=$(go mod download -json "volcano.sh/volcano@$V" 2>/dev/null \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' || true)
  if [[ -n $dir && -f $dir/go.mod ]]; then
    echo "volcano-bins: source from the Go module proxy: $dir"
    cp -r "$dir" "$SRC.tmp" && chmod -R u+w "$SRC.tmp" && mv "$SRC.tmp" "$SRC"
  elif git -C "$VOLCANO_GIT" rev-parse -q --verify "refs/tags/$V" >/dev/null 2>&1; then
    echo "volcano-bins: Go proxy does not serve volcano.sh/volcano@$V; using tag $V of $VOLCANO_GIT"
    rm -rf "$SRC.tmp" && mkdir -p "$SRC.tmp"
    git -C "$VOLCANO_GIT" archive "$V" | tar -x -C "$SRC.tmp" && mv "$SRC.tmp" "$SRC"
  else
    echo "volcano-bins: cannot get Volcano $V source: the Go module proxy refused volcano.sh/volcano@$V" \
         "and no git repository with tag $V at VOLCANO_GIT=$VOLCANO_GIT" \
         "(clone https://github.com/volcano-sh/volcano there, or set VOLCANO_GIT)" >&2
    exit 1
  fi
fi
if [[ ! -f $SRC/staging/src/volcano.sh/apis/go.mod ]]; then
  git -C "$VOLCANO_GIT" rev-parse -q --verify "refs/tags/$V" >/dev/null 2>&1 || {
    echo "volcano-bins: Volcano $V needs staging/src/volcano.sh/apis, which the Go module zip lacks:" \
         "clone https://github.com/volcano-sh/volcano (with tags) and set VOLCANO_GIT to it" >&2; exit 1; }
  git -C "$VOLCANO_GIT" archive "$V" staging/src/volcano.sh/apis | tar -x -C "$SRC"
fi

cp "$SRC"/config/crd/volcano/bases/*.yaml "$CRD/"
echo "volcano-bins: building vc-scheduler and vc-controller-manager $V (go build -p $JOBS) ..."
start=$(date +%s)
out=$(mktemp -d)
(cd "$SRC" && CGO_ENABLED=0 go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$out/" ./cmd/scheduler ./cmd/controller-manager)
mv "$out/scheduler" "$BIN/vc-scheduler"
mv "$out/controller-manager" "$BIN/vc-controller-manager"
rmdir "$out"
echo "volcano-bins: built in $(( $(date +%s) - start )) s into $BIN"
touch "$STAMP"
