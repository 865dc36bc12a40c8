#!/usr/bin/env bash
# Build Volcano's scheduler and controller manager (one released version) from the Go module
# proxy into the binary cache, and copy the CRDs of the same version next to them.
# Idempotent: exits at once when built.
#
# volcano.sh/volcano requires volcano.sh/apis v0.0.0 replaced by ./staging/src/volcano.sh/apis,
# a nested module its module zip does not contain. So we build through a small wrapper module:
# it requires volcano.sh/volcano $VOLCANO_VERSION, repeats Volcano's own replace lines (every
# k8s.io staging module pinned to one Kubernetes release; replace lines of a dependency are
# ignored by Go), and points volcano.sh/apis at its released module $VOLCANO_APIS_VERSION.
set -euo pipefail
V=${VOLCANO_VERSION:-v1.14.1}
APIS=${VOLCANO_APIS_VERSION:-v1.14.0}
BIN=${GANGSTORM_BIN_DIR:-$HOME/.cache/gangstorm/bin}
CACHE=$(dirname "$BIN")
WRAP=$CACHE/src/volcano-wrapper-$V
CRD=$CACHE/volcano-$V/crd
STAMP=$BIN/.volcano-$V.built
JOBS=${GO_BUILD_JOBS:-2}

if [[ -f $STAMP && -x $BIN/vc-scheduler && -x $BIN/vc-controller-manager && -f $CRD/scheduling.volcano.sh_queues.yaml ]]; then
  exit 0
fi
command -v go >/dev/null || { echo "volcano-bins: go is not installed (need Go >= 1.24)" >&2; exit 1; }
mkdir -p "$BIN" "$WRAP" "$CRD"

json=$(go mod download -json "volcano.sh/volcano@$V") || {
  echo "volcano-bins: the Go module proxy refused volcano.sh/volcano@$V" >&2; exit 1; }
dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' <<<"$json")
gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p' <<<"$json")
go mod download "volcano.sh/apis@$APIS" || {
  echo "volcano-bins: the Go module proxy refused volcano.sh/apis@$APIS" >&2; exit 1; }

{
  echo "module gangstorm.local/volcano-build"
  echo
  echo "go $(sed -n 's/^go \(.*\)$/\1/p' "$gomod")"
  echo
  echo "require volcano.sh/volcano $V"
  echo
  # Volcano's replace lines, single-line and block form, except its local staging path.
  awk '/^replace \(/{inblk=1; next} inblk && /^\)/{inblk=0; next}
       inblk && /=>/ {print "replace " $0; next} /^replace [^(]/{print}' "$gomod" \
    | grep -v 'volcano.sh/apis' | sed 's/^replace[[:space:]]*/replace /'
  echo "replace volcano.sh/apis => volcano.sh/apis $APIS"
} > "$WRAP/go.mod"
cat > "$WRAP/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
GO

cp "$dir"/config/crd/volcano/bases/*.yaml "$CRD/"
echo "volcano-bins: building vc-scheduler and vc-controller-manager $V with volcano.sh/apis $APIS (go build -p $JOBS) ..."
start=$(date +%s)
out=$(mktemp -d)
(cd "$WRAP" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -p "$JOBS" -trimpath -ldflags "-s -w" \
   -o "$out/" volcano.sh/volcano/cmd/scheduler volcano.sh/volcano/cmd/controller-manager)
mv "$out/scheduler" "$BIN/vc-scheduler"
mv "$out/controller-manager" "$BIN/vc-controller-manager"
rmdir "$out"
echo "volcano-bins: built in $(( $(date +%s) - start )) s into $BIN"
touch "$STAMP"
